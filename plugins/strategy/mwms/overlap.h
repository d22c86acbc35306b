/* mwms's gradient buckets and the thread that all-reduces them during the
 * backward pass (overlap.c says how and why). */
#ifndef MWMS_OVERLAP_H
#define MWMS_OVERLAP_H

#include <strata/plugin.h>

typedef struct mw_buckets mw_buckets_t;

/* Buckets of whole variables (var_lo: the nvars first elements, ascending,
 * var_lo[0] = 0) of about bucket_bytes each (0: one bucket of all `count`),
 * and with `threaded` a thread that reduces them as they become final.
 * shards (nshards + 1 bounds, kept by the caller) or NULL: each bucket is
 * reduce-scattered over them, or all-reduced. */
int  mw_buckets_open(mw_buckets_t **out, const strata_host_v2_t *h,
                     strata_hctx_t *hc, const size_t *var_lo, int nvars,
                     size_t count, size_t bucket_bytes, int threaded,
                     const size_t *shards, int nshards);
void mw_buckets_close(mw_buckets_t *b);
int  mw_buckets_count(const mw_buckets_t *b);
int  mw_buckets_threaded(const mw_buckets_t *b);
/* The gradients op->buf[ready, op->count) are final: their buckets go to
 * the thread (no-op unthreaded). Returns a failure of a bucket so far. */
int  mw_buckets_ready(mw_buckets_t *b, strata_transport_t *t,
                      const strata_op_t *op, size_t ready);
/* All-reduce (reduce-scatter) every bucket of op->buf across t not reduced
 * yet, last bucket first; returns when all are done. */
int  mw_buckets_reduce(mw_buckets_t *b, strata_transport_t *t,
                       const strata_op_t *op);
/* Drop what a failed step left (waits for a bucket in flight): before the
 * transport closes. */
void mw_buckets_drain(mw_buckets_t *b);

#endif
