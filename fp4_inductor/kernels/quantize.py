"""FP4 quantization kernels: keys straight into merged cache pages, and queries.

Both use ``fp4_groups``, the bit-exact twin of ``reference.quantize_fp4``: the
scale byte comes from the bits of amax (one integer max finds amax and whether
the group is finite), the codes from one float add on an exponent-dependent
magic number (no float-to-int conversion), so the interpreter, the GPU and the
reference agree to the bit. bf16 keys with unit element stride and 4-byte aligned
rows are read as int32 words, two elements each: the low half is the even
element, the high half the odd one, and each packed byte is ``even | odd << 4``.
Other inputs are loaded whole and split in registers.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.fx.experimental.symbolic_shapes import guard_or_false

from .. import formats as F
from . import cdiv, rows_aligned, wrapped


@triton.jit
def load_float(ptr, offsets, mask, IS_BF16: tl.constexpr):
    """Load float32/float16 as float32; bfloat16 arrives as int16 bits and is widened exactly
    (the interpreter has no bf16 arithmetic)."""
    if IS_BF16:
        bits = tl.load(ptr + offsets, mask=mask, other=0).to(tl.int32)
        return (bits << 16).to(tl.float32, bitcast=True)
    else:
        return tl.load(ptr + offsets, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def load_groups(ptr, row_offsets, element_stride, mask, IS_BF16: tl.constexpr):
    """Rows of 128 elements at ``ptr + row_offsets`` [R] -> (even, odd) float32 [R, 4, 16]. The
    element offsets are int64: 127 element strides pass 2**31 from a stride of 2**31 / 127."""
    columns = tl.arange(0, 128).to(tl.int64)[None, :] * element_stride
    x = load_float(ptr, row_offsets[:, None] + columns, mask[:, None], IS_BF16)
    return tl.split(tl.reshape(x, (x.shape[0], 4, 16, 2)))


@triton.jit
def load_bf16_words(ptr, row_offsets, mask):
    """bfloat16 rows of 128 (unit element stride) read as 64 int32 words at ``ptr + row_offsets`` (in words)
    -> (even, odd) float32 [R, 4, 16]: the low half of each word is element 2i, the high half
    element 2i + 1, so the split costs one shift or mask per element and no shuffles."""
    w = tl.load(ptr + row_offsets[:, None, None] + tl.arange(0, 4)[None, :, None] * 16 + tl.arange(0, 16)[None, None, :],
                mask=mask[:, None, None], other=0)
    return (w << 16).to(tl.float32, bitcast=True), (w & -65536).to(tl.float32, bitcast=True)


@triton.jit
def _e2m1_code(y):
    """Nearest E2M1 code of ``y`` (finite, |y| < 2**100), ties to even, saturating at 6, with the
    sign of ``y`` in bit 3.

    The E2M1 grid steps by 0.5 below 2 and by 2**(E - 1) in [2**E, 2**(E + 1)) from there. With
    E = max(exponent(|y|), 0), the float M = 1.5 * 2**(E + 22) has that step as its ulp, so
    the float add |y| + M rounds |y| to the grid (nearest, ties to even: the even code is the
    even multiple of the step) and the difference of the bit patterns counts the steps q.
    The code is q + 2E (two grid steps per binade from 1 up). Exactly what the reference's
    threshold count gives (tests/test_formats.py checks every bf16 value and the float
    neighbours of every threshold).
    """
    bits = y.to(tl.int32, bitcast=True)
    e = tl.maximum(bits & 0x7F800000, 0x3F800000)
    magic = e + 0x0B400000  # (22 << 23) | 0x400000: 1.5 * 2**(E + 22)
    steps = (tl.abs(y) + magic.to(tl.float32, bitcast=True)).to(tl.int32, bitcast=True) - magic
    code = tl.minimum(steps + (e >> 22) - 254, 7)
    return code | ((bits >> 28) & 8)


@triton.jit
def fp4_groups(even, odd):
    """even, odd: float32 [rows, groups, 16] (elements 2i and 2i+1 of each 32-element group).

    Returns (payload int32 [rows, groups, 16] holding byte values, scale int32 [rows, groups]).
    """
    # The largest magnitude as bits: integer order is magnitude order, with Inf and NaN on top,
    # so one max finds amax and whether the group is finite.
    top = tl.max(tl.maximum(even.to(tl.int32, bitcast=True) & 0x7FFFFFFF, odd.to(tl.int32, bitcast=True) & 0x7FFFFFFF), axis=2)
    finite = top < 0x7F800000
    amax_bits = tl.where(finite, tl.maximum(top, 0x03800000), 0x3F800000)  # floor 2**-120
    scale = (amax_bits >> 23) - 2 + ((amax_bits & 0x7FFFFF) > 0x400000).to(tl.int32)
    scale = tl.minimum(tl.maximum(scale, 0), 254)
    inv_scale = ((254 - scale) << 23).to(tl.float32, bitcast=True)[:, :, None]
    payload = _e2m1_code(even * inv_scale) | (_e2m1_code(odd * inv_scale) << 4)
    payload = tl.where(finite[:, :, None], payload, 0)
    return payload, tl.where(finite, scale, 255)


@triton.jit
def store_keys_kernel(
    keys_ptr,
    key_stride,
    element_stride,
    slots_ptr,
    cache_ptr,
    page_stride,
    n,
    capacity,
    IS_BF16: tl.constexpr,
    BLOCK_T: tl.constexpr,
    WORDS: tl.constexpr,
):
    row = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    slot = tl.load(slots_ptr + row, mask=row < n, other=-1).to(tl.int64)
    ok = (slot >= 0) & (slot < capacity)
    if WORDS:
        # keys_ptr is the bf16 keys' int16 view, every row 4-byte aligned (the launcher checks).
        even, odd = load_bf16_words(keys_ptr.to(tl.pointer_type(tl.int32)), row.to(tl.int64) * (key_stride // 2), row < n)
    else:
        even, odd = load_groups(keys_ptr, row.to(tl.int64) * key_stride, element_stride, row < n, IS_BF16)
    payload, scale = fp4_groups(even, odd)
    g = tl.arange(0, 4)[None, :, None]
    i = tl.arange(0, 16)[None, None, :]
    page = slot // 64
    token = slot % 64
    section = cache_ptr + page * page_stride
    tl.store((section + token * 16)[:, None, None] + g * 1024 + i, payload.to(tl.uint8), mask=ok[:, None, None])
    scale_at = 4096 + (token % 16) * 4 + token // 16
    tl.store((section + scale_at)[:, None] + tl.arange(0, 4)[None, :] * 64, scale.to(tl.uint8), mask=ok[:, None])


@triton.jit
def quantize_queries_kernel(
    q_ptr, stride_r, stride_h, stride_e, payload_ptr, scales_ptr, HEADS: tl.constexpr, IS_BF16: tl.constexpr
):
    # One program per row; 64 virtual heads so that the unused scale slots get 127.
    r = tl.program_id(0).to(tl.int64)
    heads = tl.arange(0, 64)
    even, odd = load_groups(q_ptr, r * stride_r + heads.to(tl.int64) * stride_h, stride_e, heads < HEADS, IS_BF16)
    payload, scale = fp4_groups(even, odd)
    h = heads[:, None, None]
    g = tl.arange(0, 4)[None, :, None]
    i = tl.arange(0, 16)[None, None, :]
    mask = h < HEADS
    tl.store(payload_ptr + r * (HEADS * 64) + h * 64 + g * 16 + i, payload.to(tl.uint8), mask=mask)
    h2 = tl.arange(0, 64)[:, None]
    g2 = tl.arange(0, 4)[None, :]
    scale = tl.where(h2 < HEADS, scale, 127)
    tl.store(scales_ptr + r * 256 + g2 * 64 + (h2 % 16) * 4 + h2 // 16, scale.to(tl.uint8))


def _float_source(x: torch.Tensor) -> tuple[torch.Tensor, bool]:
    if x.dtype == torch.bfloat16:
        return x.view(torch.int16), True
    return x, False


def _word_aligned(keys: torch.Tensor) -> bool:
    """Whether 2-byte ``keys`` can be read as int32 words: unit element stride, every row
    starting at a 4-byte boundary."""
    return keys.stride(1) == 1 and rows_aligned(keys, 4)


def launch_store_keys(keys: torch.Tensor, cache: torch.Tensor, slots: torch.Tensor, **tuning) -> None:
    # The kernel reads slot i at slots_ptr + i: any strides (a slice, an expanded tensor) become
    # a copy here, a no-op for the usual contiguous slots.
    slots = slots.contiguous()
    n = keys.shape[0]
    # An unbacked n of 0 at run time launches an empty grid, which Triton skips.
    if guard_or_false(n == 0) or guard_or_false(cache.shape[0] == 0):
        return
    source, is_bf16 = _float_source(keys)
    # bf16 rows whose every row starts 4-byte aligned are read as int32 words (two elements
    # each): no element split in registers. The kernel reinterprets the int16 pointer itself:
    # a dtype view here would make Inductor copy the keys to a contiguous buffer and back.
    words = is_bf16 and _word_aligned(keys)
    block = tuning.get("block", 16)
    wrapped(store_keys_kernel)[(cdiv(n, block),)](
        source, keys.stride(0), keys.stride(1), slots, cache, cache.stride(0), n, cache.shape[0] * F.PAGE_TOKENS,
        IS_BF16=is_bf16, BLOCK_T=block, WORDS=words, num_warps=tuning.get("num_warps", 1),
    )


def launch_quantize_queries(q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    rows, heads = q.shape[:2]
    payload = torch.empty((rows, heads, F.PAYLOAD_BYTES), dtype=torch.uint8, device=q.device)
    scales = torch.empty((rows, 1, F.GROUPS, F.QUERY_SCALE_LANES, F.QUERY_SCALE_SLOTS), dtype=torch.uint8, device=q.device)
    if guard_or_false(rows == 0):  # an unbacked 0 at run time: an empty grid, which Triton skips
        return payload, scales
    source, is_bf16 = _float_source(q)
    wrapped(quantize_queries_kernel)[(rows,)](
        source, q.stride(0), q.stride(1), q.stride(2), payload, scales, HEADS=heads, IS_BF16=is_bf16, num_warps=4
    )
    return payload, scales
