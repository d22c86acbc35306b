"""One process of test_collectives.py's job, run by `strata launch -n N
python3 coll_job.py N` (test_torch.py: by torchrun too): every collective
of strata.collectives on NumPy arrays against the sum computed here (values
exact in float32), under launch a stranger's bytes at its own port between
two collectives, then "rank R: ok" on stdout."""

import json
import os
import socket
import sys

import numpy as np

import strata
import strata.collectives as sc


def val(r, shape, dtype=np.float32):
    n = int(np.prod(shape))
    return (((np.arange(n) % 97) + 3 * (r + 1)) * 0.25).astype(dtype).reshape(
        shape)


def stranger(port):
    """A ZeroMQ 3.0 greeting of the NULL mechanism (not the job's CURVE)
    at "host:port", read until the task hangs up on it."""
    greeting = (b"\xff" + b"\0" * 8 + b"\x7f" + b"\x03\x00" +
                b"NULL".ljust(20, b"\0") + b"\0" * 32)
    with socket.create_connection(("127.0.0.1",
                                   int(port.split(":")[1]))) as s:
        s.sendall(greeting)
        s.settimeout(5)
        try:
            while s.recv(4096):
                pass
        except OSError:
            pass


def main():
    comm = sc.init()
    r, n = sc.rank(), sc.size()
    assert n == int(sys.argv[1]) and comm.transport == "zmq", (n, comm.transport)
    total = sum(val(k, (5, 7)) for k in range(n))

    # all-reduce in place, on the caller's array
    x = val(r, (5, 7))
    assert sc.allreduce(x, op="sum") is x
    np.testing.assert_array_equal(x, total)
    x = val(r, (5, 7))
    sc.allreduce(x)                                   # mean
    np.testing.assert_array_equal(x, total / n)
    # float64 and a non-contiguous view: through a float32 copy
    x64 = val(r, (4, 6), np.float64)
    sc.allreduce(x64[:, ::2], op="sum")
    np.testing.assert_array_equal(x64[:, ::2],
                                  sum(val(k, (4, 6)) for k in range(n))[:, ::2])
    np.testing.assert_array_equal(x64[:, 1::2], val(r, (4, 6))[:, 1::2])

    # a stranger at this task's port (strata launch's TF_CONFIG names it):
    # dropped, the job goes on
    if "TF_CONFIG" in os.environ:
        stranger(json.loads(os.environ["TF_CONFIG"])["cluster"]["worker"][r])
    sc.barrier()


    # broadcast, any dtype, bitwise
    b = np.arange(11, dtype=np.int64) * (r + 1)
    sc.broadcast(b, root=n - 1)
    np.testing.assert_array_equal(b, np.arange(11) * n)
    u = np.full(5, r, np.uint8)                       # 5 bytes: padded
    sc.broadcast(u, root=0)
    np.testing.assert_array_equal(u, np.zeros(5, np.uint8))

    # all-gather along the first axis
    g = sc.allgather(val(r, (3, 2)))
    np.testing.assert_array_equal(g, np.concatenate([val(k, (3, 2))
                                                     for k in range(n)]))
    g = sc.allgather(np.array([r, r + 10], np.int16))
    np.testing.assert_array_equal(g, np.array([[k, k + 10] for k in range(n)],
                                              np.int16).reshape(-1))

    # reduce-scatter: this rank's rows of the sum
    rs = sc.reduce_scatter(val(r, (2 * n, 3)), op="sum")
    whole = sum(val(k, (2 * n, 3)) for k in range(n))
    np.testing.assert_array_equal(rs, whole[2 * r:2 * r + 2])

    # refusals, the same on every rank, and the job still works after
    for call, exc in ((lambda: sc.allreduce(np.arange(3)), TypeError),
                      (lambda: sc.allreduce(x, op="max"), ValueError),
                      (lambda: sc.broadcast(b, root=n), strata.errors.InvalidArgument),
                      (lambda: sc.reduce_scatter(np.ones(n + 1, np.float32)),
                       ValueError)):
        try:
            call()
        except exc as e:
            assert str(e), e
        else:
            raise AssertionError("no %s" % exc.__name__)
    sc.barrier()
    sc.shutdown()
    print("rank %d: ok" % r, flush=True)


main()
