"""Time score_paged launch configurations (device notes: docs/benchmarks.md).

python benchmarks/score_variants.py [--shapes 64x32768x1,...] [--grid "tile_pages=1,2;num_warps=4,8"]
"""

import argparse
import itertools

import torch

import fp4_inductor as fp4
from fp4_inductor.bench import build_scoring_case, median_us
from fp4_inductor.kernels.score import launch_score_paged


def run_shape(requests, context, next_n, space):
    case = build_scoring_case(requests, context, next_n, 64, torch.device("cuda"))
    query = fp4.quantize_queries(case["q"])
    rows = requests * next_n
    out = torch.empty(rows, context, device="cuda")
    inputs = (out, *query, case["cache"], case["weights"], case["block_table"], case["query_starts"],
              case["row_ends"], next_n)
    floor_us = (requests * context * 68 + rows * context * 4) / 4.25e6
    results = []
    for values in itertools.product(*space.values()):
        tuning = dict(zip(space, values))
        try:
            us = median_us(lambda: launch_score_paged(*inputs, **tuning), 100)
        except Exception as exc:
            print(tuning, type(exc).__name__, str(exc)[:300])
            continue
        results.append((us, tuning))
        print(f"{us:8.1f} us  B={requests} ctx={context} next_n={next_n} {tuning}", flush=True)
    best = min(results, key=lambda r: r[0]) if results else (float("nan"), {})
    return f"B={requests} ctx={context} next_n={next_n}: best {best[0]:.1f} us {best[1]} (byte floor {floor_us:.1f} us)"


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", default="64x32768x1,64x32768x2,64x32768x4,16x131072x2", help="BxCONTEXTxNEXT_N,...")
    parser.add_argument("--grid", default="tile_pages=1,2;num_warps=4,8;num_stages=1,3")
    args = parser.parse_args()
    space = {k: [int(v) for v in vals.split(",")] for k, vals in (item.split("=") for item in args.grid.split(";"))}
    summary = [run_shape(*(int(v) for v in shape.split("x")), space) for shape in args.shapes.split(",")]
    print()
    print("\n".join(summary))
