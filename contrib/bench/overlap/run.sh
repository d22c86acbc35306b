#!/bin/bash
# Overlap of the backward pass and the all-reduce ([strategy.mwms] overlap,
# bucket_bytes): mwms with 2 worker processes of one CPU replica each, the
# seeds' CNN at global batch 64, with overlap off and on (and one bucket:
# bucket_bytes = 0, where nothing can overlap), on loopback and on links of
# each process's own, shaped by tc (contrib/bench/scaling/interleave.sh
# runs the configurations interleaved; see README.md beside this file).
#
# usage: contrib/bench/overlap/run.sh [-b BUILD] [-r "loopback 1gbit"]
#                                     [-k ROUNDS] [-o DIR]
# Prints, per condition, the median samples/s of each configuration and
# the step-time ratio overlap on / off against the issue's target (<= 0.85).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../scaling/interleave.sh" -t on:0.85 "$@" -- \
    "off|overlap = false, 1 MiB buckets|STRATA_STRATEGY_OVERLAP=false STRATA_STRATEGY_BUCKET_BYTES=1M" \
    "on|overlap = true, 1 MiB buckets|STRATA_STRATEGY_OVERLAP=true STRATA_STRATEGY_BUCKET_BYTES=1M" \
    "whole|overlap = true, one bucket (bucket_bytes = 0)|STRATA_STRATEGY_OVERLAP=true STRATA_STRATEGY_BUCKET_BYTES=0"
