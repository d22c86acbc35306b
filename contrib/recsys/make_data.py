#!/usr/bin/env python3
"""Synthetic click logs for etc/recsys.ini: F categorical features whose ids
follow a power law (a few ids in most samples, a long tail seen once or
never, as in real click logs), D dense features, and a click label drawn
from a planted model, so that the AUC a trained model reaches measures
what it learned.

    make_data.py --out DIR --samples N [--test-samples M] [--features F]
                 [--vocab V] [--dense D] [--zipf S] [--seed SEED]

Writes into DIR (what etc/recsys.ini reads from its [data] dir):
    train_x.npy    float32 (N, D)  dense features, N(0, 1)
    train_ids.npy  int64 (N, F)    feature f's id plus f * V: the F
                                   features share one table of F * V rows,
                                   each owning a range of it (as FBGEMM's
                                   table-batched embeddings lay tables end
                                   to end), so one `embedding vocab=F*V`
                                   holds them all
    train_y.npy    float32 (N, 1)  click (1) or not (0)
    test_x.npy, test_ids.npy, test_y.npy   the same for M samples
    meta.json      the parameters, the click rate, `planted_auc`: the
                   test AUC of the planted logit itself, the best any
                   model can reach on this test set, and `seen_auc`: the
                   same with the weight of every row that no training
                   sample names at its mean (0), the best a model trained
                   on this training set can reach

The planted model: every row r of the table has a weight w[r] ~ N(0,
--id-scale^2); the dense features have weights u ~ N(0, 1/D); the logit
of a sample is
    b + sum_f w[ids[f]] + u . x + 0.5 * tanh(x0 * x1)
(the last term an interaction a linear model cannot see) with b chosen
for a click rate of 25 % (on a pilot draw); the label is Bernoulli(sigmoid(logit)).
Feature f's id of a sample is a rank drawn from a truncated power law
P(rank = k) ~ (k + 1)^-S over [0, V), mapped through a bijection of
[0, V) (id = (rank * A + f * C) mod V, A coprime to V) so that the popular
ids spread over the table instead of sitting at its start (what a row
partitioner would otherwise see). Deterministic for a seed; memory is
O(F * V) for the weights plus one chunk of samples, so V of tens of
millions and N of hundreds of millions fit (files are written through
memory maps, a chunk at a time).
"""

import argparse
import json
import math
import os
import sys

import numpy as np

CHUNK = 1 << 20


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="directory to write")
    p.add_argument("--samples", type=int, required=True,
                   help="training samples")
    p.add_argument("--test-samples", type=int, default=0,
                   help="test samples (default: a tenth of --samples, at "
                        "least 1000)")
    p.add_argument("--features", type=int, default=4,
                   help="categorical features (%(default)s)")
    p.add_argument("--vocab", type=int, default=50000,
                   help="ids per categorical feature (%(default)s): the "
                        "table has features x vocab rows")
    p.add_argument("--dense", type=int, default=8,
                   help="dense features (%(default)s)")
    p.add_argument("--zipf", type=float, default=1.1,
                   help="power-law exponent S of the id ranks (%(default)s)")
    p.add_argument("--id-scale", type=float, default=0.6,
                   help="standard deviation of a row's planted weight "
                        "(%(default)s)")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    if a.test_samples == 0:
        a.test_samples = max(1000, a.samples // 10)
    if a.samples < 1 or a.test_samples < 1:
        p.error("--samples and --test-samples must be at least 1")
    if a.features < 1 or a.dense < 2 or a.vocab < 2:
        p.error("--features >= 1, --dense >= 2 and --vocab >= 2")
    if a.features * a.vocab >= 2 ** 62:
        p.error("--features x --vocab too large for int64 ids")
    if not a.zipf > 1.0:
        p.error("--zipf must be above 1 (a normalisable power law)")
    return a


def ranks(rng, n, vocab, s):
    """n ranks in [0, vocab) with P(k) ~ (k + 1)^-s: the inverse CDF of
    the continuous power law on [1, vocab + 1), floored."""
    u = rng.random(n)
    top = (vocab + 1.0) ** (1.0 - s)
    k = np.floor((1.0 + u * (top - 1.0)) ** (1.0 / (1.0 - s))) - 1.0
    return np.clip(k, 0, vocab - 1).astype(np.int64)


def multiplier(vocab):
    """An odd multiplier coprime to vocab near vocab * golden ratio."""
    m = int(vocab * 0.6180339887) | 1
    while math.gcd(m, vocab) != 1:
        m += 2
    return m


def draw(a, rng, m, w, u):
    """m samples: dense features, ids and the planted logit without its
    bias."""
    mul = multiplier(a.vocab)
    x = rng.standard_normal((m, a.dense)).astype(np.float32)
    ids = np.empty((m, a.features), np.int64)
    z = x.astype(np.float64) @ u + 0.5 * np.tanh(
        x[:, 0].astype(np.float64) * x[:, 1])
    for f in range(a.features):
        r = ranks(rng, m, a.vocab, a.zipf)
        ids[:, f] = (r * mul + f * 7919) % a.vocab + f * a.vocab
        z += w[ids[:, f]]
    return x, ids, z


def bias_for(z, rate):
    """b with mean(sigmoid(b + z)) = rate (bisection: monotone in b)."""
    lo, hi = -30.0, 30.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if np.mean(1.0 / (1.0 + np.exp(-(mid + z)))) < rate:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def write_set(a, rng, prefix, n, w, u, bias, seen=None):
    """Writes n samples as prefix_{x,ids,y}.npy; returns their (logits,
    labels). Marks in `seen` the table rows they name."""
    fmt = np.lib.format
    x_f = fmt.open_memmap(os.path.join(a.out, prefix + "_x.npy"), "w+",
                          np.float32, (n, a.dense))
    i_f = fmt.open_memmap(os.path.join(a.out, prefix + "_ids.npy"), "w+",
                          np.int64, (n, a.features))
    y_f = fmt.open_memmap(os.path.join(a.out, prefix + "_y.npy"), "w+",
                          np.float32, (n, 1))
    logits = np.empty(n, np.float64)
    labels = np.empty(n, np.float32)
    for lo in range(0, n, CHUNK):
        m = min(CHUNK, n - lo)
        x, ids, z = draw(a, rng, m, w, u)
        z += bias
        if seen is not None:
            seen[ids.ravel()] = True
        y = (rng.random(m) < 1.0 / (1.0 + np.exp(-z))).astype(np.float32)
        x_f[lo:lo + m] = x
        i_f[lo:lo + m] = ids
        y_f[lo:lo + m, 0] = y
        logits[lo:lo + m] = z
        labels[lo:lo + m] = y
    for f in (x_f, i_f, y_f):
        f.flush()
    del x_f, i_f, y_f
    return logits, labels


def auc(score, label):
    """The ROC AUC by ranks (Mann-Whitney), tied scores at their mean
    rank."""
    _, inv, counts = np.unique(score, return_inverse=True,
                               return_counts=True)
    ends = np.cumsum(counts).astype(np.float64)
    rank = ((ends - counts + 1 + ends) / 2.0)[inv]
    pos = label >= 0.5
    npos, nneg = int(pos.sum()), int((~pos).sum())
    if npos == 0 or nneg == 0:
        return float("nan")
    return float((rank[pos].sum() - npos * (npos + 1) / 2.0) / (npos * nneg))


def main(argv):
    a = parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    rows = a.features * a.vocab
    w = (rng.standard_normal(rows) * a.id_scale).astype(np.float64)
    u = rng.standard_normal(a.dense) / math.sqrt(a.dense)
    # a click rate of 25 %, from a pilot draw of its own generator
    _, _, z0 = draw(a, np.random.default_rng([a.seed, 1]), 100000, w, u)
    bias = bias_for(z0, 0.25)
    seen = np.zeros(rows, bool)
    write_set(a, rng, "train", a.samples, w, u, bias, seen)
    z, y = write_set(a, rng, "test", a.test_samples, w, u, bias)
    # What the training set can teach: the planted logit with the weight
    # of every row that no training sample names set to 0 (its mean).
    test_ids = np.load(os.path.join(a.out, "test_ids.npy"), mmap_mode="r")
    z_seen = z.copy()
    for lo in range(0, len(z), CHUNK):
        ids = np.asarray(test_ids[lo:lo + CHUNK])
        z_seen[lo:lo + len(ids)] -= np.where(seen[ids], 0.0,
                                             w[ids]).sum(axis=1)
    meta = {
        "samples": a.samples, "test_samples": a.test_samples,
        "features": a.features, "vocab": a.vocab, "table_rows": rows,
        "dense": a.dense, "zipf": a.zipf, "id_scale": a.id_scale,
        "seed": a.seed, "bias": bias, "test_click_rate": float(y.mean()),
        "planted_auc": auc(z, y),
        "seen_auc": auc(z_seen, y),
        "train_rows_seen": int(seen.sum()),
    }
    with open(os.path.join(a.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print("make_data: %d training and %d test samples in %s: %d features "
          "of %d ids (a table of %d rows, %d of them in the training set), "
          "%d dense; test click rate %.3f; test AUC of the planted logit "
          "%.4f, and %.4f with the rows the training set never names at "
          "their mean (the best a model trained on it can reach)"
          % (a.samples, a.test_samples, a.out, a.features, a.vocab, rows,
             meta["train_rows_seen"], a.dense, meta["test_click_rate"],
             meta["planted_auc"], meta["seen_auc"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
