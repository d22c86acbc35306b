"""Embeddings from Python: a [graph] whose embedding reads the id features
takes them as Keras takes a model's inputs, x = [features, ids] (or
{"input": features, "ids": ids}), in fit, evaluate and predict; the table
comes back from get_weights as emb/embeddings [vocab, dim]; a model that
reads ids and is given none is refused with the reason."""

import numpy as np
import pytest

import strata

VOCAB, K, NCLS = 40, 3, 4
JOB = {"graph": {"emb": "embedding vocab=40 dim=8 combiner=mean <- ids",
                 "feat": "dense 8 tanh <- input",
                 "both": "concat <- emb, feat",
                 "hidden": "dense 16 tanh",
                 "logits": "dense 4"},
       "train": {"devices": "cpu:0", "batch_size": 32, "epochs": 3},
       "optimizer": {"name": "adam", "lr": 0.01}}


def make(n, seed):
    """Class c's ids are those v with v % 4 == c; bags of 1 to 3 ids
    padded with -1, and 4 dense features of noise."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, NCLS, n)
    ids = np.full((n, K), -1, np.int64)
    for i in range(n):
        real = rng.integers(1, K + 1)
        ids[i, :real] = rng.integers(0, VOCAB // NCLS, real) * NCLS + y[i]
    x = rng.uniform(0, 1, (n, 4)).astype(np.float32)
    return x, ids, y


def test_fit_evaluate_predict():
    x, ids, y = make(1200, 1)
    xt, idt, yt = make(300, 2)
    job = strata.Job(JOB)
    h = job.fit([x, ids], y, validation_data=([xt, idt], yt), verbose=0)
    assert h.history["val_accuracy"][-1] > 0.9
    loss, acc = job.evaluate({"input": xt, "ids": idt}, yt)
    assert acc > 0.9 and abs(acc - h.history["val_accuracy"][-1]) < 1e-6
    p = job.predict([xt, idt])
    assert p.shape == (300, NCLS)
    assert abs((p.argmax(1) == yt).mean() - acc) < 1e-6
    w = job.get_weights()
    assert w["emb/embeddings"].shape == (VOCAB, 8)
    # the model reads ids: features alone are refused, with the reason
    with pytest.raises(strata.errors.StrataError) as e:
        job.predict(xt)
    assert "reads 'ids'" in str(e.value)
    job.close()
