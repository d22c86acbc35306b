"""Shared data for the package's tests: a tiny learnable 3-class set
(uint8 (n, 8, 8) images, class k lights rows 2k and 2k + 1), saved as .npy
and held in memory, and a job INI over the files. Run by CTest
(tests/python) against the build tree: STRATA_LIBRARY names its
libstrata.so, STRATA_BIN its strata command."""

import os
import socket
import subprocess
import sys

import numpy as np
import pytest

BIN = os.environ.get("STRATA_BIN", "strata")


def make_set(rng, n):
    y = rng.integers(0, 3, n)
    x = rng.integers(0, 90, (n, 8, 8))
    for k in range(3):
        x[y == k, 2 * k:2 * k + 2, :] += 150
    return x.astype(np.uint8), y.astype(np.int64)


@pytest.fixture(scope="session")
def data():
    rng = np.random.default_rng(11)
    x, y = make_set(rng, 320)
    xt, yt = make_set(rng, 96)
    return {"x": x, "y": y, "xt": xt, "yt": yt}


def write_job(d, data, epochs=3, extra=""):
    """The data as .npy files in d and a job INI over them; its path."""
    for k, name in (("x", "train_images"), ("y", "train_labels"),
                    ("xt", "test_images"), ("yt", "test_labels")):
        np.save(os.path.join(d, name + ".npy"), data[k])
    ini = os.path.join(d, "job.ini")
    with open(ini, "w") as f:
        f.write(f"""[train]
epochs = {epochs}
batch_size = 32
devices = cpu:0
progress = none
[model]
layers = dense 16 relu, dense 3
[data]
dir = {d}
train_images = train_images.npy
train_labels = train_labels.npy
test_images = test_images.npy
test_labels = test_labels.npy
validation_split = 0.25
[optimizer]
lr = 0.01
{extra}""")
    return ini


SMALL = {"model": {"layers": "dense 16 relu, dense 3"},
         "train": {"devices": "cpu:0", "batch_size": 32, "epochs": 2},
         "optimizer": {"lr": 0.01}}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(n):
    """P with P .. P + n - 1 free a moment ago (torchrun's agent takes P,
    its workers P + 1 + i on one node)."""
    for _ in range(200):
        p, ok = free_port(), True
        for k in range(1, n):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p + k))
                except OSError:
                    ok = False
                    break
        if ok:
            return p
    raise RuntimeError("no %d free ports in a row" % n)


def torchrun(tmp_path, keys, script, *args):
    """`script args` as 2 processes of torchrun on this node (its workers at
    MASTER_PORT + 1 + i), secured with the keys of `strata keygen` in the
    directory `keys`; the finished process. --redirects/--tee 1: Debian's
    torch 1.13 under Python 3.11 turns their default, 0, into None and fails
    (as tests/multinode notes); the workers' stdout is then in --log_dir."""
    env = dict(os.environ, STRATA_SECURITY_KEYS=str(keys))
    return subprocess.run([sys.executable, "-m", "torch.distributed.run",
                           "--nnodes=1", "--nproc_per_node=2",
                           "--master_addr=127.0.0.1",
                           "--master_port=%d" % free_ports(3),
                           "--redirects=1", "--tee=1",
                           "--log_dir=%s" % (tmp_path / "logs"),
                           script] + list(args),
                          capture_output=True, text=True, timeout=120, env=env)
