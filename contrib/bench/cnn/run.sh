#!/bin/sh
# Entry point of the strata CNN benchmark (see README.md beside this file):
# installs the anchors when they are missing, then runs bench.py.
#   - PyTorch: Debian's python3-torch into the system python
#     (../ensure_torch.sh, as for the MLP benchmark);
#   - TensorFlow: PyPI's tensorflow-cpu into a venv, $BENCH_VENV or .venv
#     beside this file (~1.6 GB; ../ensure_tf.sh), unless --skip-tf or
#     --accuracy-only.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
py=${BENCH_PYTHON:-/usr/bin/python3}
venv=${BENCH_VENV:-$here/.venv}

need_tf=1
for arg in "$@"; do
    case $arg in
    --skip-tf | --accuracy-only | -h | --help) need_tf=0 ;;
    esac
done

"$here/../ensure_torch.sh" "$py"

[ "$need_tf" = 0 ] || "$here/../ensure_tf.sh" "$venv"

if [ "$need_tf" = 1 ]; then
    set -- --tf-python "$venv/bin/python" "$@"
fi
exec "$py" "$here/bench.py" --python "$py" "$@"
