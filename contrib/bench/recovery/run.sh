#!/bin/sh
# Recovery benchmark: time from a worker's death (kill -9) to the first step
# the job completes afterwards -- elastic mwms, ps under strata launch, and
# mwms restarted whole from a checkpoint by strata launch --max-restarts.
# See README.md.
#
#   contrib/bench/recovery/run.sh [-b BUILD_DIR] [recovery.py options]
#
# e.g. --runs 5 --workers 3 --kill-at 1000 --every-steps 200 --keep DIR.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$here/../../.." && pwd)/build
if [ "${1:-}" = "-b" ]; then
    build=$(cd "$2" && pwd)
    shift 2
fi
[ -x "$build/bin/strata" ] || { echo "run.sh: no $build/bin/strata (build strata first)" >&2; exit 2; }
STRATA_PLUGIN_PATH=${STRATA_PLUGIN_PATH:-$build/lib/strata/plugins} \
    exec /usr/bin/python3 "$here/recovery.py" --strata "$build/bin/strata" "$@"
