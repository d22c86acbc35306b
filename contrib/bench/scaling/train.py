#!/usr/bin/env python3
"""One training run of the scaling study: mwms with W workers, or ps with P
ps tasks, W workers and a chief, each task a `strata train` process started
here with its TF_CONFIG (as a user starts them by hand), on loopback or each
in a network namespace of its own (made and shaped by run.sh).

    train.py --strata BIN --model mlp|cnn|recsys
             --strategy mwms|mwms-dense|ps --workers W [--ps P]
             [--steps S] [--batch B]
             [--ns PREFIX --net 10.A.B.] [--label L] [--timeout SECONDS]
             [--dir DIR] [--data DIR] [--table ROWSxDIM]

recsys: etc/recsys.ini's click model with its table grown to --table
(default 1000000x64), on --data made by contrib/recsys/make_data.py with
rows/4 ids a feature (mwms moves the table's gradient as rows while they
are few, ps pushes and pulls rows). mwms-dense is mwms with
[strategy.mwms] sparse_as_dense = true (Horovod's name): the table's
gradient always as the dense all-reduce of the whole table, never as
rows; its TRAIN and TASKCPU lines name the strategy mwms-dense.

Prints one line "TRAIN <label> <model> <strategy> <W> <P> <samples/s>
<train seconds> <steps> <wall s>" (samples/s and seconds from the chief's
train.metrics_csv: training only, start-up and the job's set-up excluded)
and one "TASKCPU <label> <model> <strategy> <W> <P> <task> <user s>
<sys s> <wall s>" per task (wait4: the task's whole process). Exit 1 with
the failing task's last lines when a task fails or the run times out
(every task is then killed and reaped).
"""

import argparse
import csv
import json
import os
import signal
import socket
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
MODELS = {
    # the default job's MLP: 101,770 parameters, a 407 KB gradient
    "mlp": "dense 128 relu, dense 10",
    # etc/seeds-cnn.ini's convnet: 2,378,826 parameters, 9.5 MB
    "cnn": "conv2d 32 3 relu, conv2d 64 3 relu, flatten, dense 64 relu, "
           "dense 10 softmax",
    # etc/recsys.ini's graph, its table grown to --table
    "recsys": None,
}
NS_PORT = 29700


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def tail(path, n=8):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--strata", required=True)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--model", choices=sorted(MODELS), default="mlp")
    p.add_argument("--strategy", choices=("mwms", "mwms-dense", "ps"),
                   default="mwms")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--ps", type=int, default=1)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--ns", help="namespace prefix: task slot i runs in "
                   "PREFIX-t<i>, address NET<i+1>")
    p.add_argument("--net")
    p.add_argument("--label", default="loopback")
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--dir")
    p.add_argument("--table", default="1000000x64",
                   help="recsys: the embedding table, ROWSxDIM")
    a = p.parse_args(argv)
    if not 1 <= a.workers <= 8 or not 1 <= a.ps <= 4 or a.steps < 1:
        p.error("--workers 1..8, --ps 1..4, --steps >= 1")
    # the plugin: mwms-dense is mwms with sparse_as_dense
    plugin = a.strategy.split("-")[0]
    if plugin == "mwms" and a.batch % a.workers:
        p.error("mwms: --batch must split evenly over the workers")
    if bool(a.ns) != bool(a.net):
        p.error("--ns and --net go together")

    if plugin == "mwms":
        tasks = [("worker", i) for i in range(a.workers)]
    else:
        tasks = ([("chief", 0)] + [("worker", i) for i in range(a.workers)]
                 + [("ps", j) for j in range(a.ps)])
    if a.ns:
        addrs = ["%s%d:%d" % (a.net, i + 1, NS_PORT) for i in range(len(tasks))]
    else:
        addrs = ["127.0.0.1:%d" % q for q in free_ports(len(tasks))]
    cluster = {}
    for t, addr in zip(tasks, addrs):
        cluster.setdefault(t[0], []).append(addr)

    d = a.dir or tempfile.mkdtemp(prefix="strata-scaling-")
    os.makedirs(d, exist_ok=True)
    tag = "%s-%s-%s-w%d-p%d" % (a.label, a.model, a.strategy, a.workers,
                                a.ps if a.strategy == "ps" else 0)
    csv_path = os.path.join(d, tag + ".csv")
    try:
        os.unlink(csv_path)
    except OSError:
        pass
    sets = ["train.epochs=1", "train.max_steps=%d" % a.steps,
            "train.batch_size=%d" % a.batch, "train.seed=1",
            "train.devices=cpu:0", "train.progress=none", "train.eval=false",
            "train.metrics_csv=" + csv_path,
            "optimizer.name=adam", "optimizer.lr=0.001",
            "data.dir=" + a.data,
            "data.limit_train=%d" % (a.steps * a.batch),
            "strategy.plugin=" + plugin, "transport.world=zmq",
            # plaintext TCP between the tasks, as the all-reduce runs
            "security.mode=off", "transport.zmq.shm=off"]
    if a.strategy == "ps":
        # every variable of >= 64 KiB split over all the ps tasks
        sets.append("strategy.ps.partitioner=min_size:64K:%d" % a.ps)
    if a.strategy == "mwms-dense":
        # Horovod's sparse_as_dense: the table's gradient all-reduced whole
        # every step, one collective of the whole variable (256 MB for
        # 1 M x 64: the ring's 2(W-1)/W of it is about 40 s at 100 Mbit/s
        # with 8 workers), near zmq's default bound of 60 s on one
        # collective: 600 s
        sets += ["strategy.mwms.sparse_as_dense=true",
                 "transport.zmq.timeout_s=600"]
    if a.model == "recsys":
        rows, dim = (int(x) for x in a.table.split("x"))
        sets += ["strategy.plugin=" + plugin, "data.validation_split=",
                 "graph.emb=embedding vocab=%d dim=%d <- ids" % (rows, dim)]
        if a.strategy == "ps":
            # ps reports sums, no AUC. The chief's last pull takes a whole
            # shard (256 MB for 1 M x 64 on one ps: 2 s at 1 Gbit/s, 20 at
            # 100 Mbit/s; 813 MB for 10 M x 64 on 3): its resends and
            # deadline allow for the bytes (resend_ms's rule), zmq's
            # frames of 1 MiB outlive heartbeats; the coordinator's other
            # waits (its checkpoints) get 120 s.
            sets += ["model.metric=accuracy", "strategy.ps.timeout_s=120"]
        ini = os.path.join(REPO, "etc", "recsys.ini")
    else:
        sets.append("model.layers=" + MODELS[a.model])
        ini = os.path.join(REPO, "etc", plugin + ".ini")
    args = []
    for kv in sets:
        args += ["--set", kv]

    procs, logs = [], []

    def on_term(_sig, _frame):
        raise KeyboardInterrupt  # the finally below kills and reaps

    signal.signal(signal.SIGTERM, on_term)
    t0 = time.monotonic()
    failed = None
    usage = {}
    try:
        for slot, t in enumerate(tasks):
            tf = json.dumps({"cluster": cluster,
                             "task": {"type": t[0], "index": t[1]}})
            cmd = [a.strata, "train", "-c", ini] + args
            if a.ns:  # ip netns exec execs the command: wait4 sees strata
                cmd = ["ip", "netns", "exec", "%s-t%d" % (a.ns, slot)] + cmd
            log = os.path.join(d, "%s-%s%d.log" % (tag, t[0], t[1]))
            logs.append(log)
            with open(log, "w") as f:
                f.write("$ TF_CONFIG='%s' %s\n" % (tf, " ".join(cmd)))
                f.flush()
                pid = os.fork()
                if pid == 0:  # the child: its own process group, then exec
                    try:
                        os.setpgid(0, 0)
                        os.dup2(f.fileno(), 1)
                        os.dup2(f.fileno(), 2)
                        fd0 = os.open(os.devnull, os.O_RDONLY)
                        os.dup2(fd0, 0)
                        os.environ["TF_CONFIG"] = tf
                        os.execvp(cmd[0], cmd)
                    finally:
                        os._exit(127)
                procs.append(pid)
        rcs = {}
        deadline = t0 + a.timeout
        while len(rcs) < len(procs):
            for i, pid in enumerate(procs):
                if i in rcs:
                    continue
                r_pid, status, ru = os.wait4(pid, os.WNOHANG)
                if r_pid == pid:
                    rcs[i] = os.waitstatus_to_exitcode(status)
                    usage[i] = (ru.ru_utime, ru.ru_stime,
                                time.monotonic() - t0)
                    if rcs[i] != 0 and failed is None:
                        failed = (i, "exited %d" % rcs[i])
            if len(rcs) == len(procs):
                break
            if failed is None and time.monotonic() > deadline:
                failed = (0, "timed out after %.0f s" % a.timeout)
            if failed is not None:
                break
            time.sleep(0.02)
    finally:
        # stop and reap whatever is left (a failure, a timeout, a signal)
        for i, pid in enumerate(procs):
            if i not in usage:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
        for i, pid in enumerate(procs):
            if i not in usage:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
    wall = time.monotonic() - t0
    if failed is not None:
        i, why = failed
        print("train.py: %s: task %s:%d %s; last lines of %s:\n%s"
              % (tag, tasks[i][0], tasks[i][1], why, logs[i], tail(logs[i])),
              file=sys.stderr)
        return 1
    try:
        with open(csv_path, newline="") as f:
            rows = list(csv.DictReader(f))
        sps = float(rows[-1]["samples_per_s"])
        secs = float(rows[-1]["seconds"])
        steps = int(float(rows[-1].get("steps", a.steps) or a.steps))
    except (OSError, ValueError, KeyError, IndexError) as e:
        print("train.py: %s: no figures in %s: %s" % (tag, csv_path, e),
              file=sys.stderr)
        return 1
    npss = a.ps if a.strategy == "ps" else 0
    print("TRAIN %s %s %s %d %d %.1f %.4f %d %.2f"
          % (a.label, a.model, a.strategy, a.workers, npss, sps, secs, steps,
             wall))
    for i, t in enumerate(tasks):
        u, s, w = usage[i]
        print("TASKCPU %s %s %s %d %d %s:%d %.3f %.3f %.2f"
              % (a.label, a.model, a.strategy, a.workers, npss, t[0], t[1],
                 u, s, w))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
