"""The scorer's kernel: the in-kernel schedule (each program's share of all requests' pages) and,
per request, the query block and the loop over its tiles in one of three modes (``score.py``
says which launches take which)."""

import triton
import triton.language as tl

from . import narrow_end, row_bound
from .ptx import (PINGPONG_1, PINGPONG_8, PINGPONG_32, PINGPONG_FIRST, PINGPONG_LAST, PINGPONG_SIGNAL, PINGPONG_TRITON,
                  PINGPONG_WAIT, pingpong)
from .score_math import (FOLD_LIMIT, exact_tile, float_query_operands, fold_classes, folded_logits, key_dot,
                         key_operands, power_of_two, query_operands, store_exact_logits, word_operands)
from .score_tiles import load_key_bytes, store_tile, tile_keys, tile_outputs, tile_page_ids
# WGMMA_WARPS: the warps the wgmma pass takes (the launcher reads them: score.wgmma_warps).
from .score_wgmma import PASS_WARPS as WGMMA_WARPS, wgmma_request

SCHEDULE_CHUNK = 128  # the schedule's step (requests per step) where score.schedule_chunk knows no better
# The word-fed exact pass's scan: steps (of 4 * WARPS pages) per group, a bit each in an int32.
SCAN_STEPS = tl.constexpr(32)
# The schedule reads a request's row ends this many at a time (one load of up to 4 rows instead
# of a chain of one load per row: speculative verify requests have 1-4 rows).
ROW_LOADS = tl.constexpr(4)


@triton.jit
def score_request(
    request, share_begin, share_end, fewest,
    out_ptr, out_stride, q_payload_ptr, q_scales_ptr, cache_ptr, page_stride,
    weights_ptr, weights_stride, weights_head_stride,
    block_table_ptr, block_table_stride, block_table_page_stride, query_starts_ptr, row_ends_ptr, width, num_rows,
    HEADS: tl.constexpr, ROWS: tl.constexpr, TILE_PAGES: tl.constexpr, ASM: tl.constexpr, QUERY_FLOAT: tl.constexpr,
    DOT_DTYPE: tl.constexpr, MODE: tl.constexpr, WORDS: tl.constexpr, WARPS: tl.constexpr, PAIRS: tl.constexpr,
    WGMMA: tl.constexpr,
):
    """Pages [share_begin, share_end) of ``request`` for all of its rows (its row blocks from
    program_id(1) on, in steps of num_programs(1)); returns ``fewest`` (MODE 1), updated. WGMMA
    (0 or 1, MODE 1 only): the hot pass on wgmmas in inline PTX (``score_wgmma``)."""
    N: tl.constexpr = ROWS * HEADS
    M: tl.constexpr = 64 * TILE_PAGES
    # Rows lie within the launch's, whatever query_starts says. (The loads written out here, in
    # request_units and in the kernel's per-request loop: with one @triton.jit helper taking the
    # pointer, Inductor's analysis (torch 2.13) reports query_starts and row_ends as written.)
    request_start = row_bound(tl.load(query_starts_ptr + request), num_rows)
    request_rows = row_bound(tl.load(query_starts_ptr + request + 1), num_rows) - request_start
    # Row blocks beyond the launch's (sized from max_query_len) are taken in turn by the
    # same programs: the hint sets the launch shape, never which rows get scored.
    for row_block in range(tl.program_id(1), tl.cdiv(request_rows, ROWS), tl.num_programs(1)):
        first_row = request_start + row_block * ROWS
        rows_here = request_rows - row_block * ROWS
        rr = tl.arange(0, ROWS)
        # A row's keys end at the block table's width (a longer row_ends reads and writes no further).
        row_ends = tl.minimum(tl.load(row_ends_ptr + first_row + rr, mask=rr < rows_here, other=0), width)
        # Only the pages that the longest row of this block needs are read. In int32 (narrow_end:
        # an int64 end clamped into [0, width] first): an int64 page_end made the ping-pong's
        # loop-carried ``fewest`` int64, which does not compile.
        pages_needed = tl.cdiv(narrow_end(tl.max(row_ends, axis=0), width), 64)
        page_begin = share_begin
        page_end = tl.minimum(share_end, pages_needed)
        if WGMMA != 0 and page_begin < page_end:
            tl.static_assert(MODE == 1 and TILE_PAGES == 1 and HEADS == 64,
                             "the wgmma hot pass: MODE 1, a page per tile, 64 heads (its warps: wgmma_request)")
            fewest = wgmma_request(
                fewest, out_ptr, out_stride, q_payload_ptr, q_scales_ptr, cache_ptr, page_stride, weights_ptr,
                weights_stride, weights_head_stride, block_table_ptr + request.to(tl.int64) * block_table_stride,
                block_table_page_stride, first_row, rows_here, row_ends, page_begin, page_end, ROWS, WARPS)
        if WGMMA == 0 and page_begin < page_end:
            bt_row = block_table_ptr + request.to(tl.int64) * block_table_stride
            # The 16-warp hot loop's first tile (page ids, then keys) is asked for before the query
            # block, so that its loads are in flight while the query block's are (H200, next_n=1:
            # 80.3 against 81.1 us at 64 x 32768, 8.8 against 9.1 at 1 x 32768). Not in the two-row
            # kernel: it would hold the keys across the query block at 254 registers (a fifth
            # slower, measured on an earlier tree).
            FIRST_TILE_EARLY: tl.constexpr = MODE == 1 and WORDS and WARPS == 16
            if FIRST_TILE_EARLY:
                first_exp, first_x = tile_keys(cache_ptr, page_stride, tile_page_ids(
                    bt_row, block_table_page_stride, page_begin, page_end, TILE_PAGES, WARPS), TILE_PAGES, WARPS)
            # The query block: N columns (row, head), loaded and converted once.
            c = tl.arange(0, N)
            c_row = first_row + c // HEADS
            c_head = c % HEADS
            c_ok = (c // HEADS) < rows_here
            g4 = tl.arange(0, 4)[None, :]
            w = tl.load(weights_ptr + c_row.to(tl.int64) * weights_stride + c_head * weights_head_stride, mask=c_ok, other=0.0)
            if QUERY_FLOAT:
                # Unquantized queries [rows, H, 128]: no query scales (2**0 everywhere).
                q_base = q_payload_ptr + c_row.to(tl.int64) * (HEADS * 128) + c_head * 128
                qa, qb = float_query_operands(q_base, c_ok, DOT_DTYPE)
                qa_raw, qb_raw = qa, qb
                q_exp = tl.zeros((N, 4), dtype=tl.int32) + 127
                query_folds = True
                # key operands are 2 * value << fold: 2**(k_max - 127 - 3 - 1) per key.
                w_folded = w
            else:
                q_base = q_payload_ptr + c_row.to(tl.int64) * (HEADS * 64) + c_head * 64
                # Query scale of head h, group g at [r, 0, g, h % 16, h // 16].
                q_scale_at = q_scales_ptr + c_row.to(tl.int64)[:, None] * 256 + g4 * 64 + ((c_head % 16) * 4 + c_head // 16)[:, None]
                q_exp = tl.load(q_scale_at, mask=c_ok[:, None], other=127).to(tl.int32)  # [N, 4]
                q_max = tl.max(q_exp, axis=1)
                q_fold = FOLD_LIMIT - (q_max[:, None] - q_exp)
                query_folds = tl.min(tl.min(q_fold, axis=1), axis=0) >= 0
                qa, qb = query_operands(q_base, c_ok, tl.maximum(q_fold, 0), WORDS)
                qa_raw, qb_raw = query_operands(q_base, c_ok, tl.zeros_like(q_exp), WORDS)
                w_folded = w * power_of_two(q_max, 0.0625)
            w_folded = tl.where(c_ok, w_folded, 0.0)
            if MODE == 1:
                fewest = tl.where(query_folds, fewest, -1)  # a query that does not fold: all exact

            m = tl.arange(0, M)
            token = (m % 64)[:, None]
            scale_at = (4096 + (m % 64 % 16) * 4 + (m % 64) // 16)[:, None] + g4 * 64
            if MODE == 2 and WORDS:
                # The exact pass over word-fed tiles: a tile whose keys all fold was scored by the
                # hot pass; any other takes one dot per class of its keys' group scales
                # (fold_classes), or, for a query that does not fold, one per group (exact_tile).
                # The share is scanned in groups of SCAN_STEPS steps of SCAN pages: first a bit
                # per page (a tile) that holds a key that does not fold, a step's page ids and
                # scale bytes each in one load, issued steps ahead; then only the marked tiles
                # load their keys, the next one's while this one is scored. (A walk of one tile
                # per step paid a round trip to memory per tile, so with a few such keys every
                # marked program walked its whole share. Scanning and rescoring in one loop, each
                # step waiting on its loads and each tile on its keys: 455 us against 398 at 64 x
                # 32768, next_n=1, with keys that do not fold in nearly every tile, 307 against
                # 273 with 1 % of keys; H100, docs/benchmarks.md, stop 42.)
                tl.static_assert(TILE_PAGES == 1, "the word-fed exact pass takes a page per tile (launch_forms)")
                SCAN: tl.constexpr = 4 * WARPS  # pages per scan step: 32 scale bytes per thread
                tl.static_assert(SCAN <= 32)  # one bit per page in an int32
                for group in range(page_begin, page_end, SCAN * SCAN_STEPS):
                    group_end = tl.minimum(page_end, group + SCAN * SCAN_STEPS)
                    # Which steps of the group hold a page to rescore (``steps``, a bit each) and
                    # which of their pages (``step_marks``, a bit per page): each step's scale
                    # bytes loaded two steps ahead, its page ids three.
                    steps = 0
                    step_index = tl.arange(0, SCAN_STEPS)
                    step_marks = tl.zeros((SCAN_STEPS,), dtype=tl.int32)
                    at, ok = scan_page_ids_at(bt_row, block_table_page_stride, group, group_end, SCAN)
                    ids1 = tl.load(at, mask=ok, other=-1).to(tl.int64)
                    at, ok = scan_scales_at(cache_ptr, page_stride, ids1)
                    bytes1 = tl.load(at, mask=ok, other=0)
                    at, ok = scan_page_ids_at(bt_row, block_table_page_stride, group + SCAN, group_end, SCAN)
                    ids2 = tl.load(at, mask=ok, other=-1).to(tl.int64)
                    at, ok = scan_scales_at(cache_ptr, page_stride, ids2)
                    bytes2 = tl.load(at, mask=ok, other=0)
                    at, ok = scan_page_ids_at(bt_row, block_table_page_stride, group + 2 * SCAN, group_end, SCAN)
                    ids3 = tl.load(at, mask=ok, other=-1).to(tl.int64)
                    for step in range(0, tl.cdiv(group_end - group, SCAN)):
                        chunk = group + step * SCAN
                        scale_bytes, ids = bytes1, ids1
                        bytes1, ids1 = bytes2, ids2
                        at, ok = scan_scales_at(cache_ptr, page_stride, ids3)
                        bytes2, ids2 = tl.load(at, mask=ok, other=0), ids3
                        at, ok = scan_page_ids_at(bt_row, block_table_page_stride, chunk + 3 * SCAN, group_end, SCAN)
                        ids3 = tl.load(at, mask=ok, other=-1).to(tl.int64)
                        marked = page_marks(scale_bytes, ids, query_folds)
                        steps |= (marked != 0).to(tl.int32) << step
                        step_marks = tl.where(step_index == step, marked, step_marks)
                    # The marked tiles of the marked steps, the next one's keys loaded while this
                    # one is scored (past the last: this one again, from the L1).
                    if ROWS == 1:
                        # One loop over all of the group's marked tiles, so that a step's first
                        # tile is loaded while the previous step's last one is scored. Not for
                        # two-row blocks: their exact pass spills more in this form (336 B of
                        # stack against 160) and lost up to 11 % (H100, docs/benchmarks.md, stop
                        # 40, where one-row blocks gained 2-4 %).
                        if steps != 0:
                            step, t, marked = first_marked_tile(steps, step_marks, SCAN)
                            next_exp, next_x = tile_keys(cache_ptr, page_stride, tile_page_ids(
                                bt_row, block_table_page_stride, group + step * SCAN + t, page_end, TILE_PAGES,
                                WARPS), TILE_PAGES, WARPS)
                            while step < SCAN_STEPS:
                                cur_exp, x = next_exp, next_x
                                tile = group + step * SCAN + t
                                if marked != 0:
                                    t, marked = pop_lowest_bit(marked, SCAN)
                                else:
                                    # The first marked step after this one (-2 << step: the bits
                                    # above it; none after step 31).
                                    step, t, marked = first_marked_tile(steps & (-2 << step), step_marks, SCAN)
                                next_exp, next_x = tile_keys(cache_ptr, page_stride, tile_page_ids(
                                    bt_row, block_table_page_stride,
                                    tl.where(step < SCAN_STEPS, group + step * SCAN + t, tile), page_end, TILE_PAGES,
                                    WARPS), TILE_PAGES, WARPS)
                                rescore_tile(x, cur_exp, tile * 64 + m, out_ptr, out_stride, first_row, rows_here,
                                             row_ends, query_folds, qa, qb, q_max, qa_raw, qb_raw, q_exp, w, ASM,
                                             QUERY_FLOAT, DOT_DTYPE, WORDS)
                    else:
                        for step in range(SCAN_STEPS):
                            if ((steps >> step) & 1) != 0:
                                chunk = group + step * SCAN
                                marked = tl.sum(tl.where(step_index == step, step_marks, 0), axis=0)
                                t, marked = pop_lowest_bit(marked, SCAN)
                                next_exp, next_x = tile_keys(cache_ptr, page_stride, tile_page_ids(
                                    bt_row, block_table_page_stride, chunk + t, page_end, TILE_PAGES, WARPS),
                                    TILE_PAGES, WARPS)
                                while t < SCAN:
                                    cur_exp, x = next_exp, next_x
                                    tile = chunk + t
                                    t, marked = pop_lowest_bit(marked, SCAN)
                                    next_exp, next_x = tile_keys(cache_ptr, page_stride, tile_page_ids(
                                        bt_row, block_table_page_stride, tl.where(t < SCAN, chunk + t, tile), page_end,
                                        TILE_PAGES, WARPS), TILE_PAGES, WARPS)
                                    rescore_tile(x, cur_exp, tile * 64 + m, out_ptr, out_stride, first_row, rows_here,
                                                 row_ends, query_folds, qa, qb, q_max, qa_raw, qb_raw, q_exp, w, ASM,
                                                 QUERY_FLOAT, DOT_DTYPE, WORDS)
            elif MODE == 2:
                for tile in range(page_begin, page_end, TILE_PAGES):
                    index = tile + m // 64
                    ok = index < page_end
                    page = tl.load(bt_row + index * block_table_page_stride, mask=ok, other=0).to(tl.int64)
                    section = (cache_ptr + page * page_stride)[:, None]
                    k_exp = tl.load(section + scale_at, mask=ok[:, None], other=0).to(tl.int32)
                    k_fold = FOLD_LIMIT - (tl.max(k_exp, axis=1)[:, None] - k_exp)
                    if not (query_folds and tl.min(tl.min(k_fold, axis=1), axis=0) >= 0):
                        x, x2 = load_key_bytes(cache_ptr, page, page_stride, token, ok[:, None], ASM)
                        j = tile * 64 + m
                        out_at, out_ok = tile_outputs(out_ptr, out_stride, first_row, rows_here, row_ends, j)
                        exact_tile(x, x2, k_exp, qa_raw, qb_raw, q_exp, w, out_at, out_ok, ROWS, HEADS, ASM,
                                   QUERY_FLOAT, DOT_DTYPE)
            elif WORDS:
                # The hot loop fed payload words: keys loaded straight into the dot operand's
                # layout (tile_keys), logits stored from the accumulator's; no layout conversion
                # in the loop. Keys one step ahead, page ids two. With PAIRS a step is two tiles:
                # the second tile's operand build and dot sit in one block with the first tile's
                # epilogue, and ptxas runs that epilogue while the second dot is in flight
                # (launch_plan). The second tile of an odd pair reads the share's last page again
                # (tile_page_ids clamps) and stores nothing (``limit``).
                # Barriers: the 16-warp loop at 4 pages ping-pongs its halves (PINGPONG_WAIT);
                # the CTA barrier Triton would leave before each tile's first dot (for the query
                # operand) is taken before the loop, also where the loop keeps Triton's lockstep
                # (a Triton without the ping-pong: sm_90 compiles of 3.8 and 3.9 hold it in the
                # loop otherwise; not timed). H200, next_n=1: 89.6-90.0 us against 94.2-94.4 for
                # the four warpgroups in lockstep with that barrier in the loop, and 97 for no
                # barrier at all.
                # The paired 8-warp loop has none, and one per step costs a quarter (118 vs 146
                # us at next_n=2): one warpgroup's dot runs under the other's build and epilogue.
                STEP: tl.constexpr = (2 if PAIRS else 1) * TILE_PAGES
                # The ping-pong steps' packs hold one call per thread: 32 int8 of the key operand
                # (16 warps x 4 pages), at most 32 accumulator entries (at most 64 columns).
                PINGPONG: tl.constexpr = (PINGPONG_TRITON and ASM and (not QUERY_FLOAT) and (not PAIRS) and WARPS == 16
                                          and TILE_PAGES == 4 and N <= 64)
                if FIRST_TILE_EARLY:
                    exp0, x0 = first_exp, first_x
                else:
                    p0 = tile_page_ids(bt_row, block_table_page_stride, page_begin, page_end, TILE_PAGES, WARPS)
                    exp0, x0 = tile_keys(cache_ptr, page_stride, p0, TILE_PAGES, WARPS)
                p0 = tile_page_ids(bt_row, block_table_page_stride, page_begin + STEP, page_end, TILE_PAGES, WARPS)
                if PAIRS:
                    p1 = tile_page_ids(bt_row, block_table_page_stride, page_begin + TILE_PAGES, page_end, TILE_PAGES,
                                       WARPS)
                    exp1, x1 = tile_keys(cache_ptr, page_stride, p1, TILE_PAGES, WARPS)
                    p1 = tile_page_ids(bt_row, block_table_page_stride, page_begin + STEP + TILE_PAGES, page_end,
                                       TILE_PAGES, WARPS)
                out_rows = out_ptr.to(tl.int64) + (first_row + rr).to(tl.int64)[None, :] * (out_stride * 4)
                limit = tl.where(rr < rows_here, tl.minimum(row_ends, page_end * 64) if PAIRS else row_ends, 0)
                stored = tl.zeros((M, ROWS), dtype=tl.int32)  # the stores' zeros, kept live (st_f32)
                if WARPS == 16:  # with or without the ping-pong (which only the 16-warp loop takes)
                    tl.debug_barrier()
                if PINGPONG:
                    page_begin = pingpong(page_begin, PINGPONG_FIRST, PINGPONG_1, 1)
                for tile in range(page_begin, page_end, STEP):
                    cur_exp0, cur_x0 = exp0, x0
                    exp0, x0 = tile_keys(cache_ptr, page_stride, p0, TILE_PAGES, WARPS)
                    p0 = tile_page_ids(bt_row, block_table_page_stride, tile + 2 * STEP, page_end, TILE_PAGES, WARPS)
                    if PAIRS:
                        cur_exp1, cur_x1 = exp1, x1
                        exp1, x1 = tile_keys(cache_ptr, page_stride, p1, TILE_PAGES, WARPS)
                        p1 = tile_page_ids(bt_row, block_table_page_stride, tile + 2 * STEP + TILE_PAGES, page_end,
                                           TILE_PAGES, WARPS)
                    k_max0, ka, kb, fewest = word_operands(cur_exp0, cur_x0, fewest, ASM)
                    if PINGPONG:
                        ka = pingpong(ka, PINGPONG_WAIT, PINGPONG_8, 32)
                    acc0 = key_dot(ka, kb, qa, qb, QUERY_FLOAT, DOT_DTYPE)
                    if PINGPONG:
                        acc0 = pingpong(acc0, PINGPONG_SIGNAL, PINGPONG_32, 32)
                    if PAIRS:
                        k_max1, ka, kb, fewest = word_operands(cur_exp1, cur_x1, fewest, ASM)
                    value0 = folded_logits(acc0, w_folded, ROWS, HEADS, ASM, QUERY_FLOAT)
                    value0 = value0 * power_of_two(k_max0, 0.0625)[:, None]
                    if PAIRS:
                        acc1 = key_dot(ka, kb, qa, qb, QUERY_FLOAT, DOT_DTYPE)
                        value1 = folded_logits(acc1, w_folded, ROWS, HEADS, ASM, QUERY_FLOAT)
                        value1 = value1 * power_of_two(k_max1, 0.0625)[:, None]
                    stored |= store_tile(out_ptr, out_stride, out_rows, first_row, tile * 64 + m, value0, limit,
                                         ROWS, ASM)
                    if PAIRS:
                        stored |= store_tile(out_ptr, out_stride, out_rows, first_row, (tile + TILE_PAGES) * 64 + m,
                                             value1, limit, ROWS, ASM)
                # Zero, so the flag does not change; it keeps every store in the code.
                fewest = tl.minimum(fewest, tl.min(stored, axis=1) + FOLD_LIMIT)
                if PINGPONG:
                    # The first half takes back the second's signal from before the loop (the
                    # difference is 0; it keeps the step in the code).
                    fewest += pingpong(page_end, PINGPONG_LAST, PINGPONG_1, 1) - page_end
            else:
                # Software pipeline: page ids two tiles ahead, scales and payload one tile ahead, so
                # the loads of the next tile are in flight while this one is converted and multiplied.
                index = page_begin + m // 64
                ok = index < page_end
                page = tl.load(bt_row + index * block_table_page_stride, mask=ok, other=0).to(tl.int64)
                section = (cache_ptr + page * page_stride)[:, None]
                k_exp = tl.load(section + scale_at, mask=ok[:, None], other=0).to(tl.int32)
                x, x2 = load_key_bytes(cache_ptr, page, page_stride, token, ok[:, None], ASM)
                ahead = page_begin + TILE_PAGES + m // 64
                page_ahead = tl.load(bt_row + ahead * block_table_page_stride, mask=ahead < page_end, other=0).to(tl.int64)
                for tile in range(page_begin, page_end, TILE_PAGES):
                    cur_exp, cur_x, cur_x2 = k_exp, x, x2
                    index = tile + TILE_PAGES + m // 64
                    ok = index < page_end
                    section = (cache_ptr + page_ahead * page_stride)[:, None]
                    k_exp = tl.load(section + scale_at, mask=ok[:, None], other=0).to(tl.int32)
                    x, x2 = load_key_bytes(cache_ptr, page_ahead, page_stride, token, ok[:, None], ASM)
                    ahead = index + TILE_PAGES
                    page_ahead = tl.load(bt_row + ahead * block_table_page_stride, mask=ahead < page_end, other=0).to(tl.int64)

                    k_max = tl.max(cur_exp, axis=1)
                    k_fold = FOLD_LIMIT - (k_max[:, None] - cur_exp)
                    if MODE == 1:
                        folds = True
                        fewest = tl.minimum(fewest, tl.min(k_fold, axis=1))
                    else:
                        folds = query_folds and tl.min(tl.min(k_fold, axis=1), axis=0) >= 0
                    j = tile * 64 + m
                    out_at, out_ok = tile_outputs(out_ptr, out_stride, first_row, rows_here, row_ends, j)
                    if folds:
                        ka, kb = key_operands(cur_x, cur_x2, k_fold, ASM)
                        acc = key_dot(ka, kb, qa, qb, QUERY_FLOAT, DOT_DTYPE)
                        logits = folded_logits(acc, w_folded, ROWS, HEADS, ASM, QUERY_FLOAT)
                        tl.store(out_at, logits * power_of_two(k_max, 0.0625)[:, None], mask=out_ok)
                    if MODE == 0:
                        if not folds:
                            exact_tile(cur_x, cur_x2, cur_exp, qa_raw, qb_raw, q_exp, w, out_at, out_ok, ROWS, HEADS, ASM,
                                       QUERY_FLOAT, DOT_DTYPE)
    return fewest


@triton.jit
def scan_page_ids_at(bt_row, block_table_page_stride, chunk, end, SCAN: tl.constexpr):
    """(addresses, mask) [SCAN] of the block-table entries of pages chunk .. chunk + SCAN - 1 of a
    request, masked from ``end`` on. The caller loads them with -1 where masked, and the scan
    takes a page as its own where its id is not negative: its marks then come from loaded values
    only. (Inductor's analysis takes any other value that reaches a store's address, through a
    helper given a pointer (the schedule's, here), as that pointer written.)"""
    page = chunk + tl.arange(0, SCAN)
    return bt_row + page * block_table_page_stride, page < end


@triton.jit
def scan_scales_at(cache_ptr, page_stride, ids):
    """(addresses, mask) [SCAN, 256] of the scale bytes of pages ``ids`` (from ``scan_page_ids_at``;
    masked where negative), group by group (a key at the same position in each group)."""
    return (cache_ptr + ids * page_stride + 4096)[:, None] + tl.arange(0, 256)[None, :], (ids >= 0)[:, None]


@triton.jit
def page_marks(scale_bytes, ids, query_folds):
    """int32: bit i set where page i of a scan step (id ``ids[i]``, not negative) holds a key whose
    group scales span more than 2**FOLD_LIMIT, or, for a query that does not fold, for every such
    page."""
    SCAN: tl.constexpr = ids.shape[0]
    scan = tl.arange(0, SCAN)
    per_group = tl.reshape(scale_bytes, (SCAN, 4, 64)).to(tl.int32)
    spread = tl.max(per_group, axis=1) - tl.min(per_group, axis=1)
    marked = ((tl.max(spread, axis=1) > FOLD_LIMIT) | (not query_folds)) & (ids >= 0)
    return tl.sum(marked.to(tl.int32) << scan, axis=0)


@triton.jit
def first_marked_tile(steps, step_marks, SCAN: tl.constexpr):
    """(step, tile, marks left) of the first marked tile of a scan group's marked ``steps`` (a bit
    per step; ``step_marks``: a bit per page of each step): the lowest marked step, its lowest
    marked page, and that step's other marks; with no step marked, (SCAN_STEPS, SCAN, 0)."""
    SCAN_STEPS: tl.constexpr = step_marks.shape[0]
    step, _ = pop_lowest_bit(steps, SCAN_STEPS)
    marks = tl.sum(tl.where(tl.arange(0, SCAN_STEPS) == step, step_marks, 0), axis=0)
    t, marked = pop_lowest_bit(marks, SCAN)
    return step, t, marked


@triton.jit
def rescore_tile(x, k_exp, j, out_ptr, out_stride, first_row, rows_here, row_ends, query_folds, qa, qb, q_max, qa_raw,
                 qb_raw, q_exp, w, ASM: tl.constexpr, QUERY_FLOAT: tl.constexpr, DOT_DTYPE: tl.constexpr,
                 WORDS: tl.constexpr):
    """The exact pass on one word-fed tile (keys ``j``; payload words ``x``, scale bytes ``k_exp``):
    one dot per class of its keys' group scales (``fold_classes``), or, for a query that does not
    fold, one per group (``exact_tile``); its logits stored where the rows may be written."""
    ROWS: tl.constexpr = row_ends.shape[0]
    HEADS: tl.constexpr = w.shape[0] // ROWS
    k_max = tl.max(k_exp, axis=1)
    out_at, out_ok = tile_outputs(out_ptr, out_stride, first_row, rows_here, row_ends, j)
    if query_folds:
        total = fold_classes(x, k_exp, k_max, qa, qb, power_of_two(q_max, 0.0625), ASM, DOT_DTYPE)
        store_exact_logits(total, w, out_at, out_ok, ROWS, HEADS)
    else:
        # The portable builder: Triton lays the PTX one out here without four consecutive K per
        # call (tests/test_prmt.py).
        exact_tile(x, x, k_exp, qa_raw, qb_raw, q_exp, w, out_at, out_ok, ROWS, HEADS, False, QUERY_FLOAT, DOT_DTYPE,
                   WORDS)


@triton.jit
def pop_lowest_bit(bits, none):
    """(the index of the lowest set bit of int32 ``bits``, or ``none`` where ``bits`` is 0; ``bits``
    without that bit). The index is the exponent of ``bits & -bits`` as a float32 (exact: a power
    of two)."""
    power = (bits & -bits).to(tl.float32).to(tl.int32, bitcast=True)
    return tl.where(bits != 0, ((power >> 23) & 255) - 127, none), bits & (bits - 1)


@triton.jit
def request_units(query_starts_ptr, row_ends_ptr, first, requests, width, num_rows, UNIT_PAGES: tl.constexpr,
                  CHUNK: tl.constexpr):
    """int32 [CHUNK]: of requests first .. first + CHUNK - 1 (0 past the last), the pages that
    each one's longest row needs (its keys cut to ``width``, the block table's, and its rows to
    the launch's ``num_rows``), in whole units of UNIT_PAGES pages."""
    request = first + tl.arange(0, CHUNK)
    inside = request < requests
    start = row_bound(tl.load(query_starts_ptr + request, mask=inside, other=0), num_rows)
    rows = row_bound(tl.load(query_starts_ptr + request + 1, mask=inside, other=0), num_rows) - start
    longest = tl.zeros((CHUNK,), dtype=tl.int32)
    # The rows' ends ROW_LOADS at a time: a round trip to memory per ROW_LOADS rows, not per row.
    for i in range(0, tl.max(rows, axis=0), ROW_LOADS):
        for j in tl.static_range(ROW_LOADS):
            row_end = tl.load(row_ends_ptr + start + i + j, mask=i + j < rows, other=0)
            longest = tl.maximum(longest, narrow_end(row_end, width))
    return tl.cdiv(tl.minimum(longest, width), 64 * UNIT_PAGES)


@triton.jit
def share_units(query_starts_ptr, row_ends_ptr, first, requests, width, num_rows, UNIT_PAGES: tl.constexpr,
                SETUP_UNITS: tl.constexpr, CHUNK: tl.constexpr):
    """``request_units``, each request with keys counted SETUP_UNITS more: what a program pays to
    start on a request (its query block, and the first loads of its pipeline), in units."""
    units = request_units(query_starts_ptr, row_ends_ptr, first, requests, width, num_rows, UNIT_PAGES, CHUNK)
    return with_setup(units, SETUP_UNITS)


@triton.jit
def with_setup(units, SETUP_UNITS: tl.constexpr):
    """A request's ``units`` in the schedule: SETUP_UNITS more where it has keys, none where not."""
    return tl.where(units > 0, units + SETUP_UNITS, 0)


@triton.jit
def score_paged_kernel(
    out_ptr,
    out_stride,
    q_payload_ptr,
    q_scales_ptr,
    cache_ptr,
    page_stride,
    weights_ptr,
    weights_stride,
    weights_head_stride,
    block_table_ptr,
    block_table_stride,
    block_table_page_stride,
    query_starts_ptr,
    row_ends_ptr,
    requests,
    width,
    num_rows,
    flags_ptr,
    HEADS: tl.constexpr,
    ROWS: tl.constexpr,
    TILE_PAGES: tl.constexpr,
    SHARE_PAGES: tl.constexpr,
    SETUP_UNITS: tl.constexpr,
    CHUNK: tl.constexpr,
    ASM: tl.constexpr,
    QUERY_FLOAT: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
    MODE: tl.constexpr,
    WORDS: tl.constexpr,
    WARPS: tl.constexpr,
    PAIRS: tl.constexpr,
    SPLIT: tl.constexpr,
    PDL: tl.constexpr,
    WGMMA: tl.constexpr,
    ROW_SPLIT: tl.constexpr,
):
    # MODE 0: both paths in one loop, one vote per tile on which to take. MODE 1: the folded
    # path for every key, no vote; a key that does not fold keeps only its folding groups and
    # marks its program (one flag byte). MODE 2 (launched after 1, on SPLIT times its programs
    # along axis 0): the exact path for the tiles that do not fold, in the programs whose share
    # lies in a marked one's (word-fed: fold classes, see launch_forms). Program q's share is
    # part q % SPLIT of program q // SPLIT's: cut from the same units, the shares nest exactly.
    # Its row blocks may be the hot pass's cut in ROW_SPLIT (ROW_SPLIT times the programs along
    # axis 1): row-block program j then reads the flag of the hot pass's j // ROW_SPLIT. Its
    # blocks b = j + k * num_programs(1) of ROWS rows lie in the hot pass's blocks b // ROW_SPLIT =
    # j // ROW_SPLIT + k * (num_programs(1) // ROW_SPLIT), which that program took (such a block
    # exists where b does, and its longest row needs as many pages or more).
    # 1 + 2 keep the exact path's registers and the per-tile vote out of the hot loop.
    M: tl.constexpr = 64 * TILE_PAGES
    # The word-fed loop's asm stores stay in the code only through the flag, which MODE 1 writes.
    tl.static_assert(MODE != 0 or not WORDS, "the word-fed loop runs as the hot pass (MODE 1) only")
    fewest = tl.full((M,), FOLD_LIMIT, tl.int32)  # MODE 1: each slot's smallest fold seen
    flag_at = (flags_ptr + (tl.program_id(0) // SPLIT) * (tl.num_programs(1) // ROW_SPLIT)
               + tl.program_id(1) // ROW_SPLIT)
    run = True
    if PDL:
        # The pair as a programmatic dependent launch (launch_score_paged): the hot pass lets the
        # exact pass start at once, whose programs take the SMs left free and wait here until
        # the hot pass has finished and its flags and logits are visible. Hides the second
        # launch (H100, A/B: 1 x 8192 next_n=1 7.4-7.5 us against 7.7-7.8; 4 x 8192 8.8 against
        # 9.1; 64 x 32768 74.6-74.8 against 75.0-75.9; bit-identical, also in a CUDA graph;
        # docs/benchmarks.md, stop 44).
        if MODE == 1:
            tl.extra.cuda.gdc_launch_dependents()
        if MODE == 2:
            tl.extra.cuda.gdc_wait()
    if MODE == 2:
        # A program whose hot share marked nothing leaves before it computes the schedule: the
        # exact pass of a batch whose keys all fold costs 1.5-2 us instead of 6 (H200).
        run = tl.load(flag_at) != 0
    if run:
        fewest = score_share(
            fewest, out_ptr, out_stride, q_payload_ptr, q_scales_ptr, cache_ptr, page_stride, weights_ptr,
            weights_stride, weights_head_stride, block_table_ptr, block_table_stride, block_table_page_stride,
            query_starts_ptr, row_ends_ptr, requests, width, num_rows, HEADS, ROWS, TILE_PAGES, SHARE_PAGES,
            SETUP_UNITS, CHUNK, ASM, QUERY_FLOAT, DOT_DTYPE, MODE, WORDS, WARPS, PAIRS, WGMMA)
    if MODE == 1:
        tl.store(flag_at, (tl.min(fewest, axis=0) < 0).to(tl.uint8))
    if WORDS and ASM and MODE == 1:
        # Never runs (requests >= 0). The word-fed loop stores through a pure asm (st_f32), which
        # Inductor's analysis of the kernel cannot see; this store shows it that ``out`` is written.
        tl.store(out_ptr, 0.0, mask=requests < 0)


@triton.jit
def score_share(
    fewest, out_ptr, out_stride, q_payload_ptr, q_scales_ptr, cache_ptr, page_stride, weights_ptr, weights_stride,
    weights_head_stride, block_table_ptr, block_table_stride, block_table_page_stride, query_starts_ptr, row_ends_ptr,
    requests, width, num_rows, HEADS: tl.constexpr, ROWS: tl.constexpr, TILE_PAGES: tl.constexpr,
    SHARE_PAGES: tl.constexpr, SETUP_UNITS: tl.constexpr, CHUNK: tl.constexpr, ASM: tl.constexpr,
    QUERY_FLOAT: tl.constexpr, DOT_DTYPE: tl.constexpr, MODE: tl.constexpr, WORDS: tl.constexpr, WARPS: tl.constexpr,
    PAIRS: tl.constexpr, WGMMA: tl.constexpr,
):
    """The program's share (of num_programs(0)) of all requests' pages, in ``MODE``; returns
    ``fewest`` (MODE 1), updated.

    The schedule, computed alike by every program (no host work, graph-safe): the pages each
    request's longest row needs, in whole units of SHARE_PAGES pages (a multiple of TILE_PAGES;
    both passes cut the same shares), each request with keys led by SETUP_UNITS units without
    pages, laid end to end across requests and cut into num_programs(0) equal shares at unit
    boundaries. A long request is spread over many programs, short ones share a program; no
    program waits for the longest request. The setup units stand for what starting on a request
    costs a program (its query block, the first loads of its pipeline): a share holding a
    request's start gets that many tiles fewer (H200, next_n=1, 4 units: 64 x 32768 80.8 us
    against 84.3, 16 x 131072 79.5 against 84.4). The first CHUNK requests' units are read once
    and kept (with up to CHUNK requests, the whole schedule)."""
    units0 = share_units(query_starts_ptr, row_ends_ptr, 0, requests, width, num_rows, SHARE_PAGES, SETUP_UNITS, CHUNK)
    first_chunk = tl.sum(units0, axis=0)
    total = first_chunk
    for first in range(CHUNK, requests, CHUNK):
        total += tl.sum(share_units(query_starts_ptr, row_ends_ptr, first, requests, width, num_rows, SHARE_PAGES,
                                    SETUP_UNITS, CHUNK), axis=0)
    begin = (tl.program_id(0) * total.to(tl.int64) // tl.num_programs(0)).to(tl.int32)
    end = ((tl.program_id(0) + 1) * total.to(tl.int64) // tl.num_programs(0)).to(tl.int32)
    # The request holding unit ``begin``: all requests that end at or before it come first.
    index = tl.arange(0, CHUNK)
    done = (tl.cumsum(units0, axis=0) <= begin) & (index < requests)
    request = tl.sum(done.to(tl.int32), axis=0)
    first_unit = tl.sum(tl.where(done, units0, 0), axis=0)
    seen = first_chunk
    for first in range(CHUNK, requests, CHUNK):
        units = share_units(query_starts_ptr, row_ends_ptr, first, requests, width, num_rows, SHARE_PAGES, SETUP_UNITS,
                            CHUNK)
        done = (seen + tl.cumsum(units, axis=0) <= begin) & (first + index < requests)
        request += tl.sum(done.to(tl.int32), axis=0)
        first_unit += tl.sum(tl.where(done, units, 0), axis=0)
        seen += tl.sum(units, axis=0)
    # ``first_unit``: where the request's units start; its pages start SETUP_UNITS later.
    while (request < requests) & (first_unit < end):
        start = row_bound(tl.load(query_starts_ptr + request), num_rows)
        stop = row_bound(tl.load(query_starts_ptr + request + 1), num_rows)
        longest = 0
        for i in range(start, stop, ROW_LOADS):
            for j in tl.static_range(ROW_LOADS):
                row_end = tl.load(row_ends_ptr + i + j, mask=i + j < stop, other=0)
                longest = tl.maximum(longest, narrow_end(row_end, width))
        units = tl.cdiv(tl.minimum(longest, width), 64 * SHARE_PAGES)
        first_page = (first_unit + SETUP_UNITS) * SHARE_PAGES
        fewest = score_request(
            request, tl.maximum(begin * SHARE_PAGES - first_page, 0), end * SHARE_PAGES - first_page, fewest,
            out_ptr, out_stride, q_payload_ptr, q_scales_ptr, cache_ptr, page_stride, weights_ptr, weights_stride,
            weights_head_stride, block_table_ptr, block_table_stride, block_table_page_stride,
            query_starts_ptr, row_ends_ptr, width, num_rows, HEADS, ROWS, TILE_PAGES, ASM, QUERY_FLOAT, DOT_DTYPE, MODE, WORDS,
            WARPS, PAIRS, WGMMA)
        first_unit += with_setup(units, SETUP_UNITS)
        request += 1
    return fewest
