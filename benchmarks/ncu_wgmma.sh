#!/usr/bin/env bash
# ncu of the wgmma hot pass: the package's (benchmarks/profile_score.py with the launcher's
# tunings; its first launch, the hot pass) beside the prototype's (benchmarks/wgmma_scorer.py
# --profile; its second launch, the first sizes the programs), 64 x 32768 keys: time,
# instructions, issue, stalls, load sectors, L2 and DRAM bytes, each with its unit.
# usage (repository root, PYTHONPATH=$PWD): bash benchmarks/ncu_wgmma.sh "CASE;CASE", a CASE being
# "package NEXT_N TUNINGS" (e.g. "package 4 wgmma=1") or "proto ROWS,TILES,DEPTH,HALVES,SHARED".
# A case that fails prints its exit status and the last lines ncu printed.
source "$(dirname "$0")/ncu_common.sh"
metrics="gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active"
metrics+=",launch__registers_per_thread,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active"
metrics+=",dram__bytes_read.sum,lts__t_bytes.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
metrics+=",l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"
metrics+=,$(stall_metrics long_scoreboard short_scoreboard barrier wait math_pipe_throttle mio_throttle lg_throttle \
  not_selected membar)
IFS=';' read -ra cases <<< "$1"
for c in "${cases[@]}"; do
  set -- $c
  echo "== $c"
  if [ "$1" = package ]; then
    raw=$(timeout "${CASE_S:-120}" "$NCU" --clock-control none -k score_paged_kernel -c 1 --metrics "$metrics" \
      python3 benchmarks/profile_score.py "$2" "${3:-wgmma=0}" 2>&1)
  else
    raw=$(timeout "${CASE_S:-120}" "$NCU" --clock-control none -k regex:wg_score --launch-skip 1 -c 1 \
      --metrics "$metrics" python3 benchmarks/wgmma_scorer.py --profile "$2" 2>&1)
  fi
  rc=$?
  echo "$raw" | grep -E "^\s+(gpu__|smsp__|sm__|dram__|lts__|l1tex__|launch__)" | awk '{print $1, $(NF-1), $NF}'
  [ $rc = 0 ] || { echo "rc $rc"; echo "$raw" | tail -5; }
done
