/* An exact sum of doubles over a float all-reduce: each double travels as
 * three floats whose sum is the double exactly (a = (float)d, b =
 * (float)(d - a), c = (float)(d - a - b): 72 bits of mantissa hold its
 * 53), each worker in its own block of a buffer zeroed elsewhere, so the
 * all-reduce adds every value to zeros only, which is exact. Every worker
 * then adds the workers' doubles in rank order: the same bits on all. */
#include <stdlib.h>
#include <string.h>

#include "step_sum.h"

int mw_step_sum(const strata_host_v2_t *h, strata_hctx_t *hc,
                strata_transport_t *world, int rank, int nworkers,
                const strata_op_t *op)
{
    if (!world || nworkers <= 1 || op->count == 0)
        return STRATA_OK;
    double *d = op->buf;
    size_t n = op->count, per = 3 * n;
    float *all = calloc((size_t)nworkers * per, sizeof *all);
    if (!all)
        return STRATA_ENOMEM;
    float *mine = all + (size_t)rank * per;
    for (size_t i = 0; i < n; i++) {
        float a = (float)d[i];
        float b = (float)(d[i] - (double)a);
        float c = (float)(d[i] - (double)a - (double)b);
        mine[3 * i] = a;
        mine[3 * i + 1] = b;
        mine[3 * i + 2] = c;
    }
    strata_op_t t = *op;
    t.buf = all;
    t.count = (size_t)nworkers * per;
    t.slot = 0;
    t.reduce_op = STRATA_REDUCE_SUM;
    t.flags = 0; /* exact: never compressed */
    int rc = h->t_reduce(hc, world, &t);
    for (size_t i = 0; rc == STRATA_OK && i < n; i++) {
        double sum = 0.0;
        for (int w = 0; w < nworkers; w++) {
            const float *p = all + (size_t)w * per + 3 * i;
            sum += ((double)p[0] + (double)p[1]) + (double)p[2];
        }
        d[i] = sum;
    }
    free(all);
    return rc;
}
