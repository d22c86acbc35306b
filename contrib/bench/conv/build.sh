#!/bin/sh
# Builds conv_bench as OUT (default ./conv_bench) from the tree's
# kernels/cpu with the library's flags; run.sh and ../cnn/bench.py use it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${1:-conv_bench}
exec ${CC:-cc} -O2 -std=c11 -D_GNU_SOURCE -fno-math-errno -ffp-contract=off \
    -I"$root/kernels/cpu" -o "$out" "$here/conv_bench.c" \
    "$root"/kernels/cpu/*.c -lopenblas -lm
