#!/bin/bash
# Fuzz the parsers of untrusted input for a set time each (README.md here):
#
#   tests/fuzz/run.sh [SECONDS] [HARNESS...]
#
# SECONDS per harness (default 60); HARNESS among ini idx npy safetensors
# zmq_wire ps_wire (default: all, one after the other). Builds the libFuzzer
# binaries with clang (-DSTRATA_FUZZ=ON) into $OUT/build and runs each from
# its seed corpus (tests/fuzz/corpus/NAME, only read) plus $OUT/corpus/NAME,
# where new inputs go; crashes, leaks, timeouts and broken invariants go to
# $OUT/crashes/NAME/, each run's output to $OUT/logs/NAME.log.
#   OUT        $STRATA_FUZZ_OUT, default ${TMPDIR:-/tmp}/strata-fuzz
#   FUZZ_FLAGS more libFuzzer flags (e.g. -jobs=4 -workers=4)
# Exit 1 when any harness found something. Not part of CI.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
secs=${1:-60}
[ $# -gt 0 ] && shift
all=(ini idx npy safetensors zmq_wire ps_wire)
if [ $# -gt 0 ]; then harnesses=("$@"); else harnesses=("${all[@]}"); fi
# Largest input per harness: room for every structure, small enough to be fast.
declare -A max_len=([ini]=4096 [idx]=8192 [npy]=8192 [safetensors]=8192
                    [zmq_wire]=256 [ps_wire]=512)
for h in "${harnesses[@]}"; do
    [ -n "${max_len[$h]:-}" ] || { echo "run.sh: unknown harness '$h' (${all[*]})" >&2; exit 2; }
done
out=${STRATA_FUZZ_OUT:-${TMPDIR:-/tmp}/strata-fuzz}
build=$out/build
mkdir -p "$out/logs"

echo "run.sh: building into $build"
CC=clang cmake -S "$root" -B "$build" -DSTRATA_FUZZ=ON -DSTRATA_CUDA=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$out/logs/cmake.log"
targets=()
for h in "${harnesses[@]}"; do targets+=("fuzz_${h}_fuzzer"); done
cmake --build "$build" -j "${JOBS:-$(nproc)}" --target "${targets[@]}" \
    >>"$out/logs/cmake.log"

export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
found=0
printf '%-12s %6s %10s %6s %6s %7s %8s\n' harness rc execs cov ft corpus crashes
for h in "${harnesses[@]}"; do
    mkdir -p "$out/corpus/$h" "$out/crashes/$h"
    dict=()
    [ -f "tests/fuzz/dict/$h.dict" ] && dict=(-dict="tests/fuzz/dict/$h.dict")
    log=$out/logs/$h.log
    rc=0
    # shellcheck disable=SC2086 # FUZZ_FLAGS: words on purpose
    "$build/tests/fuzz/fuzz_${h}_fuzzer" -max_total_time="$secs" \
        -max_len="${max_len[$h]}" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$out/crashes/$h/" \
        "${dict[@]}" ${FUZZ_FLAGS:-} "$out/corpus/$h" "tests/fuzz/corpus/$h" \
        >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    ncorpus=$(find "$out/corpus/$h" -type f | wc -l)
    ncrash=$(find "$out/crashes/$h" -type f | wc -l)
    printf '%-12s %6s %10s %6s %6s %7s %8s\n' "$h" "$rc" "${execs:-?}" \
        "${cov:-?}" "${ft:-?}" "$ncorpus" "$ncrash"
    if [ "$rc" -ne 0 ] || [ "$ncrash" -gt 0 ]; then
        found=1
        grep -m1 -E 'ERROR: |runtime error|invariant failed|Timeout|out-of-memory' "$log" | sed 's/^/    /' || true
    fi
done
if [ "$found" -ne 0 ]; then
    echo "run.sh: findings in $out/crashes (logs: $out/logs). Reproduce one:"
    echo "  $build/tests/fuzz/fuzz_NAME_fuzzer $out/crashes/NAME/crash-..."
    echo "then see tests/fuzz/README.md (a fixed bug's reproducer becomes a seed)."
    exit 1
fi
echo "run.sh: nothing found; new inputs in $out/corpus"
