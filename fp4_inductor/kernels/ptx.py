"""Inline PTX of the scorer's hot loop (sm_90): the FP4 -> int8 operand builder, the code tables
it reads, relu in one float multiply, a store from the accumulator's layout, and the ping-pong
steps of the 16-warp loop. tests/test_prmt.py runs each string through a small PTX emulator on
the CPU and checks the layouts Triton compiles the calls into."""

import triton
import triton.language as tl

from . import TRITON_VERSION


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
RELU_ASM = tl.constexpr("mul.rn.sat.f32 $0, $1, 0f7F000000;")
# The factor the asm leaves on relu(acc): 2**-149 (the subnormal reading) * 2**127.
RELU_UNSCALE = tl.constexpr(2.0**22)

# pack=4: the asm sees four elements per call. From bytes: $2 holds the four payload bytes, the
# 32-bit tables arrive four times each ($3-$6, $7-$10). From words: the word too ($2-$5).
PRMT_ASM_BYTES = tl.constexpr(_prmt_asm("$2", "$3", "$7"))
PRMT_ASM_WORDS = tl.constexpr(_prmt_asm("$2", "$6", "$10"))


# The builder's code tables of a (key, group), one instruction each: the magnitudes 0, 1, 2, 3 and
# 4, 6, 8, 12 shifted left by the group's fold, zero for a group left out (a negative fold: PTX
# shl reads the amount unsigned and clamps it to 32). No select, no clamp of the fold (H200,
# next_n=1: 87.9 against 89.1 us, 10 instructions fewer per tile).
CODE_TABLES_ASM = tl.constexpr("{ shl.b32 $0, 0x03020100, $2; shl.b32 $1, 0x0C080604, $2; }")


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
PINGPONG_TRITON = tl.constexpr(TRITON_VERSION in ((3, 6), (3, 7)))


def _pingpong_asm(step: str, registers: int) -> str:
    moves = " ".join(f"mov.b32 ${i}, ${i + registers};" for i in range(registers))
    return ("{ .reg .pred p; .reg .u32 t, b; mov.u32 t, %tid.x; setp.lt.u32 p, t, 256; " + step + " " + moves
            + " }")


def _pingpong_constraints(registers: int) -> str:
    return ",".join(["=r"] * registers + ["r"] * registers)


# On the key operand's 32 int8 per thread (8 registers), the accumulator's 32 int32 and a scalar.
PINGPONG_WAIT = tl.constexpr(_pingpong_asm("selp.u32 b, 1, 2, p; barrier.sync b, 512;", 8))
PINGPONG_SIGNAL = tl.constexpr(_pingpong_asm("selp.u32 b, 2, 1, p; barrier.arrive b, 512;", 32))
PINGPONG_FIRST = tl.constexpr(_pingpong_asm("@!p barrier.arrive 1, 512;", 1))
PINGPONG_LAST = tl.constexpr(_pingpong_asm("@p barrier.sync 1, 512;", 1))
PINGPONG_8 = tl.constexpr(_pingpong_constraints(8))
PINGPONG_32 = tl.constexpr(_pingpong_constraints(32))
PINGPONG_1 = tl.constexpr(_pingpong_constraints(1))


@triton.jit
def pingpong(x, STEP: tl.constexpr, CONSTRAINTS: tl.constexpr, PACK: tl.constexpr):
    """``x`` unchanged, after one ping-pong step (``PINGPONG_*``) in every thread: PACK must be
    at least the number of x's elements per thread, so that each thread makes one asm call
    (Triton pads a short pack)."""
    return tl.inline_asm_elementwise(STEP, CONSTRAINTS, [x], dtype=x.dtype, is_pure=True, pack=PACK)


@triton.jit
def code_tables(shift):
    """int32 (lo, hi): the PTX builder's code tables at ``shift`` (int32, any shape), 0 where shift < 0."""
    return tl.inline_asm_elementwise(CODE_TABLES_ASM, "=r,=r,r", [shift], dtype=(tl.int32, tl.int32),
                                     is_pure=True, pack=1)


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
