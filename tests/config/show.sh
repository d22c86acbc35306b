#!/bin/sh
# `strata config` through the strata binary: every key with the source that
# won (FILE:LINE, env NAME, --set, default), a plugin section's key, named
# keys only, an unknown key and an invalid value refused with one line and
# exit 2, the [graph] lines of a graph job (docs/configuration.md).
set -u
bin=${STRATA_BIN:?STRATA_BIN is not set}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/strata-show-XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/job.ini" <<INI
[train]
epochs = 3
[strategy]
plugin = mirrored
[strategy.mirrored]
shard_optimizer = true
INI
fail=0
ok() { echo "ok: $1"; }
bad() { echo "FAILED: $1"; echo "--- stdout"; cat "$tmp/out"; echo "--- stderr"
        cat "$tmp/err"; fail=1; }
# run CODE [env...] -- strata config args: the exit code must be CODE
run() {
    code=$1
    shift
    env "$@" > "$tmp/out" 2> "$tmp/err"
    got=$?
    [ $got = "$code" ] || bad "exit $got, want $code: $*"
}
# has WHAT REGEX: a line of stdout matches
has() {
    if grep -Eq "$2" "$tmp/out"; then ok "$1"; else bad "$1: no /$2/"; fi
}

run 0 STRATA_OPTIMIZER_LR=0.01 "$bin" config -c "$tmp/job.ini" \
    --set train.batch_size=64
has "a key from the file shows file:line" '^train\.epochs = 3 +.*job\.ini:2$'
has "a key from the environment shows the variable" \
    '^optimizer\.lr = 0\.01 +env STRATA_OPTIMIZER_LR$'
has "a key from --set shows --set" '^train\.batch_size = 64 +--set$'
has "an unset key shows default" '^train\.seed = 42 +default$'
has "an empty default" '^train\.devices = +default$'
has "a plugin section's key shows file:line" \
    '^strategy\.mirrored\.shard_optimizer = true +.*job\.ini:6$'
has "a transport's key" '^transport\.local\.timeout_s = 600 +default$'
has "a cluster key" '^cluster\.worker = +default$'
[ -s "$tmp/err" ] && bad "a clean job writes nothing to stderr"
# The origins are aligned: one column for every line that fits.
cols=$(grep -E '^(train\.(epochs|seed)|optimizer\.lr) ' "$tmp/out" |
       awk '{ match($0, /  +/); print RSTART + RLENGTH }' | sort -u | wc -l)
[ "$cols" = 1 ] && ok "aligned origins" || bad "origins in $cols columns"

# The shared [strategy] from a source of higher precedence wins over the
# plugin's own section, as strata train applies it.
run 0 STRATA_STRATEGY_SHARD_OPTIMIZER=false "$bin" config -c "$tmp/job.ini" \
    strategy.mirrored.shard_optimizer
has "the environment's shared key over [strategy.mirrored]" \
    '^strategy\.mirrored\.shard_optimizer = false +env STRATA_STRATEGY_SHARD_'
run 0 "$bin" config -c "$tmp/job.ini" \
    --set strategy.mirrored.shard_optimizer=false strategy.mirrored.shard_optimizer
has "--set of a plugin key" '^strategy\.mirrored\.shard_optimizer = false +--set$'

# Named keys: those only, in the order named.
run 0 "$bin" config -c "$tmp/job.ini" strategy.plugin train.epochs
keys=$(cut -d' ' -f1 "$tmp/out" | tr '\n' ' ')
if [ "$keys" = "strategy.plugin train.epochs " ]
then ok "named keys only"; else bad "named keys only"; fi

# An unknown key: one line with the nearest key, exit 2, nothing on stdout.
run 2 "$bin" config -c "$tmp/job.ini" train.epoch
if [ "$(wc -l < "$tmp/err")" = 1 ] && [ ! -s "$tmp/out" ] &&
   grep -q "unknown key 'train.epoch'; did you mean 'train.epochs'" "$tmp/err"
then ok "unknown key"; else bad "unknown key"; fi
run 2 "$bin" config shard_optimizr
grep -q "did you mean 'strategy.mirrored.shard_optimizer'" "$tmp/err" &&
    ok "a key without its section" || bad "a key without its section"

# An invalid value, in a core section and in a plugin's: strata train's
# line, with file:line, exit 2.
printf '[train]\nepochs = three\n' > "$tmp/bad.ini"
run 2 "$bin" config -c "$tmp/bad.ini"
if [ "$(wc -l < "$tmp/err")" = 1 ] && [ ! -s "$tmp/out" ] &&
   grep -q "bad.ini:2: \[train\] epochs = 'three'" "$tmp/err"
then ok "invalid value"; else bad "invalid value"; fi
printf '[strategy.mirrored]\nshard_optimizer = maybe\n' > "$tmp/badp.ini"
run 2 "$bin" config -c "$tmp/badp.ini"
if [ "$(wc -l < "$tmp/err")" = 1 ] &&
   grep -q "badp.ini:2: \[strategy.mirrored\] shard_optimizer = 'maybe'" \
       "$tmp/err"
then ok "invalid plugin value"; else bad "invalid plugin value"; fi
run 2 "$bin" config -c "$tmp/nonexistent.ini"

# A graph job: each layer line with its file:line.
cat > "$tmp/graph.ini" <<INI
[graph]
hidden = dense 16 relu
; a comment
logits = dense 10 <- hidden
INI
run 0 "$bin" config -c "$tmp/graph.ini"
has "a [graph] line" '^graph\.hidden = dense 16 relu +.*graph\.ini:2$'
has "the next [graph] line" \
    '^graph\.logits = dense 10 <- hidden +.*graph\.ini:4$'

run 0 "$bin" config --help
has "config --help" '^usage: strata config'
run 0 "$bin" --help
has "the main help lists config" '^  config '
exit $fail
