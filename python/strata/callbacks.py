"""Keras-style callbacks on the run's events (strata_callbacks_t.event).

A callback is a Callback (override the hooks you need) or any callable
``fn(event, logs)`` with event one of "train_begin", "epoch_begin",
"train_batch_end", "epoch_end", "train_end". The logs use Keras's keys:
a batch's ``loss`` and ``accuracy`` (that step's, over this process's
samples) and ``learning_rate``; an epoch's ``loss``, ``accuracy`` and, when
the run validated, ``val_loss`` and ``val_accuracy``. Hooks run on the
thread that called fit(), between steps (the batch ends in groups of at most
32, after the steps ran); one that raises stops the run at the next step
boundary and fit() raises its exception."""

import sys
import time
from typing import Any, Callable, Dict, List, Optional

Logs = Dict[str, float]


class Callback:
    """Base class: every hook does nothing. ``job`` is the strata.Job
    whose fit() runs it (set by fit; ``self.job.stop_training = True``
    stops the run)."""

    job: Any = None

    def on_train_begin(self, logs: Optional[Logs] = None) -> None:
        pass

    def on_train_end(self, logs: Optional[Logs] = None) -> None:
        pass

    def on_epoch_begin(self, epoch: int, logs: Optional[Logs] = None) -> None:
        pass

    def on_epoch_end(self, epoch: int, logs: Optional[Logs] = None) -> None:
        pass

    def on_train_batch_end(self, batch: int,
                           logs: Optional[Logs] = None) -> None:
        pass


class LambdaCallback(Callback):
    """A plain callable ``fn(event, logs)`` as a Callback (logs carry
    ``epoch`` and, for a batch, ``batch`` too)."""

    def __init__(self, fn: Callable[[str, Logs], Any]):
        self.fn = fn

    def on_train_begin(self, logs=None):
        self.fn("train_begin", dict(logs or {}))

    def on_train_end(self, logs=None):
        self.fn("train_end", dict(logs or {}))

    def on_epoch_begin(self, epoch, logs=None):
        self.fn("epoch_begin", dict(logs or {}, epoch=epoch))

    def on_epoch_end(self, epoch, logs=None):
        self.fn("epoch_end", dict(logs or {}, epoch=epoch))

    def on_train_batch_end(self, batch, logs=None):
        self.fn("train_batch_end", dict(logs or {}, batch=batch))


class History(Callback):
    """What fit() returns: ``history`` maps each key of the epochs' logs
    (loss, accuracy, val_loss, val_accuracy) to its values, one per epoch,
    and ``epoch`` lists the epochs (0-based)."""

    def __init__(self) -> None:
        self.history: Dict[str, List[float]] = {}
        self.epoch: List[int] = []

    def on_epoch_end(self, epoch, logs=None):
        self.epoch.append(epoch)
        for k, v in (logs or {}).items():
            self.history.setdefault(k, []).append(v)

    def __repr__(self) -> str:
        return "History(%r)" % (self.history,)


def _in_jupyter() -> bool:
    ip = sys.modules.get("IPython")
    if ip is None or "ipykernel" not in sys.modules:
        return False
    shell = ip.get_ipython() if hasattr(ip, "get_ipython") else None
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class ProgressBar(Callback):
    """Keras's progress: ``verbose`` 1 a bar per epoch, redrawn in place on a
    terminal ("\\r") and in Jupyter (one display updated), 2 one line per
    epoch; "auto" is 1 on a terminal or in Jupyter, else 2 (logs and CI stay
    readable). Written to ``file`` (sys.stdout when None, looked up at each
    write so that Jupyter's and pytest's replacements are honoured)."""

    WIDTH = 30
    REDRAW_S = 0.1

    def __init__(self, epochs: int, verbose: Any = "auto", file=None,
                 metric: str = "accuracy"):
        self.file = file
        self.metric = metric   # Keras's name of the job's metric
        self.jupyter = _in_jupyter()
        out = self._out()
        tty = hasattr(out, "isatty") and out.isatty()
        if verbose == "auto":
            verbose = 1 if tty or self.jupyter else 2
        self.verbose = int(verbose)
        self.tty = tty
        self.epochs = epochs
        self._handle = None
        self._last = 0.0

    def _out(self):
        return self.file if self.file is not None else sys.stdout

    def _write(self, text: str) -> None:
        out = self._out()
        out.write(text)
        out.flush()

    def on_epoch_begin(self, epoch, logs=None):
        self.steps = int((logs or {}).get("steps", 0))
        self.seen = 0
        self.sum_loss = self.sum_acc = 0.0
        self.t0 = time.monotonic()
        self._handle = None
        if self.verbose == 1:
            self._line("Epoch %d/%d" % (epoch + 1, self.epochs), final=True)
            self._bar(final=False, force=True)

    def on_train_batch_end(self, batch, logs=None):
        logs = logs or {}
        self.seen += 1
        self.sum_loss += logs.get("loss", 0.0)
        self.sum_acc += logs.get(self.metric, 0.0)
        if self.verbose == 1:
            self._bar(final=False)

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        metrics = " - ".join("%s: %.4f" % (k, logs[k]) for k in
                             ("loss", self.metric, "val_loss",
                              "val_" + self.metric)
                             if k in logs)
        secs = time.monotonic() - self.t0
        if self.verbose == 1:
            self.seen = max(self.seen, self.steps)
            self._bar(final=True, force=True, tail="%.0fs - %s" % (secs,
                                                                   metrics))
        elif self.verbose == 2:
            self._line("Epoch %d/%d - %.0fs - %s" % (epoch + 1, self.epochs,
                                                     secs, metrics),
                       final=True)

    def _bar(self, final: bool, force: bool = False, tail: str = "") -> None:
        now = time.monotonic()
        if not force and now - self._last < self.REDRAW_S:
            return
        self._last = now
        total = max(self.steps, 1)
        fill = min(self.WIDTH, self.seen * self.WIDTH // total)
        bar = "=" * fill
        if fill < self.WIDTH:
            bar = (bar[:-1] + ">" if fill else "") + "." * (self.WIDTH - fill)
        if not tail and self.seen:
            tail = "loss: %.4f - %s: %.4f" % (
                self.sum_loss / self.seen, self.metric,
                self.sum_acc / self.seen)
        width = len(str(total))
        text = "%*d/%d [%s] %s" % (width, self.seen, total, bar, tail)
        self._line(text, final=final, redraw=True)

    def _line(self, text: str, final: bool, redraw: bool = False) -> None:
        if self.jupyter:   # the epoch's bar is one display, updated
            from IPython.display import display, update_display  # noqa
            if not redraw:
                display({"text/plain": text}, raw=True)
            elif self._handle is None:
                self._handle = "strata-%d-%f" % (id(self), time.monotonic())
                display({"text/plain": text}, raw=True,
                        display_id=self._handle)
            else:
                update_display({"text/plain": text}, raw=True,
                               display_id=self._handle)
            return
        if self.tty:
            self._write("\r" + text + ("\n" if final else ""))
        elif final:   # not a terminal: whole lines only
            self._write(text + "\n")
