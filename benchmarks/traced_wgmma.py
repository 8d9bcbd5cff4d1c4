"""The wgmma hot pass under torch.compile: ``fp4.score_paged`` at 64 x 32768, 64 heads, next_n=4
(and the ``--next-n`` given), eager (the wgmma pass by default on sm_90: at 4 rows one warpgroup
per program under a register cap, at 2 rows four) against compiled (Inductor's generated code,
whose launches drop ``maxnreg``: traced launches take the pass at four warpgroups per program,
which needs no cap), then compiled through the opt-in opaque op ``fp4::score_paged_eager_out`` (an
extern call of the eager launcher). Each compiled form's logits against eager's, bit for bit; GPU
time of CUDA-graph replays. Inductor's caches are off, so that each form is traced again.

python benchmarks/traced_wgmma.py [--kernel FILE] [--next-n 4,2]   (results: docs/benchmarks.md,
stops 54-56, 61 and 62; stops 54-56 also timed the package's pass traced without its cap, at two
and three programs per SM, which this script no longer does)

``--kernel``: every launch of the scorer (eager, traced, opaque) takes that copy of
kernels/score_kernel.py (kept in fp4_inductor/kernels/, e.g. from ``python -m
fp4_inductor.kernels.wgmma_source --halves 3 --variant``).
"""

import argparse

import torch
import torch._functorch.config as functorch_config
import torch._inductor.config as inductor_config

import fp4_inductor as fp4
from fp4_inductor.bench import build_scoring_case, device_us
from fp4_inductor.kernels import score
from score_variants import load_variant


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernel", help="a copy of kernels/score_kernel.py for every launch of the scorer")
    parser.add_argument("--next-n", default="4", help="verify rows per request, comma-separated (default 4)")
    args = parser.parse_args()
    if args.kernel:
        # Every later launch (the ops import ``launch_score_paged`` at each call) on that kernel.
        score.launch_score_paged = load_variant(args.kernel).launch_score_paged
    inductor_config.fx_graph_cache = False
    functorch_config.enable_autograd_cache = False
    for next_n in (int(n) for n in args.next_n.split(",")):
        table(next_n)


def table(next_n: int) -> None:
    case = build_scoring_case(64, 32768, next_n, 64, "cuda")
    payload, scales = fp4.quantize_queries(case["q"])
    inputs = (payload, scales, case["cache"], case["weights"], case["block_table"], case["query_starts"],
              case["row_ends"])
    valid = fp4.reference.valid_region(case["query_starts"], case["row_ends"], case["block_table"].shape[1] * 64)

    def scores(payload, scales, cache, weights, block_table, query_starts, row_ends):
        return fp4.score_paged((payload, scales), cache, weights, block_table, query_starts, row_ends, next_n)

    eager = scores(*inputs)
    rows = [("eager default (wgmma pass)", device_us(lambda: scores(*inputs)), "")]

    def compiled_row(name, step=scores):
        torch._dynamo.reset()
        compiled = torch.compile(step, fullgraph=True)
        got = compiled(*inputs)
        same = torch.equal(got[valid], eager[valid])
        worst = ((got - eager).abs()[valid].max() / eager.abs()[valid].max()).item()
        rows.append((name, device_us(lambda: compiled(*inputs)), "equal" if same else f"differ ({worst:.1e})"))

    compiled_row("compiled default (traced launches)")
    width = case["block_table"].shape[1] * 64

    def opaque_scores(payload, scales, cache, weights, block_table, query_starts, row_ends):
        out = torch.empty((payload.shape[0], width), device=payload.device)
        torch.ops.fp4.score_paged_eager_out(out, payload, scales, cache, weights, block_table, query_starts,
                                            row_ends, next_n)
        return out

    compiled_row("compiled, opaque `score_paged_eager_out` (eager's launcher)", opaque_scores)
    print(f"| 64 x 32768, next_n={next_n} | us | bits against eager |\n| --- | --- | --- |")
    for name, us, bits in rows:
        print(f"| {name} | {us:.1f} | {bits} |")


if __name__ == "__main__":
    main()
