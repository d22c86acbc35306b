#!/bin/sh
# Entry point of the MirroredStrategy (mwms) vs ParameterServerStrategy (ps)
# benchmark: runs bench.py with the given options (see README.md). The
# slowlink condition needs root (network namespaces, tc); without it that
# part is skipped with the reason printed.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
exec "${BENCH_PYTHON:-python3}" "$here/bench.py" "$@"
