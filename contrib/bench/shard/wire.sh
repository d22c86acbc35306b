#!/bin/bash
# mwms shard_optimizer on the wire: 2 worker processes of one CPU replica,
# the seeds' CNN at global batch 64, each worker behind a link of its own
# shaped by tc (contrib/bench/scaling/run.sh makes the namespaces and runs
# the tasks), three ways, interleaved over the rounds:
#   unsharded         shard_optimizer = false: one all-reduce per step
#   sharded, halves   shard_optimizer = true: reduce-scatter, step the
#                     shard, all-gather (the bytes of one all-reduce)
#   sharded, bcast    the same with clip_norm = 1e30 (never clips, but
#                     needs the whole gradient): all-reduce, step the
#                     shard, one broadcast per worker (1.5 all-reduces)
#
# usage: contrib/bench/shard/wire.sh [-b BUILD] [-r "1gbit"] [-k ROUNDS]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=$root/build
conds="1gbit"
rounds=3
while [ $# -gt 0 ]; do
    case $1 in
    -b) build=$(cd "${2:?}" && pwd); shift 2 ;;
    -r) conds=${2:?}; shift 2 ;;
    -k) rounds=${2:?}; shift 2 ;;
    *) sed -n '2,14p' "$0" >&2; exit 2 ;;
    esac
done
case $rounds in [1-9]) ;; *) echo "wire.sh: -k: 1..9" >&2; exit 2 ;; esac
out=$(mktemp -d /tmp/strata-shard-wire-XXXXXX)

# name shard_optimizer clip_norm
configs="full:false:0 halves:true:0 bcast:true:1e30"
for k in $(seq 1 "$rounds"); do
    for cfg in $configs; do
        IFS=: read -r name sh clip <<<"$cfg"
        echo "wire.sh: round $k of $rounds: $name" >&2
        STRATA_STRATEGY_SHARD_OPTIMIZER=$sh STRATA_OPTIMIZER_CLIP_NORM=$clip \
            "$root/contrib/bench/scaling/run.sh" -b "$build" --no-allreduce \
            -m cnn -n 2 -p "" -r "$conds" -t 1 -o "$out/$name-$k" \
            >/dev/null 2>"$out/$name-$k.log" ||
            { echo "wire.sh: $name, round $k failed:" >&2; tail -12 "$out/$name-$k.log" >&2; exit 1; }
    done
done

python3 - "$out" "$rounds" "$conds" <<'EOF'
import os, statistics, sys
out, rounds, conds = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
names = [("full", "shard_optimizer = false (all-reduce)"),
         ("halves", "shard_optimizer = true: reduce-scatter + all-gather"),
         ("bcast", "shard_optimizer = true: all-reduce + broadcasts")]
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
print("mwms, 2 workers x 1 CPU replica, seeds' CNN (9.5 MB of gradient), "
      "global batch 64, Adam; %d interleaved rounds, medians; load %.2f"
      % (rounds, os.getloadavg()[0]))
for c in conds:
    lk = " (link measured %.0f Mbit/s)" % statistics.median(link[c]) \
        if c in link else ""
    print("\n%s%s" % (c, lk))
    print("%-56s %10s %10s %8s" % ("configuration", "samples/s", "ms/step",
                                   "vs full"))
    med = {n: statistics.median(rate[(c, n)]) for n, _ in names
           if (c, n) in rate}
    for name, label in names:
        if name in med:
            print("%-56s %10.1f %10.1f %7.2fx" % (
                label, med[name], 64e3 / med[name],
                med["full"] / med[name] if "full" in med else float("nan")))
EOF
echo "logs in $out" >&2
