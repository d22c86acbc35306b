#!/bin/bash
# On the device machine (the device tool's `run`, from the repository root,
# .devdeps carried: tests/gpu/device_pack.sh fills it here first): build
# strata with CUDA for the GPU that is there, run every GPU test (kernels
# against the CPU's, the same under compute-sanitizer, mirrored training on
# the GPU against the CPU, nccl.so's collectives and conformance), then time
# GPU training steps. Everything goes to $OUT (the tool brings it back):
# build.log, tests.log, asan-build.log, asan.log, bench.log, trace.json,
# ncu.log and summary.txt; this prints the summary. Bounded: each stage
# under `timeout` (builds 200 s, tests 240 s and 200 s, seven runs of 30 s,
# Nsight Compute 150 s): about 155 s on an H200's 16 cores.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=${OUT:-$root/device-out}
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
stage() { # name, seconds, log, command...: its exit status into the summary
    local name=$1 secs=$2 log=$3; shift 3
    local t0=$SECONDS
    timeout "$secs" "$@" >"$log" 2>&1
    local rc=$?
    say "$name: exit $rc after $((SECONDS - t0)) s"
    return $rc
}

say "device check of $(git rev-parse --short HEAD 2>/dev/null || echo '?') on $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total \
    --format=csv,noheader 2>&1 | sed 's/^/gpu: /' | tee -a "$summary"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
say "nvcc: $("$nvcc" --version 2>&1 | tail -1)"
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
      head -1 | tr -d ' .')
[ -n "$cap" ] || cap=90

# What the image holds, before anything leans on it (the first lease
# printed these for the first time).
{
    echo "probe: kernel $(uname -r); $(ldd --version 2>&1 | head -1)"
    for t in cmake ninja pkg-config gcc cc compute-sanitizer python3; do
        p=$(command -v "$t") && echo "probe: $t: $p: $("$p" --version 2>&1 | head -1)" ||
            echo "probe: $t: none"
    done
    find "$(dirname "$nvcc")/.." /usr/lib/x86_64-linux-gnu /usr/local/lib /opt \
        \( -name 'libnccl.so*' -o -name nccl.h -o -name 'libcublas.so.*' \) \
        2>/dev/null | head -12 | sed 's/^/probe: /'
} | tee -a "$summary"

# The carried Debian packages, unpacked under a prefix of their own (never
# over /), and .pc files that point into it (without Requires.private: the
# build links shared libraries, and libzmq's names .pc files not carried).
pre=/tmp/devroot
rm -rf "$pre"
mkdir -p "$pre/pc" "$pre/rt"
for f in .devdeps/debs/*.deb; do
    if command -v dpkg-deb >/dev/null; then
        dpkg-deb -x "$f" "$pre"
    else
        (cd "$pre" && ar p "$root/$f" "$(ar t "$root/$f" | grep '^data.tar')" |
         tar -x --use-compress-program="xz -d" 2>/dev/null ||
         ar p "$root/$f" "$(ar t "$root/$f" | grep '^data.tar')" | tar -xz)
    fi
done
lib=$pre/usr/lib/x86_64-linux-gnu
for pc in "$lib"/pkgconfig/*.pc "$lib"/openblas-pthread/pkgconfig/openblas.pc; do
    [ -f "$pc" ] && sed -e "s|/usr|$pre/usr|g" -e '/^Requires.private/d' "$pc" \
        >"$pre/pc/$(basename "$pc")"
done
# Debian's alternatives (set by postinst, not by unpacking) name libopenblas
ln -sf openblas-pthread/libopenblas.so.0 "$lib/libopenblas.so.0"
# A carried library is used only where the image has none of its soname:
# the image's own libstdc++, libgfortran or krb5 stay what its tools use.
have=$(ldconfig -p 2>/dev/null | awk '{print $1}')
for so in "$lib"/*.so.* "$lib"/openblas-pthread/*.so.*; do
    n=$(basename "$so")
    case $n in *.so.[0-9]|*.so.[0-9][0-9]) ;; *) continue ;; esac
    grep -qx "$n" <<<"$have" || ln -sf "$so" "$pre/rt/$n"
done
say "carried libraries used: $(ls "$pre/rt" | tr '\n' ' ')"
command -v pkg-config >/dev/null || export PATH=$PATH:$pre/usr/bin
export PKG_CONFIG_PATH=$pre/pc
export CMAKE_PREFIX_PATH=$pre/usr
export LD_LIBRARY_PATH=$pre/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# NCCL: the toolkit's own, else the first found (the nvidia-nccl wheel of
# the image's Python), with a libnccl.so beside its libnccl.so.2.
nccl=()
if ! ls "$(dirname "$nvcc")"/../lib64/libnccl.so >/dev/null 2>&1; then
    nl=$(find /usr/lib/x86_64-linux-gnu /usr/local /opt -name 'libnccl.so.2' 2>/dev/null | head -1)
    nd=$(dirname "${nl:-.}")
    nh=$nd/../include/nccl.h  # the wheel's own, of the same version
    [ -f "$nh" ] || nh=$(find /usr/include /usr/local /opt -name nccl.h 2>/dev/null | head -1)
    if [ -n "$nl" ] && [ -n "$nh" ]; then
        [ -e "$nd/libnccl.so" ] || ln -sf libnccl.so.2 "$nd/libnccl.so"
        nccl=(-DSTRATA_NCCL_INCLUDE_DIR="$(dirname "$nh")" -DSTRATA_NCCL_LIBRARY="$nd/libnccl.so")
        export LD_LIBRARY_PATH=$nd:$LD_LIBRARY_PATH
    fi
fi
say "nccl: ${nccl[*]:-from the toolkit}"

# The GPU tests train on Fashion-MNIST from its Debian path.
data=/usr/share/datasets/fashion-mnist
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
    mkdir -p "$data" && cp .devdeps/fashion-mnist/*.gz "$data/"
fi

b=/tmp/strata-gpu-build
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
# STRATA_DEVICE_CUDA=OFF: a dry run of this script on a machine without a
# GPU (the carried dependencies, the build, the CPU rows).
stage build 200 "$out/build.log" bash -c "cmake -S '$root' -B '$b' ${gen[*]} \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_CUDA=${STRATA_DEVICE_CUDA:-ON} \
    -DCMAKE_CUDA_ARCHITECTURES=$cap -DCMAKE_CUDA_COMPILER='$nvcc' ${nccl[*]} \
    -DSTRATA_WERROR=OFF \
    && cmake --build '$b' -j $(nproc)" ||
    { tail -40 "$out/build.log"; cat "$summary"; exit 1; }
# Not errors here (another distribution's compiler), but counted: CI's are.
say "build warnings: $(grep -c 'warning:' "$out/build.log")"

# -V: the tests' own lines (figures such as gpu_train's distances) too.
# DEVICE_CHECK_QUICK=1: a rerun after a fix, with little device time left:
# the GPU kernels and training against the CPU, and the float32 GPU rows.
quick=${DEVICE_CHECK_QUICK:-}
tests='gpu_|nccl|test_kc_|kernels'
[ -n "$quick" ] && tests='^gpu_(kernels|train)$'
stage tests 240 "$out/tests.log" ctest --test-dir "$b" -V -j 4 -R "$tests"
grep -E "tests passed|Passed|Failed|Skipped|\*\*\*|CHECK failed|distance|SKIPPED" \
    "$out/tests.log" | head -60 | sed 's/^/  /' | tee -a "$summary"

if [ -z "$quick" ]; then
    # The GPU tests' host side under AddressSanitizer + UBSan (memcheck above
    # checks the device's memory, not the host's). CUDA maps memory in ASan's
    # shadow gap (protect_shadow_gap=0); the driver's own allocations are no
    # leak of strata's (detect_leaks=0).
    ba=/tmp/strata-gpu-asan
    stage asan-build 200 "$out/asan-build.log" bash -c "cmake -S '$root' -B '$ba' ${gen[*]} \
        -DCMAKE_BUILD_TYPE=Debug -DSTRATA_SANITIZE=address,undefined \
        -DSTRATA_CUDA=${STRATA_DEVICE_CUDA:-ON} -DCMAKE_CUDA_ARCHITECTURES=$cap \
        -DCMAKE_CUDA_COMPILER='$nvcc' ${nccl[*]} -DSTRATA_WERROR=OFF \
        && cmake --build '$ba' -j $(nproc)" &&
    ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
        stage asan 200 "$out/asan.log" ctest --test-dir "$ba" --output-on-failure \
        -j 4 -R '^gpu_(kernels|train|nccl)$'
    grep -E "tests passed|Passed|Failed|Skipped|\*\*\*|ERROR: AddressSanitizer|runtime error" \
        "$out/asan.log" 2>/dev/null | head -20 | sed 's/^/  /' | tee -a "$summary"
fi

# Steps of the seeds' CNN on one GPU, float32 and mixed_bfloat16, against
# the machine's CPU in float32, the same job (the first steps, cuBLAS's start
# among them, are in the mean: 300 steps). Each run at most 30 s.
{
    runs="gpu:0/float32 gpu:0/mixed_bfloat16 cpu:0/float32"
    [ -n "$quick" ] && runs=gpu:0/float32
    for run in $runs; do
        dev=${run%/*} prec=${run#*/}
        for bs in 64 256; do
            steps=300
            [ "$dev" = cpu:0 ] && steps=40
            echo "--- $dev, $prec, global batch $bs, $steps steps"
            tr=local
            [ "$dev" = cpu:0 ] || tr=nccl
            timeout 30 "$b/bin/strata" train -c etc/seeds-cnn.ini \
                --set train.devices=$dev --set transport.local=$tr \
                --set train.batch_size=$bs \
                --set train.max_steps=$steps --set train.eval=false \
                --set train.precision=$prec \
                --set data.validation_split= --set train.progress=line \
                2>&1 | grep -E "ms/step|error|done|precision"
        done
    done
    # A trace of 10 steps (train.trace: Chrome's format) at 256, for the
    # GPU path's time by op.
    timeout 30 "$b/bin/strata" train -c etc/seeds-cnn.ini \
        --set train.devices=gpu:0 --set transport.local=nccl \
        --set train.batch_size=256 --set train.max_steps=40 \
        --set train.eval=false --set data.validation_split= \
        --set train.progress=none --set train.trace="$out/trace.json" \
        --set train.trace_steps=10 2>&1 | grep -E "error|trace"
} >"$out/bench.log" 2>&1

# Each kernel's GPU time in 10 steps of the same job at 256 (Nsight
# Compute, one metric: a single pass a kernel; the clocks left alone).
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
if [ -n "$ncu" ] && [ -z "$quick" ]; then
    timeout 150 "$ncu" --clock-control none --metrics gpu__time_duration.sum \
        --print-summary per-kernel \
        "$b/bin/strata" train -c etc/seeds-cnn.ini \
        --set train.devices=gpu:0 --set transport.local=nccl \
        --set train.batch_size=256 --set train.max_steps=10 \
        --set train.eval=false --set data.validation_split= \
        --set train.progress=none >"$out/ncu.log" 2>&1
    say "ncu: exit $? ($(grep -c 'gpu__time_duration' "$out/ncu.log") kernels' rows)"
fi
sed 's/^/  /' "$out/bench.log" | tee -a "$summary" >/dev/null
cat "$summary"
