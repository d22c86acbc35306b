"""Callbacks see the run's events with Keras's logs; History holds the
epochs; stop_training ends a fit; the progress bar redraws on a terminal,
writes lines elsewhere, and updates one display per epoch in Jupyter."""

import io
import sys
import types

import strata
from strata import callbacks
from conftest import SMALL


class Recorder(strata.Callback):
    def __init__(self):
        self.calls = []

    def on_train_begin(self, logs=None):
        self.calls.append(("train_begin", None, logs))

    def on_epoch_begin(self, epoch, logs=None):
        self.calls.append(("epoch_begin", epoch, logs))

    def on_train_batch_end(self, batch, logs=None):
        self.calls.append(("batch_end", batch, logs))

    def on_epoch_end(self, epoch, logs=None):
        self.calls.append(("epoch_end", epoch, logs))

    def on_train_end(self, logs=None):
        self.calls.append(("train_end", None, logs))


def test_events_and_history(data):
    rec, seen = Recorder(), []
    job = strata.Job(SMALL)
    h = job.fit(data["x"], data["y"], epochs=2,
                validation_data=(data["xt"], data["yt"]),
                callbacks=[rec, lambda ev, logs: seen.append(ev)], verbose=0)
    kinds = [c[0] for c in rec.calls]
    assert kinds[0] == "train_begin" and kinds[-1] == "train_end"
    steps = 320 // 32
    assert kinds[1:-1] == (["epoch_begin"] + ["batch_end"] * steps +
                           ["epoch_end"]) * 2
    batches = [c for c in rec.calls if c[0] == "batch_end"]
    assert [b[1] for b in batches] == list(range(steps)) * 2
    assert set(batches[0][2]) == {"loss", "accuracy", "learning_rate"}
    ends = [c for c in rec.calls if c[0] == "epoch_end"]
    assert set(h.history) == {"loss", "accuracy", "val_loss", "val_accuracy"}
    for i, (_, epoch, logs) in enumerate(ends):
        assert epoch == i
        assert {k: v[i] for k, v in h.history.items()} == logs
    # the epoch's loss is the mean of its steps' (equal batches)
    mean = sum(b[2]["loss"] for b in batches[:steps]) / steps
    assert abs(mean - h.history["loss"][0]) < 1e-6
    # validation on what was given: evaluate scores the same (the run
    # sums its evaluation in another order: equal to rounding)
    loss, acc = job.evaluate(data["xt"], data["yt"])
    assert abs(loss - h.history["val_loss"][-1]) < 1e-6 * loss
    assert acc == h.history["val_accuracy"][-1]
    assert seen.count("epoch_end") == 2 and seen.count("train_end") == 1
    # no validation given: none reported
    h2 = job.fit(data["x"], data["y"], epochs=1, verbose=0)
    assert set(h2.history) == {"loss", "accuracy"}
    job.close()


def test_stop_training(data):
    class Stop(strata.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 1:
                self.job.stop_training = True
    job = strata.Job(SMALL)
    h = job.fit(data["x"], data["y"], epochs=10, callbacks=[Stop()],
                verbose=0)
    # the run stops at the next step boundary its workers agree on
    assert 2 <= len(h.history["loss"]) < 10
    assert job.fit(data["x"], data["y"], epochs=1, verbose=0) \
        .history["loss"]   # and the next fit runs afresh
    job.close()


class Tty(io.StringIO):
    def isatty(self):
        return True


def feed(bar, epochs=2, steps=5):
    for e in range(epochs):
        bar.on_epoch_begin(e, {"steps": steps})
        for b in range(steps):
            bar.on_train_batch_end(b, {"loss": 0.5, "accuracy": 0.75})
        bar.on_epoch_end(e, {"loss": 0.5, "accuracy": 0.75,
                             "val_loss": 0.25, "val_accuracy": 1.0})


def test_progress_terminal_and_file():
    tty = Tty()
    feed(callbacks.ProgressBar(2, "auto", file=tty))
    out = tty.getvalue()
    assert "Epoch 1/2\n" in out and "Epoch 2/2\n" in out
    assert "\r5/5 [==============================]" in out
    assert "val_accuracy: 1.0000\n" in out
    plain = io.StringIO()
    feed(callbacks.ProgressBar(2, "auto", file=plain))
    lines = plain.getvalue().splitlines()
    assert "\r" not in plain.getvalue() and len(lines) == 2
    assert lines[0].startswith("Epoch 1/2 - ") and "val_loss: 0.2500" in \
        lines[0]


def test_progress_jupyter(monkeypatch):
    shown = []
    display = types.ModuleType("IPython.display")
    display.display = lambda obj, raw=False, display_id=None: shown.append(
        ("new", display_id, obj["text/plain"]))
    display.update_display = lambda obj, raw=False, display_id=None: \
        shown.append(("update", display_id, obj["text/plain"]))
    monkeypatch.setitem(sys.modules, "IPython.display", display)
    monkeypatch.setattr(callbacks, "_in_jupyter", lambda: True)
    bar = callbacks.ProgressBar(2, "auto", file=io.StringIO())
    bar.REDRAW_S = 0.0
    feed(bar)
    assert bar.verbose == 1 and bar.file.getvalue() == ""
    ids = [s[1] for s in shown if s[0] == "new" and s[1]]
    assert len(ids) == 2 and ids[0] != ids[1]   # one display per epoch bar
    assert all(s[1] in ids for s in shown if s[0] == "update")
    assert shown[-1][0] == "update" and "val_loss: 0.2500" in shown[-1][2]
