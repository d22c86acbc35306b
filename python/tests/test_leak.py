"""Buffer lifetimes and leaks: many fits in one process, each a new job
over new arrays, then many fit/evaluate/predict on one job, hold the
process's resident memory flat (measured from /proc/self/statm)."""

import gc
import os


import strata
from conftest import SMALL

# 1000 jobs (the figure; ~50 s on 2 idle cores), then 50 rounds of
# fit/evaluate/predict on one job; either raised from the environment.
ROUNDS = int(os.environ.get("STRATA_LEAK_ROUNDS", "1000"))
REUSE = int(os.environ.get("STRATA_LEAK_REUSE", "50"))


def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_no_leak_over_many_fits(data):
    def one_job(i):
        x = data["x"][:128].copy()   # fresh arrays: the job must keep them
        y = data["y"][:128].copy()
        job = strata.Job(SMALL, overrides=["train.epochs=1"])
        job.fit(x, y, verbose=0)
        del x, y
        gc.collect()
        assert job.predict(data["xt"][:8]).shape == (8, 3)
        job.close()

    for i in range(20):   # warm up: allocator pools, plugin dlopen
        one_job(i)
    before = rss_mib()
    for i in range(ROUNDS):
        one_job(i)
    gc.collect()
    grown = rss_mib() - before
    print("RSS %.1f MiB -> +%.2f MiB over %d jobs" % (before, grown, ROUNDS))
    assert grown < 4.0, "RSS grew %.2f MiB over %d jobs" % (grown, ROUNDS)

    job = strata.Job(SMALL, overrides=["train.epochs=1"])
    job.fit(data["x"], data["y"], verbose=0)
    before = rss_mib()
    for i in range(REUSE):
        job.fit(data["x"], data["y"], verbose=0)
        job.evaluate(data["xt"], data["yt"])
        job.predict(data["xt"])
    grown = rss_mib() - before
    print("RSS +%.2f MiB over %d fits of one job" % (grown, REUSE))
    assert grown < 4.0
    job.close()
