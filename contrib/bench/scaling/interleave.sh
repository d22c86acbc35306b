#!/bin/bash
# Several configurations of one training run of the scaling study (mwms, 2
# workers of one CPU replica, the seeds' CNN at global batch 64; run.sh
# makes the network namespaces and shapes the links), each a set of
# STRATA_* environment variables, interleaved over the rounds so that a
# burst of load on a shared machine hits one round, not one configuration.
# Prints per link condition the median samples/s of each and its step time
# against the first configuration's.
#
#   interleave.sh [-b BUILD] [-r "loopback 1gbit"] [-k ROUNDS] [-o DIR]
#                 [-t NAME:MAX] [-T TITLE] -- 'NAME|LABEL|VAR=V VAR=V' ...
#
# -t NAME:MAX: a target line, PASS when NAME's step time is at most MAX
# times the first configuration's. Used by contrib/bench/overlap/run.sh and
# contrib/bench/shard/wire.sh.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$here/../../.." && pwd)/build
conds="loopback 1gbit"
rounds=3
out=
target=
title="mwms, 2 workers x 1 CPU replica, seeds' CNN (2,378,826 parameters, 9.5 MB of gradient), global batch 64, Adam"
while [ $# -gt 0 ]; do
    case $1 in
    -b) build=$(cd "${2:?}" && pwd); shift 2 ;;
    -r) conds=${2:?}; shift 2 ;;
    -k) rounds=${2:?}; shift 2 ;;
    -o) out=${2:?}; shift 2 ;;
    -t) target=${2:?}; shift 2 ;;
    -T) title=${2:?}; shift 2 ;;
    --) shift; break ;;
    *) sed -n '2,15p' "$0" >&2; exit 2 ;;
    esac
done
[ $# -ge 1 ] || { sed -n '2,15p' "$0" >&2; exit 2; }
case $rounds in [1-9]) ;; *) echo "interleave.sh: -k: 1..9" >&2; exit 2 ;; esac
out=${out:-$(mktemp -d /tmp/strata-interleave-XXXXXX)}
mkdir -p "$out"

for k in $(seq 1 "$rounds"); do
    for cfg in "$@"; do
        IFS='|' read -r name label vars <<<"$cfg"
        echo "interleave.sh: round $k of $rounds: $label" >&2
        # shellcheck disable=SC2086
        env $vars "$here/run.sh" -b "$build" --no-allreduce -m cnn -n 2 \
            -p "" -r "$conds" -t 1 -o "$out/$name-$k" \
            >/dev/null 2>"$out/$name-$k.log" ||
            { echo "interleave.sh: $name, round $k failed:" >&2; tail -12 "$out/$name-$k.log" >&2; exit 1; }
    done
done

python3 - "$out" "$rounds" "$conds" "$title" "$target" "$@" <<'EOF'
import os, statistics, sys
out, rounds, conds, title, target = sys.argv[1:6]
rounds, conds = int(rounds), conds.split()
names = [c.split("|")[:2] for c in sys.argv[6:]]
rate, link = {}, {}
for name, _ in names:
    for k in range(1, rounds + 1):
        with open(os.path.join(out, "%s-%d" % (name, k), "raw.txt")) as f:
            for line in f:
                w = line.split()
                if w and w[0] == "TRAIN" and w[3] == "mwms":
                    rate.setdefault((w[1], name), []).append(float(w[6]))
                elif w and w[0] == "LINK":
                    link.setdefault(w[1], []).append(float(w[2]))
print("%s; %d interleaved rounds, medians; %d CPUs; load average %.2f"
      % (title, rounds, os.cpu_count(), os.getloadavg()[0]))
first = names[0][0]
for c in conds:
    lk = " (link measured %.0f Mbit/s)" % statistics.median(link[c]) \
        if c in link else ""
    print("\n%s%s" % (c, lk))
    print("%-56s %10s %10s %9s" % ("configuration", "samples/s", "ms/step",
                                   "step time"))
    med = {n: statistics.median(rate[(c, n)]) for n, _ in names
           if (c, n) in rate}
    for name, label in names:
        if name not in med:
            print("%-56s %10s" % (label, "failed"))
            continue
        rel = med[first] / med[name] if first in med else float("nan")
        print("%-56s %10.1f %10.1f %8.2fx" % (label, med[name],
                                               64e3 / med[name], rel))
    if target:
        tn, mx = target.split(":")
        if tn in med and first in med:
            r = med[first] / med[tn]
            print("step time %s / %s: %.2fx   %s (target <= %sx)"
                  % (tn, first, r, "PASS" if r <= float(mx) else "MISS", mx))
EOF
