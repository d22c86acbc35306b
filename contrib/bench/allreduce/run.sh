#!/bin/sh
# All-reduce benchmark: strata's zmq.so (tcp and shared memory) against
# Open MPI (tcp and shared memory) and gloo (PyTorch), side by side, on this
# host. See README.md.
#
#   contrib/bench/allreduce/run.sh [-b BUILD_DIR] [-n "2 3 4"]
#                                  [-s "4096 65536 ..."] [-r LAUNCHES]
#                                  [-i "strata_tcp strata_aes ..."]
#
# -i: only these columns (labels as in README.md); MPI and PyTorch are
# installed and built only when a column needs them.
# Needs a strata build (zmq.so; default BUILD_DIR: build). Installs Open MPI
# (openmpi-bin, libopenmpi-dev) and PyTorch (python3-torch) from Debian
# with apt-get when they are missing. Every launch runs all sizes; each
# implementation is launched LAUNCHES times per group size, interleaved,
# and the table shows medians. Raw lines: $OUT/results.txt.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=$root/build
ns="2 3 4"
sizes="4096 65536 1048576 16777216 67108864"
launches=3
only=""
while getopts b:n:s:r:i: opt; do
    case $opt in
    b) build=$(cd "$OPTARG" && pwd) ;;
    n) ns=$OPTARG ;;
    s) sizes=$OPTARG ;;
    r) launches=$OPTARG ;;
    i) only=" $OPTARG " ;;
    *) sed -n '2,17p' "$0" >&2; exit 2 ;;
    esac
done
plugin=$build/lib/strata/plugins/zmq.so
[ -f "$plugin" ] || { echo "run.sh: no $plugin (build strata first)" >&2; exit 2; }
py=/usr/bin/python3

wanted() { # label: is this column to run?
    [ -z "$only" ] || case $only in *" $1 "*) return 0 ;; *) return 1 ;; esac
}
with_mpi=1 with_gloo=1
wanted mpi_tcp || wanted mpi_shm || with_mpi=0
wanted gloo || with_gloo=0

# ---- dependencies (Debian packages only) ---------------------------------
need=""
# mpicc can be there without Open MPI's headers (openmpi-bin alone): a
# program that includes mpi.h must build
mpi_ok() {
    command -v mpirun >/dev/null 2>&1 &&
        printf '#include <mpi.h>\nint main(void) { return 0; }\n' |
        mpicc -x c -o /dev/null - >/dev/null 2>&1
}
[ "$with_mpi" = 0 ] || mpi_ok || need="openmpi-bin libopenmpi-dev"
[ "$with_gloo" = 0 ] || "$py" -c 'import torch' >/dev/null 2>&1 \
    || need="$need python3-torch"
if [ -n "$need" ]; then
    echo "run.sh: installing$need (Debian)" >&2
    sudo=
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q \
        --no-install-recommends $need >&2
fi

# ---- build the drivers -----------------------------------------------------
OUT=${OUT:-$(mktemp -d /tmp/strata-allreduce-XXXXXX)}
mkdir -p "$OUT"
[ "$with_mpi" = 0 ] || mpicc -O2 -o "$OUT/mpi_allreduce" "$here/mpi_allreduce.c"
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -I"$root/include" \
    -o "$OUT/strata_allreduce" "$here/strata_allreduce.c" \
    "$root"/plugins/kit/*.c -ldl -lzmq -lm
mpirun=mpirun
[ "$(id -u)" -ne 0 ] || mpirun="mpirun --allow-run-as-root"
# Open MPI's tcp path must be ob1 + the tcp BTL (no UCX, no shared memory).
mpi_tcp="$mpirun --oversubscribe --mca pml ob1 --mca btl tcp,self"
mpi_shm="$mpirun --oversubscribe --mca pml ob1 --mca btl vader,self"
res=$OUT/results.txt
: >"$res"

run() { # label, command...: keep the RESULT lines, relabelled
    label=$1
    shift
    wanted "$label" || return 0
    if "$@" >"$OUT/last.out" 2>"$OUT/last.err"; then
        awk -v l="$label" '$1 == "RESULT" { $2 = l; print }' \
            "$OUT/last.out" >>"$res"
    else
        echo "run.sh: $label failed:" >&2
        tail -5 "$OUT/last.err" >&2
    fi
}

t0=$(date +%s)
for n in $ns; do
    for k in $(seq 1 "$launches"); do
        echo "run.sh: n=$n, launch $k of $launches" >&2
        run strata_tcp "$OUT/strata_allreduce" -p "$plugin" -n "$n" \
            -o shm=off $sizes
        # Encryption: plaintext through zmq; secured as a job is by
        # default (bulk_cipher = aes256gcm: AES-256-GCM records on the
        # direct sockets); secured with everything on CurveZMQ.
        run strata_zmq "$OUT/strata_allreduce" -p "$plugin" -n "$n" \
            -o shm=off -o direct=off $sizes
        run strata_aes "$OUT/strata_allreduce" -p "$plugin" -n "$n" \
            -o shm=off -k curve -o bulk_cipher=aes256gcm $sizes
        run strata_curve "$OUT/strata_allreduce" -p "$plugin" -n "$n" \
            -o shm=off -k curve -o bulk_cipher=curve $sizes
        run mpi_tcp $mpi_tcp -np "$n" "$OUT/mpi_allreduce" $sizes
        run strata_shm "$OUT/strata_allreduce" -p "$plugin" -n "$n" \
            -o shm=auto $sizes
        # Gradients in 16 bits (compression = fp16): the wire, and shm.
        run strata_tcp_fp16 "$OUT/strata_allreduce" -p "$plugin" -n "$n" \
            -o shm=off -o compression=fp16 $sizes
        run strata_shm_fp16 "$OUT/strata_allreduce" -p "$plugin" -n "$n" \
            -o shm=auto -o compression=fp16 $sizes
        run mpi_shm $mpi_shm -np "$n" "$OUT/mpi_allreduce" $sizes
        run gloo "$py" "$here/gloo_allreduce.py" -n "$n" $sizes
    done
done
echo "run.sh: $(($(date +%s) - t0)) s; raw results in $res" >&2
"$py" "$here/report.py" "$res"
