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
 *           (host->sum, host->scale), so the same bits;
 *   update  with [optimizer] clip_norm, replica r measures its shard of
 *           the summed gradient, all meet, and each clips its shard by the
 *           total of every shard's, added in replica order (as central.so
 *           does: the same figure everywhere, but not the bits of the one
 *           pass over the whole gradient an unsharded replica makes, so
 *           clipped runs agree with unsharded ones to rounding, not bit
 *           for bit); then replica r steps its shard of its own copy with
 *           its shard's optimizer (the same element-wise kernel on the
 *           same inputs as an unsharded step: the same bits -- weight
 *           decay included), copies the shard into every
 *           other replica's copy -- the all-gather -- and waits for the
 *           others (barrier): then every copy is whole, bitwise equal, and
 *           nobody reads another's gradients any more.
 * Two barriers per step, as local.so's all-reduce (three with clip_norm);
 * each replica does 1/n
 * of the optimizer's work and holds 1/n of its state. The replicas read
 * each other's memory, so every replica must be on a CPU device. */
#include <strata/kit.h>

static int barrier(strata_kit_replicas_t *rs, strata_transport_t *t, int slot)
{
    const strata_host_v2_t *h = rs->host;
    if (rs->n == 1)
        return STRATA_OK;
    /* A core before 2.5 has the barrier as a ctl op only. */
    return STRATA_HAS_FIELD(strata_host_v2_t, h, t_barrier)
               ? h->t_barrier(rs->hc, t, slot)
               : h->t_ctl(rs->hc, t, STRATA_CTL_BARRIER, &slot);
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
    size_t lo = rs->shard[me], len = rs->shard[me + 1] - lo;
    if (rc != STRATA_OK || len == 0)
        return rc;
    const float *srcs[n];
    for (int r = 0; r < n; r++)
        srcs[r] = rs->grads[r] + lo;
    rc = rs->host->sum(rs->hc, op->device, len, rs->grads[0] + lo, srcs, n);
    if (rc == STRATA_OK && mean)
        rc = rs->host->scale(rs->hc, op->device, len, 1.0f / (float)n,
                             rs->grads[0] + lo);
    return rc;
}

/* [optimizer] clip_norm: the shard measured, all meet, the shard clipped
 * by the sum of every shard's in replica order. Nobody overwrites its
 * sumsq[] before all have read it: the update's last barrier is between. */
static int clip_shard(strata_kit_replicas_t *rs, strata_transport_t *t, int me,
                      int32_t device, size_t lo, size_t len)
{
    const strata_host_v2_t *h = rs->host;
    if (!STRATA_HAS_FIELD(strata_host_v2_t, h, grad_clip))
        return STRATA_OK; /* a core before ABI 2.2 has no clip_norm */
    int rc = h->grad_sumsq(rs->hc, device, len, rs->grads[0] + lo,
                           &rs->sumsq[me]);
    if (rc != 1)
        return rc; /* 0: clipping is off, for every replica alike */
    rc = barrier(rs, t, me);
    double total = 0.0;
    for (int r = 0; r < rs->n; r++)
        total += rs->sumsq[r];
    return rc == STRATA_OK ? h->grad_clip(rs->hc, device, len,
                                          rs->grads[0] + lo, total)
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
