"""ctypes bindings of include/strata/strata.h: the library, its structs and
prototypes. Nothing here is public; strata.Job is the interface.

The library is the package's own (strata/lib/libstrata.so.0, installed by
the wheel), or the one $STRATA_LIBRARY names (a build tree's, for the
tests). Its plugins are found beside it by libstrata itself."""

import ctypes
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def _find() -> str:
    env = os.environ.get("STRATA_LIBRARY")
    if env:
        return env
    for name in ("libstrata.so.0", "libstrata.so"):
        path = os.path.join(_HERE, "lib", name)
        if os.path.exists(path):
            return path
    raise ImportError(
        "strata: libstrata.so is not in %s/lib (install the package with "
        "`pip install ./python`, or set STRATA_LIBRARY to a built "
        "libstrata.so)" % _HERE)


LIBRARY = _find()
lib = ctypes.CDLL(LIBRARY)

c_ctx_p = ctypes.c_void_p


class Event(ctypes.Structure):
    """strata_event_t."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("kind", ctypes.c_int32),
        ("epoch", ctypes.c_int32), ("has_val", ctypes.c_int32),
        ("step", ctypes.c_int64), ("steps", ctypes.c_int64),
        ("loss", ctypes.c_double), ("accuracy", ctypes.c_double),
        ("learning_rate", ctypes.c_double), ("seconds", ctypes.c_double),
        ("val_loss", ctypes.c_double), ("val_accuracy", ctypes.c_double),
        ("samples_per_s", ctypes.c_double), ("comm_share", ctypes.c_double),
        ("result", ctypes.c_int32),
    ]


EVENT_EPOCH_BEGIN, EVENT_STEP, EVENT_EVAL, EVENT_CHECKPOINT, \
    EVENT_EPOCH_END, EVENT_RUN_END = 1, 2, 3, 4, 5, 6

TEXT_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)
EPOCH_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int,
                          ctypes.c_char_p)
EVENT_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(Event))


class Callbacks(ctypes.Structure):
    """strata_callbacks_t."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("user", ctypes.c_void_p),
        ("text", TEXT_FN), ("epoch", EPOCH_FN), ("log", LOG_FN),
        ("event", EVENT_FN),
    ]


# strata_ctx_set_array's dtypes (STRATA_DTYPE_*), by NumPy dtype name.
DTYPES = {"uint8": 1, "int8": 2, "int16": 3, "uint16": 4, "int32": 5,
          "uint32": 6, "int64": 7, "uint64": 8, "float32": 9}
PREDICT_LOGITS = 1

# Log levels of the log callback.
LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG = 0, 1, 2, 3


def _proto(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_c = ctypes.c_char_p
strerror = _proto("strata_strerror", _c, ctypes.c_int)
err_name = _proto("strata_err_name", _c, ctypes.c_int)
version = _proto("strata_version", _c)
ctx_create = _proto("strata_ctx_create", ctypes.c_int, _c,
                    ctypes.POINTER(c_ctx_p))
ctx_destroy = _proto("strata_ctx_destroy", None, c_ctx_p)
ctx_set = _proto("strata_ctx_set", ctypes.c_int, c_ctx_p, _c)
ctx_get = _proto("strata_ctx_get", _c, c_ctx_p, _c, _c)
ctx_set_callbacks = _proto("strata_ctx_set_callbacks", ctypes.c_int, c_ctx_p,
                           ctypes.POINTER(Callbacks))
ctx_set_array = _proto("strata_ctx_set_array", ctypes.c_int, c_ctx_p, _c,
                       ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                       ctypes.POINTER(ctypes.c_int64))
metric_name = _proto("strata_metric_name", _c, c_ctx_p)
train = _proto("strata_train", ctypes.c_int, c_ctx_p)
request_stop = _proto("strata_request_stop", None, c_ctx_p)
eval_ = _proto("strata_eval", ctypes.c_int, c_ctx_p, _c)
eval_data = _proto("strata_eval_data", ctypes.c_int, c_ctx_p, _c, _c, _c)
eval_data_ids = _proto("strata_eval_data_ids", ctypes.c_int, c_ctx_p, _c, _c,
                       _c, _c)
CONFIG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p,
                             ctypes.c_char_p, ctypes.c_char_p)
config_list = _proto("strata_config_list", ctypes.c_int, c_ctx_p,
                     ctypes.POINTER(ctypes.c_char_p), CONFIG_FN,
                     ctypes.c_void_p)
predict = _proto("strata_predict", ctypes.c_int, c_ctx_p, _c, _c, _c,
                 ctypes.c_int, ctypes.c_uint)
predict_ids = _proto("strata_predict_ids", ctypes.c_int, c_ctx_p, _c, _c, _c,
                     _c, ctypes.c_int, ctypes.c_uint)

# Collectives (strata_comm_*): the comm is an opaque pointer.
c_comm_p = ctypes.c_void_p
COMM_SUM, COMM_MEAN, COMM_GRADIENT = 0, 1, 0x100
_f32p = ctypes.c_void_p   # float *, passed as an address
comm_open = _proto("strata_comm_open", ctypes.c_int, c_ctx_p,
                   ctypes.POINTER(c_comm_p))
comm_close = _proto("strata_comm_close", None, c_comm_p)
comm_rank = _proto("strata_comm_rank", ctypes.c_int, c_comm_p)
comm_size = _proto("strata_comm_size", ctypes.c_int, c_comm_p)
comm_hosts = _proto("strata_comm_hosts", ctypes.c_int, c_comm_p)
comm_transport = _proto("strata_comm_transport", _c, c_comm_p)
comm_allreduce = _proto("strata_comm_allreduce", ctypes.c_int, c_comm_p,
                        _f32p, ctypes.c_size_t, ctypes.c_int)
comm_broadcast = _proto("strata_comm_broadcast", ctypes.c_int, c_comm_p,
                        _f32p, ctypes.c_size_t, ctypes.c_int)
comm_allgather = _proto("strata_comm_allgather", ctypes.c_int, c_comm_p,
                        _f32p, ctypes.c_size_t)
comm_reduce_scatter = _proto("strata_comm_reduce_scatter", ctypes.c_int,
                             c_comm_p, _f32p, ctypes.c_size_t, ctypes.c_int)
comm_barrier = _proto("strata_comm_barrier", ctypes.c_int, c_comm_p)
comm_regroup = _proto("strata_comm_regroup", ctypes.c_int, c_comm_p,
                      ctypes.c_int64, ctypes.POINTER(ctypes.c_int64))
comm_resume_step = _proto("strata_comm_resume_step", ctypes.c_int64,
                          c_comm_p)
comm_resize_due = _proto("strata_comm_resize_due", ctypes.c_int, c_comm_p)
comm_finish = _proto("strata_comm_finish", None, c_comm_p, ctypes.c_int64)
