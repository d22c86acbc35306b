/* The event bus of a run: the loop that hands each event to every
 * observer in order (which observers a run has: observers.c). */
#include <string.h>

#include "run/run.h"

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
