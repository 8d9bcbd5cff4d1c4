#!/usr/bin/env bash
# One run on the GPU machine (at most 600 s): `tests` runs the GPU tests on a cold Inductor cache (about
# 330-360 s on the H200 with 163 tests; says so when its time limit cuts the suite off);
# `bench` the benchmark table (GPU times of CUDA-graph replays) with the AITER peer from
# .peer/aiter. Logs go to $OUT.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp}
export TORCHINDUCTOR_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name --format=csv,noheader
case "${1:-tests}" in
tests)
  timeout "${TEST_S:-540}" python3 -m pytest -q -p no:cacheprovider -rfE tests -m gpu > "$OUT/gpu_tests.log" 2>&1
  [ $? = 124 ] && echo "CUT OFF after ${TEST_S:-540} s: the GPU suite did not finish (see $OUT/gpu_tests.log)"
  tail -2 "$OUT/gpu_tests.log"
  grep -E "^(FAILED|ERROR)" "$OUT/gpu_tests.log" | head -20
  ;;
bench)
  timeout 150 python3 -m fp4_inductor.bench --only score --aiter-root .peer/aiter > "$OUT/bench_score.log" 2>&1
  for part in topk store step; do
    timeout 60 python3 -m fp4_inductor.bench --only $part > "$OUT/bench_$part.log" 2>&1
  done
  grep -hE "^\| [a-zA-Z]" "$OUT"/bench_*.log | grep -v "^| case"
  ;;
esac
