"""Paged FP4 indexer scoring with shared-key row groups, on exact integer tensor cores.

A program scores a run of pages of a request for *all* of that request's rows
(up to ``ROWS``), so each key page is read once per request, not once per
verify row. Keys are the MMA's M side (64 * TILE_PAGES tokens), the request's
rows x heads its N side.

The work is balanced across requests in the kernel, with no host step: the
pages that each request's longest row needs are laid end to end (in whole
tiles, each request led by a few tiles' worth of what starting on it costs) and
cut into one equal share per program, so a long request is spread over many
programs and short ones share one; a ragged batch takes as long as its total of
keys says, not as its longest request. The hot pass of FP4 queries
loads the keys straight into the dot operand's layout (``tile_keys``); with at
most 64 columns (next_n=1 at 64 heads) it runs 16 warps per program, one program
per SM; with more (two-row blocks) 8 warps, one program per SM, two tiles per step
(``launch_plan``).

E2M1 values times 2 are the integers {0, 1, 2, 3, 4, 6, 8, 12}. Within one
key (and one query head) the four group scales usually differ by at most
2**3, so each group is shifted left by 3 minus its distance to the largest
scale (``FOLD_LIMIT``; 12 << 3 = 96 still fits int8) and the whole
128-element dot runs as one int8 x int8 -> int32 product: exact, whatever the
order of accumulation. The largest scales come back as one
factor per key and one per column, and since ``relu(a * s) = s * relu(a)``
for ``s > 0`` the per-column factor folds into the head weights:

    logit[j] = 2**(kmax[j] - 131) * sum_c w[c] 2**(qmax[c] - 131) * relu(acc[j, c])

A key whose group scales span more than 2**3 (or a query that does) takes the
exact slow path: one int8 dot per class of the key's group scales, each scaled in
float32 (``fold_classes``, after the word-fed hot pass), or one masked dot per
group (``exact_tile``: a query that does not fold, bf16 queries, caches without
16-byte rows, the one-launch form). By default
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

import re

import torch
import triton
import triton.language as tl
from torch.library import wrap_triton

from .. import formats as F
from . import cdiv, next_power_of_2, rows_aligned, sm_count

FOLD_LIMIT = tl.constexpr(3)  # 12 << 3 = 96 still fits int8
SCHEDULE_CHUNK = 128  # requests the in-kernel schedule takes per step

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


# The builder's code tables of a (key, group), one instruction each: the magnitudes 0, 1, 2, 3 and
# 4, 6, 8, 12 shifted left by the group's fold, zero for a group left out (a negative fold: PTX
# shl reads the amount unsigned and clamps it to 32). No select, no clamp of the fold (H200,
# next_n=1: 87.9 against 89.1 us, 10 instructions fewer per tile).
_CODE_TABLES_ASM = tl.constexpr("{ shl.b32 $0, 0x03020100, $2; shl.b32 $1, 0x0C080604, $2; }")


# Triton's (major, minor), None for a version string that does not start with them (taken as new).
_VERSION = re.match(r"(\d+)\.(\d+)", triton.__version__)
_TRITON = None if _VERSION is None else (int(_VERSION.group(1)), int(_VERSION.group(2)))

# Ping-pong of the 16-warp hot loop (4 pages per tile, at most 64 columns: next_n=1 at 64 heads,
# next_n=2 at 32): the CTA's halves (warpgroups 0-1, threads below 256, and 2-3) take turns at
# the dot, each while the other builds its next operands or sums its logits, through named
# barriers 1 and 2 in their non-aligned forms (the halves meet a barrier at different places).
# The first half waits on 1 before its dot and signals 2 after it; the second waits on 2 and
# signals 1. Before the loop the second half signals 1 once, so the first half goes first; after
# it the first half takes that signal back, so a loop leaves both barriers as it found them, and
# the CTA barrier before the loop keeps the next loop's first signal after that. No data passes
# between the halves: the barriers only order them. Each step passes one operand through
# unchanged, so that its place follows the data (asm declared pure, as Inductor's analysis
# needs): the wait after the key operand is built, the signal once the dot's result is in
# (ptxas may sink it below the epilogue, never past a barrier). No CTA barrier may fall between
# a wait and its signal (a half would wait there for the other, which waits for its signal):
# Triton puts its layout conversions outside that window, and tests/test_prmt.py checks the
# protocol and the compiled loop. Whether a Triton version keeps CTA barriers out of that window
# is known only for the versions compiled there (3.6, 3.7); on any other the loop keeps Triton's
# lockstep.
_PINGPONG_TRITON = tl.constexpr(_TRITON in ((3, 6), (3, 7)))


def _pingpong_asm(step: str, registers: int) -> str:
    moves = " ".join(f"mov.b32 ${i}, ${i + registers};" for i in range(registers))
    return ("{ .reg .pred p; .reg .u32 t, b; mov.u32 t, %tid.x; setp.lt.u32 p, t, 256; " + step + " " + moves
            + " }")


def _pingpong_constraints(registers: int) -> str:
    return ",".join(["=r"] * registers + ["r"] * registers)


# On the key operand's 32 int8 per thread (8 registers), the accumulator's 32 int32 and a scalar.
_PINGPONG_WAIT = tl.constexpr(_pingpong_asm("selp.u32 b, 1, 2, p; barrier.sync b, 512;", 8))
_PINGPONG_SIGNAL = tl.constexpr(_pingpong_asm("selp.u32 b, 2, 1, p; barrier.arrive b, 512;", 32))
_PINGPONG_FIRST = tl.constexpr(_pingpong_asm("@!p barrier.arrive 1, 512;", 1))
_PINGPONG_LAST = tl.constexpr(_pingpong_asm("@p barrier.sync 1, 512;", 1))
_PINGPONG_8 = tl.constexpr(_pingpong_constraints(8))
_PINGPONG_32 = tl.constexpr(_pingpong_constraints(32))
_PINGPONG_1 = tl.constexpr(_pingpong_constraints(1))


@triton.jit
def pingpong(x, STEP: tl.constexpr, CONSTRAINTS: tl.constexpr, PACK: tl.constexpr):
    """``x`` unchanged, after one ping-pong step (``_PINGPONG_*``) in every thread: PACK must be
    at least the number of x's elements per thread, so that each thread makes one asm call
    (Triton pads a short pack)."""
    return tl.inline_asm_elementwise(STEP, CONSTRAINTS, [x], dtype=x.dtype, is_pure=True, pack=PACK)


@triton.jit
def code_tables(shift):
    """int32 (lo, hi): the PTX builder's code tables at ``shift`` (int32, any shape), 0 where shift < 0."""
    return tl.inline_asm_elementwise(_CODE_TABLES_ASM, "=r,=r,r", [shift], dtype=(tl.int32, tl.int32),
                                     is_pure=True, pack=1)


@triton.jit
def signed_magnitude(nibble, shift):
    """E2M1 nibble (int32) -> int32 value * 2 << shift (the interpreter's operand builder)."""
    c = nibble & 7
    magnitude = tl.where(c == 0, 0, ((2 | (c & 1)) << (c >> 1)) >> 1) << shift
    return tl.where((nibble & 8) != 0, -magnitude, magnitude)


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
_GROUP_LAST = tl.constexpr(_TRITON is None or _TRITON >= (3, 7))


@triton.jit
def tile_page_ids(bt_row, block_table_page_stride, first, page_end, TILE_PAGES: tl.constexpr, WARPS: tl.constexpr):
    """Page ids of the tile's rows (block-table entries from ``first``, clamped to the share's
    last page ``page_end - 1``, so slots past the share read a page of the share itself: never
    stored, and never flagging the program for the exact pass), int64, shaped as ``tile_rows``
    with 1 for every dimension but warp and repeat."""
    _, rep, w, _, _ = tile_axes(TILE_PAGES, WARPS)
    index = tl.minimum(first + (rep * (16 * WARPS) + w * 16) // 64, page_end - 1)
    return tl.load(bt_row + index * block_table_page_stride).to(tl.int64)


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
    own dimension of [group, lane row, warp, row bit 3, repeat, 1], or with ``_GROUP_LAST`` of
    [row bit 3, repeat, warp, lane row, group, 1]."""
    REPS: tl.constexpr = 64 * TILE_PAGES // (16 * WARPS)
    warp = tl.arange(0, WARPS)[None, None, :, None, None, None]
    if _GROUP_LAST:
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
    scale_at = cache_ptr + page * page_stride + 4096 + (token % 16) * 4 + token // 16 + c * 64
    # To [repeat, warp, row bit 3, lane row, group].
    if _GROUP_LAST:
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
    words = cache_ptr.to(tl.pointer_type(tl.int32)) + page * (page_stride // 4)
    x6 = tl.load(words + c * 256 + token * 4 + j4)
    # To [repeat, warp, row bit 3, lane row, word, group].
    if _GROUP_LAST:
        x6 = tl.permute(x6, (1, 2, 0, 3, 5, 4))
    else:
        x6 = tl.permute(x6, (4, 2, 3, 1, 5, 0))
    return tl.reshape(x6, (M, 16))


@triton.jit
def st_f32(address, value, mask):
    """Store float32 ``value`` at int64 ``address`` where ``mask``, in the value's own layout (a
    tl.store takes a coalescing layout, which costs a shared-memory round trip here). Returns 0,
    which the caller must keep live: the asm is declared pure, so that Inductor's analysis of
    the kernel (which gives up on impure asm and then takes every tensor argument as written)
    sees the kernel write ``out`` and the flags only; a pure asm whose result is unused would be
    removed."""
    return tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.b32 p, $3, 0; @p st.global.b32 [$1], $2; mov.b32 $0, 0; }", "=r,l,r,r",
        [address, value.to(tl.int32, bitcast=True), mask.to(tl.int32)], dtype=tl.int32, is_pure=True, pack=1)


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


@triton.jit
def widen(per_group, times: tl.constexpr):
    """[M, G] -> [M, G * times]: each value repeated ``times`` times in place."""
    M: tl.constexpr = per_group.shape[0]
    G: tl.constexpr = per_group.shape[1]
    return tl.reshape(tl.broadcast_to(per_group[:, :, None], (M, G, times)), (M, G * times))


@triton.jit
def widen_groups(per_group):
    """[M, 4] -> [M, 64]: column k takes group (k // 4) % 4 (the hot loop's permuted K order)."""
    M: tl.constexpr = per_group.shape[0]
    return tl.reshape(tl.broadcast_to(per_group[:, None, :, None], (M, 4, 4, 4)), (M, 64))


@triton.jit
def key_operands(x, x2, shift, ASM: tl.constexpr, WORDS: tl.constexpr = False):
    """int8 operands (a, b) [M, 64] of the keys; ``shift`` int32 [M, 4]: left shift per group,
    -1 for a group left out. From ``load_key_bytes`` (x, x2), or with ``WORDS`` from the payload
    words of ``tile_keys`` (x [M, 16], in the permuted K order: column k of ``a`` is element
    k % 4 of word k // 4, of ``b`` element 4 + k % 4; word w belongs to group w % 4).

    The PTX builder's pack=4 ties it to its layout: each call must see four consecutive columns
    of one row. Fed from a byte load, it keeps that load's layout (16 bytes per thread). Fed from
    words, it runs in the int8 dot operand's layout (four consecutive K per register).
    tests/test_prmt.py compiles the kernel for sm_90 and checks the layout of every call."""
    if ASM:
        lo, hi = code_tables(shift)
        if WORDS:
            lo = widen_groups(lo)
            hi = widen_groups(hi)
            a, b = tl.inline_asm_elementwise(
                _PRMT_ASM_WORDS, "=r,=r" + ",r" * 12, [widen(x, 4), lo, hi], dtype=(tl.int8, tl.int8),
                is_pure=True, pack=4,
            )
        else:
            lo = widen(lo, 16)
            hi = widen(hi, 16)
            a, b = tl.inline_asm_elementwise(
                _PRMT_ASM_BYTES, "=r,=r" + ",r" * 9, [x, lo, hi], dtype=(tl.int8, tl.int8), is_pure=True, pack=4,
            )
        return a, b
    elif WORDS:
        s = widen_groups(shift)
        word = widen(x, 4)
        nibble_shift = (tl.arange(0, 64)[None, :] % 4) * 4
        a = signed_magnitude((word >> nibble_shift) & 15, tl.maximum(s, 0))
        b = signed_magnitude((word >> (nibble_shift + 16)) & 15, tl.maximum(s, 0))
        return tl.where(s >= 0, a, 0).to(tl.int8), tl.where(s >= 0, b, 0).to(tl.int8)
    else:
        s = widen(shift, 16)
        nibble_shift = (tl.arange(0, 64)[None, :] % 2) * 4
        a = signed_magnitude(x.to(tl.int32) >> nibble_shift, tl.maximum(s, 0))
        b = signed_magnitude(x2.to(tl.int32) >> nibble_shift, tl.maximum(s, 0))
        return tl.where(s >= 0, a, 0).to(tl.int8), tl.where(s >= 0, b, 0).to(tl.int8)


@triton.jit
def word_operands(k_exp, x, fewest, ASM: tl.constexpr):
    """A word-fed tile's (k_max, a, b, fewest): each key's largest group scale, the folded int8
    operands, and ``fewest`` updated with the tile's smallest fold per slot."""
    k_max = tl.max(k_exp, axis=1)
    k_fold = FOLD_LIMIT - (k_max[:, None] - k_exp)
    a, b = key_operands(x, x, k_fold, ASM, True)
    return k_max, a, b, tl.minimum(fewest, tl.min(k_fold, axis=1))


@triton.jit
def query_operands(q_base, c_ok, shift, PERMUTED: tl.constexpr = False):
    """int8 operands (a, b) [64, N] of the query columns at ``q_base`` [N] (64 payload bytes each);
    ``shift`` int32 [N, 4] per group, -1 for a group left out. ``PERMUTED``: in the K order of
    ``key_operands`` from words (K word w holds payload word 4 * (w % 4) + w // 4)."""
    k = tl.arange(0, 64)[:, None]
    N: tl.constexpr = shift.shape[0]
    if PERMUTED:
        word = 4 * ((k // 4) % 4) + k // 16
        s = tl.reshape(tl.broadcast_to(tl.trans(shift)[None, :, None, :], (4, 4, 4, N)), (64, N))
    else:
        word = k // 4
        s = tl.reshape(tl.broadcast_to(tl.trans(shift)[:, None, :], (4, 16, N)), (64, N))
    byte = word * 4 + (k % 4) // 2
    nibble_shift = (k % 2) * 4
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
               ASM: tl.constexpr, QUERY_FLOAT: tl.constexpr, DOT_DTYPE: tl.constexpr, WORDS: tl.constexpr = False):
    """The exact path for one tile: one masked dot per group, each scaled in float32. ``WORDS``:
    keys from ``tile_keys`` and query operands in its permuted K order."""
    M: tl.constexpr = k_exp.shape[0]
    g4 = tl.arange(0, 4)[None, :]
    s = tl.zeros((M, ROWS * HEADS), dtype=tl.float32)
    for g in range(4):
        only_g = tl.where(g4 == g, 0, -1)
        ka, kb = key_operands(x, x2, tl.zeros_like(k_exp) + only_g, ASM, WORDS)
        acc = key_dot(ka, kb, qa_raw, qb_raw, QUERY_FLOAT, DOT_DTYPE)
        k_scale = power_of_two(tl.sum(tl.where(g4 == g, k_exp, 0), axis=1), 0.5)
        # FP4 query operands are 2 * value; unquantized ones are the value.
        q_scale = power_of_two(tl.sum(tl.where(g4 == g, q_exp, 0), axis=1), 1.0 if QUERY_FLOAT else 0.5)
        s += acc.to(tl.float32) * (k_scale[:, None] * q_scale[None, :])
    store_exact_logits(s, w, out_at, out_ok, ROWS, HEADS)


@triton.jit
def store_exact_logits(s, w, out_at, out_ok, ROWS: tl.constexpr, HEADS: tl.constexpr):
    """Store the logits of a tile scored in float32 (``s`` [M, ROWS * HEADS], the scaled dot
    before the relu): relu that keeps NaN (a NaN group must give a NaN logit), times the head
    weights, summed over heads."""
    M: tl.constexpr = s.shape[0]
    weighted = tl.where(s < 0.0, 0.0, s) * w[None, :]
    tl.store(out_at, tl.sum(tl.reshape(weighted, (M, ROWS, HEADS)), axis=2), mask=out_ok)


@triton.jit
def fold_classes(x, k_exp, k_max, qa, qb, q_factor, ASM: tl.constexpr, DOT_DTYPE: tl.constexpr):
    """float32 [M, N]: the word-fed keys (``tile_keys``) against the folded query operands,
    exact for any spread of a key's group scales: the dot of each (key, column) before the
    relu. The groups are taken in classes: each class holds the groups left whose scales lie
    within FOLD_LIMIT of the largest one left, and costs one int8 dot, scaled in float32 by
    its own base and ``q_factor`` (the column's, [N]). Each class is scaled on its own, as the
    per-group path does, so a lower class stays whole when the higher ones cancel. A key whose
    scales fold is one class; four groups make at most four."""
    M: tl.constexpr = k_exp.shape[0]
    N: tl.constexpr = qa.shape[1]
    total = tl.zeros((M, N), dtype=tl.float32)
    left = k_exp >= 0  # every group, [M, 4]
    base = k_max
    for _ in range(4):
        if tl.max(tl.max(left.to(tl.int32), axis=1), axis=0) > 0:
            fold = FOLD_LIMIT - (base[:, None] - k_exp)
            take = left & (fold >= 0)
            ka, kb = key_operands(x, x, tl.where(take, fold, -1), ASM, True)
            acc = key_dot(ka, kb, qa, qb, False, DOT_DTYPE)
            # Operands are 2 * value << fold: 2**(base - 127 - 3 - 1) per key (NaN at 255).
            total += acc.to(tl.float32) * (power_of_two(base, 0.0625)[:, None] * q_factor[None, :])
            left = left & ~take
            base = tl.max(tl.where(left, k_exp, 0), axis=1)
    return total


@triton.jit
def folded_logits(acc, w_folded, ROWS: tl.constexpr, HEADS: tl.constexpr, ASM: tl.constexpr, QUERY_FLOAT: tl.constexpr):
    """[M, ROWS] logits of a tile on the folded path, before the key's own factor: relu of the
    dot [M, ROWS * HEADS], times the folded head weights, summed over heads."""
    M: tl.constexpr = acc.shape[0]
    if ASM and not QUERY_FLOAT:
        # relu and conversion in one FMUL.SAT of acc's bits as float32: a value 0 <= acc < 2**21
        # reads as the subnormal acc * 2**-149 (exact), times 2**127 it is acc * 2**-22 (normal);
        # a negative one reads as NaN, which .sat makes 0. No integer max, no int-to-float
        # conversion.
        relu = tl.inline_asm_elementwise(_RELU_ASM, "=r,r", [acc], dtype=tl.int32, is_pure=True, pack=1)
        relu = relu.to(tl.float32, bitcast=True)
        unscale = _RELU_UNSCALE
    else:
        # relu that keeps NaN (an unquantized query may hold one).
        relu = tl.where(acc < 0, 0, acc).to(tl.float32)
        unscale = 1.0
    weighted = relu * w_folded[None, :]
    return tl.sum(tl.reshape(weighted, (M, ROWS, HEADS)), axis=2) * unscale


@triton.jit
def score_request(
    request, share_begin, share_end, fewest,
    out_ptr, out_stride, q_payload_ptr, q_scales_ptr, cache_ptr, page_stride,
    weights_ptr, weights_stride, weights_head_stride,
    block_table_ptr, block_table_stride, block_table_page_stride, query_starts_ptr, row_ends_ptr, width, num_rows,
    HEADS: tl.constexpr, ROWS: tl.constexpr, TILE_PAGES: tl.constexpr, ASM: tl.constexpr, QUERY_FLOAT: tl.constexpr,
    DOT_DTYPE: tl.constexpr, MODE: tl.constexpr, WORDS: tl.constexpr, WARPS: tl.constexpr, PAIRS: tl.constexpr,
):
    """Pages [share_begin, share_end) of ``request`` for all of its rows (its row blocks from
    program_id(1) on, in steps of num_programs(1)); returns ``fewest`` (MODE 1), updated."""
    N: tl.constexpr = ROWS * HEADS
    M: tl.constexpr = 64 * TILE_PAGES
    # Rows end at the launch's last row, whatever query_starts says. (Written out here, in
    # request_units and in the kernel's per-request loop: with one @triton.jit helper for the
    # three, Inductor's analysis (torch 2.13) reports query_starts and row_ends as written.)
    request_start = tl.minimum(tl.load(query_starts_ptr + request), num_rows)
    request_rows = tl.minimum(tl.load(query_starts_ptr + request + 1), num_rows) - request_start
    # Row blocks beyond the launch's (sized from max_query_len) are taken in turn by the
    # same programs: the hint sets the launch shape, never which rows get scored.
    for row_block in range(tl.program_id(1), tl.cdiv(request_rows, ROWS), tl.num_programs(1)):
        first_row = request_start + row_block * ROWS
        rows_here = request_rows - row_block * ROWS
        rr = tl.arange(0, ROWS)
        # A row's keys end at the block table's width (a longer row_ends reads and writes no further).
        row_ends = tl.minimum(tl.load(row_ends_ptr + first_row + rr, mask=rr < rows_here, other=0), width)
        # Only the pages that the longest row of this block needs are read.
        pages_needed = tl.cdiv(tl.max(row_ends, axis=0), 64)
        page_begin = share_begin
        page_end = tl.minimum(share_end, pages_needed)
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
                qa, qb = query_operands(q_base, c_ok, tl.maximum(q_fold, 0), WORDS)
                qa_raw, qb_raw = query_operands(q_base, c_ok, tl.zeros_like(q_exp), WORDS)
                w_folded = w * power_of_two(q_max, 0.0625)
            w_folded = tl.where(c_ok, w_folded, 0.0)
            if MODE == 1:
                fewest = tl.where(query_folds, fewest, -1)  # a query that does not fold: all exact

            m = tl.arange(0, M)
            token = (m % 64)[:, None]
            scale_at = (4096 + (m % 64 % 16) * 4 + (m % 64) // 16)[:, None] + g4 * 64
            bt_row = block_table_ptr + request.to(tl.int64) * block_table_stride
            if MODE == 2 and WORDS:
                # The exact pass over word-fed tiles: a tile whose keys all fold was scored by the
                # hot pass; any other takes one dot per class of its keys' group scales
                # (fold_classes), or, for a query that does not fold, one per group (exact_tile).
                # Only the scales are read ahead (page ids two tiles, scales one): the payload of
                # a tile is read when the tile needs it.
                page = tile_page_ids(bt_row, block_table_page_stride, page_begin, page_end, TILE_PAGES, WARPS)
                k_exp = tile_scales(cache_ptr, page_stride, page, TILE_PAGES, WARPS)
                page_ahead = tile_page_ids(bt_row, block_table_page_stride, page_begin + TILE_PAGES, page_end,
                                           TILE_PAGES, WARPS)
                for tile in range(page_begin, page_end, TILE_PAGES):
                    cur_page, cur_exp = page, k_exp
                    page = page_ahead
                    k_exp = tile_scales(cache_ptr, page_stride, page, TILE_PAGES, WARPS)
                    page_ahead = tile_page_ids(bt_row, block_table_page_stride, tile + 2 * TILE_PAGES, page_end,
                                               TILE_PAGES, WARPS)
                    k_max = tl.max(cur_exp, axis=1)
                    k_fold = FOLD_LIMIT - (k_max[:, None] - cur_exp)
                    if not (query_folds and tl.min(tl.min(k_fold, axis=1), axis=0) >= 0):
                        x = tile_words(cache_ptr, page_stride, cur_page, TILE_PAGES, WARPS)
                        j = tile * 64 + m
                        out_at, out_ok = tile_outputs(out_ptr, out_stride, first_row, rows_here, row_ends, j)
                        if query_folds:
                            total = fold_classes(x, cur_exp, k_max, qa, qb, power_of_two(q_max, 0.0625), ASM,
                                                 DOT_DTYPE)
                            store_exact_logits(total, w, out_at, out_ok, ROWS, HEADS)
                        else:
                            # The portable builder: Triton lays the PTX one out here without
                            # four consecutive K per call (tests/test_prmt.py).
                            exact_tile(x, x, cur_exp, qa_raw, qb_raw, q_exp, w, out_at, out_ok, ROWS, HEADS, False,
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
                # Barriers: the 16-warp loop at 4 pages ping-pongs its halves (_PINGPONG_WAIT);
                # the CTA barrier Triton would leave before each tile's first dot (for the query
                # operand) is taken before the loop. H200, next_n=1: 89.6-90.0 us against
                # 94.2-94.4 for the four warpgroups in lockstep, and 97 for no barrier at all.
                # The paired 8-warp loop has none, and one per step costs a quarter (118 vs 146
                # us at next_n=2): one warpgroup's dot runs under the other's build and epilogue.
                STEP: tl.constexpr = (2 if PAIRS else 1) * TILE_PAGES
                # The ping-pong steps' packs hold one call per thread: 32 int8 of the key operand
                # (16 warps x 4 pages), at most 32 accumulator entries (at most 64 columns).
                PINGPONG: tl.constexpr = (_PINGPONG_TRITON and ASM and (not QUERY_FLOAT) and (not PAIRS) and WARPS == 16
                                          and TILE_PAGES == 4 and N <= 64)
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
                if PINGPONG:
                    tl.debug_barrier()
                    page_begin = pingpong(page_begin, _PINGPONG_FIRST, _PINGPONG_1, 1)
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
                        ka = pingpong(ka, _PINGPONG_WAIT, _PINGPONG_8, 32)
                    acc0 = key_dot(ka, kb, qa, qb, QUERY_FLOAT, DOT_DTYPE)
                    if PINGPONG:
                        acc0 = pingpong(acc0, _PINGPONG_SIGNAL, _PINGPONG_32, 32)
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
                    fewest += pingpong(page_end, _PINGPONG_LAST, _PINGPONG_1, 1) - page_end
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
def request_units(query_starts_ptr, row_ends_ptr, first, requests, width, num_rows, UNIT_PAGES: tl.constexpr,
                  CHUNK: tl.constexpr):
    """int32 [CHUNK]: of requests first .. first + CHUNK - 1 (0 past the last), the pages that
    each one's longest row needs (its keys cut to ``width``, the block table's, and its rows to
    the launch's ``num_rows``), in whole units of UNIT_PAGES pages."""
    request = first + tl.arange(0, CHUNK)
    inside = request < requests
    start = tl.minimum(tl.load(query_starts_ptr + request, mask=inside, other=0).to(tl.int32), num_rows)
    rows = tl.minimum(tl.load(query_starts_ptr + request + 1, mask=inside, other=0).to(tl.int32), num_rows) - start
    longest = tl.zeros((CHUNK,), dtype=tl.int32)
    for i in range(0, tl.max(rows, axis=0)):
        longest = tl.maximum(longest, tl.load(row_ends_ptr + start + i, mask=i < rows, other=0).to(tl.int32))
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
):
    # MODE 0: both paths in one loop, one vote per tile on which to take. MODE 1: the folded
    # path for every key, no vote; a key that does not fold keeps only its folding groups and
    # marks its program (one flag byte). MODE 2 (launched after 1, on SPLIT times its programs
    # along axis 0): the exact path for the tiles that do not fold, in the programs whose share
    # lies in a marked one's (word-fed: fold classes, see launch_forms). Program q's share is
    # part q % SPLIT of program q // SPLIT's: cut from the same units, the shares nest exactly.
    # 1 + 2 keep the exact path's registers and the per-tile vote out of the hot loop.
    M: tl.constexpr = 64 * TILE_PAGES
    # The word-fed loop's asm stores stay in the code only through the flag, which MODE 1 writes.
    tl.static_assert(MODE != 0 or not WORDS, "the word-fed loop runs as the hot pass (MODE 1) only")
    fewest = tl.full((M,), FOLD_LIMIT, tl.int32)  # MODE 1: each slot's smallest fold seen
    flag_at = flags_ptr + (tl.program_id(0) // SPLIT) * tl.num_programs(1) + tl.program_id(1)
    run = True
    if MODE == 2:
        # A program whose hot share marked nothing leaves before it computes the schedule: the
        # exact pass of a batch whose keys all fold costs 1.5-2 us instead of 6 (H200).
        run = tl.load(flag_at) != 0
    if run:
        fewest = score_share(
            fewest, out_ptr, out_stride, q_payload_ptr, q_scales_ptr, cache_ptr, page_stride, weights_ptr,
            weights_stride, weights_head_stride, block_table_ptr, block_table_stride, block_table_page_stride,
            query_starts_ptr, row_ends_ptr, requests, width, num_rows, HEADS, ROWS, TILE_PAGES, SHARE_PAGES,
            SETUP_UNITS, CHUNK, ASM, QUERY_FLOAT, DOT_DTYPE, MODE, WORDS, WARPS, PAIRS)
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
    PAIRS: tl.constexpr,
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
        start = tl.minimum(tl.load(query_starts_ptr + request), num_rows)
        longest = 0
        for i in range(0, tl.minimum(tl.load(query_starts_ptr + request + 1), num_rows) - start):
            longest = tl.maximum(longest, tl.load(row_ends_ptr + start + i).to(tl.int32))
        units = tl.cdiv(tl.minimum(longest, width), 64 * SHARE_PAGES)
        first_page = (first_unit + SETUP_UNITS) * SHARE_PAGES
        fewest = score_request(
            request, tl.maximum(begin * SHARE_PAGES - first_page, 0), end * SHARE_PAGES - first_page, fewest,
            out_ptr, out_stride, q_payload_ptr, q_scales_ptr, cache_ptr, page_stride, weights_ptr, weights_stride,
            weights_head_stride, block_table_ptr, block_table_stride, block_table_page_stride,
            query_starts_ptr, row_ends_ptr, width, num_rows, HEADS, ROWS, TILE_PAGES, ASM, QUERY_FLOAT, DOT_DTYPE, MODE, WORDS,
            WARPS, PAIRS)
        first_unit += with_setup(units, SETUP_UNITS)
        request += 1
    return fewest


def word_fed_pass(exact: str, query_float: bool) -> bool:
    """Whether a call's hot pass may take the word-fed loop (``tile_keys``: payload words loaded
    in the int8 dot operand's layout, four consecutive K per register): the fix-up form with
    integer scoring (FP4 queries). The launcher also needs the words aligned."""
    return exact == "fixup" and not query_float


def wide_hot_pass(word_fed: bool, num_warps: int) -> bool:
    """Whether a launch's hot pass is the 16-warp word-fed kernel, whose exact pass runs on the
    same tiles and warps, on its own programs, and whose shares count 4 setup units."""
    return word_fed and num_warps >= 16


def launch_plan(word_fed: bool, columns: int, tuning: dict) -> tuple[int, int, int, bool, int, int]:
    """(pages per tile, warps, programs per SM, tiles in pairs, exact-pass split, setup units) of
    one launch pair; ``word_fed``: its hot kernel takes the word-fed loop; ``columns``: rows per
    block x heads. ``tuning`` (tile_pages, num_warps, programs_per_sm, pairs, exact_split,
    setup_units) overrides each.

    Measured on the H200 (docs/benchmarks.md), with equal shares, B=64 x 32768:
    - the word-fed hot kernel with at most 64 columns (next_n=1 at 64 heads): 16 warps x 4
      pages, one program per SM, one tile per step. 512 threads hold ptxas to 128 registers
      without a cap, so torch.compile (Inductor passes no ``maxnreg``) runs it as fast as eager:
      88.0-88.1 us, against 91.3-91.7 with tiles in pairs and 95.6 for 4 warps capped at 168
      registers (one run); its halves in ping-pong (score_request) take it from 94.2-94.4 to
      89.6-90.0 us in another.
    - the word-fed hot kernel with more columns (two-row blocks): 8 warps x 2 pages, one
      program per SM (254 registers, no spill), tiles in pairs: next_n=2 118.3 us, next_n=4
      215.1, B=16 x 131072 next_n=2 118.6, against 132.6 / 235.6 / 131 for the former 4 warps
      x 2 pages, two per SM, one tile per step (134.3 / 247.8 / 134.6 for 8 warps without pairs;
      pairs at 4 warps spill: 343 us at next_n=2).
    - everything else (bf16 queries, caches without 16-byte rows): 4 warps x 2 pages, two
      programs per SM.
    - after the two-row hot kernel, the exact pass on twice its programs (``launch_forms``):
      with 0.1 % of keys holding a group 2**6 above the rest, next_n=2 226.5 us against 298.9 on
      the hot pass's own programs, B=16 x 131072 223.4 against 291.0. After the 16-warp one, on
      its own programs: every program of a 16-warp exact pass needs an SM to itself, and twice
      the programs take two waves even when no key needs the pass (64 x 32768, next_n=1: 84.8
      against 85.4 us; 238.5 against 240.8 with the outliers above).
    - setup units (``score_share``): 4 for the 16-warp hot kernel (64 x 32768: 80.8 us against
      84.3 with 0, 80.4 with 6, 83.8 with 12; 64 x 4096: 18.8 against 20.9, 22.9 with 12); none
      for the two-row one, where 1-4 gained nothing (next_n=2 113.7 us with 0, 114.2-115.8) and
      cost at next_n=4 (208.6 against 212.9-213.5).
    """
    if word_fed:
        plan = (4, 16, 1, False) if columns <= 64 else (2, 8, 1, True)
    else:
        plan = (2, 4, 2, False)
    keys = ("tile_pages", "num_warps", "programs_per_sm", "pairs")
    tile_pages, num_warps, per_sm, pairs = (tuning.get(key, default) for key, default in zip(keys, plan))
    wide = wide_hot_pass(word_fed, num_warps)
    split = tuning.get("exact_split", 1 if wide or not word_fed else 2)
    setup = tuning.get("setup_units", 4 if wide else 0)
    return tile_pages, num_warps, per_sm, pairs, split, setup


def launch_forms(exact: str, asm: bool, word_fed: bool, tile_pages: int, num_warps: int,
                 pairs: bool = False, split: int = 1, setup: int = 0) -> list[dict]:
    """The kernel launches of one call, in order, as their constexprs (``WARPS`` is also the
    launch's num_warps), all cutting their shares from the same units (``SHARE_PAGES``), the
    exact pass on ``split`` times the hot pass's programs (``SPLIT``: each hot share cut in
    ``split`` parts). Each form names every constexpr of the kernel beyond those the launcher
    passes, and the kernel gives none a default: Inductor's generated code (torch 2.11) passes
    None for a constexpr left to its default.

    ``exact="inline"``: one launch (MODE 0). ``"fixup"``: the hot pass (MODE 1, word-fed where
    ``word_fed``) and the exact pass (MODE 2), which only runs the tiles whose keys do not fold.
    - After a word-fed hot pass the exact pass is word-fed too: it reads the scales of its share
      ahead and the payload of a tile only when the tile needs it, and scores such a tile with
      one int8 dot per class of its keys' group scales (``fold_classes``), with the PTX builder.
      It runs on the wide hot kernel's 16 warps x 4 pages (more warps to hide the scan of a
      share), else on one page per tile on 4 warps (the float32 sum of a two-row block fits).
      H200, B=64 x 32768 with 0.1 % of keys holding a group 2**6 above the rest: 241 us at
      next_n=1 (split 1), 228 us at next_n=2 (split 2; 299 us with split 1, as the hot kernel
      there runs one 8-warp program per SM; 325 us for an exact pass of 8 warps x 2 pages;
      docs/benchmarks.md). A program whose hot share marked nothing leaves at once, so with no
      such key the exact pass costs about a launch (1.5 us at next_n=1, against 6 us when every
      program computed the schedule first).
    - Otherwise it builds with the portable integer builder, at most 2 pages per tile on 4
      warps: inside the loop over a share's requests, Triton 3.7 puts the byte-fed PTX builder
      in a layout that breaks pack=4 (tests/test_prmt.py compiles every default launch)."""
    if exact == "inline":
        return [dict(MODE=0, TILE_PAGES=tile_pages, SHARE_PAGES=tile_pages, SETUP_UNITS=setup, ASM=asm, WORDS=False,
                     WARPS=num_warps, PAIRS=False, SPLIT=1)]
    if word_fed:
        wide = wide_hot_pass(word_fed, num_warps)
        exact_pass = dict(TILE_PAGES=tile_pages if wide else 1, ASM=asm, WORDS=True, WARPS=num_warps if wide else 4)
    else:
        exact_pass = dict(TILE_PAGES=min(tile_pages, 2), ASM=False, WORDS=False, WARPS=4)
    return [dict(MODE=1, TILE_PAGES=tile_pages, SHARE_PAGES=tile_pages, SETUP_UNITS=setup, ASM=asm, WORDS=word_fed,
                 WARPS=num_warps, PAIRS=word_fed and pairs, SPLIT=1),
            dict(MODE=2, SHARE_PAGES=tile_pages, SETUP_UNITS=setup, PAIRS=False, SPLIT=split, **exact_pass)]


def _sixteen_byte_aligned(cache: torch.Tensor) -> bool:
    """Whether every section starts 16-byte aligned. The PTX builder packs each thread's four
    consecutive payload bytes into one register; Triton keeps 16 consecutive bytes per thread
    only when it can prove 16-byte alignment, and with less the packs mix columns (measured:
    wrong scores at an odd offset). allocate_merged_cache keeps offsets and strides at
    multiples of 16; anything else takes the portable integer builder (same results)."""
    return rows_aligned(cache, 16)


# The launcher's tunings (``launch_score_paged``): for the benchmarks, not part of the API.
TUNING_KEYS = ("tile_pages", "num_warps", "num_stages", "programs_per_sm", "pairs", "exact_split", "setup_units",
               "maxnreg", "max_columns", "asm", "exact")


def launch_score_paged(
    out, q_payload, q_scales, cache, weights, block_table, query_starts, row_ends, max_query_len, **tuning
) -> None:
    """Launch the scorer; ``tuning`` (``TUNING_KEYS``) is for benchmarks/score_variants.py and is
    not part of the API; a key outside it is an error, not a launch with the defaults. tile_pages and num_warps set the hot pass (and the shares); the exact
    pass takes its own (after a word-fed hot pass below 16 warps, and always after a byte-fed
    one), and exact_split times the hot pass's programs
    (``launch_forms``).

    ``q_scales=None``: ``q_payload`` holds unquantized queries float [rows, H, 128], scored as
    bf16 against the FP4 keys (the higher-recall mode)."""
    if tuning and not set(tuning) <= set(TUNING_KEYS):
        raise ValueError(f"tuning: expected keys among {TUNING_KEYS}, got {sorted(set(tuning) - set(TUNING_KEYS))}")
    rows, heads = q_payload.shape[:2]
    requests, pages_per_request = block_table.shape
    if rows == 0 or requests == 0 or pages_per_request == 0:
        return
    # The kernel reads entry i at ptr + i; other strides become a copy (a no-op when contiguous).
    query_starts, row_ends = query_starts.contiguous(), row_ends.contiguous()
    # A request has at most ``rows`` rows: a larger hint would only widen the launch. (Not with a
    # symbolic row count: the comparison would become a guard, a recompile per row bucket.)
    if isinstance(rows, int):
        max_query_len = min(max_query_len, rows)
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
    rows_per_block = min(next_power_of_2(max_query_len), max(1, tuning.get("max_columns", 128) // heads))
    row_blocks = cdiv(max_query_len, rows_per_block)
    asm = tuning.get("asm", gpu and torch.version.hip is None and _sixteen_byte_aligned(cache))
    # "fixup" (the default): a hot kernel without the exact path and without a per-tile vote,
    # then the exact path in the programs that marked a key; 1.5-1.7x faster than "inline"
    # (both paths in one kernel) on the H200 (docs/benchmarks.md).
    exact = tuning.get("exact", "fixup")
    if exact not in ("inline", "fixup"):
        raise ValueError(f"exact: expected 'inline' or 'fixup', got {exact!r}")
    # The word-fed hot loop: on the GPU with the PTX builder; the interpreter takes it too (with
    # the integer builder) wherever the words are 4-byte aligned, so CPU runs execute it.
    word_fed = word_fed_pass(exact, query_float) and (asm if gpu else rows_aligned(cache, 4))
    tile_pages, num_warps, per_sm, pairs, split, setup = launch_plan(word_fed, rows_per_block * heads, tuning)
    if word_fed and (64 * tile_pages) % (16 * num_warps):
        raise ValueError(f"tile_pages: the word-fed loop needs 64 * tile_pages to be a multiple of 16 * num_warps, "
                         f"got tile_pages={tile_pages} with num_warps={num_warps}")
    # One program per share of all requests' pages (the kernel computes the shares), per row block.
    sms = sm_count(cache.device) if gpu else 4
    grid = (max(1, per_sm * sms // row_blocks), row_blocks)
    forms = launch_forms(exact, asm, word_fed, tile_pages, num_warps, pairs, split, setup)
    # The one-kernel form never touches the flags (query_starts is a read-only stand-in).
    flags = torch.empty(grid[0] * grid[1], dtype=torch.uint8, device=out.device) if exact == "fixup" else query_starts
    maxnreg = tuning.get("maxnreg")
    for form in forms:
        wrap_triton(score_paged_kernel)[(grid[0] * form["SPLIT"], grid[1])](
            out, out.stride(0), q_payload, q_scales, cache, cache.stride(0), weights, weights.stride(0), weights.stride(1),
            block_table, block_table.stride(0), block_table.stride(1), query_starts, row_ends, requests,
            pages_per_request * 64, rows, flags,
            HEADS=heads, ROWS=rows_per_block, QUERY_FLOAT=query_float, DOT_DTYPE=tl.bfloat16 if gpu else tl.float32,
            CHUNK=SCHEDULE_CHUNK, **form,
            num_warps=form["WARPS"],
            num_stages=tuning.get("num_stages", 3),
            **({"maxnreg": maxnreg} if maxnreg else {}),
        )
