"""Per-row top-k by radix select: four 8-bit histogram passes find the k-th largest key,
one more pass writes the winners in index order.

Floats become order-preserving uint32 keys (NaN lowest, -0.0 == +0.0), so the
threshold search is exact and ties go to the lower index by construction:
among the keys equal to the threshold, the first ``k - count_above`` in index
order are taken. Entries at ``j >= row_ends[r]`` are never candidates.
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
def select_topk_kernel(
    logits_ptr,
    logits_stride,
    row_ends_ptr,
    values_ptr,
    indices_ptr,
    width,
    k,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    row_end = tl.minimum(tl.load(row_ends_ptr + row).to(tl.int32), width)
    row_end = tl.maximum(row_end, 0)
    take = tl.minimum(k, row_end)
    base = logits_ptr + row * logits_stride
    offs = tl.arange(0, BLOCK)
    bins = tl.arange(0, 256)

    prefix = tl.zeros((), dtype=tl.uint32)
    remaining = take
    for p in tl.static_range(4):
        shift = 24 - 8 * p
        prefix_mask = (0xFFFFFFFF << (32 - 8 * p)) & 0xFFFFFFFF
        hist = tl.zeros((256,), dtype=tl.int32)
        for start in range(0, row_end, BLOCK):
            j = start + offs
            valid = j < row_end
            key = order_key(tl.load(base + j, mask=valid, other=0.0))
            counted = valid & ((key & prefix_mask) == prefix)
            digit = tl.where(counted, (key >> shift) & 255, 0).to(tl.int32)
            skipped = tl.sum((~counted).to(tl.int32), axis=0)
            hist += tl.histogram(digit, 256) - tl.where(bins == 0, skipped, 0)
        at_or_above = tl.sum(hist, axis=0) - tl.cumsum(hist, axis=0) + hist
        digit_k = tl.sum((at_or_above >= remaining).to(tl.int32), axis=0) - 1
        remaining -= tl.sum(tl.where(bins > digit_k, hist, 0), axis=0)
        prefix = prefix | (digit_k.to(tl.uint32) << shift)

    written = 0
    ties_seen = 0
    for start in range(0, row_end, BLOCK):
        j = start + offs
        valid = j < row_end
        x = tl.load(base + j, mask=valid, other=0.0)
        key = order_key(x)
        tie = valid & (key == prefix)
        tie_rank = ties_seen + tl.cumsum(tie.to(tl.int32), axis=0) - 1
        chosen = (valid & (key > prefix)) | (tie & (tie_rank < remaining))
        position = written + tl.cumsum(chosen.to(tl.int32), axis=0) - 1
        tl.store(values_ptr + row * k + position, x, mask=chosen)
        tl.store(indices_ptr + row * k + position, j, mask=chosen)
        written += tl.sum(chosen.to(tl.int32), axis=0)
        ties_seen += tl.sum(tie.to(tl.int32), axis=0)
    for start in range(take, k, BLOCK):
        j = start + offs
        tl.store(values_ptr + row * k + j, float("-inf"), mask=j < k)
        tl.store(indices_ptr + row * k + j, -1, mask=j < k)


def launch_select_topk(
    logits: torch.Tensor, row_ends: torch.Tensor, k: int, sorted: bool, **tuning
) -> tuple[torch.Tensor, torch.Tensor]:
    """``tuning`` (block, num_warps) is for benchmarks/topk_variants.py, not part of the API."""
    rows, width = logits.shape
    values = torch.empty((rows, k), dtype=torch.float32, device=logits.device)
    indices = torch.empty((rows, k), dtype=torch.int32, device=logits.device)
    if rows == 0:
        return values, indices
    if logits.stride(1) != 1:
        raise ValueError(f"logits: expected unit stride along keys, got strides {logits.stride()}")
    # On the GPU a whole row of up to 32768 logits is one block: each pass re-reads it from L2.
    block = min(triton.next_power_of_2(width), 32768) if logits.device.type == "cuda" else 256
    block = tuning.get("block", block)
    wrap_triton(select_topk_kernel)[(rows,)](
        logits, logits.stride(0), row_ends, values, indices, width, k, BLOCK=block,
        num_warps=tuning.get("num_warps", 32 if block >= 16384 else 16),
    )
    if sorted:
        values, indices = sort_selection(values, indices)
    return values, indices


def sort_selection(values: torch.Tensor, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Order a selection by value (descending, NaN last, -inf/-1 padding after it), then index."""
    # Winners come in index order; order them by value, ties by index.
    key = order_keys(values, indices.clamp_min(0), indices < 0)
    order = torch.argsort(key, dim=1, descending=True)
    return values.gather(1, order), indices.gather(1, order)
