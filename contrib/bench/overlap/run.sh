#!/bin/bash
# Overlap of the backward pass and the all-reduce ([strategy.mwms] overlap,
# bucket_bytes): mwms with 2 worker processes of one CPU replica each, the
# seeds' CNN at global batch 64, with overlap off and on (and one bucket:
# bucket_bytes = 0, where nothing can overlap), on loopback and on links of
# each process's own, shaped by tc (contrib/bench/scaling/run.sh makes the
# namespaces and runs the tasks; see its README). The configurations are
# interleaved over the rounds, so that a burst of load on this shared
# machine hits one round, not one configuration.
#
# usage: contrib/bench/overlap/run.sh [-b BUILD] [-r "loopback 1gbit"]
#                                     [-k ROUNDS] [-o DIR]
# Prints, per condition, the median samples/s of each configuration and
# the step-time ratio overlap on / off against the issue's target (<= 0.85).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=$root/build
conds="loopback 1gbit"
rounds=3
out=
while [ $# -gt 0 ]; do
    case $1 in
    -b) build=$(cd "${2:?}" && pwd); shift 2 ;;
    -r) conds=${2:?}; shift 2 ;;
    -k) rounds=${2:?}; shift 2 ;;
    -o) out=${2:?}; shift 2 ;;
    *) sed -n '2,15p' "$0" >&2; exit 2 ;;
    esac
done
case $rounds in [1-9]) ;; *) echo "run.sh: -k: 1..9" >&2; exit 2 ;; esac
out=${out:-$(mktemp -d /tmp/strata-overlap-XXXXXX)}
mkdir -p "$out"

# name overlap bucket_bytes
configs="off:false:1048576 on:true:1048576 whole:true:0"
for k in $(seq 1 "$rounds"); do
    for cfg in $configs; do
        IFS=: read -r name ov bb <<<"$cfg"
        echo "overlap: round $k of $rounds: $name (overlap = $ov, bucket_bytes = $bb)" >&2
        STRATA_STRATEGY_OVERLAP=$ov STRATA_STRATEGY_BUCKET_BYTES=$bb \
            "$root/contrib/bench/scaling/run.sh" -b "$build" --no-allreduce \
            -m cnn -n 2 -p "" -r "$conds" -t 1 -o "$out/$name-$k" \
            >/dev/null 2>"$out/$name-$k.log" ||
            { echo "run.sh: $name, round $k failed:" >&2; tail -12 "$out/$name-$k.log" >&2; exit 1; }
    done
done

python3 - "$out" "$rounds" "$conds" <<'EOF'
import os, statistics, sys
out, rounds, conds = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
names = [("off", "overlap = false, 1 MiB buckets"),
         ("on", "overlap = true, 1 MiB buckets"),
         ("whole", "overlap = true, one bucket (bucket_bytes = 0)")]
rate = {}  # (cond, name) -> [samples/s]
link = {}
for name, _ in names:
    for k in range(1, rounds + 1):
        with open(os.path.join(out, "%s-%d" % (name, k), "raw.txt")) as f:
            for line in f:
                w = line.split()
                if w and w[0] == "TRAIN" and w[3] == "mwms":
                    rate.setdefault((w[1], name), []).append(float(w[6]))
                elif w and w[0] == "LINK":
                    link.setdefault(w[1], []).append(float(w[2]))
print("mwms, 2 workers x 1 CPU replica, seeds' CNN (2,378,826 parameters, "
      "9.5 MB of gradient), global batch 64, Adam; %d interleaved rounds, "
      "medians; %d CPUs; load average %.2f" % (rounds, os.cpu_count(),
                                              os.getloadavg()[0]))
for c in conds:
    lk = " (link measured %.0f Mbit/s)" % statistics.median(link[c]) \
        if c in link else ""
    print("\n%s%s" % (c, lk))
    print("%-48s %12s %12s" % ("configuration", "samples/s", "ms/step"))
    med = {}
    for name, label in names:
        v = rate.get((c, name))
        if not v:
            print("%-48s %12s" % (label, "failed"))
            continue
        med[name] = statistics.median(v)
        print("%-48s %12.1f %12.1f" % (label, med[name], 64e3 / med[name]))
    if "on" in med and "off" in med:
        r = med["off"] / med["on"]  # step time on / off
        print("step time overlap on / off: %.2fx   %s (target <= 0.85x)"
              % (r, "PASS" if r <= 0.85 else "MISS"))
EOF
