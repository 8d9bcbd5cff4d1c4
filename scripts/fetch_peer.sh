#!/usr/bin/env bash
# The AITER FP8 peer for the benchmark, without ROCm: download the pure-Python amd-aiter wheel
# (no dependencies) and unpack only its two paged MQA-logits files into .peer/aiter (git-ignored),
# the folder `python -m fp4_inductor.bench --aiter-root .peer/aiter` and benchmarks/device_run.sh
# load them from. Run on a machine that reaches PyPI; the GPU machine takes .peer as carried files.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${AITER_VERSION:-0.1.7.post2.dev18}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --disable-pip-version-check --no-deps "amd-aiter==$version" -d "$tmp"
python3 - "$tmp" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/amd_aiter-*.whl")[0]
files = ["aiter/ops/triton/pa_mqa_logits.py", "aiter/ops/triton/_triton_kernels/pa_mqa_logits.py"]
with zipfile.ZipFile(wheel) as z:
    for name in files:
        z.extract(name, ".peer")
print("peer files in .peer/:", ", ".join(files))
PY
