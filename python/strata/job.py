"""strata.Job: one training job (a libstrata context), Keras-style.

A job is what `strata train -c job.ini` runs: the INI file, a dict of
sections, or both (the dict's keys override the file's as --set does),
then `overrides` ("section.key=value", last). fit() trains it on NumPy
arrays in memory or on its [data] files; evaluate() and predict() score the
last checkpoint fit() wrote (or the one named). libstrata prints nothing:
its text and log lines go to the logger "strata" (warnings show on
stderr through Python's logging; errors become exceptions)."""

import logging
import os
import shutil
import signal
import tempfile
import threading
import weakref
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _lib
from .callbacks import Callback, History, LambdaCallback, ProgressBar
from . import errors
from .errors import StrataError, error_for

_log = logging.getLogger("strata")
_LEVELS = {_lib.LOG_ERROR: logging.ERROR, _lib.LOG_WARN: logging.WARNING,
           _lib.LOG_INFO: logging.INFO, _lib.LOG_DEBUG: logging.DEBUG}

Config = Dict[str, Dict[str, Any]]


def _value(v: Any) -> str:
    """A Python value as the INI text the option parser reads."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return ", ".join(_value(x) for x in v)
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _capture_stderr(fn):
    """fn() with file descriptor 2 redirected; (its result, the lines
    written there). For strata_ctx_create, which parses the INI file before
    the context's log callback can be set."""
    import sys
    try:
        sys.stderr.flush()
    except (AttributeError, ValueError):
        pass
    with tempfile.TemporaryFile() as tmp:
        saved = os.dup(2)
        try:
            os.dup2(tmp.fileno(), 2)
            result = fn()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        lines = tmp.read().decode("utf-8", "replace").splitlines()
    return result, lines


def _destroy(ctx: _lib.c_ctx_p, tmp: List[str]) -> None:
    # no callback of a collected job may run while the context goes
    _lib.ctx_set_callbacks(ctx, None)
    _lib.ctx_destroy(ctx)
    for d in tmp:
        shutil.rmtree(d, ignore_errors=True)


class Job:
    """A training job: ``Job("job.ini")``, ``Job({"train": {"epochs": 3},
    "model": {"layers": "dense 128 relu, dense 10"}})``, or both
    (``Job("job.ini", {...}, ["train.seed=7"])``)."""

    def __init__(self, ini: Union[str, os.PathLike, Config, None] = None,
                 config: Optional[Config] = None,
                 overrides: Iterable[str] = ()):
        if isinstance(ini, dict) and config is None:
            ini, config = None, ini
        self._ctx = _lib.c_ctx_p()
        self._errors: List[str] = []
        self._arrays: Dict[str, np.ndarray] = {}  # registered, kept alive
        self._tmp: List[str] = []
        self._fits = 0
        self._own_ckpt: Optional[bool] = None   # the job's temp dir
        self._own_test = False   # the test set is fit()'s validation data
        self._pending: Optional[BaseException] = None
        self._interrupted = False
        self._hooks: List[Callback] = []
        self._evals: List[Tuple[float, float, int]] = []
        self._metric = "accuracy"   # the job's, at fit()
        self.history: Optional[History] = None
        self.checkpoint: Optional[str] = None
        self.stop_training = False
        path = os.fspath(ini).encode() if ini is not None else None
        rc, lines = _capture_stderr(
            lambda: _lib.ctx_create(path, self._ctx))
        if rc != 0:
            raise error_for(rc, lines, "%s: %s" % (
                ini, _lib.strerror(rc).decode()))
        self._finalizer = weakref.finalize(self, _destroy, self._ctx,
                                           self._tmp)
        self._install_callbacks()
        for section, keys in (config or {}).items():
            for key, value in keys.items():
                self.set("%s.%s=%s" % (section, key, _value(value)))
        for assignment in overrides:
            self.set(assignment)

    # ---- the context ---------------------------------------------------

    def _install_callbacks(self) -> None:
        self._c_text = _lib.TEXT_FN(self._on_text)
        self._c_log = _lib.LOG_FN(self._on_log)
        self._c_event = _lib.EVENT_FN(self._on_event)
        cb = _lib.Callbacks(struct_size=_lib.ctypes.sizeof(_lib.Callbacks),
                            text=self._c_text, log=self._c_log,
                            event=self._c_event)
        self._call(_lib.ctx_set_callbacks, self._ctx, _lib.ctypes.byref(cb))

    def _on_text(self, user, text) -> None:
        for line in text.decode("utf-8", "replace").splitlines():
            if line.strip():
                _log.info("%s", line.rstrip())

    def _on_log(self, user, level, line) -> None:
        text = line.decode("utf-8", "replace")
        if level == _lib.LOG_ERROR:   # raised as the call's exception
            self._errors.append(text)
            _log.debug("%s", text)
        else:
            _log.log(_LEVELS.get(level, logging.DEBUG), "%s", text)

    def _call(self, fn, *args) -> int:
        """fn(*args): 0, or the STRATA_E* code as its exception."""
        self._errors = []
        rc = fn(*args)
        if rc != 0 and rc != errors.Stopped.code:   # the caller judges
            raise error_for(rc, self._errors,
                            "%s (%s)" % (_lib.strerror(rc).decode(),
                                         _lib.err_name(rc).decode()))
        return rc

    def _alive(self):
        if not self._finalizer.alive:
            raise errors.StateError("strata.Job: the job was closed")
        return self._ctx

    def set(self, assignment: str) -> None:
        """One override, "section.key=value" (the CLI's --set)."""
        self._call(_lib.ctx_set, self._alive(), assignment.encode())

    def get(self, section: str, key: str) -> Optional[str]:
        """The key's value as set by the file, the environment or set();
        None when nobody set it (the compiled-in default applies)."""
        v = _lib.ctx_get(self._alive(), section.encode(), key.encode())
        return v.decode() if v is not None else None

    def effective(self, key: str) -> str:
        """The value a run uses for "section.key", defaults included, after
        the checks strata_train() makes (strata_config_list)."""
        found: List[str] = []

        def on_key(user, k, value, origin):
            found.append(value.decode())
        cb = _lib.CONFIG_FN(on_key)
        keys = (_lib.ctypes.c_char_p * 2)(key.encode(), None)
        self._call(_lib.config_list, self._alive(), keys, cb, None)
        return found[0]

    def close(self) -> None:
        """Destroy the context and the job's temporary files (also done
        when the job is garbage-collected)."""
        self._finalizer()
        self._arrays.clear()

    def __enter__(self) -> "Job":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- in-memory data ------------------------------------------------

    def set_array(self, name: str, array: Optional[np.ndarray],
                  what: str = "array", images: bool = False) -> str:
        """Register `array` as "mem:NAME" (strata_ctx_set_array), in
        place of a data file; the job keeps a reference for as long as
        libstrata may read it (until replaced, cleared with None, or the
        job closed). float64 and float16 (images, and the float labels of
        a [model] loss other than sparse_categorical_crossentropy) are cast
        to float32, as Keras does; other dtypes go as they are (libstrata
        says which it takes, naming "mem:NAME"). Returns "mem:NAME"."""
        ctx = self._alive()
        if array is None:
            self._call(_lib.ctx_set_array, ctx, name.encode(), None, 0, 0,
                       None)
            self._arrays.pop(name, None)
            return "mem:" + name
        a = np.asarray(array)
        if a.dtype.kind == "f" and a.dtype != np.float32:
            a = a.astype(np.float32)
        a = np.ascontiguousarray(a)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        dtype = _lib.DTYPES.get(a.dtype.name)
        if dtype is None:
            raise errors.InvalidArgument(
                "%s: dtype %s is not supported (images: uint8 or float32; "
                "labels: integers, or floats for a dense [model] loss)"
                % (what, a.dtype))
        dims = (_lib.ctypes.c_int64 * max(a.ndim, 1))(*a.shape)
        self._call(_lib.ctx_set_array, ctx, name.encode(),
                   a.ctypes.data_as(_lib.ctypes.c_void_p), dtype, a.ndim,
                   dims)
        self._arrays[name] = a   # replaces (and releases) the previous one
        return "mem:" + name

    def _data(self, key: str, name: str, array) -> None:
        self.set("data.%s=%s" % (key, self.set_array(
            name, array, key, images=key.endswith("images"))))

    def _data_ids(self, key: str, name: str, ids) -> None:
        """[data] `key` (train_ids, ...) from `ids`, or none: the inputs
        given are the inputs, as Keras's."""
        if ids is None:
            self.set("data.%s=" % key)
            self.set_array(name, None)
        else:
            self._data(key, name, ids)

    @staticmethod
    def _inputs(what: str, x):
        """The model's inputs as Keras takes them: the dense features
        alone, or with the id features that a [graph]'s 'ids' names (an
        embedding's): [x, ids], (x, ids) or {"input": x, "ids": ids}.
        Returns (x, ids or None)."""
        if isinstance(x, dict):
            if "input" not in x or set(x) - {"input", "ids"}:
                raise errors.InvalidArgument(
                    "%s: x as a dict holds 'input' (the dense features) and "
                    "'ids' (the id features); got %s" % (what, sorted(x)))
            return x["input"], x.get("ids")
        if isinstance(x, (list, tuple)) and len(x) == 2 and all(
                isinstance(a, np.ndarray) for a in x):
            return x[0], x[1]
        return x, None

    # ---- events ----------------------------------------------------------

    def _on_event(self, user, ev_p) -> None:
        try:
            self._dispatch(ev_p.contents)
        except BaseException as e:   # a hook's error stops the run
            if self._pending is None:
                self._pending = e
            _lib.request_stop(self._ctx)

    def _dispatch(self, ev) -> None:
        if ev.kind == _lib.EVENT_EVAL:
            self._evals.append((ev.loss, ev.accuracy, ev.steps))
        elif ev.kind == _lib.EVENT_EPOCH_BEGIN:
            self._batch = 0
            self._each("on_epoch_begin", ev.epoch, {"steps": int(ev.steps)})
        elif ev.kind == _lib.EVENT_STEP:
            logs = {"loss": ev.loss, self._metric: ev.accuracy,
                    "learning_rate": ev.learning_rate}
            self._each("on_train_batch_end", self._batch, logs)
            self._batch += 1
        elif ev.kind == _lib.EVENT_EPOCH_END:
            logs = {"loss": ev.loss, self._metric: ev.accuracy}
            if ev.has_val:
                logs["val_loss"] = ev.val_loss
                logs["val_" + self._metric] = ev.val_accuracy
            self._each("on_epoch_end", ev.epoch, logs)
        if self.stop_training:
            _lib.request_stop(self._ctx)

    def _each(self, hook: str, *args) -> None:
        for cb in self._hooks:
            getattr(cb, hook)(*args)

    # ---- fit / evaluate / predict ----------------------------------------

    def _workdir(self) -> str:
        if not self._tmp:
            self._tmp.append(tempfile.mkdtemp(prefix="strata-job-"))
        return self._tmp[0]

    def fit(self, x: Optional[np.ndarray] = None,
            y: Optional[np.ndarray] = None, *,
            batch_size: Optional[int] = None, epochs: Optional[int] = None,
            validation_data: Optional[Sequence[np.ndarray]] = None,
            validation_split: Optional[float] = None,
            shuffle: Optional[bool] = None,
            callbacks: Sequence[Any] = (),
            verbose: Union[int, str] = "auto") -> History:
        """Train; returns the History (also ``job.history``). x, y: the
        training images and labels in memory (None: the job's [data]
        files). The keyword arguments are --set overrides of [train] and
        [data] keys, and stay set on the job. Without [checkpoint] dir the
        job writes its checkpoints to a temporary directory of its own, and
        a later fit() starts from the last one's variables (Keras's
        continued training; the optimizer's state starts afresh). With
        [checkpoint] dir a fit() resumes there as `strata train` does.
        Ctrl-C stops the run at the next step boundary (its checkpoint
        written when configured), then raises KeyboardInterrupt; a
        callback that raises stops it the same way and its exception is
        raised."""
        ctx = self._alive()
        if (x is None) != (y is None):
            raise errors.InvalidArgument(
                "fit: x and y go together (images and their labels)")
        x, ids = self._inputs("fit", x) if x is not None else (None, None)
        keys = {"train.batch_size": batch_size, "train.epochs": epochs,
                "data.validation_split": validation_split,
                "data.shuffle": shuffle}
        if x is not None:   # this call's validation only, as Keras's
            for k in ("validation_split", "validation_images",
                      "validation_labels", "validation_ids"):
                self.set("data.%s=" % k)
        for k, v in keys.items():
            if v is not None:
                self.set("%s=%s" % (k, _value(v)))
        if x is not None:
            self._data("train_images", "fit_x", x)
            self._data("train_labels", "fit_y", y)
            self._data_ids("train_ids", "fit_ids", ids)
        if validation_data is not None:
            if len(validation_data) != 2:
                raise errors.InvalidArgument("fit: validation_data is (x, y)")
            vx, vids = self._inputs("fit", validation_data[0])
            self._data("validation_images", "val_x", vx)
            self._data("validation_labels", "val_y", validation_data[1])
            if vids is not None:
                self._data("validation_ids", "val_ids", vids)
        if x is not None:
            # Keras validates on what it is given, never on a test set
            # the arrays did not come with.
            val = validation_data is not None or bool(validation_split)
            self.set("train.eval=%s" % _value(bool(val)))
            if val and (self._own_test or
                        self.get("data", "test_images") is None):
                self._own_test = True
                if validation_data is not None:
                    tx, tids = self._inputs("fit", validation_data[0])
                    ty = validation_data[1]
                else:
                    tx, tids, ty = x, ids, y
                self._data("test_images", "test_x", tx)
                self._data("test_labels", "test_y", ty)
                self._data_ids("test_ids", "test_ids", tids)
        if self._own_ckpt is None:
            self._own_ckpt = self.get("checkpoint", "dir") is None
        self._fits += 1
        if self._own_ckpt:   # a fresh directory, from the last variables
            prev = self.checkpoint
            d = os.path.join(self._workdir(), "fit-%d" % self._fits)
            self.set("checkpoint.dir=" + d)
            if prev:
                self.set("model.init_from=" + prev)

        history = History()
        hooks: List[Callback] = [history]
        self._metric = self.metric_name()
        if verbose:
            hooks.append(ProgressBar(int(self.effective("train.epochs")),
                                     verbose, metric=self._metric))
        for cb in callbacks:
            if not isinstance(cb, Callback):
                if not callable(cb):
                    raise errors.InvalidArgument(
                        "fit: callback %r is neither a strata.Callback nor "
                        "callable" % (cb,))
                cb = LambdaCallback(cb)
            cb.job = self
            hooks.append(cb)
        self.history = history
        self.stop_training = False
        self._pending = None
        self._interrupted = False
        self._hooks = hooks
        self._each("on_train_begin", {})
        try:
            rc = self._run_interruptible(lambda: self._call(_lib.train, ctx))
        finally:
            self._hooks = []
            last = self._last_checkpoint()
            if last:
                self.checkpoint = last
        if self._pending is not None:
            raise self._pending
        if self._interrupted:
            raise KeyboardInterrupt("strata: fit stopped at a step boundary "
                                    "(Ctrl-C); job.history holds the epochs "
                                    "done")
        if rc != 0 and not self.stop_training:   # stopped, not by us
            raise error_for(rc, self._errors, _lib.strerror(rc).decode())
        for cb in hooks:
            cb.on_train_end({})
        return history

    def _run_interruptible(self, fn):
        """fn() with Ctrl-C asking libstrata to stop (at the next step
        boundary: the handler runs when this thread next runs Python, at
        the latest with the next group of step events) instead of raising
        inside a callback."""
        if threading.current_thread() is not threading.main_thread():
            return fn()

        def on_sigint(signum, frame):
            self._interrupted = True
            _lib.request_stop(self._ctx)
        try:
            old = signal.signal(signal.SIGINT, on_sigint)
        except ValueError:   # not the main interpreter
            return fn()
        try:
            return fn()
        finally:
            signal.signal(signal.SIGINT, old)

    def _last_checkpoint(self) -> Optional[str]:
        d = self.get("checkpoint", "dir")
        if not d or not os.path.isdir(d):
            return None
        names = sorted(n for n in os.listdir(d)
                       if n.startswith("ckpt-") and n.endswith(".safetensors")
                       and ".part-" not in n)
        return os.path.join(d, names[-1]) if names else None

    def _ckpt(self, checkpoint: Optional[str]) -> bytes:
        ck = checkpoint or self.checkpoint
        if not ck:
            raise errors.StateError(
                "no checkpoint: fit() first, or name one (checkpoint=PATH)")
        return os.fspath(ck).encode()

    def metric_name(self) -> str:
        """Keras's name of the job's metric ([model] metric, resolved by
        [model] loss): "accuracy", "mae", ... -- the key of its figures in
        History, the logs and evaluate's dict."""
        self._errors = []
        name = _lib.metric_name(self._alive())
        if name is None:   # the settings' error went to the log
            rc = errors.ConfigError.code
            raise error_for(rc, self._errors,
                            "%s (%s)" % (_lib.strerror(rc).decode(),
                                         _lib.err_name(rc).decode()))
        return name.decode()

    def evaluate(self, x: Optional[np.ndarray] = None,
                 y: Optional[np.ndarray] = None, *,
                 checkpoint: Optional[str] = None,
                 return_dict: bool = False
                 ) -> Union[List[float], Dict[str, float]]:
        """[loss, accuracy] of the checkpoint (the last fit's by default)
        on x, y, or on the job's test set when they are None
        (strata_eval_data_ids / strata_eval). x may hold the id features
        too: [x, ids] or {"input": x, "ids": ids}."""
        ctx = self._alive()
        ck = self._ckpt(checkpoint)
        if (x is None) != (y is None):
            raise errors.InvalidArgument("evaluate: x and y go together")
        self._evals = []
        if x is None:
            self._call(_lib.eval_, ctx, ck)
        else:
            x, ids = self._inputs("evaluate", x)
            xi = self.set_array("eval_x", x, "x", images=True).encode()
            yi = self.set_array("eval_y", y, "y").encode()
            di = (self.set_array("eval_ids", ids, "ids").encode()
                  if ids is not None else None)
            try:
                self._call(_lib.eval_data_ids, ctx, ck, xi, yi, di)
            finally:
                self.set_array("eval_x", None)
                self.set_array("eval_y", None)
                self.set_array("eval_ids", None)
        if len(self._evals) != 1:
            raise errors.InternalError(
                "evaluate: libstrata reported %d results" % len(self._evals))
        loss, acc, _ = self._evals[0]
        return ({"loss": loss, self.metric_name(): acc} if return_dict
                else [loss, acc])

    def predict(self, x: np.ndarray, *, batch_size: Optional[int] = None,
                checkpoint: Optional[str] = None,
                logits: bool = False) -> np.ndarray:
        """The model's outputs for every sample of x: float32 (n, units),
        softmax probabilities, or the last layer's logits
        (strata_predict_ids). x may hold the id features too: [x, ids] or
        {"input": x, "ids": ids}."""
        ctx = self._alive()
        ck = self._ckpt(checkpoint)
        out = os.path.join(self._workdir(), "predict.npy")
        x, ids = self._inputs("predict", x)
        xi = self.set_array("predict_x", x, "x", images=True).encode()
        di = (self.set_array("predict_ids", ids, "ids").encode()
              if ids is not None else None)
        try:
            self._call(_lib.predict_ids, ctx, ck, xi, di, out.encode(),
                       int(batch_size or 0),
                       _lib.PREDICT_LOGITS if logits else 0)
            return np.load(out)
        finally:
            self.set_array("predict_x", None)
            self.set_array("predict_ids", None)
            if os.path.exists(out):
                os.unlink(out)

    def get_weights(self, checkpoint: Optional[str] = None
                    ) -> Dict[str, np.ndarray]:
        """The checkpoint's tensors by name (the last fit's by default)."""
        from .checkpoint import load
        return load(self._ckpt(checkpoint).decode())

    def set_weights(self, weights: Dict[str, np.ndarray]) -> str:
        """Keras's set_weights: the variables (name -> array, as
        get_weights gives them) that evaluate and predict score next and
        the next fit starts from ([model] init_from; its optimizer state
        starts afresh). Written as a checkpoint in the job's directory
        (strata.save_checkpoint); returns its path."""
        from .checkpoint import save
        self._alive()
        self._weights = getattr(self, "_weights", 0) + 1
        path = os.path.join(self._workdir(),
                            "weights-%d.safetensors" % self._weights)
        save(path, weights)
        self.set("model.init_from=" + path)
        self.checkpoint = path
        return path


def version() -> str:
    """libstrata's version."""
    return _lib.version().decode()


__all__ = ["Job", "version", "StrataError"]
