"""Top-k overlap and logit cosine of FP4 vs FP8 vs BF16 indexer scoring on synthetic data.

python -m fp4_inductor.accuracy [--contexts 4096,32768,131072] [--ks 512,1024,2048] [--plot out.png]

Data (written down so that the numbers can be reproduced):
- ``gaussian``: queries and keys i.i.d. N(0, 1), keys LayerNorm'd (as the indexer's keys are);
  head weights N(0, 1) * heads**-0.5.
- ``correlated``: keys = LayerNorm(0.7 * (z @ B) / 4 + 0.3 * noise) with B a random
  [16, 128] basis (keys share a low-rank structure, as real keys do), queries = 0.5 * q +
  0.5 * (z' @ B) / 4: the gaussian queries mixed with the keys' own basis (so scores have a
  signal, not only noise).
- ``outliers``: the gaussian keys with 4 fixed channels scaled by 16 before LayerNorm
  (outlier channels, which widen the per-group scale spread inside a key).

Variants scored against BF16 (queries and keys rounded to bfloat16, float32 math):
- ``fp4``: this library's FP4 keys and queries (E2M1, UE8M0 per 32 elements);
- ``fp8``: E4M3 keys with one float32 scale per token (amax / 448) and E4M3 queries with
  one scale per (row, head), DeepSeek-V3.2's FP8 indexer cache;
- ``fp4k-bf16q``: FP4 keys, BF16 queries (the higher-recall mode: keys keep 68 bytes);
- ``fp4-rotated``: FP4 keys and queries after the orthonormal Hadamard rotation
  (``hadamard_matrix()`` in float32; ``FP4Indexer(rotate=True)`` makes the same rotation in
  its own dtype), which leaves the logits as they are in exact arithmetic.
"""

from __future__ import annotations

import argparse

import torch

from . import formats as F
from .reference import dequantize_fp4, quantize_fp4
from .rotation import hadamard_matrix


def scale_outlier_channels(k: torch.Tensor) -> torch.Tensor:
    """``k`` [..., 128] with its four outlier channels (3, 40, 77, 120) scaled by 16, in place:
    the ``outliers`` data before its LayerNorm."""
    k[..., [3, 40, 77, 120]] *= 16
    return k


def make_data(kind: str, context: int, rows: int, heads: int, gen: torch.Generator):
    d = F.HEAD_DIM
    q = torch.randn(rows, heads, d, generator=gen)
    if kind == "gaussian":
        k = torch.randn(context, d, generator=gen)
    elif kind == "correlated":
        basis = torch.randn(16, d, generator=gen)
        k = 0.7 * (torch.randn(context, 16, generator=gen) @ basis) / 4 + 0.3 * torch.randn(context, d, generator=gen)
        q = 0.5 * q + 0.5 * (torch.randn(rows, heads, 16, generator=gen) @ basis) / 4
    elif kind == "outliers":
        k = scale_outlier_channels(torch.randn(context, d, generator=gen))
    else:
        raise ValueError(f"kind: expected gaussian, correlated or outliers, got {kind!r}")
    k = torch.nn.functional.layer_norm(k, (d,))
    w = torch.randn(rows, heads, generator=gen) * heads**-0.5
    return q, k, w


def fp8_round(x: torch.Tensor, dims: int) -> torch.Tensor:
    """E4M3 with one float32 scale over the last ``dims`` dims (amax / 448)."""
    amax = x.abs().amax(dim=tuple(range(-dims, 0)), keepdim=True).clamp_min(1e-12)
    scale = amax / 448.0
    return (x / scale).to(torch.float8_e4m3fn).float() * scale


def fp4_round(x: torch.Tensor) -> torch.Tensor:
    return dequantize_fp4(*quantize_fp4(x))


def logits(q, k, w):
    return (torch.einsum("rhd,jd->rhj", q, k).relu() * w.unsqueeze(-1)).sum(1)


def compare(kind: str, context: int, ks: list[int], rows: int, heads: int, seed: int) -> list[dict]:
    gen = torch.Generator().manual_seed(seed)
    q, k, w = make_data(kind, context, rows, heads, gen)
    q16, k16 = q.bfloat16().float(), k.bfloat16().float()
    base = logits(q16, k16, w)
    h = hadamard_matrix()
    variants = {
        "fp4": logits(fp4_round(q16), fp4_round(k16), w),
        "fp8": logits(fp8_round(q16, 1), fp8_round(k16, 1), w),
        "fp4k-bf16q": logits(q16, fp4_round(k16), w),
        "fp4-rotated": logits(fp4_round(q16 @ h), fp4_round(k16 @ h), w),
    }
    results = []
    for name, got in variants.items():
        cosine = torch.nn.functional.cosine_similarity(got.double(), base.double(), dim=1).mean().item()
        for k_top in ks:
            if k_top > context:
                continue
            want = base.topk(k_top, dim=1).indices
            have = got.topk(k_top, dim=1).indices
            overlap = sum(len(set(a.tolist()) & set(b.tolist())) for a, b in zip(want, have)) / (rows * k_top)
            results.append(dict(data=kind, context=context, k=k_top, variant=name, overlap=overlap, cosine=cosine))
    return results


def positive_ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers separated by commas, got {text!r}")
    return values


def positive_int(text: str) -> int:
    values = positive_ints(text)
    if len(values) != 1:
        raise argparse.ArgumentTypeError(f"expected one positive integer, got {text!r}")
    return values[0]


def data_kinds(text: str) -> str:
    bad = [k for k in text.split(",") if k not in ("gaussian", "correlated", "outliers")]
    if bad:
        raise argparse.ArgumentTypeError(f"expected gaussian, correlated or outliers, got {', '.join(map(repr, bad))}")
    return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", type=positive_ints, default="4096,32768,131072")
    parser.add_argument("--ks", type=positive_ints, default="512,1024,2048")
    parser.add_argument("--data", type=data_kinds, default="gaussian,correlated,outliers")
    parser.add_argument("--rows", type=positive_int, default=4)
    parser.add_argument("--heads", type=positive_int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", default=None, help="write a PNG of overlap vs k (needs matplotlib)")
    args = parser.parse_args(argv)
    ks = args.ks
    results = []
    for kind in args.data.split(","):
        for context in args.contexts:
            results += compare(kind, context, ks, args.rows, args.heads, args.seed)
    print("| data | context | k | variant | top-k overlap with BF16 | logit cosine |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in results:
        print(f"| {r['data']} | {r['context']} | {r['k']} | {r['variant']} | {r['overlap']:.3f} | {r['cosine']:.5f} |")
    if args.plot:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise SystemExit("--plot needs matplotlib (pip install matplotlib)")
        fig, axes = plt.subplots(1, len(args.data.split(",")), figsize=(5 * len(args.data.split(",")), 4), squeeze=False)
        for ax, kind in zip(axes[0], args.data.split(",")):
            for variant in ("fp4", "fp8", "fp4k-bf16q", "fp4-rotated"):
                for context in sorted({r["context"] for r in results}):
                    pts = [(r["k"], r["overlap"]) for r in results
                           if r["data"] == kind and r["variant"] == variant and r["context"] == context]
                    if pts:
                        ax.plot(*zip(*pts), marker="o", label=f"{variant} ctx {context}")
            ax.set_title(kind)
            ax.set_xlabel("k")
            ax.set_ylabel("top-k overlap with BF16")
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(args.plot)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
