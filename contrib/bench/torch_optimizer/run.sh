#!/bin/sh
# contrib/bench/torch_optimizer/run.sh [-n N] [bench.py options]: the
# DistributedOptimizer vs DDP gloo table with the build tree's strata,
# under Debian's python3-torch (ensure_torch.sh installs it when missing).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
n=2
if [ "${1:-}" = -n ]; then n=$2; shift 2; fi
bin=${STRATA_BIN:-$root/build/bin/strata}
py=/usr/bin/python3
"$here/../ensure_torch.sh" "$py"
STRATA_LIBRARY=${STRATA_LIBRARY:-$root/build/lib/libstrata.so} \
PYTHONPATH=$root/python OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
    exec "$bin" launch -n "$n" "$py" "$here/bench.py" "$@"
