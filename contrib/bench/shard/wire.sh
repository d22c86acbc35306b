#!/bin/bash
# mwms shard_optimizer on the wire: 2 worker processes of one CPU replica,
# the seeds' CNN at global batch 64, each worker behind a link of its own
# shaped by tc (contrib/bench/scaling/interleave.sh runs the
# configurations interleaved over the rounds), three ways:
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
exec "$here/../scaling/interleave.sh" -r 1gbit "$@" -- \
    "full|shard_optimizer = false (all-reduce)|STRATA_STRATEGY_SHARD_OPTIMIZER=false" \
    "halves|shard_optimizer = true: reduce-scatter + all-gather|STRATA_STRATEGY_SHARD_OPTIMIZER=true" \
    "bcast|shard_optimizer = true: all-reduce + broadcasts|STRATA_STRATEGY_SHARD_OPTIMIZER=true STRATA_OPTIMIZER_CLIP_NORM=1e30"
