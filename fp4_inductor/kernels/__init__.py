"""Triton kernels. Imported lazily by ``fp4_inductor.ops`` so that Triton stays optional and the
interpreter switch (TRITON_INTERPRET=1) can be set before the first use."""

import torch


def rows_aligned(t: torch.Tensor, alignment: int) -> bool:
    """Whether every row (dim 0) of ``t`` starts at a multiple of ``alignment`` bytes: its row
    stride and storage offset in bytes, and for a real tensor its address. While tracing (fake
    or functional tensors) there is no address: the storage is taken as torch allocates it (at
    least 16-byte aligned), and offset and stride decide."""
    size = t.element_size()
    if (t.stride(0) * size) % alignment or (t.storage_offset() * size) % alignment:
        return False
    from torch._subclasses.fake_tensor import is_fake

    return is_fake(t) or t.data_ptr() % alignment == 0
