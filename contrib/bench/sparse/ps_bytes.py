#!/usr/bin/env python3
"""Bytes a ps job's worker pushes per step, its embedding table as rows
(wire version 6) against the dense gradient ([strategy.ps]
sparse_as_dense = true): bench.py's model (a table of V x 32, K ids per
sample, combiner=sum, batch 64), 2 ps tasks (the table split fixed:2),
1 worker, STEPS steps of sgd. The counts are the worker's and the ps
tasks' own end lines ("N gradient bytes pushed", "pushes applied (R with
rows), B gradient bytes"), payloads only (each message adds an 80-byte
header and the transport's framing).

usage: contrib/bench/sparse/ps_bytes.py [--build BUILD] [--vocab V] [--k K]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import make_job  # noqa: E402

STEPS = 100


def run(build, job, as_dense):
    cmd = [f"{build}/bin/strata", "launch", "--ps", "2", "--workers", "1",
           "--chief", "-c", job]
    for s in ["strategy.plugin=ps", "transport.plugin=zmq",
              "train.devices=cpu:0", "strategy.ps.partitioner=fixed:2",
              "train.batch_size=64", f"train.max_steps={STEPS}",
              "train.eval=false", "train.progress=none",
              "optimizer.name=sgd", "optimizer.lr=0.1",
              f"strategy.ps.sparse_as_dense={'true' if as_dense else 'false'}"]:
        cmd += ["--set", s]
    env = dict(os.environ,
               STRATA_PLUGIN_PATH=f"{build}/lib/strata/plugins")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env,
                       timeout=600)
    if r.returncode != 0:
        sys.exit(f"strata launch exited {r.returncode}:\n{r.stderr}")
    m = re.search(r"worker:0 ran (\d+) steps .*?, (\d+) gradient bytes "
                  r"pushed", r.stderr)
    rows = sum(int(x) for x in re.findall(r"pushes applied \((\d+) with rows",
                                          r.stderr))
    return int(m.group(1)), int(m.group(2)), rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--vocab", type=int, default=100000)
    ap.add_argument("--k", type=int, default=16)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    with tempfile.TemporaryDirectory() as d:
        job, _ = make_job(d, a.vocab, a.k, 64 * STEPS)
        print(f"table {a.vocab} x 32, {a.k} ids per sample, batch 64, "
              f"2 ps, 1 worker, {STEPS} steps of sgd")
        res = {}
        for as_dense in (True, False):
            steps, pushed, rows = run(build, job, as_dense)
            res[as_dense] = pushed / steps
            print(f"  {'dense' if as_dense else 'rows '}: "
                  f"{pushed / steps:12.0f} bytes pushed per step "
                  f"({rows} pushes with rows)")
        print(f"  rows / dense: {res[False] / res[True]:.4f}")


if __name__ == "__main__":
    main()
