#!/usr/bin/env bash
# One run on the GPU machine (at most 600 s): `tests` runs the GPU tests on a cold Inductor cache (about
# 400 s on the H200 with 190 tests; says so when its time limit cuts the suite off; TESTS="FILES"
# and K="EXPR" (pytest -k) narrow it, e.g. TESTS=tests/test_score.py K="exact or few_keys");
# `bench` the benchmark table (GPU times of CUDA-graph replays; SCORE_S=s gives its scoring part more
# than 150 s, for a cold Triton cache) with the AITER peer from
# .peer/aiter; `sweep` scoring at 25 shapes (1-64 requests x 8K-128K keys) against that peer
# (about 50 s warm, 180 s on a cold Triton cache); `outliers` the exact pass where keys do not
# fold (`score_ab.py` at 0, 0.01 %, 0.1 %, 1 % and outlier channels, next_n=1 and 2; about 100 s
# warm): the package's kernel, and with BASE=FILE that variant too (a copy of
# kernels/score_kernel.py or score.py, e.g. `git show REV:fp4_inductor/kernels/score_kernel.py`),
# bit for bit against each other; SHAPES and VARIANTS (e.g. SHAPES=64x32768x4
# VARIANTS="shipped:wgmma=0 shipped:exact_rows=4": the default, 2-row exact blocks after the 4-row
# wgmma hot pass, against the 2-row pair and against 4-row exact blocks after it) widen it;
# `cuts` the hot loop with parts cut out (`cut_parts.py`; timing only, about 60 s warm); `wgmma`
# the in-flight wgmma probes (`asm_wgmma.py`: an int8 wgmma in inline PTX, values, waits and time
# of a tile loop; `wgmma_accumulators.py`: the fp8 dot's sums; about 30 s);
# `scorer` the hot pass on inline-PTX wgmmas (`wgmma_scorer.py`: logits against float64 and the
# package's, then both timed; about 270 s on a cold Triton cache); `hotwg` the package's wgmma hot
# pass (the launcher's `wgmma` tuning; by default from 2 rows per request): its GPU tests, then the
# launcher's default timed against `wgmma=0` (`score_ab.py`; VARIANTS sets the variants; where the
# default takes the wgmma pass their logits differ in the float32 sums' order, so "DIFFERS" is
# expected there; the tests check both against float64; for a short call, K and SHAPES narrow what
# runs, TEST_S and AB_S set the time limits, TEST_S=0 skips the tests); `wgprobe` the package's
# wgmma hot pass at one warpgroup per program beside the prototype (same halves and weights) under
# ncu at next_n=4 and 2, then ncu's source-level sampling of the package's at next_n=4
# ($OUT/wgprobe_source.csv.gz: stalls per SASS line, summed by part with
# benchmarks/ncu_source_summary.py; about 400 s cold); `traced` the wgmma hot pass under
# torch.compile (`traced_wgmma.py`: eager against compiled and the opaque op, bits and time;
# about 100 s);
# `occupancy` the wgmma hot pass at lower register caps, for more programs per SM (CAPS="C2,C4",
# the caps at 2 and 4 rows, default 96,128: 5 and 4 programs per SM where the launcher's 128 and 168
# plan 4 and 3; a copy of kernels/score.py with those caps, against the package's, `score_ab.py`,
# bit for bit and timed, each at one warpgroup per program (`wgmma=1,num_warps=4`; the capped form)
# and by default (2-row blocks on four warpgroups, no cap); SHAPES sets the shapes; about 150 s);
# `rowdots` the wgmma hot pass with every block's dot in two halves, one after the other, and with
# one dot per query row, two in flight (`wgmma_source.py --halves 2|3 --variant`, written here and
# removed after), against the package's (halves 2 at 2 rows, 3 at 4 rows), bit for bit and timed
# (`score_ab.py`; SHAPES sets the shapes; about 150 s on a cold Triton cache); `groups` the wgmma
# hot pass by warpgroups per program: the launcher's default (four at 2-row blocks, one at 4)
# against the default hot pass (`wgmma=0`; "DIFFERS" is expected there alone, the float32 sums in
# another order) and the pass at one and at four warpgroups everywhere (`wgmma=1,num_warps=4|16`,
# bit for bit), `score_ab.py` at SHAPES (default 4 and 2 rows at 64 x 32768, 3 rows, 16 x 131072
# and small batches), then with 0.1 % of keys that do not fold (the exact pass after each) at 2
# rows, then the pass under torch.compile (`traced_wgmma.py --next-n 4,2`: eager, compiled and the
# opaque op; about 300 s on a cold Triton cache).
# Logs go to $OUT.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp}
export TORCHINDUCTOR_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name --format=csv,noheader
case "${1:-tests}" in
tests)
  timeout "${TEST_S:-540}" python3 -m pytest -q -p no:cacheprovider -rfE ${TESTS:-tests} ${K:+-k "$K"} -m gpu > "$OUT/gpu_tests.log" 2>&1
  [ $? = 124 ] && echo "CUT OFF after ${TEST_S:-540} s: the GPU suite did not finish (see $OUT/gpu_tests.log)"
  tail -2 "$OUT/gpu_tests.log"
  grep -E "^(FAILED|ERROR)" "$OUT/gpu_tests.log" | head -20
  ;;
bench)
  timeout "${SCORE_S:-150}" python3 -m fp4_inductor.bench --only score --aiter-root .peer/aiter > "$OUT/bench_score.log" 2>&1
  for part in topk store step; do
    timeout 60 python3 -m fp4_inductor.bench --only $part > "$OUT/bench_$part.log" 2>&1
  done
  grep -hE "^\| [a-zA-Z]" "$OUT"/bench_*.log | grep -v "^| case"
  ;;
sweep)
  shapes=$(for b in 1 4 16 64; do for c in 8192 32768 131072; do for n in 1 2; do printf "%sx%sx%s," $b $c $n; done; done; done)
  timeout 500 python3 -m fp4_inductor.bench --only score --no-torch-peer --aiter-root .peer/aiter \
    --shapes "${shapes}64x32768x4" > "$OUT/bench_sweep.log" 2>&1
  grep -E "^\| (score_paged fp4 B|AITER)" "$OUT/bench_sweep.log"
  ;;
outliers)
  BASE=${BASE:+$(realpath "$BASE")}
  cd benchmarks
  for o in 0 0.0001 0.001 0.01 channels; do
    if [ $o = channels ]; then extra=--outlier-channels; else extra="--outliers $o"; fi
    PYTHONPATH=$PWD/..:$PWD timeout 100 python3 score_ab.py --shapes ${SHAPES:-64x32768x1,64x32768x2} --rounds 2 $extra \
      shipped ${BASE:+"$BASE"} ${VARIANTS:-} > "$OUT/outliers_$o.log" 2>&1 || echo "outliers $o: rc $?"
  done
  grep -h "DIFFERS" "$OUT"/outliers_*.log
  grep -h "^| [0-9]" "$OUT"/outliers_*.log | awk '!seen[$0]++'
  ;;
wgmma)
  timeout 200 python3 benchmarks/asm_wgmma.py > "$OUT/asm_wgmma.log" 2>&1 || echo "asm_wgmma: rc $?"
  timeout 120 python3 benchmarks/wgmma_accumulators.py > "$OUT/wgmma_accumulators.log" 2>&1 || echo "wgmma_accumulators: rc $?"
  cat "$OUT/asm_wgmma.log"
  grep -E "^\| (random|wide)" "$OUT/wgmma_accumulators.log"
  ;;
scorer)
  timeout 540 python3 benchmarks/wgmma_scorer.py > "$OUT/wgmma_scorer.log" 2>&1 || echo "wgmma_scorer: rc $?"
  grep -E "^(\| [0-9]|FAILED)" "$OUT/wgmma_scorer.log" | grep -v "^| 4x4096"
  ;;
hotwg)
  if [ "${TEST_S:-200}" != 0 ]; then
    timeout "${TEST_S:-200}" python3 -m pytest -q -p no:cacheprovider -rfE tests/test_wgmma.py -m gpu ${K:+-k "$K"} \
      > "$OUT/wgmma_tests.log" 2>&1
    [ $? = 124 ] && echo "CUT OFF after ${TEST_S:-200} s: the wgmma GPU tests did not finish"
    tail -2 "$OUT/wgmma_tests.log"; grep -E "^(FAILED|ERROR)" "$OUT/wgmma_tests.log" | head
  fi
  cd benchmarks
  PYTHONPATH=$PWD/..:$PWD timeout "${AB_S:-240}" python3 score_ab.py \
    --shapes ${SHAPES:-64x32768x4,64x32768x3,64x32768x2,16x131072x2} --rounds 2 ${VARIANTS:-shipped:wgmma=0 shipped} \
    > "$OUT/wgmma_ab.log" 2>&1 || echo "score_ab: rc $?"
  grep -h "^| [0-9]" "$OUT/wgmma_ab.log" | awk '!seen[$0]++'
  ;;
wgprobe)
  CASE_S=100 bash benchmarks/ncu_wgmma.sh "package 4 wgmma=1,num_warps=4;proto 4,1,1,2,1;package 2 wgmma=1,num_warps=4;proto 2,1,1,2,1" \
    > "$OUT/ncu_wgmma.log" 2>&1 || echo "ncu_wgmma: rc $?"
  cat "$OUT/ncu_wgmma.log"
  source benchmarks/ncu_common.sh
  timeout 90 "$NCU" --clock-control none -k score_paged_kernel -c 1 --section SourceCounters --section WarpStateStats \
    -o "$OUT/wgprobe" -f python3 benchmarks/profile_score.py 4 wgmma=1,num_warps=4 > "$OUT/wgprobe_ncu.log" 2>&1 || echo "ncu: rc $?"
  [ -f "$OUT/wgprobe.ncu-rep" ] && timeout 30 "$NCU" --import "$OUT/wgprobe.ncu-rep" --page source --csv \
    --print-source sass 2>&1 | gzip > "$OUT/wgprobe_source.csv.gz"
  tail -2 "$OUT/wgprobe_ncu.log"
  [ -f "$OUT/wgprobe_source.csv.gz" ] && python3 benchmarks/ncu_source_summary.py "$OUT/wgprobe_source.csv.gz"
  ;;
traced)
  timeout 200 python3 benchmarks/traced_wgmma.py > "$OUT/traced_wgmma.log" 2>&1 || echo "traced_wgmma: rc $?"
  grep "^|" "$OUT/traced_wgmma.log"
  ;;
occupancy)
  caps=${CAPS:-96,128}
  variant=/tmp/score_occupancy.py
  sed "s/^WGMMA_REGISTERS = .*/WGMMA_REGISTERS = {128: ${caps%,*}, 256: ${caps#*,}}/" fp4_inductor/kernels/score.py > $variant
  grep -q "^WGMMA_REGISTERS = {128: ${caps%,*}, 256: ${caps#*,}}$" $variant || { echo "occupancy: the caps did not take"; exit 1; }
  cd benchmarks
  PYTHONPATH=$PWD/..:$PWD timeout "${AB_S:-300}" python3 score_ab.py \
    --shapes ${SHAPES:-64x32768x4,64x32768x3,64x32768x2,16x131072x2} --rounds 2 \
    shipped $variant shipped:wgmma=1,num_warps=4 $variant:wgmma=1,num_warps=4 > "$OUT/occupancy.log" 2>&1 || echo "score_ab: rc $?"
  grep -h "DIFFERS" "$OUT/occupancy.log"
  grep -h "^| [0-9]" "$OUT/occupancy.log" | awk '!seen[$0]++'
  ;;
rowdots)
  python3 -m fp4_inductor.kernels.wgmma_source --halves 2 --variant || exit 1
  python3 -m fp4_inductor.kernels.wgmma_source --halves 3 --variant || exit 1
  cd benchmarks
  K=../fp4_inductor/kernels
  PYTHONPATH=$PWD/..:$PWD timeout "${AB_S:-150}" python3 score_ab.py \
    --shapes ${SHAPES:-64x32768x4,64x32768x2,16x131072x2} --rounds 2 \
    shipped:wgmma=1 $K/kernel_h2.py:wgmma=1 $K/kernel_h3.py:wgmma=1 shipped > "$OUT/rowdots.log" 2>&1 \
    || echo "score_ab: rc $?"
  rm -f $K/kernel_h2.py $K/score_wgmma_h2.py $K/kernel_h3.py $K/score_wgmma_h3.py
  grep -h "DIFFERS" "$OUT/rowdots.log"
  grep -h "^| [0-9]" "$OUT/rowdots.log" | awk '!seen[$0]++'
  ;;
groups)
  variants="shipped shipped:wgmma=0 shipped:wgmma=1,num_warps=4 shipped:wgmma=1,num_warps=16"
  (cd benchmarks && PYTHONPATH=$PWD/..:$PWD timeout "${AB_S:-240}" python3 score_ab.py \
    --shapes ${SHAPES:-64x32768x4,64x32768x2,64x32768x3,16x131072x2,1x8192x2,4x32768x2,16x32768x2} --rounds 2 \
    $variants > "$OUT/groups_ab.log" 2>&1 || echo "score_ab: rc $?"
    PYTHONPATH=$PWD/..:$PWD timeout "${OUTLIER_S:-100}" python3 score_ab.py --shapes 64x32768x2,16x131072x2 --rounds 2 \
    --outliers 0.001 $variants > "$OUT/groups_outliers.log" 2>&1 || echo "score_ab outliers: rc $?")
  timeout "${TR_S:-150}" python3 benchmarks/traced_wgmma.py --next-n 4,2 > "$OUT/groups_traced.log" 2>&1 \
    || echo "traced_wgmma: rc $?"
  grep -h "DIFFERS" "$OUT/groups_ab.log" "$OUT/groups_outliers.log"
  grep "^|" "$OUT/groups_traced.log"
  grep -h "^| [0-9]" "$OUT/groups_ab.log" "$OUT/groups_outliers.log" | awk '!seen[$0]++'
  ;;
cuts)
  python3 benchmarks/cut_parts.py /tmp/cuts > /dev/null || exit 1
  cd benchmarks
  PYTHONPATH=$PWD/..:$PWD timeout 300 python3 score_ab.py --shapes 64x32768x1,64x32768x2,64x32768x4 --rounds 2 \
    shipped /tmp/cuts/cut_builder.py /tmp/cuts/cut_epilogue.py /tmp/cuts/cut_both.py /tmp/cuts/cut_bare.py \
    > "$OUT/cuts.log" 2>&1 || echo "cuts: rc $?"
  # A cut whose logits match the shipped kernel's did not take.
  grep "cut_.*bit-identical" "$OUT/cuts.log" | sed 's/^/CUT NOT APPLIED: /'
  grep -h "^| [0-9]" "$OUT/cuts.log" | awk '!seen[$0]++'
  ;;
esac
