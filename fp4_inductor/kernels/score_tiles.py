"""Where a tile of the scorer lives in memory: its page ids, its keys' scales and payload loaded
straight into the int8 dot operand's layout (the word-fed loop) or as bytes, and the addresses
and stores of its logits."""

import triton
import triton.language as tl

from . import TRITON_VERSION
from .ptx import st_f32


@triton.jit
def load_key_bytes(cache_ptr, page, page_stride, token, ok, ASM: tl.constexpr):
    """Payload of the keys at ``page`` [M] (page ids), ``token`` [M, 1] (slot in the page).

    GPU: the 64 bytes of each key in order, uint8 [M, 64] (twice). Interpreter: the bytes
    behind columns 4v + i of the ``a`` and ``b`` operands (byte 4v + i // 2 and 4v + 2 + i // 2),
    uint8 [M, 64]."""
    if ASM:
        col = tl.arange(0, 64)[None, :]
        x = tl.load((cache_ptr + page * page_stride)[:, None] + (col // 16) * 1024 + token * 16 + col % 16,
                    mask=ok, other=0)
        return x, x
    else:
        col = tl.arange(0, 64)[None, :]
        byte = (col // 4) * 4 + (col % 4) // 2
        base = (cache_ptr + page * page_stride)[:, None] + (byte // 16) * 1024 + token * 16 + byte % 16
        return tl.load(base, mask=ok, other=0), tl.load(base + 2, mask=ok, other=0)


# How the word-fed loads are arranged so that the compiled loads land in the int8 dot operand's
# layout, with no conversion through shared memory in the hot loop. Compiled for sm_90 (the
# tests in tests/test_prmt.py), Triton 3.6 does so for the arrangement [group, lane row, warp,
# row bit 3, repeat, word] and Triton 3.7 for [row bit 3, repeat, warp, lane row, group, word];
# each converts the other's through shared memory, 16 CTA barriers per tile.
GROUP_LAST = tl.constexpr(TRITON_VERSION is None or TRITON_VERSION >= (3, 7))


@triton.jit
def tile_page_ids(bt_row, block_table_page_stride, first, page_end, TILE_PAGES: tl.constexpr, WARPS: tl.constexpr):
    """Page ids of the tile's rows (block-table entries from ``first``, clamped to the share's
    last page ``page_end - 1``, so slots past the share read a page of the share itself: never
    stored, and never flagging the program for the exact pass), int64, shaped as ``tile_rows``
    with 1 for every dimension but warp and repeat. Zero-extended from 32 bits (a page id read
    is one of the cache's pages, below 2**32), as ``page_offset`` takes them."""
    _, rep, w, _, _ = tile_axes(TILE_PAGES, WARPS)
    index = tl.minimum(first + (rep * (16 * WARPS) + w * 16) // 64, page_end - 1)
    return tl.load(bt_row + index * block_table_page_stride).to(tl.uint32).to(tl.int64)


@triton.jit
def page_offset(page, stride):
    """int64 ``page * stride`` for page ids from ``tile_page_ids``. A stride below 2**31 (an int32
    argument, or a constexpr) is zero-extended from 32 bits like the ids: one 32 x 32 -> 64-bit
    multiply (IMAD.WIDE.U32) per address instead of a 64-bit one. sm_90, Triton 3.6: 268 instead
    of 273 instructions per tile at next_n=1, 678 instead of 684 per pair of tiles at next_n=2;
    H100, A/B (docs/benchmarks.md, stop 48): 104.0-104.8 against 105.1-107.5 us at 64 x 32768,
    next_n=2, 200.5-200.6 against 202.6 at next_n=4, the same at next_n=1. A larger stride
    comes as an int64 argument and keeps the 64-bit multiply (its low 32 bits alone would be
    wrong from 2**32 on). tl.cast, not ``.to``: Triton's launcher passes a stride of 1 (a
    one-page cache may have any) as a constexpr."""
    if (stride + tl.zeros((), tl.int32)).dtype == tl.int64:
        return page * tl.cast(stride, tl.int64)
    else:
        return page * tl.cast(stride, tl.uint32).to(tl.int64)


@triton.jit
def tile_keys(cache_ptr, page_stride, page, TILE_PAGES: tl.constexpr, WARPS: tl.constexpr):
    """Scale bytes int32 [M, 4] and payload words [M, 16] of the tile's keys, loaded so that
    Triton's coalescing puts them in the int8 dot operand's own layout (no conversion in the
    loop). Row r = repeat * 16 * WARPS + warp * 16 + row bit 3 * 8 + lane row holds token r % 64
    of page r // 64; word column w holds payload word w // 4 of group w % 4 (the hot loop's
    permuted K order). The loads are arranged as ``tile_axes`` says, with the word last."""
    scales = tile_scales(cache_ptr, page_stride, page, TILE_PAGES, WARPS)
    return scales, tile_words(cache_ptr, page_stride, page, TILE_PAGES, WARPS)


@triton.jit
def tile_axes(TILE_PAGES: tl.constexpr, WARPS: tl.constexpr):
    """(row bit 3, repeat, warp, lane row, group) of ``tile_keys``' load, each an arange along its
    own dimension of [group, lane row, warp, row bit 3, repeat, 1], or with ``GROUP_LAST`` of
    [row bit 3, repeat, warp, lane row, group, 1]."""
    REPS: tl.constexpr = 64 * TILE_PAGES // (16 * WARPS)
    warp = tl.arange(0, WARPS)[None, None, :, None, None, None]
    if GROUP_LAST:
        row_bit3 = tl.arange(0, 2)[:, None, None, None, None, None]
        rep = tl.arange(0, REPS)[None, :, None, None, None, None]
        lane_row = tl.arange(0, 8)[None, None, None, :, None, None]
        c = tl.arange(0, 4)[None, None, None, None, :, None]
    else:
        c = tl.arange(0, 4)[:, None, None, None, None, None]
        lane_row = tl.arange(0, 8)[None, :, None, None, None, None]
        row_bit3 = tl.arange(0, 2)[None, None, None, :, None, None]
        rep = tl.arange(0, REPS)[None, None, None, None, :, None]
    return row_bit3, rep, warp, lane_row, c


@triton.jit
def tile_rows(TILE_PAGES: tl.constexpr, WARPS: tl.constexpr):
    """Token and group of ``tile_keys``' load, arranged as ``tile_axes`` says."""
    row_bit3, rep, warp, lane_row, c = tile_axes(TILE_PAGES, WARPS)
    return (lane_row + warp * 16 + row_bit3 * 8 + rep * (16 * WARPS)) % 64, c


@triton.jit
def tile_scales(cache_ptr, page_stride, page, TILE_PAGES: tl.constexpr, WARPS: tl.constexpr):
    """The scale bytes of ``tile_keys``, int32 [M, 4]."""
    M: tl.constexpr = 64 * TILE_PAGES
    REPS: tl.constexpr = M // (16 * WARPS)
    token, c = tile_rows(TILE_PAGES, WARPS)
    scale_at = cache_ptr + page_offset(page, page_stride) + 4096 + (token % 16) * 4 + token // 16 + c * 64
    # To [repeat, warp, row bit 3, lane row, group].
    if GROUP_LAST:
        e5 = tl.permute(tl.load(tl.reshape(scale_at, (2, REPS, WARPS, 8, 4))), (1, 2, 0, 3, 4))
    else:
        e5 = tl.permute(tl.load(tl.reshape(scale_at, (4, 8, WARPS, 2, REPS))), (4, 2, 3, 1, 0))
    return tl.reshape(e5, (M, 4)).to(tl.int32)


@triton.jit
def tile_words(cache_ptr, page_stride, page, TILE_PAGES: tl.constexpr, WARPS: tl.constexpr):
    """The payload words of ``tile_keys``, int32 [M, 16]."""
    M: tl.constexpr = 64 * TILE_PAGES
    token, c = tile_rows(TILE_PAGES, WARPS)
    j4 = tl.arange(0, 4)[None, None, None, None, None, :]
    words = cache_ptr.to(tl.pointer_type(tl.int32)) + page_offset(page, page_stride // 4)
    # A row block reads each key's payload once, and evict_first marks it so (H200, Triton 3.6,
    # A/B at 64 x 32768: next_n=1 76.5-76.8 against 78.3-78.5 us, next_n=2 110.5-110.7 against
    # 114.8-115.1, next_n=4 205.0 against 209.3-210.8; the same at 1 x 8192 to 64 x 4096).
    x6 = tl.load(words + c * 256 + token * 4 + j4, eviction_policy="evict_first")
    # To [repeat, warp, row bit 3, lane row, word, group].
    if GROUP_LAST:
        x6 = tl.permute(x6, (1, 2, 0, 3, 5, 4))
    else:
        x6 = tl.permute(x6, (4, 2, 3, 1, 5, 0))
    return tl.reshape(x6, (M, 16))


@triton.jit
def store_tile(out_ptr, out_stride, out_rows, first_row, j, value, limit, ROWS: tl.constexpr, ASM: tl.constexpr):
    """Store a tile's logits [M, ROWS] at tokens ``j`` of rows ``first_row + r`` where
    j < limit[r]; with ASM from the accumulator's layout (``out_rows``: the rows' int64 addresses).
    Returns int32 zeros [M, ROWS] that the caller keeps live (``st_f32``)."""
    ok = j[:, None] < limit[None, :]
    if ASM:
        return st_f32(out_rows + j.to(tl.int64)[:, None] * 4, value, ok)
    else:
        tl.store(tile_addresses(out_ptr, out_stride, first_row, j, ROWS), value, mask=ok)
        return tl.zeros_like(ok.to(tl.int32))


@triton.jit
def tile_addresses(out_ptr, out_stride, first_row, j, ROWS: tl.constexpr):
    """Addresses [M, ROWS] of a tile's logits at tokens ``j`` [M] of rows ``first_row + r``."""
    rr = tl.arange(0, ROWS)
    return out_ptr + (first_row + rr).to(tl.int64)[None, :] * out_stride + j[:, None]


@triton.jit
def tile_outputs(out_ptr, out_stride, first_row, rows_here, row_ends, j):
    """``tile_addresses`` for rows with ``row_ends`` [ROWS], and where they may be written:
    j < row_ends[r], r < rows_here."""
    ROWS: tl.constexpr = row_ends.shape[0]
    rr = tl.arange(0, ROWS)
    out_at = tile_addresses(out_ptr, out_stride, first_row, j, ROWS)
    return out_at, (j[:, None] < row_ends[None, :]) & (rr < rows_here)[None, :]
