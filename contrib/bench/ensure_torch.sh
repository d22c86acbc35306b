#!/bin/sh
# ensure_torch.sh PYTHON: make `import torch` work for PYTHON, the anchor of
# the benchmarks: Debian's python3-torch into the system python when it is
# missing. Exit 2 when PYTHON is another interpreter without torch, or the
# install does not give a working torch.
set -eu
py=$1
"$py" -c 'import torch' >/dev/null 2>&1 && exit 0
if [ "$py" != /usr/bin/python3 ]; then
    echo "bench: $py cannot import torch" >&2
    exit 2
fi
echo "bench: installing python3-torch (Debian) for $py" >&2
sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
$sudo apt-get update -q >&2
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q python3-torch >&2
"$py" -c 'import torch' || {
    echo "bench: python3-torch installed but 'import torch' fails" >&2
    exit 2
}
