"""Copies of the scorer's kernel with parts of the word-fed hot loop cut out, for timing only (their
logits are wrong): how much of the loop's time each part holds (docs/benchmarks.md, stop 47).

    python benchmarks/cut_parts.py /tmp/cuts      # writes /tmp/cuts/cut_{builder,epilogue,both,bare}.py
    bash benchmarks/device_run.sh cuts            # writes them and times them against the shipped kernel

- builder: the FP4 -> int8 operand builder cut to two instructions per payload word (from 11),
  the code tables with it; the scale work stays;
- epilogue: relu, the head weights and the head sum cut to a reduction that keeps the first head's
  dot (it compiles to no instruction: the head sum's shuffles go too);
- both: the two cuts together;
- bare: both, and the scale work too (each key's folds and largest scale, the exact pass's flag).
  Its builder xors each word with itself, which ptxas folds to a zero operand, and with it every
  load of the loop (keys and page ids): the loop keeps the dots (of zeros), their waits and the
  stores.

The parts do not add up: with less work in an iteration, the loads issued a tile ahead have
less time to arrive. Each copy is kernels/score_kernel.py with definitions appended that take
the place of the helpers it imports (Triton looks a kernel's helpers up by name in the kernel's
module when it compiles it), and the CTA barrier before the tile loop at every warp count (see
``write_cuts``): no cut has a CTA barrier inside its loop (sm_90, Triton 3.6 and 3.7.1).
"""

import os
import sys

STUB = '''

# --- cut: the operand builder, two instructions per payload word (wrong logits) ---
from .score_math import widen, widen_groups  # noqa: E402

CUT_BUILDER_ASM = tl.constexpr("{ xor.b32 $0, $2, $6; xor.b32 $1, $2, $10; }")


@triton.jit
def stub_operands(x, lo, hi):
    """int8 operands (a, b) [M, 64] of payload words x [M, 16]: each word xor lo, and xor hi."""
    return tl.inline_asm_elementwise(CUT_BUILDER_ASM, "=r,=r" + ",r" * 12, [widen(x, 4), lo, hi],
                                     dtype=(tl.int8, tl.int8), is_pure=True, pack=4)
'''

BUILDER = STUB + '''

@triton.jit
def word_operands(k_exp, x, fewest, ASM: tl.constexpr):
    k_max = tl.max(k_exp, axis=1)
    k_fold = FOLD_LIMIT - (k_max[:, None] - k_exp)
    s = widen_groups(k_fold)
    a, b = stub_operands(x, s, s + 1)
    return k_max, a, b, tl.minimum(fewest, tl.min(k_fold, axis=1))
'''

BARE = STUB + '''

# --- cut: the scale work too ---
@triton.jit
def word_operands(k_exp, x, fewest, ASM: tl.constexpr):
    words = widen(x, 4)
    a, b = stub_operands(x, words, words)
    return tl.full((k_exp.shape[0],), 127, tl.int32), a, b, fewest
'''

EPILOGUE = '''

# --- cut: the epilogue, the first head's dot of each row (wrong logits) ---
@triton.jit
def folded_logits(acc, w_folded, ROWS: tl.constexpr, HEADS: tl.constexpr, ASM: tl.constexpr, QUERY_FLOAT: tl.constexpr):
    M: tl.constexpr = acc.shape[0]
    return tl.reduce(tl.reshape(acc, (M, ROWS, HEADS)), 2, keep_first).to(tl.float32)


@triton.jit
def keep_first(a, b):
    return a
'''

CUTS = {"builder": BUILDER, "epilogue": EPILOGUE, "both": BUILDER + EPILOGUE, "bare": BARE + EPILOGUE}


def write_cuts(directory: str) -> list:
    """Write one copy of kernels/score_kernel.py per cut into ``directory``; returns their paths."""
    kernel = os.path.join(os.path.dirname(__file__), "..", "fp4_inductor", "kernels", "score_kernel.py")
    source = open(kernel).read()
    # The CTA barrier that the query operand's shared-memory store needs goes before the tile
    # loop at every warp count. The shipped two-row loop gets it there from the head weights'
    # layout change; with the epilogue cut Triton would put it before each step's first dot.
    loop_barrier = "if WARPS == 16:  # with or without the ping-pong (which only the 16-warp loop takes)\n"
    # The cuts replace these helpers by name: each must still be imported and called in the loop.
    needed = [loop_barrier + " " * 20 + "tl.debug_barrier()", "word_operands)", "folded_logits,",
              "= word_operands(cur_exp0, cur_x0, fewest, ASM)", "= folded_logits(acc0, w_folded,"]
    missing = [text for text in needed if text not in source]
    if missing:
        raise SystemExit(f"cut_parts.py: kernels/score_kernel.py no longer holds {missing}: update the cuts")
    source = source.replace(loop_barrier, "if True:  # cut_parts.py: at every warp count\n")
    os.makedirs(directory, exist_ok=True)
    paths = []
    for name, appended in CUTS.items():
        path = os.path.join(directory, f"cut_{name}.py")
        with open(path, "w") as f:
            f.write(source + appended)
        paths.append(path)
    return paths


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        print(__doc__)
        sys.exit(0 if sys.argv[1:] in (["-h"], ["--help"]) else 2)
    print("\n".join(write_cuts(sys.argv[1])))
