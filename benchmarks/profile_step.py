"""The captured decode step, kernel by kernel: each kernel's GPU duration and the gap before it,
inside replays of the step's CUDA graph, and each op's graph replayed alone (B=64 x 32768, next_n=2,
k=2048; torch.profiler). python benchmarks/profile_step.py"""

import sys

if any(arg in ("-h", "--help") for arg in sys.argv[1:]):
    print(__doc__)
    sys.exit(0)

import torch
from torch.autograd import DeviceType
from fp4_inductor.bench import capture_graph, median_us, step_calls

dev = torch.device("cuda")
print(torch.cuda.get_device_name(), torch.__version__)
calls = step_calls(64, 32768, 2, 64, 2048, dev)


for name, fn in calls.items():
    g = capture_graph(fn)
    us = median_us(g.replay)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            g.replay()
        torch.cuda.synchronize()
    ev = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA), key=lambda e: e.time_range.start)
    per = len(ev) // 20
    print(f"== {name}: replay median {us:.1f} us, {len(ev)} GPU events ({per} per replay)")
    rows = {}
    for i, e in enumerate(ev):
        key = (i % per, e.name[:60]) if per else (0, e.name[:60])
        gap = e.time_range.start - ev[i - 1].time_range.end if i else float("nan")
        rows.setdefault(key, []).append((e.time_range.end - e.time_range.start, gap))
    for (slot, kname), vals in sorted(rows.items()):
        durs = sorted(v[0] for v in vals)
        gaps = sorted(v[1] for v in vals if v[1] == v[1])
        print(f"  {slot} {kname:60s} dur {durs[len(durs) // 2]:7.1f} us  gap before {gaps[len(gaps) // 2] if gaps else float('nan'):6.1f} us")
