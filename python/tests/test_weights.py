"""Checkpoints written from NumPy dicts: strata.save_checkpoint writes what
strata.load_checkpoint reads back (dtypes, shapes, metadata), replaces a
file atomically and refuses a link; Job.set_weights(job.get_weights())
scores and predicts bitwise as the job that trained them, and other
weights score otherwise."""

import os

import numpy as np
import pytest

import strata
from conftest import SMALL


def test_save_load(tmp_path):
    t = {"a/kernel": np.arange(12, dtype=np.float32).reshape(3, 4),
         "b": np.array([1, -2, 3], dtype=np.int64),
         "c": np.zeros((2, 0, 3), dtype=np.float64),
         "d": np.array([7], dtype=np.uint8)}
    path = str(tmp_path / "w.safetensors")
    strata.save_checkpoint(path, t, {"strata.step": 5})
    back = strata.load_checkpoint(path)
    assert sorted(back) == sorted(t)
    for k in t:
        assert back[k].dtype == t[k].dtype and np.array_equal(back[k], t[k])
    from strata import checkpoint
    assert checkpoint.metadata(path) == {"strata.step": "5"}
    # replaced, not appended to; a link is refused and left alone
    strata.save_checkpoint(path, {"x": np.ones(2, np.float32)})
    assert sorted(strata.load_checkpoint(path)) == ["x"]
    target = tmp_path / "target"
    target.write_bytes(b"keep")
    link = tmp_path / "link.safetensors"
    os.symlink(target, link)
    with pytest.raises(ValueError, match="symbolic link"):
        strata.save_checkpoint(str(link), t)
    assert target.read_bytes() == b"keep"
    with pytest.raises(ValueError, match="dtype complex"):
        strata.save_checkpoint(path, {"z": np.zeros(2, np.complex64)})
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".strata")]


def test_set_weights(data):
    job = strata.Job(SMALL)
    job.fit(data["x"], data["y"], epochs=2, verbose=0)
    w = job.get_weights()
    other = strata.Job(SMALL)
    other.set_weights(w)
    assert other.evaluate(data["xt"], data["yt"]) == \
        job.evaluate(data["xt"], data["yt"])
    assert np.array_equal(other.predict(data["xt"]), job.predict(data["xt"]))
    w["dense_1/bias"] = w["dense_1/bias"] + 1.0
    other.set_weights(w)
    assert other.evaluate(data["xt"], data["yt"])[0] != \
        job.evaluate(data["xt"], data["yt"])[0]


def test_load_parts(tmp_path):
    """A checkpoint in parts (a ps job: each ps task writes its shards
    beside the main file) loads joined, whole variables; a part of
    another checkpoint or a gap in the rows is refused."""
    table = np.arange(15, dtype=np.float32).reshape(5, 3)
    bias = np.array([1.5, -2.0], dtype=np.float32)
    main = str(tmp_path / "ckpt-0000000010.safetensors")

    def part(j, tensors, tag="00000000000000ab"):
        strata.save_checkpoint(
            str(tmp_path / ("ckpt-0000000010.part-%d-of-2.safetensors" % j)),
            tensors, {"strata.step": 10, "strata.part_tag": tag,
                      "strata.part_index": j, "strata.part_count": 2})

    part(0, {"emb[0:2]": table[0:2], "optimizer/m/emb[2:5]": table[2:5] * 2,
             "bias[0:2]": bias})
    part(1, {"emb[2:5]": table[2:5], "optimizer/m/emb[0:2]": table[0:2] * 2})
    strata.save_checkpoint(main, {}, {"strata.step": 10,
                                      "strata.part_count": 2,
                                      "strata.part_tag": "00000000000000ab"})
    back = strata.load_checkpoint(main)
    assert sorted(back) == ["bias", "emb", "optimizer/m/emb"]
    assert np.array_equal(back["emb"], table)
    assert np.array_equal(back["optimizer/m/emb"], table * 2)
    assert np.array_equal(back["bias"], bias)
    part(1, {"emb[2:5]": table[2:5]}, tag="00000000000000ac")
    with pytest.raises(ValueError, match="another checkpoint"):
        strata.load_checkpoint(main)
    part(1, {"emb[3:5]": table[3:5], "optimizer/m/emb[0:2]": table[0:2]})
    with pytest.raises(ValueError, match="in no part or in two"):
        strata.load_checkpoint(main)
