"""FP4 quantization kernels: keys straight into merged cache pages, and queries.

Both use ``fp4_groups``, the bit-exact twin of ``reference.quantize_fp4``: the
scale byte comes from the bits of amax (no log2), the codes from counting
thresholds, so the interpreter, the GPU and the reference agree to the bit.
Rows are loaded whole (contiguous, vectorized) and split in registers into the
even and odd elements of each group, so each packed byte is ``even | odd << 4``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.library import wrap_triton

from .. import formats as F


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
    """Rows of 128 elements at ``ptr + row_offsets`` [R] -> (even, odd) float32 [R, 4, 16]."""
    x = load_float(ptr, row_offsets[:, None] + tl.arange(0, 128)[None, :] * element_stride, mask[:, None], IS_BF16)
    return tl.split(tl.reshape(x, (x.shape[0], 4, 16, 2)))


@triton.jit
def _e2m1_code(y):
    """Nearest E2M1 code of ``y`` (|y| <= 6), ties to even, with the sign of ``y`` in bit 3.

    Below 1 the E2M1 step is 0.5: round 2|y| to an integer (the float add rounds to
    nearest even). From 1 up, E2M1 is a float with one mantissa bit: round the float32
    mantissa to one bit, nearest even, and read (exponent, bit) as the code. Both give
    exactly what the reference's threshold count gives.
    """
    a = tl.abs(y)
    small = ((a * 2.0 + 12582912.0) - 12582912.0).to(tl.int32)  # 1.5 * 2**23 forces integer rounding
    bits = a.to(tl.int32, bitcast=True)
    rounded = (bits + 0x1FFFFF + ((bits >> 22) & 1)) >> 22  # (biased exponent << 1) | mantissa bit
    code = tl.where(a < 1.0, small, tl.minimum(rounded - 252, 7))
    return code | ((y.to(tl.int32, bitcast=True) < 0).to(tl.int32) << 3)


@triton.jit
def fp4_groups(even, odd):
    """even, odd: float32 [rows, groups, 16] (elements 2i and 2i+1 of each 32-element group).

    Returns (payload int32 [rows, groups, 16] holding byte values, scale int32 [rows, groups]).
    """
    even_bits = even.to(tl.int32, bitcast=True)
    odd_bits = odd.to(tl.int32, bitcast=True)
    nonfinite = (((even_bits >> 23) & 0xFF) == 0xFF).to(tl.int32) + (((odd_bits >> 23) & 0xFF) == 0xFF).to(tl.int32)
    finite = tl.max(nonfinite, axis=2) == 0
    amax = tl.maximum(tl.max(tl.abs(even), axis=2), tl.max(tl.abs(odd), axis=2))
    amax = tl.where(finite, tl.maximum(amax, 7.52316384526264e-37), 1.0)  # floor 2**-120
    amax_bits = amax.to(tl.int32, bitcast=True)
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
):
    row = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    slot = tl.load(slots_ptr + row, mask=row < n, other=-1).to(tl.int64)
    ok = (slot >= 0) & (slot < capacity)
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
    even, odd = load_groups(q_ptr, r * stride_r + heads * stride_h, stride_e, heads < HEADS, IS_BF16)
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


def launch_store_keys(keys: torch.Tensor, cache: torch.Tensor, slots: torch.Tensor, **tuning) -> None:
    n = keys.shape[0]
    if n == 0 or cache.shape[0] == 0:
        return
    source, is_bf16 = _float_source(keys)
    block = tuning.get("block", 16)
    wrap_triton(store_keys_kernel)[(triton.cdiv(n, block),)](
        source, keys.stride(0), keys.stride(1), slots, cache, cache.stride(0), n, cache.shape[0] * F.PAGE_TOKENS,
        IS_BF16=is_bf16, BLOCK_T=block, num_warps=tuning.get("num_warps", 2),
    )


def launch_quantize_queries(q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    rows, heads = q.shape[:2]
    payload = torch.empty((rows, heads, F.PAYLOAD_BYTES), dtype=torch.uint8, device=q.device)
    scales = torch.empty((rows, 1, F.GROUPS, F.QUERY_SCALE_LANES, F.QUERY_SCALE_SLOTS), dtype=torch.uint8, device=q.device)
    if rows == 0:
        return payload, scales
    source, is_bf16 = _float_source(q)
    wrap_triton(quantize_queries_kernel)[(rows,)](
        source, q.stride(0), q.stride(1), q.stride(2), payload, scales, HEADS=heads, IS_BF16=is_bf16, num_warps=4
    )
    return payload, scales
