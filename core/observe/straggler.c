/* [debug] step_delay_ms: this task acts as a straggler. Each replica
 * sleeps once it has its batch, as if its compute were slower (tests and
 * benchmarks of slow workers). An observer of the step stream, so that
 * the training step itself carries no debug code. */
#include <unistd.h>

#include "run.h"

static int on_event(void *self, const strata__event_t *ev)
{
    const strata__run_t *run = self;
    if (ev->kind == STRATA__EV_SAMPLES)
        usleep((useconds_t)run->delay_us);
    return STRATA_OK;
}

int strata__straggler_observer(strata__run_t *run, strata__bus_t *bus)
{
    if (run->delay_us <= 0)
        return STRATA_OK;
    const strata__observer_t o = { "step_delay", run, on_event, NULL };
    return strata__bus_add(bus, &o);
}
