#!/bin/bash
# Jobs across two "machines": two network namespaces joined by a veth pair,
# made by this test and removed at the end; where it cannot make them (not
# root, no iproute2, no netns support) it reports SKIPPED with the reason.
#   1. strata launch --nnodes 2 --node-rank K --rendezvous A:PORT -n 2, one
#      launch per namespace: 4 mwms workers, secured with one shared keys
#      directory; every worker holds the same variables, bit for bit, and
#      they are those of the same 4 workers started on one machine.
#   2. torchrun's variables alone, one task per namespace (RANK,
#      WORLD_SIZE, MASTER_ADDR/PORT, LOCAL_WORLD_SIZE=1): the variables of
#      one process training the same global batch on 2 replicas.
#   3. torchrun itself, one agent per namespace (skipped without Debian's
#      python3-torch).
#   4. launch --nnodes 2 --max-restarts 1, a worker of node 1 killed (-9):
#      both launches restart their tasks, which meet again at the
#      rendezvous, and the job finishes.
#   5. an elastic job across both: launch --nnodes 2 --elastic 2:4, node
#      0's launch serving the membership at the rendezvous address; a
#      worker of node 1 killed (-9): the other three go on as generation 1,
#      node 1's launch restarts it alone and it joins generation 2; both
#      launches exit 0, the 4 workers hold the same variables (their
#      all-reduce overlapped with the backward pass: two hosts), and
#      debug.step_log shows every sample of every epoch trained once.
#   6. a ps job across both, one launch --tasks per machine (node 0: the
#      chief, 2 ps and worker:0; node 1: worker:1, worker:2): worker:2
#      killed (-9), node 1's launch restarts it alone, the coordinator
#      re-schedules its step, both launches exit 0 and every step is
#      applied exactly once.
#   7. the same job with every worker on node 1 and no restarts, all three
#      killed: node 1's launch says its part is gone (exit 1), the
#      coordinator stops the job after [strategy.ps] timeout_s with one
#      error line, the ps tasks stop with it, node 0's launch exits
#      non-zero: bounded, no hang.
# usage: netns_nodes.sh STRATA_BIN   (NETNS_KEEP=DIR: keep a copy of the
# logs there)
set -u
bin=$1
. "$(dirname "$0")/../netns_pair.sh" n 150

# One keys directory for the whole job, as on a shared filesystem.
"$bin" keygen "$tmp/keys" worker:0-3 chief:0 ps:0-1 >/dev/null || { echo "FAILED: strata keygen"; exit 1; }
export STRATA_SECURITY_KEYS=$tmp/keys

job=(--set strategy.plugin=mwms --set transport.plugin=zmq
     --set transport.zmq.timeout_s=60 --set cluster.rendezvous_timeout_s=60
     --set train.devices=cpu:0 --set train.batch_size=32 --set train.max_steps=60
     --set data.limit_train=3200 --set train.eval=false --set train.progress=none
     --set debug.hash_vars=true)

# References, in this namespace: the same 4 workers started by one launch
# on one machine, summing around the zmq ring as across machines (shm off:
# the order of a float sum is the ring's); and one process training the
# same global batch on 2 replicas (a sum of two is the same in any order).
timeout 300 "$bin" launch -n 4 "${job[@]}" --set transport.zmq.shm=off \
    --set "debug.dump_vars=$tmp/ref4.bin" \
    >"$tmp/ref.out" 2>&1 || { echo "FAILED: reference run: $(tail -3 "$tmp/ref.out")"; exit 1; }
timeout 300 "$bin" train "${job[@]}" --set strategy.plugin=mirrored \
    --set train.devices=cpu:0,cpu:1 --set "debug.dump_vars=$tmp/ref2.bin" \
    >"$tmp/ref.out" 2>&1 || { echo "FAILED: reference run: $(tail -3 "$tmp/ref.out")"; exit 1; }

# The hashes every rank printed (in any of the files given), one per line.
hashes() { sed -n 's/.*variables hash (rank \([0-9]*\)): \([0-9a-f]*\)$/\1 \2/p' "$@" | sort -u; }

# Fresh namespaces have every port free; vary them anyway.
port() { echo $((20000 + RANDOM % 20000)); }

# The pid of task $1 of node 1 (its launch's stdout: $2) once node 0's
# stderr ($4) says $3 -- a grandchild of our own `timeout` (timeout ->
# node 1's launch -> task), never anybody else's process; else nothing.
task_of_node1() {
    local v=""
    for i in $(seq 1 600); do
        v=$(sed -n "s/^\[launch\] $1: pid \([0-9]*\),.*/\1/p" "$2" | head -1)
        grep -q "$3" "$4" 2>/dev/null && [ -n "$v" ] && break
        sleep 0.1
    done
    local parent=$(awk '/^PPid:/ {print $2}' "/proc/$v/status" 2>/dev/null)
    local grand=$(awk '/^PPid:/ {print $2}' "/proc/$parent/status" 2>/dev/null)
    [ -n "$v" ] && [ "$grand" = "${pids[1]}" ] && echo "$v"
}

# Once the job trains ($2 in node 0's stderr), kill worker:3 of node 1.
# $1: the runs' file prefix and label.
kill_worker3() {
    victim=$(task_of_node1 worker:3 "$tmp/${1}1.out" "$2" "$tmp/${1}0.err")
    sleep 1
    check "$1: worker:3 ($victim) is a task of our node-1 launch" '[ -n "$victim" ]'
    [ -n "$victim" ] && kill -9 "$victim"
}

# `strata launch --nnodes 2 --node-rank K --rendezvous $ipa:$p ARGS` in
# namespace K (0: $a, 1: $b), in the background, output to $tmp/$1K.out
# and .err; wait_nodes reaps both into $r0, $r1.
launch_nodes() {
    local pre=$1
    shift
    for k in 0 1; do
        ns=$a; [ $k -eq 1 ] && ns=$b
        timeout 300 ip netns exec "$ns" "$bin" launch --nnodes 2 --node-rank $k \
            --rendezvous "$ipa:$p" "$@" >"$tmp/$pre$k.out" 2>"$tmp/$pre$k.err" &
        pids+=($!)
    done
}
wait_nodes() {
    wait "${pids[0]}"; r0=$?
    wait "${pids[1]}"; r1=$?
    pids=()
}

# ---- 1. strata launch --nnodes 2 ------------------------------------------------
p=$(port)
launch_nodes launch -n 2 "${job[@]}" --set "debug.dump_vars=$tmp/launch0.bin"
wait_nodes
check "launch --node-rank 0 exit 0 (got $r0: $(tail -3 "$tmp/launch0.err"))" '[ $r0 -eq 0 ]'
check "launch --node-rank 1 exit 0 (got $r1: $(tail -3 "$tmp/launch1.err"))" '[ $r1 -eq 0 ]'
h=$(hashes "$tmp/launch0.out" "$tmp/launch1.out")
echo "launch --nnodes 2 -n 2: $(echo $h)"
check "4 ranks printed a hash" '[ "$(echo "$h" | cut -d" " -f1 | tr "\n" " ")" = "0 1 2 3 " ]'
check "one hash on every worker" '[ "$(echo "$h" | cut -d" " -f2 | sort -u | wc -l)" -eq 1 ]'
check "rank 0's variables are those of the same job on one machine" 'cmp -s "$tmp/launch0.bin" "$tmp/ref4.bin"'
check "node 1's tasks prefixed with their global names" 'grep -q "^\[worker:3\] variables hash (rank 3)" "$tmp/launch1.out"'
check "rank 0 served the rendezvous at $ipa:$p" 'grep -q "rendezvous: at $ipa:$p: 4 tasks registered" "$tmp/launch0.err"'
check "the job was secured (CURVE)" 'grep -q "^\[worker:0\] security: CURVE" "$tmp/launch0.out"'

# ---- 2. torchrun's variables alone -------------------------------------------------
p=$(port)
for r in 0 1; do
    ns=$a; [ $r -eq 1 ] && ns=$b
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=$ipa MASTER_PORT=$p \
        timeout 300 ip netns exec "$ns" "$bin" train "${job[@]}" \
        --set "debug.dump_vars=$tmp/torch0.bin" >"$tmp/torch$r.out" 2>"$tmp/torch$r.err" &
    pids+=($!)
done
wait_nodes
check "torchrun variables: rank 0 exit 0 (got $r0: $(tail -3 "$tmp/torch0.err"))" '[ $r0 -eq 0 ]'
check "torchrun variables: rank 1 exit 0 (got $r1: $(tail -3 "$tmp/torch1.err"))" '[ $r1 -eq 0 ]'
h=$(hashes "$tmp/torch0.out" "$tmp/torch1.out")
echo "torchrun variables: $(echo $h)"
check "torchrun variables: 2 equal hashes" '[ "$(echo "$h" | wc -l)" -eq 2 ] && [ "$(echo "$h" | cut -d" " -f2 | sort -u | wc -l)" -eq 1 ]'
check "torchrun variables: rank 0's variables are one process's on 2 replicas" 'cmp -s "$tmp/torch0.bin" "$tmp/ref2.bin"'

# ---- 3. torchrun itself ---------------------------------------------------------------
if /usr/bin/python3 -c "import torch.distributed.run" 2>/dev/null; then
    p=$(port)
    for k in 0 1; do
        ns=$a; [ $k -eq 1 ] && ns=$b
        # --redirects/--tee 1: Debian's torch 1.13 under Python 3.11 turns
        # their default, 0, into None (Std.from_str) and fails.
        timeout 300 ip netns exec "$ns" /usr/bin/python3 -m torch.distributed.run \
            --nnodes=2 --node_rank=$k --nproc_per_node=1 --master_addr="$ipa" \
            --master_port="$p" --redirects=1 --tee=1 --log_dir="$tmp/tlog$k" \
            --no_python "$bin" train "${job[@]}" \
            >"$tmp/real$k.out" 2>"$tmp/real$k.err" &
        pids+=($!)
    done
    wait_nodes
    check "torchrun: node 0 exit 0 (got $r0: $(tail -3 "$tmp/real0.err"))" '[ $r0 -eq 0 ]'
    check "torchrun: node 1 exit 0 (got $r1: $(tail -3 "$tmp/real1.err"))" '[ $r1 -eq 0 ]'
    h=$(hashes "$tmp/real0.out" "$tmp/real1.out")
    echo "torchrun: $(echo $h)"
    check "torchrun: 2 equal hashes" '[ "$(echo "$h" | wc -l)" -eq 2 ] && [ "$(echo "$h" | cut -d" " -f2 | sort -u | wc -l)" -eq 1 ]'
    check "torchrun: strata's rendezvous beside the agent's store, at MASTER_PORT+1" \
        'grep -q "rendezvous: at $ipa:$((p + 1)): 2 tasks registered" "$tmp/real0.err"'
else
    echo "skipped: torchrun itself (Debian python3-torch not installed)"
fi

# ---- 4. a worker killed on node 1: both launches restart, the tasks meet again
p=$(port)
slow=(--set train.max_steps=800 --set debug.step_delay_ms=10 --set transport.zmq.timeout_s=10)
launch_nodes again -n 2 --max-restarts 1 "${job[@]}" "${slow[@]}"
kill_worker3 again "4 tasks registered"
wait_nodes
check "restart: node 0 exit 0 (got $r0: $(tail -3 "$tmp/again0.err"))" '[ $r0 -eq 0 ]'
check "restart: node 1 exit 0 (got $r1: $(tail -3 "$tmp/again1.err"))" '[ $r1 -eq 0 ]'
check "restart: both launches started their tasks again" \
    'grep -q "restart 1/1" "$tmp/again0.err" && grep -q "restart 1/1" "$tmp/again1.err"'
check "restart: the tasks met again at the rendezvous" \
    '[ "$(grep -c "rendezvous: at $ipa:$p: 4 tasks registered" "$tmp/again0.err")" -eq 2 ]'
h=$(hashes "$tmp/again0.out" "$tmp/again1.out")
echo "restart: $(echo $h)"
check "restart: 4 equal hashes" '[ "$(echo "$h" | wc -l)" -eq 4 ] && [ "$(echo "$h" | cut -d" " -f2 | sort -u | wc -l)" -eq 1 ]'

# ---- 5. elastic across machines: a worker lost on node 1 and taken back ---------
p=$(port)
launch_nodes elastic -n 2 --elastic 2:4 --max-restarts 1 "${job[@]}" "${slow[@]}" \
    --set train.epochs=3 --set "debug.step_log=$tmp/steps.log" \
    --set strategy.mwms.bucket_bytes=4K
kill_worker3 elastic "generation 0: 4 workers"
wait_nodes
check "elastic: node 0 exit 0 (got $r0: $(tail -3 "$tmp/elastic0.err"))" '[ $r0 -eq 0 ]'
check "elastic: node 1 exit 0 (got $r1: $(tail -3 "$tmp/elastic1.err"))" '[ $r1 -eq 0 ]'
check "elastic: node 0 served the membership at the rendezvous address" \
    'grep -q "membership service on $ipa:$p" "$tmp/elastic0.err"'
# Rank 0 of generation 1 is the survivor that applied the most steps: the
# kill may leave one a step ahead of the others, so any order is right.
g1=$(grep -o "generation 1: [^)]*)" "$tmp/elastic0.err" | head -1)
check "elastic: the three others went on as generation 1 (got '$g1')" \
    '[ -n "$g1" ] && [ "$(echo "$g1" | grep -o "worker:[012]" | sort -u | wc -l)" -eq 3 ] &&
     echo "$g1" | grep -q "^generation 1: 3 workers (" && ! echo "$g1" | grep -q "worker:3"'
check "elastic: the workers overlapped their all-reduce with the backward pass (overlap = auto, two hosts)" \
    'grep -q "all-reduce in 2 buckets of about 4096 bytes, overlapped" "$tmp/elastic0.err"'
check "elastic: node 1 restarted worker:3 alone" \
    'grep -q "worker:3 failed (exit 137); restarting it alone" "$tmp/elastic1.err"'
check "elastic: worker:3 came back in generation 2" \
    'grep -q "generation 2: 4 workers" "$tmp/elastic0.err" && grep -q "worker:3 joins generation 2" "$tmp/elastic1.err"'
h=$(hashes "$tmp/elastic0.out" "$tmp/elastic1.out")
echo "elastic: $(echo $h)"
check "elastic: 4 equal hashes" '[ "$(echo "$h" | wc -l)" -eq 4 ] && [ "$(echo "$h" | cut -d" " -f2 | sort -u | wc -l)" -eq 1 ]'
# Per (epoch, step) the slices of the latest generation that tried it (a
# step the kill broke is tried again by the next); then per epoch every
# one of the 3200 samples exactly once.
once=$(awk '$1 == "try" {
        g = substr($3, 2) + 0; k = $4 " " $5
        if (!(k in best) || g > best[k]) { best[k] = g; ids[k] = "" }
        if (g == best[k]) ids[k] = ids[k] "," $7 }
    END {
        for (k in best) {
            split(k, ke, " "); n = split(ids[k], v, ",")
            for (i = 1; i <= n; i++) if (v[i] != "") { seen[ke[1] " " v[i]]++; tot[ke[1]]++ }
        }
        for (e in tot) {
            d = 0; bad = 0
            for (x in seen) { split(x, xe, " "); if (xe[1] == e) { d++; if (seen[x] != 1) bad++ } }
            printf "%s:%d/%d/%d ", e, tot[e], d, bad
        }
    }' "$tmp/steps.log" | tr " " "\n" | sort | tr "\n" " ")
echo "elastic: epoch:samples/distinct/repeated $once"
check "elastic: 3 epochs, each of the 3200 samples once" \
    '[ "$once" = "e0:3200/3200/0 e1:3200/3200/0 e2:3200/3200/0 " ]'

# ---- 6. a ps job across both: a worker lost on node 1, restarted alone -----------
psjob() { # chief/ps on node 0, workers as "$1" (host:port list)
    echo --set strategy.plugin=ps --set transport.plugin=zmq \
        --set "cluster.chief=$ipa:$(port)" --set "cluster.ps=$ipa:$(port),$ipa:$(port)" \
        --set "cluster.worker=$1" --set train.devices=cpu:0 --set train.batch_size=32 \
        --set data.limit_train=3200 --set train.epochs=6 --set train.eval=false \
        --set train.progress=none --set debug.step_delay_ms=30 --set strategy.ps.timeout_s=5
}
job6=($(psjob "$ipa:$(port),$ipb:$(port),$ipb:$(port)"))
timeout 300 ip netns exec "$a" "$bin" launch --tasks chief:0,ps:0,ps:1,worker:0 \
    "${job6[@]}" >"$tmp/ps0.out" 2>"$tmp/ps0.err" &
pids+=($!)
timeout 300 ip netns exec "$b" "$bin" launch --tasks worker:1,worker:2 --max-restarts 1 \
    "${job6[@]}" >"$tmp/ps1.out" 2>"$tmp/ps1.err" &
pids+=($!)
# worker:2, once the coordinator has it.
victim=$(task_of_node1 worker:2 "$tmp/ps1.out" "worker:2 registered" "$tmp/ps0.err")
sleep 2
check "ps: worker:2 ($victim) is a task of our node-1 launch" '[ -n "$victim" ]'
[ -n "$victim" ] && kill -9 "$victim"
wait_nodes
check "ps: node 0 exit 0 (got $r0: $(tail -3 "$tmp/ps0.err"))" '[ $r0 -eq 0 ]'
check "ps: node 1 exit 0 (got $r1: $(tail -3 "$tmp/ps1.err"))" '[ $r1 -eq 0 ]'
check "ps: node 1 restarted worker:2 alone" \
    'grep -q "worker:2 failed (exit 137); restarting it alone" "$tmp/ps1.err"'
check "ps: worker:2 rejoined" 'grep -q "worker:2 rejoined after a restart" "$tmp/ps0.err"'
check "ps: every step applied exactly once" \
    'grep -q "exactly once: each of the 2 ps tasks applied every one of the 600 scheduled steps once" "$tmp/ps0.err"'

# ---- 7. a ps job whose every worker is lost: bounded, one error -----------------
job7=($(psjob "$ipb:$(port),$ipb:$(port),$ipb:$(port)"))
timeout 300 ip netns exec "$a" "$bin" launch --tasks chief:0,ps:0,ps:1 \
    "${job7[@]}" >"$tmp/gone0.out" 2>"$tmp/gone0.err" &
pids+=($!)
timeout 300 ip netns exec "$b" "$bin" launch --tasks worker:0,worker:1,worker:2 \
    "${job7[@]}" >"$tmp/gone1.out" 2>"$tmp/gone1.err" &
pids+=($!)
victims=""
for w in 0 1 2; do
    victims="$victims $(task_of_node1 worker:$w "$tmp/gone1.out" "worker:$w registered" "$tmp/gone0.err")"
done
sleep 1
check "allgone: the 3 workers are tasks of our node-1 launch ($victims)" '[ "$(echo $victims | wc -w)" -eq 3 ]'
if [ "$(echo $victims | wc -w)" -ne 3 ]; then # what the nodes said instead
    echo "--- node 0's stderr:"; tail -15 "$tmp/gone0.err"
    echo "--- node 1's stdout and stderr:"; tail -15 "$tmp/gone1.out" "$tmp/gone1.err"
fi
t0=$(date +%s)
[ -n "${victims// /}" ] && kill -9 $victims
wait_nodes
took=$(($(date +%s) - t0))
echo "allgone: node 0 exit $r0 after $took s"
check "allgone: node 1's launch: its part is gone (exit $r1)" \
    '[ $r1 -eq 1 ] && grep -q "every task of this launch is gone for good" "$tmp/gone1.err"'
check "allgone: node 0 exits non-zero (got $r0: $(tail -3 "$tmp/gone0.err"))" '[ $r0 -ne 0 ] && [ $r0 -lt 124 ]'
check "allgone: within timeout_s and the shutdown's bounds ($took s)" '[ $took -le 40 ]'
check "allgone: the coordinator said it once" \
    '[ "$(grep -c "no worker alive" "$tmp/gone0.err")" -eq 1 ]'

[ -n "${NETNS_KEEP:-}" ] && cp -r "$tmp" "$NETNS_KEEP"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
