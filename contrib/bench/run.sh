#!/bin/sh
# Entry point of the strata vs PyTorch benchmark: installs the PyTorch
# anchor (Debian's python3-torch, into the system python) when it is
# missing, then runs bench.py with the given options (see README.md).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
py=${BENCH_PYTHON:-/usr/bin/python3}

"$here/ensure_torch.sh" "$py"
exec "$py" "$here/bench.py" --python "$py" "$@"
