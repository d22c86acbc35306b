#!/usr/bin/env python3
"""strata predict and strata eval --data, end to end through the strata
binary, against NumPy. Each scenario trains its tiny models on synthetic
data (seconds):

  predict.py numpy    an MLP (dense relu, dense) on uint8 (n, 8, 8) images
                      and a CNN (conv2d 'same' and strided 'same' and
                      'valid', maxpool2d, flatten, dense) on float32
                      (n, 12, 12, 2) images: predict's probabilities and
                      logits equal a NumPy forward pass of the checkpoint
                      (read here from its safetensors bytes) within 1e-5
                      relative, and so do a batchnorm model's (its moving
                      statistics) and a [graph]'s (add, concat);
                      softmax(logits) equals the probabilities, and
                      --batch-size does not change them
  predict.py ps       a ps job (strata launch --ps 1 -n 2): what eval
                      scores on its last checkpoint is what predict's
                      probabilities give (loss and accuracy)
  predict.py hostile  each bad input is one error line naming it, a
                      non-zero exit, and no file written; the usage
  predict.py eval     eval --data --labels on a .npy set prints what eval
                      prints with those files as the test set

Environment: STRATA_BIN, STRATA_PLUGIN_PATH, STRATA_SRC (set by ctest).
Exit 77 (skipped) when numpy is missing (Debian: python3-numpy).
"""

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("SKIPPED: python3 cannot import numpy (apt install python3-numpy)")
    sys.exit(77)

BIN = os.environ.get("STRATA_BIN", "strata")
SRC = os.environ.get("STRATA_SRC", os.path.join(os.path.dirname(__file__),
                                                "..", ".."))
MLP = "dense 16 relu, dense 3"
CNN = ("conv2d 4 3 padding=same relu, maxpool2d 2, "
       "conv2d 6 3 stride=2 padding=same relu, conv2d 5 2 relu, flatten, "
       "dense 3")
# batchnorm: inference normalises with the moving statistics, which the
# checkpoint holds beside the variables (momentum 0.5: far from their start).
BN = "dense 16, batchnorm momentum=0.5, relu, dense 3"
# A [graph]: a residual block beside a 1x1 convolution of the input,
# concatenated.
GRAPH = [("stem", "conv2d 4 3 padding=same relu"),
         ("c1", "conv2d 4 3 padding=same"),
         ("sum", "add <- c1, stem"),
         ("act", "relu"),
         ("pool", "maxpool2d 2"),
         ("side", "conv2d 2 1 <- input"),
         ("sidep", "maxpool2d 2"),
         ("cat", "concat <- pool, sidep"),
         ("flat", "flatten"),
         ("logits", "dense 3")]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
import pycheck  # noqa: E402  (tests/pycheck.py)
from pycheck import check  # noqa: E402


def strata(*args, timeout=120):
    r = subprocess.run([BIN] + [str(a) for a in args], capture_output=True,
                       text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return r.returncode, r.stdout, r.stderr


def make_data(d):
    """A learnable 3-class set twice: uint8 (n, 8, 8) where class k lights
    rows 3k, 3k+1; float32 (n, 12, 12, 2) where it lights a block."""
    rng = np.random.default_rng(7)
    for split, n in (("train", 480), ("test", 150)):
        y = rng.integers(0, 3, n)
        g = rng.integers(0, 60, (n, 8, 8))
        for k in range(3):
            g[y == k, 3 * k:3 * k + 2, :] += 180
        np.save(f"{d}/g_{split}.npy", g.astype(np.uint8))
        np.save(f"{d}/gy_{split}.npy", y.astype(np.int64))
        x = rng.normal(0.0, 0.5, (n, 12, 12, 2)).astype(np.float32)
        for k in range(3):
            x[y == k, 4 * k:4 * k + 4, :, k % 2] += 1.5
        np.save(f"{d}/f_{split}.npy", x)
        np.save(f"{d}/fy_{split}.npy", y.astype(np.int32))


def job(d, name, layers, prefix):
    """An INI for a model (a chain, or a [graph]: (name, line) pairs) on the
    set `prefix` of d, checkpoints in d/name."""
    path = f"{d}/{name}.ini"
    if isinstance(layers, str):
        model = f"[model]\nlayers = {layers}\n"
    else:
        model = "[graph]\n" + "".join(f"{k} = {v}\n" for k, v in layers)
    with open(path, "w") as f:
        f.write(f"""[train]
epochs = 6
batch_size = 32
devices = cpu:0
progress = line
{model}[data]
dir = {d}
train_images = {prefix}_train.npy
train_labels = {prefix}y_train.npy
test_images = {prefix}_test.npy
test_labels = {prefix}y_test.npy
[optimizer]
lr = 0.005
[checkpoint]
dir = {d}/{name}
""")
    return path


def last_checkpoint(dir_):
    names = sorted(n for n in os.listdir(dir_) if n.startswith("ckpt-"))
    return os.path.join(dir_, names[-1])


def train(ini):
    code, out, err = strata("train", "-c", ini)
    check(code == 0, "train " + os.path.basename(ini), out + err)
    return last_checkpoint(ini[:-4])


def read_safetensors(path):
    """name -> float32 array, from the file's bytes (u64 header length,
    JSON header, data section)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__" or t["dtype"] != "F32":
            continue
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype="<f4").reshape(t["shape"])
    return out


def inputs(x):
    """The model's input as training feeds it: uint8 * (1/255.0f) in
    float32, float32 as it is; then float64 for the reference."""
    if x.dtype == np.uint8:
        x = x.astype(np.float32) * np.float32(1.0 / 255.0)
    return x.astype(np.float64)


def conv2d(x, k, b, stride=1, same=False):
    """Keras Conv2D, NHWC, kernel [kh][kw][c][f]; 'same' pads as Keras
    (ceil(n / stride) outputs, the extra padding after)."""
    n, h, w, _ = x.shape
    kh, kw, _, f = k.shape
    pads = []
    for size, kk in ((h, kh), (w, kw)):
        if same:
            o = -(-size // stride)
            total = max((o - 1) * stride + kk - size, 0)
            pads.append((o, total // 2, total - total // 2))
        else:
            pads.append(((size - kk) // stride + 1, 0, 0))
    (oh, pt, pb), (ow, pl, pr) = pads
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    y = np.zeros((n, oh, ow, f))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, i:i + stride * (oh - 1) + 1:stride,
                       j:j + stride * (ow - 1) + 1:stride, :]
            y += patch @ k[i, j].astype(np.float64)
    return y + b


def maxpool2d(x, p):
    n, h, w, c = x.shape
    oh, ow = h // p, w // p
    return x[:, :oh * p, :ow * p, :].reshape(n, oh, p, ow, p, c).max(axis=(2, 4))


def relu(x):
    return np.maximum(x, 0.0)


def dense(x, t, name):
    return x.reshape(len(x), -1) @ t[name + "/kernel"].astype(np.float64) \
        + t[name + "/bias"]


def forward_mlp(t, x):
    return dense(relu(dense(inputs(x), t, "dense_0")), t, "dense_1")


def forward_cnn(t, x):
    h = relu(conv2d(inputs(x), t["conv2d_0/kernel"], t["conv2d_0/bias"],
                    same=True))
    h = maxpool2d(h, 2)
    h = relu(conv2d(h, t["conv2d_2/kernel"], t["conv2d_2/bias"], stride=2,
                    same=True))
    h = relu(conv2d(h, t["conv2d_3/kernel"], t["conv2d_3/bias"]))
    return dense(h, t, "dense_5")


def forward_bn(t, x):
    h = dense(inputs(x), t, "dense_0")
    inv = 1.0 / np.sqrt(t["batchnorm_1/moving_variance"].astype(np.float64)
                        + np.float32(0.001))
    h = (h - t["batchnorm_1/moving_mean"]) * inv * t["batchnorm_1/gamma"] \
        + t["batchnorm_1/beta"]
    return dense(relu(h), t, "dense_3")


def forward_graph(t, x):
    x = inputs(x)
    stem = relu(conv2d(x, t["stem/kernel"], t["stem/bias"], same=True))
    c1 = conv2d(stem, t["c1/kernel"], t["c1/bias"], same=True)
    pool = maxpool2d(relu(c1 + stem), 2)
    side = maxpool2d(conv2d(x, t["side/kernel"], t["side/bias"]), 2)
    return dense(np.concatenate([pool, side], axis=3), t, "logits")


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def rel_err(got, want):
    """The largest relative L2 distance of a sample's outputs."""
    num = np.linalg.norm(got.astype(np.float64) - want, axis=1)
    return float((num / np.maximum(np.linalg.norm(want, axis=1), 1e-30)).max())


def predict(ini, ckpt, data, out, *more):
    code, o, e = strata("predict", "-c", ini, "--checkpoint", ckpt,
                        "--data", data, "--out", out, *more)
    check(code == 0 and os.path.isfile(out),
          "predict %s %s" % (os.path.basename(data), " ".join(more)), o + e)
    return np.load(out) if code == 0 else None


def numpy_scenario(d):
    make_data(d)
    for name, layers, prefix, forward in (("mlp", MLP, "g", forward_mlp),
                                          ("cnn", CNN, "f", forward_cnn),
                                          ("bn", BN, "g", forward_bn),
                                          ("graph", GRAPH, "f",
                                           forward_graph)):
        ini = job(d, name, layers, prefix)
        ckpt = train(ini)
        x = np.load(f"{d}/{prefix}_test.npy")
        want = forward(read_safetensors(ckpt), x)
        data = f"{d}/{prefix}_test.npy"
        probs = predict(ini, ckpt, data, f"{d}/{name}_p.npy")
        logits = predict(ini, ckpt, data, f"{d}/{name}_l.npy", "--logits")
        small = predict(ini, ckpt, data, f"{d}/{name}_b7.npy",
                        "--batch-size", "7")
        if probs is None or logits is None or small is None:
            continue
        check(probs.dtype == np.float32 and probs.shape == (len(x), 3) and
              logits.dtype == np.float32 and logits.shape == (len(x), 3),
              f"{name}: float32 ({len(x)}, 3) outputs",
              f"{probs.dtype} {probs.shape}, {logits.dtype} {logits.shape}")
        err = rel_err(logits, want)
        check(err <= 1e-5, f"{name}: logits = NumPy's forward pass "
              f"(relative error {err:.2e})")
        err = rel_err(probs, softmax(want))
        check(err <= 1e-5, f"{name}: probabilities = NumPy's softmax of it "
              f"(relative error {err:.2e})")
        gap = float(np.abs(softmax(logits.astype(np.float64)) - probs).max())
        check(gap <= 1e-6 and np.array_equal(logits.argmax(1), probs.argmax(1))
              and float(np.abs(probs.sum(1) - 1).max()) <= 1e-6,
              f"{name}: softmax(--logits) = the probabilities ({gap:.1e})")
        err = rel_err(small, probs.astype(np.float64))
        check(err <= 1e-6, f"{name}: --batch-size 7 = the default batch "
              f"(relative error {err:.1e})")
        acc = float((probs.argmax(1) == np.load(
            f"{d}/{prefix}y_test.npy")).mean())
        check(acc >= 0.8, f"{name}: it learned (accuracy {acc:.3f})")


def eval_line(out):
    """(loss, accuracy, samples) of eval's line."""
    line = next((l for l in out.splitlines() if l.startswith("eval: ")), "")
    try:
        rest = line.split(": test loss ")[1]
        loss, rest = rest.split(", test accuracy ")
        acc, n = rest.split(" (")
        return float(loss), float(acc), int(n.split()[0])
    except (IndexError, ValueError):
        return None


def ps_scenario(d):
    make_data(d)
    sets = ["--set", "model.layers=" + MLP, "--set", "data.dir=" + d,
            "--set", "data.train_images=g_train.npy",
            "--set", "data.train_labels=gy_train.npy",
            "--set", "data.test_images=g_test.npy",
            "--set", "data.test_labels=gy_test.npy",
            "--set", "train.epochs=2", "--set", "train.progress=line",
            "--set", "checkpoint.dir=" + d + "/ps"]
    ini = os.path.join(SRC, "etc", "ps.ini")
    code, out, err = strata("launch", "--ps", "1", "-n", "2", "-c", ini,
                            *sets, timeout=240)
    check(code == 0, "a ps job (launch --ps 1 -n 2)", out + err)
    if code != 0:
        return
    ckpt = last_checkpoint(d + "/ps")
    code, out, err = strata("eval", "-c", ini, "--checkpoint", ckpt, *sets)
    scored = eval_line(out)
    check(code == 0 and scored, "eval of the ps checkpoint", out + err)
    code, o, e = strata("predict", "-c", ini, "--checkpoint", ckpt,
                        "--data", d + "/g_test.npy", "--out", d + "/p.npy",
                        *sets)
    check(code == 0, "predict of the ps checkpoint", o + e)
    if code != 0 or not scored:
        return
    p = np.load(d + "/p.npy").astype(np.float64)
    y = np.load(d + "/gy_test.npy")
    loss = float(-np.log(p[np.arange(len(y)), y]).mean())
    acc = float((p.argmax(1) == y).mean())
    check(abs(loss - scored[0]) <= 6e-5 and abs(acc - scored[1]) <= 6e-5 and
          scored[2] == len(y),
          "predict's probabilities give eval's figures (loss %.4f, accuracy "
          "%.4f; eval: %.4f, %.4f)" % (loss, acc, scored[0], scored[1]))


def error_lines(err):
    return [l for l in err.splitlines() if l.startswith("strata:")]


def hostile_scenario(d):
    code, out, _ = strata("help")
    check(code == 0 and "\n  predict " in out, "strata help lists predict")
    code, out, _ = strata("predict", "--help")
    check(code == 0 and "--logits" in out and "--batch-size N" in out,
          "strata predict --help")
    make_data(d)
    ini = job(d, "mlp", MLP, "g")
    ckpt = train(ini)
    np.save(f"{d}/wide.npy", np.zeros((5, 70), np.uint8))
    np.save(f"{d}/f64.npy", np.zeros((5, 8, 8)))
    target = f"{d}/elsewhere/target.txt"
    os.mkdir(f"{d}/elsewhere")
    with open(target, "w") as f:
        f.write("not for strata\n")
    os.symlink(target, f"{d}/link.npy")
    before = os.stat(target)
    good = f"{d}/g_test.npy"
    cases = [
        ("wrong feature count", ["--data", f"{d}/wide.npy"], 1,
         "takes 64 input features per sample"),
        ("float64 data", ["--data", f"{d}/f64.npy"], 1,
         "f64.npy: unsupported dtype '<f8'"),
        ("missing data", ["--data", f"{d}/none.npy"], 1,
         "none.npy: cannot open"),
        ("missing checkpoint", ["--checkpoint", f"{d}/none.safetensors"], 1,
         "none.safetensors: cannot open"),
        ("a checkpoint of another model", ["--set", "model.layers=dense 8 "
         "relu, dense 3"], 1, "tensor dense_0/kernel does not fit"),
        ("--out a symbolic link", ["--out", f"{d}/link.npy"], 1,
         "link.npy is a symbolic link"),
        ("--out in a missing directory", ["--out", f"{d}/none/out.npy"], 1,
         "none/out.npy: cannot create"),
        ("--out a directory", ["--out", f"{d}/elsewhere"], 1,
         "elsewhere is a directory"),
        ("--out the checkpoint", ["--out", ckpt], 2, "is the checkpoint"),
        ("unknown flag", ["--bogus"], 2, "unknown argument '--bogus'"),
        ("bad --batch-size", ["--batch-size", "0"], 2, "--batch-size '0'"),
        ("--out without a value", ["--out"], 2, "--out needs a value"),
    ]
    for what, args, want_code, want in cases:
        a = {"--checkpoint": ckpt, "--data": good, "--out": f"{d}/out.npy"}
        extra = []
        i = 0
        while i < len(args):
            if args[i] in a and i + 1 < len(args):
                a[args[i]] = args[i + 1]
                i += 2
            else:
                extra.append(args[i])
                i += 1
        if "--out" in extra:
            del a["--out"]
        listing = sorted(os.listdir(d))
        flat = [x for k, v in a.items() for x in (k, v)]
        code, out, err = strata("predict", "-c", ini, *flat, *extra)
        lines = error_lines(err)
        check(code == want_code and len(lines) == 1 and want in lines[0] and
              sorted(os.listdir(d)) == listing and
              not os.path.exists(f"{d}/out.npy"),
              f"{what}: one error line, exit {want_code}, nothing written",
              f"exit {code}\n{err}")
    after = os.stat(target)
    with open(target) as f:
        kept = f.read() == "not for strata\n"
    check(kept and after.st_mtime_ns == before.st_mtime_ns and
          os.path.islink(f"{d}/link.npy"), "the link's target is untouched")
    code, out, err = strata("eval", "-c", ini, "--checkpoint", ckpt,
                            "--data", good)
    check(code == 2 and "--data and --labels together" in err,
          "eval --data without --labels: a usage error", err)


def eval_scenario(d):
    make_data(d)
    ini = job(d, "cnn", CNN, "f")
    ckpt = train(ini)
    x, y = np.load(f"{d}/f_test.npy"), np.load(f"{d}/fy_test.npy")
    np.save(f"{d}/sub.npy", x[::2])
    np.save(f"{d}/suby.npy", y[::2].astype(np.uint8))
    code, given, err = strata("eval", "-c", ini, "--checkpoint", ckpt,
                              "--data", f"{d}/sub.npy", "--labels",
                              f"{d}/suby.npy", "--set", "data.limit_test=10")
    check(code == 0, "eval --data --labels", given + err)
    code, test, err = strata("eval", "-c", ini, "--checkpoint", ckpt,
                             "--set", "data.test_images=sub.npy",
                             "--set", "data.test_labels=suby.npy")
    check(code == 0, "eval with them as the test set", test + err)
    scored = eval_line(given)
    check(given == test and scored and scored[2] == len(y[::2]),
          "the same line, every sample of the files",
          f"--data: {given}test set: {test}")


def main():
    scenario = sys.argv[1] if len(sys.argv) > 1 else ""
    run = {"numpy": numpy_scenario, "ps": ps_scenario,
           "hostile": hostile_scenario, "eval": eval_scenario}.get(scenario)
    if not run:
        print(__doc__)
        return 2
    d = tempfile.mkdtemp(prefix="strata-predict-")
    try:
        run(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print("%s: %d failed" % (scenario, pycheck.failures))
    return 1 if pycheck.failures else 0


if __name__ == "__main__":
    sys.exit(main())
