#!/bin/sh
# run_anchored.sh BENCH_PY VENV [BENCH ARGS...]: the benchmarks' common
# entry (run.sh, cnn/run.sh). Installs the anchors when they are missing,
# then runs BENCH_PY with the arguments:
#   - PyTorch: Debian's python3-torch into the system python,
#     $BENCH_PYTHON or /usr/bin/python3 (ensure_torch.sh);
#   - TensorFlow: PyPI's tensorflow-cpu into the venv VENV (~1.6 GB;
#     ensure_tf.sh), unless --skip-tf or --accuracy-only.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bench=$1
venv=$2
shift 2
py=${BENCH_PYTHON:-/usr/bin/python3}

"$here/ensure_torch.sh" "$py"
rc=0
"$here/ensure_tf.sh" "$venv" "$@" || rc=$?
case $rc in
0) set -- --tf-python "$venv/bin/python" "$@" ;;
3) ;;                                   # no TensorFlow wanted
*) exit "$rc" ;;
esac
exec "$py" "$bench" --python "$py" "$@"
