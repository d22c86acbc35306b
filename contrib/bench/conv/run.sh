#!/bin/sh
# Builds conv_bench against the tree's kernels (build.sh) and fma_peak,
# measures the peak, then runs the bench with it (see README.md).
# Arguments go to conv_bench.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${BENCH_OUT:-$(mktemp -d)}
cc=${CC:-cc}
"$here/build.sh" "$out/conv_bench"
$cc -O2 -o "$out/fma_peak" "$root/contrib/bench/peak/fma_peak.c" -lpthread
peak=$("$out/fma_peak" | sed -n 's/.*"fp32_gflops_per_core": \([0-9.]*\).*/\1/p')
echo "fma_peak: $peak GFLOP/s per core"
exec "$out/conv_bench" --peak "$peak" "$@"
