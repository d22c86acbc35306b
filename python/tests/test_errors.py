"""Every STRATA_E* code is an exception class; each bad input raises the
class of its code with the line libstrata logged (naming what and where),
and libstrata prints nothing of its own; Ctrl-C and a raising callback
stop a fit cleanly."""

import os
import re
import signal

import numpy as np
import pytest

import strata
from strata import _lib, errors
from conftest import SMALL

ERRNO_H = os.path.join(os.environ.get("STRATA_SRC", os.path.join(
    os.path.dirname(__file__), "..", "..")), "include", "strata", "errno.h")


def test_every_code_has_its_class():
    with open(ERRNO_H) as f:
        codes = re.findall(r"X\((E[A-Z]+),\s*(-\d+),", f.read())
    assert len(codes) >= 21
    classes = set()
    for name, code in codes:
        cls = errors.BY_CODE[int(code)]
        assert issubclass(cls, strata.StrataError)
        assert cls.errname == "STRATA_" + name
        assert cls.errname == _lib.err_name(int(code)).decode()
        classes.add(cls)
    assert len(classes) == len(codes)
    assert issubclass(errors.InvalidArgument, ValueError)
    assert issubclass(errors.Timeout, TimeoutError)


def raises(cls, fn, *words):
    with pytest.raises(cls) as e:
        fn()
    for w in words:
        assert w in str(e.value), str(e.value)
    assert e.value.code == cls.code
    return e.value


def test_bad_inputs_raise_typed_errors(data, capfd):
    x, y = data["x"], data["y"]
    job = strata.Job(SMALL)
    raises(errors.DataError, lambda: job.fit(x.astype(np.int64), y,
                                             verbose=0),
           "mem:fit_x", "images of dtype int64")
    raises(errors.DataError, lambda: job.fit(x, y.astype(np.float32),
                                             verbose=0),
           "mem:fit_y", "labels of dtype float32")
    raises(errors.DataError, lambda: job.fit(x, y[:-1], verbose=0),
           "mem:fit_x holds 320 images but mem:fit_y holds 319 labels")
    raises(errors.DataError, lambda: job.fit(x, np.stack([y, y], 1),
                                             verbose=0),
           "mem:fit_y", "labels of shape (320, 2)")
    raises(errors.InvalidArgument, lambda: job.fit(x, y.astype(np.complex64),
                                                   verbose=0),
           "train_labels: dtype complex64")
    raises(errors.InvalidArgument, lambda: job.fit(x, None))
    raises(errors.StateError, lambda: job.evaluate(x, y), "no checkpoint")
    job.set("train.epoch=3")   # checked when a run starts
    raises(errors.ConfigError, lambda: job.fit(x, y, verbose=0),
           "--set: [train] unknown key 'epoch'", "did you mean 'epochs'")
    job.close()
    job = strata.Job(SMALL)
    job.set("data.train_images=mem:nothing")
    job.set("data.train_labels=mem:nothing")
    raises(errors.NotFound, lambda: job.fit(verbose=0),
           "mem:nothing: no array 'nothing'")
    job.close()
    raises(errors.StateError, lambda: job.fit(x, y), "closed")
    raises(errors.NotFound, lambda: strata.Job("/nonexistent/job.ini"),
           "/nonexistent/job.ini")
    out, err = capfd.readouterr()   # file descriptors 1 and 2
    assert out == "" and err == ""


def test_silent_fit(data, capfd):
    job = strata.Job(SMALL)
    job.fit(data["x"], data["y"], verbose=0)
    job.evaluate(data["xt"], data["yt"])
    job.predict(data["xt"])
    job.close()
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_ctrl_c_stops_fit_cleanly(data):
    """SIGINT during fit: libstrata stops at a step boundary, fit raises
    KeyboardInterrupt with the finished epochs in job.history, and the job
    trains again afterwards."""
    def interrupt(event, logs):
        if event == "epoch_end" and logs["epoch"] == 0:
            os.kill(os.getpid(), signal.SIGINT)
    job = strata.Job(SMALL)
    with pytest.raises(KeyboardInterrupt):
        job.fit(data["x"], data["y"], epochs=50, callbacks=[interrupt],
                verbose=0)
    assert 1 <= len(job.history.history["loss"]) < 50
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    h = job.fit(data["x"], data["y"], epochs=1, verbose=0)
    assert len(h.history["loss"]) == 1
    job.close()


def test_raising_callback_stops_fit(data):
    class Boom(strata.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 2:
                raise RuntimeError("boom at batch 2")
    job = strata.Job(SMALL)
    with pytest.raises(RuntimeError, match="boom at batch 2"):
        job.fit(data["x"], data["y"], epochs=20, callbacks=[Boom()],
                verbose=0)
    assert len(job.history.history.get("loss", [])) < 20
    job.close()
