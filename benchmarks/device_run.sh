#!/usr/bin/env bash
# One device call: GPU tests on a cold Inductor cache, then the benchmark table (GPU times of
# CUDA-graph replays) and the kernel variant sweeps. Logs go to $OUT.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp}
export TORCHINDUCTOR_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 python3 -m pytest -q -p no:cacheprovider tests -m gpu > "$OUT/gpu_tests.log" 2>&1; tail -2 "$OUT/gpu_tests.log"
grep -E "^(FAILED|ERROR)" "$OUT/gpu_tests.log" | head -20
timeout 130 python3 -m fp4_inductor.bench --only score --aiter-root .peer/aiter > "$OUT/bench_score.log" 2>&1
for part in topk store step; do
  timeout 50 python3 -m fp4_inductor.bench --only $part --no-peers > "$OUT/bench_$part.log" 2>&1
done
grep -hE "^\| [a-zA-Z]" "$OUT"/bench_*.log | grep -v "^| case"
grep -hE "registers" "$OUT"/bench_*.log | sort -u
