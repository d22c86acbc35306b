#!/bin/sh
# Entry point of the strata MLP benchmark (see README.md beside this file):
# installs the anchors when they are missing (PyTorch; TensorFlow into
# $BENCH_VENV or the CNN benchmark's cnn/.venv, unless --skip-tf or
# --accuracy-only: run_anchored.sh), then runs bench.py.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/run_anchored.sh" "$here/bench.py" "${BENCH_VENV:-$here/cnn/.venv}" \
    "$@"
