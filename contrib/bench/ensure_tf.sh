#!/bin/sh
# ensure_tf.sh VENV [BENCH ARGS...]: make `VENV/bin/python -c 'import
# tensorflow'` work, the TensorFlow anchor of the benchmarks: PyPI's
# tensorflow-cpu into the venv VENV (made when missing; ~1.6 GB).
# Exit 0: TensorFlow is there; 3: the bench arguments need none (--skip-tf,
# --accuracy-only, --help); 2: PyPI has no tensorflow-cpu for this Python,
# or the install does not give a working tensorflow.
set -eu
venv=$1
shift
for arg in "$@"; do
    case $arg in
    --skip-tf | --accuracy-only | -h | --help) exit 3 ;;
    esac
done
"$venv/bin/python" -c 'import tensorflow' >/dev/null 2>&1 && exit 0
echo "bench: installing tensorflow-cpu (PyPI) into $venv" >&2
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
"$venv/bin/python" -m pip index versions tensorflow-cpu >&2 || {
    echo "bench: PyPI has no tensorflow-cpu for this Python; run with" \
        "--skip-tf" >&2
    exit 2
}
"$venv/bin/python" -m pip install -q tensorflow-cpu >&2
"$venv/bin/python" -c 'import tensorflow' || {
    echo "bench: tensorflow-cpu installed but 'import tensorflow' fails" \
        "(run with --skip-tf)" >&2
    exit 2
}
