#!/usr/bin/env python3
"""Embedding gradients as rows (all-gathered) against the dense all-reduce,
mirrored with 2 replicas and mwms with 2 workers (strata launch), at a few
table sizes and densities: the measurement behind the default of
[strategy.mirrored] / [strategy.mwms] sparse_threshold.

A table of V rows x D, a bag of K ids per sample (combiner=sum), global
batch 64 (32 per member). Density = the rows both members give together
(duplicates across members counted) / V, what the threshold compares.
Step ms and its reduce share ("comm") are the epoch line's of a run of
STEPS steps (the core's clocks, start-up excluded); reduce ms = step ms x
comm; the median of a few rounds. Bytes per member per step, from the
wire forms: dense ring all-reduce 2 (N-1)/N V D 4; rows N counts, then an
all-gather of (N-1)/N T (D + 2) 4 (T = rows of all members).

usage: contrib/bench/sparse/bench.py [--build BUILD] [--rounds R]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import re

import numpy as np

D = 32
GBATCH = 64
STEPS = 100
POINTS = [(20000, 4), (20000, 32), (20000, 128), (20000, 512),
          (100000, 16), (100000, 128), (100000, 512)]


def make_job(d, vocab, k, n):
    rng = np.random.default_rng(vocab * 7 + k)
    np.save(f"{d}/x.npy", rng.random((n, 4), dtype=np.float32))
    np.save(f"{d}/y.npy", rng.integers(0, 4, n).astype(np.int64))
    np.save(f"{d}/ids.npy", rng.integers(0, vocab, (n, k)).astype(np.int64))
    job = f"{d}/job.ini"
    with open(job, "w") as f:
        f.write(f"""[data]
dir = {d}
train_images = x.npy
train_labels = y.npy
train_ids = ids.npy
test_images = x.npy
test_labels = y.npy
test_ids = ids.npy
[graph]
emb = embedding vocab={vocab} dim={D} combiner=sum <- ids
feat = dense 4 tanh <- input
both = concat <- emb, feat
logits = dense 4
""")
    ids = np.load(f"{d}/ids.npy")
    half = GBATCH // 2
    rows = [len(np.unique(ids[s:s + half])) for s in range(0, n, half)]
    return job, sum(rows) / (len(rows) / 2) / vocab


def timed(strata, job, strategy, sparse):
    """(step ms, reduce ms) of one run."""
    common = ["--set", f"train.batch_size={GBATCH}", "--set",
              "train.eval=false", "--set", f"train.max_steps={STEPS}",
              "--set", "optimizer.name=adam"]
    if sparse:
        mode = ["--set", f"strategy.{strategy}.sparse_threshold=1000000"]
    else:
        mode = ["--set", f"strategy.{strategy}.sparse_as_dense=true"]
    if strategy == "mirrored":
        cmd = [strata, "train", "-c", job, "--set",
               "train.devices=cpu:0,cpu:1"] + common + mode
    else:
        cmd = [strata, "launch", "-n", "2", "-c", job, "--set",
               "strategy.plugin=mwms", "--set", "train.devices=cpu:0"] + \
            common + mode
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    m = re.search(r"([0-9.]+)ms/step .*comm: ([0-9]+)%", r.stdout)
    if r.returncode != 0 or not m:
        sys.exit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout}"
                 f"{r.stderr}")
    step = float(m.group(1))
    return step, step * float(m.group(2)) / 100.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    strata = os.path.join(a.build, "bin", "strata")
    print(f"D = {D}, global batch {GBATCH}, 2 members, {STEPS} steps; "
          f"median of {a.rounds} runs; ms per step (reduce part)")
    print(f"{'strategy':9} {'V':>7} {'K':>5} {'density':>8} "
          f"{'dense step':>10} {'rows step':>9} {'dense red':>9} "
          f"{'rows red':>8} {'red rows/dense':>14} "
          f"{'dense KB':>9} {'rows KB':>8}")
    with tempfile.TemporaryDirectory(prefix="strata-bench-sparse") as d:
        for vocab, k in POINTS:
            job, density = make_job(d, vocab, k, GBATCH * STEPS)
            t_rows = density * vocab
            dense_kb = 2 * 0.5 * vocab * D * 4 / 1024
            rows_kb = (2 * 4 + 0.5 * t_rows * (D + 2) * 4) / 1024
            for strategy in ("mirrored", "mwms"):
                step, red = {}, {}
                for _ in range(a.rounds):  # interleaved: drifts hit both
                    for sparse in (False, True):
                        t = timed(strata, job, strategy, sparse)
                        step.setdefault(sparse, []).append(t[0])
                        red.setdefault(sparse, []).append(t[1])
                st = {k2: statistics.median(v) for k2, v in step.items()}
                rd = {k2: statistics.median(v) for k2, v in red.items()}
                print(f"{strategy:9} {vocab:7} {k:5} {density:8.3f} "
                      f"{st[False]:10.2f} {st[True]:9.2f} {rd[False]:9.2f} "
                      f"{rd[True]:8.2f} "
                      f"{rd[True] / max(rd[False], 1e-9):14.2f} "
                      f"{dense_kb:9.0f} {rows_kb:8.0f}", flush=True)


if __name__ == "__main__":
    main()
