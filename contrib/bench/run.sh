#!/bin/sh
# Entry point of the strata vs PyTorch benchmark: installs the PyTorch
# anchor (Debian's python3-torch, into the system python) when it is
# missing, then runs bench.py with the given options (see README.md).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
py=${BENCH_PYTHON:-/usr/bin/python3}

if ! "$py" -c 'import torch' >/dev/null 2>&1; then
    if [ "$py" != /usr/bin/python3 ]; then
        echo "run.sh: $py cannot import torch" >&2
        exit 2
    fi
    echo "run.sh: installing python3-torch (Debian) for $py" >&2
    sudo=
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q \
        python3-torch >&2
    "$py" -c 'import torch' || {
        echo "run.sh: python3-torch installed but 'import torch' fails" >&2
        exit 2
    }
fi
exec "$py" "$here/bench.py" --python "$py" "$@"
