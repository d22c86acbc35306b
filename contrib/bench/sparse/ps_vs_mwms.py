#!/usr/bin/env python3
"""The seeds' question on a workload made for a parameter server (issue 25
item 7): etc/recsys.ini's click model with a large embedding table, under
mwms (the table's gradient as rows while they are few, and dense) and
under ps (1 or more ps tasks, the table split by rows, rows pushed and
pulled), with W workers, each task a process started by `strata launch`
on this host's loopback.

For each run it prints samples/s (the metrics CSV of worker:0 or the
chief: training only), the bytes a worker sends per step (ps: the
worker's own end line, pushes and pulls; mwms: the ring's bytes for the
dense form, and for the rows an upper bound, every id of its slice a
distinct row, marked "<="), and the peak RSS of the job's largest process (wait4 of the
launch, which reaps every task).

    contrib/bench/sparse/ps_vs_mwms.py [--build build] [--rows 1000000]
        [--dim 64] [--workers 2,4] [--ps 1,2] [--steps 40] [--batch 512]

Data: contrib/recsys/make_data.py (4 features of rows/4 ids, power-law,
seed 1) in a temporary directory, steps x batch training samples.
"""
import argparse
import csv
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
GEN = os.path.join(ROOT, "contrib", "recsys", "make_data.py")
INI = os.path.join(ROOT, "etc", "recsys.ini")


def launch(a, d, tag, head, sets):
    csv_path = os.path.join(d, tag + ".csv")
    cmd = [os.path.join(a.build, "bin", "strata"), "launch"] + head + [
        "-c", INI]
    for s in ["data.dir=" + d,
              "graph.emb=embedding vocab=%d dim=%d <- ids" % (a.rows, a.dim),
              "train.batch_size=%d" % a.batch,
              "train.max_steps=%d" % a.steps, "train.eval=false",
              "train.progress=none", "train.devices=cpu:0",
              "data.validation_split=", "train.metrics_csv=" + csv_path,
              "security.mode=off"] + sets:
        cmd += ["--set", s]
    env = dict(os.environ, STRATA_PLUGIN_PATH=os.path.join(
        a.build, "lib", "strata", "plugins"))
    log = os.path.join(d, tag + ".log")
    with open(log, "w") as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT,
                             env=env, stdin=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
    text = open(log, errors="replace").read()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("%s: strata launch failed (log %s):\n%s"
                 % (tag, log, text[-2000:]))
    with open(csv_path, newline="") as f:
        last = list(csv.DictReader(f))[-1]
    return float(last["samples_per_s"]), ru.ru_maxrss / 1024.0, text


def make_data(a, d):
    """The click logs of a --rows table for --steps batches into d."""
    g = subprocess.run([sys.executable, GEN, "--out", d, "--samples",
                        str(a.steps * a.batch), "--vocab", str(a.rows // 4),
                        "--test-samples", "1000"],
                       capture_output=True, text=True)
    if g.returncode != 0:
        sys.exit("make_data.py: " + g.stderr)


def mwms_bytes(a, w, text, dense):
    """Bytes a worker sends per step: the ring all-reduce of the whole
    gradient (2 (w-1)/w of it), or for rows the counts and the
    all-gathered (id, row) pairs of the others (what sparse.c moves)."""
    model = 4 * (a.rows * a.dim + 6000)  # the MLP's parameters beside it
    if dense:
        return 2.0 * (w - 1) / w * model
    m = re.search(r"mwms: embedding gradients: (\d+) table-steps as rows, "
                  r"(\d+) dense", text)
    rows = a.batch // w * 4  # at most: 4 ids per sample of its slice
    dense_part = 2.0 * (w - 1) / w * 4 * 6000
    if m and int(m.group(2)) > 0:
        return float("nan")  # some steps went dense: not this model
    return dense_part + (w - 1) * rows * (8 + 4 * a.dim)


def ps_bytes(text):
    m = re.search(r"worker:0 ran (\d+) steps .*?, (\d+) gradient bytes "
                  r"pushed, .*?\), (\d+) parameter bytes pulled", text)
    if not m:
        return float("nan")
    return (int(m.group(2)) + int(m.group(3))) / max(1, int(m.group(1)))


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--rows", type=int, default=1000000,
                   help="table rows (4 features of rows/4 ids)")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--workers", default="2,4")
    p.add_argument("--ps", default="1,2")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--keep", help="keep data and logs in this directory")
    a = p.parse_args(argv)
    workers = [int(x) for x in a.workers.split(",")]
    nps = [int(x) for x in a.ps.split(",")]
    d = a.keep or tempfile.mkdtemp(prefix="strata-psmwms-")
    os.makedirs(d, exist_ok=True)
    try:
        make_data(a, d)
        print("table %d x %d (%.0f MB), batch %d, %d steps of Adam, "
              "loopback, plaintext" % (a.rows, a.dim,
                                       a.rows * a.dim * 4 / 1e6, a.batch,
                                       a.steps))
        print("%-22s %3s %3s %12s %14s %14s" % ("run", "W", "ps", "samples/s",
                                              "MB/worker/step", "peak RSS MiB"))
        for w in workers:
            rows = []
            for dense in (False, True):
                tag = "mwms-%s-w%d" % ("dense" if dense else "rows", w)
                sps, rss, text = launch(a, d, tag, ["-n", str(w)], [
                    "strategy.plugin=mwms",
                    "strategy.mwms.sparse_as_dense=%s"
                    % ("true" if dense else "false")])
                rows.append((tag, w, 0, sps, mwms_bytes(a, w, text, dense),
                             rss))
            for n in nps:
                tag = "ps-w%d-p%d" % (w, n)
                sps, rss, text = launch(a, d, tag, [
                    "--ps", str(n), "-n", str(w), "--chief"], [
                    "strategy.plugin=ps", "model.metric=accuracy",
                    "strategy.ps.partitioner=fixed:%d" % n])
                rows.append((tag, w, n, sps, ps_bytes(text), rss))
            for tag, w_, n, sps, b, rss in rows:
                mb = ("<= %.3f" if "rows" in tag else "%.3f") % (b / 1e6)
                print("%-22s %3d %3d %12.0f %14s %14.0f"
                      % (tag, w_, n, sps, mb, rss))
            best_mwms = max(r[3] for r in rows if r[2] == 0)
            best_ps = max(r[3] for r in rows if r[2] > 0)
            print("W=%d: best ps / best mwms = %.2fx" % (w,
                                                         best_ps / best_mwms))
    finally:
        if not a.keep:
            shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
