#!/usr/bin/env python3
"""MultiWorkerMirroredStrategy vs ParameterServerStrategy: when is each faster?

Runs the seeds' MLP on Fashion-MNIST with `mwms` and `ps` at 1..4 workers and
the same global batch, under four conditions:

  none       every task on this host (`strata launch`, loopback tcp; mwms
             all-reduces through shared memory there)
  straggler  the same, with worker:1 sleeping debug.step_delay_ms in every
             step (core/run/train.c: train_step, the task named by
             debug.delay_task)
  netns      every task in a network namespace of its own ("its own host"),
             all joined by a bridge: tcp between hosts, no shared memory;
             the control for slowlink
  slowlink   the same namespaces, every task's link shaped with `tc tbf`
             (rate and peakrate) to --rate in both directions

netns and slowlink need root and iproute2; without them they are skipped
with the reason printed. The script prints one table: seconds per epoch,
samples/s and final test accuracy. See README.md beside this file.
"""

import argparse
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
LAYERS = "dense 128 relu, dense 10"
NPS = 2  # parameter-server tasks of every ps run
BASE_PORT = 29400


class BenchError(Exception):
    pass


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--strata", help="strata binary (default: $STRATA_BIN, "
                   "then build/bin/strata under the repository)")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--workers", default="1,2,3,4",
                   help="worker counts (%(default)s)")
    p.add_argument("--strategies", default="mwms,ps")
    p.add_argument("--conditions", default="none,straggler,netns,slowlink",
                   help="of none, straggler, netns, slowlink (%(default)s)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--limit-train", type=int, default=20000)
    p.add_argument("--batch", type=int, default=60,
                   help="global batch: mwms splits it over the workers, ps "
                        "hands each step's whole batch to one worker; "
                        "mwms needs it to split evenly: %(default)s = 1..4 "
                        "workers)")
    p.add_argument("--rounds", type=int, default=2,
                   help="repeat every run; the best is reported with the "
                        "spread (%(default)s)")
    p.add_argument("--delay-ms", type=int, default=10,
                   help="straggler: debug.step_delay_ms of worker:1 "
                        "(%(default)s)")
    p.add_argument("--rate", default="500mbit",
                   help="slowlink: tc tbf rate of every task's link, each "
                        "direction (%(default)s)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--run-timeout", type=float, default=150.0,
                   help="seconds before one run is killed (%(default)s)")
    p.add_argument("--keep", metavar="DIR",
                   help="keep logs and metrics in DIR")
    p.add_argument("--markdown", action="store_true",
                   help="print the table as Markdown")
    a = p.parse_args(argv)
    try:
        a.workers = [int(w) for w in a.workers.split(",") if w.strip()]
    except ValueError:
        p.error("--workers: comma-separated integers")
    a.strategies = [s for s in a.strategies.split(",") if s]
    a.conditions = [c for c in a.conditions.split(",") if c]
    if not a.workers or min(a.workers) < 1 or max(a.workers) > 8:
        p.error("--workers: 1..8")
    if set(a.strategies) - {"mwms", "ps"} or not a.strategies:
        p.error("--strategies: mwms, ps")
    if set(a.conditions) - {"none", "straggler", "netns", "slowlink"}:
        p.error("--conditions: none, straggler, netns, slowlink")
    if any(a.batch % w for w in a.workers):
        p.error("--batch must split evenly over every worker count")
    if not re.fullmatch(r"[1-9]\d*(kbit|mbit|gbit)", a.rate):
        p.error("--rate: a number followed by kbit, mbit or gbit")
    if a.epochs < 1 or a.rounds < 1 or a.delay_ms < 0:
        p.error("--epochs, --rounds >= 1, --delay-ms >= 0")
    return a


def progress(msg):
    print("... " + msg, file=sys.stderr, flush=True)


def find_strata(a):
    for cand in (a.strata, os.environ.get("STRATA_BIN"),
                 os.path.join(REPO, "build", "bin", "strata")):
        if cand:
            if os.path.isfile(cand) and os.access(cand, os.X_OK):
                return os.path.abspath(cand)
            if cand in (a.strata, os.environ.get("STRATA_BIN")):
                break  # an explicit path never falls back
    raise BenchError("strata binary not found (--strata PATH or STRATA_BIN)")


# ---- what every task is given ---------------------------------------------

def settings(a, strategy, csv_path, delay):
    s = ["train.epochs=%d" % a.epochs, "train.batch_size=%d" % a.batch,
         "train.seed=%d" % a.seed, "train.devices=cpu:0",
         "train.progress=none", "train.eval=true",
         "train.metrics_csv=" + csv_path, "model.layers=" + LAYERS,
         "optimizer.name=adam", "optimizer.lr=0.001",
         "data.dir=" + a.data, "data.limit_train=%d" % a.limit_train,
         "strategy.plugin=" + strategy, "transport.plugin=zmq"]
    if delay:
        s += ["debug.step_delay_ms=%d" % delay, "debug.delay_task=worker:1"]
    out = []
    for kv in s:
        out += ["--set", kv]
    return out


def ini_of(strategy):
    return os.path.join(REPO, "etc", strategy + ".ini")


def tasks_of(strategy, n):
    """(type, index) of every task, in TF_CONFIG's order."""
    if strategy == "mwms":
        return [("worker", i) for i in range(n)]
    return ([("chief", 0)] + [("worker", i) for i in range(n)]
            + [("ps", j) for j in range(NPS)])


def read_metrics(path, what, epochs):
    try:
        with open(path, newline="") as f:
            rows = [{k: float(v) for k, v in r.items()}
                    for r in csv.DictReader(f)]
    except (OSError, ValueError, TypeError) as e:
        raise BenchError("%s: cannot read metrics %s: %s" % (what, path, e))
    if len(rows) != epochs:
        raise BenchError("%s: %d epoch rows in %s, expected %d"
                         % (what, len(rows), path, epochs))
    return rows


def tail(path, n=12):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


# ---- network namespaces ---------------------------------------------------

class Netns:
    """A hub namespace with a bridge, and one namespace per task slot joined
    to it by a veth pair: slot i is 10.X.Y.(i+1)."""

    def __init__(self, slots):
        pid = os.getpid()
        self.prefix = "sbench%d" % pid
        self.net = "10.%d.%d." % (200 + pid % 50, (pid // 50) % 250)
        self.hub = self.prefix + "-hub"
        self.ns = []
        self.made = []
        self.shaped = None
        try:
            self._ip("netns", "add", self.hub)
            self.made.append(self.hub)
            self._ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
            self._ip("-n", self.hub, "link", "set", "br0", "up")
            for i in range(slots):
                ns = "%s-t%d" % (self.prefix, i)
                self._ip("netns", "add", ns)
                self.made.append(ns)
                self._ip("link", "add", "eth0", "netns", ns, "type", "veth",
                         "peer", "name", "h%d" % i, "netns", self.hub)
                self._ip("-n", self.hub, "link", "set", "h%d" % i, "master",
                         "br0")
                self._ip("-n", self.hub, "link", "set", "h%d" % i, "up")
                self._ip("-n", ns, "addr", "add", self.addr(i) + "/24",
                         "dev", "eth0")
                self._ip("-n", ns, "link", "set", "eth0", "up")
                self._ip("-n", ns, "link", "set", "lo", "up")
                self.ns.append(ns)
        except BenchError:
            self.close()
            raise

    @staticmethod
    def _ip(*args, tool="ip"):
        try:
            r = subprocess.run([tool] + list(args), capture_output=True,
                               text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise BenchError("%s %s: %s" % (tool, " ".join(args), e))
        if r.returncode != 0:
            raise BenchError("%s %s: %s" % (tool, " ".join(args),
                                            r.stderr.strip()))
        return r.stdout

    def addr(self, i):
        return self.net + str(i + 1)

    def shape(self, rate):
        """tbf on both ends of every veth: the task's upload and download.
        Its buckets must hold a whole 64 KiB GSO segment (tbf drops larger
        packets), and a 70 KB bucket alone would let part of every step's
        400 KB message through at memory speed after the compute pause:
        peakrate (just above rate) paces those bursts too."""
        if rate == self.shaped:
            return
        peak = None
        if rate:
            m = re.fullmatch(r"(\d+)(kbit|mbit|gbit)", rate)
            peak = "%d%s" % (int(m.group(1)) * 1001 // 1000 + 1, m.group(2))
        for i, ns in enumerate(self.ns):
            for where, dev in ((ns, "eth0"), (self.hub, "h%d" % i)):
                if rate:
                    self._ip("-n", where, "qdisc", "replace", "dev", dev,
                             "root", "tbf", "rate", rate, "burst", "70kb",
                             "latency", "50ms", "peakrate", peak, "mtu",
                             "70kb", tool="tc")
                elif self.shaped:
                    self._ip("-n", where, "qdisc", "del", "dev", dev, "root",
                             tool="tc")
        self.shaped = rate

    def close(self):
        for ns in reversed(self.made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.made = []


def netns_unavailable():
    if os.geteuid() != 0:
        return "not root: network namespaces and tc need CAP_NET_ADMIN"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return "%s (iproute2) not installed" % tool
    return None


def measure_link(nets, a):
    """Bytes/s from slot 0 to slot 1 through the shaped link: a check that
    the shaping does what it says."""
    port = BASE_PORT - 1
    size = 16 << 20
    srv = ("import socket,time\n"
           "s=socket.socket();s.setsockopt(socket.SOL_SOCKET,"
           "socket.SO_REUSEADDR,1);s.bind(('%s',%d));s.listen(1)\n"
           "c,_=s.accept();n=0;t=time.monotonic()\n"
           "while True:\n d=c.recv(1<<20)\n if not d: break\n n+=len(d)\n"
           "print(n/(time.monotonic()-t))\n" % (nets.addr(1), port))
    cli = ("import socket,time\n"
           "for i in range(100):\n"
           " try:\n  s=socket.create_connection(('%s',%d));break\n"
           " except OSError: time.sleep(0.05)\n"
           "s.sendall(bytes(%d));s.close()\n" % (nets.addr(1), port, size))
    ps = subprocess.Popen(["ip", "netns", "exec", nets.ns[1], sys.executable,
                           "-c", srv], stdout=subprocess.PIPE, text=True)
    subprocess.run(["ip", "netns", "exec", nets.ns[0], sys.executable, "-c",
                    cli], timeout=60)
    out, _ = ps.communicate(timeout=60)
    try:
        return float(out.strip())
    except ValueError:
        return None


# ---- one run --------------------------------------------------------------

def wait_all(procs, timeout, what, logs):
    """Wait for every process; on a failure or the timeout stop the rest."""
    deadline = time.monotonic() + timeout
    rcs = [None] * len(procs)
    failed = None
    while any(r is None for r in rcs):
        for i, p in enumerate(procs):
            if rcs[i] is None:
                rcs[i] = p.poll()
                if rcs[i] not in (None, 0) and failed is None:
                    failed = i
        if failed is not None or time.monotonic() > deadline:
            for i, p in enumerate(procs):
                if rcs[i] is None:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except OSError:
                        pass
            for i, p in enumerate(procs):
                if rcs[i] is None:
                    rcs[i] = p.wait()
            why = ("timed out after %.0f s" % timeout if failed is None
                   else "task %d exited %d" % (failed, rcs[failed]))
            log = logs[failed if failed is not None else 0]
            raise BenchError("%s: %s; last lines of %s:\n%s"
                             % (what, why, log, tail(log)))
        time.sleep(0.05)


def run_once(a, ctx, strategy, n, cond, tag):
    d = ctx["dir"]
    csv_path = os.path.join(d, tag + ".csv")
    delay = a.delay_ms if cond == "straggler" else 0
    sets = settings(a, strategy, csv_path, delay)
    logs = []
    t0 = time.monotonic()
    if cond in ("none", "straggler"):
        cmd = [ctx["strata"], "launch"]
        cmd += (["-n", str(n)] if strategy == "mwms" else
                ["--ps", str(NPS), "--workers", str(n), "--chief"])
        cmd += ["-c", ini_of(strategy)] + sets
        log = os.path.join(d, tag + ".log")
        logs.append(log)
        with open(log, "w") as f:
            f.write("$ " + " ".join(cmd) + "\n")
            f.flush()
            procs = [subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL,
                                      start_new_session=True)]
    else:
        nets = ctx["netns"]
        nets.shape(a.rate if cond == "slowlink" else None)
        tasks = tasks_of(strategy, n)
        ctx["port"] += 1
        port = BASE_PORT + ctx["port"] % 1000
        slot = {}
        for i, t in enumerate(tasks):  # ps: chief 0, workers 1.., ps last
            slot[t] = i
        cluster = {}
        for t in tasks:
            cluster.setdefault(t[0], []).append(
                "%s:%d" % (nets.addr(slot[t]), port))
        # The job's CURVE keys, as a user makes them for tasks started by
        # hand (strata launch makes its own).
        keys = os.path.join(d, "keys-" + tag)
        subprocess.run([ctx["strata"], "keygen", keys] +
                       ["%s:%d" % t for t in tasks], check=True,
                       stdout=subprocess.DEVNULL)
        procs = []
        for t in tasks:
            tf = json.dumps({"cluster": cluster,
                             "task": {"type": t[0], "index": t[1]}})
            env = dict(os.environ, TF_CONFIG=tf, STRATA_SECURITY_KEYS=keys)
            cmd = ["ip", "netns", "exec", nets.ns[slot[t]], ctx["strata"],
                   "train", "-c", ini_of(strategy)] + sets
            log = os.path.join(d, "%s-%s%d.log" % (tag, t[0], t[1]))
            logs.append(log)
            with open(log, "w") as f:
                f.write("$ TF_CONFIG='%s' %s\n" % (tf, " ".join(cmd)))
                f.flush()
                procs.append(subprocess.Popen(
                    cmd, stdout=f, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, env=env,
                    start_new_session=True))
    ctx["procs"] = procs  # main() kills them if we are interrupted
    wait_all(procs, a.run_timeout, tag, logs)
    ctx["procs"] = []
    wall = time.monotonic() - t0
    rows = read_metrics(csv_path, tag, a.epochs)
    # ps: how many steps each worker ran (the coordinator's last lines)
    steps = {}
    ran = re.compile(r"ps: worker:(\d+) ran (\d+) steps")
    for log in logs:
        with open(log, errors="replace") as f:
            for m in ran.finditer(f.read()):
                steps[int(m.group(1))] = int(m.group(2))
    return {"sec": min(r["seconds"] for r in rows),
            "sps": max(r["samples_per_s"] for r in rows),
            "acc": rows[-1]["val_accuracy"], "wall": wall, "steps": steps}


# ---- the table ------------------------------------------------------------

def plan(a):
    out = []
    for cond in a.conditions:
        for strategy in a.strategies:
            for n in a.workers:
                if cond == "straggler" and n < 2:
                    continue  # no worker:1 to slow down
                out.append((strategy, n, cond))
    return out


def fmt_row(key, runs, a, md):
    strategy, n, cond = key
    if not runs:
        cells = ["n/a"] * 5
    else:
        best = min(runs, key=lambda r: r["sec"])
        secs = [r["sec"] for r in runs]
        spread = (max(secs) - min(secs)) / min(secs) * 100 if secs[0] else 0
        accs = [r["acc"] * 100 for r in runs]
        acc = "%.2f" % (sum(accs) / len(accs))
        if len(accs) > 1:
            acc += " (%.2f-%.2f)" % (min(accs), max(accs))
        note = ""
        if best["steps"] and 1 in best["steps"]:
            total = sum(best["steps"].values())
            note = "w1 ran %d/%d steps" % (best["steps"][1], total)
        cells = ["%.2f" % best["sec"],
                 "%.0f%%" % spread if len(runs) > 1 else "-",
                 "%.0f" % best["sps"], acc, note]
    label = {"none": "none", "straggler": "straggler %d ms" % a.delay_ms,
             "netns": "netns, no limit", "slowlink": "slow link %s" % a.rate}
    vals = [strategy, str(n), label[cond]] + cells
    if md:
        return "| " + " | ".join(vals) + " |"
    return "%-5s %3s  %-20s %8s %7s %10s  %-20s %s" % tuple(vals)


def report(a, results, skipped, md):
    hdr = ["strategy", "workers", "condition", "s/epoch", "spread",
           "samples/s", "test acc % (mean, range)", "note"]
    print()
    print("Best of %d round(s); s/epoch: the fastest epoch of the best run "
          "(training only, eval excluded); spread: (slowest - fastest) / "
          "fastest over the rounds; test acc after epoch %d."
          % (a.rounds, a.epochs))
    if md:
        print()
        print("| " + " | ".join(hdr) + " |")
        print("|" + "---|" * len(hdr))
    else:
        print("%-5s %3s  %-20s %8s %7s %10s  %-20s %s" % (
            "strat", "n", "condition", "s/epoch", "spread", "samples/s",
            "test acc %", "note"))
        print("-" * 100)
    for key in plan(a):
        if key[2] in skipped:
            continue
        print(fmt_row(key, results.get(key, []), a, md))
    for cond, why in skipped.items():
        print("%s: skipped: %s" % (cond, why))


def main(argv):
    a = parse_args(argv)
    t0 = time.monotonic()
    ctx = {"procs": [], "port": 0, "netns": None}
    results, skipped = {}, {}
    rc = 1

    def on_signal(sig, _frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    try:
        if not os.path.isdir(a.data):
            raise BenchError("%s: no Fashion-MNIST here" % a.data)
        ctx["strata"] = find_strata(a)
        ctx["dir"] = (os.path.abspath(a.keep) if a.keep
                      else tempfile.mkdtemp(prefix="strata-stratbench-"))
        os.makedirs(ctx["dir"], exist_ok=True)
        print("strata: %s; %d CPUs; %s" % (ctx["strata"], os.cpu_count() or 0,
                                           " ".join(argv) or "(defaults)"))
        if {"netns", "slowlink"} & set(a.conditions):
            why = netns_unavailable()
            if why is None:
                try:
                    ctx["netns"] = Netns(max(a.workers) + NPS + 1)
                except BenchError as e:
                    why = "cannot build the namespaces: %s" % e
            if why is not None:
                for c in ("netns", "slowlink"):
                    if c in a.conditions:
                        skipped[c] = why
                        print("SKIPPED %s: %s" % (c, why))
            elif "slowlink" in a.conditions:
                ctx["netns"].shape(a.rate)
                bps = measure_link(ctx["netns"], a)
                print("slowlink: tc tbf %s on every task's link, both ways; "
                      "measured %s" % (a.rate, "%.0f Mbit/s" % (bps * 8e-6)
                                       if bps else "(no figure)"))
        todo = [k for k in plan(a) if k[2] not in skipped]
        for rnd in range(a.rounds):
            for key in todo:
                strategy, n, cond = key
                tag = "%s-n%d-%s-r%d" % (strategy, n, cond, rnd)
                progress("%s, %d worker(s), %s (round %d/%d, %.0f s so far)"
                         % (strategy, n, cond, rnd + 1, a.rounds,
                            time.monotonic() - t0))
                r = run_once(a, ctx, strategy, n, cond, tag)
                results.setdefault(key, []).append(r)
        report(a, results, skipped, a.markdown)
        print()
        print("total wall time: %.0f s" % (time.monotonic() - t0))
        rc = 0
    except BenchError as e:
        print("strategies bench: error: %s" % e, file=sys.stderr)
        rc = 2
    except KeyboardInterrupt:
        print("strategies bench: interrupted", file=sys.stderr)
        rc = 130
    finally:
        for p in ctx["procs"]:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            p.wait()
        if ctx["netns"]:
            ctx["netns"].close()
        if ctx.get("dir") and not a.keep:
            if rc == 0:
                shutil.rmtree(ctx["dir"], ignore_errors=True)
            else:
                print("logs kept in %s" % ctx["dir"], file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
