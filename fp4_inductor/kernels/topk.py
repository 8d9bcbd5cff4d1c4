"""Per-row top-k by an exact threshold search, in one or two passes.

Floats become order-preserving uint32 keys (NaN lowest, -0.0 == +0.0). A
program holds one segment of a row in registers and finds the k-th largest key
bit by bit (32 block-wide counts, no histogram); the keys above it and the
lowest-index keys equal to it are written in index order.

Long rows are split: pass 1 selects each segment's top-k, pass 2 the top-k of
those candidates. That is exact: a member of the row's top-k is in its
segment's top-k (ties included, since both passes break ties toward the lower
index and candidates stay in index order). Entries at ``j >= row_ends[r]`` are
never candidates.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.library import wrap_triton

from ..reference import order_keys


@triton.jit
def order_key(x):
    """float32 -> uint32 whose unsigned order is the float order; NaN -> 0 (lowest)."""
    bits = tl.where(x == 0.0, 0, x.to(tl.int32, bitcast=True))
    key = tl.where(bits < 0, ~bits, bits | (-2147483648)).to(tl.uint32, bitcast=True)
    return tl.where(x != x, 0, key).to(tl.uint32)


@triton.jit
def topk_segment_kernel(
    values_ptr,
    values_stride,
    indices_ptr,
    indices_stride,
    row_ends_ptr,
    segment_len,
    k,
    out_values_ptr,
    out_indices_ptr,
    out_stride,
    CANDIDATES: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """Top-k of segment ``program_id(1)`` of row ``program_id(0)``, written at
    ``out + row * out_stride + segment * k`` (-inf / -1 where it has fewer than k).

    CANDIDATES=False: the input is logits, valid where ``j < row_ends[row]``.
    CANDIDATES=True: the input is a previous pass's (values, indices), valid where index >= 0.
    """
    row = tl.program_id(0).to(tl.int64)
    segment = tl.program_id(1)
    offs = tl.arange(0, BLOCK)
    j = segment * segment_len + offs
    in_segment = offs < segment_len
    if CANDIDATES:
        index = tl.load(indices_ptr + row * indices_stride + j, mask=in_segment, other=-1)
        valid = index >= 0
    else:
        row_end = tl.load(row_ends_ptr + row).to(tl.int32)
        valid = in_segment & (j < row_end)
        index = j
    x = tl.load(values_ptr + row * values_stride + j, mask=valid, other=0.0)
    key = order_key(x)
    count = tl.sum(valid.to(tl.int32), axis=0)
    take = tl.minimum(count, k)

    # The largest threshold t with #{key >= t} >= take, one bit at a time.
    threshold = tl.zeros((), dtype=tl.uint32)
    for bit in range(31, -1, -1):
        candidate = threshold | (tl.full((), 1, tl.uint32) << bit)
        above = tl.sum((valid & (key >= candidate)).to(tl.int32), axis=0)
        threshold = tl.where(above >= take, candidate, threshold)

    above = valid & (key > threshold)
    tie = valid & (key == threshold)
    ties_needed = take - tl.sum(above.to(tl.int32), axis=0)
    chosen = above | (tie & (tl.cumsum(tie.to(tl.int32), axis=0) <= ties_needed))
    chosen = chosen & (take > 0)
    position = tl.cumsum(chosen.to(tl.int32), axis=0) - 1
    out = row * out_stride + segment * k
    tl.store(out_values_ptr + out + position, x, mask=chosen)
    tl.store(out_indices_ptr + out + position, index, mask=chosen)
    for start in range(take, k, BLOCK):
        pad = start + offs
        tl.store(out_values_ptr + out + pad, float("-inf"), mask=pad < k)
        tl.store(out_indices_ptr + out + pad, -1, mask=pad < k)


def launch_select_topk(
    logits: torch.Tensor, row_ends: torch.Tensor, k: int, sorted: bool, **tuning
) -> tuple[torch.Tensor, torch.Tensor]:
    """``tuning`` (segment, num_warps) is for benchmarks/kernel_variants.py, not part of the API."""
    rows, width = logits.shape
    device = logits.device
    values = torch.empty((rows, k), dtype=torch.float32, device=device)
    indices = torch.empty((rows, k), dtype=torch.int32, device=device)
    if rows == 0:
        return values, indices
    if logits.stride(1) != 1:
        raise ValueError(f"logits: expected unit stride along keys, got strides {logits.stride()}")
    gpu = device.type == "cuda"
    # A segment lives in registers: up to 16 elements per thread at 32 warps.
    segment = tuning.get("segment", 16384 if gpu else 256)
    segment = max(segment, triton.next_power_of_2(k))
    num_warps = tuning.get("num_warps", 16 if gpu else 4)
    if width <= segment:
        block = triton.next_power_of_2(max(width, 1))
        wrap_triton(topk_segment_kernel)[(rows, 1)](
            logits, logits.stride(0), logits, 0, row_ends, width, k, values, indices, k,
            CANDIDATES=False, BLOCK=block, num_warps=num_warps,
        )
    else:
        segments = triton.cdiv(width, segment)
        cand_values = torch.empty((rows, segments * k), dtype=torch.float32, device=device)
        cand_indices = torch.empty((rows, segments * k), dtype=torch.int32, device=device)
        wrap_triton(topk_segment_kernel)[(rows, segments)](
            logits, logits.stride(0), logits, 0, row_ends, segment, k, cand_values, cand_indices, segments * k,
            CANDIDATES=False, BLOCK=segment, num_warps=num_warps,
        )
        wrap_triton(topk_segment_kernel)[(rows, 1)](
            cand_values, segments * k, cand_indices, segments * k, row_ends, segments * k, k, values, indices, k,
            CANDIDATES=True, BLOCK=triton.next_power_of_2(segments * k), num_warps=num_warps,
        )
    if sorted:
        values, indices = sort_selection(values, indices)
    return values, indices


def sort_selection(values: torch.Tensor, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Order a selection by value (descending, NaN last, -inf/-1 padding after it), then index."""
    key = order_keys(values, indices.clamp_min(0), indices < 0)
    order = torch.argsort(key, dim=1, descending=True)
    return values.gather(1, order), indices.gather(1, order)
