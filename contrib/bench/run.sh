#!/bin/sh
# Entry point of the strata MLP benchmark (see README.md beside this file):
# installs the anchors when they are missing, then runs bench.py.
#   - PyTorch: Debian's python3-torch into the system python
#     (ensure_torch.sh);
#   - TensorFlow: PyPI's tensorflow-cpu into a venv, $BENCH_VENV or the CNN
#     benchmark's cnn/.venv (~1.6 GB; ensure_tf.sh), unless --skip-tf or
#     --accuracy-only.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
py=${BENCH_PYTHON:-/usr/bin/python3}
venv=${BENCH_VENV:-$here/cnn/.venv}

"$here/ensure_torch.sh" "$py"
rc=0
"$here/ensure_tf.sh" "$venv" "$@" || rc=$?
case $rc in
0) set -- --tf-python "$venv/bin/python" "$@" ;;
3) ;;                                   # no TensorFlow wanted
*) exit "$rc" ;;
esac
exec "$py" "$here/bench.py" --python "$py" "$@"
