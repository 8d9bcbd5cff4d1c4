"""Paged FP4 indexer scoring with shared-key row groups, on exact integer tensor cores.

One program scores a run of pages of one request for *all* of that request's
rows (up to ``ROWS``), so each key page is read once per request, not once
per verify row. Keys are the MMA's M side (64 * TILE_PAGES tokens), the
request's rows x heads its N side.

E2M1 values times 2 are the integers {0, 1, 2, 3, 4, 6, 8, 12}. Within one
key (and one query head) the four group scales usually differ by at most
2**3, so each group is shifted left by its distance to the largest scale and
the whole 128-element dot runs as one int8 x int8 -> int32 product: exact,
whatever the order of accumulation. The largest scales come back as one
factor per key and one per column, and since ``relu(a * s) = s * relu(a)``
for ``s > 0`` the per-column factor folds into the head weights:

    logit[j] = 2**(kmax[j] - 131) * sum_c w[c] 2**(qmax[c] - 131) * relu(acc[j, c])

A key whose group scales span more than 2**3 (or a query that does) takes the
exact slow path: one masked dot per group, each scaled in float32. By default
(``exact="fixup"``) that is a second launch: the hot pass scores every key on
the folded path with no per-tile decision, and a key that does not fold keeps
only its folding groups and marks its program; the exact pass then rewrites the
tiles holding such keys, in marked programs only. ``exact="inline"`` keeps both
paths in one loop with a block-wide vote per tile (1.5-1.7x slower on the H200).

On the GPU, FP4 bytes become int8 operands through PTX byte permutes (``prmt``)
from the (key, group)'s code table: 11 instructions per 8 elements
(``_prmt_asm``; tests/test_prmt.py runs it through a small PTX emulator on the
CPU, and checks the layouts Triton compiles it into). The interpreter builds the
same operands with plain integer ops. The epilogue takes relu and the int-to-float
conversion in one ``mul.rn.sat.f32`` of the accumulator's bits (``_RELU_ASM``).
The operand of a key is split in two K=64 halves: ``a`` holds elements
``8v + 0..3`` at columns ``4v + 0..3``, ``b`` elements ``8v + 4..7``; the
query operands use the same order.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.library import wrap_triton

from .. import formats as F
from . import rows_aligned

FOLD_LIMIT = tl.constexpr(3)  # 12 << 3 = 96 still fits int8

# The PTX operand builder, one call per payload word (elements 8v + 0..7) with the group's code
# table: magnitudes 0, 1, 2, 3 | 4, 6, 8, 12 shifted left by the group's fold (all zero for a
# group left out). Two outputs of packed int8: elements 0..3 and 4..7.
# prmt's selector nibble is the E2M1 code itself: its sign bit asks prmt to replicate the sign
# of the selected byte, and every table byte is positive (at most 12 << 3 = 96), so p holds the
# positive elements' magnitudes (0 where negative) and q, from the sign-flipped codes, the
# negative ones'. Bytewise p - q without borrows: (p + 0x80 - q) never leaves [32, 224], and
# xor 0x80 turns that offset byte into the signed one. 11 instructions per 8 elements.
_PRMT_HALF = """
prmt.b32 p, {lo}, {hi}, {x};
prmt.b32 q, {lo}, {hi}, {n};
add.u32 p, p, 0x80808080;
sub.u32 p, p, q;
xor.b32 {out}, p, 0x80808080;
"""


def _prmt_asm(x: str, lo: str, hi: str) -> str:
    # One line: Inductor copies the kernel's constexpr globals into its generated code, and a
    # string with newlines does not survive that (an unterminated literal).
    return " ".join((
        "{ .reg .b32 n, h, p, q;"
        + f"xor.b32 n, {x}, 0x88888888;"
        + _PRMT_HALF.format(x=x, n="n", lo=lo, hi=hi, out="$0")
        + f"shr.b32 h, {x}, 16; shr.b32 n, n, 16;"
        + _PRMT_HALF.format(x="h", n="n", lo=lo, hi=hi, out="$1")
        + "}"
    ).split())


# relu(acc) * 2**-22 as float32 bits, from int32 acc with |acc| <= 128 * 96 * 96 < 2**21 (the hot
# loop's epilogue; tests/test_prmt.py runs it through the emulator). PTX mul without .ftz keeps
# subnormal inputs; .sat clamps to [0, 1] and flushes NaN to +0.
_RELU_ASM = tl.constexpr("mul.rn.sat.f32 $0, $1, 0f7F000000;")
# The factor the asm leaves on relu(acc): 2**-149 (the subnormal reading) * 2**127.
_RELU_UNSCALE = tl.constexpr(2.0**22)

# pack=4: the asm sees four elements per call. From bytes: $2 holds the four payload bytes, the
# 32-bit tables arrive four times each ($3-$6, $7-$10). From words: the word too ($2-$5).
_PRMT_ASM_BYTES = tl.constexpr(_prmt_asm("$2", "$3", "$7"))
_PRMT_ASM_WORDS = tl.constexpr(_prmt_asm("$2", "$6", "$10"))


@triton.jit
def signed_magnitude(nibble, shift):
    """E2M1 nibble (int32) -> int32 value * 2 << shift (the interpreter's operand builder)."""
    c = nibble & 7
    magnitude = tl.where(c == 0, 0, ((2 | (c & 1)) << (c >> 1)) >> 1) << shift
    return tl.where((nibble & 8) != 0, -magnitude, magnitude)


@triton.jit
def load_key_bytes(cache_ptr, page, page_stride, token, ok, ASM: tl.constexpr, WORDS: tl.constexpr = False):
    """Payload of the keys at ``page`` [M] (page ids), ``token`` [M, 1] (slot in the page).

    GPU: the 64 bytes of each key in order, uint8 [M, 64] (twice), or with ``WORDS`` as 16
    int32 words [M, 16]. Interpreter: the bytes behind columns 4v + i of the ``a`` and ``b``
    operands (byte 4v + i // 2 and 4v + 2 + i // 2), uint8 [M, 64]."""
    if ASM:
        if WORDS:
            w = tl.arange(0, 16)[None, :]
            words = cache_ptr.to(tl.pointer_type(tl.int32)) + (page * (page_stride // 4))[:, None]
            x = tl.load(words + (w // 4) * 256 + token * 4 + w % 4, mask=ok, other=0)
        else:
            col = tl.arange(0, 64)[None, :]
            x = tl.load((cache_ptr + page * page_stride)[:, None] + (col // 16) * 1024 + token * 16 + col % 16,
                        mask=ok, other=0)
        return x, x
    else:
        col = tl.arange(0, 64)[None, :]
        byte = (col // 4) * 4 + (col % 4) // 2
        base = (cache_ptr + page * page_stride)[:, None] + (byte // 16) * 1024 + token * 16 + byte % 16
        return tl.load(base, mask=ok, other=0), tl.load(base + 2, mask=ok, other=0)


@triton.jit
def widen(per_group, times: tl.constexpr):
    """[M, G] -> [M, G * times]: each value repeated ``times`` times in place."""
    M: tl.constexpr = per_group.shape[0]
    G: tl.constexpr = per_group.shape[1]
    return tl.reshape(tl.broadcast_to(per_group[:, :, None], (M, G, times)), (M, G * times))


@triton.jit
def key_operands(x, x2, shift, ASM: tl.constexpr, WORDS: tl.constexpr = False):
    """int8 operands (a, b) [M, 64] from ``load_key_bytes``; ``shift`` int32 [M, 4]: left shift
    per group, -1 for a group left out.

    The PTX builder's pack=4 ties it to its layout: each call must see four consecutive columns
    of one row. Fed from a byte load, it keeps that load's layout (16 bytes per thread). Fed from
    words, Triton moves it into the dot operand's layout, which is right only for an int8 dot
    (four consecutive K per register): the hot loop of integer scoring. tests/test_prmt.py
    compiles the kernel for sm_90 and checks the layout of every call."""
    if ASM:
        ok = shift >= 0
        lo = widen(tl.where(ok, 0x03020100 << tl.maximum(shift, 0), 0), 16)
        hi = widen(tl.where(ok, 0x0C080604 << tl.maximum(shift, 0), 0), 16)
        if WORDS:
            a, b = tl.inline_asm_elementwise(
                _PRMT_ASM_WORDS, "=r,=r" + ",r" * 12, [widen(x, 4), lo, hi], dtype=(tl.int8, tl.int8),
                is_pure=True, pack=4,
            )
        else:
            a, b = tl.inline_asm_elementwise(
                _PRMT_ASM_BYTES, "=r,=r" + ",r" * 9, [x, lo, hi], dtype=(tl.int8, tl.int8), is_pure=True, pack=4,
            )
        return a, b
    else:
        s = widen(shift, 16)
        nibble_shift = (tl.arange(0, 64)[None, :] % 2) * 4
        a = signed_magnitude(x.to(tl.int32) >> nibble_shift, tl.maximum(s, 0))
        b = signed_magnitude(x2.to(tl.int32) >> nibble_shift, tl.maximum(s, 0))
        return tl.where(s >= 0, a, 0).to(tl.int8), tl.where(s >= 0, b, 0).to(tl.int8)


@triton.jit
def query_operands(q_base, c_ok, shift):
    """int8 operands (a, b) [64, N] of the query columns at ``q_base`` [N] (64 payload bytes each);
    ``shift`` int32 [N, 4] per group, -1 for a group left out."""
    k = tl.arange(0, 64)[:, None]
    byte = (k // 4) * 4 + (k % 4) // 2
    nibble_shift = (k % 2) * 4
    s = tl.reshape(tl.broadcast_to(tl.trans(shift)[:, None, :], (4, 16, shift.shape[0])), (64, shift.shape[0]))
    raw_a = tl.load(q_base[None, :] + byte, mask=c_ok[None, :], other=0).to(tl.int32) >> nibble_shift
    raw_b = tl.load(q_base[None, :] + byte + 2, mask=c_ok[None, :], other=0).to(tl.int32) >> nibble_shift
    a = tl.where(s >= 0, signed_magnitude(raw_a, tl.maximum(s, 0)), 0)
    b = tl.where(s >= 0, signed_magnitude(raw_b, tl.maximum(s, 0)), 0)
    return a.to(tl.int8), b.to(tl.int8)


@triton.jit
def float_query_operands(q_base, c_ok, DOT_DTYPE: tl.constexpr):
    """(a, b) [64, N] of unquantized queries at ``q_base`` [N] (128 elements each), in the
    column order of ``key_operands`` (a: elements 8v + 0..3, b: 8v + 4..7)."""
    k = tl.arange(0, 64)[:, None]
    element = (k // 4) * 8 + k % 4
    a = tl.load(q_base[None, :] + element, mask=c_ok[None, :], other=0.0)
    b = tl.load(q_base[None, :] + element + 4, mask=c_ok[None, :], other=0.0)
    return a.to(DOT_DTYPE), b.to(DOT_DTYPE)


@triton.jit
def key_dot(ka, kb, qa, qb, QUERY_FLOAT: tl.constexpr, DOT_DTYPE: tl.constexpr):
    """[M, N] dot of the key and query operands: exact int32 for FP4 queries; float32 for
    unquantized ones (int8 keys are exact in bf16, products exact in float32)."""
    if QUERY_FLOAT:
        acc = tl.dot(ka.to(DOT_DTYPE), qa, out_dtype=tl.float32)
        return tl.dot(kb.to(DOT_DTYPE), qb, acc, out_dtype=tl.float32)
    else:
        acc = tl.dot(ka, qa, out_dtype=tl.int32)
        return tl.dot(kb, qb, acc, out_dtype=tl.int32)


@triton.jit
def power_of_two(byte, times):
    """2**(byte - 127) * times for a UE8M0 byte (int32); 255 -> NaN; byte 0 reads as 0."""
    return tl.where(byte == 255, float("nan"), (byte << 23).to(tl.float32, bitcast=True) * times)


@triton.jit
def exact_tile(x, x2, k_exp, qa_raw, qb_raw, q_exp, w, out_at, out_ok, ROWS: tl.constexpr, HEADS: tl.constexpr,
               ASM: tl.constexpr, QUERY_FLOAT: tl.constexpr, DOT_DTYPE: tl.constexpr):
    """The exact path for one tile: one masked dot per group, each scaled in float32."""
    M: tl.constexpr = k_exp.shape[0]
    g4 = tl.arange(0, 4)[None, :]
    s = tl.zeros((M, ROWS * HEADS), dtype=tl.float32)
    for g in range(4):
        only_g = tl.where(g4 == g, 0, -1)
        ka, kb = key_operands(x, x2, tl.zeros_like(k_exp) + only_g, ASM)
        acc = key_dot(ka, kb, qa_raw, qb_raw, QUERY_FLOAT, DOT_DTYPE)
        k_scale = power_of_two(tl.sum(tl.where(g4 == g, k_exp, 0), axis=1), 0.5)
        # FP4 query operands are 2 * value; unquantized ones are the value.
        q_scale = power_of_two(tl.sum(tl.where(g4 == g, q_exp, 0), axis=1), 1.0 if QUERY_FLOAT else 0.5)
        s += acc.to(tl.float32) * (k_scale[:, None] * q_scale[None, :])
    # relu that keeps NaN (a NaN group must give a NaN logit).
    weighted = tl.where(s < 0.0, 0.0, s) * w[None, :]
    tl.store(out_at, tl.sum(tl.reshape(weighted, (M, ROWS, HEADS)), axis=2), mask=out_ok)


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
    pages_per_split,
    flags_ptr,
    HEADS: tl.constexpr,
    ROWS: tl.constexpr,
    TILE_PAGES: tl.constexpr,
    ASM: tl.constexpr,
    QUERY_FLOAT: tl.constexpr = False,
    DOT_DTYPE: tl.constexpr = tl.bfloat16,
    MODE: tl.constexpr = 0,
    WORDS: tl.constexpr = False,
):
    # MODE 0: both paths in one loop, one vote per tile on which to take. MODE 1: the folded
    # path for every key, no vote; a key that does not fold keeps only its folding groups and
    # marks its program (one flag byte). MODE 2 (launched after 1 on the same grid): the exact
    # path for the tiles that do not fold, in marked programs only. 1 + 2 keep the exact path's
    # registers and the per-tile vote out of the hot loop.
    request = tl.program_id(0)
    split = tl.program_id(1)
    N: tl.constexpr = ROWS * HEADS
    M: tl.constexpr = 64 * TILE_PAGES

    fewest = tl.full((M,), FOLD_LIMIT, tl.int32)  # MODE 1: each slot's smallest fold seen
    request_start = tl.load(query_starts_ptr + request)
    request_rows = tl.load(query_starts_ptr + request + 1) - request_start
    if MODE != 0:
        flag_at = flags_ptr + (request * tl.num_programs(1) + split) * tl.num_programs(2) + tl.program_id(2)
        if MODE == 2:
            # A program that left nothing out has nothing to do here.
            request_rows = tl.where(tl.load(flag_at) != 0, request_rows, 0)
    # Row blocks beyond the launch's (sized from max_query_len) are taken in turn by the
    # same programs: the hint sets the launch shape, never which rows get scored.
    for row_block in range(tl.program_id(2), tl.cdiv(request_rows, ROWS), tl.num_programs(2)):
        first_row = request_start + row_block * ROWS
        rows_here = request_rows - row_block * ROWS
        rr = tl.arange(0, ROWS)
        row_ends = tl.load(row_ends_ptr + first_row + rr, mask=rr < rows_here, other=0)
        # Only the pages that the longest row of this block needs are read.
        pages_needed = tl.cdiv(tl.max(row_ends, axis=0), 64)
        page_begin = split * pages_per_split
        page_end = tl.minimum(page_begin + pages_per_split, pages_needed)
        if page_begin < page_end:
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
                qa, qb = query_operands(q_base, c_ok, tl.maximum(q_fold, 0))
                qa_raw, qb_raw = query_operands(q_base, c_ok, tl.zeros_like(q_exp))
                w_folded = w * power_of_two(q_max, 0.0625)
            w_folded = tl.where(c_ok, w_folded, 0.0)
            if MODE == 1:
                fewest = tl.where(query_folds, fewest, -1)  # a query that does not fold: all exact

            m = tl.arange(0, M)
            token = (m % 64)[:, None]
            scale_at = (4096 + (m % 64 % 16) * 4 + (m % 64) // 16)[:, None] + g4 * 64
            bt_row = block_table_ptr + request.to(tl.int64) * block_table_stride
            if MODE == 2:
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
                        out_at = out_ptr + (first_row + rr).to(tl.int64)[None, :] * out_stride + j[:, None]
                        out_ok = (j[:, None] < row_ends[None, :]) & (rr < rows_here)[None, :]
                        exact_tile(x, x2, k_exp, qa_raw, qb_raw, q_exp, w, out_at, out_ok, ROWS, HEADS, ASM,
                                   QUERY_FLOAT, DOT_DTYPE)
            else:
                # Software pipeline: page ids two tiles ahead, scales and payload one tile ahead, so
                # the loads of the next tile are in flight while this one is converted and multiplied.
                index = page_begin + m // 64
                ok = index < page_end
                page = tl.load(bt_row + index * block_table_page_stride, mask=ok, other=0).to(tl.int64)
                section = (cache_ptr + page * page_stride)[:, None]
                k_exp = tl.load(section + scale_at, mask=ok[:, None], other=0).to(tl.int32)
                x, x2 = load_key_bytes(cache_ptr, page, page_stride, token, ok[:, None], ASM, WORDS)
                ahead = page_begin + TILE_PAGES + m // 64
                page_ahead = tl.load(bt_row + ahead * block_table_page_stride, mask=ahead < page_end, other=0).to(tl.int64)
                for tile in range(page_begin, page_end, TILE_PAGES):
                    cur_exp, cur_x, cur_x2 = k_exp, x, x2
                    index = tile + TILE_PAGES + m // 64
                    ok = index < page_end
                    section = (cache_ptr + page_ahead * page_stride)[:, None]
                    k_exp = tl.load(section + scale_at, mask=ok[:, None], other=0).to(tl.int32)
                    x, x2 = load_key_bytes(cache_ptr, page_ahead, page_stride, token, ok[:, None], ASM, WORDS)
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
                    out_at = out_ptr + (first_row + rr).to(tl.int64)[None, :] * out_stride + j[:, None]
                    out_ok = (j[:, None] < row_ends[None, :]) & (rr < rows_here)[None, :]
                    if folds:
                        ka, kb = key_operands(cur_x, cur_x2, k_fold, ASM, WORDS)
                        acc = key_dot(ka, kb, qa, qb, QUERY_FLOAT, DOT_DTYPE)
                        if ASM and not QUERY_FLOAT:
                            # relu and conversion in one FMUL.SAT of acc's bits as float32: a value
                            # 0 <= acc < 2**21 reads as the subnormal acc * 2**-149 (exact), times
                            # 2**127 it is acc * 2**-22 (normal); a negative one reads as NaN,
                            # which .sat makes 0. No integer max, no int-to-float conversion.
                            relu = tl.inline_asm_elementwise(_RELU_ASM, "=r,r", [acc], dtype=tl.int32, is_pure=True, pack=1)
                            relu = relu.to(tl.float32, bitcast=True)
                            unscale = _RELU_UNSCALE
                        else:
                            # relu that keeps NaN (an unquantized query may hold one).
                            relu = tl.where(acc < 0, 0, acc).to(tl.float32)
                            unscale = 1.0
                        weighted = relu * w_folded[None, :]
                        logits = tl.sum(tl.reshape(weighted, (M, ROWS, HEADS)), axis=2) * unscale
                        tl.store(out_at, logits * power_of_two(k_max, 0.0625)[:, None], mask=out_ok)
                    if MODE == 0:
                        if not folds:
                            exact_tile(cur_x, cur_x2, cur_exp, qa_raw, qb_raw, q_exp, w, out_at, out_ok, ROWS, HEADS, ASM,
                                       QUERY_FLOAT, DOT_DTYPE)
    if MODE == 1:
        tl.store(flag_at, (tl.min(fewest, axis=0) < 0).to(tl.uint8))


def payload_words(mode: int, query_float: bool) -> bool:
    """Whether a launch feeds the PTX builder payload words (no byte repacking in the loop) rather
    than bytes: only the fix-up pair's hot kernel with integer scoring, where Triton moves the
    builder into the int8 dot operand's layout (four consecutive K per register; key_operands)."""
    return mode == 1 and not query_float


def split_plan(requests: int, pages_per_request: int, row_blocks: int, device: torch.device, per_sm: int = 4) -> int:
    """Pages per program: enough programs to fill the GPU at small batch (from shapes only)."""
    if device.type == "cuda":
        sms = torch.cuda.get_device_properties(device).multi_processor_count
    else:
        sms = 4
    splits = max(1, min(pages_per_request, triton.cdiv(per_sm * sms, max(1, requests * row_blocks))))
    return max(1, triton.cdiv(pages_per_request, splits))


def launch_maxnreg(words: bool, rows_per_block: int, tuning: dict) -> int:
    """Register cap (``maxnreg``) of one launch, 0 for none. ``tuning["maxnreg"]`` (0 = none)
    sets every launch; by default only the launch fed payload words (``payload_words``: the
    fix-up pair's hot kernel with the PTX builder and FP4 queries, CUDA only) with one-row
    blocks is capped, at 168.

    Measured on the H200 (docs/benchmarks.md, 2026-12-03 (day)): that kernel wants 242
    registers, which fit two programs per SM; capped at 168 (32 bytes of spills in a local sm_90
    compile) three fit, and next_n=1 goes from 111 to 95 us. Left uncapped: bf16 queries
    (slower with the cap), two-row blocks and the portable builder (both spill hundreds of bytes
    under it), the exact pass and the inline form (not measured with it).

    Inductor compiles a user kernel with no ``maxnreg``, so under torch.compile the hot kernel
    runs uncapped (111 us, torch 2.11)."""
    if "maxnreg" in tuning:
        return tuning["maxnreg"] or 0
    return 168 if words and rows_per_block == 1 else 0


def _sixteen_byte_aligned(cache: torch.Tensor) -> bool:
    """Whether every section starts 16-byte aligned. The PTX builder packs each thread's four
    consecutive payload bytes into one register; Triton keeps 16 consecutive bytes per thread
    only when it can prove 16-byte alignment, and with less the packs mix columns (measured:
    wrong scores at an odd offset). allocate_merged_cache keeps offsets and strides at
    multiples of 16; anything else takes the portable integer builder (same results)."""
    return rows_aligned(cache, 16)


def launch_score_paged(
    out, q_payload, q_scales, cache, weights, block_table, query_starts, row_ends, max_query_len, **tuning
) -> None:
    """Launch the scorer; ``tuning`` (tile_pages, num_warps, num_stages, splits_per_sm, maxnreg,
    max_columns, asm, exact) is for benchmarks/score_variants.py and is not part of the API.

    ``q_scales=None``: ``q_payload`` holds unquantized queries float [rows, H, 128], scored as
    bf16 against the FP4 keys (the higher-recall mode)."""
    rows, heads = q_payload.shape[:2]
    requests, pages_per_request = block_table.shape
    if rows == 0 or requests == 0 or pages_per_request == 0:
        return
    query_float = q_scales is None
    gpu = cache.device.type == "cuda"
    if query_float:
        # bf16 queries; the interpreter has no bf16 arithmetic and takes their exact float32 values.
        q_payload = q_payload.to(torch.bfloat16).contiguous()
        if not gpu:
            q_payload = q_payload.float()
        q_scales = q_payload
    for name, t in (("query[0] (payload)", q_payload), ("query[1] (scales)", q_scales)):
        if not t.is_contiguous():
            raise ValueError(f"{name}: expected the contiguous tensor quantize_queries returns, got strides {t.stride()}")
    # Rows of a request are scored together up to 128 columns (rows x heads);
    # longer verify groups are split into row blocks, each still sharing its key reads.
    rows_per_block = min(triton.next_power_of_2(max_query_len), max(1, tuning.get("max_columns", 128) // heads))
    row_blocks = triton.cdiv(max_query_len, rows_per_block)
    # Measured on the H200 (docs/benchmarks.md, 2026-12-03): two pages per tile with the fix-up
    # form, at every verify length.
    tile_pages = tuning.get("tile_pages", 2)
    pages_per_split = split_plan(requests, pages_per_request, row_blocks, cache.device, tuning.get("splits_per_sm", 4))
    pages_per_split = triton.cdiv(pages_per_split, tile_pages) * tile_pages
    grid = (requests, triton.cdiv(pages_per_request, pages_per_split), row_blocks)
    asm = tuning.get("asm", gpu and torch.version.hip is None and _sixteen_byte_aligned(cache))
    # "fixup" (the default): a hot kernel without the exact path and without a per-tile vote,
    # then the exact path in the programs that marked a key; 1.5-1.7x faster than "inline"
    # (both paths in one kernel) on the H200 (docs/benchmarks.md).
    exact = tuning.get("exact", "fixup")
    if exact not in ("inline", "fixup"):
        raise ValueError(f"exact: expected 'inline' or 'fixup', got {exact!r}")
    flags = query_starts  # never touched in the one-kernel form (a read-only stand-in)
    modes = (0,)
    if exact == "fixup":
        flags = torch.empty(grid[0] * grid[1] * grid[2], dtype=torch.uint8, device=out.device)
        modes = (1, 2)
    for mode in modes:
        words = asm and payload_words(mode, query_float)
        maxnreg = launch_maxnreg(words, rows_per_block, tuning)
        wrap_triton(score_paged_kernel)[grid](
            out, out.stride(0), q_payload, q_scales, cache, cache.stride(0), weights, weights.stride(0), weights.stride(1),
            block_table, block_table.stride(0), block_table.stride(1), query_starts, row_ends, pages_per_split, flags,
            HEADS=heads, ROWS=rows_per_block, TILE_PAGES=tile_pages, ASM=asm,
            QUERY_FLOAT=query_float, DOT_DTYPE=tl.bfloat16 if gpu else tl.float32, MODE=mode,
            WORDS=words,
            num_warps=tuning.get("num_warps", 4),
            num_stages=tuning.get("num_stages", 3),
            **({"maxnreg": maxnreg} if maxnreg else {}),
        )
