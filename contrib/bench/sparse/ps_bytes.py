#!/usr/bin/env python3
"""Bytes a ps job's worker pushes and pulls per step, three ways: dense
([strategy.ps] sparse_as_dense = true: the whole gradient pushed, every
pull whole), its embedding table pushed as rows (wire version 6) with
whole pulls ([strategy.ps] pull_rows = false), and rows both ways (wire
version 7: each pull asks only for the rows the step's batch reads).
bench.py's model (a table of V x 32, K ids per sample, combiner=sum,
batch 64), 2 ps tasks (the table split fixed:2), 1 worker, STEPS steps
of sgd. The counts are the worker's and the ps tasks' own end lines ("N
gradient bytes pushed, ...), P parameter bytes pulled (R pulls with
rows)", "pushes applied (R with rows), B gradient bytes"), payloads only
(each message adds an 80-byte header and the transport's framing).

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


MODES = (("dense", ["strategy.ps.sparse_as_dense=true"]),
         ("rows, whole pulls", ["strategy.ps.pull_rows=false"]),
         ("rows both ways", []))


def run(build, job, extra):
    cmd = [f"{build}/bin/strata", "launch", "--ps", "2", "--workers", "1",
           "--chief", "-c", job]
    for s in ["strategy.plugin=ps", "transport.plugin=zmq",
              "train.devices=cpu:0", "strategy.ps.partitioner=fixed:2",
              "train.batch_size=64", f"train.max_steps={STEPS}",
              "train.eval=false", "train.progress=none",
              "optimizer.name=sgd", "optimizer.lr=0.1"] + extra:
        cmd += ["--set", s]
    env = dict(os.environ,
               STRATA_PLUGIN_PATH=f"{build}/lib/strata/plugins")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env,
                       timeout=600)
    if r.returncode != 0:
        sys.exit(f"strata launch exited {r.returncode}:\n{r.stderr}")
    m = re.search(r"worker:0 ran (\d+) steps .*?, (\d+) gradient bytes "
                  r"pushed, .*?\), (\d+) parameter bytes pulled \((\d+) "
                  r"pulls with rows\)", r.stderr)
    rows = sum(int(x) for x in re.findall(r"pushes applied \((\d+) with rows",
                                          r.stderr))
    return (int(m.group(1)), int(m.group(2)), rows, int(m.group(3)),
            int(m.group(4)))


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
        for name, extra in MODES:
            steps, pushed, rows, pulled, row_pulls = run(build, job, extra)
            res[name] = (pushed / steps, pulled / steps)
            print(f"  {name:18s}: {pushed / steps:10.0f} bytes pushed, "
                  f"{pulled / steps:10.0f} pulled per step ({rows} pushes, "
                  f"{row_pulls} pulls with rows)")
        d = res["dense"]
        for name in ("rows, whole pulls", "rows both ways"):
            print(f"  {name} / dense: pushed {res[name][0] / d[0]:.4f}, "
                  f"pulled {res[name][1] / d[1]:.4f}")


if __name__ == "__main__":
    main()
