#!/usr/bin/env bash
# A plugin built for ABI 1 still trains: localsgd.so compiled against the
# frozen ABI 1.4 SDK (V1_DIR) is listed as ABI 1.4, trains through the
# core's v1 adapter, and ends with variables bitwise equal to those of the
# same strategy ported to ABI 2 (V2_DIR). Usage: v1_plugin.sh V1_DIR V2_DIR
set -u
V1=$1 V2=$2
BIN=${STRATA_BIN:?STRATA_BIN: the strata command}
DATA=/usr/share/datasets/fashion-mnist
if [ ! -r "$DATA/train-images-idx3-ubyte.gz" ]; then
    echo "SKIP: no Fashion-MNIST in $DATA (apt-get install dataset-fashion-mnist)"
    exit 77
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
ok()  { echo "ok - $*"; }
bad() { echo "not ok - $*"; fails=$((fails + 1)); }

timeout 60 "$BIN" plugins --set "plugins.path=$V1" >"$T/list" 2>&1
if grep -Eq '^localsgd +strategy +1\.4 ' "$T/list"; then
    ok "strata plugins lists the v1 build as ABI 1.4"
else
    bad "v1 build not listed as ABI 1.4:"; cat "$T/list"
fi

ARGS=(--set strategy.plugin=localsgd --set strategy.localsgd.sync_every=4
      --set train.devices=cpu:0,cpu:1 --set train.batch_size=32
      --set data.limit_train=4000 --set data.limit_test=1000
      --set train.epochs=1 --set train.progress=none
      --set debug.hash_vars=true)
for major in 1 2; do
    dir=$V1
    [ "$major" = 2 ] && dir=$V2
    timeout 240 "$BIN" train "${ARGS[@]}" --set "plugins.path=$dir" \
        >"$T/v$major.log" 2>&1
    rc=$?
    if [ "$rc" = 0 ] && grep -q "strategy localsgd" "$T/v$major.log"; then
        ok "the ABI $major build trains (exit 0)"
    else
        bad "the ABI $major build: exit $rc"; cat "$T/v$major.log"
    fi
done
h1=$(grep -o 'variables hash (rank 0): [0-9a-f]*' "$T/v1.log")
h2=$(grep -o 'variables hash (rank 0): [0-9a-f]*' "$T/v2.log")
if [ -n "$h1" ] && [ "$h1" = "$h2" ]; then
    ok "same variables through the v1 adapter and ABI 2 ($h1)"
else
    bad "variables differ: v1 '$h1', v2 '$h2'"
fi
echo "$((3 - fails)) passed, $fails failed"
[ "$fails" = 0 ]
