/* The run's one sum across the processes of its job: figures every task
 * must agree on (loss and accuracy, the monitor's decision, a stop). */
#include "run.h"

/* The strategy knows how (STRATA_CTL_WORLD_SUM); a single-process
 * strategy does not need to. */
int strata__run_world_sum(strata__run_t *run, float *buf, int n)
{
    const strata_plugin_v2_t *vt = run->strategy->vt;
    if (run->geo.nworkers == 1 || !(run->strategy->caps & STRATA_CAP_WORLD_SUM))
        return STRATA_OK;
    strata_op_t op = { .struct_size = sizeof op, .buf = buf, .count = (size_t)n,
                       .device = STRATA_DEVICE(STRATA_DEV_CPU, 0),
                       .reduce_op = STRATA_REDUCE_SUM };
    int rc = vt->ctl(run->spctx, STRATA_CTL_WORLD_SUM, &op);
    return rc == STRATA_ENOTSUP ? STRATA_OK : rc;
}
