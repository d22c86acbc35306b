#!/usr/bin/python3
"""gloo anchor of the all-reduce benchmark: torch.distributed, backend gloo.

    gloo_allreduce.py -n N BYTES...

Starts N processes on this host (TCP rendezvous on 127.0.0.1), each times
dist.all_reduce (float32, SUM, in place) for the sizes given with the same
warm-up and iteration counts as the C programs (bench_iters.h). The time
per call is the slowest rank's mean. Rank 0 prints one line per size:
"RESULT gloo <n> <bytes> <seconds per call> <iterations>".
"""
import argparse
import os
import socket
import sys
import time


def bench_iters(nbytes, n):
    """bench_iters.h, line for line."""
    est = 30e-6 + 1e-9 * nbytes * (n - 1 if n > 1 else 1)
    it = int(0.25 / est)
    it = max(5, min(2000, it))
    return it, max(2, it // 5)


def rank_main(rank, n, port, sizes):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=n)
    for nbytes in sizes:
        buf = torch.ones(nbytes // 4, dtype=torch.float32)
        iters, warm = bench_iters(nbytes, n)
        for _ in range(warm):
            dist.all_reduce(buf)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(buf)
        t = torch.tensor([(time.perf_counter() - t0) / iters],
                         dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        if rank == 0:
            print(f"RESULT gloo {n} {nbytes} {t.item():.9f} {iters}",
                  flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=2)
    ap.add_argument("sizes", type=int, nargs="+")
    a = ap.parse_args()
    port = free_port()
    pids = []
    for r in range(a.n):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                rank_main(r, a.n, port, a.sizes)
            except Exception as e:  # report, never hang the others silently
                print(f"gloo_allreduce[{r}]: {e}", file=sys.stderr)
                code = 1
            sys.stdout.flush()
            os._exit(code)
        pids.append(pid)
    bad = 0
    for pid in pids:
        _, st = os.waitpid(pid, 0)
        bad |= st != 0
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
