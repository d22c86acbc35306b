#!/bin/bash
# Every test, as CI runs it, from a fresh Debian 12 machine:
#   1. install the Debian packages strata needs (contrib/debian-deps.sh)
#   2. gcc build (warnings are errors) and the whole ctest suite
#   3. gcc Release build (warnings are errors; -O3 finds warnings that
#      RelWithDebInfo's -O2 does not), CUDA as in stage 2; clang builds
#      RelWithDebInfo in stages 4 and 5
#   4. AddressSanitizer + UndefinedBehaviorSanitizer build and the suite
#      (without the slow end-to-end accuracy run)
#   5. ThreadSanitizer build and the threaded tests (label "threads")
#   6. the build types the stages above do not cover, product only (no
#      tests): gcc Debug and clang Release (CUDA as in stage 2), clang
#      Debug (CUDA off)
# The CUDA targets are built when a CUDA toolkit is installed (GPU tests run
# where a GPU exists and are reported skipped elsewhere). So every build
# type (Release, Debug, RelWithDebInfo) is built by gcc and by clang, with
# CUDA on (where installed) and off.
# Build trees go to $STRATA_TEST_BUILD (default: ./build-test).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${STRATA_TEST_BUILD:-$root/build-test}
jobs=${JOBS:-$(nproc)}

contrib/debian-deps.sh
# The checkpoint interop test opens strata's files with Python's safetensors,
# tests/watch reads the TensorBoard event files with TensorBoard's own
# reader, and the Python package's tests (tests/python) run under pytest;
# without the packages those tests are reported as skipped.
python3 -m pip install -q safetensors numpy tensorboard pytest 2>/dev/null ||
    echo "run_all: pip install safetensors numpy tensorboard pytest failed;" \
         "the interop and Python tests will skip"

# strata.torch's tests (python_torch, the torchrun cases of python_launchers
# and tests/multinode) run under the first Python that has PyTorch: Debian's
# python3-torch (about 50 MB to download) for Debian's python3 with its
# pytest. Tests only: strata needs no torch. Without it they skip.
if ! /usr/bin/python3 -c "import torch, pytest" 2>/dev/null; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    { $SUDO apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
        --no-install-recommends python3-torch python3-pytest >/dev/null; } ||
        echo "run_all: apt-get install python3-torch python3-pytest failed;" \
             "the PyTorch tests will skip"
fi

step() { printf '\n==== %s\n' "$*"; }

build() { # dir, cmake args... (a later -DCMAKE_BUILD_TYPE wins)
    local dir=$1; shift
    cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
    cmake --build "$dir" -j "$jobs"
}

cuda=OFF
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
    cuda=ON
    export PATH="$PATH:/usr/local/cuda/bin"
fi

step "gcc build (STRATA_CUDA=$cuda) and every test"
CC=gcc build "$out/gcc" -DSTRATA_CUDA=$cuda
ctest --test-dir "$out/gcc" --output-on-failure -j 2
# A skipped test says why (no GPU, no data set, ...): show it.
grep -h "^SKIPPED" "$out/gcc/Testing/Temporary/LastTest.log" | sort -u || true

step "gcc Release build (STRATA_CUDA=$cuda)"
CC=gcc build "$out/release" -DSTRATA_CUDA=$cuda -DCMAKE_BUILD_TYPE=Release

step "AddressSanitizer + UndefinedBehaviorSanitizer"
CC=clang build "$out/asan" -DSTRATA_CUDA=OFF -DSTRATA_SANITIZE=address,undefined
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "$out/asan" --output-on-failure -LE slow -j 2

step "ThreadSanitizer (threaded tests)"
CC=clang build "$out/tsan" -DSTRATA_CUDA=OFF -DSTRATA_SANITIZE=thread
TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/tsan.supp" \
    ctest --test-dir "$out/tsan" --output-on-failure -L threads -j 2

step "the other build types, product only: gcc Debug, clang Release (STRATA_CUDA=$cuda), clang Debug"
CC=gcc build "$out/gcc-debug" -DSTRATA_CUDA=$cuda -DCMAKE_BUILD_TYPE=Debug \
    -DSTRATA_BUILD_TESTS=OFF
CC=clang build "$out/clang-release" -DSTRATA_CUDA=$cuda \
    -DCMAKE_BUILD_TYPE=Release -DSTRATA_BUILD_TESTS=OFF
CC=clang build "$out/clang-debug" -DSTRATA_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug \
    -DSTRATA_BUILD_TESTS=OFF

step "all test stages passed"
