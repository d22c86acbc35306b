/* Sharded optimizer state for mirrored replicas of one process: ZeRO
 * stage 1 without a transport collective, as local.so does its all-reduce.
 *
 * Replica r owns the elements [shard[r], shard[r + 1]) of the flat layout
 * (16-float lines, replicas.c) and the optimizer state of those only. A
 * step:
 *   reduce  every replica publishes its gradient buffer; once all are
 *           there (barrier), replica r sums its shard of all of them, in
 *           replica order, into replica 0's buffer and scales it for MEAN
 *           -- the reduce-scatter, with exactly local.so's arithmetic
 *           (host->sum, host->scale), so the same bits. Embedding tables
 *           given as rows (ABI 2.9) are added row by row instead
 *           (shard_rows below);
 *   update  with [optimizer] clip_norm, all meet (every shard summed),
 *           each replica measures the whole summed gradient in one pass,
 *           as an unsharded replica does, all meet again, and each clips
 *           its shard by it: the same bits (every replica reads the whole
 *           gradient once, as unsharded, on clipped steps only); then
 *           replica r steps its shard of its own copy with its shard's
 *           optimizer (the same element-wise kernel on the same inputs as
 *           an unsharded step: the same bits -- weight decay included),
 *           copies the shard into every other replica's copy -- the
 *           all-gather -- and waits for the others (barrier): then every
 *           copy is whole, bitwise equal, and nobody reads another's
 *           gradients any more.
 * Two barriers per step, as local.so's all-reduce (two more with
 * clip_norm, one more with rows); each replica does 1/n of the
 * optimizer's work and holds 1/n of its state. The replicas read each
 * other's memory, so every replica must be on a CPU device. */
#include "kit_impl.h"

static int barrier(strata_kit_replicas_t *rs, strata_transport_t *t, int slot)
{
    return rs->n == 1 ? STRATA_OK
                      : strata__kit_barrier(rs->host, rs->hc, t, slot);
}

/* [lo, hi) of every replica's buffer summed in replica order into replica
 * 0's, scaled for MEAN. */
static int sum_range(strata_kit_replicas_t *rs, int32_t device, size_t lo,
                     size_t hi, int mean)
{
    const int n = rs->n;
    if (hi <= lo)
        return STRATA_OK;
    const float *srcs[n];
    for (int r = 0; r < n; r++)
        srcs[r] = rs->grads[r] + lo;
    int rc = rs->host->sum(rs->hc, device, hi - lo, rs->grads[0] + lo, srcs,
                           n);
    if (rc == STRATA_OK && mean)
        rc = rs->host->scale(rs->hc, device, hi - lo, 1.0f / (float)n,
                             rs->grads[0] + lo);
    return rc;
}

int strata_kit_replicas_shard_reduce(strata_kit_replicas_t *rs,
                                     strata_transport_t *t,
                                     const strata_op_t *op, int mean)
{
    const int n = rs->n, me = op->slot;
    if (me < 0 || me >= n || op->count != rs->count || !rs->shard)
        return STRATA_EINVAL;
    rs->grads[me] = op->buf;
    int rc = barrier(rs, t, me);
    return rc == STRATA_OK ? sum_range(rs, op->device, rs->shard[me],
                                       rs->shard[me + 1], mean)
                           : rc;
}

/* [optimizer] clip_norm: once every shard is summed (barrier), the norm
 * of the whole gradient in one pass (an unsharded replica's bits); once
 * every replica has it (barrier: nobody scales a shard another is still
 * reading), applied to this shard. */
static int clip_shard(strata_kit_replicas_t *rs, strata_transport_t *t, int me,
                      int32_t device, size_t lo, size_t len)
{
    const strata_host_v2_t *h = rs->host;
    if (!STRATA_HAS_FIELD(strata_host_v2_t, h, grad_clip))
        return STRATA_OK; /* a core before ABI 2.2 has no clip_norm */
    double sumsq; /* of no floats first: only whether clipping is on */
    int rc = h->grad_sumsq(rs->hc, device, 0, rs->grads[0], &sumsq);
    if (rc != 1)
        return rc; /* 0: clipping is off, for every replica alike */
    rc = barrier(rs, t, me);
    if (rc == STRATA_OK) {
        rc = h->grad_sumsq(rs->hc, device, rs->count, rs->grads[0], &sumsq);
        rc = rc == 1 ? barrier(rs, t, me) : rc < 0 ? rc : STRATA_EINTERNAL;
    }
    return rc == STRATA_OK
               ? h->grad_clip(rs->hc, device, len, rs->grads[0] + lo, sumsq)
               : rc;
}

int strata_kit_replicas_shard_update(strata_kit_replicas_t *rs,
                                     strata_transport_t *t,
                                     const strata_op_t *op)
{
    const int n = rs->n, me = op->slot;
    if (me < 0 || me >= n || !rs->shard)
        return STRATA_EINVAL;
    size_t lo = rs->shard[me], len = rs->shard[me + 1] - lo;
    int rc = clip_shard(rs, t, me, op->device, lo, len);
    /* Stepped even when empty: every shard counts the same steps (Adam's
     * bias correction; the checkpoint's step count). */
    if (rc == STRATA_OK)
        rc = rs->host->opt_step(rs->hc, rs->opt[me], rs->slab[me] + lo,
                                rs->grads[0] + lo, len, op->lr);
    for (int r = 0; rc == STRATA_OK && len > 0 && r < n; r++)
        if (r != me)
            rc = rs->host->copy(rs->hc, rs->devices[r], rs->slab[r] + lo,
                                rs->devices[me], rs->slab[me] + lo,
                                len * sizeof(float));
    /* On failure the core aborts the step (ctl ABORT), which wakes the
     * replicas waiting here. */
    return rc == STRATA_OK ? barrier(rs, t, me) : rc;
}

/* ---- embedding tables as rows ------------------------------------------ */

/* Table j's part [a, b) of the flat layout (this shard's): every
 * replica's rows that fall in it added onto replica 0's zeros, replica by
 * replica, row by row; MEAN scales each touched row's part once after --
 * sparse_local.c's operations, element by element, hence its bits. */
static int shard_rows(strata_kit_replicas_t *rs, strata_kit_sparse_t *s,
                      const strata_op_t *const *pub, const strata_op_t *op,
                      int mean, size_t j, size_t a, size_t b)
{
    const strata_host_v2_t *h = rs->host;
    const strata_sparse_t *mine = &op->sparse[j];
    const size_t len = mine->row_len, vocab = mine->count / len;
    float *dst = rs->grads[0];
    int rc = STRATA_OK;
    if (mean && strata__kit_sparse_marks(s, vocab) != STRATA_OK)
        return STRATA_ENOMEM;
    /* pass 0 adds, pass 1 scales (MEAN), pass 2 clears the marks */
    for (int pass = 0; pass < 3 && rc == STRATA_OK; pass++) {
        if (pass > 0 && !mean)
            break;
        for (int m = 0; rc == STRATA_OK && m < rs->n; m++) {
            const strata_sparse_t *sp = &pub[m]->sparse[j];
            for (size_t i = 0; rc == STRATA_OK && i < sp->nrows; i++) {
                if (sp->rows[i] < 0 || (size_t)sp->rows[i] >= vocab)
                    return STRATA_EINVAL; /* the core's rows: cannot happen */
                size_t r = (size_t)sp->rows[i];
                size_t lo = mine->offset + r * len, hi = lo + len;
                lo = lo < a ? a : lo;
                hi = hi > b ? b : hi;
                if (hi <= lo)
                    continue;
                if (pass == 0)
                    rc = h->axpy(rs->hc, op->device, hi - lo, 1.0f,
                                 sp->values + i * len + (lo - mine->offset -
                                                         r * len),
                                 dst + lo);
                else if (pass == 2)
                    s->mark[r] = 0;
                else if (!s->mark[r]) {
                    s->mark[r] = 1;
                    rc = h->scale(rs->hc, op->device, hi - lo,
                                  1.0f / (float)rs->n, dst + lo);
                }
            }
        }
    }
    return rc;
}

int strata_kit_replicas_shard_reduce_rows(strata_kit_replicas_t *rs,
                                          strata_transport_t *t,
                                          const strata_kit_sparse_policy_t *pol,
                                          strata_kit_sparse_t *s,
                                          const strata_op_t **pub,
                                          const strata_op_t *op, int mean)
{
    if (!STRATA_KIT_HAS_ROWS(op))
        return strata_kit_replicas_shard_reduce(rs, t, op, mean);
    const int n = rs->n, me = op->slot;
    unsigned char rows[64];
    if (me < 0 || me >= n || op->count != rs->count || !rs->shard ||
        op->nsparse > sizeof rows ||
        STRATA_DEVICE_TYPE(op->device) != STRATA_DEV_CPU)
        return STRATA_EINVAL;
    pub[me] = op;
    rs->grads[me] = op->buf;
    int rc = barrier(rs, t, me); /* every replica's rows are up */
    if (rc != STRATA_OK)
        return rc;
    /* rows or dense, per table: the same choice on every replica, and
     * sparse_local.c's; the dense ones into this replica's buffer */
    strata__kit_sparse_choose_local(pol, n, pub, op, rows);
    rc = strata__kit_sparse_tally(rs->host, rs->hc, s, op, rows);
    if (rc == STRATA_OK)
        rc = barrier(rs, t, me); /* every dense table in its buffer */
    /* This shard: the ranges between the tables that go as rows summed,
     * those tables' parts in it added row by row. */
    size_t lo = rs->shard[me], hi = rs->shard[me + 1], a = lo;
    for (size_t j = 0; rc == STRATA_OK && j < op->nsparse && a < hi; j++) {
        const strata_sparse_t *sp = &op->sparse[j];
        size_t t0 = sp->offset, t1 = sp->offset + sp->count;
        if (!rows[j] || t1 <= a)
            continue;
        rc = sum_range(rs, op->device, a, t0 < hi ? t0 : hi, mean);
        if (rc == STRATA_OK && t0 < hi)
            rc = shard_rows(rs, s, pub, op, mean, j, t0 > a ? t0 : a,
                            t1 < hi ? t1 : hi);
        a = t1;
    }
    return rc == STRATA_OK && a < hi ? sum_range(rs, op->device, a, hi, mean)
                                     : rc;
}
