#!/usr/bin/env python3
"""An embedding table bigger than a worker may hold (issue 25 item 4),
through `strata launch` as a user runs it, on etc/recsys.ini:

  - ps (launch --ps 2 -n 1 --chief): the table of 2 000 000 rows x 64
    (512 MiB) lives on the ps tasks; the worker pulls and pushes a batch's
    rows and holds no more: its peak resident memory (the line every task
    of a job prints at its end) is within 48 MiB of the same job's with a
    table of 20 000 rows, while each ps task's grows by at least its half
    of the table; the job trains (exactly once, train loss finite);
  - mwms with the same table under a memory limit it cannot fit (the
    model's values twice, initial values and the strategy's copy) is
    refused before it trains, exit 1, one line naming the figures and
    the limit: under `ulimit -v` (RLIMIT_AS; not under a sanitizer, whose
    shadow memory needs the address space) and, where this user may make
    one, in a cgroup with a memory limit (v1 memory.limit_in_bytes or v2
    memory.max), which the line names.

Environment: STRATA_BIN, STRATA_PLUGIN_PATH, STRATA_SRC (set by ctest),
STRATA_SANITIZED (1 in a sanitizer's build). Exit 77 (skipped) when numpy
is missing."""

import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy  # noqa: F401  (make_data.py's)
except ImportError:
    print("SKIPPED: python3 cannot import numpy (apt install python3-numpy)")
    sys.exit(77)

SRC = os.environ.get("STRATA_SRC", ".")
BIN = os.environ.get("STRATA_BIN", os.path.join(SRC, "build/bin/strata"))
GEN = os.path.join(SRC, "contrib", "recsys", "make_data.py")
INI = os.path.join(SRC, "etc", "recsys.ini")
SANITIZED = os.environ.get("STRATA_SANITIZED") == "1"
BIG, SMALL, DIM = 2000000, 20000, 64
MiB = 1 << 20
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
import pycheck  # noqa: E402  (tests/pycheck.py)
sys.path.insert(0, os.path.join(SRC, "contrib", "bench", "sparse"))
import memcg  # noqa: E402  (the benchmark's memory cgroups)


def check(cond, what, detail=""):
    return pycheck.check(cond, what, detail[-3000:])


def run(cmd, timeout=240, preexec=None):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL,
                       preexec_fn=preexec)
    return r.returncode, r.stdout + r.stderr


def sets(data, rows, strategy):
    s = ["data.dir=" + data, "strategy.plugin=" + strategy,
         "graph.emb=embedding vocab=%d dim=%d <- ids" % (rows, DIM),
         "train.max_steps=12", "train.devices=cpu:0", "train.eval=false",
         "train.progress=none", "optimizer.name=sgd",
         "data.validation_split=", "security.mode=off"]
    if strategy == "ps":
        s += ["strategy.ps.partitioner=fixed:2", "model.metric=accuracy"]
    out = []
    for x in s:
        out += ["--set", x]
    return out


def peaks(text):
    """{task: peak MiB} from the tasks' end lines."""
    return {t: float(v) for t, v in re.findall(
        r"\[(\w+:\d+)\] strata: train: peak resident memory of this task: "
        r"([0-9.]+) MiB", text)}


def ps_job(data, rows, preexec=None):
    return run([BIN, "launch", "--ps", "2", "-n", "1", "--chief", "-c", INI]
               + sets(data, rows, "ps"), 240, preexec)


def ps_holds_rows(data, data_small):
    code_s, small = ps_job(data_small, SMALL)
    code_b, big = ps_job(data, BIG)
    ok = check(code_s == 0 and code_b == 0 and
               "exactly once" in big and "train loss nan" not in big,
               "ps: launch --ps 2 -n 1 --chief trains with a table of %d "
               "and of %d rows" % (SMALL, BIG), small + big)
    ps_, pb = peaks(small), peaks(big)
    if not ok or not check(set(pb) >= {"worker:0", "ps:0", "ps:1",
                                       "chief:0"} and set(ps_) == set(pb),
                           "every task prints its peak resident memory",
                           big):
        return
    table = BIG * DIM * 4 / MiB
    grew = pb["worker:0"] - ps_["worker:0"]
    check(grew < 48, "the worker holds a batch's rows, not the %.0f MiB "
          "table: its peak %.1f MiB, %.1f with a table of %d rows (+%.1f)"
          % (table, pb["worker:0"], ps_["worker:0"], SMALL, grew), big)
    for t in ("ps:0", "ps:1"):
        check(pb[t] - ps_[t] >= table / 2,
              "%s holds its half of the table: peak %.1f MiB (%.1f with the "
              "small table)" % (t, pb[t], ps_[t]))


def limit_as(nbytes):
    def f():
        resource.setrlimit(resource.RLIMIT_AS, (nbytes, nbytes))
    return f


def mwms_refused(data):
    need = 2 * BIG * DIM * 4
    cmd = [BIN, "launch", "-n", "2", "-c", INI] + sets(data, BIG, "mwms")
    if SANITIZED:
        print("SKIPPED: ulimit -v: a sanitizer's shadow memory needs the "
              "address space")
    else:
        code, text = run(cmd, 120, limit_as(need * 3 // 4))
        m = re.search(r"does not fit this task's memory: .* need at least "
                      r"([0-9.]+) GiB, over the limit of ([0-9.]+) GiB "
                      r"\(RLIMIT_AS", text)
        check(code == 1 and m and
              abs(float(m.group(1)) - need / 2**30) < 0.02 and
              abs(float(m.group(2)) - need * 3 / 4 / 2**30) < 0.01,
              "mwms under ulimit -v %d MiB: refused, exit 1, one line with "
              "the need (%.2f GiB) and the limit" % (need * 3 // 4 // MiB,
                                                     need / 2**30), text)
    cg = memcg.make("strata-test-%d" % os.getpid(), need * 3 // 4)
    if not cg:
        print("SKIPPED: no memory cgroup can be made here (not root, or "
              "no memory controller)")
        return
    try:
        code, text = run(cmd, 120, cg.enter)
        check(code == 1 and "does not fit this task's memory" in text and
              cg.limit_file in text,
              "mwms in a cgroup of %d MiB: refused, exit 1, the line names "
              "the cgroup's limit" % (need * 3 // 4 // MiB), text)
    finally:
        cg.drop()


def main():
    tmp = tempfile.mkdtemp(prefix="strata-table-memory-")
    try:
        data, small = (os.path.join(tmp, n) for n in ("data", "small"))
        for d, rows in ((data, BIG), (small, SMALL)):
            r = subprocess.run([sys.executable, GEN, "--out", d, "--samples",
                                "8000", "--vocab", str(rows // 4)],
                               capture_output=True, text=True, timeout=120)
            if not check(r.returncode == 0, "make_data.py --vocab %d"
                         % (rows // 4), r.stdout + r.stderr):
                return 1
        ps_holds_rows(data, small)
        mwms_refused(data)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if pycheck.failures else 0


if __name__ == "__main__":
    sys.exit(main())
