#!/usr/bin/env python3
"""Checkpoints of a sharded table (issue 25 item 4): the ps tasks write
their parts in parallel (`[strategy.ps] checkpoint_parts = true`, plugin
ABI 2.13) against the coordinator gathering every shard and writing one
file alone (`false`), in the same run on the same data.

etc/recsys.ini's click model with a --rows x --dim table sharded over
--ps ps tasks (fixed:PS), one worker, Adam (the table and two slots),
`strata launch --ps PS -n 1 --chief` on loopback; one checkpoint at the
last step. For each way it prints the checkpoint's time (the core's
"checkpoint: wrote ... in S s": the state taken and every file written
and fsynced), the bytes on disk, and the peak resident memory of the
chief and of the ps tasks (each task's end line), then the ratios.

    contrib/bench/sparse/ckpt_parts.py [--build build] [--rows 4000000]
        [--dim 64] [--ps 2] [--steps 10] [--batch 512] [--keep DIR]
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
INI = os.path.join(ROOT, "etc", "recsys.ini")
sys.path.insert(0, HERE)
from ps_vs_mwms import make_data  # noqa: E402


def run_job(a, d, parts):
    ck = os.path.join(d, "ck-%s" % ("parts" if parts else "gathered"))
    sets = ["data.dir=" + d,
            "graph.emb=embedding vocab=%d dim=%d <- ids" % (a.rows, a.dim),
            "train.batch_size=%d" % a.batch, "train.max_steps=%d" % a.steps,
            "train.eval=false", "train.progress=none", "train.devices=cpu:0",
            "data.validation_split=", "model.metric=accuracy",
            "strategy.plugin=ps", "strategy.ps.partitioner=fixed:%d" % a.ps,
            "strategy.ps.checkpoint_parts=%s" % ("true" if parts else "false"),
            # whole shards travel to the coordinator (its pulls, and the
            # gathered checkpoint), in pieces: waited for 120 s
            "strategy.ps.timeout_s=120",
            "checkpoint.dir=" + ck, "checkpoint.every_steps=%d" % a.steps]
    cmd = [os.path.join(a.build, "bin", "strata"), "launch", "--ps",
           str(a.ps), "-n", "1", "--chief", "-c", INI]
    for s in sets:
        cmd += ["--set", s]
    env = dict(os.environ, STRATA_PLUGIN_PATH=os.path.join(
        a.build, "lib", "strata", "plugins"))
    r = subprocess.run(cmd, capture_output=True, text=True, env=env,
                       timeout=a.timeout, stdin=subprocess.DEVNULL)
    text = r.stdout + r.stderr
    secs = [float(x) for x in re.findall(
        r"checkpoint: wrote \S+ \([^)]*\) in ([0-9.]+) s", text)]
    peaks = dict(re.findall(r"\[(\w+:\d+)\] strata: train: peak resident "
                            r"memory of this task: ([0-9.]+) MiB", text))
    disk = sum(os.path.getsize(f) for f in glob.glob(os.path.join(ck, "*")))
    return r.returncode, text, secs, peaks, disk


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--rows", type=int, default=4000000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--ps", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--keep", help="keep data and checkpoints here")
    a = p.parse_args(argv)
    a.build = os.path.abspath(a.build)
    d = a.keep or tempfile.mkdtemp(prefix="strata-ckptparts-")
    os.makedirs(d, exist_ok=True)
    try:
        make_data(a, d)
        state = a.rows * a.dim * 4 * 3 / 2**20
        print("table %d x %d, Adam: %.0f MiB of state (values and 2 slots), "
              "%d ps tasks, 1 worker, one checkpoint at step %d, loopback"
              % (a.rows, a.dim, state, a.ps, a.steps))
        got = {}
        for parts in (False, True):
            code, text, secs, peaks, disk = run_job(a, d, parts)
            name = "parts (ps tasks write)" if parts else \
                "gathered (coordinator writes)"
            if code != 0 or len(secs) != 1:
                print("%s: failed (exit %d)\n%s" % (name, code, text[-3000:]))
                return 1
            got[parts] = (secs[0], peaks)
            ps_peak = max(float(v) for k, v in peaks.items()
                          if k.startswith("ps:"))
            print("%-31s checkpoint %7.2f s   on disk %7.0f MiB   chief peak "
                  "%7.0f MiB   largest ps peak %7.0f MiB"
                  % (name, secs[0], disk / 2**20,
                     float(peaks.get("chief:0", "nan")), ps_peak))
        (g, gp), (q, qp) = got[False], got[True]
        print("parts / gathered: checkpoint time %.2fx, chief peak %.2fx"
              % (q / g, float(qp["chief:0"]) / float(gp["chief:0"])))
    finally:
        if not a.keep:
            shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
