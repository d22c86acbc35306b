/* Which observers a run has: its settings decide, each constructor
 * adding itself to the bus (bus.c) or not. */
#include "run/run.h"

/* After the banner, once the run knows who it is (chief, rank). The order
 * is the order of their output at an epoch's end: the progress line first,
 * then the files. Each constructor adds nothing when its setting is off.
 * (The step log is opened earlier, in the run's setup: a job whose step
 * log cannot be written does not start.) */
int strata__observers_open(strata__run_t *run)
{
    int (*const make[])(strata__run_t *, strata__bus_t *) = {
        strata__progress_observer,    strata__metrics_observer,
        strata__tensorboard_observer, strata__trace_observer,
        strata__lr_dump_observer,     strata__straggler_observer,
        strata__embedder_observer,
    };
    int rc = STRATA_OK;
    for (size_t i = 0; rc == STRATA_OK && i < sizeof make / sizeof *make; i++)
        rc = make[i](run, &run->bus);
    return rc;
}
