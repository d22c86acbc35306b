"""fit / evaluate / predict give what the strata command gives for the same
job, to the bit; the same arrays in memory give what their .npy files
give, to the bit."""

import csv
import os
import re
import subprocess

import numpy as np

import strata
from conftest import BIN, write_job


def last_ckpt(d):
    names = sorted(n for n in os.listdir(d) if n.startswith("ckpt-"))
    return os.path.join(d, names[-1])


def read(path):
    with open(path, "rb") as f:
        return f.read()


def cli(*args):
    r = subprocess.run([BIN] + [str(a) for a in args], capture_output=True,
                       text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def csv_rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


KEYS = ("loss", "accuracy", "val_loss", "val_accuracy")


def test_fit_evaluate_predict_equal_cli(tmp_path, data):
    d = str(tmp_path)
    ini = write_job(d, data, extra=f"[checkpoint]\ndir = {d}/cli\n")
    cli("train", "-c", ini, "--set", f"train.metrics_csv={d}/cli.csv")
    ck_cli = last_ckpt(f"{d}/cli")

    # the job's own [data] files
    job = strata.Job(ini, {"checkpoint": {"dir": f"{d}/py"},
                           "train": {"metrics_csv": f"{d}/py.csv"}})
    hist = job.fit(verbose=0)
    assert read(job.checkpoint) == read(ck_cli)
    assert os.path.basename(job.checkpoint) == os.path.basename(ck_cli)
    rows_cli, rows_py = csv_rows(f"{d}/cli.csv"), csv_rows(f"{d}/py.csv")
    assert len(hist.history["loss"]) == len(rows_cli) == 3
    for k in KEYS:   # the CSV's six digits of the History's numbers
        assert [r[k] for r in rows_py] == [r[k] for r in rows_cli]
        assert [float(r[k]) for r in rows_cli] == \
            [float("%.6f" % v) for v in hist.history[k]]

    # the same arrays in memory: the same bits
    mem = strata.Job(ini, {"checkpoint": {"dir": f"{d}/mem"}})
    hist_mem = mem.fit(data["x"], data["y"], validation_split=0.25,
                       verbose=0)
    assert read(mem.checkpoint) == read(ck_cli)
    assert hist_mem.history == hist.history

    # evaluate: the configured test set (strata eval) and the arrays
    out = cli("eval", "-c", ini, "--checkpoint", ck_cli)
    m = re.search(r"test loss ([0-9.]+), test accuracy ([0-9.]+)", out)
    loss, acc = job.evaluate()
    assert (m.group(1), m.group(2)) == ("%.4f" % loss, "%.4f" % acc)
    assert mem.evaluate(data["xt"], data["yt"]) == [loss, acc]
    assert job.evaluate(data["xt"], data["yt"], return_dict=True) == \
        {"loss": loss, "accuracy": acc}

    # predict: probabilities and logits, as strata predict writes them
    for flag, logits in (((), False), (("--logits",), True)):
        cli("predict", "-c", ini, "--checkpoint", ck_cli, "--data",
            f"{d}/test_images.npy", "--out", f"{d}/p.npy", *flag)
        want = np.load(f"{d}/p.npy")
        got = mem.predict(data["xt"], logits=logits)
        assert got.dtype == np.float32 and got.shape == (96, 3)
        assert np.array_equal(got, want)
    job.close()
    mem.close()


def test_float64_images_are_float32(tmp_path, data):
    """float64 images train as their float32 cast (Keras's rule), to the
    bit of the float32 arrays."""
    x32 = (data["x"] / 255.0).astype(np.float32)
    runs = []
    for x in (x32, x32.astype(np.float64)):
        job = strata.Job(write_job(str(tmp_path), data))
        runs.append(job.fit(x, data["y"], epochs=1, verbose=0).history)
        job.close()
    assert runs[0] == runs[1]
