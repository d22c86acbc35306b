"""strata.torch: DistributedOptimizer over 2 processes under strata launch
equals single-process training on the whole batch, and PyTorch DDP over
gloo, within 1e-6 relative L2 per variable after 50 steps; with fp16
compression within 5e-2 (16-bit gradients); the collectives' script under
torchrun. Skipped without torch."""

import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

from conftest import BIN, free_port, torchrun  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def reference():
    """The same model on the whole batch, one process, plain SGD."""
    import torch_job   # beside this file: its data, model and loop
    x, y = torch_job.data()
    net = torch_job.model(seed=0)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    return torch_job.train(net, opt, 0, 1, x, y)


def rel_l2(a, b):
    return float(np.linalg.norm(a.astype(np.float64) - b) /
                 max(np.linalg.norm(b.astype(np.float64)), 1e-30))


def test_distributed_optimizer_two_processes(tmp_path):
    p = subprocess.run([BIN, "launch", "-n", "2", sys.executable,
                        os.path.join(HERE, "torch_job.py"), str(tmp_path),
                        str(free_port())],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    ref = reference()
    ways = {"strata": 1e-6, "fp16": 5e-2}
    if (tmp_path / "ddp.npz").exists():
        ways["ddp"] = 1e-6
    for way, tol in ways.items():
        got = np.load(tmp_path / (way + ".npz"))
        assert sorted(got.files) == sorted(ref), (way, got.files)
        for name, want in ref.items():
            d = rel_l2(got[name], want)
            print("%s %s: relative L2 %.2e" % (way, name, d))
            assert d <= tol, (way, name, d)
            if way == "fp16":
                assert d > 0, (way, name)   # it did travel in 16 bits
    ddp = np.load(tmp_path / "ddp.npz") if "ddp" in ways else None
    if ddp is not None:
        strata_ = np.load(tmp_path / "strata.npz")
        for name in ref:
            assert rel_l2(strata_[name], ddp[name]) <= 1e-6, name


def test_refusals_alone():
    """One process: a world of one, and DistributedOptimizer's refusals."""
    import strata
    import strata.collectives as sc
    import strata.torch as st
    with sc.Communicator() as comm:
        net = torch.nn.Linear(3, 2)
        base = torch.optim.SGD(net.parameters(), lr=0.1)
        with pytest.raises(ValueError, match="compression 'fp16'"):
            st.DistributedOptimizer(base, net.named_parameters(),
                                    compression="fp16", comm=comm)
        with pytest.raises(ValueError, match="op 'max'"):
            st.DistributedOptimizer(base, net.named_parameters(), op="max",
                                    comm=comm)
        opt = st.DistributedOptimizer(base, net.named_parameters(),
                                      comm=comm, overlap=True)
        assert isinstance(opt, torch.optim.SGD)
        net(torch.ones(1, 3)).sum().backward()
        net(torch.ones(1, 3)).sum().backward()   # a second pass: refused
        with pytest.raises(strata.errors.StateError, match="second backward"):
            opt.step()
        opt.zero_grad()
        before = net.weight.detach().clone()
        net(torch.ones(1, 3)).sum().backward()
        opt.step()                               # and it goes on
        assert torch.allclose(net.weight, before - 0.1)


def test_collectives_under_torchrun(tmp_path):
    """The collectives' script as 2 processes of torchrun (its one-node
    variables: worker i at MASTER_PORT + 1 + i), secured with keys of
    strata keygen ([security] keys through the environment)."""
    keys = tmp_path / "keys"
    keys.mkdir(mode=0o700)
    subprocess.run([BIN, "keygen", str(keys), "worker:0-1"], check=True,
                   capture_output=True)
    p = torchrun(tmp_path, keys, os.path.join(HERE, "coll_job.py"), "2")
    assert p.returncode == 0, p.stdout + p.stderr
    for r in range(2):
        assert "rank %d: ok" % r in p.stdout, p.stdout + p.stderr
