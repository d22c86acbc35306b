#!/bin/bash
# Interleaved A/B of two strata binaries on the same job: for ROUNDS rounds,
# one run of A then one of B (so that a burst of load on a shared machine
# hits both), each EPOCHS epochs without evaluation; prints the fastest and
# the median epoch time of each from the metrics CSV.
#
#   contrib/bench/ab.sh OLD/bin/strata build/bin/strata [ROUNDS] [BATCH] [DEVICES] [EPOCHS]
#   contrib/bench/ab.sh /tmp/base/build/bin/strata build/bin/strata 4 64 cpu:0,cpu:1
set -euo pipefail
if [ $# -lt 2 ]; then
    sed -n '2,8p' "$0" >&2
    exit 2
fi
bins=("$1" "$2")
rounds=${3:-4} batch=${4:-64} devices=${5:-cpu:0,cpu:1} epochs=${6:-4}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for _ in $(seq "$rounds"); do
    for w in 0 1; do
        "${bins[$w]}" train --set train.batch_size="$batch" \
            --set train.epochs="$epochs" --set train.devices="$devices" \
            --set train.eval=false --set train.progress=none \
            --set train.metrics_csv="$tmp/m.csv" >/dev/null
        # column 7 of the metrics CSV: the epoch's seconds
        tail -n +2 "$tmp/m.csv" | cut -d, -f7 >> "$tmp/$w.txt"
    done
done
for w in 0 1; do
    sort -n "$tmp/$w.txt" | awk -v name="${bins[$w]}" '{ a[NR] = $1 }
        END { printf "%s: fastest epoch %.4f s, median %.4f s (%d epochs)\n",
              name, a[1], a[int((NR + 1) / 2)], NR }'
done
