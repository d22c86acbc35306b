#!/bin/bash
# On the device machine (the device tool's `run`, from the repository root,
# .devdeps carried: tests/gpu/device_pack.sh fills it here first): build
# strata with CUDA for the GPU that is there, run every GPU test (kernels
# against the CPU's, the same under compute-sanitizer, mirrored training on
# the GPU against the CPU, nccl.so's collectives and conformance), then time
# GPU training steps. Everything goes to $OUT (the tool brings it back):
# build.log, tests.log, bench.log and summary.txt; this prints the summary.
# Bounded: about 5 minutes on 16 cores, each stage under `timeout`.
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

# The carried Debian packages, unpacked under a prefix of their own (never
# over /), and .pc files that point into it.
pre=/tmp/devroot
rm -rf "$pre"
mkdir -p "$pre/pc"
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
    [ -f "$pc" ] && sed "s|/usr|$pre/usr|g" "$pc" >"$pre/pc/$(basename "$pc")"
done
# Debian's alternatives (set by postinst, not by unpacking) name libopenblas
ln -sf openblas-pthread/libopenblas.so.0 "$lib/libopenblas.so.0"
export PKG_CONFIG_PATH=$pre/pc
export CMAKE_PREFIX_PATH=$pre/usr
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# NCCL: the toolkit's own, else the nvidia-nccl wheel of the image's Python.
nccl=()
if ! ls "$(dirname "$nvcc")"/../lib64/libnccl.so >/dev/null 2>&1; then
    nd=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null)
    if [ -n "$nd" ]; then
        [ -e "$nd/lib/libnccl.so" ] || ln -sf libnccl.so.2 "$nd/lib/libnccl.so"
        nccl=(-DSTRATA_NCCL_INCLUDE_DIR="$nd/include" -DSTRATA_NCCL_LIBRARY="$nd/lib/libnccl.so")
        export LD_LIBRARY_PATH=$nd/lib:$LD_LIBRARY_PATH
    fi
fi

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
stage build 420 "$out/build.log" bash -c "cmake -S '$root' -B '$b' ${gen[*]} \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_CUDA=${STRATA_DEVICE_CUDA:-ON} \
    -DCMAKE_CUDA_ARCHITECTURES=$cap -DCMAKE_CUDA_COMPILER='$nvcc' ${nccl[*]} \
    && cmake --build '$b' -j $(nproc)" ||
    { tail -40 "$out/build.log"; cat "$summary"; exit 1; }

stage tests 300 "$out/tests.log" ctest --test-dir "$b" --output-on-failure \
    -j 4 -R 'gpu_|nccl|test_kc_|kernels'
grep -E "tests passed|Passed|Failed|Skipped|\*\*\*" "$out/tests.log" |
    sed 's/^/  /' | tee -a "$summary"

# Steps of the seeds' CNN on one GPU against the CPU, the same job, in
# float32 and mixed_bfloat16 (the first steps, cuBLAS's start among them,
# are in the mean: 300 steps).
{
    for dev in gpu:0 cpu:0; do
        for prec in float32 mixed_bfloat16; do
            for bs in 64 256; do
                steps=300
                [ "$dev" = cpu:0 ] && steps=40
                echo "--- $dev, $prec, global batch $bs, $steps steps"
                timeout 120 "$b/bin/strata" train -c etc/seeds-cnn.ini \
                    --set train.devices=$dev --set train.batch_size=$bs \
                    --set train.max_steps=$steps --set train.eval=false \
                    --set train.precision=$prec \
                    --set data.validation_split= --set train.progress=line \
                    2>&1 | grep -E "ms/step|error|done|precision"
            done
        done
    done
} >"$out/bench.log" 2>&1
sed 's/^/  /' "$out/bench.log" | tee -a "$summary" >/dev/null
cat "$summary"
