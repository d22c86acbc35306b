#!/bin/sh
# Install what strata needs to build, test and run on Debian 12 (bookworm).
# Everything comes from Debian's archive; nothing is downloaded otherwise.
# The CUDA toolkit and NCCL (for -DSTRATA_CUDA) are not Debian packages:
# install them from NVIDIA if you want the GPU path.
set -eu
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# openmpi-bin: tests only (tests/multinode starts a job with mpirun);
# strata links no MPI library. Not installed here: python3-torch, which
# tests/run_all.sh installs for the tests of strata.torch and torchrun.
# qemu-user: tests only (tests/cli/test_blas.c emulates a CPU that OpenBLAS
# does not know). python3-numpy: tests only (tests/checkpoint/predict.py
# checks strata predict against a NumPy forward pass). python3-pip,
# python3-venv: the Python package (pip install ./python, in a virtual
# environment: Debian's own Python is externally managed).
PKGS="build-essential cmake pkg-config clang libinih-dev libopenblas-dev
      zlib1g-dev libzmq3-dev libsodium-dev libipsec-mb-dev libssl-dev libcjson-dev
      dataset-fashion-mnist
      iproute2 openmpi-bin qemu-user python3-numpy python3-pip python3-venv"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
        || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "debian-deps: installing:$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
