"""A/B timing of score_paged variants in one call: the same case for all, each variant's
logits compared bit for bit with the first's, then the variants timed in alternation (GPU
time of CUDA-graph replays), so that drift between runs does not read as a difference.

python benchmarks/score_ab.py [--shapes 64x32768x1,64x32768x2] [--rounds 3] [--outliers 0.001] [--outlier-channels] [--seq-len 8192] A.py B.py ...

A variant is a copy of fp4_inductor/kernels/score.py or score_kernel.py kept as a file;
``shipped`` stands for the package's own. ``VARIANT:key=value,...`` launches it with those
launcher tunings (as in score_variants.py), e.g. ``shipped:setup_units=6``. Results:
docs/benchmarks.md.
"""

import argparse

import torch
from score_variants import load_variant, parse_tuning

import fp4_inductor as fp4
from fp4_inductor.bench import build_scoring_case, device_us, parse_shapes

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("variants", nargs="+", help="score.py or score_kernel.py copies, or 'shipped'")
    parser.add_argument("--shapes", default="64x32768x1,64x32768x2", help="BxCONTEXTxNEXT_N,...")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--outliers", type=float, default=0.0, help="fraction of keys whose scales take the exact path")
    parser.add_argument("--outlier-channels", action="store_true",
                        help="keys with four outlier channels before a LayerNorm (about 12 %% take the exact path)")
    parser.add_argument("--seq-len", type=int, default=0,
                        help="each request's keys, below the shape's CONTEXT (the block table's width), as a serving "
                             "graph's block table is wider than its requests")
    args = parser.parse_args()
    modules, tunings = {}, {}
    for spec in args.variants:
        path, _, tuned = spec.partition(":")
        modules[spec] = load_variant(None if path == "shipped" else path)
        tunings[spec] = parse_tuning(tuned, ",")
    table = []
    for requests, context, next_n in parse_shapes(args.shapes):
        shape = f"{requests}x{context}x{next_n}"
        seq_lens = [args.seq_len] * requests if args.seq_len else None
        case = build_scoring_case(requests, context, next_n, 64, torch.device("cuda"), outliers=args.outliers,
                                  outlier_channels=args.outlier_channels,
                                  seq_lens=seq_lens)
        query = fp4.quantize_queries(case["q"])
        out = torch.empty(requests * next_n, context, device="cuda")
        inputs = (*query, case["cache"], case["weights"], case["block_table"], case["query_starts"],
                  case["row_ends"], next_n)
        valid = torch.arange(context, device="cuda")[None, :] < case["row_ends"][:, None]
        first = None
        for path, module in modules.items():
            out.fill_(float("nan"))
            module.launch_score_paged(out, *inputs, **tunings[path])
            if first is None:
                first = out.clone()
            same = torch.equal(out[valid], first[valid]) and not out[valid].isnan().any().item()
            print(f"{shape} {path}: {'bit-identical to' if same else 'DIFFERS from'} {args.variants[0]}", flush=True)
        times = {path: [] for path in modules}
        for _ in range(args.rounds):
            for path, module in modules.items():
                times[path].append(device_us(lambda: module.launch_score_paged(out, *inputs, **tunings[path])))
        label = shape + (f" ({args.outliers:g} outliers)" if args.outliers else "")
        label += " (outlier channels)" if args.outlier_channels else ""
        label += f" ({args.seq_len} keys per request)" if args.seq_len else ""
        rows = [f"| {label} | {path} | " + " / ".join(f"{t:.1f}" for t in times[path]) + " |" for path in modules]
        print("\n".join(rows), flush=True)  # each shape's rows as they come (a call cut off keeps them)
        table += rows
    print("\n".join(["| shape | variant | us per round |", "| --- | --- | --- |"] + table))
