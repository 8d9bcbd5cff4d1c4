"""The scorer's PTX operand builder (``score._PRMT_ASM``) run on the CPU through a small PTX
emulator: every 16-bit nibble pattern and random words, at every group shift and for a group
left out, against the E2M1 code table. The GPU tests check it again end to end; this one runs
in CI, where no GPU is."""

import re

import numpy as np
import pytest

pytest.importorskip("triton")

from fp4_inductor.kernels import score  # noqa: E402

U = np.uint64
M32 = U(0xFFFFFFFF)


def prmt(a, b, sel):
    """PTX prmt.b32, default mode: byte i of the result is byte (nibble i of sel) & 7 of {b, a};
    a set bit 3 in that nibble replicates the selected byte's sign bit instead."""
    a, b, sel = np.broadcast_arrays(a, b, sel)
    pool = np.stack([(v >> U(8 * i)) & U(0xFF) for v in (a, b) for i in range(4)])
    out = np.zeros(a.shape, dtype=np.uint64)
    for i in range(4):
        nib = (sel >> U(4 * i)) & U(0xF)
        byte = np.take_along_axis(pool, (nib & U(7)).astype(np.int64)[None], 0)[0]
        byte = np.where(nib & U(8), np.where(byte & U(0x80), U(0xFF), U(0)), byte)
        out = out | (byte << U(8 * i))
    return out


def shift_left(x, n):
    n = np.broadcast_to(n, np.shape(x))
    return np.where(n >= U(32), U(0), (x << np.minimum(n, U(31))) & M32)


OPS = {
    "mov.b32": lambda a: a,
    "not.b32": lambda a: ~a & M32,
    "and.b32": lambda a, b: a & b,
    "or.b32": lambda a, b: a | b,
    "xor.b32": lambda a, b: a ^ b,
    "add.u32": lambda a, b: (a + b) & M32,
    "shl.b32": shift_left,  # PTX clamps shift amounts above 32
    "shr.b32": lambda a, b: a >> np.minimum(b, U(32)),
    "prmt.b32": prmt,
}


def run_ptx(asm: str, operands: dict) -> dict:
    """Execute the straight-line PTX of ``asm`` on uint64 arrays holding 32-bit values."""
    regs = dict(operands)
    body = asm.strip()[1:-1]  # drop the outer braces
    for stmt in filter(None, (s.strip() for s in body.split(";"))):
        if stmt.startswith(".reg"):
            continue
        op, args = stmt.split(None, 1)
        dst, *src = [a.strip() for a in args.split(",")]
        if op not in OPS:
            raise AssertionError(f"the emulator does not know {op!r}")
        val = [U(int(a, 0)) if re.fullmatch(r"0x[0-9A-Fa-f]+|\d+", a) else regs[a] for a in src]
        regs[dst] = np.asarray(OPS[op](*val), dtype=np.uint64) & M32
    return regs


def expected_elements(words, shift):
    """int8 elements (value * 2 << shift; 0 for a group left out) of each word, [n, 8]."""
    nib = np.stack([(words >> U(4 * i)) & U(0xF) for i in range(8)], 1).astype(np.int64)
    mag = np.array([0, 1, 2, 3, 4, 6, 8, 12])[nib & 7] << max(shift, 0)
    val = np.where(nib & 8, -mag, mag)
    return np.zeros_like(val) if shift < 0 else val


def test_emulator_knows_prmt():
    """The emulator's prmt against hand-worked values (PTX ISA's description)."""
    a, b = U(0x33221100), U(0x77665544)
    assert prmt(a, b, U(0x3210)) == 0x33221100
    assert prmt(a, b, U(0x4567)) == 0x44556677
    assert prmt(U(0x0080_7F00), b, U(0x8A9B)) == 0x00FF0000


@pytest.mark.parametrize("shift", [-1, 0, 1, 2, 3])
def test_operand_builder_matches_code_table(shift):
    rng = np.random.default_rng(shift + 7)
    low = np.arange(1 << 16, dtype=np.uint64)
    words = np.concatenate([low | (low << U(16)), low, low << U(16),
                            rng.integers(0, 1 << 32, 1 << 16, dtype=np.uint64)])
    byte = 255 if shift < 0 else shift  # how key_operands passes a group left out
    regs = run_ptx(str(score._PRMT_ASM.value), {"$2": words, "$3": np.full_like(words, U(byte * 0x01010101))})
    got = np.concatenate([np.stack([(regs[r] >> U(8 * i)) & U(0xFF) for i in range(4)], 1)
                          for r in ("$0", "$1")], 1).astype(np.int64)
    got = np.where(got >= 128, got - 256, got)  # int8
    np.testing.assert_array_equal(got, expected_elements(words, shift))
