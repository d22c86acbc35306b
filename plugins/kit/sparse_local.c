/* The plugin kit: embedding gradients as rows (ABI 2.9) for the replica
 * threads of one process (mirrored): each reads the others' rows in place
 * after a barrier, adds them in replica order, then row order, and meets
 * the others again before anyone overwrites its rows (include/strata/kit.h,
 * part 4; the gathered form for processes is sparse.c). */
#include <string.h>

#include "kit_impl.h"

/* Table j's rows of every replica added onto its zeros, replica by
 * replica, row by row; MEAN scales each touched row once after. */
static int add_in_place(const strata_host_v2_t *host, strata_hctx_t *hc,
                        int nmembers, strata_kit_sparse_t *s,
                        const strata_op_t *const *pub, const strata_op_t *op,
                        size_t j)
{
    const strata_sparse_t *mine = &op->sparse[j];
    float *dst = (float *)op->buf + mine->offset;
    size_t len = mine->row_len, vocab = mine->count / len;
    int rc = STRATA_OK;
    for (int m = 0; rc == STRATA_OK && m < nmembers; m++) {
        const strata_sparse_t *sp = &pub[m]->sparse[j];
        for (size_t i = 0; rc == STRATA_OK && i < sp->nrows; i++) {
            if (sp->rows[i] < 0 || (size_t)sp->rows[i] >= vocab)
                return STRATA_EINVAL; /* the core's rows: cannot happen */
            rc = host->axpy(hc, op->device, len, 1.0f, sp->values + i * len,
                            dst + (size_t)sp->rows[i] * len);
        }
    }
    if (rc != STRATA_OK || op->reduce_op != STRATA_REDUCE_MEAN)
        return rc;
    if (strata__kit_sparse_marks(s, vocab) != STRATA_OK)
        return STRATA_ENOMEM;
    float inv = 1.0f / (float)nmembers;
    for (int pass = 0; pass < 2; pass++)
        for (int m = 0; m < nmembers; m++) {
            const strata_sparse_t *sp = &pub[m]->sparse[j];
            for (size_t i = 0; i < sp->nrows; i++) {
                size_t r = (size_t)sp->rows[i];
                if (pass == 1) {
                    s->mark[r] = 0;
                } else if (!s->mark[r] && rc == STRATA_OK) {
                    s->mark[r] = 1;
                    rc = host->scale(hc, op->device, len, inv, dst + r * len);
                }
            }
        }
    return rc;
}

void strata__kit_sparse_choose_local(const strata_kit_sparse_policy_t *pol,
                                     int n, const strata_op_t *const *pub,
                                     const strata_op_t *op,
                                     unsigned char *rows)
{
    for (size_t j = 0; j < op->nsparse; j++) {
        double total = 0.0;
        for (int m = 0; m < n; m++)
            total += (double)pub[m]->sparse[j].nrows;
        double table = (double)(op->sparse[j].count / op->sparse[j].row_len);
        rows[j] = n > 1 && !pol->as_dense && total <= pol->threshold * table;
    }
}

int strata_kit_sparse_reduce_local(const strata_host_v2_t *host,
                                   strata_hctx_t *hc, strata_transport_t *t,
                                   int member, int nmembers,
                                   const strata_kit_sparse_policy_t *pol,
                                   strata_kit_sparse_t *s,
                                   const strata_op_t **pub, strata_op_t *op,
                                   strata_kit_dense_fn dense, void *arg)
{
    if (!STRATA_KIT_HAS_ROWS(op))
        return dense(arg, op);
    unsigned char rows[64];
    if (op->nsparse > sizeof rows || member < 0 || member >= nmembers ||
        STRATA_DEVICE_TYPE(op->device) != STRATA_DEV_CPU) {
        host->log(hc, STRATA_LOG_ERROR, NULL, "sparse gradients: %zu tables "
                  "(at most %zu), member %d of %d, device %d (host memory "
                  "only)", op->nsparse, sizeof rows, member, nmembers,
                  (int)op->device);
        return STRATA_EINVAL;
    }
    memset(rows, 0, sizeof rows);
    int rc = STRATA_OK;
    if (nmembers > 1 && !pol->as_dense) {
        pub[member] = op;
        /* every replica's op is up */
        rc = strata__kit_barrier(host, hc, t, op->slot);
        if (rc == STRATA_OK)
            strata__kit_sparse_choose_local(pol, nmembers, pub, op, rows);
    }
    int any = 0;
    for (size_t j = 0; j < op->nsparse; j++)
        any |= rows[j];
    /* Tables that go dense: their rows into the buffer. The collective
     * that follows (the all-reduce) keeps every replica's rows in place
     * until each has decided. */
    if (rc == STRATA_OK)
        rc = strata__kit_sparse_tally(host, hc, s, op, rows);
    if (rc == STRATA_OK && !any) {
        strata_op_t d = *op;
        d.sparse = NULL;
        d.nsparse = 0;
        return dense(arg, &d);
    }
    if (rc == STRATA_OK)
        rc = strata__kit_sparse_gaps(host, hc, t, op, rows);
    for (size_t j = 0; rc == STRATA_OK && j < op->nsparse; j++)
        if (rows[j])
            rc = add_in_place(host, hc, nmembers, s, pub, op, j);
    /* No replica may go on (and overwrite its rows) while another reads. */
    return rc == STRATA_OK ? strata__kit_barrier(host, hc, t, op->slot) : rc;
}
