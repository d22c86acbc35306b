#!/usr/bin/env python3
"""etc/recsys.ini and its data generator (contrib/recsys/make_data.py),
end to end through the strata binary, the way its header says to run it:

  - make_data.py: the same seed writes the same bytes, another seed other
    ones; dtypes and shapes as the ini reads them; each feature's ids in
    its own range of the shared table; a power law (the most named id of a
    feature in far more samples than the median named one); a click rate
    near 25 %; the planted AUC in meta.json equal to the AUC of the
    planted logit recomputed here; bad arguments refused (exit 2);
  - etc/recsys.ini as shipped, on a small set (the table shrunk to the
    set's vocabulary with --set graph.emb=...): mirrored with 2 replicas
    learns (test AUC well above chance, within reach of the planted one),
    the table's gradient travelled as rows; mwms with 2 workers (strata
    launch -n 2) ends on mirrored's test figures; ps (strata launch --ps 2
    -n 2 --chief, the table split over both ps tasks, rows pushed) trains
    with binary accuracy and `strata eval` of its checkpoint, with the
    ini's AUC, scores it well above chance too;
  - a ps job resumed into another number of ps tasks (2 -> 3, and 3 -> 1,
    one worker so that the steps apply in one order) ends on the bits of
    the uninterrupted job: every variable and optimizer slot of the last
    checkpoint equal;
  - answers longer than [strategy.ps] piece_bytes go in pieces (wire v9):
    1 ps resumed into 2 through a window of 256 KiB, pieces of 16 KiB
    (pulls, the gathered checkpoint, the restore) ends on the same bits;
  - a ps whose pieces cannot fit one message of the transport
    ([transport.zmq] window_bytes) ends the job at once with one line
    naming the keys, not after the puller's timeout.

Environment: STRATA_BIN, STRATA_PLUGIN_PATH, STRATA_SRC (set by ctest).
Exit 77 (skipped) when numpy is missing (Debian: python3-numpy)."""

import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("SKIPPED: python3 cannot import numpy (apt install python3-numpy)")
    sys.exit(77)

SRC = os.environ.get("STRATA_SRC", ".")
BIN = os.environ.get("STRATA_BIN", os.path.join(SRC, "build/bin/strata"))
GEN = os.path.join(SRC, "contrib", "recsys", "make_data.py")
INI = os.path.join(SRC, "etc", "recsys.ini")
FEATURES, VOCAB, DENSE = 4, 20000, 8
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
import pycheck  # noqa: E402  (tests/pycheck.py)


def check(cond, what, detail=""):
    return pycheck.check(cond, what, detail[-3000:])


def run(cmd, timeout=240):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    return r.returncode, r.stdout, r.stderr


def gen(out, samples, seed=1, extra=()):
    return run([sys.executable, GEN, "--out", out, "--samples", samples,
                "--vocab", VOCAB, "--seed", seed] + list(extra), 120)


def files(d):
    return {n: open(os.path.join(d, n), "rb").read()
            for n in sorted(os.listdir(d))}


def generator(tmp):
    a, b, c = (os.path.join(tmp, n) for n in ("a", "b", "c"))
    code, out, err = gen(a, 40000)
    check(code == 0 and "planted logit" in out, "make_data.py runs",
          out + err)
    if code != 0:
        return None
    gen(b, 40000)
    gen(c, 40000, seed=2)
    fa, fb, fc = files(a), files(b), files(c)
    check(fa == fb, "the same seed writes the same bytes")
    check(fa["train_ids.npy"] != fc["train_ids.npy"],
          "another seed writes other ids")
    x = np.load(os.path.join(a, "train_x.npy"))
    ids = np.load(os.path.join(a, "train_ids.npy"))
    y = np.load(os.path.join(a, "train_y.npy"))
    tx = np.load(os.path.join(a, "test_x.npy"))
    check(x.dtype == np.float32 and x.shape == (40000, DENSE) and
          ids.dtype == np.int64 and ids.shape == (40000, FEATURES) and
          y.dtype == np.float32 and y.shape == (40000, 1) and
          tx.shape == (4000, DENSE),
          "dtypes and shapes (x %s %s, ids %s %s, y %s %s)"
          % (x.dtype, x.shape, ids.dtype, ids.shape, y.dtype, y.shape))
    lo = np.arange(FEATURES) * VOCAB
    check(bool(((ids >= lo) & (ids < lo + VOCAB)).all()),
          "feature f's ids in [f * vocab, (f + 1) * vocab)")
    counts = np.bincount(ids[:, 0] - lo[0], minlength=VOCAB)
    named = np.sort(counts[counts > 0])
    check(named[-1] > 50 * np.median(named),
          "a power law: the most named id in %d samples, the median named "
          "one in %d" % (named[-1], np.median(named)))
    rate = float(y.mean())
    check(0.22 <= rate <= 0.28, "click rate %.3f near 25 %%" % rate)
    meta = json.load(open(os.path.join(a, "meta.json")))
    check(0.75 < meta["seen_auc"] <= meta["planted_auc"] < 0.95,
          "planted AUC %.4f, of the rows the training set names %.4f"
          % (meta["planted_auc"], meta["seen_auc"]))
    # the AUC behind planted_auc, against pairs counted one by one
    sys.path.insert(0, os.path.dirname(GEN))
    import make_data
    rng = np.random.default_rng(3)
    s = np.round(rng.random(3000), 2)  # ties on purpose
    lab = (rng.random(3000) < s).astype(np.float32)
    pos, neg = s[lab > 0], s[lab == 0]
    brute = float(((pos[:, None] > neg[None, :]) +
                   0.5 * (pos[:, None] == neg[None, :])).mean())
    check(abs(make_data.auc(s, lab) - brute) < 1e-12,
          "the AUC routine equals the pair count with ties at half "
          "(%.6f, %.6f)" % (make_data.auc(s, lab), brute))
    for bad in (["--samples", "0"], ["--zipf", "1.0"], ["--dense", "1"]):
        code, out, err = run([sys.executable, GEN, "--out",
                              os.path.join(tmp, "bad"), "--samples", "10"]
                             + bad, 60)
        check(code == 2 and not os.path.exists(os.path.join(tmp, "bad")),
              "refused, nothing written: %s" % " ".join(bad), out + err)
    return a, meta


def test_auc(text):
    m = re.findall(r"test auc ([0-9.]+)", text)
    return float(m[-1]) if m else None


def ini_sets(data):
    return ["--set", "data.dir=" + data,
            "--set", "graph.emb=embedding vocab=%d dim=16 <- ids"
            % (FEATURES * VOCAB),
            "--set", "train.epochs=2", "--set", "train.progress=none"]


def training(tmp, data, meta):
    sets = ini_sets(data)
    code, out, err = run([BIN, "train", "-c", INI] + sets)
    mirrored = test_auc(out)
    check(code == 0 and mirrored is not None and mirrored > 0.70 and
          mirrored <= meta["planted_auc"] + 0.02,
          "mirrored 2 replicas: test AUC %s (planted %.4f)"
          % (mirrored, meta["planted_auc"]), out + err)
    check("table-steps as rows" in err and " 0 table-steps as rows" not in err,
          "mirrored moved the table's gradient as rows", err)
    code, out, err = run([BIN, "launch", "-n", "2", "-c", INI] + sets +
                         ["--set", "strategy.plugin=mwms",
                          "--set", "train.devices=cpu:0"])
    mwms = test_auc(out)
    check(code == 0 and mwms == mirrored,
          "mwms 2 workers (launch -n 2): test AUC %s, mirrored's %s"
          % (mwms, mirrored), out + err)
    ck = os.path.join(tmp, "ps-ck")
    ps_sets = sets + ["--set", "strategy.plugin=ps",
                      "--set", "strategy.ps.partitioner=fixed:2",
                      "--set", "model.metric=accuracy",
                      "--set", "train.devices=cpu:0",
                      "--set", "checkpoint.dir=" + ck]
    code, out, err = run([BIN, "launch", "--ps", "2", "-n", "2", "--chief",
                          "-c", INI] + ps_sets)
    check(code == 0 and "exactly once" in err,
          "ps: launch --ps 2 -n 2 --chief trains", out + err)
    if code != 0:
        return
    check(re.search(r"pushes applied \([1-9][0-9]* with rows\)", err)
          is not None, "ps: the table's rows were pushed as rows", err)
    cks = sorted(glob.glob(os.path.join(ck, "ckpt-*.safetensors")))
    code, out, err = run([BIN, "eval", "-c", INI, "--checkpoint", cks[-1]] +
                         ini_sets(data))
    ps_auc = test_auc(out)
    check(code == 0 and ps_auc is not None and ps_auc > 0.70,
          "ps: eval of its checkpoint with the ini's AUC: %s (mirrored %s)"
          % (ps_auc, mirrored), out + err)


def raw_tensors(path):
    """({name: raw bytes}, metadata) of a safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    n = int.from_bytes(blob[:8], "little")
    head = json.loads(blob[8:8 + n])
    base = 8 + n
    return ({k: blob[base + v["data_offsets"][0]:base + v["data_offsets"][1]]
             for k, v in head.items() if k != "__metadata__"},
            head.get("__metadata__", {}))


def tensors(path):
    """{name: raw bytes} of a checkpoint, a ps job's parts joined (each
    ps task writes "NAME[ROW0:ROW1]" of its shards beside the main file,
    which names their count and tag): the bytes of whole variables."""
    got, md = raw_tensors(path)
    n = int(md.get("strata.part_count", "0"))
    rows = {}
    for j in range(n):
        part = path.replace(".safetensors", ".part-%d-of-%d.safetensors"
                            % (j, n))
        pt, pmd = raw_tensors(part)
        assert pmd["strata.part_tag"] == md["strata.part_tag"], part
        for name, b in pt.items():
            base, r = name[:-1].rsplit("[", 1)
            rows.setdefault(base, []).append((int(r.split(":")[0]), b))
    for base, pieces in rows.items():
        got[base] = b"".join(b for _, b in sorted(pieces))
    return got


def ps_run(data, ck, nps, steps, extra=()):
    sets = ini_sets(data) + list(extra) + [
        "--set", "strategy.plugin=ps", "--set", "model.metric=accuracy",
        "--set", "train.devices=cpu:0", "--set", "checkpoint.dir=" + ck,
        "--set", "checkpoint.every_steps=10", "--set", "checkpoint.keep=10",
        "--set", "train.max_steps=%d" % steps,
        "--set", "strategy.ps.partitioner=fixed:%d" % nps]
    return run([BIN, "launch", "--ps", nps, "-n", "1", "--chief", "-c", INI]
               + sets)


def reshard(tmp, data):
    base = os.path.join(tmp, "whole")
    code, out, err = ps_run(data, base, 2, 30)
    check(code == 0, "ps: 30 steps with 2 ps tasks", out + err)
    if code != 0:
        return
    want = tensors(os.path.join(base, "ckpt-0000000030.safetensors"))
    # the last: every whole answer longer than 16 KiB in pieces (wire v9)
    # through a transport window of 256 KiB (a batch's rows fit; the 5 MB
    # whole pull does not), the checkpoints gathered by the coordinator
    # (STATE in pieces) and restored (STATE_PUT in pieces)
    pieces = ["--set", "strategy.ps.piece_bytes=16K",
              "--set", "transport.zmq.window_bytes=256K",
              "--set", "strategy.ps.checkpoint_parts=false"]
    for first, then, extra in ((2, 3, []), (3, 1, []), (1, 2, pieces)):
        ck = os.path.join(tmp, "reshard-%d-%d" % (first, then))
        code, out, err = ps_run(data, ck, first, 20, extra)
        code2, out2, err2 = ps_run(data, ck, then, 30, extra)
        check(code == 0 and code2 == 0 and
              "the %d ps tasks hold the state of step 20" % then in err2,
              "ps: 20 steps with %d ps tasks, resumed with %d" % (first, then),
              out + err + out2 + err2)
        if code2 != 0:
            continue
        main = os.path.join(ck, "ckpt-0000000030.safetensors")
        parts = sorted(glob.glob(os.path.join(ck, "ckpt-0000000030.part-*")))
        if extra:
            check(not parts and raw_tensors(main)[0],
                  "ps: in pieces, the coordinator gathered the checkpoint "
                  "whole", "parts: %s" % parts)
        else:
            check(len(parts) == then and not raw_tensors(main)[0] and
                  "ps tasks wrote their parts" in err2,
                  "ps: the checkpoint of step 30 is the %d parts its ps "
                  "tasks wrote and a main file of no variable" % then,
                  "parts: %s; main: %s" % (parts,
                                           sorted(raw_tensors(main)[0])))
        got = tensors(main)
        differ = sorted(k for k in want if got.get(k) != want[k])
        check(set(got) == set(want) and not differ and len(want) > 5,
              "ps: resumed from %d ps tasks into %d%s, the last checkpoint's "
              "%d tensors equal the uninterrupted job's bit for bit"
              % (first, then, " (in pieces of 16 KiB)" if extra else "",
                 len(want)),
              "differ: %s; only one side: %s" % (differ[:8],
                                                 sorted(set(got) ^ set(want))))


def too_long(data):
    code, out, err = run([BIN, "launch", "--ps", "1", "-n", "1", "--chief",
                          "-c", INI] + ini_sets(data) + [
        "--set", "strategy.plugin=ps", "--set", "model.metric=accuracy",
        "--set", "train.devices=cpu:0", "--set", "train.max_steps=5",
        "--set", "strategy.timeout_s=120",
        "--set", "transport.zmq.window_bytes=64K"], 100)
    lines = [l for l in err.splitlines()
             if "does not fit one message of the transport: raise "
                "[transport.zmq] window_bytes" in l]
    check(code == 2 and len(lines) == 1 and "ps:0" in lines[0],
          "ps: a piece longer than window_bytes ends the job (exit %d, "
          "well before the 120 s timeout) with one line naming the key"
          % code, out + err)


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for k in socks:
        k.bind(("127.0.0.1", 0))
    ports = [k.getsockname()[1] for k in socks]
    for k in socks:
        k.close()
    return ports


def unshared(tmp, data):
    """The ps tasks started elsewhere, as on machines that do not share
    [checkpoint] dir: one launch runs the chief and the worker, another
    the 2 ps tasks with a directory of their own. Where the ps tasks
    write their parts somewhere the coordinator does not see them, the
    core says so once and the coordinator gathers; where they cannot
    write (no such directory), the coordinator says so once and gathers.
    Either way every checkpoint holds the whole state and the job ends
    as it should."""
    for case, ps_dir in (("elsewhere", os.path.join(tmp, "ps-own")),
                         ("unwritable", os.path.join(tmp, "no", "such"))):
        ck = os.path.join(tmp, "unshared-" + case)
        if case == "elsewhere":
            os.makedirs(ps_dir)
        c, w, p0, p1 = free_ports(4)
        sets = ini_sets(data) + [
            "--set", "strategy.plugin=ps", "--set", "model.metric=accuracy",
            "--set", "train.devices=cpu:0", "--set", "train.max_steps=30",
            "--set", "checkpoint.every_steps=10", "--set", "checkpoint.keep=0",
            "--set", "security.mode=off",
            "--set", "strategy.ps.partitioner=fixed:2",
            "--set", "cluster.chief=127.0.0.1:%d" % c,
            "--set", "cluster.worker=127.0.0.1:%d" % w,
            "--set", "cluster.ps=127.0.0.1:%d, 127.0.0.1:%d" % (p0, p1)]
        procs = [subprocess.Popen(
            [BIN, "launch", "--tasks", tasks, "-c", INI] + sets +
            ["--set", "checkpoint.dir=" + d], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
            for tasks, d in (("chief:0,worker:0", ck), ("ps:0,ps:1", ps_dir))]
        outs = []
        for proc in procs:
            try:
                outs.append(proc.communicate(timeout=180))
            except subprocess.TimeoutExpired:
                proc.kill()
                outs.append(proc.communicate())
        text = "".join(o + e for o, e in outs)
        said = ("does not see them all" if case == "elsewhere"
                else "the coordinator gathers the state and writes it alone")
        mains = sorted(glob.glob(os.path.join(ck, "ckpt-*.safetensors")))
        whole = [m for m in mains if ".part-" not in m and
                 len(raw_tensors(m)[0]) > 5 and
                 "strata.part_count" not in raw_tensors(m)[1]]
        check(all(x.returncode == 0 for x in procs) and
              text.count(said) == 1 and len(whole) == 3 and
              len(mains) == 3, "ps: %s: said once, then every checkpoint "
              "gathered whole (%d of %d)" % (
                  "parts the coordinator cannot see (another directory)"
                  if case == "elsewhere" else
                  "parts the ps tasks cannot write (no such directory)",
                  len(whole), len(mains)), text)


def main():
    tmp = tempfile.mkdtemp(prefix="strata-recsys-")
    try:
        got = generator(tmp)
        if got:
            training(tmp, *got)
            reshard(tmp, got[0])
            unshared(tmp, got[0])
            too_long(got[0])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failure(s)" % pycheck.failures)
    return 1 if pycheck.failures else 0


if __name__ == "__main__":
    sys.exit(main())
