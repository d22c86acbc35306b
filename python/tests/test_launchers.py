"""The same fit script (fit_job.py: strata.Job.fit on NumPy arrays in
memory, mwms over 2 processes) under every launcher a user starts it with:
`strata launch -n 2`, Open MPI's `mpirun -np 2` and torchrun (where
installed), secured by the job's keys. Each gives the same History on both
processes and the same weights, bitwise, as one process of 2 mirrored
replicas on the same global batch."""

import glob
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import BIN, torchrun

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "fit_job.py")


def results(out, procs):
    hists = [json.load(open(p)) for p in
             sorted(glob.glob(os.path.join(out, "history-*.json")))]
    weights = sorted(glob.glob(os.path.join(out, "weights-*.npz")))
    assert len(hists) == procs, os.listdir(out)
    assert len(weights) == 1, os.listdir(out)   # the chief's
    for h in hists[1:]:
        assert h == hists[0]
    return hists[0], dict(np.load(weights[0]))


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("mirrored")
    subprocess.run([sys.executable, JOB, str(out), "mirrored"], check=True,
                   timeout=120)
    return results(out, 1)


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("keys")
    os.chmod(d, 0o700)
    subprocess.run([BIN, "keygen", str(d), "worker:0-1"], check=True,
                   capture_output=True)
    return str(d)


def check(reference, out, p):
    assert p.returncode == 0, p.stdout + p.stderr
    hist, weights = results(out, 2)
    want_hist, want_weights = reference
    assert hist == want_hist
    assert sorted(weights) == sorted(want_weights)
    for name, w in want_weights.items():
        assert weights[name].tobytes() == w.tobytes(), name


def test_strata_launch(reference, tmp_path):
    p = subprocess.run([BIN, "launch", "-n", "2", sys.executable, JOB,
                        str(tmp_path), "mwms"],
                       capture_output=True, text=True, timeout=120)
    check(reference, tmp_path, p)


@pytest.mark.skipif(not shutil.which("mpirun"),
                    reason="Open MPI's mpirun is not installed "
                           "(apt-get install openmpi-bin)")
def test_mpirun(reference, keys, tmp_path):
    # Open MPI's own rendezvous-free start on one node: strata meets at an
    # abstract socket named after the mpirun job; -x hands each rank the
    # variables it needs.
    p = subprocess.run(["mpirun", "--allow-run-as-root", "--oversubscribe",
                        "-np", "2", "-x", "STRATA_SECURITY_KEYS=" + keys,
                        "-x", "STRATA_LIBRARY", "-x", "PYTHONPATH",
                        "-x", "PYTHONDONTWRITEBYTECODE",
                        sys.executable, JOB, str(tmp_path), "mwms"],
                       capture_output=True, text=True, timeout=120)
    check(reference, tmp_path, p)


def test_torchrun(reference, keys, tmp_path):
    pytest.importorskip("torch", reason="PyTorch (torchrun) is not installed")
    p = torchrun(tmp_path, keys, JOB, str(tmp_path), "mwms")
    check(reference, tmp_path, p)
