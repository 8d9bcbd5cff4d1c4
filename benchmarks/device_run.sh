#!/usr/bin/env bash
# One device call: GPU tests, the benchmark table, launch-config sweeps. Logs go to $OUT.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp}
timeout 90 python3 -m pytest -q -x tests -k gpu > "$OUT/gpu_tests.log" 2>&1; tail -3 "$OUT/gpu_tests.log"
timeout 55 python3 -m fp4_inductor.bench --no-peers > "$OUT/bench.log" 2>&1
timeout 40 python3 benchmarks/score_variants.py --shapes 64x32768x1,64x32768x4 --grid "tile_pages=1,2;num_warps=4,8" > "$OUT/score_variants.log" 2>&1
timeout 40 python3 benchmarks/kernel_variants.py > "$OUT/kernel_variants.log" 2>&1
grep -E "^\|" "$OUT/bench.log"; tail -3 "$OUT/score_variants.log"; grep -E "torch.topk|segment=16384|store_keys|quantize" "$OUT/kernel_variants.log"
