#!/usr/bin/env bash
# Set up a virtual environment (CPU torch + Triton for the interpreter) and run the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
python -m pytest -q -p no:cacheprovider "$@"
