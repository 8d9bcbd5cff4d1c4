#!/usr/bin/env bash
# Stall reasons and instruction count of one score_paged launch (ncu on the device machine).
# usage: bash benchmarks/ncu_score.sh NEXT_N
set -euo pipefail
source "$(dirname "$0")/ncu_common.sh"
metrics="gpu__time_duration.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active"
metrics+=",dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active"
metrics+=,$(stall_metrics long_scoreboard short_scoreboard barrier wait math_pipe_throttle mio_throttle lg_throttle \
  not_selected selected dispatch_stall no_instruction branch_resolving)
"$NCU" --clock-control none -k score_paged_kernel -c 1 --metrics "$metrics" python3 benchmarks/profile_score.py "${1:-1}" 2>&1 | grep -E "^\s+(gpu__|smsp__|sm__|dram__)"
