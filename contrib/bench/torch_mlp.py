#!/usr/bin/env python3
"""PyTorch anchor for the strata training benchmark.

Trains the same MLP as strata's default job on the same Fashion-MNIST files:
Linear 784->128, ReLU, Linear 128->10, Glorot-uniform weights and zero biases
(Keras' defaults), mean cross-entropy, Adam(lr=1e-3, eps=1e-7 as in Keras),
pixels/255, a fresh shuffle every epoch, the last partial batch dropped
(steps per epoch = floor(60000 / batch)), evaluation on the 10k test set after
every epoch.

Modes:
  --mode single --threads N   one process, torch.set_num_threads(N); GEMMs go
                              to OpenBLAS with --blas-threads M threads
                              (default M = N). When N or M > 1,
                              OMP_WAIT_POLICY defaults to PASSIVE: with
                              Debian's torch (OpenMP) + OpenBLAS (pthreads)
                              both spinning on 2 cores, 2+2 threads ran 2-4x
                              slower than 1 thread here.
  --mode ddp --procs 2        DistributedDataParallel, gloo backend on
                              127.0.0.1 (free port), each process 1 thread and
                              1/procs of the global batch; every process draws
                              the same permutation and takes its slice of each
                              global batch, as strata's mirrored strategy does

Output: one JSON line per epoch on stdout with strata's metrics-CSV fields
(epoch, steps, loss, accuracy, val_loss, val_accuracy, seconds,
samples_per_s) plus a few descriptive ones. `seconds` is the wall time of the
epoch's training steps only (no evaluation). With --max-steps K (< steps per
epoch) each epoch trains only its first K steps; `seconds` is then the measured
time scaled to a whole epoch (measured * steps_per_epoch / K, marked
"extrapolated": true) and samples_per_s = K * batch / measured; the losses and
accuracies are those of the partial epoch. In ddp mode the launcher finally
prints {"rss_mib": [...]} with each worker's peak RSS (ru_maxrss from wait4).

Only the launcher part runs before torch is imported, so the ddp launcher
itself stays small and the thread variables take effect.
"""

import argparse
import gzip
import json
import os
import socket
import struct
import subprocess
import sys
import time

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch", type=int, default=32, help="global batch")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--mode", choices=("single", "ddp", "ddp-worker"),
                   default="single")
    p.add_argument("--threads", type=int, default=1,
                   help="intra-op threads (single mode; ddp workers use 1)")
    p.add_argument("--blas-threads", type=int, default=0,
                   help="OpenBLAS threads (single mode; default: --threads)")
    p.add_argument("--procs", type=int, default=2, help="ddp processes")
    p.add_argument("--max-steps", type=int, default=0,
                   help="train only this many steps per epoch and "
                        "extrapolate the epoch time (0: whole epochs)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--data", default=DEFAULT_DATA)
    p.add_argument("--no-eval", action="store_true",
                   help="skip the test-set evaluation (test_* become null)")
    # internal, set by the ddp launcher
    p.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.epochs < 1 or a.batch < 1 or a.threads < 1 or a.procs < 1:
        p.error("epochs, batch, threads and procs must be >= 1")
    if a.blas_threads == 0:
        a.blas_threads = a.threads
    if a.blas_threads < 1:
        p.error("--blas-threads must be >= 1")
    if a.max_steps < 0:
        p.error("--max-steps must be >= 0")
    if a.mode != "single" and a.batch % a.procs != 0:
        p.error("--batch %d is not divisible by --procs %d"
                % (a.batch, a.procs))
    return a


def pin_threads(n, blas):
    """Must run before `import torch` (OpenBLAS reads its variable at load)."""
    os.environ["OMP_NUM_THREADS"] = str(n)
    os.environ["MKL_NUM_THREADS"] = str(n)
    os.environ["OPENBLAS_NUM_THREADS"] = str(blas)
    if n > 1 or blas > 1:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


# ---- IDX (+gzip) reader -------------------------------------------------

def read_idx(path):
    """Return (dims, raw bytes) of an unsigned-byte IDX file, gzip or not."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4:
        raise ValueError("%s: too short for an IDX header" % path)
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08 or ndim < 1:
        raise ValueError("%s: not an unsigned-byte IDX file (magic %s)"
                         % (path, data[:4].hex()))
    hdr = 4 + 4 * ndim
    dims = struct.unpack(">%dI" % ndim, data[4:hdr])
    count = 1
    for d in dims:
        count *= d
    if len(data) - hdr != count:
        raise ValueError("%s: %d data bytes, header says %d"
                         % (path, len(data) - hdr, count))
    return dims, data[hdr:]


def find_file(d, stem):
    for name in (stem + ".gz", stem):
        path = os.path.join(d, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError("%s: neither %s.gz nor %s" % (d, stem, stem))


def load_split(torch, d, prefix):
    idims, ibytes = read_idx(find_file(d, prefix + "-images-idx3-ubyte"))
    ldims, lbytes = read_idx(find_file(d, prefix + "-labels-idx1-ubyte"))
    if len(idims) != 3 or len(ldims) != 1 or idims[0] != ldims[0]:
        raise ValueError("%s/%s: images %s and labels %s do not match"
                         % (d, prefix, idims, ldims))
    n = idims[0]
    x = torch.frombuffer(bytearray(ibytes), dtype=torch.uint8)
    x = x.reshape(n, idims[1] * idims[2]).to(torch.float32).div_(255.0)
    y = torch.frombuffer(bytearray(lbytes), dtype=torch.uint8).to(torch.int64)
    return x, y


# ---- training -----------------------------------------------------------

def build_model(torch, in_dim, seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(in_dim, 128),
                                torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    for m in model:
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight)
            torch.nn.init.zeros_(m.bias)
    return model


def evaluate(torch, model, x, y):
    F = torch.nn.functional
    with torch.no_grad():
        logits = model(x)
        loss = F.cross_entropy(logits, y, reduction="sum").item()
        correct = (logits.argmax(1) == y).sum().item()
    return loss / len(y), correct / len(y)


def train(a, rank, world):
    import torch
    torch.set_num_threads(a.threads if world == 1 else 1)
    F = torch.nn.functional
    dist = None
    if world > 1:
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d"
                                % a.port, rank=rank, world_size=world)

    xtr, ytr = load_split(torch, a.data, "train")
    xte, yte = load_split(torch, a.data, "t10k")
    n = len(ytr)
    steps_per_epoch = n // a.batch
    if steps_per_epoch < 1:
        raise ValueError("batch %d > %d training samples" % (a.batch, n))
    steps = steps_per_epoch
    if 0 < a.max_steps < steps_per_epoch:
        steps = a.max_steps
    local = a.batch // world

    model = build_model(torch, xtr.shape[1], a.seed)
    net = model
    if dist is not None:
        # broadcasts rank 0's parameters; gradients are averaged (MEAN)
        net = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(net.parameters(), lr=a.lr, eps=1e-7)
    gen = torch.Generator().manual_seed(a.seed)  # same stream on every rank

    for epoch in range(1, a.epochs + 1):
        perm = torch.randperm(n, generator=gen)
        loss_sum = torch.zeros((), dtype=torch.float64)
        correct = torch.zeros((), dtype=torch.int64)
        net.train()
        t0 = time.perf_counter()
        for s in range(steps):
            lo = s * a.batch + rank * local
            idx = perm[lo:lo + local]
            xb, yb = xtr[idx], ytr[idx]
            opt.zero_grad(set_to_none=True)
            logits = net(xb)
            loss = F.cross_entropy(logits, yb)
            loss.backward()
            opt.step()
            loss_sum += loss.detach() * local
            correct += (logits.detach().argmax(1) == yb).sum()
        measured = time.perf_counter() - t0

        stats = torch.stack([loss_sum, correct.to(torch.float64)])
        if dist is not None:
            dist.all_reduce(stats)
        samples = steps * a.batch
        rec = {
            "epoch": epoch,
            "steps": steps,
            "loss": stats[0].item() / samples,
            "accuracy": stats[1].item() / samples,
            "val_loss": None,
            "val_accuracy": None,
            "seconds": measured * steps_per_epoch / steps,
            "samples_per_s": samples / measured,
        }
        if not a.no_eval:
            model.eval()
            rec["val_loss"], rec["val_accuracy"] = evaluate(torch, model,
                                                         xte, yte)
        rec.update({
            "measured_seconds": measured,
            "steps_per_epoch": steps_per_epoch,
            "extrapolated": steps != steps_per_epoch,
            "mode": "ddp" if world > 1 else "single",
            "procs": world,
            "threads": a.threads if world == 1 else 1,
            "blas_threads": a.blas_threads if world == 1 else 1,
            "batch": a.batch,
            "seed": a.seed,
            "torch": torch.__version__,
        })
        if rank == 0:
            print(json.dumps(rec), flush=True)
    if dist is not None:
        dist.destroy_process_group()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_ddp(a, argv, script=None):
    """Start a.procs workers of this script (or of `script`, which takes the
    same --mode/--rank/--port options) and collect their peak RSS."""
    env = dict(os.environ)
    env["MASTER_ADDR"] = "127.0.0.1"
    env["MASTER_PORT"] = str(free_port())
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # stay on loopback
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    procs = {}
    for r in range(a.procs):
        cmd = [sys.executable, script or os.path.abspath(__file__)] + argv + [
            "--mode", "ddp-worker", "--rank", str(r),
            "--port", env["MASTER_PORT"]]
        procs[subprocess.Popen(cmd, env=env).pid] = r
    rss = [0] * a.procs
    rc = 0
    while procs:
        pid, status, ru = os.wait4(-1, 0)
        r = procs.pop(pid, None)
        if r is None:
            continue
        rss[r] = ru.ru_maxrss / 1024.0  # KiB -> MiB
        code = os.waitstatus_to_exitcode(status)
        if code != 0 and rc == 0:
            rc = code if code > 0 else 128 - code
            for other in procs:  # a dead rank would hang the others
                try:
                    os.kill(other, 15)
                except ProcessLookupError:
                    pass
    print(json.dumps({"rss_mib": rss, "rss_max_mib": max(rss),
                      "rss_sum_mib": sum(rss)}), flush=True)
    return rc


def main(argv):
    a = parse_args(argv)
    if a.mode == "ddp":
        return launch_ddp(a, [x for x in argv])
    if a.mode == "ddp-worker":
        pin_threads(1, 1)
        train(a, a.rank, a.procs)
        return 0
    pin_threads(a.threads, a.blas_threads)
    train(a, 0, 1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
