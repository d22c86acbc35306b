#!/usr/bin/env python3
"""TensorFlow anchor of the strata CNN benchmark: tf.distribute's own
MirroredStrategy, as the seeds' code uses it.

The one physical CPU is split into --replicas logical devices
(tf.config.set_logical_device_configuration) and MirroredStrategy mirrors
the model over them; a keras.Sequential of the strata [model] layers string
(Conv2D, MaxPooling2D, Flatten, Dropout, Dense: Keras' own defaults are
Glorot-uniform kernels and zero biases), Adam(1e-3) (Keras' epsilon 1e-7),
sparse categorical cross-entropy on the softmax output, model.fit on the
same Fashion-MNIST IDX files (pixels / 255, NHWC 28x28x1) at the same
global batch (split over the replicas by MirroredStrategy), reshuffled
every pass, the last partial batch dropped.

Speed: fit runs --warmup + --steps batches (one Keras epoch with
steps_per_epoch, over the first --limit-train samples repeated) and a
callback times the last --steps batches (on_train_batch_end of batch
warmup-1 to that of the last one); the first batches trace and compile the
step function. Prints one JSON line {"samples_per_s", "seconds", ...}.
With --steps 0: --epochs whole epochs and the test accuracy (not used by
the benchmark, for checking the model).

--model resnet instead of --layers: the ResNet-14 of etc/resnet.ini, the
Keras functional definition in that file's header (Conv2D padding "same",
BatchNormalization(momentum=0.9) with Keras's epsilon 1e-3 after every
convolution, 1x1 stride-2 projection shortcuts, GlobalAveragePooling2D,
Dense(10) logits with from_logits cross-entropy), its BatchNormalization
synchronized=True under MirroredStrategy (as strata's sync=true: the
statistics of the global batch; --bn-local for per-replica ones).

Runs under the venv that contrib/bench/cnn/run.sh makes (tensorflow-cpu
from PyPI); TensorFlow's own thread pools keep their defaults (one
intra-op pool shared by the logical devices, sized to the cores) unless
--intra / --inter are given.
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import torch_mlp  # noqa: E402  (the IDX reader; stdlib only, no torch)

KERAS_CNN = ("conv2d 32 3 relu, maxpool2d 2, conv2d 64 3 relu, maxpool2d 2, "
             "flatten, dropout 0.5, dense 10 softmax")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", default=KERAS_CNN)
    p.add_argument("--model", choices=("layers", "resnet"),
                   default="layers",
                   help="layers: the --layers string; resnet: etc/resnet.ini"
                        "'s ResNet-14 (the file's Keras definition)")
    p.add_argument("--bn-local", action="store_true",
                   help="resnet: BatchNormalization per replica (default: "
                        "synchronized=True, as strata's sync=true)")
    p.add_argument("--batch", type=int, default=64, help="global batch")
    p.add_argument("--steps", type=int, default=50,
                   help="timed batches (0: --epochs whole epochs)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--limit-train", type=int, default=0,
                   help="use only the first N training samples (0: all)")
    p.add_argument("--replicas", type=int, default=2,
                   help="logical CPU devices = MirroredStrategy replicas")
    p.add_argument("--intra", type=int, default=0,
                   help="intra-op threads (0: TensorFlow's default)")
    p.add_argument("--inter", type=int, default=0,
                   help="inter-op threads (0: TensorFlow's default)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--data", default=torch_mlp.DEFAULT_DATA)
    a = p.parse_args(argv)
    if a.batch < 1 or a.replicas < 1 or a.batch % a.replicas:
        p.error("--batch must be a positive multiple of --replicas")
    if a.steps < 0 or a.warmup < 1 or a.epochs < 1:
        p.error("--steps >= 0, --warmup >= 1, --epochs >= 1")
    return a


def load_split(np, d, prefix, limit=0):
    idims, ibytes = torch_mlp.read_idx(
        torch_mlp.find_file(d, prefix + "-images-idx3-ubyte"))
    ldims, lbytes = torch_mlp.read_idx(
        torch_mlp.find_file(d, prefix + "-labels-idx1-ubyte"))
    n = idims[0] if not limit else min(limit, idims[0])
    h, w = idims[1], idims[2]
    x = np.frombuffer(ibytes, dtype=np.uint8, count=n * h * w)
    x = (x.astype(np.float32) / 255.0).reshape(n, h, w, 1)
    y = np.frombuffer(lbytes, dtype=np.uint8, count=n).astype(np.int64)
    return x, y


def keras_layers(keras, spec):
    out = [keras.Input(shape=(28, 28, 1))]
    for raw in spec.split(","):
        w = raw.split()
        kind = w[0]
        kv = dict(x.split("=", 1) for x in w[1:] if "=" in x)
        pos = [x for x in w[1:] if "=" not in x]

        def act(i):
            return None if len(pos) <= i or pos[i] == "none" else pos[i]
        if kind == "conv2d":
            out.append(keras.layers.Conv2D(
                int(pos[0]), (int(pos[1]), int(pos[1])),
                strides=int(kv.get("stride", 1)),
                padding=kv.get("padding", "valid"), activation=act(2)))
        elif kind == "maxpool2d":
            pool = int(pos[0])
            out.append(keras.layers.MaxPooling2D(
                (pool, pool), strides=int(kv.get("stride", pool))))
        elif kind == "flatten":
            out.append(keras.layers.Flatten())
        elif kind == "dropout":
            out.append(keras.layers.Dropout(float(pos[0])))
        elif kind == "dense":
            out.append(keras.layers.Dense(int(pos[0]), activation=act(1)))
        else:
            raise ValueError("unknown layer %r" % kind)
    return out


def resnet(keras, sync=True, blocks=2):
    """etc/resnet.ini's header, line for line: ResNet-14 (175 530
    trainable); blocks=1: ResNet-8 (78 090)."""
    L = keras.layers

    def bn():
        return L.BatchNormalization(momentum=0.9, synchronized=sync)

    def block(x, f, stride):
        y = L.Conv2D(f, 3, strides=stride, padding="same")(x)
        y = L.ReLU()(bn()(y))
        y = L.Conv2D(f, 3, padding="same")(y)
        y = bn()(y)
        if stride != 1:
            x = L.Conv2D(f, 1, strides=stride)(x)
            x = bn()(x)
        return L.ReLU()(L.Add()([y, x]))
    x = inputs = keras.Input((28, 28, 1))
    x = L.Conv2D(16, 3, padding="same")(x)
    x = L.ReLU()(bn()(x))
    for f, stride in ((16, 1), (32, 2), (64, 2)):
        x = block(x, f, stride)
        for _ in range(blocks - 1):
            x = block(x, f, 1)
    outputs = L.Dense(10)(L.GlobalAveragePooling2D()(x))
    return keras.Model(inputs, outputs)


def main(argv):
    a = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    import numpy as np
    import tensorflow as tf
    keras = tf.keras

    if a.intra:
        tf.config.threading.set_intra_op_parallelism_threads(a.intra)
    if a.inter:
        tf.config.threading.set_inter_op_parallelism_threads(a.inter)
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()
              for _ in range(a.replicas)])
    devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    strategy = tf.distribute.MirroredStrategy(devices)
    keras.utils.set_random_seed(a.seed)

    x, y = load_split(np, a.data, "train", a.limit_train)
    n = len(y)
    if n < a.batch:
        raise SystemExit("batch %d > %d training samples" % (a.batch, n))
    ds = (tf.data.Dataset.from_tensor_slices((x, y))
          .shuffle(n, seed=a.seed, reshuffle_each_iteration=True)
          .repeat().batch(a.batch, drop_remainder=True)
          .prefetch(tf.data.AUTOTUNE))
    with strategy.scope():
        if a.model == "resnet":
            model = resnet(keras, sync=not a.bn_local)
            loss = keras.losses.SparseCategoricalCrossentropy(
                from_logits=True)
        else:
            model = keras.Sequential(keras_layers(keras, a.layers))
            loss = "sparse_categorical_crossentropy"
        model.compile(optimizer=keras.optimizers.Adam(learning_rate=a.lr,
                                                      epsilon=1e-7),
                      loss=loss, metrics=["accuracy"])

    common = {"replicas": strategy.num_replicas_in_sync, "devices": devices,
              "batch": a.batch, "seed": a.seed, "tensorflow": tf.__version__,
              "keras": keras.__version__ if hasattr(keras, "__version__")
              else None, "params": model.count_params(),
              "trainable_params": int(sum(
                  np.prod(v.shape) for v in model.trainable_weights)),
              "model": a.model}
    if a.steps > 0:
        marks = {}
        warm, last = a.warmup - 1, a.warmup + a.steps - 1

        class Timer(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                if batch in (warm, last):
                    marks[batch] = time.perf_counter()

        model.fit(ds, epochs=1, steps_per_epoch=a.warmup + a.steps,
                  callbacks=[Timer()], verbose=0)
        measured = marks[last] - marks[warm]
        rec = {"steps": a.steps, "warmup": a.warmup, "seconds": measured,
               "samples_per_s": a.steps * a.batch / measured,
               "limit_train": n}
        rec.update(common)
        print(json.dumps(rec), flush=True)
    else:
        xte, yte = load_split(np, a.data, "t10k")
        steps = n // a.batch
        for epoch in range(1, a.epochs + 1):
            t0 = time.perf_counter()
            h = model.fit(ds, epochs=1, steps_per_epoch=steps, verbose=0)
            measured = time.perf_counter() - t0
            loss, acc = model.evaluate(xte, yte, batch_size=1000, verbose=0)
            rec = {"epoch": epoch, "steps": steps,
                   "loss": h.history["loss"][-1],
                   "accuracy": h.history["accuracy"][-1],
                   "val_loss": loss, "val_accuracy": acc, "seconds": measured,
                   "samples_per_s": steps * a.batch / measured}
            rec.update(common)
            print(json.dumps(rec), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
