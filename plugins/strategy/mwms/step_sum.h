/* mwms: STRATA_CTL_STEP_SUM, an exact sum of a few doubles across the
 * workers in rank order, over the world group's float all-reduce. */
#ifndef STRATA_MWMS_STEP_SUM_H
#define STRATA_MWMS_STEP_SUM_H

#include <strata/plugin.h>

/* op->buf holds op->count doubles of this worker (rank `rank` of
 * `nworkers`); on return the sum over every worker, added in rank order.
 * Collective over `world` (NULL: one worker, nothing to do). */
int mw_step_sum(const strata_host_v2_t *h, strata_hctx_t *hc,
                strata_transport_t *world, int rank, int nworkers,
                const strata_op_t *op);

#endif
