#!/usr/bin/env python3
"""Check that torch_resnet.py's ResNet-14 computes what the Keras definition
of etc/resnet.ini's header (cnn/tf_cnn.py's resnet) computes: same layer
order, 'same' padding placement, shortcuts, BatchNorm and pooling.

The Keras model is built under a TensorFlow interpreter (--tf-python: the
venv of contrib/bench/cnn/run.sh), its BatchNorm statistics and scales set
to random values, and its weights and the outputs for 4 random images, in
inference and in training mode (batch statistics), written to a JSON file;
then, under this interpreter (torch), the same weights go into the torch
model (kernels HWIO -> OIHW) and the outputs are compared. Exit 1 when they
differ by more than --tol (fp32 rounding is ~1e-6).

    compare_keras.py [--tf-python contrib/bench/cnn/.venv/bin/python]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CNN = os.path.join(os.path.dirname(HERE), "cnn")


def keras_side(out):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path.insert(0, CNN)
    import numpy as np
    import tensorflow as tf
    import tf_cnn
    keras = tf.keras
    keras.utils.set_random_seed(0)
    m = tf_cnn.resnet(keras, sync=False)
    rng = np.random.default_rng(0)
    for layer in m.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            shape = layer.get_weights()[0].shape
            layer.set_weights([rng.random(shape, dtype=np.float32) + 0.5,
                               rng.random(shape, dtype=np.float32) - 0.5,
                               rng.random(shape, dtype=np.float32) - 0.5,
                               rng.random(shape, dtype=np.float32) + 0.5])
    x = rng.random((4, 28, 28, 1), dtype=np.float32)
    rec = {"x": x.tolist(),
           "layers": [[type(layer).__name__,
                       [w.tolist() for w in layer.get_weights()]]
                      for layer in m.layers if layer.get_weights()],
           "inference": m(x, training=False).numpy().tolist(),
           "training": m(x, training=True).numpy().tolist()}
    with open(out, "w") as f:
        json.dump(rec, f)


def torch_side(path, tol):
    import numpy as np
    import torch
    sys.path.insert(0, HERE)
    import torch_resnet
    with open(path) as f:
        d = json.load(f)
    m = torch_resnet.build_resnet(torch, 0)
    convs = [m.stem]
    bns = [m.stem_bn]
    for b in [b for stage in (m.s1, m.s2, m.s3) for b in stage]:
        convs += [b.c1, b.c2] + ([b.proj] if b.proj is not None else [])
        bns += [b.bn1, b.bn2] + ([b.pbn] if b.proj is not None else [])
    # Keras lists the layers in its graph's order; match them by kind and
    # shape, in order within each kind (a swap of two BatchNorms of the same
    # width would show in the outputs: their values are random)
    kinds = {"Conv2D": convs, "BatchNormalization": bns, "Dense": [m.dense]}
    with torch.no_grad():
        for kind, ws in d["layers"]:
            mod = kinds[kind].pop(0)
            w = [torch.tensor(np.array(a, dtype=np.float32)) for a in ws]
            if kind == "Conv2D":
                mod.weight.copy_(w[0].permute(3, 2, 0, 1))
                mod.bias.copy_(w[1])
            elif kind == "Dense":
                mod.weight.copy_(w[0].t())
                mod.bias.copy_(w[1])
            else:
                mod.weight.copy_(w[0])
                mod.bias.copy_(w[1])
                mod.running_mean.copy_(w[2])
                mod.running_var.copy_(w[3])
    if any(kinds.values()):
        raise SystemExit("compare_keras: the Keras model has fewer layers "
                         "than the torch one")
    x = torch.tensor(np.array(d["x"], dtype=np.float32)).permute(0, 3, 1, 2)
    worst = 0.0
    for mode in ("inference", "training"):
        m.train(mode == "training")
        with torch.no_grad():
            y = m(x).numpy()
        ref = np.array(d[mode])
        diff = float(np.abs(y - ref).max())
        worst = max(worst, diff)
        print("%-9s max |torch - keras| = %.3g (outputs up to %.3g)"
              % (mode, diff, float(np.abs(ref).max())))
    if worst > tol:
        print("compare_keras: MISMATCH (tolerance %g)" % tol)
        return 1
    print("compare_keras: the same function (tolerance %g)" % tol)
    return 0


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tf-python", default=os.path.join(CNN, ".venv", "bin",
                                                       "python"))
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--keras-out", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.keras_out:
        keras_side(a.keras_out)
        return 0
    with tempfile.TemporaryDirectory(prefix="strata-cmp-keras-") as d:
        out = os.path.join(d, "keras.json")
        try:
            r = subprocess.run([a.tf_python, os.path.abspath(__file__),
                                "--keras-out", out])
        except OSError as e:
            raise SystemExit("compare_keras: cannot run %s: %s (make the "
                             "venv with contrib/bench/cnn/run.sh)"
                             % (a.tf_python, e))
        if r.returncode != 0:
            raise SystemExit("compare_keras: the Keras side failed under %s"
                             % a.tf_python)
        return torch_side(out, a.tol)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
