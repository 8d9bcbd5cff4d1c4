#!/usr/bin/env bash
# One device call: GPU tests, then the benchmark table and the variant sweeps. Logs go to $OUT.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp}
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 240 python3 -m pytest -q -p no:cacheprovider tests -m gpu > "$OUT/gpu_tests.log" 2>&1; tail -2 "$OUT/gpu_tests.log"
grep -E "^(FAILED|ERROR)" "$OUT/gpu_tests.log" | head -20
timeout 75 python3 benchmarks/score_variants.py --grid "split_exact=0,1;tile_pages=1,2" > "$OUT/score_variants.log" 2>&1
timeout 120 python3 -m fp4_inductor.bench --only score --aiter-root .peer/aiter > "$OUT/bench_score.log" 2>&1
for part in topk store step; do
  timeout 50 python3 -m fp4_inductor.bench --only $part --no-peers > "$OUT/bench_$part.log" 2>&1
done
timeout 40 python3 benchmarks/kernel_variants.py > "$OUT/kernel_variants.log" 2>&1
grep -hE "^\| [a-zA-Z]" "$OUT"/bench_*.log | grep -v "^| case"
tail -4 "$OUT/score_variants.log"
grep -E "topk" "$OUT/kernel_variants.log" | head -12
grep -hE "registers" "$OUT"/bench_*.log | sort -u
