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

/* Doubles summed across the processes: exactly, in rank order, where the
 * strategy offers it (STRATA_CTL_STEP_SUM: an epoch's loss and metric then
 * come out as one process's replicas would add them), else through floats. */
int strata__run_world_sum_f64(strata__run_t *run, double *buf, int n)
{
    if (run->geo.nworkers == 1 || n <= 0)
        return STRATA_OK;
    if (run->strategy->caps & STRATA_CAP_STEP_SUM) {
        strata_op_t op = { .struct_size = sizeof op, .buf = buf,
                           .count = (size_t)n,
                           .device = STRATA_DEVICE(STRATA_DEV_CPU, 0),
                           .reduce_op = STRATA_REDUCE_SUM };
        return run->strategy->vt->ctl(run->spctx, STRATA_CTL_STEP_SUM, &op);
    }
    float f[64];
    for (int at = 0; at < n; at += 64) {
        int k = n - at < 64 ? n - at : 64;
        for (int i = 0; i < k; i++)
            f[i] = (float)buf[at + i];
        int rc = strata__run_world_sum(run, f, k);
        if (rc != STRATA_OK)
            return rc;
        for (int i = 0; i < k; i++)
            buf[at + i] = f[i];
    }
    return STRATA_OK;
}
