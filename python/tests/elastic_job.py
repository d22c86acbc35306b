"""One worker of test_collectives.py's elastic job, run by `strata launch
--elastic 2:3 -n 3 python3 elastic_job.py DIR`: a "training" of STEPS steps
whose state (4 floats) adds the mean of every member's step + 1 at each
step, so that it ends at STEPS * (STEPS + 1) / 2 whoever computed it.
worker:2 dies at step 8 the first time (a marker file in DIR); the others
regroup without it and go on from rank 0's state; launch restarts it, it
joins the running job (taking rank 0's state) and the others regroup with
it at a step where they agree that a resize is due. The members keep
stepping past STEPS until they are 3 again (at most DEADLINE s)."""

import os
import sys
import time

import numpy as np

import strata.collectives as sc
from strata import errors

STEPS, DEADLINE = 40, 40.0


def main():
    marker = os.path.join(sys.argv[1], "died")
    me = os.environ["STRATA_LAUNCHED"]            # "worker:2"
    comm = sc.init()
    state = np.zeros(4, np.float32)
    step = np.zeros(1, np.int64)
    sizes = [comm.size]

    def take_state():   # rank 0 holds the newest state
        comm.broadcast(state, root=0)
        comm.broadcast(step, root=0)

    if comm.resume_step >= 0:          # joined a job under way
        take_state()
        print("%s joined at step %d" % (me, step[0]), flush=True)
    t0 = time.monotonic()
    while step[0] < STEPS or (comm.size < 3 and
                              time.monotonic() - t0 < DEADLINE):
        try:
            if comm.resize_agreed():
                comm.regroup(int(step[0]))
                take_state()
                sizes.append(comm.size)
                continue
            g = np.full(4, step[0] + 1, np.float32)
            comm.allreduce(g)                      # the mean: step + 1
            state += g
            step += 1
            time.sleep(0.05)
            if me == "worker:2" and step[0] == 8 and not os.path.exists(marker):
                open(marker, "w").close()
                os._exit(1)                        # dies; launch restarts it
        except (errors.PeerError, errors.Timeout, errors.Canceled):
            comm.regroup(int(step[0]))
            take_state()
            sizes.append(comm.size)
    n = int(step[0])
    assert (state == n * (n + 1) / 2).all(), (state, n)
    comm.finish(n)
    print("%s: ok at step %d, sizes %s" % (me, n, sizes), flush=True)
    sc.shutdown()


main()
