"""Data-parallel PyTorch over strata's collectives, in Horovod's style:

    import strata.collectives as sc, strata.torch as st
    sc.init()                                   # the job's world
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt = st.DistributedOptimizer(opt, model.named_parameters())
    st.broadcast_parameters(model.state_dict(), root_rank=0)
    for x, y in shard_of_the_data:              # each process its own part
        opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()

Each gradient is averaged over the processes: a hook on each parameter notes
when backward has accumulated its gradient; the parameters are cut into
buckets (about bucket_bytes of gradients each, the last layers first, as
backward produces them), and a bucket whose gradients are all there is
all-reduced on a background thread while backward goes on with the earlier
layers (libstrata releases the GIL) -- by default when the processes are on
several hosts; on one host they are all-reduced at step(). step() waits for
the buckets, writes the means into .grad and steps. Buckets go out in one
fixed order on every process. CPU tensors of float32 (others through a
float32 copy).

This module imports torch; strata itself does not need it."""

import queue
import threading
import weakref
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

import numpy as np
import torch

from . import collectives as _coll
from . import errors

__all__ = ["DistributedOptimizer", "broadcast_parameters",
           "broadcast_optimizer_state"]


def _world(comm: Optional[_coll.Communicator]) -> _coll.Communicator:
    return comm if comm is not None else _coll._get()


class _Reducer:
    """The buckets of one optimizer and the thread that all-reduces them."""

    def __init__(self, params: List[Tuple[str, torch.Tensor]],
                 comm: _coll.Communicator, bucket_bytes: int, op: str,
                 overlap: bool):
        self.comm, self.op, self.overlap = comm, op, overlap
        # reverse registration order: roughly the order backward fills them
        self.buckets: List[List[torch.Tensor]] = []
        size = 0
        for _, p in reversed(params):
            nbytes = p.numel() * 4
            if not self.buckets or (size + nbytes > bucket_bytes and
                                    self.buckets[-1]):
                self.buckets.append([])
                size = 0
            self.buckets[-1].append(p)
            size += nbytes
        self.bucket_of = {id(p): b for b, ps in enumerate(self.buckets)
                          for p in ps}
        self.jobs: "queue.Queue" = queue.Queue()
        self.thread = threading.Thread(target=self._serve, daemon=True,
                                       name="strata-allreduce")
        self.thread.start()
        self._reset()

    def _reset(self) -> None:
        self.missing = [len(ps) for ps in self.buckets]
        self.next = 0                  # the next bucket to send, in order
        self.flat: List[Optional[np.ndarray]] = [None] * len(self.buckets)
        self.done: List[threading.Event] = [threading.Event()
                                            for _ in self.buckets]
        self.error: Optional[BaseException] = None

    def _serve(self) -> None:
        while True:
            b = self.jobs.get()
            if b is None:
                return
            try:   # every bucket, as on the other processes
                self.comm.allreduce(self.flat[b], self.op, gradient=True)
            except BaseException as e:     # raised by step()
                if self.error is None:
                    self.error = e
            self.done[b].set()

    def _flatten(self, b: int) -> None:
        grads = [p.grad if p.grad is not None else torch.zeros_like(p)
                 for p in self.buckets[b]]
        self.flat[b] = torch.cat([g.detach().reshape(-1).float()
                                  for g in grads]).numpy()

    def ready(self, p: torch.Tensor) -> None:
        """p's gradient is accumulated: send every bucket complete in
        order."""
        b = self.bucket_of[id(p)]
        self.missing[b] -= 1
        if self.missing[b] < 0 and self.error is None:
            self.error = errors.StateError(
                "strata.torch.DistributedOptimizer: a second backward pass "
                "before step(): gradients are all-reduced once per step")
        if not self.overlap:   # synchronize() sends them all
            return
        while self.next < len(self.buckets) and self.missing[self.next] == 0:
            self._flatten(self.next)
            self.jobs.put(self.next)
            self.next += 1

    def synchronize(self) -> None:
        """Send what backward did not complete (unused parameters: zeros),
        wait, and write the means into .grad."""
        while self.next < len(self.buckets):
            self._flatten(self.next)
            self.jobs.put(self.next)
            self.next += 1
        for ev in self.done:
            ev.wait()
        error = self.error
        try:
            if error is not None:
                raise error
            for b, ps in enumerate(self.buckets):
                flat = torch.from_numpy(self.flat[b])
                at = 0
                for p in ps:
                    n = p.numel()
                    mean = flat[at:at + n].view_as(p)
                    if p.grad is None:
                        p.grad = mean.to(p.dtype).clone()
                    else:
                        p.grad.copy_(mean)
                    at += n
        finally:
            self._reset()

    def close(self) -> None:
        self.jobs.put(None)


def _hook(p: torch.Tensor, fn) -> Any:
    """fn() after p's gradient is accumulated (PyTorch >= 2.1 has a hook for
    it; before, the hook of p's gradient accumulator, as Horovod does)."""
    if hasattr(p, "register_post_accumulate_grad_hook"):
        return p.register_post_accumulate_grad_hook(lambda _p: fn())
    acc = p.expand_as(p).grad_fn.next_functions[0][0]
    handle = acc.register_hook(lambda *_: fn())
    return (handle, acc)   # keep the accumulator alive


class _DistributedOptimizer(torch.optim.Optimizer):
    """Mixed into the class of the optimizer DistributedOptimizer wraps."""

    def _strata_init(self, named_parameters, comm, bucket_bytes, op,
                     overlap):
        named = list(named_parameters) if named_parameters is not None else [
            ("param.%d" % i, p) for i, p in enumerate(
                q for g in self.param_groups for q in g["params"])]
        names = [n for n, _ in named]
        if len(set(names)) != len(names):
            raise ValueError("strata.torch.DistributedOptimizer: "
                             "named_parameters has a name twice")
        mine = {id(p) for g in self.param_groups for p in g["params"]}
        trained = [(n, p) for n, p in named
                   if id(p) in mine and p.requires_grad]
        for n, p in trained:
            if p.device.type != "cpu":
                raise TypeError("strata.torch.DistributedOptimizer: %s is on "
                                "%s: CPU parameters only" % (n, p.device))
        self._strata = _Reducer(trained, comm, bucket_bytes, op, overlap)
        weakref.finalize(self, self._strata.close)   # ends its thread
        self._strata_hooks = [_hook(p, (lambda q: lambda: self._strata.ready(
            q))(p)) for _, p in trained]

    def synchronize(self) -> None:
        """Wait for every gradient's all-reduce (step() calls it)."""
        self._strata.synchronize()

    def step(self, closure=None):
        self.synchronize()
        return super(self.__class__, self).step(closure)


def DistributedOptimizer(optimizer: torch.optim.Optimizer,
                         named_parameters: Optional[Iterable[
                             Tuple[str, torch.Tensor]]] = None,
                         compression: Optional[str] = None,
                         bucket_bytes: int = 1 << 20, op: str = "mean",
                         comm: Optional[_coll.Communicator] = None,
                         overlap: Optional[bool] = None
                         ) -> torch.optim.Optimizer:
    """`optimizer` (any torch.optim.Optimizer) made data-parallel: its
    step() applies the mean (op='sum': the sum) of every process's
    gradients. An instance of a subclass of optimizer's class over the
    same parameter groups (its state starts afresh, as Horovod's).
    named_parameters: model.named_parameters(), for messages; compression:
    'fp16' or 'bf16' when the world was joined with it
    (strata.collectives.init(job, compression='fp16')): gradients travel
    in 16 bits per value; None: as the job says. comm: the world of
    strata.collectives.init() unless given. overlap: all-reduce each bucket
    while backward goes on (True), or every bucket at step() (False);
    None: when the processes are on several hosts (on one they share its
    cores, and overlap slowed the step down 1.5-3x in contrib/bench/
    torch_optimizer)."""
    world = _world(comm)
    if compression not in (None, "none") and compression != world.compression:
        raise ValueError("strata.torch.DistributedOptimizer: compression %r, "
                         "but the world was joined with %r: join it with "
                         "strata.collectives.init(job, compression=%r)"
                         % (compression, world.compression, compression))
    if op not in ("mean", "sum"):
        raise ValueError("strata.torch.DistributedOptimizer: op %r: expected "
                         "'mean' or 'sum'" % (op,))
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    # the class's own __init__ on the wrapped one's groups, whose
    # hyper-parameters it keeps (as Horovod's)
    opt = cls(optimizer.param_groups)
    if overlap is None:
        overlap = world.hosts > 1
    opt._strata_init(named_parameters, world, bucket_bytes, op, overlap)
    return opt


def _tensors(params: Union[Dict[str, Any], Iterable]) -> List[torch.Tensor]:
    items = params.items() if isinstance(params, dict) else params
    out = []
    for item in items:
        t = item[1] if isinstance(item, tuple) else item
        if torch.is_tensor(t):
            out.append(t)
    return out


def broadcast_parameters(params: Union[Dict[str, torch.Tensor], Iterable],
                         root_rank: int = 0,
                         comm: Optional[_coll.Communicator] = None) -> None:
    """Every tensor of `params` (a state_dict, named_parameters() or
    parameters()) set, in place and bitwise, to process root_rank's: one
    broadcast of their bytes together."""
    world = _world(comm)
    tensors = _tensors(params)
    if world.size == 1 or not tensors:
        return
    with torch.no_grad():
        parts = [t.detach().contiguous().reshape(-1).view(torch.uint8)
                 if t.dtype != torch.bool else
                 t.detach().contiguous().reshape(-1).to(torch.uint8)
                 for t in tensors]
        flat = torch.cat(parts)
        world.broadcast(flat.numpy(), root=root_rank)
        at = 0
        for t, part in zip(tensors, parts):
            n = part.numel()
            src = flat[at:at + n]
            if t.dtype == torch.bool:
                t.copy_(src.to(torch.bool).view(t.shape))
            else:
                t.copy_(src.view(t.dtype).view(t.shape))
            at += n


def broadcast_optimizer_state(optimizer: torch.optim.Optimizer,
                              root_rank: int = 0,
                              comm: Optional[_coll.Communicator] = None
                              ) -> None:
    """The tensors of the optimizer's state (momentum buffers, Adam's
    moments and step) set, in place, to process root_rank's, where every
    process holds state of the same shapes (after a first step, or loaded
    from a checkpoint)."""
    state = optimizer.state_dict()["state"]   # the state's own tensors
    broadcast_parameters([v for k in sorted(state)
                          for _, v in sorted(state[k].items())
                          if torch.is_tensor(v)], root_rank, comm)
