"""Triton kernels. Imported lazily by ``fp4_inductor.ops`` so that Triton stays optional and the
interpreter switch (TRITON_INTERPRET=1) can be set before the first use."""
