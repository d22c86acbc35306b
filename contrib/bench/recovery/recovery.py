#!/usr/bin/env python3
"""Recovery time of a job that loses a worker (kill -9), three ways:

  elastic  strata launch --elastic 1:W --max-restarts 1 (mwms): the others
           re-form without it and go on from memory
  ps       strata launch --ps 1 --chief -n W --max-restarts 1 (ps): the
           coordinator re-schedules its step, the others never stop
  restart  strata launch -n W --max-restarts 1 (mwms, not elastic) with
           [checkpoint] every_steps: the whole job starts again and resumes
           from its newest checkpoint

on the default job (the seeds' MLP on Fashion-MNIST, Adam, global batch
32), W workers of one CPU replica each. Each run waits until worker:1 has
applied --kill-at steps, kills it with SIGKILL, and reads debug.step_log
(one line per step applied, with the wall-clock time) for the first step
the job completes afterwards: in a generation after the first (elastic),
by any worker (ps), or again, from the checkpoint (restart). Prints a
table of medians over --runs runs; see README.md.
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time


def done_lines(path):
    """(step, generation, task, time) of every 'done' line of the log."""
    out = []
    try:
        with open(path) as f:
            for line in f:
                p = line.split()
                if len(p) == 5 and p[0] == "done":
                    out.append((int(p[3][1:]), int(p[2][1:]), p[1],
                                float(p[4][1:])))
    except FileNotFoundError:
        pass
    return out


def worker_pid(out_path, task):
    key = "[launch] %s: pid " % task
    with open(out_path) as f:
        for line in f:
            if line.startswith(key):
                return int(line[len(key):].split(",")[0])
    return None


def one_run(mode, args, work):
    log = os.path.join(work, "steps.log")
    ckpt = os.path.join(work, "ckpt")
    for p in (log,):
        if os.path.exists(p):
            os.unlink(p)
    shutil.rmtree(ckpt, ignore_errors=True)
    w = str(args.workers)
    sets = ["train.devices=cpu:0", "train.progress=none",
            "train.epochs=%d" % args.epochs, "debug.step_log=" + log]
    if mode == "elastic":
        cmd = ["--elastic", "1:" + w, "--max-restarts", "1"]
        sets.append("strategy.plugin=mwms")
    elif mode == "ps":
        cmd = ["--ps", "1", "--chief", "-n", w, "--max-restarts", "1"]
        sets.append("strategy.plugin=ps")
    else:
        cmd = ["-n", w, "--max-restarts", "1"]
        sets += ["strategy.plugin=mwms", "checkpoint.dir=" + ckpt,
                 "checkpoint.every_steps=%d" % args.every_steps]
    argv = [args.strata, "launch"] + cmd
    for s in sets:
        argv += ["--set", s]
    out_path = os.path.join(work, "launch.out")
    with open(out_path, "w") as out, open(os.path.join(work, "launch.err"),
                                          "w") as err:
        job = subprocess.Popen(argv, stdout=out, stderr=err)
    try:
        t_end = time.time() + args.timeout
        while time.time() < t_end and job.poll() is None:
            lines = [d for d in done_lines(log) if d[2] == "worker:1"]
            if lines and max(d[0] for d in lines) >= args.kill_at:
                break
            time.sleep(0.02)
        pid = worker_pid(out_path, "worker:1")
        if job.poll() is not None or pid is None:
            raise RuntimeError("%s: worker:1 did not reach step %d (see %s)"
                               % (mode, args.kill_at, work))
        before = max(d[0] for d in done_lines(log))
        newest = before // args.every_steps * args.every_steps
        t_kill = time.time()
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            raise RuntimeError("%s: worker:1 had already exited (see %s)"
                               % (mode, work))
        first = ahead = None
        while time.time() < t_end and ahead is None and job.poll() is None:
            for d in done_lines(log):
                if d[3] <= t_kill:
                    continue
                # restart: a step of the job started again, which goes on
                # from the newest checkpoint (a survivor of the old one may
                # still finish the step in flight as it dies)
                if ((mode == "elastic" and d[1] >= 1) or mode == "ps" or
                        (mode == "restart" and d[0] <= newest)):
                    if first is None or d[3] < first[3]:
                        first = d
                if first and d[3] >= first[3] and d[0] > before and (
                        ahead is None or d[3] < ahead[3]):
                    ahead = d
            time.sleep(0.02)
        if first is None or ahead is None:
            raise RuntimeError("%s: no step completed after the kill (see %s)"
                               % (mode, work))
        redone = max(0, before + 1 - first[0])
        return first[3] - t_kill, ahead[3] - t_kill, redone
    finally:
        if job.poll() is None:
            job.send_signal(signal.SIGTERM)
            try:
                job.wait(30)
            except subprocess.TimeoutExpired:
                job.kill()
                job.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--strata", default=os.environ.get("STRATA_BIN"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--kill-at", type=int, default=700,
                    help="steps worker:1 applies before it is killed")
    ap.add_argument("--every-steps", type=int, default=500,
                    help="restart: [checkpoint] every_steps")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--modes", default="elastic,ps,restart")
    ap.add_argument("--keep", help="keep the logs in this directory")
    args = ap.parse_args()
    if not args.strata or not os.access(args.strata, os.X_OK):
        sys.exit("recovery.py: no strata binary (--strata or STRATA_BIN)")
    work = args.keep or tempfile.mkdtemp(prefix="strata-recovery-")
    os.makedirs(work, exist_ok=True)
    modes = args.modes.split(",")
    res = {m: [] for m in modes}
    for r in range(args.runs):  # interleaved: a burst of load hits one run
        for m in modes:
            d = os.path.join(work, "%s-%d" % (m, r))
            os.makedirs(d, exist_ok=True)
            try:
                secs, back, redone = one_run(m, args, d)
            except RuntimeError as e:  # counted, kept, and the next run
                print("run %d %s failed: %s" % (r + 1, m, e), file=sys.stderr)
                args.keep = work
                continue
            res[m].append((secs, back, redone))
            print("run %d %-8s %7.3f s, back at the step of the kill after "
                  "%.3f s, %d steps redone" % (r + 1, m, secs, back, redone),
                  file=sys.stderr)
    what = {
        "elastic": "elastic mwms (--elastic 1:%d)" % args.workers,
        "ps": "ps under launch (1 ps, chief, %d workers)" % args.workers,
        "restart": "mwms restarted whole from a checkpoint (every %d steps)"
                   % args.every_steps,
    }
    print("\nworker:1 of %d killed (-9) after %d steps; seconds from the kill "
          "to the first step completed afterwards (recovery) and to the "
          "first step past the one reached before the kill (back), median "
          "of %d runs:\n" % (args.workers, args.kill_at, args.runs))
    print("| job | recovery (s) | min - max | back (s) | steps redone |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for m in modes:
        if not res[m]:
            print("| %s | no run succeeded | | | |" % what[m])
            continue
        s = [x[0] for x in res[m]]
        print("| %s | %.3f | %.3f - %.3f | %.3f | %d |"
              % (what[m], statistics.median(s), min(s), max(s),
                 statistics.median([x[1] for x in res[m]]),
                 statistics.median([x[2] for x in res[m]])))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
