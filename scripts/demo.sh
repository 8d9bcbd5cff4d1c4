#!/usr/bin/env bash
# Set up a virtual environment and run the CPU demo: quantize -> store -> score -> top-k.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
python examples/demo.py "$@"
