"""strata.torch.DistributedOptimizer against PyTorch DDP over gloo: the
same model, data and SGD steps in the same processes, one after the other.

    strata launch -n 2 /usr/bin/python3 contrib/bench/torch_optimizer/bench.py

(the build tree's libstrata: STRATA_LIBRARY=build/lib/libstrata.so
PYTHONPATH=python; run.sh sets them). Every process trains on its part of
each global batch; rank 0 prints one row per way: milliseconds per step
(median of --rounds timed blocks of --steps steps, after a warm-up) and
samples per second. The model: an MLP 784 -> hidden -> hidden -> 10
(--hidden, default 1024: 1.8 M parameters, 7 MB of gradients a step)."""

import argparse
import socket
import statistics
import time

import numpy as np
import torch
import torch.distributed as dist

import strata.collectives as sc
import strata.torch as st


def args():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch", type=int, default=128, help="global batch")
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--bucket-bytes", type=int, default=1 << 20)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--overlap", choices=("auto", "on", "off"), default="auto",
                   help="DistributedOptimizer's overlap (auto: off on one "
                        "host)")
    p.add_argument("--port", type=int, default=0, help="gloo's (0: free)")
    return p.parse_args()


def model(hidden):
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(784, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, 10))


class HorovodStyle(torch.optim.Optimizer):
    """Horovod's DistributedOptimizer written over torch.distributed's gloo
    (Horovod itself does not install here): a hook on each parameter's
    gradient accumulator (as horovod/torch/optimizer.py registers them)
    puts the ready gradient into a fusion buffer of bucket_bytes in the
    order backward produces them; a full buffer goes out at once as an
    asynchronous all-reduce (Horovod's tensor fusion), the rest at step();
    step() waits for every one, averages and applies the wrapped SGD."""

    def __init__(self, opt, params, bucket_bytes):
        self.opt, self.size = opt, dist.get_world_size()
        self.params = [p for p in params if p.requires_grad]
        self.bucket_bytes, self.pending, self.works = bucket_bytes, [], []
        self.hooks = []
        for p in self.params:
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            acc.register_hook(lambda *_, p=p: self._ready(p))
            self.hooks.append(acc)   # the accumulator must stay alive

    def _ready(self, p):
        self.pending.append(p)
        if sum(q.numel() * 4 for q in self.pending) >= self.bucket_bytes:
            self._flush()

    def _flush(self):
        if not self.pending:
            return
        group, self.pending = self.pending, []
        flat = torch.cat([q.grad.reshape(-1) for q in group])
        self.works.append((dist.all_reduce(flat, async_op=True), flat, group))

    def zero_grad(self, set_to_none=False):
        self.opt.zero_grad(set_to_none=set_to_none)

    def step(self):
        self._flush()
        for work, flat, group in self.works:
            work.wait()
            flat /= self.size
            off = 0
            for q in group:
                n = q.numel()
                q.grad.copy_(flat[off:off + n].view_as(q.grad))
                off += n
        self.works = []
        self.opt.step()


def timed(a, net, opt, x, y, barrier):
    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    for _ in range(3):
        step()
    times = []
    for _ in range(a.rounds):
        barrier()
        t0 = time.perf_counter()
        for _ in range(a.steps):
            step()
        barrier()
        times.append((time.perf_counter() - t0) / a.steps)
    return statistics.median(times)


def main():
    a = args()
    torch.set_num_threads(a.threads)
    comm = sc.init()
    rank, size = comm.rank, comm.size
    per = a.batch // size
    rng = np.random.default_rng(rank)
    x = torch.from_numpy(rng.standard_normal((per, 784)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 10, per))
    rows = []

    net = model(a.hidden)
    opt = st.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.01),
                                  net.named_parameters(),
                                  bucket_bytes=a.bucket_bytes,
                                  overlap={"auto": None, "on": True,
                                           "off": False}[a.overlap])
    overlap = opt._strata.overlap
    rows.append(("strata DistributedOptimizer (%s, overlap %s)" % (
        comm.transport, "on" if overlap else "off"),
                 timed(a, net, opt, x, y, sc.barrier)))
    port = a.port
    if rank == 0 and not port:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    port = int(sc.broadcast(np.array([port], np.int64), root=0)[0])
    sc.shutdown()
    check = None

    if dist.is_available() and dist.is_gloo_available():
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                                rank=rank, world_size=size)
        net = model(a.hidden)
        ddp = torch.nn.parallel.DistributedDataParallel(
            net, bucket_cap_mb=a.bucket_bytes / 2**20)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        rows.append(("torch DDP (gloo)", timed(a, ddp, opt, x, y,
                                                dist.barrier)))
        net = model(a.hidden)
        opt = HorovodStyle(torch.optim.SGD(net.parameters(), lr=0.01),
                           net.parameters(), a.bucket_bytes)
        rows.append(("Horovod-style DistributedOptimizer (gloo)",
                     timed(a, net, opt, x, y, dist.barrier)))
        # the same steps from the same start: the anchor must match DDP
        num = sum(float((p - q).pow(2).sum()) for p, q in
                  zip(net.parameters(), ddp.module.parameters()))
        den = sum(float(q.pow(2).sum()) for q in ddp.module.parameters())
        check = "Horovod-style vs DDP after the same %d steps: relative " \
                "L2 %.1e" % (3 + a.rounds * a.steps, (num / den) ** 0.5)
        dist.destroy_process_group()
    if rank == 0:
        params = sum(p.numel() for p in net.parameters())
        print("%d processes x %d thread, global batch %d, %.1f M parameters, "
              "buckets %d KiB, %d steps x %d rounds" % (
                  size, a.threads, a.batch, params / 1e6,
                  a.bucket_bytes // 1024, a.steps, a.rounds))
        print("%-50s %10s %12s" % ("way", "ms/step", "samples/s"))
        for way, t in rows:
            print("%-50s %10.2f %12.0f" % (way, t * 1e3, a.batch / t))
        if check:
            print(check)


main()
