#!/usr/bin/env python3
"""PyTorch anchor of the strata CNN benchmark.

Builds the network of a strata [model] layers string (conv2d, maxpool2d,
flatten, dropout, dense; NHWC in strata, NCHW or channels_last here, which
is PyTorch's business) and trains it on the same Fashion-MNIST IDX files:
pixels / 255, Glorot-uniform weights and zero biases (Keras' defaults; for a
conv kernel fan_in = k*k*in, fan_out = k*k*out in both), mean softmax
cross-entropy on the last layer's logits (a final "softmax" activation is
that loss's, as in Keras), Adam(lr=1e-3, eps=1e-7 as in Keras), dropout in
training only, a fresh shuffle every epoch, the last partial batch dropped.

Two ways to run:
  speed     --steps S [--warmup W] [--limit-train N]: train W + S steps over
            the first N training samples (all by default; cycling through
            epochs, reshuffled each time) and time the last S steps; prints
            one JSON line {"samples_per_s", "seconds", "steps", ...}.
  accuracy  --steps 0 --epochs E: whole epochs; one JSON line per epoch with
            strata's metrics-CSV fields (epoch, steps, loss, accuracy,
            val_loss, val_accuracy, seconds, samples_per_s).

--model resnet instead of --layers: the ResNet-14 of etc/resnet.ini, built
by contrib/bench/accuracy/torch_resnet.py (the accuracy anchor; one
definition for both): BatchNorm after every convolution, momentum 0.1
(Keras's 0.9), epsilon 1e-3. Under DDP its BatchNorm normalises with each
process's half of the batch: torch 1.13's SyncBatchNorm refuses CPU tensors
(strata's, and TF's synchronized=True, use the global batch).

Thread settings (as torch_mlp.py): --mode single --threads N [--blas-threads
M]; --mode ddp --procs 2: DistributedDataParallel with gloo on 127.0.0.1,
each process 1 thread and 1/procs of the global batch, every process
drawing the same permutation and taking its slice of each global batch. The
ddp launcher finally prints {"rss_mib": [...], ...}: each worker's peak RSS.
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import torch_mlp  # noqa: E402  (contrib/bench/torch_mlp.py: stdlib only)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "accuracy"))
import torch_resnet  # noqa: E402  (the ResNet anchor; torch imported late)

DEFAULT_DATA = torch_mlp.DEFAULT_DATA
KERAS_CNN = ("conv2d 32 3 relu, maxpool2d 2, conv2d 64 3 relu, maxpool2d 2, "
             "flatten, dropout 0.5, dense 10 softmax")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", default=KERAS_CNN,
                   help="strata [model] layers string (default: the Keras "
                        "MNIST CNN)")
    p.add_argument("--model", choices=("layers", "resnet"),
                   default="layers",
                   help="layers: the --layers string; resnet: etc/resnet.ini"
                        "'s ResNet-14 (torch_resnet.py)")
    p.add_argument("--batch", type=int, default=32, help="global batch")
    p.add_argument("--steps", type=int, default=0,
                   help="speed mode: time this many steps (0: accuracy mode, "
                        "whole epochs)")
    p.add_argument("--warmup", type=int, default=10,
                   help="speed mode: untimed steps first (%(default)s)")
    p.add_argument("--epochs", type=int, default=5,
                   help="accuracy mode: epochs (%(default)s)")
    p.add_argument("--limit-train", type=int, default=0,
                   help="use only the first N training samples (0: all)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--mode", choices=("single", "ddp", "ddp-worker"),
                   default="single")
    p.add_argument("--threads", type=int, default=1,
                   help="intra-op threads (single mode; ddp workers use 1)")
    p.add_argument("--blas-threads", type=int, default=0,
                   help="OpenBLAS threads (single mode; default: --threads)")
    p.add_argument("--interop", type=int, default=0,
                   help="torch.set_num_interop_threads (0: torch's default)")
    p.add_argument("--procs", type=int, default=2, help="ddp processes")
    p.add_argument("--memory-format", choices=("nchw", "channels_last"),
                   default="nchw")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--data", default=DEFAULT_DATA)
    # internal, set by the ddp launcher
    p.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.epochs < 1 or a.batch < 1 or a.threads < 1 or a.procs < 1:
        p.error("epochs, batch, threads and procs must be >= 1")
    if a.steps < 0 or a.warmup < 0 or a.limit_train < 0 or a.interop < 0:
        p.error("--steps, --warmup, --limit-train, --interop must be >= 0")
    if a.blas_threads == 0:
        a.blas_threads = a.threads
    if a.mode != "single" and a.batch % a.procs != 0:
        p.error("--batch %d is not divisible by --procs %d"
                % (a.batch, a.procs))
    try:
        if a.model == "layers":
            parse_layers(a.layers)  # fail early on a bad string
    except ValueError as e:
        p.error("--layers: %s" % e)
    return a


def parse_layers(spec):
    """[(kind, dict)] of a strata layers string; raises ValueError."""
    out = []
    for raw in spec.split(","):
        w = raw.split()
        if not w:
            raise ValueError("empty layer in %r" % spec)
        kind, opts = w[0], {}
        rest = w[1:]
        kv = [x for x in rest if "=" in x]
        pos = [x for x in rest if "=" not in x]
        for x in kv:
            k, v = x.split("=", 1)
            opts[k] = v
        if kind == "conv2d":
            if len(pos) < 2:
                raise ValueError("conv2d FILTERS KERNEL [ACT]: %r" % raw)
            opts.update(filters=int(pos[0]), kernel=int(pos[1]),
                        act=pos[2] if len(pos) > 2 else "none")
        elif kind == "maxpool2d":
            opts.update(pool=int(pos[0]))
        elif kind == "dense":
            opts.update(units=int(pos[0]),
                        act=pos[1] if len(pos) > 1 else "none")
        elif kind == "dropout":
            opts.update(rate=float(pos[0]))
        elif kind != "flatten":
            raise ValueError("unknown layer %r" % kind)
        out.append((kind, opts))
    return out


def build_model(torch, spec, seed, in_hwc=(28, 28, 1)):
    """nn.Sequential of the layers (NCHW inside); Glorot weights, 0 bias."""
    nn = torch.nn
    torch.manual_seed(seed)
    layers = parse_layers(spec)
    h, w, c = in_hwc
    flat = None
    mods = []
    for i, (kind, o) in enumerate(layers):
        last = i == len(layers) - 1
        if kind == "conv2d":
            s = int(o.get("stride", 1))
            pad = o.get("padding", "valid")
            k = o["kernel"]
            if pad == "same":
                if s != 1:
                    raise ValueError("padding=same with stride > 1")
                mods.append(nn.Conv2d(c, o["filters"], k, stride=1,
                                      padding="same"))
            else:
                mods.append(nn.Conv2d(c, o["filters"], k, stride=s))
                h, w = (h - k) // s + 1, (w - k) // s + 1
            c = o["filters"]
            act = o["act"]
        elif kind == "maxpool2d":
            p = o["pool"]
            s = int(o.get("stride", p))
            mods.append(nn.MaxPool2d(p, stride=s))
            h, w = (h - p) // s + 1, (w - p) // s + 1
            act = "none"
        elif kind == "flatten":
            mods.append(nn.Flatten())
            flat = h * w * c
            act = "none"
        elif kind == "dropout":
            mods.append(nn.Dropout(o["rate"]))
            act = "none"
        else:  # dense
            if flat is None:
                mods.append(nn.Flatten())
                flat = h * w * c
            mods.append(nn.Linear(flat, o["units"]))
            flat = o["units"]
            act = o["act"]
        if act == "relu":
            mods.append(nn.ReLU())
        elif act == "tanh":
            mods.append(nn.Tanh())
        elif act == "sigmoid":
            mods.append(nn.Sigmoid())
        elif act == "softmax" and not last:
            raise ValueError("softmax only on the last layer")
        elif act not in ("none", "softmax"):
            raise ValueError("unknown activation %r" % act)
    model = nn.Sequential(*mods)
    for m in model:
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)
    return model


def load_split(torch, d, prefix, limit=0):
    """(x [n,1,h,w] float32 / 255, y int64): only the first `limit` samples
    are converted (the raw file is read whole, then dropped)."""
    idims, ibytes = torch_mlp.read_idx(
        torch_mlp.find_file(d, prefix + "-images-idx3-ubyte"))
    ldims, lbytes = torch_mlp.read_idx(
        torch_mlp.find_file(d, prefix + "-labels-idx1-ubyte"))
    if len(idims) != 3 or len(ldims) != 1 or idims[0] != ldims[0]:
        raise ValueError("%s/%s: images %s and labels %s do not match"
                         % (d, prefix, idims, ldims))
    n = idims[0] if not limit else min(limit, idims[0])
    px = idims[1] * idims[2]
    x = torch.frombuffer(bytearray(ibytes[:n * px]), dtype=torch.uint8)
    del ibytes
    x = x.reshape(n, 1, idims[1], idims[2]).to(torch.float32).div_(255.0)
    y = torch.frombuffer(bytearray(lbytes[:n]), dtype=torch.uint8)
    return x, y.to(torch.int64)


def evaluate(torch, model, x, y, fmt):
    F = torch.nn.functional
    loss = correct = 0.0
    with torch.no_grad():
        for lo in range(0, len(y), 1000):
            xb = x[lo:lo + 1000].contiguous(memory_format=fmt)
            logits = model(xb)
            loss += F.cross_entropy(logits, y[lo:lo + 1000],
                                    reduction="sum").item()
            correct += (logits.argmax(1) == y[lo:lo + 1000]).sum().item()
    return loss / len(y), correct / len(y)


def train(a, rank, world):
    import torch
    torch.set_num_threads(a.threads if world == 1 else 1)
    if a.interop:
        torch.set_num_interop_threads(a.interop)
    F = torch.nn.functional
    dist = None
    if world > 1:
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d"
                                % a.port, rank=rank, world_size=world)
    fmt = (torch.channels_last if a.memory_format == "channels_last"
           else torch.contiguous_format)

    xtr, ytr = load_split(torch, a.data, "train", a.limit_train)
    n = len(ytr)
    steps_per_epoch = n // a.batch
    if steps_per_epoch < 1:
        raise ValueError("batch %d > %d training samples" % (a.batch, n))
    local = a.batch // world

    if a.model == "resnet":
        model = torch_resnet.build_resnet(torch, a.seed)
        torch_resnet.check_params(model)
    else:
        model = build_model(torch, a.layers, a.seed)
    model = model.to(memory_format=fmt)
    net = model
    if dist is not None:
        net = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(net.parameters(), lr=a.lr, eps=1e-7)
    gen = torch.Generator().manual_seed(a.seed)  # same stream on every rank
    common = {"mode": "ddp" if world > 1 else "single", "procs": world,
              "threads": a.threads if world == 1 else 1,
              "blas_threads": a.blas_threads if world == 1 else 1,
              "interop": a.interop, "memory_format": a.memory_format,
              "batch": a.batch, "seed": a.seed, "torch": torch.__version__,
              "model": a.model, "params": sum(p.numel()
                                              for p in model.parameters())}

    def step(idx):
        xb = xtr[idx].contiguous(memory_format=fmt)
        yb = ytr[idx]
        opt.zero_grad(set_to_none=True)
        logits = net(xb)
        loss = F.cross_entropy(logits, yb)
        loss.backward()
        opt.step()
        return loss.detach(), (logits.detach().argmax(1) == yb).sum()

    if a.steps > 0:  # speed
        net.train()
        total = a.warmup + a.steps
        perm, pos, t0 = None, steps_per_epoch, None
        for s in range(total):
            if s == a.warmup:
                t0 = time.perf_counter()
            if pos == steps_per_epoch:
                perm, pos = torch.randperm(n, generator=gen), 0
            lo = pos * a.batch + rank * local
            step(perm[lo:lo + local])
            pos += 1
        measured = time.perf_counter() - t0
        rec = {"steps": a.steps, "warmup": a.warmup, "seconds": measured,
               "samples_per_s": a.steps * a.batch / measured,
               "limit_train": n}
        rec.update(common)
        if rank == 0:
            print(json.dumps(rec), flush=True)
    else:  # accuracy: whole epochs, evaluation after each
        xte, yte = load_split(torch, a.data, "t10k")
        for epoch in range(1, a.epochs + 1):
            perm = torch.randperm(n, generator=gen)
            loss_sum = torch.zeros((), dtype=torch.float64)
            correct = torch.zeros((), dtype=torch.int64)
            net.train()
            t0 = time.perf_counter()
            for s in range(steps_per_epoch):
                lo = s * a.batch + rank * local
                loss, corr = step(perm[lo:lo + local])
                loss_sum += loss * local
                correct += corr
            measured = time.perf_counter() - t0
            stats = torch.stack([loss_sum, correct.to(torch.float64)])
            if dist is not None:
                dist.all_reduce(stats)
            samples = steps_per_epoch * a.batch
            rec = {"epoch": epoch, "steps": steps_per_epoch,
                   "loss": stats[0].item() / samples,
                   "accuracy": stats[1].item() / samples,
                   "seconds": measured, "samples_per_s": samples / measured}
            model.eval()
            rec["val_loss"], rec["val_accuracy"] = evaluate(torch, model, xte,
                                                         yte, fmt)
            rec.update(common)
            if rank == 0:
                print(json.dumps(rec), flush=True)
    if dist is not None:
        dist.destroy_process_group()


def main(argv):
    a = parse_args(argv)
    if a.mode == "ddp":
        return torch_mlp.launch_ddp(a, list(argv), os.path.abspath(__file__))
    if a.mode == "ddp-worker":
        torch_mlp.pin_threads(1, 1)
        train(a, a.rank, a.procs)
        return 0
    torch_mlp.pin_threads(a.threads, a.blas_threads)
    train(a, 0, 1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
