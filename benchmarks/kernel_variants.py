"""Time launch configurations of the top-k and store kernels (device notes: docs/benchmarks.md)."""

import sys

if any(arg in ("-h", "--help") for arg in sys.argv[1:]):
    print(__doc__)
    sys.exit(0)

import torch

import fp4_inductor as fp4
from fp4_inductor.bench import median_us, store_case
from fp4_inductor.kernels.quantize import launch_store_keys
from fp4_inductor.kernels.quantize import launch_quantize_queries
from fp4_inductor.kernels.topk import launch_select_topk
from torch._library.triton import set_wrap_triton_enabled


def graph_us(fn, launches: int = 20) -> float:
    """Device time per call: ``launches`` calls captured in one CUDA graph, replayed. Eager
    timings of this op are bound by host-side dispatch and launch work, not by the kernels."""
    fn()
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(launches):
                fn()
    torch.cuda.synchronize()
    return median_us(graph.replay, 100) / launches


device = torch.device("cuda")
for rows, width in ((64, 32768), (32, 131072)):
    logits = torch.randn(rows, width, device=device)
    row_ends = torch.full((rows,), width, device=device, dtype=torch.int32)
    ref = graph_us(lambda: torch.topk(logits, 2048, dim=1, sorted=False))
    print(f"torch.topk {rows}x{width}: {ref:.1f} us (CUDA graph)")
    # segment: entries per program, segment / (32 * warps) per thread; radix_bits: digits of the
    # threshold search; smem: the histograms in shared memory (the GPU default) or tl.histogram.
    # Selections are checked against the tl.histogram form's.
    want = torch.sort(launch_select_topk(logits, row_ends, 2048, False, smem=False)[1], dim=1).values
    for tuning in (dict(), dict(smem=False), dict(segment=16384), dict(segment=16384, smem=False),
                   dict(segment=32768, num_warps=32), dict(segment=8192, num_warps=8), dict(radix_bits=7),
                   dict(radix_bits=6)):
        got = torch.sort(launch_select_topk(logits, row_ends, 2048, False, **tuning)[1], dim=1).values
        assert torch.equal(got, want), tuning
        with set_wrap_triton_enabled(False):  # plain launches, as inside the op
            us = graph_us(lambda: launch_select_topk(logits, row_ends, 2048, False, **tuning))
        print(f"  select_topk {rows}x{width} {tuning or 'default'}: {us:.1f} us ({ref / us:.2f}x)", flush=True)
    eager = median_us(lambda: fp4.select_topk(logits, row_ends, 2048), 100)
    print(f"  fp4.select_topk {rows}x{width} eager, host included: {eager:.1f} us", flush=True)

n = 1 << 20
keys, cache, slots = store_case(n, device)
for block in (16, 64):
    for warps in (2, 8):
        us = median_us(lambda: launch_store_keys(keys, cache, slots, block=block, num_warps=warps), 100)
        print(f"store_keys block={block} warps={warps}: {us:.1f} us, {n * (256 + 68 + 4) / us / 1e3:.0f} GB/s", flush=True)

q = torch.randn(128, 64, 128, device=device, dtype=torch.bfloat16)
us = median_us(lambda: launch_quantize_queries(q), 100)
print(f"quantize_queries 128x64: {us:.1f} us")
