"""One score_paged launch to profile: ncu --clock-control none -k score_paged_kernel python benchmarks/profile_score.py"""

import sys

if any(arg in ("-h", "--help") for arg in sys.argv[1:]):
    print(__doc__)
    sys.exit(0)

import torch

import fp4_inductor as fp4
from fp4_inductor.bench import build_scoring_case

next_n = int(sys.argv[1]) if len(sys.argv) > 1 else 1
case = build_scoring_case(64, 32768, next_n, 64, torch.device("cuda"))
query = fp4.quantize_queries(case["q"])
for _ in range(2):
    fp4.score_paged(query, case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"], next_n)
torch.cuda.synchronize()
