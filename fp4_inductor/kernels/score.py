"""Paged FP4 indexer scoring with shared-key row groups.

One program scores one run of pages of one request for *all* of that
request's rows (up to ``ROWS``), so each key page is read once per request,
not once per verify row. Keys are the MMA's M side (a tile of 64 * TILE_PAGES
tokens), the request's rows x heads its N side; each of the four 32-element
groups is one K=32 dot whose exact E2M1 products are scaled by the key and
query group scales in float32.

E2M1 -> FP8 E4M3 is a bit shift: nibble ``s eem`` -> byte ``s 000 0eem 00``
has the value E2M1 * 2**-6 (both formats share the subnormal step), so the
GPU path converts with two masks and two shifts and the dot is exact. The
interpreter, which has no FP8, takes the same values through float16 bits.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.library import wrap_triton

from .. import formats as F


@triton.jit
def e2m1_operand(nibble, USE_FP8: tl.constexpr):
    """E2M1 nibble (int32) -> its value * 2**-6, as FP8 E4M3 (GPU) or float32 (interpreter)."""
    if USE_FP8:
        byte = ((nibble & 8) << 4) | ((nibble & 7) << 2)
        return byte.to(tl.uint8).to(tl.float8e4nv, bitcast=True)
    else:
        half = ((nibble & 8) << 12) | ((nibble & 7) << 9)  # E2M1 * 2**-14 in float16 bits
        return half.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32) * 256.0


@triton.jit
def scale_value(byte):
    """UE8M0 byte -> 2**(b - 127 + 6) (the 2**6 undoes the operand's 2**-6); 255 -> NaN."""
    value = ((byte + 6) << 23).to(tl.float32, bitcast=True)
    return tl.where(byte == 255, float("nan"), value)


@triton.jit
def group_operand(packed, USE_FP8: tl.constexpr):
    """packed: int32 [X, 16] bytes of one group -> [X, 32] operand in element order."""
    both = tl.join(e2m1_operand(packed & 15, USE_FP8), e2m1_operand(packed >> 4, USE_FP8))
    return tl.reshape(both, (packed.shape[0], 32))


@triton.jit
def score_paged_kernel(
    out_ptr,
    out_stride,
    q_payload_ptr,
    q_scales_ptr,
    cache_ptr,
    page_stride,
    weights_ptr,
    block_table_ptr,
    block_table_stride,
    query_starts_ptr,
    row_ends_ptr,
    pages_per_split,
    HEADS: tl.constexpr,
    ROWS: tl.constexpr,
    TILE_PAGES: tl.constexpr,
    USE_FP8: tl.constexpr,
):
    request = tl.program_id(0)
    split = tl.program_id(1)
    row_block = tl.program_id(2)
    N: tl.constexpr = ROWS * HEADS
    M: tl.constexpr = 64 * TILE_PAGES

    first_row = tl.load(query_starts_ptr + request) + row_block * ROWS
    rows_here = tl.load(query_starts_ptr + request + 1) - first_row
    rr = tl.arange(0, ROWS)
    row_ends = tl.load(row_ends_ptr + first_row + rr, mask=rr < rows_here, other=0)
    # Only the pages that the longest row of this block needs are read.
    pages_needed = tl.cdiv(tl.max(row_ends, axis=0), 64)
    page_begin = split * pages_per_split
    page_end = tl.minimum(page_begin + pages_per_split, pages_needed)
    if page_begin < page_end:
        # The query block: N columns (row, head), four groups of 32, loaded once.
        c = tl.arange(0, N)
        c_row = first_row + c // HEADS
        c_head = c % HEADS
        c_ok = (c // HEADS) < rows_here
        q_base = q_payload_ptr + c_row.to(tl.int64)[:, None] * (HEADS * 64) + c_head[:, None] * 64
        b16 = tl.arange(0, 16)[None, :]
        q0 = tl.trans(group_operand(tl.load(q_base + b16, mask=c_ok[:, None], other=0).to(tl.int32), USE_FP8))
        q1 = tl.trans(group_operand(tl.load(q_base + 16 + b16, mask=c_ok[:, None], other=0).to(tl.int32), USE_FP8))
        q2 = tl.trans(group_operand(tl.load(q_base + 32 + b16, mask=c_ok[:, None], other=0).to(tl.int32), USE_FP8))
        q3 = tl.trans(group_operand(tl.load(q_base + 48 + b16, mask=c_ok[:, None], other=0).to(tl.int32), USE_FP8))
        # Query scale of head h, group g at [r, 0, g, h % 16, h // 16].
        qs_base = q_scales_ptr + c_row.to(tl.int64) * 256 + (c_head % 16) * 4 + c_head // 16
        sq0 = scale_value(tl.load(qs_base, mask=c_ok, other=127).to(tl.int32))
        sq1 = scale_value(tl.load(qs_base + 64, mask=c_ok, other=127).to(tl.int32))
        sq2 = scale_value(tl.load(qs_base + 128, mask=c_ok, other=127).to(tl.int32))
        sq3 = scale_value(tl.load(qs_base + 192, mask=c_ok, other=127).to(tl.int32))
        w = tl.load(weights_ptr + c_row.to(tl.int64) * HEADS + c_head, mask=c_ok, other=0.0)

        m = tl.arange(0, M)
        token = m % 64
        scale_at = 4096 + (token % 16) * 4 + token // 16
        payload_at = token[:, None] * 16 + b16
        bt_row = block_table_ptr + request.to(tl.int64) * block_table_stride
        for tile in range(page_begin, page_end, TILE_PAGES):
            page_index = tile + m // 64
            page = tl.load(bt_row + page_index, mask=page_index < page_end, other=0).to(tl.int64)
            section = cache_ptr + page[:, None] * page_stride
            k_ok = (page_index < page_end)[:, None]
            k0 = group_operand(tl.load(section + payload_at, mask=k_ok, other=0).to(tl.int32), USE_FP8)
            k1 = group_operand(tl.load(section + 1024 + payload_at, mask=k_ok, other=0).to(tl.int32), USE_FP8)
            k2 = group_operand(tl.load(section + 2048 + payload_at, mask=k_ok, other=0).to(tl.int32), USE_FP8)
            k3 = group_operand(tl.load(section + 3072 + payload_at, mask=k_ok, other=0).to(tl.int32), USE_FP8)
            scale_row = cache_ptr + page * page_stride + scale_at
            sk0 = scale_value(tl.load(scale_row, mask=page_index < page_end, other=127).to(tl.int32))
            sk1 = scale_value(tl.load(scale_row + 64, mask=page_index < page_end, other=127).to(tl.int32))
            sk2 = scale_value(tl.load(scale_row + 128, mask=page_index < page_end, other=127).to(tl.int32))
            sk3 = scale_value(tl.load(scale_row + 192, mask=page_index < page_end, other=127).to(tl.int32))

            s = tl.dot(k0, q0, out_dtype=tl.float32) * (sk0[:, None] * sq0[None, :])
            s += tl.dot(k1, q1, out_dtype=tl.float32) * (sk1[:, None] * sq1[None, :])
            s += tl.dot(k2, q2, out_dtype=tl.float32) * (sk2[:, None] * sq2[None, :])
            s += tl.dot(k3, q3, out_dtype=tl.float32) * (sk3[:, None] * sq3[None, :])
            weighted = tl.maximum(s, 0.0) * w[None, :]
            logits = tl.sum(tl.reshape(weighted, (M, ROWS, HEADS)), axis=2)  # [M, ROWS]

            j = tile * 64 + m
            out_at = out_ptr + (first_row + rr).to(tl.int64)[None, :] * out_stride + j[:, None]
            tl.store(out_at, logits, mask=(j[:, None] < row_ends[None, :]) & (rr < rows_here)[None, :])


def split_plan(requests: int, pages_per_request: int, row_blocks: int, device: torch.device) -> int:
    """Pages per program: enough programs to fill the GPU at small batch (from shapes only)."""
    if device.type == "cuda":
        sms = torch.cuda.get_device_properties(device).multi_processor_count
    else:
        sms = 4
    splits = max(1, min(pages_per_request, triton.cdiv(4 * sms, max(1, requests * row_blocks))))
    return max(1, triton.cdiv(pages_per_request, splits))


def launch_score_paged(
    out, q_payload, q_scales, cache, weights, block_table, query_starts, row_ends, max_query_len
) -> None:
    rows, heads = q_payload.shape[:2]
    requests, pages_per_request = block_table.shape
    if rows == 0 or requests == 0 or pages_per_request == 0:
        return
    for name, t in (("query[0] (payload)", q_payload), ("query[1] (scales)", q_scales), ("weights", weights)):
        if not t.is_contiguous():
            raise ValueError(f"{name}: the Triton scorer expects a contiguous tensor, got strides {t.stride()}")
    if block_table.stride(1) != 1:
        raise ValueError(f"block_table: expected unit stride along pages, got strides {block_table.stride()}")
    # Rows of a request are scored together up to 256 columns (rows x heads);
    # longer verify groups are split into row blocks, each still sharing its key reads.
    rows_per_block = min(triton.next_power_of_2(max_query_len), max(1, 256 // heads))
    row_blocks = triton.cdiv(max_query_len, rows_per_block)
    use_fp8 = cache.device.type == "cuda"
    tile_pages = 1
    pages_per_split = split_plan(requests, pages_per_request, row_blocks, cache.device)
    pages_per_split = triton.cdiv(pages_per_split, tile_pages) * tile_pages
    grid = (requests, triton.cdiv(pages_per_request, pages_per_split), row_blocks)
    wrap_triton(score_paged_kernel)[grid](
        out, out.stride(0), q_payload, q_scales, cache, cache.stride(0), weights,
        block_table, block_table.stride(0), query_starts, row_ends, pages_per_split,
        HEADS=heads, ROWS=rows_per_block, TILE_PAGES=tile_pages, USE_FP8=use_fp8,
        num_warps=4 if rows_per_block * heads <= 64 else 8,
    )
