#!/usr/bin/env bash
# One run on the GPU machine: the scorer's GPU tests (the whole suite: device_run.sh tests), graph-timed
# scoring with the peer, and the scorer's kernel time as ncu reports it (no host, no graph).
# Logs go to $OUT.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp}
export TORCHINDUCTOR_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader
timeout 260 python3 -m pytest -q -p no:cacheprovider -rfE tests/test_score.py tests/test_prmt.py -m gpu > "$OUT/gpu_tests.log" 2>&1
[ $? = 124 ] && echo "CUT OFF after 260 s: the scorer's GPU tests did not finish"
tail -2 "$OUT/gpu_tests.log"
grep -E "^(FAILED|ERROR)" "$OUT/gpu_tests.log" | head -20
timeout 150 python3 -m fp4_inductor.bench --only score --aiter-root .peer/aiter > "$OUT/bench_score.log" 2>&1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for n in 1 2 4; do
  timeout 60 "$NCU" --clock-control none -k score_paged_kernel -c 2 --metrics gpu__time_duration.sum,smsp__inst_executed.sum,sm__cycles_elapsed.avg.per_second python3 benchmarks/profile_score.py $n 2>&1 | grep -E "gpu__time|inst_exec|per_second" | sed "s/^/n=$n /" | tee -a "$OUT/ncu.log"
done
grep -hE "^\| [a-zA-Z]" "$OUT"/bench_score.log
grep -hE "registers" "$OUT"/bench_score.log | sort -u
