#!/usr/bin/env bash
# One device call: GPU tests, then the benchmark table. Logs go to $OUT.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp}
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 300 python3 -m pytest -q -p no:cacheprovider tests -m gpu > "$OUT/gpu_tests.log" 2>&1; tail -4 "$OUT/gpu_tests.log"
grep -E "^(FAILED|ERROR)" "$OUT/gpu_tests.log" | head -20
timeout 150 python3 -m fp4_inductor.bench --only score --aiter-root .peer/aiter > "$OUT/bench_score.log" 2>&1
for part in topk store step; do
  timeout 60 python3 -m fp4_inductor.bench --only $part --no-peers > "$OUT/bench_$part.log" 2>&1
done
grep -hE "^\| [a-zA-Z]" "$OUT"/bench_*.log | grep -v "^| case"
grep -hE "registers" "$OUT"/bench_score.log | sort -u
