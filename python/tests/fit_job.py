"""One process of test_launchers.py's job: strata.Job.fit on conftest's
in-memory set under mwms (the cluster from whichever launcher started it:
strata launch's TF_CONFIG, Open MPI's OMPI_COMM_WORLD_*, torchrun's RANK /
WORLD_SIZE), or, with "mirrored", one process of 2 replicas on the same
global batch. Writes OUT/history-PID.json and, where this process holds the
checkpoint (the chief), OUT/weights-PID.npz."""

import json
import os
import sys

import numpy as np

import strata
from conftest import make_set


def main():
    out, plugin = sys.argv[1], sys.argv[2]
    x, y = make_set(np.random.default_rng(11), 320)
    devices = "cpu:0, cpu:1" if plugin == "mirrored" else "cpu:0"
    job = strata.Job({"train": {"epochs": 3, "batch_size": 32, "seed": 3,
                                "devices": devices},
                      "model": {"layers": "dense 16 relu, dense 3"},
                      "strategy": {"plugin": plugin},
                      "optimizer": {"lr": 0.01}})
    h = job.fit(x, y, verbose=0)
    with open(os.path.join(out, "history-%d.json" % os.getpid()), "w") as f:
        json.dump(h.history, f)
    try:
        w = job.get_weights()
    except strata.errors.StrataError:
        return   # not the chief: the chief writes the checkpoint
    np.savez(os.path.join(out, "weights-%d.npz" % os.getpid()), **w)


main()
