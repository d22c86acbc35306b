"""The job's [model] loss and metric from Python: a regression on float64
NumPy targets (cast to float32, as Keras) reports mae under its name in
History, the callbacks' logs and evaluate's dict; predict gives the outputs
themselves; a metric that does not go with the loss is a ConfigError."""

import numpy as np
import pytest

import strata

REG = {"model": {"layers": "dense 16 tanh, dense 2", "loss": "mse"},
       "train": {"devices": "cpu:0", "batch_size": 32, "epochs": 3},
       "optimizer": {"lr": 0.01}}


def regression(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, 8)).astype(np.float32)
    w = rng.uniform(-1, 1, (8, 2))
    return x, x.astype(np.float64) @ w   # float64 targets, as numpy makes


def test_regression_names():
    x, y = regression(320, 1)
    xt, yt = regression(96, 2)
    job = strata.Job(REG)
    assert job.metric_name() == "mae"
    seen = []
    h = job.fit(x, y, validation_data=(xt, yt), verbose=0,
                callbacks=[lambda ev, logs: seen.append(dict(logs or {}))])
    assert set(h.history) == {"loss", "mae", "val_loss", "val_mae"}
    assert h.history["loss"][-1] < 0.5 * h.history["loss"][0]
    assert any("mae" in logs and "learning_rate" in logs for logs in seen)
    res = job.evaluate(xt, yt, return_dict=True)
    assert set(res) == {"loss", "mae"}
    assert abs(res["mae"] - h.history["val_mae"][-1]) < 1e-6
    p = job.predict(xt)
    assert p.shape == (96, 2)
    mae = np.abs(p.astype(np.float64) - yt.astype(np.float32)).mean()
    assert abs(mae - res["mae"]) < 1e-5


def test_metric_refused():
    job = strata.Job(REG, overrides=["model.metric=accuracy"])
    with pytest.raises(strata.errors.ConfigError) as e:
        job.metric_name()
    assert "does not go with loss = mse" in str(e.value)
