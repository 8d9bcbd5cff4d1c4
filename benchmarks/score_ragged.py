"""score_paged on ragged batches: each launch plan checked against the reference op and
timed (GPU time of CUDA-graph replays). Results: docs/benchmarks.md.

python benchmarks/score_ragged.py [--plan "tile_pages=2;num_warps=4;programs_per_sm=2;pairs=0"] ...

Every batch runs the shipped plan, and each --plan (tuning of launch_score_paged) beside it.
"""

import argparse

import torch
from score_variants import parse_tuning

import fp4_inductor as fp4
from fp4_inductor.bench import build_scoring_case, device_us
from fp4_inductor.kernels.score import launch_score_paged

DEVICE = torch.device("cuda")


def ragged_case(seq_lens, next_n, heads=64, seed=0):
    """A merged-page FP4 cache holding requests of ``seq_lens`` keys in permuted pages, next_n rows each."""
    context = max(-(-s // 64) for s in seq_lens) * 64
    case = build_scoring_case(len(seq_lens), context, next_n, heads, DEVICE, seed, seq_lens=seq_lens)
    inputs = (fp4.quantize_queries(case["q"]), case["cache"], case["weights"], case["block_table"],
              case["query_starts"], case["row_ends"], next_n)
    return inputs, context


def batches():
    g = torch.Generator().manual_seed(1)
    uniform = lambda: [int(x) for x in torch.randint(1, 65537, (64,), generator=g)]  # noqa: E731
    return {
        "64 requests uniform in [1, 65536], next_n=2": (uniform(), 2),
        "64 requests uniform in [1, 65536], next_n=1": (uniform(), 1),
        "1 x 131072 + 63 x 1024, next_n=2": ([131072] + [1024] * 63, 2),
        "8 x 32768, next_n=2": ([32768] * 8, 2),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--plan", action="append", default=[], help="tuning, 'key=value;...'")
    args = parser.parse_args()
    plans = {"shipped": {}}
    for plan in args.plan:
        plans[plan] = parse_tuning(plan, ";")
    table = []
    for name, (seq_lens, next_n) in batches().items():
        inputs, width = ragged_case(seq_lens, next_n)
        query, *rest = inputs
        reference = fp4.score_paged(query, *rest, backend="reference")
        row_ends = inputs[5]
        valid = torch.arange(width, device=DEVICE)[None, :] < row_ends[:, None]
        out = torch.empty(row_ends.shape[0], width, device=DEVICE)
        for plan, tuning in plans.items():
            out.fill_(float("nan"))
            launch = lambda: launch_score_paged(out, *query, *rest, **tuning)  # noqa: E731
            launch()
            error = ((out - reference).abs() / reference.abs().clamp_min(1e-3))[valid].max().item()
            row = f"| {name} | {plan} | {device_us(launch):.1f} | {sum(seq_lens) / 1e6:.2f} M keys | max rel err {error:.1e} |"
            print(row, flush=True)
            table.append(row)
    print("\n".join(["| batch | plan | us | keys | check |", "| --- | --- | --- | --- | --- |"] + table))
