#!/usr/bin/env bash
# Plugins built for ABI 2.4 still train: mirrored and local compiled against
# the frozen ABI 2.4 SDK (V24_DIR) are listed as ABI 2.4 with the
# capabilities the core derives for them, and mirrored with
# shard_optimizer (a barrier per step: the 2.4 strategy asks it as a ctl op,
# the 2.4 transport answers it as one) ends with variables bitwise equal to
# those of today's mirrored and local ($STRATA_PLUGIN_PATH), with each 2.4
# plugin alone and both together. Usage: v2_4_plugin.sh V24_DIR
set -u
V24=$1
BIN=${STRATA_BIN:?STRATA_BIN: the strata command}
NOW=${STRATA_PLUGIN_PATH:?STRATA_PLUGIN_PATH: the plugins of this build}
DATA=/usr/share/datasets/fashion-mnist
if [ ! -r "$DATA/train-images-idx3-ubyte.gz" ]; then
    echo "SKIP: no Fashion-MNIST in $DATA (apt-get install dataset-fashion-mnist)"
    exit 77
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0 passes=0
ok()  { echo "ok - $*"; passes=$((passes + 1)); }
bad() { echo "not ok - $*"; fails=$((fails + 1)); }

timeout 60 "$BIN" plugins --set "plugins.path=$V24" >"$T/list" 2>&1
# Derived from what the core asked before 2.5: a strategy with ctl (built
# for 2.3 on) may answer regroup, the state and the world sum, and any
# strategy was asked to clip; a transport with ctl may offer the barrier
# and (2.4 on) the shards, asked per group.
if grep -Eq '^mirrored +strategy +2\.4 .*\[caps: elastic,state,clip,world_sum\]' "$T/list" &&
   grep -Eq '^local +transport +2\.4 .*\[caps: shards,barrier\]' "$T/list"; then
    ok "strata plugins lists the 2.4 builds as ABI 2.4, capabilities derived"
else
    bad "2.4 builds not listed as expected:"; cat "$T/list"
fi
if grep -Eq '^mirrored +strategy +2\.5 .*\[caps: state,clip\]' "$T/list" &&
   grep -Eq '^local +transport +2\.5 .*\[caps: barrier\]' "$T/list"; then
    bad "the listing shows today's builds, not the 2.4 ones"; cat "$T/list"
fi

# Only the .so of one name is taken from a directory: a dir per mix.
mkdir -p "$T/strat" "$T/trans"
ln -s "$V24/mirrored.so" "$T/strat/mirrored.so"
ln -s "$V24/local.so" "$T/trans/local.so"
ARGS=(--set strategy.plugin=mirrored --set strategy.mirrored.shard_optimizer=true
      --set transport.plugin=local
      --set train.devices=cpu:0,cpu:1 --set train.batch_size=32
      --set data.limit_train=4000 --set data.limit_test=1000
      --set train.epochs=1 --set train.progress=none
      --set debug.hash_vars=true)
declare -A PATHS=([now]="$NOW" [both]="$V24:$NOW" [strategy]="$T/strat:$NOW"
                  [transport]="$T/trans:$NOW")
for mix in now both strategy transport; do
    timeout 240 "$BIN" train "${ARGS[@]}" --set "plugins.path=${PATHS[$mix]}" \
        --set plugins.trust_path=true >"$T/$mix.log" 2>&1
    rc=$?
    if [ "$rc" = 0 ] && grep -q "strategy mirrored" "$T/$mix.log"; then
        ok "$mix: trains (exit 0)"
    else
        bad "$mix: exit $rc"; cat "$T/$mix.log"
    fi
done
h0=$(grep -o 'variables hash (rank 0): [0-9a-f]*' "$T/now.log")
for mix in both strategy transport; do
    h=$(grep -o 'variables hash (rank 0): [0-9a-f]*' "$T/$mix.log")
    if [ -n "$h0" ] && [ "$h" = "$h0" ]; then
        ok "$mix: the same variables as today's build ($h)"
    else
        bad "$mix: variables differ: '$h', today '$h0'"
    fi
done
echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
