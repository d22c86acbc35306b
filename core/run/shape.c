/* The run's shape: its geometry (geometry.c computes it) and the
 * learning-rate schedule that follows it (the linear scaling rule's
 * factor), taken at the start of a run and at every regroup of an elastic
 * job. The one writer of run->geo and run->sched. */
#include "run.h"

int strata__run_shape(strata__run_t *run, const strata__geometry_in_t *in,
                      int start)
{
    strata__geometry_t geo;
    int rc = strata__geometry(in, start ? NULL : &run->geo, &geo);
    if (rc == STRATA_OK && (start || geo.lr_scale != run->geo.lr_scale)) {
        int64_t warmup = start ? (int64_t)(in->train->warmup_epochs *
                                           (double)geo.steps_per_epoch)
                               : run->sched.warmup;
        rc = strata__schedule_init(&run->sched, &run->s->optimizer,
                                   geo.lr_scale, warmup);
    }
    if (rc == STRATA_OK)
        run->geo = geo;
    return rc;
}
