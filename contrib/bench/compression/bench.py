#!/usr/bin/env python3
"""The accuracy cost of compressed gradients ([transport.zmq] compression):
the seeds' CNN (etc/seeds-cnn.ini: Adam 1e-3, global batch 32) trained by
`strata launch -n 2` (mwms, 2 workers x 1 replica, zmq between them) with
compression none, fp16 and bf16, side by side from one run.

    contrib/bench/compression/bench.py [--strata PATH] [--epochs 5]
                                       [--formats none,fp16,bf16]
                                       [--limit N] [--seed 1]

Every run has the same seed, data order and initial variables: the only
difference is how the gradients travel between the workers. Figures per
run: test accuracy and loss after each epoch (the chief's metrics CSV),
s/epoch; then each format's difference to none. On one host the workers
meet in shared memory, which compresses like the wire (its slots hold the
16-bit values; plugins/transport/zmq/README.md). See README.md beside this
file.
"""
import argparse
import csv
import importlib.util
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(BENCH))


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


mb = _load("strata_mlp_bench", os.path.join(BENCH, "bench.py"))


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--strata", help="strata binary (default: $STRATA_BIN, "
                   "then build/bin/strata)")
    p.add_argument("--config", default=os.path.join(REPO, "etc",
                                                     "seeds-cnn.ini"))
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--formats", default="none,fp16,bf16")
    p.add_argument("--limit", type=int, default=0,
                   help="train on the first N samples only (0: all)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--keep", metavar="DIR", help="keep the logs in DIR")
    a = p.parse_args(argv)
    a.formats = [f.strip() for f in a.formats.split(",") if f.strip()]
    if not a.formats or any(f not in ("none", "fp16", "bf16")
                            for f in a.formats) or a.epochs < 1:
        p.error("--formats from none, fp16, bf16; --epochs >= 1")
    a.skip_strata = False
    return a


def run(a, ctx, fmt):
    csv_path = os.path.join(ctx["dir"], fmt + ".csv")
    log_path = os.path.join(ctx["dir"], fmt + ".log")
    sets = ["strategy.plugin=mwms", "transport.world=zmq",
            "transport.zmq.compression=" + fmt, "train.devices=cpu:0",
            "train.epochs=%d" % a.epochs, "train.seed=%d" % a.seed,
            "train.progress=none", "train.metrics_csv=" + csv_path]
    if a.limit:
        sets.append("data.limit_train=%d" % a.limit)
    cmd = [ctx["strata"], "launch", "-n", "2", "-c", a.config]
    for s in sets:
        cmd += ["--set", s]
    rc, _, wall = mb.run_child(cmd, log_path)
    if rc != 0:
        mb.fail_child("strata launch, compression " + fmt, rc, log_path)
    with open(csv_path, newline="") as f:
        rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]
    if len(rows) != a.epochs:
        raise mb.BenchError("%s: %d epochs in %s" % (fmt, len(rows), csv_path))
    return rows, wall


def main(argv):
    a = parse_args(argv)
    t0 = time.monotonic()
    ctx = {"dir": a.keep or tempfile.mkdtemp(prefix="strata-compression-")}
    os.makedirs(ctx["dir"], exist_ok=True)
    res = {}
    try:
        ctx["strata"] = mb.find_strata(a)
        for fmt in a.formats:
            mb.progress("compression %s: %d epochs" % (fmt, a.epochs))
            res[fmt] = run(a, ctx, fmt)
    except mb.BenchError as e:
        print("bench: error: %s (logs in %s)" % (e, ctx["dir"]),
              file=sys.stderr)
        return 1
    print()
    print("seeds' CNN (%s), mwms 2 workers x 1 replica over zmq (strata "
          "launch), seed %d, %d epochs%s; load average %.2f"
          % (os.path.basename(a.config), a.seed, a.epochs,
             ", %d samples" % a.limit if a.limit else "", os.getloadavg()[0]))
    hdr = "%-6s %s %9s %8s" % ("format", " ".join(
        "ep%-2d acc" % (e + 1) for e in range(a.epochs)),
        "test loss", "s/epoch")
    print(hdr)
    print("-" * len(hdr))
    for fmt, (rows, wall) in res.items():
        print("%-6s %s %9.4f %8.1f" % (fmt, " ".join(
            "%7.2f%%" % (100 * r["val_accuracy"]) for r in rows),
            rows[-1]["val_loss"], sum(r["seconds"] for r in rows) / len(rows)))
    if "none" in res:
        base = res["none"][0][-1]
        print()
        for fmt, (rows, _) in res.items():
            if fmt != "none":
                print("%s - none after %d epochs: test accuracy %+.2f points, "
                      "test loss %+.4f" % (fmt, a.epochs,
                                           100 * (rows[-1]["val_accuracy"]
                                                  - base["val_accuracy"]),
                                           rows[-1]["val_loss"]
                                           - base["val_loss"]))
    print("total wall time: %.0f s" % (time.monotonic() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
