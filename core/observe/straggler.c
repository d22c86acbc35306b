/* [debug] step_delay_ms: this task acts as a straggler. Each replica
 * sleeps once it has its batch, as if its compute were slower (tests and
 * benchmarks of slow workers). An observer of the step stream, so that
 * the training step itself carries no debug code. */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "run/run.h"

static int on_event(void *self, const strata__event_t *ev)
{
    if (ev->kind == STRATA__EV_SAMPLES)
        usleep((useconds_t)(uintptr_t)self);
    return STRATA_OK;
}

/* This task is the straggler when debug.delay_task names it, or names
 * none. */
int strata__straggler_observer(strata__run_t *run, strata__bus_t *bus)
{
    const strata__debug_cfg_t *d = &run->s->debug;
    if (d->step_delay_ms <= 0 ||
        (d->delay_task[0] && strcmp(d->delay_task, run->self)))
        return STRATA_OK;
    uintptr_t us = (uintptr_t)(d->step_delay_ms * 1000);
    const strata__observer_t o = { "step_delay", (void *)us, on_event, NULL };
    return strata__bus_add(bus, &o);
}
