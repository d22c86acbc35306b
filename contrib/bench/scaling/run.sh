#!/bin/bash
# Scaling study: ring all-reduce and mwms / ps training with 2, 4 and 8
# worker processes on loopback and on links of 1 Gbit/s and 100 Mbit/s,
# against the alpha-beta ring model. See README.md beside this file.
#
#   contrib/bench/scaling/run.sh [-b BUILD] [-n "2 4 8"]
#                                [-r "loopback 1gbit 100mbit"] [-k LAUNCHES]
#                                [-p "1 2 3 4"] [-m "mlp cnn"] [-t ROUNDS]
#                                [-T ROWSxDIM] [-s STEPS]
#                                [-o DIR] [--quick] [--no-train]
#                                [--no-allreduce] [--no-mwms] [--mwms-dense]
#
#   -b  strata build directory (default: build): bin/strata and
#       lib/strata/plugins/zmq.so
#   -n  worker / rank counts (2..8; 2 is needed for the model's fit)
#   -r  link conditions: loopback (127.0.0.1, every rank on this host),
#       or a tc rate (1gbit, 100mbit, 500mbit...): every process in a
#       network namespace of its own behind a veth limited to the rate
#       in each direction (tc tbf at both ends); netns: the same
#       namespaces unshaped (a control)
#   -k  launches of the all-reduce driver per (condition, n); medians
#       are reported (3)
#   -t  rounds of every training run (1); medians are reported
#   -p  ps task counts of the ps runs (1 2 3 4)
#   -T  recsys: the embedding table (default 1000000x64: 256 MB)
#   -s  training steps of a run on loopback (default: mlp 600, cnn 24,
#       recsys 40), halved at Gbit/s rates, quartered on slower links
#   -m  models: recsys (etc/recsys.ini's click model, its table grown to
#       -T, global batch 512; data from contrib/recsys/make_data.py),
#       mlp (101,770 parameters) and/or cnn (etc/seeds-cnn.ini's
#       convnet, 2,378,826)
#   -o  where the report (report.txt) and the SVGs go (default: $OUT)
#   --quick  n "2 4", 1 launch, fewer sizes and steps, ps 1 and 2, mlp only
#   --no-mwms  ps runs only (a table no mwms worker of this machine holds:
#       10 M x 64 and its gradient and Adam slots in every worker)
#   --mwms-dense  also mwms with [strategy.mwms] sparse_as_dense = true
#       (an embedding table's gradient always as the dense all-reduce of
#       the whole table, never as rows) at every worker count: strategy
#       mwms-dense in the raw lines, "mwms dense" in the report
#
# Needs root (network namespaces, tc) and iproute2 when a condition other
# than loopback is asked for; refuses otherwise (exit 2). Raw lines in
# $OUT/raw.txt (OUT: a new /tmp/strata-scaling-XXXXXX unless set).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=$root/build
ns_list="2 4 8"
conds="loopback 1gbit 100mbit"
launches=3
pss="1 2 3 4"
models="mlp cnn"
table=1000000x64
steps_base=
report_dir=
quick=0
do_train=1
do_ar=1
do_mwms=1
do_dense=0
usage() { sed -n '2,41p' "$0" >&2; exit 2; }
rounds=1
while [ $# -gt 0 ]; do
    case $1 in
    -b) build=$(cd "${2:?}" && pwd); shift 2 ;;
    -n) ns_list=${2:?}; shift 2 ;;
    -r) conds=${2:?}; shift 2 ;;
    -k) launches=${2:?}; shift 2 ;;
    -p) pss=${2?}; shift 2 ;;  # "": mwms only
    -m) models=${2:?}; shift 2 ;;
    -T) table=${2:?}; shift 2 ;;
    -s) steps_base=${2:?}; shift 2 ;;
    -t) rounds=${2:?}; shift 2 ;;
    -o) mkdir -p "${2:?}"; report_dir=$(cd "$2" && pwd); shift 2 ;;
    --quick) quick=1; shift ;;
    --no-train) do_train=0; shift ;;
    --no-allreduce) do_ar=0; shift ;;
    --no-mwms) do_mwms=0; shift ;;
    --mwms-dense) do_dense=1; shift ;;
    *) usage ;;
    esac
done
if [ "$quick" = 1 ]; then
    ns_list="2 4"; launches=1; pss="1 2"; models=mlp
fi
for n in $ns_list; do
    case $n in [2-8]) ;; *) echo "run.sh: -n: counts of 2..8" >&2; exit 2 ;; esac
done
case " $ns_list " in *" 2 "*) ;; *) echo "run.sh: -n must include 2 (the model's fit)" >&2; exit 2 ;; esac
for c in $conds; do
    case $c in loopback|netns|[1-9]*[kmg]bit) ;; *) echo "run.sh: -r: loopback, netns or RATE(k|m|g)bit, not $c" >&2; exit 2 ;; esac
done
case $launches in [1-9]|[1-9][0-9]) ;; *) echo "run.sh: -k: 1..99" >&2; exit 2 ;; esac
case $rounds in [1-9]) ;; *) echo "run.sh: -t: 1..9" >&2; exit 2 ;; esac
for p in $pss; do
    case $p in [1-4]) ;; *) echo "run.sh: -p: ps counts of 1..4" >&2; exit 2 ;; esac
done
for m in $models; do
    case $m in mlp|cnn|recsys) ;; *) echo "run.sh: -m: mlp, cnn, recsys" >&2; exit 2 ;; esac
done
plugin=$build/lib/strata/plugins/zmq.so
strata=$build/bin/strata
[ -f "$plugin" ] && [ -x "$strata" ] ||
    { echo "run.sh: no $plugin or $strata (build strata first, -b BUILD)" >&2; exit 2; }
shaped=0
for c in $conds; do [ "$c" = loopback ] || shaped=1; done
if [ "$shaped" = 1 ]; then
    [ "$(id -u)" -eq 0 ] ||
        { echo "run.sh: shaped links need root (network namespaces, tc); use -r loopback" >&2; exit 2; }
    command -v ip >/dev/null && command -v tc >/dev/null ||
        { echo "run.sh: shaped links need ip and tc (iproute2)" >&2; exit 2; }
fi
py=/usr/bin/python3

OUT=${OUT:-$(mktemp -d /tmp/strata-scaling-XXXXXX)}
mkdir -p "$OUT"
[ -n "$report_dir" ] || report_dir=$OUT
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -I"$root/include" \
    -o "$OUT/strata_allreduce" "$root/contrib/bench/allreduce/strata_allreduce.c" \
    "$root"/plugins/kit/*.c -ldl -lzmq -lm
raw=$OUT/raw.txt
: >"$raw"

# ---- namespaces: a hub with a bridge, slot i = PREFIX-t<i> at NET<i+1> --
prefix=sscal$$
net="10.$((200 + $$ % 50)).$(($$ / 50 % 250))."
made=""
child=""
cleanup() {
    trap - EXIT INT TERM
    if [ -n "$child" ]; then  # the driver or train.py running now
        kill -TERM "$child" 2>/dev/null || true
        wait "$child" 2>/dev/null || true
        child=""
    fi
    for x in $made; do ip netns del "$x" 2>/dev/null || true; done
    made=""
}
# run a command in the background and wait for it, so that a signal to
# this script reaches the trap at once (and the trap stops the command)
runbg() {
    "$@" &
    child=$!
    rc=0
    wait "$child" || rc=$?
    child=""
    return "$rc"
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM
max_n=0
for n in $ns_list; do [ "$n" -gt "$max_n" ] && max_n=$n; done
max_p=0
for p in $pss; do [ "$p" -gt "$max_p" ] && max_p=$p; done
slots=$((1 + max_n + max_p))   # ps: chief, workers, ps tasks
make_ns() {
    ip netns add "$prefix-hub"
    made="$prefix-hub"
    ip -n "$prefix-hub" link add br0 type bridge
    ip -n "$prefix-hub" link set br0 up
    i=0
    while [ "$i" -lt "$slots" ]; do
        ip netns add "$prefix-t$i"
        made="$prefix-t$i $made"
        ip link add eth0 netns "$prefix-t$i" type veth peer name "h$i" \
            netns "$prefix-hub"
        ip -n "$prefix-hub" link set "h$i" master br0
        ip -n "$prefix-hub" link set "h$i" up
        ip -n "$prefix-t$i" addr add "$net$((i + 1))/24" dev eth0
        ip -n "$prefix-t$i" link set eth0 up
        ip -n "$prefix-t$i" link set lo up
        i=$((i + 1))
    done
}
# tbf at both ends of every veth: each "host" sends and receives at RATE.
# The buckets must hold a 64 KiB GSO segment (tbf drops bigger packets);
# peakrate (just above rate) paces the bursts such a bucket would let
# through at memory speed (as contrib/bench/strategies does).
shape() {
    rate=$1
    if [ "$rate" = netns ]; then  # no limit: remove the qdiscs
        i=0
        while [ "$i" -lt "$slots" ]; do
            tc -n "$prefix-t$i" qdisc del dev eth0 root 2>/dev/null || true
            tc -n "$prefix-hub" qdisc del dev "h$i" root 2>/dev/null || true
            i=$((i + 1))
        done
        return 0
    fi
    num=${rate%%[kmg]bit}
    unit=${rate#"$num"}
    peak=$((num * 1001 / 1000 + 1))$unit
    i=0
    while [ "$i" -lt "$slots" ]; do
        tc -n "$prefix-t$i" qdisc replace dev eth0 root tbf rate "$rate" \
            burst 70kb latency 50ms peakrate "$peak" mtu 70kb
        tc -n "$prefix-hub" qdisc replace dev "h$i" root tbf rate "$rate" \
            burst 70kb latency 50ms peakrate "$peak" mtu 70kb
        i=$((i + 1))
    done
}
# a bulk transfer slot 0 -> slot 1 through the shaped link: what it gives
measure_link() {
    ip netns exec "$prefix-t1" "$py" -c "
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('${net}2', 29599)); s.listen(1); s.settimeout(30)
c, _ = s.accept(); c.settimeout(30); n = 0; t = None
while True:
    d = c.recv(1 << 20)
    if t is None: t = time.monotonic()
    if not d: break
    n += len(d)
print('%.1f' % (n * 8e-6 / (time.monotonic() - t)))" >"$OUT/link.out" &
    srv=$!
    ip netns exec "$prefix-t0" "$py" -c "
import socket, time
for i in range(100):
    try:
        s = socket.create_connection(('${net}2', 29599), timeout=30); break
    except OSError: time.sleep(0.05)
s.sendall(bytes($2)); s.close()" || true
    wait "$srv" || true
    cat "$OUT/link.out"
}
if [ "$shaped" = 1 ]; then
    make_ns || { echo "run.sh: cannot make the network namespaces" >&2; exit 2; }
    shape 1gbit || { echo "run.sh: tc tbf refused (no sch_tbf in this kernel?)" >&2; exit 2; }
fi

sizes_for() { # condition -> all-reduce sizes (bytes)
    if [ "$quick" = 1 ]; then
        case $1 in loopback) echo 4096 1048576 16777216 ;;
                   *) echo 4096 1048576 ;; esac
        return
    fi
    case $1 in
    loopback|netns|*gbit) echo 4096 65536 1048576 4194304 16777216 67108864 ;;
    *) echo 4096 65536 1048576 4194304 ;;  # slower links: up to 4 MiB
    esac
}
steps_for() { # condition model -> training steps of one run
    s=600
    [ "$2" = cnn ] && s=24
    [ "$2" = recsys ] && s=40
    [ -n "$steps_base" ] && s=$steps_base
    case $1 in
    loopback|netns) ;;
    *gbit) s=$((s / 2)) ;;
    *) s=$((s / 4)) ;;     # 100 Mbit/s and slower
    esac
    [ "$quick" = 1 ] && s=$((s / 3))
    [ "$s" -ge 4 ] || s=4
    echo "$s"
}

batch_for() { # model -> global batch
    if [ "$1" = recsys ]; then echo 512; else echo 64; fi
}
rate_bps() { # condition -> its bit/s (loopback, netns: taken as 1 Gbit/s)
    case $1 in
    *kbit) echo $((${1%kbit} * 1000)) ;;
    *mbit) echo $((${1%mbit} * 1000000)) ;;
    *gbit) echo $((${1%gbit} * 1000000000)) ;;
    *) echo 1000000000 ;;
    esac
}
# seconds a training run may take: 300, and for recsys as long again as
# the whole table takes at 100 Mbit/s (the chief's last pull of it); for
# mwms-dense on recsys, twice what the ring moves too: every step each
# worker sends and receives 2(W-1)/W of the table (4 bytes a value) at
# the condition's rate, loopback's taken as 1 Gbit/s (1 M x 64 at
# 100 Mbit/s, 8 workers, 10 steps: 4.48 GB, 358 s; 325 + 2 x that = 1041 s)
timeout_for() { # condition model strategy W steps
    if [ "$2" != recsys ]; then echo 300; return; fi
    tb=$((${table%x*} * ${table#*x} * 4))
    t=$((300 + tb / 10000000))
    if [ "$3" = mwms-dense ]; then
        t=$((t + 2 * $5 * 2 * ($4 - 1) * (tb / $4) / ($(rate_bps "$1") / 8)))
    fi
    echo "$t"
}

# recsys: click logs for the table, as many samples as the longest run
data_for() { # model -> --data of train.py
    [ "$1" = recsys ] || { echo /usr/share/datasets/fashion-mnist; return; }
    d=$OUT/recsys-data
    if [ ! -f "$d/meta.json" ]; then
        "$py" "$root/contrib/recsys/make_data.py" --out "$d" \
            --samples $(($(steps_for loopback recsys) * 512)) --vocab $((${table%x*} / 4)) \
            --test-samples 1000 >&2 || return 1
    fi
    echo "$d"
}
case $table in [1-9]*x[1-9]*) ;; *) echo "run.sh: -T: ROWSxDIM" >&2; exit 2 ;; esac

t0=$(date +%s)
elapsed() { echo $(($(date +%s) - t0)); }
echo "run.sh: strata $strata; $(nproc) CPUs; conditions: $conds; n: $ns_list; ps: $pss; models: $models; launches $launches; rounds $rounds" >&2
echo "HOST cores $(nproc)" >>"$raw"
fail=0
for c in $conds; do
    nsargs=""
    if [ "$c" != loopback ]; then
        shape "$c"
        # 64 MiB at 1 Gbit/s is 0.5 s: 4 MiB on the slower links
        case $c in *mbit|*kbit) bulk=4194304 ;; *) bulk=67108864 ;; esac
        echo "LINK $c $(measure_link "$c" "$bulk")" | tee -a "$raw" >&2
        nsargs="-N $prefix -a $net"
    fi
    if [ "$do_ar" = 1 ]; then
        for k in $(seq 1 "$launches"); do
            for n in $ns_list; do
                echo "run.sh: [$(elapsed) s] all-reduce, $c, n=$n, launch $k of $launches" >&2
                # shellcheck disable=SC2046,SC2086
                if runbg "$OUT/strata_allreduce" -p "$plugin" -n "$n" -o shm=off -o small_bytes=0 \
                        -o timeout_s=120 -w 300 -T 0.3 $nsargs -l "$c" \
                        $(sizes_for "$c") >"$OUT/last.out" 2>"$OUT/last.err"; then
                    grep -E '^(RESULT|RANKCPU) ' "$OUT/last.out" >>"$raw"
                else
                    echo "run.sh: all-reduce $c n=$n failed:" >&2
                    tail -5 "$OUT/last.err" >&2
                    echo "FAILED allreduce $c $n" >>"$raw"
                    fail=1
                fi
            done
        done
    fi
    [ "$do_train" = 1 ] || continue
    for round in $(seq 1 "$rounds"); do
    for m in $models; do
        steps=$(steps_for "$c" "$m")
        data=$(data_for "$m") || { echo "run.sh: make_data.py failed" >&2; exit 1; }
        for n in $ns_list; do
            runs=""
            [ "$do_mwms" = 1 ] && runs="mwms:0"
            [ "$do_dense" = 1 ] && runs="$runs mwms-dense:0"
            for p in $pss; do runs="$runs ps:$p"; done
            for r in $runs; do
                strat=${r%%:*}
                p=${r#*:}
                what="$n workers"
                [ "$strat" = ps ] && what="$what, $p ps"
                echo "run.sh: [$(elapsed) s] train $m $strat, $c, $what, $steps steps, round $round of $rounds" >&2
                targs="--strategy $strat --workers $n"
                [ "$strat" = ps ] && targs="$targs --ps $p"
                [ "$c" = loopback ] || targs="$targs --ns $prefix --net $net"
                # shellcheck disable=SC2086
                if runbg "$py" "$here/train.py" --strata "$strata" --model "$m" \
                        --steps "$steps" --batch "$(batch_for "$m")" --label "$c" \
                        --data "$data" --table "$table" \
                        --timeout "$(timeout_for "$c" "$m" "$strat" "$n" "$steps")" \
                        --dir "$OUT/train" $targs \
                        >"$OUT/last.out" 2>"$OUT/last.err"; then
                    cat "$OUT/last.out" >>"$raw"
                else
                    echo "run.sh: train $m $strat $c n=$n p=$p failed:" >&2
                    tail -12 "$OUT/last.err" >&2
                    echo "FAILED train $c $m $strat $n $p" >>"$raw"
                    # why, beside the raw lines (the report names the run)
                    { echo "== train $c $m $strat W=$n P=$p"; tail -12 "$OUT/last.err"; } \
                        >>"$OUT/failures.txt"
                    fail=1
                fi
            done
        done
    done
    done
done
cleanup
echo "run.sh: $(elapsed) s; raw results in $raw" >&2
cp "$raw" "$report_dir/raw.txt" 2>/dev/null || true
"$py" "$here/model.py" --svg-dir "$report_dir" "$raw" | tee "$report_dir/report.txt"
[ "$fail" = 0 ] || { echo "run.sh: some runs failed (FAILED lines in $raw)" >&2; exit 1; }
