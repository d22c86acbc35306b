"""strata's collectives for any framework: all-reduce, broadcast,
all-gather, reduce-scatter and barrier across the training processes of a
strata job, on NumPy arrays and on PyTorch CPU tensors (through their
memory, no copy), over the job's transport plugins and secured with its
CURVE keys, as ``strata train`` is (libstrata's strata_comm_*).

    import strata.collectives as sc
    sc.init()                      # or sc.init("job.ini"), sc.init(job)
    g = np.ones(10, np.float32)
    sc.allreduce(g)                # in place: the mean over the processes
    sc.rank(), sc.size()

Run the script as several processes with ``strata launch -n 2 python3
script.py`` (or torchrun, mpirun, TF_CONFIG: the cluster is found as for a
job). Every process calls the same collectives in the same order with
arrays of the same shape; every wait is bounded by the transport's timeout
([transport.zmq] timeout_s), whose expiry raises strata.errors.Timeout.
See docs/python.md."""

import ctypes
import os
import weakref
from typing import Any, Optional, Union

import numpy as np

from . import _lib, errors
from .job import Config, Job

__all__ = ["Communicator", "init", "shutdown", "initialized", "rank", "size",
           "allreduce", "broadcast", "allgather", "reduce_scatter", "barrier"]

_OPS = {"sum": _lib.COMM_SUM, "mean": _lib.COMM_MEAN}


def _is_torch(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


def _view(x: Any) -> np.ndarray:
    """An ndarray sharing x's memory: x itself, a CPU tensor's numpy()
    (no copy), another DLPack producer's np.from_dlpack, else asarray."""
    if isinstance(x, np.ndarray):
        return x
    if _is_torch(x):
        if x.device.type != "cpu":
            raise TypeError("strata.collectives: tensors on %s: CPU tensors "
                            "only (their memory is the buffer)" % x.device)
        return x.detach().numpy()
    if hasattr(x, "__dlpack__"):
        return np.from_dlpack(x)
    return np.asarray(x)


def _like(x: Any, a: np.ndarray) -> Any:
    """A result array as the caller's kind: a tensor for a tensor."""
    if _is_torch(x):
        import torch
        return torch.from_numpy(a)
    return a


def _float32(a: np.ndarray, what: str) -> np.ndarray:
    """a itself when it can be the buffer (float32, C-contiguous,
    writable), else a float32 copy."""
    if not np.issubdtype(a.dtype, np.floating):
        raise TypeError("strata.collectives.%s: dtype %s; sums are of "
                        "floating-point arrays (float32, or float16/float64 "
                        "through a float32 copy)" % (what, a.dtype))
    if a.dtype == np.float32 and a.flags.c_contiguous and a.flags.writeable:
        return a
    return np.ascontiguousarray(a, dtype=np.float32)


def _words(a: np.ndarray) -> np.ndarray:
    """a's bytes as float32 words for the bitwise collectives: a view when
    a is C-contiguous, writable and a multiple of 4 bytes, else a
    zero-padded copy."""
    if a.dtype.hasobject:
        raise TypeError("strata.collectives: arrays of Python objects "
                        "cannot be sent")
    if a.flags.c_contiguous and a.flags.writeable and a.nbytes % 4 == 0:
        return a.reshape(-1).view(np.uint8).view(np.float32)
    w = np.zeros((a.nbytes + 3) // 4, np.float32)
    w.view(np.uint8)[:a.nbytes] = np.ascontiguousarray(a).reshape(-1).view(
        np.uint8)
    return w


def _op(op: str, gradient: bool) -> int:
    try:
        code = _OPS[op]
    except KeyError:
        raise ValueError("strata.collectives: op %r: expected 'sum' or "
                         "'mean'" % (op,)) from None
    return code | (_lib.COMM_GRADIENT if gradient else 0)


class Communicator:
    """The job's world of training processes (chief and workers, in rank
    order): ``Communicator(job)`` joins it (strata_comm_open). ``job``: a
    strata.Job, an INI path, a dict of sections (as strata.Job takes), or
    None (the defaults, the cluster from the environment). compression
    'fp16' or 'bf16' sets [transport.zmq] compression: gradient all-reduces
    (gradient=True) then travel in 16 bits."""

    def __init__(self, job: Union[Job, str, os.PathLike, Config, None] = None,
                 compression: Optional[str] = None):
        self._job = job if isinstance(job, Job) else Job(job)
        if compression:
            self._job.set("transport.zmq.compression=%s" % compression)
        self._comm = _lib.c_comm_p()
        self._job._call(_lib.comm_open, self._job._alive(),
                        ctypes.byref(self._comm))
        self._close = weakref.finalize(self, _lib.comm_close, self._comm)
        self.rank: int = _lib.comm_rank(self._comm)
        self.size: int = _lib.comm_size(self._comm)
        self.transport: str = _lib.comm_transport(self._comm).decode()
        self.hosts: int = _lib.comm_hosts(self._comm)
        self.compression: str = self._job.effective(
            "transport.zmq.compression") if self.size > 1 else "none"

    def close(self) -> None:
        """Leave the world (also at garbage collection)."""
        self._close()

    def __enter__(self) -> "Communicator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, fn, *args) -> None:
        if not self._close.alive:
            raise errors.StateError("strata.collectives: the communicator "
                                    "was closed")
        self._job._call(fn, self._comm, *args)

    def allreduce(self, x: Any, op: str = "mean", gradient: bool = False):
        """x summed ('sum') or averaged ('mean') over every process, in
        place when x is a float32, C-contiguous, writable array or CPU
        tensor (else through a float32 copy written back); returns x.
        gradient=True: the values may travel in 16 bits with compression."""
        a = _view(x)
        buf = _float32(a, "allreduce")
        self._call(_lib.comm_allreduce, buf.ctypes.data, buf.size,
                   _op(op, gradient))
        if buf is not a:
            if not a.flags.writeable:
                return _like(x, buf.reshape(a.shape).astype(a.dtype))
            a[...] = buf.reshape(a.shape)
        return x

    def broadcast(self, x: Any, root: int = 0):
        """x of process `root` on every process, bitwise, any dtype; in
        place (a copy written back when x is not contiguous); returns x."""
        a = _view(x)
        if not a.flags.writeable:
            raise ValueError("strata.collectives.broadcast: x is read-only")
        w = _words(a)
        self._call(_lib.comm_broadcast, w.ctypes.data, w.size, root)
        if not np.shares_memory(w, a):
            a[...] = w.view(np.uint8)[:a.nbytes].view(a.dtype).reshape(
                a.shape)
        return x

    def allgather(self, x: Any):
        """Every process's x (of one shape and dtype everywhere),
        concatenated along the first axis in rank order (Horovod's
        allgather): a new array (a tensor for a tensor), bitwise."""
        a = np.ascontiguousarray(_view(x))
        if a.dtype.hasobject:
            raise TypeError("strata.collectives.allgather: arrays of Python "
                            "objects cannot be sent")
        rows = a.reshape((1,) + a.shape) if a.ndim == 0 else a
        words = (a.nbytes + 3) // 4
        buf = np.zeros(self.size * words, np.float32)
        block = buf.view(np.uint8).reshape(self.size, words * 4)
        block[self.rank, :a.nbytes] = a.reshape(-1).view(np.uint8)
        self._call(_lib.comm_allgather, buf.ctypes.data, words)
        out = np.ascontiguousarray(block[:, :a.nbytes]).view(a.dtype)
        return _like(x, out.reshape((self.size * rows.shape[0],) +
                                    rows.shape[1:]))

    def reduce_scatter(self, x: Any, op: str = "mean",
                       gradient: bool = False):
        """x (whose first axis is a multiple of size) summed or averaged
        over every process, this process's part: rows [rank * k, (rank + 1)
        * k) of the result, k = len(x) / size. A new array."""
        a = _view(x)
        if a.ndim == 0 or a.shape[0] % self.size:
            raise ValueError("strata.collectives.reduce_scatter: shape %s: "
                             "the first axis must be a multiple of the %d "
                             "processes" % (a.shape, self.size))
        if not np.issubdtype(a.dtype, np.floating):
            _float32(a, "reduce_scatter")   # raises the TypeError
        buf = np.array(a, dtype=np.float32, order="C", copy=True)
        k = a.shape[0] // self.size
        self._call(_lib.comm_reduce_scatter, buf.ctypes.data,
                   buf.size // self.size, _op(op, gradient))
        part = buf[self.rank * k:(self.rank + 1) * k]
        return _like(x, part if a.dtype == np.float32
                     else part.astype(a.dtype))

    def barrier(self) -> None:
        """Every process meets."""
        self._call(_lib.comm_barrier)

    # ---- an elastic job (strata launch --elastic MIN:MAX COMMAND) ---------

    @property
    def resume_step(self) -> int:
        """The step the generation joined last goes on from (rank 0 holds
        that state; take it with broadcast), or -1: no member holds one (a
        fresh job, or not an elastic one)."""
        return _lib.comm_resume_step(self._comm)

    def regroup(self, committed: int) -> int:
        """After a collective failed because a member was lost (PeerError,
        Timeout) or where resize_agreed(): join the next generation with
        the steps this process has applied; rank, size change. Returns
        resume_step. NotSupported outside an elastic job."""
        resume = ctypes.c_int64(-1)
        self._call(_lib.comm_regroup, committed, ctypes.byref(resume))
        self.rank = _lib.comm_rank(self._comm)
        self.size = _lib.comm_size(self._comm)
        self.transport = _lib.comm_transport(self._comm).decode()
        self.hosts = _lib.comm_hosts(self._comm)
        return resume.value

    def resize_due(self) -> bool:
        """This process has heard that a later generation is due (a worker
        joins); never blocks. See resize_agreed()."""
        return bool(_lib.comm_resize_due(self._comm))

    def resize_agreed(self) -> bool:
        """Collective: whether any member has heard that a resize is due
        (then all of them regroup() at this step)."""
        flag = np.array([1.0 if self.resize_due() else 0.0], np.float32)
        return bool(self.allreduce(flag, op="sum")[0] > 0)

    def finish(self, steps: int) -> None:
        """Training is over after `steps` steps: the membership service
        tells workers still to join (an elastic job; else nothing)."""
        _lib.comm_finish(self._comm, steps)


_world: Optional[Communicator] = None


def init(job: Union[Job, str, os.PathLike, Config, None] = None,
         compression: Optional[str] = None) -> Communicator:
    """Join the job's world (once per process; again after shutdown()):
    the module's functions act on it. Returns the Communicator."""
    global _world
    if _world is None:
        _world = Communicator(job, compression)
    return _world


def shutdown() -> None:
    """Leave the world that init() joined."""
    global _world
    if _world is not None:
        _world.close()
        _world = None


def initialized() -> bool:
    return _world is not None


def _get() -> Communicator:
    if _world is None:
        raise errors.StateError("strata.collectives: call "
                                "strata.collectives.init() first")
    return _world


def rank() -> int:
    return _get().rank


def size() -> int:
    return _get().size


def allreduce(x: Any, op: str = "mean", gradient: bool = False):
    return _get().allreduce(x, op, gradient)


def broadcast(x: Any, root: int = 0):
    return _get().broadcast(x, root)


def allgather(x: Any):
    return _get().allgather(x)


def reduce_scatter(x: Any, op: str = "mean", gradient: bool = False):
    return _get().reduce_scatter(x, op, gradient)


def barrier() -> None:
    _get().barrier()


for _f in (allreduce, broadcast, allgather, reduce_scatter, barrier):
    _f.__doc__ = getattr(Communicator, _f.__name__).__doc__
del _f
