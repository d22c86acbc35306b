#!/bin/sh
# Compressed gradients on a limited link: the all-reduce time of zmq.so
# with compression none, fp16 and bf16 when the bytes must cross a link of
# RATE (tc tbf on the loopback of a private network namespace, which every
# rank's traffic shares, in both directions: a half-duplex link of RATE).
# shm = off, so the data take the direct TCP sockets.
#
#   contrib/bench/compression/wire.sh [-b BUILD_DIR] [-n RANKS]
#                                     [-r "1gbit 100mbit"] [-k LAUNCHES]
#                                     [-s "1048576 16777216"]
#
# Needs CAP_NET_ADMIN (root) for unshare -n and tc; says so otherwise.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=$root/build
n=2
rates="1gbit 100mbit"
sizes="1048576 16777216"
launches=3
while getopts b:n:r:s:k: opt; do
    case $opt in
    b) build=$(cd "$OPTARG" && pwd) ;;
    n) n=$OPTARG ;;
    r) rates=$OPTARG ;;
    s) sizes=$OPTARG ;;
    k) launches=$OPTARG ;;
    *) sed -n '2,13p' "$0" >&2; exit 2 ;;
    esac
done
plugin=$build/lib/strata/plugins/zmq.so
[ -f "$plugin" ] || { echo "wire.sh: no $plugin (build strata first)" >&2; exit 2; }
command -v tc >/dev/null && command -v unshare >/dev/null ||
    { echo "wire.sh: needs tc (iproute2) and unshare" >&2; exit 2; }
unshare -n true 2>/dev/null ||
    { echo "wire.sh: cannot make a network namespace (needs root)" >&2; exit 2; }

OUT=${OUT:-$(mktemp -d /tmp/strata-wire-XXXXXX)}
mkdir -p "$OUT"
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -I"$root/include" \
    -o "$OUT/strata_allreduce" "$root/contrib/bench/allreduce/strata_allreduce.c" \
    "$root"/plugins/kit/*.c -ldl -lzmq -lm
res=$OUT/results.txt
: >"$res"
for rate in $rates; do
    for k in $(seq 1 "$launches"); do
        echo "wire.sh: $rate, launch $k of $launches" >&2
        for c in none fp16 bf16; do
            unshare -n sh -c "ip link set lo up &&
                tc qdisc add dev lo root tbf rate $rate burst 1mb latency 1s &&
                '$OUT/strata_allreduce' -p '$plugin' -n $n -o shm=off \
                    -o compression=$c $sizes" >"$OUT/last.out" 2>"$OUT/last.err" ||
                { echo "wire.sh: $rate $c failed:" >&2; tail -5 "$OUT/last.err" >&2; exit 1; }
            awk -v r="$rate" -v c="$c" '$1 == "RESULT" { print r, c, $4, $5 }' \
                "$OUT/last.out" >>"$res"
        done
    done
done
echo "wire.sh: raw results in $res" >&2
/usr/bin/python3 - "$res" "$n" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    rate, comp, size, t = line.split()
    runs.setdefault((rate, int(size), comp), []).append(float(t))
med = {k: statistics.median(v) for k, v in runs.items()}
print("all-reduce of %s ranks over a tc-shaped link, time per call (median "
      "of launches)" % sys.argv[2])
print("%-8s %8s %11s %11s %11s %10s %10s" % ("link", "size", "none", "fp16",
                                             "bf16", "fp16 speed", "bf16 speed"))
for rate in dict.fromkeys(k[0] for k in med):
    for size in sorted({k[1] for k in med if k[0] == rate}):
        t = {c: med.get((rate, size, c)) for c in ("none", "fp16", "bf16")}
        cell = lambda x: "%8.2f ms" % (x * 1e3) if x else "-"
        ratio = lambda x: "%9.2fx" % (t["none"] / x) if x and t["none"] else "-"
        print("%-8s %5d MiB %11s %11s %11s %10s %10s" % (
            rate, size >> 20, cell(t["none"]), cell(t["fp16"]),
            cell(t["bf16"]), ratio(t["fp16"]), ratio(t["bf16"])))
PY
