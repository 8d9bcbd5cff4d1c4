"""Compile the scorer for sm_90 on a machine without a GPU: registers, stack, and the SASS.

A Triton wheel carries ptxas and cuobjdump, so the H200's code can be read anywhere:

    python -m venv /tmp/t36 && /tmp/t36/bin/pip install triton==3.6.0   # the device's triton
    echo "$PWD/.venv/lib/python3.11/site-packages" > /tmp/t36/lib/python3.11/site-packages/zz.pth
    /tmp/t36/bin/python benchmarks/compile_sm90.py TAG,ROWS,TILE_PAGES,WARPS [...]

Writes /tmp/sm90/TAG.{ttgir,ptx,sass}. QF=1 compiles the bf16-query mode; MAXNREG=n caps
registers, MODE=1/2 the fix-up pair's launches as the launcher makes them, PAIRS=0/1 the
word-fed loop's tiles in pairs (default: launch_plan's for the rows, as the launcher takes it),
STAGES=n Triton's num_stages (3), CHUNK=n the schedule's step (default: the launcher's at a
large batch, score.schedule_chunk). Used to check that a refactor leaves the compiled kernel
byte-identical (diff the SASS without its encoding lines) and to count instructions per tile
before a device run.
"""

import os
import sys

if any(arg in ("-h", "--help") for arg in sys.argv[1:]):
    print(__doc__)
    sys.exit(0)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import importlib  # noqa: E402
from fp4_inductor.kernels.score import launch_forms, launch_plan, word_fed_pass  # noqa: E402
from fp4_inductor.kernels.sm90 import compile_scorer, dump_cubin  # noqa: E402

score = importlib.import_module(os.environ.get("SCORE_MODULE", "fp4_inductor.kernels.score_kernel"))

OUT = "/tmp/sm90"


def compile_one(tag: str, rows: int, tile: int, warps: int, stages: int = 3) -> None:
    mode, query_float = int(os.environ.get("MODE", 0)), bool(os.environ.get("QF"))
    exact = "inline" if mode == 0 else "fixup"
    # The launch as the launcher makes it (MODE=2: the exact pass's own tile and warps).
    word_fed = word_fed_pass(exact, query_float)
    _, _, _, pairs, split, setup = launch_plan(word_fed, rows * 64, {"tile_pages": tile, "num_warps": warps})  # as the launcher
    pairs = os.environ.get("PAIRS", str(int(pairs))) == "1"
    form = launch_forms(exact, True, word_fed, tile, warps, pairs, split, setup)[max(mode - 1, 0)]
    if os.environ.get("CHUNK"):
        form = dict(form, CHUNK=int(os.environ["CHUNK"]))
    compiled = compile_scorer(score.score_paged_kernel, rows, form, query_float=query_float, num_stages=stages,
                              maxnreg=int(os.environ.get("MAXNREG", 0)) or None)
    os.makedirs(OUT, exist_ok=True)
    cubin = f"{OUT}/{tag}.cubin"
    open(cubin, "wb").write(compiled.asm["cubin"])
    open(f"{OUT}/{tag}.ptx", "w").write(compiled.asm["ptx"])
    open(f"{OUT}/{tag}.ttgir", "w").write(compiled.asm["ttgir"])
    sass = dump_cubin(compiled.asm["cubin"])
    open(f"{OUT}/{tag}.sass", "w").write(sass)
    usage = dump_cubin(compiled.asm["cubin"], "resource-usage")
    line = next(l.strip() for l in usage.splitlines() if "REG:" in l)
    fields = dict(f.split(":") for f in line.split() if f.split(":")[0] in ("REG", "STACK", "SHARED"))
    count = sum(1 for l in sass.splitlines() if l.strip().startswith("/*") and ";" in l)
    print(f"{tag}: rows={rows} tile={form['TILE_PAGES']} warps={form['WARPS']} REG={fields['REG']} STACK={fields['STACK']} "
          f"SASS instructions={count}", flush=True)


if __name__ == "__main__":
    for spec in sys.argv[1:] or ["n1,1,2,4", "n2,2,1,4", "n4,4,1,4"]:
        tag, rows, tile, warps = spec.split(",")
        compile_one(tag, int(rows), int(tile), int(warps), int(os.environ.get("STAGES", 3)))
