#!/usr/bin/env python3
"""strata vs PyTorch and TensorFlow: training throughput, peak memory and
accuracy.

Run it through run.sh (which installs the PyTorch anchor first). See
README.md beside this file for what is measured and how.
"""

import argparse
import csv
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TORCH_MLP = os.path.join(HERE, "torch_mlp.py")
TF_SCRIPT = os.path.join(HERE, "cnn", "tf_cnn.py")  # a Sequential of layers
DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
LAYERS = "dense 128 relu, dense 10"
# the same network in tf_cnn.py's terms: its input is 28x28x1, and its last
# softmax meets sparse_categorical_crossentropy as strata's logits meet its
# softmax cross-entropy
TF_LAYERS = "flatten, dense 128 relu, dense 10 softmax"
TF_PARAMS = 101770

# Targets from the benchmark issue.
T_SINGLE_RATIO = 1.6    # batch 256: strata 2 replicas / best torch single
T_DDP_RATIO = 8.0       # batch 64: strata 2 replicas / torch DDP
T_RSS_MIB = 150.0       # peak RSS of a strata run
T_MWMS_RATIO = 5.0      # batch 64: strata mwms 2 workers / torch DDP
# 784*128 + 128 + 128*10 + 10 float32 variables, plus Adam's 2 slots
MODEL_STATE_MIB = 3 * 101770 * 4 / 2**20
T_FASTEST = 1.25        # issue 27: strata 2 replicas / fastest peer, each batch
T_ACC_PP = 0.5          # accuracy: at most 0.5 points below torch's median


class BenchError(Exception):
    pass


def default_tf_python():
    """The venv both benchmarks share: $BENCH_VENV, else cnn/.venv."""
    venv = os.environ.get("BENCH_VENV") or os.path.join(HERE, "cnn", ".venv")
    return os.path.join(venv, "bin", "python")


def check_tf(a):
    """TensorFlow's version under a.tf_python, or a BenchError."""
    try:
        out = subprocess.run(
            [a.tf_python, "-c", "import os; os.environ['TF_CPP_MIN_LOG_LEVEL']"
             "='2'; import tensorflow as tf; print(tf.__version__)"],
            capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BenchError("cannot run %s: %s (run.sh makes the venv; or "
                         "--skip-tf)" % (a.tf_python, e))
    if out.returncode != 0:
        raise BenchError("%s cannot import tensorflow (run.sh installs "
                         "tensorflow-cpu; or --skip-tf):\n%s"
                         % (a.tf_python, out.stderr[-800:]))
    return out.stdout.strip().splitlines()[-1]


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Benchmark strata against PyTorch and TensorFlow "
                    "MirroredStrategy on Fashion-MNIST.")
    p.add_argument("--strata", help="strata binary (default: $STRATA_BIN, "
                   "then build/bin/strata under the repository root)")
    p.add_argument("--config", help="INI file for strata (default: one "
                   "generated with the benchmark's settings); every setting "
                   "the benchmark depends on is also passed with --set")
    p.add_argument("--python", default="/usr/bin/python3",
                   help="interpreter that has torch (default %(default)s)")
    p.add_argument("--tf-python", default=default_tf_python(),
                   help="interpreter that has tensorflow (default: "
                        "$BENCH_VENV/bin/python, else the CNN benchmark's "
                        "venv: %(default)s)")
    p.add_argument("--skip-tf", action="store_true",
                   help="leave out TensorFlow (no venv needed)")
    p.add_argument("--data", default=DEFAULT_DATA)
    p.add_argument("--batches", default="64,256",
                   help="global batches of the speed runs (%(default)s)")
    p.add_argument("--epochs", type=int, default=3,
                   help="epochs per speed run; the fastest epoch is "
                        "reported (%(default)s)")
    p.add_argument("--max-steps", type=int, default=300,
                   help="PyTorch speed runs train this many steps per epoch "
                        "and extrapolate, TensorFlow's time this many after "
                        "a tenth as many untimed (%(default)s; 0: whole "
                        "epochs, TF 300 steps)")
    p.add_argument("--rounds", type=int, default=2,
                   help="repeat every speed run this many times, keep the "
                        "best (%(default)s)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--accuracy", action="store_true",
                   help="also run the accuracy comparison (5 epochs, "
                        "batch 32, seeds 1-3; several minutes)")
    p.add_argument("--accuracy-only", action="store_true",
                   help="run only the accuracy comparison")
    p.add_argument("--seeds", default="1,2,3",
                   help="seeds of the accuracy runs (%(default)s)")
    p.add_argument("--skip-strata", action="store_true",
                   help="PyTorch side only (no binary needed)")
    p.add_argument("--keep", metavar="DIR",
                   help="keep logs and metrics in DIR (default: a temp dir, "
                        "removed at the end)")
    a = p.parse_args(argv)
    try:
        a.batches = [int(b) for b in a.batches.split(",") if b.strip()]
        a.seeds = [int(s) for s in a.seeds.split(",") if s.strip()]
    except ValueError:
        p.error("--batches and --seeds take comma-separated integers")
    if not a.batches or min(a.batches) < 2 or any(b % 2 for b in a.batches):
        p.error("--batches: even integers >= 2 (split over 2 replicas)")
    if a.epochs < 1 or a.rounds < 1 or a.max_steps < 0 or not a.seeds:
        p.error("--epochs and --rounds >= 1, --max-steps >= 0, "
                "--seeds non-empty")
    if a.accuracy_only:
        a.accuracy = True
    return a


# ---- running children ---------------------------------------------------

def run_child(cmd, log_path, env=None):
    """Run cmd, stdout+stderr to log_path; return (rc, peak RSS MiB, wall s).

    Peak RSS is ru_maxrss from wait4 on that child (KiB on Linux)."""
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(quote(c) for c in cmd) + "\n")
        log.flush()
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=env)
        except OSError as e:
            raise BenchError("cannot start %s: %s" % (cmd[0], e))
        _, status, ru = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - t0
    return proc.returncode, ru.ru_maxrss / 1024.0, wall


def quote(s):
    return s if s and all(c.isalnum() or c in "-_./=:," for c in s) \
        else "'" + s.replace("'", "'\\''") + "'"


def tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def fail_child(what, rc, log_path):
    raise BenchError("%s failed (exit %d); last lines of %s:\n%s"
                     % (what, rc, log_path, tail(log_path)))


# ---- strata -------------------------------------------------------------

def find_strata(a):
    """--strata, else $STRATA_BIN, else build/bin/strata: the first one
    given is the only one looked at (an explicit path never falls back)."""
    for cand, why in ((a.strata, "--strata"),
                      (os.environ.get("STRATA_BIN"), "$STRATA_BIN"),
                      (os.path.join(REPO, "build", "bin", "strata"),
                       "the default build/bin/strata")):
        if cand:
            break
    if os.path.isfile(cand) and os.access(cand, os.X_OK):
        return os.path.abspath(cand)
    raise BenchError("strata binary not found: %s (%s) is not an executable "
                     "file. Build it (cmake -S . -B build && cmake --build "
                     "build), or pass --strata PATH / set STRATA_BIN; "
                     "--skip-strata runs the PyTorch side only."
                     % (cand, why))


def strata_gemm(strata):
    """(the `gemm:` line of `strata --version`, the OpenBLAS kernels in it):
    a GEMM-rate probe must run the kernels strata runs, which on a CPU that
    OpenBLAS does not know are not the ones OpenBLAS picks by itself."""
    out = subprocess.run([strata, "--version"], capture_output=True,
                         text=True, timeout=60).stdout
    m = re.search(r"^gemm: (OpenBLAS \S+ (\S+) .*)$", out, re.M)
    return (m.group(1), m.group(2)) if m else (None, None)


def write_ini(path, data_dir):
    with open(path, "w") as f:
        f.write("; generated by contrib/bench/bench.py\n"
                "[train]\nepochs = 5\nbatch_size = 32\nseed = 1\n\n"
                "[model]\nlayers = %s\n\n"
                "[optimizer]\nname = adam\nlr = 0.001\n\n"
                "[strategy]\nplugin = mirrored\n\n"
                "[transport]\nplugin = local\n\n"
                "[data]\ndir = %s\n" % (LAYERS, data_dir))


def read_metrics(path, what):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise BenchError("%s: no metrics CSV: %s" % (what, e))
    need = ("epoch", "steps", "loss", "accuracy", "val_loss",
            "val_accuracy", "seconds", "samples_per_s")
    out = []
    for r in rows:
        try:
            out.append({k: float(r[k]) for k in need})
        except (KeyError, TypeError, ValueError):
            raise BenchError("%s: %s: bad row %r (want columns %s)"
                             % (what, path, r, ",".join(need)))
    if not out:
        raise BenchError("%s: %s has no epoch rows" % (what, path))
    return out


def run_strata(a, ctx, tag, batch, epochs, seed, devices, workers=0,
               strategy="mirrored"):
    """workers > 0: MultiWorkerMirroredStrategy, `strata launch -n workers`
    over zmq (each worker one replica on `devices`)."""
    csv_path = os.path.join(ctx["dir"], tag + ".csv")
    log_path = os.path.join(ctx["dir"], tag + ".log")
    sets = ["train.epochs=%d" % epochs, "train.batch_size=%d" % batch,
            "train.seed=%d" % seed, "train.metrics_csv=" + csv_path,
            "optimizer.name=adam", "optimizer.lr=0.001",
            "model.layers=" + LAYERS, "data.dir=" + a.data]
    sets += (["strategy.plugin=mwms", "transport.plugin=zmq"] if workers else
             ["strategy.plugin=" + strategy, "transport.plugin=local"])
    if devices:
        sets.append("train.devices=" + devices)
    cmd = [ctx["strata"], "train", "-c", ctx["ini"]]
    if workers:
        cmd = [ctx["strata"], "launch", "-n", str(workers), "-c", ctx["ini"]]
    for s in sets:
        cmd += ["--set", s]
    rc, rss, wall = run_child(cmd, log_path)
    if rc != 0:
        fail_child("strata " + tag, rc, log_path)
    rows = read_metrics(csv_path, "strata " + tag)
    if len(rows) != epochs:
        raise BenchError("strata %s: %d epoch rows in %s, expected %d"
                         % (tag, len(rows), csv_path, epochs))
    return rows, rss, wall


# ---- PyTorch ------------------------------------------------------------

def check_torch(a):
    try:
        out = subprocess.run([a.python, "-c",
                              "import torch; print(torch.__version__)"],
                             capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BenchError("cannot run %s: %s" % (a.python, e))
    if out.returncode != 0:
        raise BenchError("%s cannot import torch (run contrib/bench/run.sh, "
                         "which installs Debian's python3-torch, or pass "
                         "--python):\n%s" % (a.python, out.stderr[-800:]))
    return out.stdout.strip()


def run_torch(a, ctx, tag, batch, epochs, seed, extra, max_steps):
    log_path = os.path.join(ctx["dir"], tag + ".log")
    cmd = [a.python, TORCH_MLP, "--epochs", str(epochs), "--batch",
           str(batch), "--seed", str(seed), "--data", a.data,
           "--max-steps", str(max_steps)] + extra
    rc, rss, wall = run_child(cmd, log_path)
    if rc != 0:
        fail_child("torch " + tag, rc, log_path)
    rows, ddp_rss = [], None
    with open(log_path, errors="replace") as f:
        for line in f:
            if not line.startswith("{"):
                continue
            rec = json.loads(line)
            if "rss_mib" in rec:
                ddp_rss = rec
            else:
                rows.append(rec)
    if len(rows) != epochs:
        raise BenchError("torch %s: %d epoch lines in %s, expected %d"
                         % (tag, len(rows), log_path, epochs))
    if ddp_rss is not None:  # workers' peaks, not the small launcher's
        return rows, (ddp_rss["rss_max_mib"], ddp_rss["rss_sum_mib"]), wall
    return rows, (rss, None), wall


# ---- TensorFlow ---------------------------------------------------------

def run_tf(a, ctx, tag, batch, seed):
    """MirroredStrategy over 2 logical CPUs (cnn/tf_cnn.py): model.fit
    timed over --max-steps steps after a tenth as many; one row whose
    seconds are scaled to a whole epoch, as torch's are."""
    steps = a.max_steps or 300
    log_path = os.path.join(ctx["dir"], tag + ".log")
    cmd = [a.tf_python, TF_SCRIPT, "--layers", TF_LAYERS, "--replicas", "2",
           "--batch", str(batch), "--steps", str(steps),
           "--warmup", str(max(3, steps // 10)), "--seed", str(seed),
           "--data", a.data]
    rc, rss, _ = run_child(cmd, log_path)
    if rc != 0:
        fail_child("tensorflow " + tag, rc, log_path)
    rec = None
    with open(log_path, errors="replace") as f:
        for line in f:
            if line.startswith("{"):
                rec = json.loads(line)
    if rec is None or "samples_per_s" not in rec:
        raise BenchError("tensorflow %s: no result line in %s:\n%s"
                         % (tag, log_path, tail(log_path)))
    if rec.get("trainable_params") != TF_PARAMS:
        raise BenchError("tensorflow %s: the model has %s parameters "
                         "trained, expected %d (%s)"
                         % (tag, rec.get("trainable_params"), TF_PARAMS,
                            log_path))
    sps = rec["samples_per_s"]
    epoch = (60000 // batch) * batch
    return [{"samples_per_s": sps, "seconds": epoch / sps}], (rss, None)


# ---- speed --------------------------------------------------------------

def configs(a):
    """(key, label, kind, args) of every speed run at one batch."""
    out = []
    if not a.skip_strata:
        out += [("s1", "strata mirrored, 1 replica", "strata", "cpu:0"),
                ("s2", "strata mirrored, 2 replicas", "strata",
                 "cpu:0, cpu:1"),
                ("c2", "strata central, 2 replicas", "central",
                 "cpu:0, cpu:1"),
                ("mw", "strata mwms, 2 workers x 1 (zmq)", "mwms", "cpu:0")]
    out += [("t1", "torch 1 thread", "torch", ["--threads", "1"]),
            ("t2", "torch 2 threads", "torch", ["--threads", "2"]),
            ("t2b", "torch 1 thread + 2 BLAS threads", "torch",
             ["--threads", "1", "--blas-threads", "2"]),
            ("ddp", "torch DDP gloo, 2 procs x 1 thread", "torch",
             ["--mode", "ddp", "--procs", "2"])]
    if not a.skip_tf:
        out.append(("tf", "TF MirroredStrategy, 2 logical CPUs", "tf", None))
    return out


def speed(a, ctx):
    res = {}  # (batch, key) -> dict
    for rnd in range(a.rounds):
        for batch in a.batches:
            for key, label, kind, args in configs(a):
                tag = "speed-b%d-%s-r%d" % (batch, key, rnd)
                progress("%s (batch %d, round %d/%d)"
                         % (label, batch, rnd + 1, a.rounds))
                if kind in ("strata", "mwms", "central"):
                    rows, rss, wall = run_strata(
                        a, ctx, tag, batch, a.epochs, a.seed, args,
                        2 if kind == "mwms" else 0,
                        "central" if kind == "central" else "mirrored")
                    rss = (rss, None)
                elif kind == "tf":
                    rows, rss = run_tf(a, ctx, tag, batch, a.seed)
                else:
                    rows, rss, wall = run_torch(a, ctx, tag, batch, a.epochs,
                                                a.seed, args, a.max_steps)
                best = max(rows, key=lambda r: r["samples_per_s"])
                cur = res.setdefault((batch, key), {
                    "label": label, "sps": 0.0, "all": [], "rss": 0.0,
                    "rss_sum": None})
                cur["all"] += [r["samples_per_s"] for r in rows]
                # the worst memory peak seen in any round
                cur["rss"] = max(cur["rss"], rss[0])
                if rss[1] is not None:
                    cur["rss_sum"] = max(cur["rss_sum"] or 0.0, rss[1])
                if best["samples_per_s"] > cur["sps"]:
                    cur["sps"] = best["samples_per_s"]
                    cur["sec"] = best["seconds"]
    return res


def ratio(x, y):
    return x / y if x and y else None


def fmt_ratio(r):
    return "%.2fx" % r if r is not None else "n/a"


def mark(ok):
    return "PASS" if ok else "MISS"


def print_targets(targets, width=64, miss="MISS"):
    """The closing block: one line per (what, value, ok); ok None: SKIP."""
    if not targets:
        return
    print()
    print("Targets")
    for what, val, ok in targets:
        flag = "SKIP" if ok is None else "PASS" if ok else miss
        print("  %s  %-*s %s" % (flag, width, what, val))


def close_run(ctx, keep, t0):
    """The wall time; the temp dir goes unless --keep."""
    print()
    print("total wall time: %.0f s" % (time.monotonic() - t0))
    if not keep:
        shutil.rmtree(ctx["dir"], ignore_errors=True)


def report_error(e, ctx):
    """A BenchError as one line (and where the logs are): exit status 2."""
    print("bench: error: %s" % e, file=sys.stderr)
    if ctx.get("dir"):
        print("bench: logs kept in %s" % ctx["dir"], file=sys.stderr)
    return 2


def report_speed(a, res, targets):
    print()
    print("Speed (fastest of %d epochs x %d round(s), median of all in "
          "parentheses; torch: %s)"
          % (a.epochs, a.rounds,
             "whole epochs" if a.max_steps == 0 else
             "%d steps/epoch, time extrapolated" % a.max_steps))
    hdr = "%6s  %-36s %9s %11s %11s %14s" % (
        "batch", "run", "s/epoch", "samples/s", "(median)", "peak RSS MiB")
    print(hdr)
    print("-" * len(hdr))
    for batch in a.batches:
        for key, label, _, _ in configs(a):
            r = res[(batch, key)]
            rss = "%.0f" % r["rss"]
            if r["rss_sum"] is not None:
                rss = "%.0f max, %.0f sum" % (r["rss"], r["rss_sum"])
            print("%6d  %-36s %9.2f %11.0f %11.0f %14s"
                  % (batch, label, r["sec"], r["sps"],
                     statistics.median(r["all"]), rss))
        t_best = max(("t1", "t2", "t2b"), key=lambda k: res[(batch, k)]["sps"])
        best_sps = res[(batch, t_best)]["sps"]
        ddp_sps = res[(batch, "ddp")]["sps"]
        tf_sps = None if a.skip_tf else res[(batch, "tf")]["sps"]
        print("        best torch single-process: %s (%.0f samples/s)"
              % (res[(batch, t_best)]["label"], best_sps))
        if a.skip_strata:
            print()
            continue
        s1, s2 = res[(batch, "s1")]["sps"], res[(batch, "s2")]["sps"]
        r_single, r_ddp = ratio(s2, best_sps), ratio(s2, ddp_sps)
        print("        strata 2 replicas / best torch single-process: %s%s"
              % (fmt_ratio(r_single),
                 "   target >= %.1fx: %s" % (T_SINGLE_RATIO,
                                            mark(r_single >= T_SINGLE_RATIO))
                 if batch == 256 else ""))
        print("        strata 2 replicas / torch DDP:                 %s%s"
              % (fmt_ratio(r_ddp),
                 "   target >= %.0fx: %s" % (T_DDP_RATIO,
                                           mark(r_ddp >= T_DDP_RATIO))
                 if batch == 64 else ""))
        print("        strata 1 replica  / best torch single-process: %s"
              "   strata 1 replica / torch DDP: %s"
              % (fmt_ratio(ratio(s1, best_sps)), fmt_ratio(ratio(s1, ddp_sps))))
        r_mw = ratio(res[(batch, "mw")]["sps"], ddp_sps)
        print("        strata mwms 2 workers / torch DDP:             %s%s"
              % (fmt_ratio(r_mw),
                 "   target >= %.0fx: %s" % (T_MWMS_RATIO,
                                           mark(r_mw >= T_MWMS_RATIO))
                 if batch == 64 else ""))
        if batch == 64:
            targets.append(("batch 64: strata mwms 2 workers >= %.0fx torch "
                            "DDP" % T_MWMS_RATIO, fmt_ratio(r_mw),
                            r_mw >= T_MWMS_RATIO))
        if batch == 256:
            targets.append(("batch 256: strata 2 replicas >= %.1fx best torch "
                            "single-process" % T_SINGLE_RATIO,
                            fmt_ratio(r_single), r_single >= T_SINGLE_RATIO))
        if tf_sps:
            print("        strata 2 replicas / TF MirroredStrategy:       %s"
                  % fmt_ratio(ratio(s2, tf_sps)))
        r_fast = ratio(s2, max(best_sps, ddp_sps, tf_sps or 0))
        targets.append(("batch %d: strata 2 replicas >= %.2fx the fastest "
                        "of torch 1 process, DDP%s"
                        % (batch, T_FASTEST,
                           " (TF skipped)" if a.skip_tf else " and TF"),
                        fmt_ratio(r_fast),
                        r_fast is not None and r_fast >= T_FASTEST))
        if batch == 64:
            targets.append(("batch 64: strata 2 replicas >= %.0fx torch DDP"
                            % T_DDP_RATIO, fmt_ratio(r_ddp),
                            r_ddp >= T_DDP_RATIO))
        print()
    if not a.skip_strata:
        peak = max(r["rss"] for (b, k), r in res.items() if k in ("s1", "s2"))
        # central holds one copy of the variables and slots, mirrored one
        # per replica: the difference shows in peak RSS.
        for b in a.batches:
            m2, c2 = res[(b, "s2")]["rss"], res[(b, "c2")]["rss"]
            print("batch %d: peak RSS mirrored 2 replicas %.1f MiB, central 2 "
                  "replicas %.1f MiB (difference %.1f MiB; the model with "
                  "Adam's slots is %.1f MiB per copy)"
                  % (b, m2, c2, m2 - c2, MODEL_STATE_MIB))
        # (mwms runs under `strata launch`: its RSS is the launcher's)
        targets.append(("peak RSS of the strata speed runs <= %.0f MiB"
                        % T_RSS_MIB, "%.0f MiB" % peak, peak <= T_RSS_MIB))


# ---- accuracy -----------------------------------------------------------

def accuracy(a, ctx, targets):
    epochs, batch = 5, 32
    t_acc, s_acc, s_rss = [], [], []
    for seed in a.seeds:
        progress("accuracy: torch 1 thread, seed %d" % seed)
        rows, _, _ = run_torch(a, ctx, "acc-torch-s%d" % seed, batch, epochs,
                               seed, ["--threads", "1"], 0)
        t_acc.append(rows[-1]["val_accuracy"])
        if not a.skip_strata:
            progress("accuracy: strata default run, seed %d" % seed)
            # devices left to strata's default: this is "the default run"
            rows, rss, _ = run_strata(a, ctx, "acc-strata-s%d" % seed, batch,
                                      epochs, seed, None)
            s_acc.append(rows[-1]["val_accuracy"])
            s_rss.append(rss)
    print()
    print("Accuracy (test set after %d epochs, batch %d, Adam lr 1e-3)"
          % (epochs, batch))
    print("%-8s %s" % ("seed", "  ".join("%6d" % s for s in a.seeds))
          + "   median")
    tm = statistics.median(t_acc)
    print("%-8s %s   %6.2f%%" % ("torch", "  ".join("%5.2f%%" % (100 * x)
                                                     for x in t_acc), 100 * tm))
    if a.skip_strata:
        return
    sm = statistics.median(s_acc)
    print("%-8s %s   %6.2f%%" % ("strata", "  ".join("%5.2f%%" % (100 * x)
                                                      for x in s_acc), 100 * sm))
    diff = 100 * (sm - tm)
    print("difference (strata - torch, medians): %+.2f points" % diff)
    print("peak RSS of the strata default runs: %s MiB"
          % ", ".join("%.0f" % r for r in s_rss))
    targets.append(("accuracy: strata median >= torch median - %.1f points"
                    % T_ACC_PP, "%+.2f points" % diff, diff >= -T_ACC_PP))
    targets.append(("peak RSS of the default strata run <= %.0f MiB"
                    % T_RSS_MIB, "%.0f MiB" % max(s_rss),
                    max(s_rss) <= T_RSS_MIB))


# ---- main ---------------------------------------------------------------

def progress(msg):
    print("... " + msg, file=sys.stderr, flush=True)


def main(argv):
    a = parse_args(argv)
    t0 = time.monotonic()
    ctx = {}
    try:
        if not os.path.isdir(a.data):
            raise BenchError("%s: no Fashion-MNIST here (Debian package "
                             "dataset-fashion-mnist)" % a.data)
        if not a.skip_strata:
            ctx["strata"] = find_strata(a)
        tv = check_torch(a)
        tfv = None
        if not a.skip_tf and not a.accuracy_only:
            tfv = check_tf(a)
        if a.keep:
            os.makedirs(a.keep, exist_ok=True)
            ctx["dir"] = os.path.abspath(a.keep)
        else:
            ctx["dir"] = tempfile.mkdtemp(prefix="strata-bench-")
        ctx["ini"] = os.path.abspath(a.config) if a.config else \
            os.path.join(ctx["dir"], "bench.ini")
        if not a.config:
            write_ini(ctx["ini"], a.data)
        print("strata: %s" % ctx.get("strata", "(skipped)"))
        print("torch:  %s under %s (%d CPUs)" % (tv, a.python,
                                                 os.cpu_count() or 0))
        print("tensorflow: %s" % ("%s under %s" % (tfv, a.tf_python) if tfv
                                  else "(skipped)"))
        targets = []
        if not a.accuracy_only:
            res = speed(a, ctx)
            report_speed(a, res, targets)
        if a.accuracy:
            accuracy(a, ctx, targets)
        print_targets(targets, width=72)
        close_run(ctx, a.keep, t0)
    except BenchError as e:
        return report_error(e, ctx)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
