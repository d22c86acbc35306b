"""strata.collectives: alone (one process: every collective returns its
input) and as a job of 3 processes under `strata launch -n 3 python3
coll_job.py`, secured by launch's keys (coll_job.py checks every
collective against a local sum, with a stranger at its port)."""

import os
import subprocess
import sys

import numpy as np
import pytest

import strata
import strata.collectives as sc
from conftest import BIN

HERE = os.path.dirname(os.path.abspath(__file__))


def test_alone():
    with sc.Communicator() as comm:
        assert (comm.rank, comm.size, comm.transport) == (0, 1, "none")
        x = np.arange(6, dtype=np.float32)
        assert comm.allreduce(x) is x
        np.testing.assert_array_equal(x, np.arange(6))
        np.testing.assert_array_equal(comm.allgather(x), x)
        np.testing.assert_array_equal(comm.reduce_scatter(x, op="sum"), x)
        comm.broadcast(x)
        comm.barrier()
        with pytest.raises(strata.errors.InvalidArgument) as e:
            comm.broadcast(x, root=1)
        assert "root 1 is not a rank" in str(e.value)
    with pytest.raises(strata.errors.StateError):
        comm.barrier()


def test_module_needs_init():
    sc.shutdown()
    with pytest.raises(strata.errors.StateError):
        sc.allreduce(np.ones(2, np.float32))


def test_three_processes_under_launch():
    p = subprocess.run([BIN, "launch", "-n", "3", sys.executable,
                        os.path.join(HERE, "coll_job.py"), "3"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    for r in range(3):
        assert "[worker:%d] rank %d: ok" % (r, r) in p.stdout, p.stdout
    assert "the job goes on" in p.stderr, p.stderr   # the stranger, dropped


def test_elastic_under_launch(tmp_path):
    """strata launch --elastic 2:3: a worker dies and comes back; the
    others regroup without it and with it, the state goes on (elastic_job.py
    checks it)."""
    p = subprocess.run([BIN, "launch", "--elastic", "2:3", "-n", "3",
                        "--max-restarts", "2", sys.executable,
                        os.path.join(HERE, "elastic_job.py"), str(tmp_path)],
                       capture_output=True, text=True, timeout=150)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert (tmp_path / "died").exists(), out
    assert "[worker:2] worker:2 joined at step" in p.stdout, out
    for w in range(3):
        assert "[worker:%d] worker:%d: ok at step" % (w, w) in p.stdout, out
    assert "sizes [3, 2, 3]" in p.stdout, out
