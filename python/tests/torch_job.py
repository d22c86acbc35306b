"""One process of test_torch.py's job, run by `strata launch -n 2 python3
torch_job.py OUT PORT`: the collectives on tensors, then a small model
trained 50 steps on this process's half of each global batch, three ways --
strata.torch.DistributedOptimizer (small buckets, overlap on: several are
all-reduced during backward), PyTorch DDP over gloo (when this torch has
it), and DistributedOptimizer with fp16 compression (overlap by default: off
on one host) -- each from rank 0's initial variables (broadcast_parameters:
every rank starts from another seed). Checks that the ranks end bitwise
equal; rank 0 writes each run's variables to OUT/<way>.npz."""

import os
import sys

import numpy as np
import torch

import strata.collectives as sc
import strata.torch as st

STEPS, BATCH = 50, 64


def data():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((STEPS * BATCH, 10)).astype(np.float32)
    y = (x[:, :3].argmax(1) + (x[:, 3] > 1)) % 3
    return torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))


def model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 32), torch.nn.Tanh(),
                               torch.nn.Linear(32, 3))


def train(net, opt, rank, size, x, y):
    per = BATCH // size
    for s in range(STEPS):
        lo = s * BATCH + rank * per
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x[lo:lo + per]),
                                          y[lo:lo + per]).backward()
        opt.step()
    return {k: v.detach().numpy().copy() for k, v in net.state_dict().items()}


def same_on_every_rank(state):
    flat = np.concatenate([v.reshape(-1) for v in state.values()])
    every = sc.allgather(flat).reshape(sc.size(), -1)
    assert all((every[k] == every[0]).all() for k in range(sc.size())), \
        "the ranks' variables differ"


def tensors(rank, size):
    """The collectives on CPU tensors: in their own memory, no copy."""
    t = torch.full((3, 5), float(rank + 1), requires_grad=True)
    ptr = t.data_ptr()
    assert sc.allreduce(t, op="sum") is t and t.data_ptr() == ptr
    assert (t == size * (size + 1) / 2).all()
    b = torch.arange(7, dtype=torch.int64) * (rank + 1)
    sc.broadcast(b, root=1)
    assert (b == 2 * torch.arange(7)).all()
    g = sc.allgather(torch.tensor([rank, rank], dtype=torch.float16))
    assert torch.is_tensor(g) and g.tolist() == [k for k in range(size)
                                                 for _ in range(2)]
    h = torch.full((size * 2,), float(rank), dtype=torch.float64)
    part = sc.reduce_scatter(h, op="mean")
    assert part.dtype == torch.float64 and (part == (size - 1) / 2).all()


def optimizer_state(rank, size):
    """broadcast_optimizer_state: Adam's moments and step, rank 0's
    everywhere after a step on gradients that differ by rank."""
    net = torch.nn.Linear(4, 2)
    opt = torch.optim.Adam(net.parameters(), lr=0.1)
    for p in net.parameters():
        p.grad = torch.full_like(p, float(rank + 1))
    opt.step()
    st.broadcast_optimizer_state(opt, root_rank=0)
    for state in opt.state_dict()["state"].values():
        for v in state.values():
            if torch.is_tensor(v):
                every = sc.allgather(v.reshape(1, -1)).reshape(size, -1)
                assert (every == every[0]).all(), "optimizer state differs"
    exp_avg = opt.state[net.weight]["exp_avg"]
    assert torch.allclose(exp_avg, torch.full_like(exp_avg, 0.1))  # rank 0's


def strata_run(x, y, compression=None, overlap=None):
    net = model(seed=sc.rank())   # rank 0: the reference's seed
    st.broadcast_parameters(net.state_dict(), root_rank=0)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    opt = st.DistributedOptimizer(opt, net.named_parameters(),
                                  compression=compression, bucket_bytes=1024,
                                  overlap=overlap)
    assert len(opt._strata.buckets) > 2, len(opt._strata.buckets)
    state = train(net, opt, sc.rank(), sc.size(), x, y)
    same_on_every_rank(state)
    return state


def ddp_run(x, y, port, rank, size):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%s" % port,
                            rank=rank, world_size=size)
    net = model(seed=0)
    ddp = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    state = train(ddp, opt, rank, size, x, y)
    dist.destroy_process_group()
    return {k[len("module."):] if k.startswith("module.") else k: v
            for k, v in state.items()}


def main():
    out, port = sys.argv[1], sys.argv[2]
    x, y = data()
    runs = {}
    comm = sc.init()
    rank, size = comm.rank, comm.size
    tensors(rank, size)
    optimizer_state(rank, size)
    assert comm.hosts == 1
    runs["strata"] = strata_run(x, y, overlap=True)  # buckets in backward
    sc.shutdown()
    import torch.distributed as dist
    if dist.is_available() and dist.is_gloo_available():
        runs["ddp"] = ddp_run(x, y, port, rank, size)
    sc.init(compression="fp16")
    runs["fp16"] = strata_run(x, y, compression="fp16")  # at step()
    if sc.rank() == 0:
        for way, state in runs.items():
            np.savez(os.path.join(out, way + ".npz"), **state)
    sc.shutdown()
    print("torch job: %s done" % ", ".join(runs), flush=True)


if __name__ == "__main__":
    main()
