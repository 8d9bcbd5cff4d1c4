"""Two score_paged calls to profile, 64 x 32768 keys: ncu --clock-control none -k score_paged_kernel
python benchmarks/profile_score.py [NEXT_N [key=value,...]]. Without tunings through the public op;
with launcher tunings (``key=value,...`` as score_ab.py's, e.g. ``wgmma=1``) through the launcher.
Each call is a hot and an exact pass (``-c 1``: the first hot pass; ``-c 2``: both passes)."""

import sys

if any(arg in ("-h", "--help") for arg in sys.argv[1:]):
    print(__doc__)
    sys.exit(0)

import os

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from score_variants import parse_tuning  # noqa: E402

import fp4_inductor as fp4
from fp4_inductor.bench import build_scoring_case
from fp4_inductor.kernels.score import launch_score_paged

next_n = int(sys.argv[1]) if len(sys.argv) > 1 else 1
tuning = parse_tuning(sys.argv[2], ",") if len(sys.argv) > 2 else {}
case = build_scoring_case(64, 32768, next_n, 64, torch.device("cuda"))
query = fp4.quantize_queries(case["q"])
inputs = (case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"], next_n)
out = torch.empty(64 * next_n, 32768, device="cuda")
for _ in range(2):
    if tuning:
        launch_score_paged(out, *query, *inputs, **tuning)
    else:
        fp4.score_paged(query, *inputs)
torch.cuda.synchronize()
