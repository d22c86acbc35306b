#!/bin/sh
# End to end: a data set exported from Python with numpy.save trains through
# the strata binary (README "Your own data"). Needs python3 with numpy
# (CI: pip install numpy); skips (77) without it. Environment as every test:
# STRATA_BIN, STRATA_PLUGIN_PATH; PYTHON picks the interpreter.
set -u
PY=${PYTHON:-python3}
if ! "$PY" -c 'import numpy' >/dev/null 2>&1; then
    echo "SKIPPED: $PY cannot import numpy (pip install numpy)"
    exit 77
fi
bin=${STRATA_BIN:?STRATA_BIN is not set}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/strata-npy-e2e-XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # check DESCRIPTION PATTERN FILE: grep -E, report
    if grep -Eq -- "$2" "$3"; then echo "ok: $1"
    else echo "FAILED: $1: no /$2/ in:"; cat "$3"; fail=1; fi
}

# A learnable set: 3 classes; the class's channel of an 8x8x3 image is
# bright: float32 images with int64 labels (numpy's defaults); and uint8
# grayscale (n, 8, 8), where a class lights two rows, with int32 labels.
"$PY" - "$tmp" <<'PYEOF' || exit 2
import sys
import numpy as np
d = sys.argv[1]
rng = np.random.default_rng(0)
def make(n):
    y = rng.integers(0, 3, n)
    x = rng.normal(0.0, 0.5, (n, 8, 8, 3)).astype(np.float32)
    x[np.arange(n), :, :, y] += 1.0
    return x, y
for split, n in (("train", 960), ("test", 320)):
    x, y = make(n)
    np.save(f"{d}/x_{split}.npy", x)
    np.save(f"{d}/y_{split}.npy", y)
    g = rng.integers(0, 60, (n, 8, 8))        # class k: rows 3k, 3k+1 lit
    for k in range(3):
        g[y == k, 3 * k:3 * k + 2, :] += 180
    g = g.astype(np.uint8)
    np.save(f"{d}/g_{split}.npy", g)
    np.save(f"{d}/gy_{split}.npy", y.astype(np.int32))
# 300 classes, more than a byte holds: class k lights feature k of 300;
# uint16 labels.
for split, n in (("train", 4800), ("test", 900)):
    y = rng.integers(0, 300, n)
    x = rng.normal(0.0, 0.1, (n, 300)).astype(np.float32)
    x[np.arange(n), y] += 3.0
    np.save(f"{d}/w_{split}.npy", x)
    np.save(f"{d}/wy_{split}.npy", y.astype(np.uint16))
np.save(f"{d}/x_fortran.npy", np.asfortranarray(np.zeros((4, 3, 2), np.float32)))
np.save(f"{d}/x_f64.npy", np.zeros((4, 3, 2)))
PYEOF

cat > "$tmp/job.ini" <<INI
[train]
epochs = 3
batch_size = 32
devices = cpu:0, cpu:1
progress = line
[model]
layers = conv2d 4 3 relu, flatten, dense 3
[data]
dir = $tmp
train_images = x_train.npy
train_labels = y_train.npy
test_images = x_test.npy
test_labels = y_test.npy
INI

# 1. float32 (n, 8, 8, 3): the model sees (8, 8, 3): conv2d 4 3 has
#    3*3*3*4 + 4 = 112 parameters and outputs (6, 6, 4); training learns.
"$bin" train -c "$tmp/job.ini" >"$tmp/out1" 2>&1
rc=$?
[ $rc -eq 0 ] || { echo "FAILED: float32 run exited $rc"; cat "$tmp/out1"; fail=1; }
check "float32 summary: input (8, 8, 3)" 'conv2d_0 +conv2d 4 3 relu +\(6, 6, 4\) +112' "$tmp/out1"
check "float32 samples" '960 training samples' "$tmp/out1"
check "float32 learns" 'done: 3 epochs, test accuracy (0\.9[5-9]|1\.0)' "$tmp/out1"

# 2. uint8 (n, 8, 8) with int32 labels, limit_train: (8, 8, 1), 640 samples.
"$bin" train -c "$tmp/job.ini" --set data.train_images=g_train.npy \
    --set data.train_labels=gy_train.npy --set data.test_images=g_test.npy \
    --set data.test_labels=gy_test.npy --set data.limit_train=640 \
    --set train.epochs=10 \
    >"$tmp/out2" 2>&1
rc=$?
[ $rc -eq 0 ] || { echo "FAILED: uint8 run exited $rc"; cat "$tmp/out2"; fail=1; }
check "uint8 summary: input (8, 8, 1)" 'conv2d_0 +conv2d 4 3 relu +\(6, 6, 4\) +40' "$tmp/out2"
check "uint8 limit_train" '640 training samples' "$tmp/out2"
check "uint8 learns" 'done: 10 epochs, test accuracy (0\.9|1\.0)' "$tmp/out2"

# 3. 300 classes (labels are class ids, as many as the data has): the
#    last layer has 300 units; a model with fewer is refused.
"$bin" train -c "$tmp/job.ini" --set data.train_images=w_train.npy \
    --set data.train_labels=wy_train.npy --set data.test_images=w_test.npy \
    --set data.test_labels=wy_test.npy --set "model.layers=dense 300" \
    --set optimizer.lr=0.01 --set train.epochs=4 \
    >"$tmp/out4" 2>&1
rc=$?
[ $rc -eq 0 ] || { echo "FAILED: 300-class run exited $rc"; cat "$tmp/out4"; fail=1; }
check "300 classes learn" 'done: 4 epochs, test accuracy (0\.9|1\.0)' "$tmp/out4"
"$bin" train -c "$tmp/job.ini" --set data.train_images=w_train.npy \
    --set data.train_labels=wy_train.npy --set data.test_images=w_test.npy \
    --set data.test_labels=wy_test.npy --set "model.layers=dense 10" \
    >"$tmp/out5" 2>&1
rc=$?
[ $rc -ne 0 ] || { echo "FAILED: dense 10 accepted 300 classes"; fail=1; }
check "dense 10 for 300 classes refused" 'has 300 classes' "$tmp/out5"

# 4. Files numpy wrote that strata refuses: one line naming the file.
for f in fortran:'fortran_order is True' f64:"unsupported dtype '<f8'"; do
    name=${f%%:*} want=${f#*:}
    "$bin" train -c "$tmp/job.ini" --set "data.train_images=x_$name.npy" \
        >"$tmp/out3" 2>&1
    rc=$?
    [ $rc -ne 0 ] || { echo "FAILED: x_$name.npy was accepted"; fail=1; }
    check "x_$name.npy refused" "x_$name\.npy: $want" "$tmp/out3"
done
exit $fail
