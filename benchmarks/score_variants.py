"""Time score_paged launch configurations, and kernel variants kept as files (device notes:
docs/benchmarks.md). Times are GPU times of the launch replayed in a CUDA graph.

python benchmarks/score_variants.py [--shapes 64x32768x1,...] [--grid "tile_pages=1,2;exact=inline,fixup"]
                                    [--module path/to/score_variant.py] [--check] [--outliers 0.001]
"""

import argparse
import functools
import importlib.util
import itertools
import os

import torch

import fp4_inductor as fp4
from fp4_inductor.bench import build_scoring_case, device_us, parse_shapes


def load_variant(path):
    """A module with ``launch_score_paged``: the package's (``path`` None), or a variant kept as a
    file and imported inside the kernels package: a copy of kernels/score.py (the launcher), or
    of kernels/score_kernel.py (the kernel, launched by the package's launcher)."""
    from fp4_inductor.kernels import score

    if path is None:
        return score
    name = "fp4_inductor.kernels." + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "launch_score_paged"):
        module.launch_score_paged = functools.partial(score.launch_score_paged, kernel=module.score_paged_kernel)
    return module


def tuning_value(text):
    """A launcher tuning's value as given on the command line: an int, or a word (exact=inline)."""
    return int(text) if text.lstrip("-").isdigit() else text


def parse_tuning(text, sep):
    """Launcher tunings from ``key=value`` items separated by ``sep`` (values: ``tuning_value``)."""
    return {k: tuning_value(v) for k, v in (item.split("=") for item in text.split(sep) if item)}


def run_shape(launch, requests, context, next_n, space, check, outliers=0.0):
    case = build_scoring_case(requests, context, next_n, 64, torch.device("cuda"), outliers=outliers)
    query = fp4.quantize_queries(case["q"])
    rows = requests * next_n
    out = torch.empty(rows, context, device="cuda")
    inputs = (out, *query, case["cache"], case["weights"], case["block_table"], case["query_starts"],
              case["row_ends"], next_n)
    floor_us = (requests * context * 68 + rows * context * 4) / 4.25e6
    expected = None
    if check:
        expected = fp4.score_paged(query, *inputs[3:], backend="reference")
        valid = torch.arange(context, device="cuda")[None, :] < case["row_ends"][:, None]
    results = []
    for values in itertools.product(*space.values()):
        tuning = dict(zip(space, values))
        try:
            out.fill_(float("nan"))
            launch(*inputs, **tuning)
            error = ""
            if expected is not None:
                # Elementwise against the reference op (float32, another summation order): entries
                # near zero after the weighted head sum make this ~1e-3 for a right kernel.
                diff = ((out - expected).abs() / expected.abs().clamp_min(1e-3))[valid].max().item()
                error = f" max rel err {diff:.1e}"
                if not diff < 0.05:
                    print(f"  WRONG  B={requests} ctx={context} next_n={next_n} {tuning}{error}: not timed", flush=True)
                    continue
            us = device_us(lambda: launch(*inputs, **tuning))
        except Exception as exc:
            print(tuning, type(exc).__name__, str(exc)[:300])
            continue
        results.append((us, tuning))
        print(f"{us:8.1f} us  B={requests} ctx={context} next_n={next_n} {tuning}{error}", flush=True)
    best = min(results, key=lambda r: r[0]) if results else (float("nan"), {})
    return f"B={requests} ctx={context} next_n={next_n}: best {best[0]:.1f} us {best[1]} (byte floor {floor_us:.1f} us)"


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", default="64x32768x1,64x32768x2,64x32768x4,16x131072x2", help="BxCONTEXTxNEXT_N,...")
    parser.add_argument("--grid", default="tile_pages=1,2;num_warps=4,8;num_stages=1,3")
    parser.add_argument("--module", default=None,
                        help="a variant of kernels/score.py or kernels/score_kernel.py to time instead")
    parser.add_argument("--check", action="store_true", help="compare each launch with the reference op first")
    parser.add_argument("--outliers", type=float, default=0.0, help="fraction of keys whose scales take the exact path")
    args = parser.parse_args()
    launch = load_variant(args.module).launch_score_paged
    space = {k: [tuning_value(v) for v in vals.split(",")] for k, vals in (item.split("=") for item in args.grid.split(";"))}
    summary = [run_shape(launch, *shape, space, args.check, args.outliers) for shape in parse_shapes(args.shapes)]
    print()
    print("\n".join(summary))
