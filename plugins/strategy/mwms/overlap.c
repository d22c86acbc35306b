/* mwms's gradient buckets, and the thread that all-reduces them across the
 * workers while the backward pass goes on (overlap = true).
 *
 * Buckets are fixed once the variables are placed: whole variables, taken
 * from the last one down, cut where a bucket reaches bucket_bytes. They are
 * all-reduced last bucket first, each as one call of the world transport,
 * whether the thread does it during the backward pass (a bucket goes as soon
 * as the core says its gradients are final: reduce_ready) or the reduce
 * does it after. The same buckets in the same order give the same sums:
 * overlap on and off are bitwise equal by construction (tests/train
 * checks it), and bucket_bytes = 0 -- one bucket -- is the whole-buffer
 * all-reduce of old.
 *
 * One step at a time: a step's buckets are handed over in order; reduce()
 * hands over the rest and waits for all. A step that fails before its
 * reduce() leaves buckets behind: the next step, a regroup or fini drops
 * them (after the one in flight, which an ABORT of the transport ends). The
 * thread reduces with the floating-point environment of the replica thread
 * that handed the step over (FTZ/DAZ), so its sums are the ones that thread
 * would make.
 *
 * Sharded (shard_optimizer over a transport that offers it): each bucket
 * is reduce-scattered instead, over the worker shards cut to the bucket.
 * An element's sum runs along the ring from the member after its shard's
 * owner, bucket or not, so the buckets change no bit here either. */
#include <fenv.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "overlap.h"

struct mw_buckets {
    const strata_host_v2_t *h;
    strata_hctx_t          *hc;
    size_t                 *cut;    /* nb + 1 bounds: bucket b [cut[b], cut[b+1]) */
    int                     nb;
    const size_t           *shards; /* nshards + 1 bounds, or NULL: all-reduce */
    size_t                 *sub;    /* the shards cut to one bucket         */
    int                     nshards;
    /* the thread (overlap), or none (the reduce does every bucket itself) */
    int                     threaded;
    pthread_t               thr;
    pthread_mutex_t         mu;
    pthread_cond_t          work, done;
    int                     quit;
    /* the step in flight: buckets >= avail are handed over, >= done_to
     * reduced (or skipped after a failure); the thread is in one if busy */
    int                     active;
    strata_transport_t     *t;
    strata_op_t             op;
    fenv_t                  fe;
    int                     fe_set;
    int                     avail, done_to, busy;
    int                     rc;
};

static int reduce_bucket(mw_buckets_t *b, strata_transport_t *t,
                         const strata_op_t *op, int k)
{
    strata_op_t w = *op;
    size_t lo = b->cut[k], hi = b->cut[k + 1];
    w.slot = 0;
    w.buf = (float *)op->buf + lo;
    w.count = hi - lo;
    if (!w.count)
        return STRATA_OK;
    if (!b->shards)
        return b->h->t_reduce(b->hc, t, &w);
    for (int m = 0; m <= b->nshards; m++) {
        size_t x = b->shards[m];
        b->sub[m] = (x < lo ? lo : x > hi ? hi : x) - lo;
    }
    if (STRATA_HAS_FIELD(strata_host_v2_t, b->h, t_reduce_scatter))
        return b->h->t_reduce_scatter(b->hc, t, &w, b->sub);
    strata_shards_t sh = { .struct_size = sizeof sh, .op = &w,
                           .bounds = b->sub };
    return b->h->t_ctl(b->hc, t, STRATA_CTL_REDUCE_SCATTER, &sh);
}

static void *bucket_thread(void *arg)
{
    mw_buckets_t *b = arg;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        while (!b->quit && !(b->active && b->done_to > b->avail))
            pthread_cond_wait(&b->work, &b->mu);
        if (b->quit)
            break;
        int k = b->done_to - 1, rc = b->rc;
        if (!b->fe_set) {
            fesetenv(&b->fe);
            b->fe_set = 1;
        }
        b->busy = 1;
        pthread_mutex_unlock(&b->mu);
        if (rc == STRATA_OK)
            rc = reduce_bucket(b, b->t, &b->op, k);
        pthread_mutex_lock(&b->mu);
        b->busy = 0;
        b->done_to = k;
        if (b->rc == STRATA_OK)
            b->rc = rc;
        pthread_cond_broadcast(&b->done);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

int mw_buckets_open(mw_buckets_t **out, const strata_host_v2_t *h,
                    strata_hctx_t *hc, const size_t *var_lo, int nvars,
                    size_t count, size_t bucket_bytes, int threaded,
                    const size_t *shards, int nshards)
{
    *out = NULL;
    mw_buckets_t *b = calloc(1, sizeof *b);
    size_t *cut = calloc((size_t)nvars + 2, sizeof *cut);
    size_t *sub = shards ? calloc((size_t)nshards + 1, sizeof *sub) : NULL;
    if (!b || !cut || (shards && !sub)) {
        free(b);
        free(cut);
        free(sub);
        return STRATA_ENOMEM;
    }
    b->shards = shards;
    b->sub = sub;
    b->nshards = nshards;
    /* Cuts from the top down, then reversed into ascending bounds. */
    int n = 0;
    size_t acc = 0, hi = count;
    cut[n++] = count;
    for (int v = nvars - 1; v > 0 && bucket_bytes > 0; v--) {
        acc += (hi - var_lo[v]) * sizeof(float);
        hi = var_lo[v];
        if (acc >= bucket_bytes) {
            cut[n++] = var_lo[v];
            acc = 0;
        }
    }
    if (cut[n - 1] != 0)
        cut[n++] = 0;
    for (int i = 0; i < n / 2; i++) {
        size_t x = cut[i];
        cut[i] = cut[n - 1 - i];
        cut[n - 1 - i] = x;
    }
    b->h = h;
    b->hc = hc;
    b->cut = cut;
    b->nb = n - 1;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->work, NULL);
    pthread_cond_init(&b->done, NULL);
    if (threaded && b->nb > 1) {
        if (pthread_create(&b->thr, NULL, bucket_thread, b) != 0) {
            h->log(hc, STRATA_LOG_ERROR, "mwms", "overlap: cannot start the "
                   "bucket thread");
            mw_buckets_close(b);
            return STRATA_ENOMEM;
        }
        b->threaded = 1;
    }
    *out = b;
    return STRATA_OK;
}

int mw_buckets_count(const mw_buckets_t *b) { return b ? b->nb : 0; }
int mw_buckets_threaded(const mw_buckets_t *b) { return b && b->threaded; }

/* Under the lock: the step in flight, if any, gives up what it has not
 * handed over and has no bucket in the thread any more. */
static void drop_locked(mw_buckets_t *b)
{
    while (b->busy)
        pthread_cond_wait(&b->done, &b->mu);
    b->avail = b->done_to;
    b->active = 0;
}

void mw_buckets_drain(mw_buckets_t *b)
{
    if (!b || !b->threaded)
        return;
    pthread_mutex_lock(&b->mu);
    drop_locked(b);
    pthread_mutex_unlock(&b->mu);
}

void mw_buckets_close(mw_buckets_t *b)
{
    if (!b)
        return;
    if (b->threaded) {
        pthread_mutex_lock(&b->mu);
        drop_locked(b);
        b->quit = 1;
        pthread_cond_broadcast(&b->work);
        pthread_mutex_unlock(&b->mu);
        pthread_join(b->thr, NULL);
    }
    pthread_cond_destroy(&b->work);
    pthread_cond_destroy(&b->done);
    pthread_mutex_destroy(&b->mu);
    free(b->cut);
    free(b->sub);
    free(b);
}

/* Hand over the buckets whose elements are all final (>= ready). */
static void hand_over_locked(mw_buckets_t *b, strata_transport_t *t,
                             const strata_op_t *op, size_t ready)
{
    if (!b->active || b->op.step != op->step || b->op.buf != op->buf ||
        b->t != t) {
        drop_locked(b); /* a step that failed before its reduce() */
        b->active = 1;
        b->t = t;
        b->op = *op;
        fegetenv(&b->fe);
        b->fe_set = 0;
        b->avail = b->done_to = b->nb;
        b->rc = STRATA_OK;
    }
    int k = b->avail;
    while (k > 0 && b->cut[k - 1] >= ready)
        k--;
    if (k < b->avail) {
        b->avail = k;
        pthread_cond_signal(&b->work);
    }
}

int mw_buckets_ready(mw_buckets_t *b, strata_transport_t *t,
                     const strata_op_t *op, size_t ready)
{
    if (!b->threaded)
        return STRATA_OK;
    pthread_mutex_lock(&b->mu);
    hand_over_locked(b, t, op, ready);
    int rc = b->rc;
    pthread_mutex_unlock(&b->mu);
    return rc;
}

int mw_buckets_reduce(mw_buckets_t *b, strata_transport_t *t,
                      const strata_op_t *op)
{
    if (!b->threaded) {
        int rc = STRATA_OK;
        for (int k = b->nb - 1; rc == STRATA_OK && k >= 0; k--)
            rc = reduce_bucket(b, t, op, k);
        return rc;
    }
    pthread_mutex_lock(&b->mu);
    hand_over_locked(b, t, op, 0);
    while (b->done_to > 0)
        pthread_cond_wait(&b->done, &b->mu);
    b->active = 0;
    int rc = b->rc;
    pthread_mutex_unlock(&b->mu);
    return rc;
}
