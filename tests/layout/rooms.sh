#!/bin/sh
# Every C source of the core lives in a room (a folder with one job,
# docs/design.md), except the context (ctx.c) that ties them together; and
# every room of the build (core/CMakeLists.txt) exists.
core=${1:?usage: rooms.sh CORE_DIR}
bad=0
for f in "$core"/*.c; do
    case ${f##*/} in
    ctx.c) ;;
    *) echo "core/${f##*/}: a source outside every room"; bad=1 ;;
    esac
done
rooms=$(sed -n '/^set(STRATA_CORE_ROOMS/,/)/p' "$core/CMakeLists.txt" |
        sed 's/set(STRATA_CORE_ROOMS//; s/)//')
[ -n "$rooms" ] || { echo "core/CMakeLists.txt: no STRATA_CORE_ROOMS"; exit 1; }
for r in $rooms; do
    [ -d "$core/$r" ] || { echo "core/$r: a room of the build that does not exist"; bad=1; }
done
for d in "$core"/*/; do
    r=${d%/}; r=${r##*/}
    case " $(echo $rooms) cli " in
    *" $r "*) ;;
    *) echo "core/$r/: a folder that is not a room of the build"; bad=1 ;;
    esac
done
[ $bad = 0 ] && echo "every core source is in a room: $(echo $rooms) cli"
exit $bad
