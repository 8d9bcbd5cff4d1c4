"""Triton kernels. Imported lazily by ``fp4_inductor.ops`` so that Triton stays optional and the
interpreter switch (TRITON_INTERPRET=1) can be set before the first use."""

import functools
import re

import torch
import triton
import triton.language as tl
from torch._subclasses.fake_tensor import is_fake
from torch.library import wrap_triton
from triton.runtime.jit import JITFunction

# Triton's (major, minor), None for a version string that does not start with them (taken as new).
_VERSION = re.match(r"(\d+)\.(\d+)", triton.__version__)
TRITON_VERSION = None if _VERSION is None else (int(_VERSION.group(1)), int(_VERSION.group(2)))


def wrapped(kernel):
    """``torch.library.wrap_triton(kernel)`` for a launch that torch.compile can trace; a kernel of
    Triton's interpreter (TRITON_INTERPRET=1: not a JITFunction) as it is, which is what torch 2.13's
    wrap_triton returns for one, where torch 2.11's raises."""
    return wrap_triton(kernel) if isinstance(kernel, JITFunction) else kernel


@triton.jit
def narrow_end(end, width):
    """A row end loaded from ``row_ends`` as int32: an int64 one clamped to [0, width] first, so
    that an end past 2**31 (or below -2**31) does not wrap; an int32 one as loaded (the callers
    clamp it to the width where they need to, and int32 launches compile as before)."""
    if end.dtype == tl.int64:
        end = tl.minimum(tl.maximum(end, 0), width)
    return end.to(tl.int32)


@triton.jit
def row_bound(start, num_rows):
    """An entry of ``query_starts`` as int32 in [0, num_rows]: a request's rows start and end
    within the launch's rows whatever the entry says (a negative one would send its request's
    stores before ``out``; an int64 one past 2**31 would wrap when narrowed)."""
    return tl.minimum(tl.maximum(start, 0), num_rows).to(tl.int32)


def cdiv(a, b):
    """``ceil(a / b)`` for b > 0, of ints or SymInts (``triton.cdiv`` in host code costs a few
    microseconds per call through its constexpr wrapper)."""
    return (a + b - 1) // b


def next_power_of_2(n):
    """The smallest power of 2 >= n (0 for n <= 0), as ``triton.next_power_of_2``; a Python int
    without that function's host-call overhead, a SymInt through it."""
    if isinstance(n, int):
        return 1 << (n - 1).bit_length() if n > 0 else 0
    return triton.next_power_of_2(n)


@functools.lru_cache(maxsize=None)
def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of a CUDA/ROCm device (looked up once per device: the lookup
    costs a few microseconds of host time per launch)."""
    return torch.cuda.get_device_properties(device).multi_processor_count


@functools.lru_cache(maxsize=None)
def capability_major(device: torch.device) -> int:
    """The major compute capability of a CUDA device (9 for sm_90), looked up once per device
    (as ``sm_count``)."""
    return torch.cuda.get_device_capability(device)[0]


def rows_aligned(t: torch.Tensor, alignment: int) -> bool:
    """Whether every row (dim 0) of ``t`` starts at a multiple of ``alignment`` bytes: its row
    stride and storage offset in bytes, and for a real tensor its address. While tracing (fake
    or functional tensors) there is no address: the storage is taken as torch allocates it (at
    least 16-byte aligned), and offset and stride decide."""
    size = t.element_size()
    if (t.stride(0) * size) % alignment or (t.storage_offset() * size) % alignment:
        return False
    return is_fake(t) or t.data_ptr() % alignment == 0
