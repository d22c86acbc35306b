/* local.so -- the transport between replica threads of one process.
 *
 * reduce: an in-place all-reduce in shared memory where every thread does
 * its share. Thread i owns chunk i of the buffers: it sums chunk i of every
 * replica's buffer, in replica order, into replica 0's buffer (and scales it
 * for MEAN), then copies the result into chunk i of every other replica's
 * buffer. Each element is summed in one fixed order by one thread, so every
 * replica ends bitwise equal to every other, on every run. Between the two
 * barriers of a call thread i touches nothing but chunk i, so the second
 * barrier (every chunk is everywhere) ends the call.
 * update: broadcast from the root member; barrier; ctl: abort. The host
 * has checked every argument (slot, buf, reduce_op, root) before a call
 * gets here (ABI 2.5). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <strata/plugin.h>

#include "spin_barrier.h"

typedef struct local_cfg {
    int64_t spin_us;
    int64_t yield_us;
    int64_t timeout_s;
} local_cfg_t;

static const strata_option_t local_options[] = {
    { .key = "spin_us", .type = STRATA_OPT_INT, .def = "50",
      .offset = offsetof(local_cfg_t, spin_us), .min = 0, .max = 100000,
      .help = "microseconds a waiting replica spins before it yields" },
    { .key = "yield_us", .type = STRATA_OPT_INT, .def = "1000",
      .offset = offsetof(local_cfg_t, yield_us), .min = 0, .max = 1000000,
      .help = "then microseconds it yields its core before it sleeps" },
    { .key = "timeout_s", .type = STRATA_OPT_INT, .def = "600",
      .offset = offsetof(local_cfg_t, timeout_s), .min = 1, .max = 86400,
      .help = "seconds a replica waits for the others before it gives up" },
    { .key = NULL },
};

typedef struct local_ctx {
    const strata_host_v2_t *host;
    strata_hctx_t          *hc;     /* first argument of every host call */
    int                     n;
    int64_t                 timeout_ns;
    spin_barrier_t          bar;
    void                  **bufs;   /* per member, published for one call */
} local_ctx_t;

static int local_init(const strata_host_v2_t *host, strata_hctx_t *hc,
                      const strata_env_t *env, void **pctx)
{
    *pctx = NULL;
    const strata_group_t *g = env->group;
    if (!g || g->scope != STRATA_SCOPE_LOCAL || g->nlocal != g->size)
        return STRATA_EDECLINE; /* threads of one process only */
    for (int i = 0; i < g->nlocal; i++)
        if (STRATA_DEVICE_TYPE(g->devices[i]) != STRATA_DEV_CPU) {
            host->log(hc, STRATA_LOG_INFO, "local",
                      "declined: member %d is not on a CPU device", i);
            return STRATA_EDECLINE;
        }
    const local_cfg_t *cfg = env->cfg;
    local_ctx_t *c = calloc(1, sizeof *c);
    if (!c)
        return STRATA_ENOMEM;
    c->host = host;
    c->hc = hc;
    c->n = g->size;
    c->timeout_ns = (g->timeout_ms > 0 ? (int64_t)g->timeout_ms
                                       : cfg->timeout_s * 1000) * 1000000;
    c->bufs = calloc((size_t)c->n, sizeof *c->bufs);
    /* Spinning only pays when every member can have a core of its own. */
    int64_t spin_ns = sysconf(_SC_NPROCESSORS_ONLN) >= c->n
                          ? cfg->spin_us * 1000 : 0;
    if (!c->bufs || spin_barrier_init(&c->bar, c->n, spin_ns,
                                       cfg->yield_us * 1000) != 0) {
        free(c->bufs);
        free(c);
        return STRATA_ENOMEM;
    }
    *pctx = c;
    return STRATA_OK;
}

static void local_fini(void *pctx)
{
    local_ctx_t *c = pctx;
    if (!c)
        return;
    spin_barrier_destroy(&c->bar);
    free(c->bufs);
    free(c);
}

static int wait_all(local_ctx_t *c, int slot)
{
    int rc = spin_barrier_wait(&c->bar, c->timeout_ns);
    if (rc == -2) {
        c->host->log(c->hc, STRATA_LOG_ERROR, "local",
                     "member %d waited %lld s for the other replicas; giving up",
                     slot, (long long)(c->timeout_ns / 1000000000));
        spin_barrier_abort(&c->bar);
        return STRATA_ETIMEDOUT;
    }
    return rc == 0 ? STRATA_OK : STRATA_ECANCELED;
}

/* Chunk boundaries on 16-float (64-byte) lines, so that no two threads
 * write the same cache line. */
static size_t chunk_lo(size_t count, int n, int i)
{
    size_t lines = (count + 15) / 16;
    size_t lo = lines * (size_t)i / (size_t)n * 16;
    return lo < count ? lo : count;
}

/* Elements per pass of reduce_chunk: a block is summed, scaled and copied
 * out while it is still in L1 (8 KiB of floats), not in three sweeps over
 * the whole chunk. A multiple of 16, so blocks keep to cache lines. */
#define BLOCK 2048

/* Chunk [lo, hi) of every buffer: the sum (or mean) into buffer 0, then
 * the same bits into every other buffer. */
static int reduce_chunk(local_ctx_t *c, const strata_op_t *op, size_t lo,
                        size_t hi)
{
    const int n = c->n;
    const strata_host_v2_t *h = c->host;
    float *dst = c->bufs[0];
    const float *srcs[n];
    int rc = STRATA_OK;
    for (size_t b = lo; b < hi && rc == STRATA_OK; b += BLOCK) {
        size_t len = hi - b < BLOCK ? hi - b : BLOCK;
        for (int i = 0; i < n; i++)
            srcs[i] = (const float *)c->bufs[i] + b;
        rc = h->sum(c->hc, op->device, len, dst + b, srcs, n);
        if (rc == STRATA_OK && op->reduce_op == STRATA_REDUCE_MEAN)
            rc = h->scale(c->hc, op->device, len, 1.0f / (float)n, dst + b);
        for (int i = 1; rc == STRATA_OK && i < n; i++)
            memcpy((float *)c->bufs[i] + b, dst + b, len * sizeof(float));
    }
    return rc;
}

static int local_reduce(void *pctx, strata_op_t *op)
{
    local_ctx_t *c = pctx;
    const int me = op->slot, n = c->n;
    int rc;
    if (n == 1)
        return STRATA_OK; /* the sum and the mean of one buffer are itself */
    c->bufs[me] = op->buf;
    if ((rc = wait_all(c, me)) != STRATA_OK)
        return rc;
    /* My chunk: reduced into buffer 0, then copied to the others. */
    rc = reduce_chunk(c, op, chunk_lo(op->count, n, me),
                      chunk_lo(op->count, n, me + 1));
    if (rc != STRATA_OK) {
        spin_barrier_abort(&c->bar);
        return rc;
    }
    /* Every chunk is in every buffer, and nobody reads another's buffer
     * after this: each may change its own at once. */
    return wait_all(c, me);
}

static int local_update(void *pctx, strata_op_t *op)
{
    local_ctx_t *c = pctx;
    int rc;
    if (c->n == 1)
        return STRATA_OK;
    c->bufs[op->slot] = op->buf;
    if ((rc = wait_all(c, op->slot)) != STRATA_OK)
        return rc;
    if (op->slot != op->root && op->count > 0)
        memcpy(op->buf, c->bufs[op->root], op->count * sizeof(float));
    return wait_all(c, op->slot);
}

static int local_barrier(void *pctx, int slot)
{
    return wait_all(pctx, slot);
}

static int local_ctl(void *pctx, int op, void *arg)
{
    local_ctx_t *c = pctx;
    switch (op) {
    case STRATA_CTL_BARRIER: /* frozen 2.4 op, for callers without a host */
        return wait_all(c, arg ? *(int *)arg : -1);
    case STRATA_CTL_ABORT:
        spin_barrier_abort(&c->bar);
        return STRATA_OK;
    default:
        return STRATA_ENOTSUP;
    }
}

STRATA_EXPORT const strata_plugin_v2_t strata_plugin_v2 = {
    STRATA_PLUGIN_HEADER_CAPS(STRATA_KIND_TRANSPORT, "local", "0.1.0",
                              "replica threads of one process: shared-memory "
                              "all-reduce, every thread reduces its share",
                              STRATA_CAP_BARRIER),
    .options = local_options,
    .cfg_size = sizeof(local_cfg_t),
    .init = local_init,
    .fini = local_fini,
    .reduce = local_reduce,
    .update = local_update,
    .ctl = local_ctl,
    .barrier = local_barrier,
};
