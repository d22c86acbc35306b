#!/bin/bash
# mwms across two network namespaces joined by a veth pair: two "machines"
# on one host, each worker reaching the other only over the veth link. The
# test makes the namespaces itself and removes them; where it cannot (not
# root, no iproute2, no netns support) it reports SKIPPED with the reason.
# usage: netns_test.sh STRATA_BIN
set -u
bin=$1
. "$(dirname "$0")/../netns_pair.sh" x 200

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
