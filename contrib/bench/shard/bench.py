#!/usr/bin/env python3
"""Sharded optimizer state (ZeRO stage 1, [strategy.mirrored] and
[strategy.mwms] shard_optimizer): optimizer-state memory and step time with
and without it, on the seeds' CNN at global batch 64 with 2 CPU replicas
(mirrored) or 2 workers of one replica (mwms, strata launch), side by side
from one run (central.so beside them: it partitions its one copy of the
optimizer state by construction).

    contrib/bench/shard/bench.py [--strata PATH] [--rounds 3] [--steps 100]

Each configuration trains 1 + E epochs of `--steps` steps (the first, a
warm-up, is not timed), interleaved over the rounds so that a burst of
load on a shared machine hits one round, not one configuration. Step time:
the timed epochs' seconds / steps (strata's metrics CSV), best and median
over the rounds. Memory: the banner's placed bytes; the optimizer state is
what the strategy placed beyond the variables' copies (mirrored: N copies,
central: one). Peak RSS from wait4. See README.md beside this file.
"""
import argparse
import csv
import importlib.util
import os
import re
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


mb = _load("strata_mlp_bench", os.path.join(BENCH, "bench.py"))

SEEDS_CNN = ("conv2d 32 3 relu, conv2d 64 3 relu, flatten, dense 64 relu, "
             "dense 10 softmax")
T_OPT_STATE = 0.55  # the target: sharded / unsharded optimizer state

CONFIGS = [  # key, label, strategy, copies of the variables, extra --set
    ("full", "mirrored, shard_optimizer = false", "mirrored", 2,
     ["strategy.mirrored.shard_optimizer=false"]),
    ("shard", "mirrored, shard_optimizer = true", "mirrored", 2,
     ["strategy.mirrored.shard_optimizer=true"]),
    ("central", "central (reference)", "central", 1, []),
    # strata launch -n 2, one replica each: worker 0's banner
    ("mwms-full", "mwms 2 workers, shard_optimizer = false", "mwms", 1,
     ["strategy.mwms.shard_optimizer=false"]),
    ("mwms-shard", "mwms 2 workers, shard_optimizer = true", "mwms", 1,
     ["strategy.mwms.shard_optimizer=true"]),
]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--strata", help="strata binary (default: $STRATA_BIN, "
                   "then build/bin/strata)")
    p.add_argument("--data", default=mb.DEFAULT_DATA)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=100,
                   help="steps per epoch (%(default)s)")
    p.add_argument("--epochs", type=int, default=2,
                   help="timed epochs after the warm-up one (%(default)s)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--keep", metavar="DIR", help="keep the logs in DIR")
    a = p.parse_args(argv)
    if a.batch < 2 or a.batch % 2 or a.steps < 1 or a.epochs < 1 \
            or a.rounds < 1:
        p.error("--batch even >= 2; --steps, --epochs, --rounds >= 1")
    a.skip_strata = False
    return a


def run(a, ctx, tag, strategy, extra):
    csv_path = os.path.join(ctx["dir"], tag + ".csv")
    log_path = os.path.join(ctx["dir"], tag + ".log")
    workers = strategy == "mwms"
    sets = ["model.layers=" + SEEDS_CNN,
            "train.devices=" + ("cpu:0" if workers else "cpu:0, cpu:1"),
            "train.batch_size=%d" % a.batch, "train.epochs=%d" % (1 + a.epochs),
            "train.seed=1", "train.eval=false", "train.progress=none",
            "train.metrics_csv=" + csv_path,
            "data.limit_train=%d" % (a.steps * a.batch), "data.dir=" + a.data,
            "optimizer.name=adam", "optimizer.lr=0.001",
            "strategy.plugin=" + strategy, "transport.local=local"] + extra
    cmd = [ctx["strata"]] + (["launch", "-n", "2"] if workers else ["train"])
    for s in sets:
        cmd += ["--set", s]
    rc, rss, _ = mb.run_child(cmd, log_path)
    if rc != 0:
        mb.fail_child("strata " + tag, rc, log_path)
    with open(log_path, errors="replace") as f:
        log = f.read()
    m = re.search(r"placed (\d+) bytes .* the model's (\d+) bytes", log)
    p = re.search(r"model: (\d+) parameters", log)
    if not m or not p:
        raise mb.BenchError("%s: no banner in %s" % (tag, log_path))
    ctx["params"] = int(p.group(1))
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))[1:]
    secs = sum(float(r["seconds"]) for r in rows)
    steps = sum(float(r["steps"]) for r in rows)
    return int(m.group(1)), int(m.group(2)), secs / steps, rss


def main(argv):
    a = parse_args(argv)
    t0 = time.monotonic()
    ctx = {"dir": a.keep or tempfile.mkdtemp(prefix="strata-shard-")}
    os.makedirs(ctx["dir"], exist_ok=True)
    try:
        ctx["strata"] = mb.find_strata(a)
        res = {}
        for rnd in range(a.rounds):
            for key, label, strategy, copies, extra in CONFIGS:
                mb.progress("%s (round %d/%d)" % (label, rnd + 1, a.rounds))
                placed, model, step, rss = run(a, ctx, "%s-r%d" % (key, rnd),
                                               strategy, extra)
                r = res.setdefault(key, {"label": label, "steps": [],
                                         "rss": 0.0})
                r.update(placed=placed, model=model,
                         opt=placed - copies * model)
                r["steps"].append(step)
                r["rss"] = max(r["rss"], rss)
    except mb.BenchError as e:
        print("bench: error: %s (logs in %s)" % (e, ctx["dir"]),
              file=sys.stderr)
        return 1
    load = os.getloadavg()
    print()
    print("seeds' CNN (%s params), global batch %d, 2 CPU replicas, Adam; "
          "%d timed epochs of %d steps x %d rounds; load average %.2f"
          % (format(ctx["params"], ","), a.batch, a.epochs,
             a.steps, a.rounds, load[0]))
    hdr = "%-40s %12s %12s %7s %11s %11s %9s" % (
        "run", "placed MiB", "opt. state", "x model", "ms/step", "(median)",
        "peak RSS")
    print(hdr)
    print("-" * len(hdr))
    for key, *_ in CONFIGS:
        r = res[key]
        print("%-40s %12.2f %12.2f %7.2f %11.1f %11.1f %9.0f" % (
            r["label"], r["placed"] / 2**20, r["opt"] / 2**20,
            r["placed"] / r["model"], min(r["steps"]) * 1e3,
            statistics.median(r["steps"]) * 1e3, r["rss"]))
    f, s = res["full"], res["shard"]
    opt_ratio = s["opt"] / f["opt"]
    print()
    print("sharded / unsharded: optimizer state %.2fx, placed bytes %.2fx, "
          "step time %.2fx (best), %.2fx (median), peak RSS %.2fx"
          % (opt_ratio, s["placed"] / f["placed"],
             min(s["steps"]) / min(f["steps"]),
             statistics.median(s["steps"]) / statistics.median(f["steps"]),
             s["rss"] / f["rss"]))
    print("  %s  optimizer state sharded <= %.2fx unsharded   %.2fx"
          % ("PASS" if opt_ratio <= T_OPT_STATE else "MISS", T_OPT_STATE,
             opt_ratio))
    f, s = res["mwms-full"], res["mwms-shard"]
    opt_ratio = s["opt"] / f["opt"]
    print("mwms, worker 0, sharded / unsharded: optimizer state %.2fx, placed "
          "bytes %.2fx, step time %.2fx (best), %.2fx (median)"
          % (opt_ratio, s["placed"] / f["placed"],
             min(s["steps"]) / min(f["steps"]),
             statistics.median(s["steps"]) / statistics.median(f["steps"])))
    print("  %s  optimizer state sharded <= %.2fx unsharded   %.2fx"
          % ("PASS" if opt_ratio <= T_OPT_STATE else "MISS", T_OPT_STATE,
             opt_ratio))
    print("total wall time: %.0f s" % (time.monotonic() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
