#!/usr/bin/env bash
# Set up a virtual environment and run the main job: the decode loop of a toy DSA model whose
# indexers are swapped to FP4 and compiled (examples/decode_loop.py; flags scale it up).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
python examples/decode_loop.py "$@"
