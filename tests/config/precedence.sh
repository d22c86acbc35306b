#!/bin/sh
# The configuration's precedence through the strata binary, for a plugin's
# key: the job's [strategy.NAME] beats the built-in default; the
# environment and --set beat the file, whether they name the plugin's own
# section or the shared [strategy] (docs/configuration.md). The key:
# mirrored's shard_optimizer, which the banner shows (4.00 x the model's
# bytes sharded over 2 replicas with Adam, 6.00 x not; the built-in auto
# shards CPU replicas).
set -u
bin=${STRATA_BIN:?STRATA_BIN is not set}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/strata-prec-XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/job.ini" <<INI
[strategy]
plugin = mirrored
[strategy.mirrored]
shard_optimizer = false
[train]
epochs = 1
progress = none
devices = cpu:0, cpu:1
[data]
limit_train = 320
limit_test = 100
INI
fail=0
expect() { # expect WHAT RATIO [env...] -- strata args
    what=$1 ratio=$2
    shift 2
    env "$@" > "$tmp/out" 2>&1
    if grep -q "state ($ratio x the model" "$tmp/out"; then echo "ok: $what"
    else echo "FAILED: $what: want $ratio x in:"; cat "$tmp/out"; fail=1; fi
}
expect "built-in default" 4.00 "$bin" train --set strategy.plugin=mirrored \
    --set train.epochs=1 --set train.progress=none \
    --set "train.devices=cpu:0, cpu:1" --set data.limit_train=320
expect "file's [strategy.mirrored]" 6.00 "$bin" train -c "$tmp/job.ini"
expect "--set strategy.mirrored.KEY over the file" 4.00 "$bin" train \
    -c "$tmp/job.ini" --set strategy.mirrored.shard_optimizer=true
expect "--set strategy.KEY over the file's [strategy.mirrored]" 4.00 "$bin" \
    train -c "$tmp/job.ini" --set strategy.shard_optimizer=auto
expect "environment over the file's [strategy.mirrored]" 4.00 \
    STRATA_STRATEGY_SHARD_OPTIMIZER=true "$bin" train -c "$tmp/job.ini"
expect "--set over the environment" 6.00 \
    STRATA_STRATEGY_SHARD_OPTIMIZER=true "$bin" train -c "$tmp/job.ini" \
    --set strategy.shard_optimizer=false
exit $fail
