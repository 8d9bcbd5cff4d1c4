# Sourced by the ncu scripts: NCU (ncu on PATH, else the newest under /opt/nvidia/nsight-compute;
# exits when there is none) and stall_metrics REASON... (ncu's per-issue stall ratio of
# each reason, comma-separated).
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | sort -V | tail -1 || true)
[ -x "$NCU" ] || { echo "no ncu found"; exit 1; }
stall_metrics() {
  local s out=""
  for s in "$@"; do out+=",smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio"; done
  echo "${out#,}"
}
