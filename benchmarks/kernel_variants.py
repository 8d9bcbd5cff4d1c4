"""Time launch configurations of the top-k and store kernels (device notes: docs/benchmarks.md)."""

import torch

from fp4_inductor.bench import median_us, store_case
from fp4_inductor.kernels.quantize import launch_store_keys
from fp4_inductor.kernels.quantize import launch_quantize_queries
from fp4_inductor.kernels.topk import launch_select_topk

device = torch.device("cuda")
for rows, width in ((64, 32768), (32, 131072)):
    logits = torch.randn(rows, width, device=device)
    row_ends = torch.full((rows,), width, device=device, dtype=torch.int32)
    ref = median_us(lambda: torch.topk(logits, 2048, dim=1, sorted=False), 100)
    print(f"torch.topk {rows}x{width}: {ref:.1f} us")
    for segment in (4096, 8192, 16384):
        for warps in (8, 16):
            us = median_us(lambda: launch_select_topk(logits, row_ends, 2048, False, segment=segment, num_warps=warps), 100)
            print(f"  select_topk {rows}x{width} segment={segment} warps={warps}: {us:.1f} us ({ref / us:.2f}x)", flush=True)

n = 1 << 20
keys, cache, slots = store_case(n, device)
for block in (16, 64):
    for warps in (2, 8):
        us = median_us(lambda: launch_store_keys(keys, cache, slots, block=block, num_warps=warps), 100)
        print(f"store_keys block={block} warps={warps}: {us:.1f} us, {n * (256 + 68 + 4) / us / 1e3:.0f} GB/s", flush=True)

q = torch.randn(128, 64, 128, device=device, dtype=torch.bfloat16)
us = median_us(lambda: launch_quantize_queries(q), 100)
print(f"quantize_queries 128x64: {us:.1f} us")
