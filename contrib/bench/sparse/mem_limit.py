#!/usr/bin/env python3
"""A table that does not fit a worker (issue 25 item 7's memory case):
etc/recsys.ini's click model with an embedding table larger than the
memory limit each worker runs under -- a memory cgroup per worker, as a
container runtime sets it -- under mwms (every worker holds the model)
and under ps (the table on the ps tasks, a worker a batch's rows).

The job's tasks are on this host's loopback, started as on several
machines: the job's [cluster] names every task's address, one `strata
launch --tasks chief:0,ps:0,...` runs the coordinator and the ps tasks
(no limit: the machines that hold the table), and one `strata launch
--tasks worker:I` per worker runs in its own cgroup of --limit-mib.

For each strategy it prints the outcome (trained, or refused with the
one line strata prints), samples/s (the chief's metrics CSV, training
only), the bytes a worker moved per step (ps: its end line), and every
task's peak resident memory (the line each task prints at its end) with
the peak of each worker's cgroup.

    contrib/bench/sparse/mem_limit.py [--build build] [--rows 4000000]
        [--dim 64] [--workers 2] [--ps 2] [--limit-mib 512] [--steps 40]
        [--batch 512] [--keep DIR]

Root only (cgroups); exit 2 where no memory cgroup can be made.
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
INI = os.path.join(ROOT, "etc", "recsys.ini")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "scaling"))
import memcg  # noqa: E402
from ps_vs_mwms import make_data, ps_bytes  # noqa: E402
from train import free_ports  # noqa: E402  (contrib/bench/scaling/train.py)


def job_sets(a, d, strategy, tasks):
    """The --set words of every launch of one job: the same everywhere."""
    ports = free_ports(len(tasks))
    cluster = {}
    for (kind, _), port in zip(tasks, ports):
        cluster.setdefault(kind, []).append("127.0.0.1:%d" % port)
    s = ["data.dir=" + d,
         "graph.emb=embedding vocab=%d dim=%d <- ids" % (a.rows, a.dim),
         "train.batch_size=%d" % a.batch, "train.max_steps=%d" % a.steps,
         "train.eval=false", "train.progress=none", "train.devices=cpu:0",
         "data.validation_split=", "security.mode=off",
         "train.metrics_csv=" + os.path.join(d, strategy + ".csv"),
         "strategy.plugin=" + strategy]
    if strategy == "ps":
        # the chief's last pull takes whole shards (850 MB each for a
        # 10 M x 64 table on 3 ps): resent and given up by resend_ms's
        # rule (the bytes at 100 Mbit/s); its other waits get 120 s
        s += ["model.metric=accuracy",
              "strategy.ps.partitioner=fixed:%d" % a.ps,
              "strategy.ps.timeout_s=120"]
    s += ["cluster.%s=%s" % (k, ", ".join(v)) for k, v in cluster.items()]
    out = []
    for x in s:
        out += ["--set", x]
    return out


def run_job(a, d, strategy):
    """Start the job's launches, wait for all; (codes, text, cgroup peaks)."""
    workers = [("worker", i) for i in range(a.workers)]
    others = ([("chief", 0)] + [("ps", j) for j in range(a.ps)]
              if strategy == "ps" else [])
    sets = job_sets(a, d, strategy, others + workers)
    env = dict(os.environ, STRATA_PLUGIN_PATH=os.path.join(
        a.build, "lib", "strata", "plugins"))
    strata = os.path.join(a.build, "bin", "strata")
    procs, groups, logs = [], [], []
    try:
        launches = ([(",".join("%s:%d" % t for t in others), None)]
                    if others else [])
        for kind, i in workers:
            cg = memcg.make("strata-bench-%d-%s%d" % (os.getpid(), strategy,
                                                     i), a.limit_mib << 20)
            if not cg:
                sys.exit("mem_limit.py: cannot make a memory cgroup (root "
                         "and a memory controller needed)")
            groups.append(cg)
            launches.append(("%s:%d" % (kind, i), cg))
        for tasks, cg in launches:
            log = os.path.join(d, "%s-%s.log" % (strategy,
                                                 tasks.replace(",", "_")))
            logs.append(log)
            with open(log, "w") as f:
                procs.append(subprocess.Popen(
                    [strata, "launch", "--tasks", tasks, "-c", INI] + sets,
                    stdout=f, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, env=env,
                    preexec_fn=cg.enter if cg else None))
        codes = []
        for p in procs:
            try:
                codes.append(p.wait(timeout=a.timeout))
            except subprocess.TimeoutExpired:
                p.kill()
                codes.append(p.wait())
        peaks = [cg.peak() for cg in groups]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for cg in groups:
            cg.drop()
    text = "".join(open(x, errors="replace").read() for x in logs)
    return codes, text, peaks


def samples_per_s(d, strategy):
    try:
        with open(os.path.join(d, strategy + ".csv"), newline="") as f:
            rows = list(csv.DictReader(f))
        return float(rows[-1]["samples_per_s"])
    except (OSError, KeyError, IndexError, ValueError):
        return float("nan")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--rows", type=int, default=4000000,
                   help="table rows (4 features of rows/4 ids)")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--ps", type=int, default=2)
    p.add_argument("--limit-mib", type=int, default=512,
                   help="each worker's memory cgroup")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--keep", help="keep data and logs in this directory")
    a = p.parse_args(argv)
    a.build = os.path.abspath(a.build)
    probe = memcg.make("strata-bench-probe-%d" % os.getpid(), 1 << 30)
    if not probe:
        print("mem_limit.py: no memory cgroup can be made here (root and a "
              "memory controller needed)", file=sys.stderr)
        return 2
    probe.drop()
    d = a.keep or tempfile.mkdtemp(prefix="strata-memlimit-")
    os.makedirs(d, exist_ok=True)
    try:
        make_data(a, d)
        table = a.rows * a.dim * 4 / 2**20
        print("table %d x %d (%.0f MiB), %d workers each in a memory cgroup "
              "of %d MiB, batch %d, %d steps, loopback, plaintext"
              % (a.rows, a.dim, table, a.workers, a.limit_mib, a.batch,
                 a.steps))
        for strategy in ("mwms", "ps"):
            codes, text, peaks = run_job(a, d, strategy)
            refused = re.search(r"train: error: (the model does not fit "
                                r"[^\n]*)", text)
            ok = all(c == 0 for c in codes)
            print("\n%s: %s" % (strategy, "trained" if ok else
                                "refused: " + refused.group(1) if refused
                                else "failed (exit %s; logs in %s)"
                                % (codes, d)))
            if ok:
                print("  samples/s %.0f" % samples_per_s(d, strategy))
                b = ps_bytes(text)
                if b == b:  # not NaN: mwms has no such line
                    print("  worker:0 moved %.3f MB a step (pushes and "
                          "pulls)" % (b / 1e6))
            for task, mib in re.findall(
                    r"\[(\w+:\d+)\] strata: train: peak resident memory of "
                    r"this task: ([0-9.]+) MiB", text):
                print("  %-9s peak resident memory %8.1f MiB" % (task,
                                                                float(mib)))
            for i, pk in enumerate(peaks):
                if pk is not None:
                    print("  worker:%d's cgroup peak %.1f MiB (limit %d)"
                          % (i, pk / 2**20, a.limit_mib))
    finally:
        if not a.keep:
            shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
