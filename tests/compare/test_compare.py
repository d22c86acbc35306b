#!/usr/bin/env python3
"""strata compare, end to end through the strata binary, as a user runs it.

A short job (2000 training samples, 2 epochs) under mirrored, central, mwms:2
(through strata launch) and mwms:3 (which fails: the global batch of 32 does
not split over 3 workers): the table has one row per
strategy with plausible numbers and the failed one names its log; the CSVs
parse; the SVG is XML with one line per strategy in each panel and a legend
naming each. Then a straggler, a limited link (network namespaces: skipped
without root, where the clear error is checked instead) and the option
errors. Environment: STRATA_BIN (set by ctest). Exit 77: no Fashion-MNIST.
"""

import csv
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

BIN = os.environ.get("STRATA_BIN", "strata")
DATA = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
SVG = "{http://www.w3.org/2000/svg}"
SMALL = ["--set", "data.limit_train=2000", "--set", "data.limit_test=1000"]

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
import pycheck  # noqa: E402  (tests/pycheck.py)
from pycheck import check  # noqa: E402


def compare(*args, timeout=240):
    r = subprocess.run([BIN, "compare"] + list(args), capture_output=True,
                       text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return r.returncode, r.stdout, r.stderr


def table_rows(out):
    """strategy -> the cells of its table row (split on 2+ spaces)."""
    rows = {}
    lines = out.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith("strategy ")),
                 None)
    for line in lines[start + 1:] if start is not None else []:
        if not line.strip():
            break
        if line.startswith(" "):
            continue  # a failed row's error line
        cells = re.split(r"\s{2,}", line.strip())
        rows[cells[0]] = cells
    return rows


def num(cell):
    return float(cell.split()[0])


def check_svg(path, names):
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as e:
        check(False, "the SVG parses as XML", str(e))
        return
    check(root.tag == SVG + "svg", "the root is an <svg> element")
    panels = {g.get("id"): g for g in root.iter(SVG + "g")
              if g.get("class") == "panel"}
    check(set(panels) == {"accuracy", "loss"},
          "two panels, accuracy and loss", str(sorted(panels)))
    for pid, g in panels.items():
        lines = [p for p in g.iter(SVG + "polyline")
                 if p.get("class") == "series"]
        got = sorted(p.get("data-name") for p in lines)
        check(got == sorted(names), "%s: one line per strategy" % pid,
              "%s vs %s" % (got, names))
        frame = next(r for r in g.iter(SVG + "rect")
                     if r.get("class") == "frame")
        x0, y0 = float(frame.get("x")), float(frame.get("y"))
        x1, y1 = x0 + float(frame.get("width")), y0 + float(frame.get("height"))
        for p in lines:
            pts = [tuple(map(float, xy.split(",")))
                   for xy in p.get("points").split()]
            want = 0 if "(failed)" in p.get("data-name") else 2
            check(len(pts) == want, "%s: %s has %d points" %
                  (pid, p.get("data-name"), want), str(pts))
            check(all(x0 - 0.1 <= x <= x1 + 0.1 and y0 - 0.1 <= y <= y1 + 0.1
                      for x, y in pts),
                  "%s: %s inside the axes" % (pid, p.get("data-name")))
        texts = [t.text for t in g.iter(SVG + "text")]
        check(len(texts) >= 8, "%s: ticks and labels" % pid, str(texts))
    legend = next((g for g in root.iter(SVG + "g") if g.get("id") == "legend"),
                  None)
    named = [t.text for t in legend.iter(SVG + "text")] if legend else []
    check(sorted(named) == sorted(names), "the legend names every strategy",
          str(named))


def main():
    if not os.access(DATA, os.R_OK):
        print("SKIPPED: Fashion-MNIST not installed (apt-get install "
              "dataset-fashion-mnist)")
        return 77
    tmp = tempfile.mkdtemp(prefix="strata-compare-")
    try:
        run_all(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failed" % pycheck.failures)
    return 1 if pycheck.failures else 0


def run_all(tmp):
    # ---- four strategies, one failing -----------------------------------
    out_dir = os.path.join(tmp, "cmp")
    code, out, err = compare("--strategies", "mirrored,central,mwms:2,mwms:3",
                             "--epochs", "2", "--out", out_dir, *SMALL)
    print(out + err)
    check(code == 1, "exit 1: one run failed", "exit %d" % code)
    rows = table_rows(out)
    check(sorted(rows) == sorted(["mirrored", "central", "mwms:2", "mwms:3"]),
          "one table row per strategy", str(rows))
    target = re.search(r"to (\d+\.\d+) %", out)
    check(target is not None, "the table names its target accuracy")
    for spec, tasks in (("mirrored", 1), ("central", 1), ("mwms:2", 2)):
        c = rows.get(spec, [])
        if len(c) != 8:
            check(False, "%s: a row of 8 cells" % spec, str(c))
            continue
        check(int(c[1]) == tasks, "%s: %d tasks" % (spec, tasks))
        check(0 < num(c[2]) < 60, "%s: s/epoch %s" % (spec, c[2]))
        check(num(c[3]) > 100, "%s: samples/s %s" % (spec, c[3]))
        check(0 < num(c[4]) < 120, "%s: time to target %s" % (spec, c[4]))
        check(60 < num(c[5]) <= 100, "%s: test acc %s" % (spec, c[5]))
        check(5 < num(c[6]) < 2000, "%s: peak RSS %s" % (spec, c[6]))
        check(num(c[7]) >= num(c[4]), "%s: wall %s" % (spec, c[7]))
    # Synchronous training is the same math on one process or two.
    for spec in ("central", "mwms:2"):
        if "mirrored" in rows and spec in rows:
            check(abs(num(rows["mirrored"][5]) - num(rows[spec][5])) < 1.0,
                  "mirrored and %s reach the same accuracy" % spec)
    log3 = os.path.join(out_dir, "mwms-3.log")
    check("failed (exit 2): see %s" % log3 in out,
          "the failed run is a row naming its log")
    check(os.path.isfile(log3) and "batch_size" in open(log3).read(),
          "its log says why", log3)
    check("must split evenly" in out, "the table quotes its first error")
    for stem in ("mirrored", "central", "mwms-2"):
        check(os.path.isfile(os.path.join(out_dir, stem + ".log")),
              "%s.log kept" % stem)
        with open(os.path.join(out_dir, stem + ".metrics.csv")) as f:
            m = list(csv.DictReader(f))
        check(len(m) == 2 and float(m[1]["wall_s"]) > float(m[0]["wall_s"]) > 0,
              "%s: metrics CSV with wall_s per epoch" % stem, str(m))

    with open(os.path.join(out_dir, "compare.csv")) as f:
        summary = {r["strategy"]: r for r in csv.DictReader(f)}
    check(sorted(summary) == sorted(rows), "compare.csv: the same rows")
    for spec in ("mirrored", "central", "mwms:2"):
        r = summary.get(spec, {})
        ok = r.get("status") == "ok" and r.get("epochs") == "2"
        for k in ("s_per_epoch", "samples_per_s", "time_to_target_s",
                  "final_test_acc", "final_train_loss", "peak_rss_mib",
                  "wall_s"):
            try:
                ok = ok and float(r[k]) > 0
            except (KeyError, ValueError):
                ok = False
        check(ok, "compare.csv: %s parses, all figures > 0" % spec, str(r))
        check(abs(float(r.get("final_test_acc", 0)) * 100 -
                  num(rows[spec][5])) < 0.006, "compare.csv: %s as the table"
              % spec)
    r = summary.get("mwms:3", {})
    check(r.get("status") == "failed" and r.get("exit_code") == "2" and
          r.get("log") == log3, "compare.csv: mwms:3 failed, exit 2, its log")
    with open(os.path.join(out_dir, "compare-epochs.csv")) as f:
        epochs = list(csv.DictReader(f))
    check(len(epochs) == 6 and all(0 < float(e["test_acc"]) <= 1
                                   for e in epochs),
          "compare-epochs.csv: 2 epochs of 3 runs", str(epochs))
    check_svg(os.path.join(out_dir, "compare.svg"),
              ["mirrored", "central", "mwms:2", "mwms:3 (failed)"])

    # ---- a straggler: worker:1 sleeps 5 ms in each of its 62 steps --------
    out_dir = os.path.join(tmp, "straggler")
    code, out, err = compare("--strategies", "mirrored,mwms:2", "--epochs",
                             "1", "--straggler", "worker:1=5ms", "--out",
                             out_dir, *SMALL)
    print(out + err)
    check(code == 0, "straggler: exit 0", "exit %d" % code)
    rows = table_rows(out)
    log = open(os.path.join(out_dir, "mwms-2.log")).read()
    check("debug.delay_task=worker:1" in log and
          "debug.step_delay_ms=5" in log, "straggler: set for the mwms job")
    check("mirrored: no task worker:1 in this job: no straggler" in out,
          "straggler: a job without worker:1 says so")
    # Every synchronous step waits for worker:1's sleep: a floor, not a time.
    if len(rows.get("mwms:2", [])) == 8:
        check(num(rows["mwms:2"][2]) >= 62 * 0.005,
              "straggler: mwms:2 s/epoch >= 62 x 5 ms", rows["mwms:2"][2])

    # ---- --timeout: the run is stopped, a failed row, nothing left -------
    out_dir = os.path.join(tmp, "timeout")
    code, out, err = compare("--strategies", "mwms:2", "--epochs", "50",
                             "--timeout", "1", "--out", out_dir)
    print(out + err)
    check(code == 1 and "stopped after --timeout 1 s" in out,
          "timeout: a failed row that says so", "exit %d" % code)
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if out_dir.encode() in f.read():
                    left.append(pid)
        except OSError:
            pass
    check(not left, "timeout: every task of the job reaped", str(left))

    # ---- a limited link --------------------------------------------------
    check_link(tmp)

    # ---- option errors: exit 2, one clear line, nothing run -------------
    bad = [
        (["--bogus"], "unknown argument '--bogus'"),
        (["--strategies"], "--strategies needs a value"),
        (["--strategies", "mirored"], "'mirored' is not a strategy"),
        (["--strategies", "mwms:0"], "'mwms:0' is not a strategy"),
        (["--strategies", "mwms:x"], "'mwms:x' is not a strategy"),
        (["--strategies", "ps:2"], "'ps:2' is not a strategy"),
        (["--strategies", "ps:2x"], "'ps:2x' is not a strategy"),
        (["--strategies", "ps:0x2"], "'ps:0x2' is not a strategy"),
        (["--strategies", "mwms:2,,ps:1x1"], "'' is not a strategy"),
        (["--strategies", "mwms:2,mwms:2"], "mwms:2 given twice"),
        (["--epochs", "0"], "--epochs '0'"),
        (["--epochs", "2x"], "--epochs '2x'"),
        (["--epochs", "1", "--epochs", "2"], "--epochs given twice"),
        (["--straggler", "worker1=10ms"], "--straggler 'worker1=10ms'"),
        (["--straggler", "worker:1=10"], "--straggler 'worker:1=10'"),
        (["--straggler", "gpu:1=10ms"], "--straggler 'gpu:1=10ms'"),
        (["--straggler", "worker: 1=10ms"], "--straggler 'worker: 1=10ms'"),
        (["--straggler", "worker:+1=10ms"], "--straggler 'worker:+1=10ms'"),
        (["--straggler", "worker:1=10min"], "--straggler 'worker:1=10min'"),
        (["--link", "100"], "--link '100'"),
        (["--link", "fast"], "--link 'fast'"),
        (["--timeout", "0"], "--timeout '0'"),
        (["--set", "epochs"], "invalid assignment 'epochs'"),
        (["-c", os.path.join(tmp, "none.ini")], "none.ini"),
    ]
    # What a strategy can do is its plugin's word, not a list in compare.
    bad += [
        (["--strategies", "central:2"],
         "'central:2' is not a strategy: its plugin does not train across "
         "processes"),
        (["--strategies", "mwms:2x2"],
         "'mwms:2x2' is not a strategy: its plugin does not hand out steps"),
        (["--strategies", "ps"],
         "'ps' is not a strategy: its plugin runs with ps tasks"),
        (["--strategies", "local"],
         "'local' is not a strategy: a transport plugin"),
    ]
    never = os.path.join(tmp, "never")
    for args, msg in bad:
        code, out, err = compare("--out", never, *args)
        check(code == 2 and msg in err and not out,
              "%s: exit 2, '%s'" % (" ".join(args), msg),
              "exit %d, stdout %r, stderr %r" % (code, out, err))
        check(not os.path.exists(never), "%s: nothing run" % " ".join(args))
    # A third party's strategy plugin (tests/abi builds one) is compared
    # like the shipped ones.
    v2 = os.path.join(os.path.dirname(os.path.abspath(BIN)), "..", "tests",
                      "abi", "v2plugins")
    if os.path.exists(os.path.join(v2, "localsgd.so")):
        third = os.path.join(tmp, "third")
        code, out, err = compare("--out", third, "--strategies", "localsgd",
                                 "--epochs", "1", "--set",
                                 "plugins.path=" + v2, "--set",
                                 "data.limit_train=2000", "--set",
                                 "data.limit_test=500")
        rows = open(os.path.join(third, "compare.csv")).read() \
            if code == 0 else ""
        check(code == 0 and "\nlocalsgd," in rows,
              "a third-party strategy plugin is compared",
              "exit %d, stderr %r, csv %r" % (code, err, rows))
    code, out, err = compare("--help")
    check(code == 0 and "--strategies" in out and "ps:PxW" in out,
          "--help describes the options")


def check_link(tmp):
    out_dir = os.path.join(tmp, "link")
    args = ["--strategies", "mwms:2", "--epochs", "1", "--link", "50mbit",
            "--out", out_dir, "--set", "data.limit_train=640",
            "--set", "data.limit_test=500"]
    can = (os.geteuid() == 0 and shutil.which("ip", path="/usr/sbin:/sbin:" +
                                              os.environ.get("PATH", ""))
           and shutil.which("tc", path="/usr/sbin:/sbin:" +
                            os.environ.get("PATH", "")))
    if not can or not shutil.which("unshare") or subprocess.run(
            ["unshare", "-n", "true"], capture_output=True).returncode != 0:
        code, out, err = compare(*args)
        check(code == 1 and "needs root" in err and not os.path.exists(out_dir),
              "link without root or iproute2: a clear error, nothing run",
              "exit %d: %s" % (code, err))
        print("SKIPPED the limited link itself: needs root, iproute2 and "
              "network namespaces")
        return
    code, out, err = compare(*args)
    print(out + err)
    check(code == 0, "link: exit 0", "exit %d" % code)
    m = re.search(r"measured (\d+) Mbit/s", out)
    check(m is not None, "link: measured the link")
    log = open(os.path.join(out_dir, "mwms-2.log")).read()
    check("network namespace" in log and "transport.zmq.shm=off" in log,
          "link: the job ran in its namespace, over tcp")
    rows = table_rows(out)
    # 20 steps, each all-reducing 407 KB from both workers (814 KB through
    # the one link): at 50 Mbit/s at least 2.6 s; half of it as a floor
    # leaves room for the bucket that htb lets through at once.
    if len(rows.get("mwms:2", [])) == 8:
        check(num(rows["mwms:2"][2]) >= 1.3, "link: mwms:2 is link-bound",
              rows["mwms:2"][2])
    # Without the privilege: the clear error. Root with every capability
    # dropped (setpriv's bounding set), not the user nobody, who could not
    # even reach the build in a private temporary directory.
    if shutil.which("setpriv"):
        never = os.path.join("/tmp", "strata-never-%d" % os.getpid())
        r = subprocess.run(["setpriv", "--inh-caps=-all", "--bounding-set=-all",
                            BIN, "compare", "--strategies",
                            "mwms:2", "--link", "50mbit", "--out", never],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 1 and "needs root" in r.stderr and
              not os.path.exists(never), "link without capabilities: a "
              "clear error, nothing run", r.stderr)

if __name__ == "__main__":
    sys.exit(main())
