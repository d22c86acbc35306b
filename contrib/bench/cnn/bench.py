#!/usr/bin/env python3
"""strata vs PyTorch vs TensorFlow MirroredStrategy: CNN training throughput,
peak memory, fraction of the GEMM-bound rate, and accuracy.

Run it through run.sh (which installs the anchors first). See README.md
beside this file for what is measured and how.
"""

import argparse
import csv
import importlib.util
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
REPO = os.path.dirname(BENCH)
ROOT = os.path.dirname(REPO)   # the repository (REPO is contrib/)
RESNET_INI = os.path.join(ROOT, "etc", "resnet.ini")
TORCH_CNN = os.path.join(HERE, "torch_cnn.py")
TF_CNN = os.path.join(HERE, "tf_cnn.py")
SGEMM_SRC = os.path.join(HERE, "sgemm_rate.c")
PEAK_SRC = os.path.join(HERE, "..", "peak", "fma_peak.c")
CONV_BUILD = os.path.join(HERE, "..", "conv", "build.sh")


def _load_mlp_bench():
    # contrib/bench/bench.py under another name: this file is bench.py too
    spec = importlib.util.spec_from_file_location(
        "strata_mlp_bench", os.path.join(BENCH, "bench.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


mb = _load_mlp_bench()
BenchError = mb.BenchError
progress = mb.progress
ratio, fmt_ratio = mb.ratio, mb.fmt_ratio

# name -> (title, layers, parameters, samples per timed run by default).
# The ResNet is a [graph] (etc/resnet.ini), not a layers string: its
# "layers" are sgemm_rate's chain of its convolutions (`side`: a projection
# shortcut, counted on the block's input), the anchors build it with
# --model resnet and strata reads the ini.
MODELS = {
    "keras": ("Keras MNIST CNN",
              "conv2d 32 3 relu, maxpool2d 2, conv2d 64 3 relu, maxpool2d 2, "
              "flatten, dropout 0.5, dense 10 softmax", 34826, 12800),
    "seeds": ("seeds' CNN",
              "conv2d 32 3 relu, conv2d 64 3 relu, flatten, dense 64 relu, "
              "dense 10 softmax", 2378826, 6400),
    "resnet": ("ResNet-14",
               "conv2d 16 3 padding=same, "
               "conv2d 16 3 padding=same, conv2d 16 3 padding=same, "
               "conv2d 16 3 padding=same, conv2d 16 3 padding=same, "
               "conv2d 32 1 stride=2 side, "
               "conv2d 32 3 stride=2 padding=same, conv2d 32 3 padding=same, "
               "conv2d 32 3 padding=same, conv2d 32 3 padding=same, "
               "conv2d 64 1 stride=2 side, "
               "conv2d 64 3 stride=2 padding=same, conv2d 64 3 padding=same, "
               "conv2d 64 3 padding=same, conv2d 64 3 padding=same, "
               "global_avgpool2d, dense 10", 175530, 3840),
}
GRAPH_MODELS = ("resnet",)
TRAIN_SAMPLES = 60000

# Targets from the benchmark issue (global batch 64, strata 2 replicas).
T_KERAS_TORCH = 2.0     # Keras CNN: / best torch single process
T_KERAS_TF = 5.0        # Keras CNN: / TF MirroredStrategy
T_SEEDS_TORCH = 1.5     # seeds' CNN: / best torch single process
T_SEEDS_DDP = 3.0       # seeds' CNN: mwms 2 workers / torch DDP (gloo)
T_ACC_PP = 0.5          # accuracy: at most 0.5 points below torch's median
# Issue 27's targets, both CNNs at batch 64 and 256 (ResNet rows: reported)
T_FASTEST = 1.25        # strata 2 replicas / fastest of best torch 1p, DDP, TF
T_FMA = 0.60            # strata 2 replicas' conv+dense FLOPs / FMA peak
T_GEMM = 0.80           # strata's conv2d and dense kernels of one replica's
                        # step (contrib/bench/conv) / FMA peak
# Issue 27 item 4: [train] precision = mixed_bfloat16 against float32, the
# seeds' CNN at batch 256, strata 2 replicas of the same invocation
T_BF16 = 1.6


def cpu_has(flag):
    """/proc/cpuinfo lists `flag` (Linux lists what the OS supports)."""
    try:
        with open("/proc/cpuinfo") as f:
            return re.search(r"^flags\s*:.*\b%s\b" % flag, f.read(),
                             re.M) is not None
    except OSError:
        return False


def cpu_has_bf16():
    """AVX512_BF16 on this CPU (strata refuses mixed_bfloat16 without)."""
    return cpu_has("avx512_bf16")


def default_samples_text():
    return ", ".join("%d for the %s" % (m[3], m[0]) for m in MODELS.values())


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Benchmark strata's CNN training against PyTorch and "
                    "TensorFlow MirroredStrategy on Fashion-MNIST.")
    p.add_argument("--strata", help="strata binary (default: $STRATA_BIN, "
                   "then build/bin/strata under the repository root)")
    p.add_argument("--python", default="/usr/bin/python3",
                   help="interpreter that has torch (default %(default)s)")
    p.add_argument("--tf-python", default=mb.default_tf_python(),
                   help="interpreter that has tensorflow (default: "
                        "$BENCH_VENV/bin/python, else .venv/bin/python "
                        "beside this file: %(default)s)")
    p.add_argument("--data", default=mb.DEFAULT_DATA)
    p.add_argument("--models", default="keras,seeds,resnet",
                   help="models of the speed runs: keras, seeds, resnet "
                        "(%(default)s)")
    p.add_argument("--batches", default="64,256",
                   help="global batches of the speed runs (%(default)s)")
    p.add_argument("--max-steps", type=int, default=0,
                   help="timed steps of every speed run (default 0: "
                        "12800 samples for the Keras CNN, 6400 for the "
                        "seeds' CNN, 3840 for the ResNet-14, at least 10 "
                        "steps)")
    p.add_argument("--warmup", type=int, default=0,
                   help="untimed steps before them for torch and TF "
                        "(default 0: a tenth of the timed steps, at least 3); "
                        "strata warms up on one pass over the same samples")
    p.add_argument("--rounds", type=int, default=1,
                   help="repeat every speed run this many times (interleaved)"
                        ", keep the best (%(default)s)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sgemm-time", type=float, default=0.1,
                   help="seconds of calls per GEMM shape in sgemm_rate "
                        "(%(default)s)")
    p.add_argument("--skip-tf", action="store_true",
                   help="leave out TensorFlow (no venv needed)")
    p.add_argument("--skip-strata", action="store_true",
                   help="anchors only (no strata binary needed)")
    p.add_argument("--accuracy", action="store_true",
                   help="also compare accuracy: Keras CNN, 5 epochs, batch "
                        "32, each of --seeds, strata vs torch (long: "
                        "~5 min per seed on 2 cores)")
    p.add_argument("--accuracy-only", action="store_true")
    p.add_argument("--seeds", default="1,2,3",
                   help="seeds of the accuracy runs (%(default)s)")
    p.add_argument("--acc-epochs", type=int, default=5,
                   help="epochs of the accuracy runs (%(default)s; fewer "
                        "only for smoke tests)")
    p.add_argument("--acc-limit", type=int, default=0,
                   help="accuracy runs train on the first N samples only "
                        "(default 0: all; for smoke tests)")
    p.add_argument("--keep", metavar="DIR",
                   help="keep logs, metrics and sgemm_rate in DIR (default: "
                        "a temp dir, removed at the end)")
    a = p.parse_args(argv)
    a.models = [m.strip() for m in a.models.split(",") if m.strip()]
    if not a.models or any(m not in MODELS for m in a.models):
        p.error("--models: comma-separated, from %s" % ", ".join(MODELS))
    try:
        a.batches = [int(b) for b in a.batches.split(",") if b.strip()]
        a.seeds = [int(s) for s in a.seeds.split(",") if s.strip()]
    except ValueError:
        p.error("--batches and --seeds take comma-separated integers")
    if not a.batches or min(a.batches) < 2 or any(b % 2 for b in a.batches) \
            or max(a.batches) > TRAIN_SAMPLES:
        p.error("--batches: even integers >= 2 (split over 2 replicas)")
    if a.rounds < 1 or a.max_steps < 0 or a.warmup < 0 or not a.seeds \
            or a.acc_epochs < 1 or a.acc_limit < 0:
        p.error("--rounds and --acc-epochs >= 1, --max-steps, --warmup and "
                "--acc-limit >= 0, --seeds non-empty")
    if a.accuracy_only:
        a.accuracy = True
    return a


def plan(a, model, batch):
    """(timed steps, warm-up steps, training samples used) of a speed run."""
    steps = a.max_steps or max(10, round(MODELS[model][3] / batch))
    warmup = a.warmup or max(3, steps // 10)
    limit = min(TRAIN_SAMPLES // batch, steps) * batch
    return steps, warmup, limit


# ---- GEMM-bound rate ----------------------------------------------------

def build_sgemm(ctx):
    exe = os.path.join(ctx["dir"], "sgemm_rate")
    cc = os.environ.get("CC", "cc")
    cmd = [cc, "-O2", "-o", exe, SGEMM_SRC, "-lopenblas"]
    log = os.path.join(ctx["dir"], "sgemm-build.log")
    rc, _, _ = mb.run_child(cmd, log)
    if rc != 0:
        mb.fail_child("building sgemm_rate (needs cc and libopenblas-dev)",
                      rc, log)
    return exe


def fma_peaks(ctx):
    """The measured FP32 FMA peak per core (GFLOP/s) with 1 and with 2
    cores busy at once (contrib/bench/peak): the physical limit."""
    exe = os.path.join(ctx["dir"], "fma_peak")
    cc = os.environ.get("CC", "cc")
    log = os.path.join(ctx["dir"], "fma_peak-build.log")
    rc, _, _ = mb.run_child([cc, "-O2", "-o", exe, PEAK_SRC, "-lpthread"],
                            log)
    if rc != 0:
        mb.fail_child("building fma_peak", rc, log)
    peaks = {}
    for cores in (1, 2):
        log = os.path.join(ctx["dir"], "fma_peak-%d.log" % cores)
        rc, _, _ = mb.run_child([exe, "--threads", str(cores)], log)
        rec = last_json(log) if rc == 0 else None
        if rec is None:
            mb.fail_child("fma_peak --threads %d" % cores, rc, log)
        peaks[cores] = rec["fp32_gflops_per_core"]
    return peaks


def gemm_ops(a, ctx, peak, when="start"):
    """strata's own GEMM-shaped kernels (every conv2d and dense layer's
    forward, dW and dX of one replica's step at half the global batch, as
    the layer runs them, one core: contrib/bench/conv --model) against the
    FMA peak of one core. {(model, batch): conv_bench's step record}."""
    exe = os.path.join(ctx["dir"], "conv_bench")
    log = os.path.join(ctx["dir"], "conv_bench-build.log")
    if when == "start":   # built once a run (a kept DIR may hold an old one)
        rc, _, _ = mb.run_child([CONV_BUILD, exe], log)
        if rc != 0:
            mb.fail_child("building conv_bench (needs cc and "
                          "libopenblas-dev)", rc, log)
    out = {}
    for model in a.models:
        if model not in ("keras", "seeds"):
            continue
        for batch in a.batches:
            progress("conv_bench: %s, batch %d a replica (%s)"
                     % (MODELS[model][0], batch // 2, when))
            log = os.path.join(ctx["dir"], "conv_bench-%s-b%d-%s.log"
                               % (model, batch, when))
            rc, _, _ = mb.run_child([exe, "--model", model, "--batch",
                                     str(max(batch // 2, 1)), "--reps", "5",
                                     "--paths", "auto", "--peak",
                                     "%.2f" % peak], log)
            rec = last_json(log) if rc == 0 else None
            if rec is None or not rec.get("steps"):
                mb.fail_child("conv_bench --model %s" % model, rc, log)
            out[(model, batch)] = rec["steps"][0]
    return out


def report_gemm_ops(ops, peak, targets):
    if not ops:
        return
    print()
    print("strata's GEMM ops (contrib/bench/conv: forward, dW and dX of "
          "every conv2d and dense layer of one replica's step, half the "
          "global batch, one core, the kernels training runs, the faster "
          "of a run before the speed runs and one after; bound: each "
          "op at the FMA peak or moving its operands once at memcpy's "
          "rate, whichever is slower)")
    print("%-16s %6s %10s %10s %12s %10s" % ("model", "batch", "GFLOP/s",
                                             "ms/step", "of FMA peak",
                                             "bound"))
    for (model, batch), r in sorted(ops.items()):
        frac = r["gflops"] / peak
        print("%-16s %6d %10.1f %10.2f %11.1f%% %9.1f%%"
              % (MODELS[model][0], batch, r["gflops"], r["ms"], 100 * frac,
                 100 * r["bound"]))
        targets.append(("%s, batch %d: strata's conv2d + dense kernels >= "
                        "%.0f %% of the FMA peak" % (MODELS[model][0], batch,
                                                     100 * T_GEMM),
                        "%.1f %%" % (100 * frac), frac >= T_GEMM))


def gemm_bound(a, ctx, model, batch):
    log = os.path.join(ctx["dir"], "sgemm-%s-b%d.log" % (model, batch))
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    if ctx.get("blas_core"):
        env["OPENBLAS_CORETYPE"] = ctx["blas_core"]
    cmd = [ctx["sgemm"], "--layers", MODELS[model][1], "--batch", str(batch),
           "--min-time", str(a.sgemm_time)]
    rc, _, _ = mb.run_child(cmd, log, env=env)
    if rc != 0:
        mb.fail_child("sgemm_rate " + model, rc, log)
    rec = last_json(log)
    if rec is None:
        raise BenchError("sgemm_rate %s: no JSON line in %s" % (model, log))
    return rec


def last_json(path):
    rec = None
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("{"):
                rec = json.loads(line)
    return rec


# ---- the runs -----------------------------------------------------------

def write_ini(path, data_dir):
    with open(path, "w") as f:
        f.write("; generated by contrib/bench/cnn/bench.py; every setting "
                "the benchmark\n; depends on is also passed with --set\n"
                "[train]\nprogress = none\n\n"
                "[optimizer]\nname = adam\nlr = 0.001\n\n"
                "[strategy]\nplugin = mirrored\n\n"
                "[transport]\nplugin = local\n\n"
                "[data]\ndir = %s\n" % data_dir)


def read_speed_csv(path, what):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        return [{k: float(r[k]) for k in ("epoch", "steps", "seconds",
                                          "samples_per_s")} for r in rows]
    except (OSError, KeyError, TypeError, ValueError) as e:
        raise BenchError("%s: cannot read %s: %s" % (what, path, e))


def run_strata_speed(a, ctx, tag, model, batch, devices, workers=1,
                     precision="float32", hide=None):
    """One pass over `limit` samples to warm up, then passes until at least
    `steps` steps; samples/s over all passes but the first. workers > 1:
    mwms, that many processes through strata launch (as users start them;
    on one host the workers meet through shared memory)."""
    steps, _, limit = plan(a, model, batch)
    per_epoch = limit // batch
    epochs = 1 + math.ceil(steps / per_epoch)
    csv_path = os.path.join(ctx["dir"], tag + ".csv")
    log_path = os.path.join(ctx["dir"], tag + ".log")
    ini, model_sets = ctx["ini"], ["model.layers=" + MODELS[model][1]]
    if model in GRAPH_MODELS:
        # etc/resnet.ini's model as shipped; the benchmark's plain training
        # step as for the other models: no validation split (every sample
        # of `limit` trains), no augmentation, constant Adam 1e-3
        ini = RESNET_INI
        model_sets = ["data.validation_split=", "data.augment_flip=false",
                      "data.augment_crop_padding=0",
                      "optimizer.schedule=constant"]
    sets = model_sets + ["train.devices=" + devices,
            "train.batch_size=%d" % batch, "train.epochs=%d" % epochs,
            "train.seed=%d" % a.seed, "train.eval=false",
            "train.progress=none", "train.metrics_csv=" + csv_path,
            "data.limit_train=%d" % limit, "data.dir=" + a.data,
            "optimizer.name=adam", "optimizer.lr=0.001",
            "train.precision=" + precision,
            "strategy.plugin=mirrored", "transport.plugin=local"]
    cmd = [ctx["strata"], "train", "-c", ini]
    if workers > 1:
        sets[-2:] = ["strategy.plugin=mwms", "transport.world=zmq"]
        cmd[1:2] = ["launch", "-n", str(workers)]
    for s in sets:
        cmd += ["--set", s]
    env = None
    if hide:  # KC_CPU_HIDE: strata takes the CPU for one without `hide`
        env = dict(os.environ, KC_CPU_HIDE=hide)
    rc, rss, _ = mb.run_child(cmd, log_path, env)
    if rc != 0:
        mb.fail_child("strata " + tag, rc, log_path)
    check_strata_params(log_path, tag, model)
    rows = read_speed_csv(csv_path, "strata " + tag)
    if len(rows) != epochs or rows[-1]["steps"] != per_epoch:
        raise BenchError("strata %s: %d epoch rows in %s, expected %d of %d "
                         "steps" % (tag, len(rows), csv_path, epochs,
                                    per_epoch))
    timed = rows[1:]
    secs = sum(r["seconds"] for r in timed)
    return sum(r["steps"] for r in timed) * batch / secs, (rss, None)


def check_strata_params(log_path, tag, model):
    """The model summary's 'total: N parameters' line, when there is one,
    against the model's count (a wrong ini or override shows here)."""
    with open(log_path, errors="replace") as f:
        totals = re.findall(r"total: (\d+) parameters", f.read())
    if totals and any(int(t) != MODELS[model][2] for t in totals):
        raise BenchError("strata %s: the model has %s parameters, expected "
                         "%d (%s)" % (tag, ", ".join(sorted(set(totals))),
                                      MODELS[model][2], log_path))


def run_anchor(a, ctx, tag, model, batch, python, script, extra):
    steps, warmup, limit = plan(a, model, batch)
    log_path = os.path.join(ctx["dir"], tag + ".log")
    what = (["--model", "resnet"] if model in GRAPH_MODELS
            else ["--layers", MODELS[model][1]])
    cmd = [python, script] + what + ["--batch",
           str(batch), "--steps", str(steps), "--warmup", str(warmup),
           "--limit-train", str(limit), "--seed", str(a.seed),
           "--data", a.data] + extra
    rc, rss, _ = mb.run_child(cmd, log_path)
    if rc != 0:
        mb.fail_child(tag, rc, log_path)
    rec, ddp = None, None
    with open(log_path, errors="replace") as f:
        for line in f:
            if line.startswith("{"):
                r = json.loads(line)
                if "rss_mib" in r:
                    ddp = r
                elif "samples_per_s" in r:
                    rec = r
    if rec is None:
        raise BenchError("%s: no result line in %s:\n%s"
                         % (tag, log_path, mb.tail(log_path)))
    trained = rec.get("trainable_params", rec.get("params"))
    if trained is not None and trained != MODELS[model][2]:
        raise BenchError("%s: the model has %s parameters trained, expected "
                         "%d (%s)" % (tag, trained, MODELS[model][2], log_path))
    if ddp is not None:  # the workers' peaks, not the small launcher's
        return rec["samples_per_s"], (ddp["rss_max_mib"], ddp["rss_sum_mib"])
    return rec["samples_per_s"], (rss, None)


def configs(a):
    """(key, label, cores, kind, args) of every speed run."""
    out = []
    if not a.skip_strata:
        out += [("s1", "strata mirrored, 1 replica", 1, "strata", "cpu:0"),
                ("s2", "strata mirrored, 2 replicas", 2, "strata",
                 "cpu:0, cpu:1"),
                ("mw2", "strata mwms, 2 workers (launch)", 2, "strata",
                 ("cpu:0", 2))]
        if cpu_has_bf16() and cpu_has("amx_bf16"):
            # strata multiplies on the AMX tiles; the vector engine beside
            # them (KC_CPU_HIDE), which on such CPUs runs VDPBF16PS at half
            # the fp32 FMA rate
            out += [("s2bf", "strata 2 replicas, mixed_bf16 AMX", 2,
                     "strata", ("cpu:0, cpu:1", 1, "mixed_bfloat16")),
                    ("s2bfv", "strata 2 replicas, mixed_bf16 vector", 2,
                     "strata", ("cpu:0, cpu:1", 1, "mixed_bfloat16",
                                "amx_bf16"))]
        elif cpu_has_bf16():
            out.append(("s2bf", "strata 2 replicas, mixed_bfloat16", 2,
                        "strata", ("cpu:0, cpu:1", 1, "mixed_bfloat16")))
    out += [("t1", "torch 1 thread", 1, "torch", ["--threads", "1"]),
            ("t2", "torch 2 threads", 2, "torch", ["--threads", "2"]),
            ("t2b", "torch 1 thread + 2 BLAS threads", 2, "torch",
             ["--threads", "1", "--blas-threads", "2"]),
            ("t2cl", "torch 2 threads, channels_last", 2, "torch",
             ["--threads", "2", "--memory-format", "channels_last"]),
            ("ddp", "torch DDP gloo, 2 procs x 1 thread", 2, "torch",
             ["--mode", "ddp", "--procs", "2"])]
    if not a.skip_tf:
        out.append(("tf", "TF MirroredStrategy, 2 logical CPUs", 2, "tf",
                    ["--replicas", "2"]))
    return out


TORCH_SINGLE = ("t1", "t2", "t2b", "t2cl")


def speed(a, ctx):
    res = {}  # (model, batch, key) -> dict
    for rnd in range(a.rounds):
        for model in a.models:
            for batch in a.batches:
                for key, label, cores, kind, args in configs(a):
                    tag = "speed-%s-b%d-%s-r%d" % (model, batch, key, rnd)
                    progress("%s: %s (batch %d, round %d/%d)"
                             % (MODELS[model][0], label, batch, rnd + 1,
                                a.rounds))
                    if kind == "strata":
                        # (devices, workers[, precision[, hidden
                        # feature]]) or the devices alone
                        dev, nw, prec, hide = \
                            args + ("float32", None)[len(args) - 2:] \
                            if isinstance(args, tuple) \
                            else (args, 1, "float32", None)
                        sps, rss = run_strata_speed(a, ctx, tag, model,
                                                    batch, dev, nw, prec,
                                                    hide)
                    elif kind == "torch":
                        sps, rss = run_anchor(a, ctx, tag, model, batch,
                                              a.python, TORCH_CNN, args)
                    else:
                        sps, rss = run_anchor(a, ctx, tag, model, batch,
                                              a.tf_python, TF_CNN, args)
                    cur = res.setdefault((model, batch, key), {
                        "label": label, "cores": cores, "sps": 0.0,
                        "all": [], "rss": 0.0, "rss_sum": None})
                    cur["all"].append(sps)
                    cur["sps"] = max(cur["sps"], sps)
                    cur["rss"] = max(cur["rss"], rss[0])
                    if rss[1] is not None:
                        cur["rss_sum"] = max(cur["rss_sum"] or 0.0, rss[1])
    return res


def report_gemm(a, bounds):
    print()
    print("GEMM-bound rate (sgemm_rate: the model's GEMMs of one training "
          "step, im2col convs, at the single-thread OpenBLAS SGEMM rate; "
          "2 cores = 2 replicas of half the batch)")
    hdr = "%-16s %6s %14s %12s %12s %12s %12s" % (
        "model", "batch", "GEMM MFLOP/smp", "GFLOP/s @N", "GFLOP/s @N/2",
        "bound 1 core", "bound 2 cores")
    print(hdr)
    print("-" * len(hdr))
    for model in a.models:
        for batch in a.batches:
            g = bounds[(model, batch)]
            print("%-16s %6d %14.2f %12.1f %12.1f %12.0f %12.0f"
                  % (MODELS[model][0], batch,
                     g["gemm_flops_per_sample"] / 1e6, g["gflops_1thread"],
                     g["gflops_1thread_half"], g["bound_1core"],
                     g["bound_2core"]))


def report_speed(a, res, bounds, targets, peak):
    print()
    print("Speed: samples/s of steady-state steps (%s), best of %d round(s)"
          % ("%d timed steps" % a.max_steps if a.max_steps else
             "samples: " + default_samples_text(), a.rounds))
    hdr = "%-6s %5s  %-36s %5s %10s %15s %8s %8s %9s %7s %7s" % (
        "model", "batch", "run", "cores", "samples/s", "peak RSS MiB",
        "of GEMM", "of FMA", "vs torch", "vs DDP", "vs TF")
    print(hdr)
    print("%-6s %5s  %-36s %5s %10s %15s %8s %8s %9s %7s %7s" % (
        "", "", "", "", "", "", "bound", "peak", "best 1p", "", ""))
    print("-" * len(hdr))
    for model in a.models:
        for batch in a.batches:
            g = bounds[(model, batch)]
            t_best = max(TORCH_SINGLE,
                         key=lambda k: res[(model, batch, k)]["sps"])
            best = res[(model, batch, t_best)]["sps"]
            ddp = res[(model, batch, "ddp")]["sps"]
            tf = res[(model, batch, "tf")]["sps"] if not a.skip_tf else None
            for key, label, cores, _, _ in configs(a):
                r = res[(model, batch, key)]
                rss = "%.0f" % r["rss"]
                if r["rss_sum"] is not None:
                    rss = "%.0f (%.0f sum)" % (r["rss"], r["rss_sum"])
                bound = g["bound_1core"] if cores == 1 else g["bound_2core"]
                # The model's GEMM FLOPs at the rate of every core used.
                fma = (r["sps"] * g["gemm_flops_per_sample"] /
                       (peak[min(cores, 2)] * 1e9 * cores))
                print("%-6s %5d  %-36s %5d %10.0f %15s %7.1f%% %7.1f%% %9s "
                      "%7s %7s"
                      % (model, batch, label, cores, r["sps"], rss,
                         100.0 * r["sps"] / bound, 100.0 * fma,
                         fmt_ratio(ratio(r["sps"], best)),
                         fmt_ratio(ratio(r["sps"], ddp)),
                         fmt_ratio(ratio(r["sps"], tf))))
            print("%-6s %5s  best torch single process: %s (%.0f samples/s)"
                  % ("", "", res[(model, batch, t_best)]["label"], best))
            if not a.skip_strata and model in ("keras", "seeds"):
                s2 = res[(model, batch, "s2")]["sps"]
                peers = [v for v in (best, ddp, tf) if v]
                r = ratio(s2, max(peers))
                targets.append(("%s, batch %d: strata 2 replicas >= %.2fx "
                                "the fastest peer%s" % (
                                    MODELS[model][0], batch, T_FASTEST,
                                    "" if tf else " (TF skipped)"),
                                fmt_ratio(r), r is not None and
                                r >= T_FASTEST))
                fma = (s2 * g["gemm_flops_per_sample"] /
                       (peak[2] * 1e9 * 2))
                targets.append(("%s, batch %d: strata 2 replicas >= %.0f %% "
                                "of the FMA peak" % (MODELS[model][0], batch,
                                                     100 * T_FMA),
                                "%.1f %%" % (100 * fma), fma >= T_FMA))
                # mixed_bfloat16 against float32, both 2 replicas, this run
                bf = res.get((model, batch, "s2bf"))
                r = ratio(bf["sps"], s2) if bf else None
                targets.append(("%s, batch %d: mixed_bfloat16 >= %.1fx "
                                "float32 (strata 2 replicas)%s" % (
                                    MODELS[model][0], batch, T_BF16,
                                    "" if bf else " (no AVX512_BF16)"),
                                fmt_ratio(r), None if r is None
                                else r >= T_BF16))
            if a.skip_strata or batch != 64 or model not in ("keras",
                                                             "seeds"):
                continue
            s2 = res[(model, batch, "s2")]["sps"]
            if model == "keras":
                r = ratio(s2, best)
                targets.append(("Keras CNN, batch 64: strata 2 replicas >= "
                                "%.1fx best torch single process"
                                % T_KERAS_TORCH, fmt_ratio(r),
                                r >= T_KERAS_TORCH))
                r = ratio(s2, tf)
                targets.append(("Keras CNN, batch 64: strata 2 replicas >= "
                                "%.1fx TF MirroredStrategy" % T_KERAS_TF,
                                fmt_ratio(r),
                                None if r is None else r >= T_KERAS_TF))
            elif model == "seeds":
                r = ratio(s2, best)
                targets.append(("seeds' CNN, batch 64: strata 2 replicas >= "
                                "%.1fx best torch single process"
                                % T_SEEDS_TORCH, fmt_ratio(r),
                                r >= T_SEEDS_TORCH))
                r = ratio(res[(model, batch, "mw2")]["sps"], ddp)
                targets.append(("seeds' CNN, batch 64: strata mwms 2 workers "
                                ">= %.1fx torch DDP (gloo)" % T_SEEDS_DDP,
                                fmt_ratio(r), r >= T_SEEDS_DDP))
        print()


# ---- accuracy -----------------------------------------------------------

def accuracy(a, ctx, targets):
    epochs, batch = a.acc_epochs, 32
    layers = MODELS["keras"][1]
    t_acc, s_acc = [], []
    for seed in a.seeds:
        progress("accuracy: torch 1 thread, Keras CNN, seed %d" % seed)
        log = os.path.join(ctx["dir"], "acc-torch-s%d.log" % seed)
        cmd = [a.python, TORCH_CNN, "--layers", layers, "--batch",
               str(batch), "--epochs", str(epochs), "--steps", "0",
               "--seed", str(seed), "--data", a.data, "--threads", "1",
               "--limit-train", str(a.acc_limit)]
        rc, _, _ = mb.run_child(cmd, log)
        if rc != 0:
            mb.fail_child("torch accuracy seed %d" % seed, rc, log)
        with open(log, errors="replace") as f:
            rows = [json.loads(x) for x in f if x.startswith("{")]
        if len(rows) != epochs:
            raise BenchError("torch accuracy seed %d: %d epoch lines in %s"
                             % (seed, len(rows), log))
        t_acc.append(rows[-1]["val_accuracy"])
        if a.skip_strata:
            continue
        progress("accuracy: strata etc/cnn.ini (2 replicas), seed %d" % seed)
        tag = "acc-strata-s%d" % seed
        csv_path = os.path.join(ctx["dir"], tag + ".csv")
        log = os.path.join(ctx["dir"], tag + ".log")
        cmd = [ctx["strata"], "train", "-c", ctx["ini"]]
        for s in ("model.layers=" + layers, "train.devices=cpu:0, cpu:1",
                  "train.batch_size=%d" % batch, "train.epochs=%d" % epochs,
                  "train.seed=%d" % seed, "train.metrics_csv=" + csv_path,
                  "data.limit_train=%d" % a.acc_limit,
                  "data.dir=" + a.data, "optimizer.name=adam",
                  "optimizer.lr=0.001", "strategy.plugin=mirrored",
                  "transport.plugin=local"):
            cmd += ["--set", s]
        rc, _, _ = mb.run_child(cmd, log)
        if rc != 0:
            mb.fail_child("strata accuracy seed %d" % seed, rc, log)
        rows = mb.read_metrics(csv_path, "strata " + tag)
        s_acc.append(rows[-1]["val_accuracy"])
    print("Accuracy: Keras CNN, test set after %d epochs, global batch %d, "
          "Adam 1e-3 (strata: 2 replicas as etc/cnn.ini; torch: 1 process)%s"
          % (epochs, batch, "; only the first %d training samples"
             % a.acc_limit if a.acc_limit else ""))
    print("%-8s %s" % ("seed", "  ".join("%6d" % s for s in a.seeds))
          + "   median")
    tm = statistics.median(t_acc)
    print("%-8s %s   %6.2f%%" % ("torch", "  ".join(
        "%5.2f%%" % (100 * x) for x in t_acc), 100 * tm))
    if a.skip_strata:
        return
    sm = statistics.median(s_acc)
    print("%-8s %s   %6.2f%%" % ("strata", "  ".join(
        "%5.2f%%" % (100 * x) for x in s_acc), 100 * sm))
    diff = 100 * (sm - tm)
    print("difference (strata - torch, medians): %+.2f points" % diff)
    targets.append(("accuracy: strata median >= torch median - %.1f points"
                    % T_ACC_PP, "%+.2f points" % diff, diff >= -T_ACC_PP))


# ---- main ---------------------------------------------------------------

def main(argv):
    a = parse_args(argv)
    t0 = time.monotonic()
    ctx = {}
    try:
        if not os.path.isdir(a.data):
            raise BenchError("%s: no Fashion-MNIST here (Debian package "
                             "dataset-fashion-mnist)" % a.data)
        if not a.skip_strata:
            ctx["strata"] = mb.find_strata(a)
            ctx["gemm"], ctx["blas_core"] = mb.strata_gemm(ctx["strata"])
        tv = mb.check_torch(a)
        tfv = None
        if not a.skip_tf and not a.accuracy_only:
            tfv = mb.check_tf(a)
        if a.keep:
            os.makedirs(a.keep, exist_ok=True)
            ctx["dir"] = os.path.abspath(a.keep)
        else:
            ctx["dir"] = tempfile.mkdtemp(prefix="strata-bench-cnn-")
        ctx["ini"] = os.path.join(ctx["dir"], "bench.ini")
        write_ini(ctx["ini"], a.data)
        print("strata:     %s" % ctx.get("strata", "(skipped)"))
        if ctx.get("gemm"):
            print("gemm:       %s (sgemm_rate runs the same kernels)"
                  % ctx["gemm"])
        print("torch:      %s under %s" % (tv, a.python))
        print("tensorflow: %s" % ("%s under %s" % (tfv, a.tf_python) if tfv
                                  else "(skipped)"))
        print("CPUs: %d; load average at start: %s" % (
            os.cpu_count() or 0, " ".join("%.2f" % x
                                          for x in os.getloadavg())))
        targets = []
        if not a.accuracy_only:
            ctx["sgemm"] = build_sgemm(ctx)
            bounds = {}
            for model in a.models:
                for batch in a.batches:
                    progress("sgemm_rate: %s, batch %d"
                             % (MODELS[model][0], batch))
                    bounds[(model, batch)] = gemm_bound(a, ctx, model, batch)
            report_gemm(a, bounds)
            progress("fma_peak: 1 and 2 cores")
            ctx["peak"] = fma_peaks(ctx)
            print("FP32 FMA peak (fma_peak) at the start: %.1f GFLOP/s per "
                  "core alone, %.1f per core with 2 busy" % (ctx["peak"][1],
                                                 ctx["peak"][2]))
            ops = {} if a.skip_strata else gemm_ops(a, ctx, ctx["peak"][1])
            res = speed(a, ctx)
            # The peak again after the runs, the higher of each count used:
            # interference only slows a measurement down, and one slowed
            # figure inflates every "of FMA peak" (2026-12-04, 2 vCPUs of
            # a Zen 5: 115 GFLOP/s per core with 2 busy at the start, 234
            # in every run after).
            progress("fma_peak again: 1 and 2 cores")
            again = fma_peaks(ctx)
            # conv_bench again too, the faster of the two runs per row, as
            # the peak (the same kernels gave 181 and 216 GFLOP/s in two
            # runs an hour apart on 2026-12-05: the VM, not the kernels)
            if ops:
                later = gemm_ops(a, ctx, ctx["peak"][1], "end")
                print("conv_bench GFLOP/s at the start / the end: %s; the "
                      "rows use the higher" % ", ".join(
                          "%s %d: %.1f / %.1f" % (m, b, ops[(m, b)]["gflops"],
                                                  later[(m, b)]["gflops"])
                          for (m, b) in sorted(ops)))
                ops = {k: max(ops[k], later[k], key=lambda r: r["gflops"])
                       for k in ops}
            ctx["peak"] = {c: max(ctx["peak"][c], again[c])
                           for c in ctx["peak"]}
            print("FP32 FMA peak after the runs: %.1f / %.1f; the rows use "
                  "the higher: %.1f per core alone, %.1f with 2 busy"
                  % (again[1], again[2], ctx["peak"][1], ctx["peak"][2]))
            report_speed(a, res, bounds, targets, ctx["peak"])
            report_gemm_ops(ops, ctx["peak"][1], targets)
            print("load average at the end: %s" % " ".join(
                "%.2f" % x for x in os.getloadavg()))
        if a.accuracy:
            print()
            accuracy(a, ctx, targets)
        mb.print_targets(targets, width=72)
        mb.close_run(ctx, a.keep, t0)
    except BenchError as e:
        return mb.report_error(e, ctx)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
