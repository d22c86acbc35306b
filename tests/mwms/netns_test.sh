#!/bin/bash
# mwms across two network namespaces joined by a veth pair: two "machines"
# on one host, each worker reaching the other only over the veth link. The
# test makes the namespaces itself and removes them; where it cannot (not
# root, no iproute2, no netns support) it reports SKIPPED with the reason.
# usage: netns_test.sh STRATA_BIN
set -u
bin=$1
passed=0 failed=0
check() { if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $1"; fi; }

skip() { echo "SKIPPED: $*"; exit 77; }
command -v ip >/dev/null || skip "iproute2 (ip) not installed"
[ -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || skip "Fashion-MNIST not installed"

id=$$
a=strata-a-$id b=strata-b-$id
# A /30 of the test's own, derived from the pid so parallel runs differ.
net=10.$((200 + id % 50)).$(((id / 50) % 250)).
ipa=${net}1 ipb=${net}2
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    ip netns del "$a" 2>/dev/null
    ip netns del "$b" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

ip netns add "$a" 2>"$tmp/err" || skip "cannot create a network namespace: $(cat "$tmp/err")"
ip netns add "$b" || skip "cannot create a second network namespace"
ip link add veth-a netns "$a" type veth peer name veth-b netns "$b" 2>"$tmp/err" ||
    skip "cannot create a veth pair: $(cat "$tmp/err")"
ip -n "$a" addr add "$ipa/30" dev veth-a && ip -n "$b" addr add "$ipb/30" dev veth-b &&
ip -n "$a" link set veth-a up && ip -n "$b" link set veth-b up &&
ip -n "$a" link set lo up && ip -n "$b" link set lo up || skip "cannot configure the veth pair"

# The job's keys, as on a shared filesystem: both "machines" read one dir.
"$bin" keygen "$tmp/keys" worker:0-1 >/dev/null || { echo "FAILED: strata keygen"; exit 1; }
export STRATA_SECURITY_KEYS=$tmp/keys

# Fresh namespaces have every port free; vary them anyway.
pa=$((20000 + RANDOM % 20000)) pb=$((20000 + RANDOM % 20000))
cluster="\"worker\": [\"$ipa:$pa\", \"$ipb:$pb\"]"
run() { # ns index
    TF_CONFIG="{\"cluster\": {$cluster}, \"task\": {\"type\": \"worker\", \"index\": $2}}" \
    timeout 120 ip netns exec "$1" "$bin" train --set strategy.plugin=mwms \
        --set transport.plugin=zmq --set transport.timeout_s=30 \
        --set train.devices=cpu:0 --set train.batch_size=32 --set train.max_steps=100 \
        --set data.limit_train=8000 --set train.eval=false --set debug.hash_vars=true \
        >"$tmp/out$2" 2>"$tmp/err$2"
}
run "$a" 0 & pids+=($!)
run "$b" 1 & pids+=($!)
wait "${pids[0]}"; ra=$?
wait "${pids[1]}"; rb=$?
pids=()
check "worker 0 exit 0 (got $ra: $(tail -2 "$tmp/err0"))" '[ $ra -eq 0 ]'
check "worker 1 exit 0 (got $rb: $(tail -2 "$tmp/err1"))" '[ $rb -eq 0 ]'
ha=$(sed -n 's/^variables hash (rank 0): //p' "$tmp/out0")
hb=$(sed -n 's/^variables hash (rank 1): //p' "$tmp/out1")
echo "worker 0 in $a ($ipa): $ha; worker 1 in $b ($ipb): $hb"
check "both workers printed a hash" '[ -n "$ha" ] && [ -n "$hb" ]'
check "bitwise-equal variables across the namespaces" '[ "$ha" = "$hb" ]'
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
