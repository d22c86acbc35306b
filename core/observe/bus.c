/* The observers of a run: which ones a run has (its settings decide), and
 * the loop that hands each event to every one of them in order. */
#include <string.h>

#include "run.h"

int strata__bus_add(strata__bus_t *bus, const strata__observer_t *o)
{
    if (bus->n == STRATA__MAX_OBSERVERS) {
        strata__log(STRATA_LOG_ERROR, "observe", "more than %d observers "
                    "(%s)", STRATA__MAX_OBSERVERS, o->name);
        if (o->close)
            o->close(o->self);
        return STRATA_ENOMEM;
    }
    bus->obs[bus->n++] = *o;
    return STRATA_OK;
}

int strata__emit(const strata__bus_t *bus, const strata__event_t *ev)
{
    int rc = STRATA_OK;
    for (int i = 0; i < bus->n; i++) {
        int orc = bus->obs[i].on(bus->obs[i].self, ev);
        if (rc == STRATA_OK)
            rc = orc;
    }
    return rc;
}

void strata__bus_close(strata__bus_t *bus)
{
    for (int i = bus->n - 1; i >= 0; i--)
        if (bus->obs[i].close)
            bus->obs[i].close(bus->obs[i].self);
    bus->n = 0;
}

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
