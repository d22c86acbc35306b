#!/usr/bin/env python3
"""PyTorch anchor of etc/resnet.ini: the same ResNet-14 trained with the same
recipe, for the accuracy target of issue 24 item 7 (strata's test accuracy
within 0.5 points of PyTorch's, and at least 92 %).

The model (the Keras functional definition in etc/resnet.ini's header, NCHW
here): a 3x3 stem of 16 filters, three stages of two residual blocks
(two 3x3 convolutions each, 16, 32 and 64 filters, padding 'same'), the
second and third stages entered with stride 2 and a 1x1 projection
shortcut of stride 2 (the other blocks' shortcuts are identities), BatchNorm after every convolution (Keras's momentum 0.9 = PyTorch's
momentum 0.1; epsilon 1e-3, Keras's and strata's default), ReLU after the
stem, inside each block and after each addition, global average pooling,
dense 10 (logits; the loss is mean softmax cross-entropy). Keras's default
initialisation: Glorot-uniform kernels (fan_in = k*k*in, fan_out = k*k*out,
as torch's xavier_uniform_ computes them), zero biases (every convolution
keeps its bias, as Keras's use_bias=True), BatchNorm gamma 1 and beta 0.
175 530 parameters trained, Keras's "Trainable params" and strata's total;
checked at start. --blocks 1 builds the ResNet-8 (78 090) that
etc/resnet.ini was until 2026-12-02, with the same initialisation order.

The recipe (etc/resnet.ini): Fashion-MNIST from the IDX files, pixels / 255
(strata's scaling, core/data/dataset.c: no mean or deviation); a seeded
10 % of the training set held out for validation (the last 10 % of a
seeded permutation; strata draws its own, so the samples differ, the
fraction does not); every epoch a fresh shuffle of the other 90 % and, per
sample, a horizontal flip with probability 1/2 and a random crop after 2
pixels of zero padding (shifts of -2..2 in each axis); global batch 128,
the last partial batch dropped (421 steps per epoch); Adam lr 1e-3,
epsilon 1e-7 (Keras's and strata's), cosine decay from 1e-3 to 0 over all
the steps of the run (8420 at 20 epochs: the ini's decay_steps), the
learning rate of step s being 1e-3 * (1 + cos(pi * s / decay)) / 2 from
s = 0; validation after every epoch; the test set once, at the end.

Prints the parameter count, one line per epoch and finally
    done: test accuracy 0.9234 (test loss ..., ...)
(the same form as strata's last line; contrib/bench/accuracy/run.sh reads
both). contrib/bench/cnn/torch_cnn.py imports build_resnet from here for
the speed benchmark.

    torch_resnet.py [--epochs 20] [--seed 42] [--threads 2]
                    [--max-steps N]   (smoke tests: at most N steps an epoch)
"""

import argparse
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import torch_mlp  # noqa: E402  (contrib/bench/torch_mlp.py: stdlib only)

DEFAULT_DATA = torch_mlp.DEFAULT_DATA
# blocks per stage -> (Keras's "Trainable params" = strata's total, the
# moving means and variances of the BatchNorms): ResNet-8 (9 BatchNorms),
# ResNet-14 (15)
COUNTS = {1: (78090, 672), 2: (175530, 1120)}
TRAINABLE, BN_STATS = COUNTS[2]
BN_MOMENTUM = 0.1        # PyTorch's convention for Keras's momentum=0.9
BN_EPSILON = 1e-3        # Keras's and strata's batchnorm default
ADAM_EPSILON = 1e-7      # Keras's and strata's Adam default


def build_resnet(torch, seed=None, blocks=2):
    """The ResNet-14 of etc/resnet.ini as a torch.nn.Module (NCHW input
    [n, 1, 28, 28], logits [n, 10]); Keras's default initialisation. The
    generator is seeded with `seed` first when it is not None. blocks=1:
    ResNet-8, one residual block per stage."""
    nn = torch.nn
    F = torch.nn.functional
    if seed is not None:
        torch.manual_seed(seed)

    def bn(c):
        return nn.BatchNorm2d(c, eps=BN_EPSILON, momentum=BN_MOMENTUM)

    class Conv2dSame(nn.Conv2d):
        """Keras's padding='same': ceil(n / stride) outputs, the padding
        split with the extra pixel after (bottom, right), as strata's
        conv2d (core/model/layers/conv2d.c). For stride 2 on 28 x 28 that
        is (0, 1), where PyTorch's padding=1 would pad (1, 1)."""

        def forward(self, x):
            pads = []
            for n, k, s in zip(x.shape[-2:], self.kernel_size, self.stride):
                total = max((-(-n // s) - 1) * s + k - n, 0)
                pads.append((total // 2, total - total // 2))
            (t, b), (l, r) = pads
            if t == b and l == r:
                return F.conv2d(x, self.weight, self.bias, self.stride,
                                (t, l))
            return F.conv2d(F.pad(x, (l, r, t, b)), self.weight, self.bias,
                            self.stride)

    class Block(nn.Module):
        def __init__(self, cin, f, stride):
            super().__init__()
            self.c1 = Conv2dSame(cin, f, 3, stride=stride)
            self.bn1 = bn(f)
            self.c2 = Conv2dSame(f, f, 3)
            self.bn2 = bn(f)
            self.proj = None
            if stride != 1:   # 1x1, stride 2, 'valid' (Keras's default)
                self.proj = nn.Conv2d(cin, f, 1, stride=stride)
                self.pbn = bn(f)

        def forward(self, x):
            y = F.relu(self.bn1(self.c1(x)))
            y = self.bn2(self.c2(y))
            if self.proj is not None:
                x = self.pbn(self.proj(x))
            return F.relu(y + x)

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = Conv2dSame(1, 16, 3)
            self.stem_bn = bn(16)
            self.s1 = nn.Sequential(Block(16, 16, 1), *[
                Block(16, 16, 1) for _ in range(blocks - 1)])
            self.s2 = nn.Sequential(Block(16, 32, 2), *[
                Block(32, 32, 1) for _ in range(blocks - 1)])
            self.s3 = nn.Sequential(Block(32, 64, 2), *[
                Block(64, 64, 1) for _ in range(blocks - 1)])
            self.dense = nn.Linear(64, 10)

        def forward(self, x):
            x = F.relu(self.stem_bn(self.stem(x)))
            x = self.s3(self.s2(self.s1(x)))
            return self.dense(x.mean(dim=(2, 3)))

    model = ResNet()
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)
    return model


def count_params(model):
    """(trainable, BatchNorm moving statistics)."""
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    stats = sum(b.numel() for n, b in model.named_buffers()
                if n.endswith("running_mean") or n.endswith("running_var"))
    return trainable, stats


def check_params(model, blocks=2):
    trainable, stats = count_params(model)
    TRAINABLE, BN_STATS = COUNTS[blocks]
    if trainable != TRAINABLE or stats != BN_STATS:
        raise SystemExit("torch_resnet: the model has %d trainable parameters "
                         "and %d BatchNorm statistics, expected %d and %d "
                         "(Keras's Trainable params of etc/resnet.ini's model)"
                         % (trainable, stats, TRAINABLE, BN_STATS))
    return trainable, stats


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--seed", type=int, default=42,
                   help="initialisation, split, shuffles and augmentation "
                        "(%(default)s: etc/resnet.ini's train.seed)")
    p.add_argument("--threads", type=int, default=2,
                   help="torch.set_num_threads and OpenBLAS threads "
                        "(%(default)s)")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--blocks", type=int, default=2, choices=sorted(COUNTS),
                   help="residual blocks per stage (1: ResNet-8, "
                        "2: ResNet-14)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--decay-steps", type=int, default=0,
                   help="cosine decay to 0 over this many steps (default 0: "
                        "every step of the run, 8420 at 20 epochs)")
    p.add_argument("--validation-split", type=float, default=0.1)
    p.add_argument("--crop-padding", type=int, default=2)
    p.add_argument("--no-flip", action="store_true")
    p.add_argument("--max-steps", type=int, default=0,
                   help="smoke tests: at most N steps an epoch (0: all)")
    p.add_argument("--limit-train", type=int, default=0,
                   help="use only the first N training samples, before the "
                        "split (as strata's data.limit_train; 0: all)")
    p.add_argument("--data", default=DEFAULT_DATA)
    a = p.parse_args(argv)
    if a.epochs < 1 or a.batch < 1 or a.threads < 1:
        p.error("--epochs, --batch and --threads must be >= 1")
    if a.max_steps < 0 or a.limit_train < 0 or a.decay_steps < 0 \
            or a.crop_padding < 0:
        p.error("--max-steps, --limit-train, --decay-steps and "
                "--crop-padding must be >= 0")
    if not 0.0 <= a.validation_split < 1.0:
        p.error("--validation-split: a fraction in [0, 1)")
    return a


def load_split(torch, d, prefix, limit=0):
    """(uint8 images [n, 1, 28, 28], int64 labels); scaled per batch."""
    idims, ibytes = torch_mlp.read_idx(
        torch_mlp.find_file(d, prefix + "-images-idx3-ubyte"))
    ldims, lbytes = torch_mlp.read_idx(
        torch_mlp.find_file(d, prefix + "-labels-idx1-ubyte"))
    if len(idims) != 3 or len(ldims) != 1 or idims[0] != ldims[0]:
        raise SystemExit("torch_resnet: %s/%s: images %s and labels %s do "
                         "not match" % (d, prefix, idims, ldims))
    n = idims[0] if not limit else min(limit, idims[0])
    px = idims[1] * idims[2]
    x = torch.frombuffer(bytearray(ibytes[:n * px]), dtype=torch.uint8)
    x = x.reshape(n, 1, idims[1], idims[2]).clone()
    y = torch.frombuffer(bytearray(lbytes[:n]), dtype=torch.uint8)
    return x, y.to(torch.int64)


def augment(torch, x, pad, flip, gen):
    """Random crops after `pad` pixels of zero padding and random
    horizontal flips of a float batch [n, 1, h, w]."""
    n, _, h, w = x.shape
    if pad:
        xp = torch.nn.functional.pad(x, (pad, pad, pad, pad))
        dy = torch.randint(0, 2 * pad + 1, (n,), generator=gen)
        dx = torch.randint(0, 2 * pad + 1, (n,), generator=gen)
        rows = (dy[:, None] + torch.arange(h))[:, :, None]      # n, h, 1
        cols = (dx[:, None] + torch.arange(w))[:, None, :]      # n, 1, w
        x = xp[torch.arange(n)[:, None, None], 0, rows, cols].unsqueeze(1)
    if flip:
        f = torch.rand(n, generator=gen) < 0.5
        x = torch.where(f[:, None, None, None], x.flip(3), x)
    return x


def evaluate(torch, model, x, y):
    F = torch.nn.functional
    loss = correct = 0.0
    model.eval()
    with torch.no_grad():
        for lo in range(0, len(y), 1000):
            xb = x[lo:lo + 1000].to(torch.float32).div_(255.0)
            logits = model(xb)
            yb = y[lo:lo + 1000]
            loss += F.cross_entropy(logits, yb, reduction="sum").item()
            correct += (logits.argmax(1) == yb).sum().item()
    return loss / len(y), correct / len(y)


def main(argv):
    a = parse_args(argv)
    torch_mlp.pin_threads(a.threads, a.threads)   # before importing torch
    import torch
    torch.set_num_threads(a.threads)
    F = torch.nn.functional
    t_start = time.perf_counter()

    x, y = load_split(torch, a.data, "train", a.limit_train)
    n = len(y)
    gen = torch.Generator().manual_seed(a.seed)
    k = int(n * a.validation_split + 0.5) if a.validation_split else 0
    if a.validation_split and not 1 <= k < n:
        raise SystemExit("torch_resnet: validation split %g of %d samples "
                         "leaves none on one side" % (a.validation_split, n))
    order = torch.randperm(n, generator=gen)
    keep, held = order[:n - k].sort().values, order[n - k:].sort().values
    xtr, ytr = x[keep], y[keep]
    xva, yva = x[held], y[held]
    del x, y
    ntr = len(ytr)
    steps = ntr // a.batch
    if steps < 1:
        raise SystemExit("torch_resnet: batch %d > %d training samples"
                         % (a.batch, ntr))
    if a.max_steps:
        steps = min(steps, a.max_steps)
    decay = a.decay_steps or steps * a.epochs

    model = build_resnet(torch, a.seed, a.blocks)
    trainable, stats = check_params(model, a.blocks)
    print("model: ResNet-%d (etc/resnet.ini), %d parameters trained (%d "
          "with the %d BatchNorm moving statistics, Keras's Total params)"
          % (6 * a.blocks + 2, trainable, trainable + stats, stats),
          flush=True)
    print("data: %d training samples, %d held out for validation (seed %d), "
          "%d steps of %d an epoch, %d epochs; torch %s, %d threads"
          % (ntr, k, a.seed, steps, a.batch, a.epochs, torch.__version__,
             a.threads), flush=True)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr, eps=ADAM_EPSILON)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1.0 + math.cos(math.pi * min(s, decay)
                                             / decay)))
    aug = torch.Generator().manual_seed(a.seed + 0x6175676d)

    for epoch in range(1, a.epochs + 1):
        model.train()
        perm = torch.randperm(ntr, generator=gen)
        loss_sum = torch.zeros((), dtype=torch.float64)
        correct = torch.zeros((), dtype=torch.int64)
        lr_first = opt.param_groups[0]["lr"]
        t0 = time.perf_counter()
        for s in range(steps):
            idx = perm[s * a.batch:(s + 1) * a.batch]
            xb = xtr[idx].to(torch.float32).div_(255.0)
            xb = augment(torch, xb, a.crop_padding, not a.no_flip, aug)
            yb = ytr[idx]
            opt.zero_grad(set_to_none=True)
            logits = model(xb)
            loss = F.cross_entropy(logits, yb)
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += loss.detach() * len(idx)
            correct += (logits.detach().argmax(1) == yb).sum()
        secs = time.perf_counter() - t0
        samples = steps * a.batch
        line = ("epoch %d/%d: steps %d loss %.4f accuracy %.4f"
                % (epoch, a.epochs, steps, loss_sum.item() / samples,
                   correct.item() / samples))
        if k:
            vl, va = evaluate(torch, model, xva, yva)
            line += " val_loss %.4f val_accuracy %.4f" % (vl, va)
        line += (" lr %.3g seconds %.1f samples_per_s %.0f"
                 % (lr_first, secs, samples / secs))
        print(line, flush=True)

    xte, yte = load_split(torch, a.data, "t10k")
    tl, ta = evaluate(torch, model, xte, yte)
    print("done: test accuracy %.4f (test loss %.4f, %d epochs of %d steps, "
          "seed %d, %d parameters, %.0f s)"
          % (ta, tl, a.epochs, steps, a.seed, trainable,
             time.perf_counter() - t_start), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
