/* nccl.so -- the transport between GPUs: NCCL collectives.
 *
 * LOCAL groups (mirrored: the GPU replicas of one process) get one
 * communicator per member, made together (ncclCommInitRankConfig for each
 * GPU inside one ncclGroupStart/End); each replica thread then drives its
 * own communicator on its own stream, NCCL's "one thread per GPU" pattern,
 * so no call needs grouping. WORLD groups (mwms: one GPU member per
 * process) make one communicator per process from an id that rank 0 hands
 * out over ZeroMQ (nccl_id.c).
 *
 * reduce: in-place ncclAllReduce, SUM or MEAN (ncclAvg); update: in-place
 * ncclBroadcast from op->root; barrier: an all-reduce of one float (the
 * host checked every argument first, ABI 2.5);
 * ctl ABORT: every waiting member aborts its communicator and returns
 * STRATA_ECANCELED.
 *
 * A buffer on the host (mwms's metric sums between epochs) is copied to a
 * device buffer of the member, reduced there and copied back.
 *
 * Ordering with the core: a call first waits for the member's GPU to be
 * idle (cudaDeviceSynchronize: whatever stream produced the buffer, the
 * core's included, is done; right after a step's loss read-back the GPU is
 * idle already), and returns only when its collective is complete, polled
 * against the timeout (nccl_wait.c). So the buffer is ready for any stream
 * when the call returns. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_int.h"

typedef struct nccl_cfg {
    double timeout_s;
} nccl_cfg_t;

static const strata_option_t nccl_options[] = {
    { .key = "timeout_s", .type = STRATA_OPT_FLOAT, .def = "60",
      .offset = offsetof(nccl_cfg_t, timeout_s), .min = 0.001, .max = 86400,
      .help = "bound on every collective and on start-up, after which the "
              "communicator is aborted; the group's timeout wins when the "
              "core sets one" },
    { .key = NULL },
};

/* ---- is this a group for NCCL? --------------------------------------- */

static int usable(const strata_host_v2_t *host, strata_hctx_t *hc,
                  const strata_group_t *g)
{
    if (!g || g->nlocal < 1 || g->size < 1 || !g->devices)
        return STRATA_EDECLINE;
    if ((STRATA_HAS_FIELD(strata_group_t, g, flags) &&
         (g->flags & STRATA_GROUP_P2P)) ||
        (g->tag && strncmp(g->tag, "p2p:", 4) == 0)) {
        host->log(hc, STRATA_LOG_INFO, "nccl", "declined: point-to-point "
                  "groups are not NCCL's (collectives only)");
        return STRATA_EDECLINE;
    }
    /* NCCL's bootstrap and rings are plain TCP sockets that admit anyone:
     * a group that must be authenticated is not NCCL's. */
    if (STRATA_HAS_FIELD(strata_group_t, g, public_keys) && g->public_keys) {
        host->log(hc, STRATA_LOG_INFO, "nccl", "declined: the job is "
                  "secured ([security]) and NCCL's connections are not "
                  "authenticated ([security] mode = off lets NCCL connect "
                  "processes)");
        return STRATA_EDECLINE;
    }
    if (g->scope == STRATA_SCOPE_LOCAL ? g->nlocal != g->size
        : g->scope != STRATA_SCOPE_WORLD || g->nlocal != 1 || g->rank < 0 ||
              g->rank >= g->size) {
        host->log(hc, STRATA_LOG_INFO, "nccl", "declined: a group of %d "
                  "members with %d here (NCCL: one GPU per process, or every "
                  "GPU member in this process)", g->size, g->nlocal);
        return STRATA_EDECLINE;
    }
    for (int i = 0; i < g->nlocal; i++)
        if (STRATA_DEVICE_TYPE(g->devices[i]) != STRATA_DEV_GPU) {
            host->log(hc, STRATA_LOG_INFO, "nccl", "declined: member %d is "
                      "not on a GPU", i);
            return STRATA_EDECLINE;
        }
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        host->log(hc, STRATA_LOG_INFO, "nccl", "declined: no GPU: %s",
                  e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
        (void)cudaGetLastError();
        return STRATA_EDECLINE;
    }
    for (int i = 0; i < g->nlocal; i++) {
        int dev = STRATA_DEVICE_INDEX(g->devices[i]);
        if (dev >= n) {
            host->log(hc, STRATA_LOG_ERROR, "nccl", "member %d: gpu:%d: no "
                      "such GPU (%d here)", i, dev, n);
            return STRATA_EDEVICE;
        }
        for (int j = 0; j < i; j++)
            if (g->devices[j] == g->devices[i]) {
                host->log(hc, STRATA_LOG_ERROR, "nccl", "members %d and %d "
                          "are both gpu:%d: NCCL needs a GPU per member", j, i,
                          dev);
                return STRATA_EINVAL;
            }
    }
    return STRATA_OK;
}

/* The members, for error messages. */
static void describe(nc_ctx_t *c, const strata_group_t *g)
{
    size_t used = 0, cap = sizeof c->peers;
    const char *tag = g->tag && g->tag[0] ? g->tag : "nccl";
    snprintf(c->tag, sizeof c->tag, "%s", tag);
    for (char *p = c->tag; *p; p++) /* one word on the id wire */
        if (*p == ' ' || *p == '\t')
            *p = '_';
    int n = c->scope == STRATA_SCOPE_WORLD ? c->size : c->nlocal;
    for (int i = 0; i < n && used < cap - 1; i++) {
        if (c->scope == STRATA_SCOPE_LOCAL)
            used += (size_t)snprintf(c->peers + used, cap - used, "%sgpu:%d",
                                     i ? ", " : "", c->m[i].dev);
        else
            used += (size_t)snprintf(c->peers + used, cap - used, "%s%s (%s)",
                                     i ? ", " : "",
                                     g->names && g->names[i] ? g->names[i]
                                                             : "?",
                                     g->addrs && g->addrs[i] ? g->addrs[i]
                                                             : "?");
    }
}

/* ---- communicators ------------------------------------------------------ */

static ncclConfig_t nonblocking(void)
{
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0; /* every call returns at once: nccl_wait.c bounds it */
    return cfg;
}

static int nccl_error(nc_ctx_t *c, const char *what, ncclResult_t r)
{
    c->host->log(c->hc, STRATA_LOG_ERROR, "nccl", "group %s: %s: %s (%s)",
                 c->tag, what, ncclGetErrorString(r), ncclGetLastError(NULL));
    return nc_errno(r);
}

static int init_local(nc_ctx_t *c)
{
    ncclUniqueId id;
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess)
        return nccl_error(c, "ncclGetUniqueId", r);
    ncclConfig_t cfg = nonblocking();
    int rc = STRATA_OK;
    (void)ncclGroupStart();
    for (int i = 0; rc == STRATA_OK && i < c->nlocal; i++) {
        nc_member_t *mb = &c->m[i];
        if (cudaSetDevice(mb->dev) != cudaSuccess) {
            c->host->log(c->hc, STRATA_LOG_ERROR, "nccl", "gpu:%d: %s",
                         mb->dev, cudaGetErrorString(cudaGetLastError()));
            rc = STRATA_EDEVICE;
            break;
        }
        r = ncclCommInitRankConfig(&mb->comm, c->nlocal, id, i, &cfg);
        if (r != ncclSuccess && r != ncclInProgress)
            rc = nccl_error(c, "ncclCommInitRankConfig", r);
    }
    r = ncclGroupEnd();
    if (rc == STRATA_OK && r != ncclSuccess && r != ncclInProgress)
        rc = nccl_error(c, "creating the communicators", r);
    for (int i = 0; rc == STRATA_OK && i < c->nlocal; i++)
        rc = nc_wait(c, &c->m[i], 0, "creating the communicator");
    return rc;
}

static int init_world(nc_ctx_t *c, const strata_group_t *g)
{
    nc_member_t *mb = &c->m[0];
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (g->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess)
            return nccl_error(c, "ncclGetUniqueId", r);
    }
    int rc = nc_id_share(c, g, &id);
    if (rc != STRATA_OK)
        return rc;
    ncclConfig_t cfg = nonblocking();
    if (cudaSetDevice(mb->dev) != cudaSuccess)
        return STRATA_EDEVICE;
    return nc_issued(c, mb, ncclCommInitRankConfig(&mb->comm, g->size, id,
                                                   g->rank, &cfg),
                     0, "joining the group");
}

static void nccl_fini(void *pctx)
{
    nc_ctx_t *c = pctx;
    if (!c)
        return;
    for (int i = 0; c->m && i < c->nlocal; i++) {
        nc_member_t *mb = &c->m[i];
        if (!mb->comm)
            continue;
        (void)cudaSetDevice(mb->dev);
        /* After a failure or an abort nothing is flushed: abort. */
        ncclResult_t r = atomic_load(&c->aborted) ? ncclInternalError
                                                  : ncclCommFinalize(mb->comm);
        if (r != ncclSuccess && r != ncclInProgress)
            nc_fail(c, mb, STRATA_ECANCELED);
    }
    /* Every communicator finalizes at once; then each is waited for. */
    for (int i = 0; c->m && i < c->nlocal; i++) {
        nc_member_t *mb = &c->m[i];
        (void)cudaSetDevice(mb->dev);
        if (mb->comm && nc_wait(c, mb, 0, "closing the communicator") ==
                            STRATA_OK) {
            (void)ncclCommDestroy(mb->comm);
            mb->comm = NULL;
        }
    }
    for (int i = 0; c->m && i < c->nlocal; i++) {
        nc_member_t *mb = &c->m[i];
        (void)cudaSetDevice(mb->dev);
        if (mb->comm)
            nc_fail(c, mb, STRATA_ECANCELED);
        if (mb->one)
            (void)cudaFree(mb->one);
        if (mb->stage)
            (void)cudaFree(mb->stage);
        if (mb->stream)
            (void)cudaStreamDestroy(mb->stream);
    }
    (void)cudaGetLastError();
    free(c->m);
    free(c);
}

static int nccl_init(const strata_host_v2_t *host, strata_hctx_t *hc,
                     const strata_env_t *env, void **pctx)
{
    *pctx = NULL;
    const strata_group_t *g = env->group;
    int rc = usable(host, hc, g);
    if (rc != STRATA_OK)
        return rc;
    const nccl_cfg_t *cfg = env->cfg;
    nc_ctx_t *c = calloc(1, sizeof *c);
    if (!c || !(c->m = calloc((size_t)g->nlocal, sizeof *c->m))) {
        free(c);
        return STRATA_ENOMEM;
    }
    c->host = host;
    c->hc = hc;
    c->scope = g->scope;
    c->size = g->size;
    c->rank = g->scope == STRATA_SCOPE_WORLD ? g->rank : 0;
    c->nlocal = g->nlocal;
    c->timeout_s = g->timeout_ms > 0 ? g->timeout_ms / 1000.0 : cfg->timeout_s;
    atomic_init(&c->aborted, 0);
    for (int i = 0; i < c->nlocal; i++)
        c->m[i].dev = STRATA_DEVICE_INDEX(g->devices[i]);
    describe(c, g);
    for (int i = 0; rc == STRATA_OK && i < c->nlocal; i++) {
        nc_member_t *mb = &c->m[i];
        cudaError_t e = cudaSetDevice(mb->dev);
        if (e == cudaSuccess)
            e = cudaStreamCreateWithFlags(&mb->stream, cudaStreamNonBlocking);
        if (e == cudaSuccess)
            e = cudaMalloc((void **)&mb->one, sizeof(float));
        if (e == cudaSuccess)
            e = cudaMemset(mb->one, 0, sizeof(float));
        if (e != cudaSuccess) {
            host->log(hc, STRATA_LOG_ERROR, "nccl", "gpu:%d: %s", mb->dev,
                      cudaGetErrorString(e));
            (void)cudaGetLastError();
            rc = STRATA_EDEVICE;
        }
    }
    if (rc == STRATA_OK)
        rc = c->scope == STRATA_SCOPE_LOCAL ? init_local(c) : init_world(c, g);
    if (rc != STRATA_OK) {
        nccl_fini(c);
        return rc;
    }
    host->log(hc, STRATA_LOG_DEBUG, "nccl", "group %s: %d member%s (%s), %d "
              "here, NCCL %d", c->tag, c->size, c->size == 1 ? "" : "s",
              c->peers, c->nlocal, NCCL_VERSION_CODE);
    *pctx = c;
    return STRATA_OK;
}

/* ---- collectives ---------------------------------------------------------- */

/* The calling member, ready: its device current and idle. */
static int begin(nc_ctx_t *c, int slot, nc_member_t **out)
{
    if (slot < 0 || slot >= c->nlocal) {
        c->host->log(c->hc, STRATA_LOG_ERROR, "nccl", "group %s: member %d: "
                     "there are %d here", c->tag, slot, c->nlocal);
        return STRATA_EINVAL;
    }
    nc_member_t *mb = &c->m[slot];
    if (mb->failed)
        return mb->failed;
    if (atomic_load(&c->aborted)) {
        nc_fail(c, mb, STRATA_ECANCELED);
        return STRATA_ECANCELED;
    }
    cudaError_t e = cudaSetDevice(mb->dev);
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        c->host->log(c->hc, STRATA_LOG_ERROR, "nccl", "gpu:%d: %s", mb->dev,
                     cudaGetErrorString(e));
        (void)cudaGetLastError();
        nc_fail(c, mb, STRATA_EDEVICE);
        return STRATA_EDEVICE;
    }
    *out = mb;
    return STRATA_OK;
}

static int check_op(nc_ctx_t *c, const strata_op_t *op, nc_member_t **out)
{
    int slot = c->scope == STRATA_SCOPE_WORLD ? 0 : op->slot;
    if (slot >= 0 && slot < c->nlocal &&
        STRATA_DEVICE_TYPE(op->device) != STRATA_DEV_CPU &&
        (STRATA_DEVICE_TYPE(op->device) != STRATA_DEV_GPU ||
         STRATA_DEVICE_INDEX(op->device) != c->m[slot].dev)) {
        c->host->log(c->hc, STRATA_LOG_ERROR, "nccl", "group %s: member %d is "
                     "gpu:%d but its buffer is on device %#x", c->tag, slot,
                     c->m[slot].dev, (unsigned)op->device);
        return STRATA_EINVAL;
    }
    return begin(c, slot, out);
}

/* The device buffer a collective works on: op->buf itself, or for a host
 * buffer the member's staging buffer with op->buf's contents. */
static int stage_in(nc_ctx_t *c, nc_member_t *mb, const strata_op_t *op,
                    float **buf)
{
    *buf = op->buf;
    if (STRATA_DEVICE_TYPE(op->device) != STRATA_DEV_CPU || !op->count)
        return STRATA_OK;
    cudaError_t e = cudaSuccess;
    if (mb->staged < op->count) {
        if (mb->stage)
            (void)cudaFree(mb->stage);
        mb->stage = NULL;
        mb->staged = 0;
        e = cudaMalloc((void **)&mb->stage, op->count * sizeof(float));
        if (e == cudaSuccess)
            mb->staged = op->count;
    }
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(mb->stage, op->buf, op->count * sizeof(float),
                            cudaMemcpyHostToDevice, mb->stream);
    if (e != cudaSuccess) {
        c->host->log(c->hc, STRATA_LOG_ERROR, "nccl", "gpu:%d: staging %zu "
                     "floats of a host buffer: %s", mb->dev, op->count,
                     cudaGetErrorString(e));
        (void)cudaGetLastError();
        return STRATA_EDEVICE;
    }
    *buf = mb->stage;
    return STRATA_OK;
}

/* After the collective completed: a staged result goes back to the host. */
static int stage_out(nc_ctx_t *c, nc_member_t *mb, const strata_op_t *op,
                     int rc)
{
    if (rc != STRATA_OK || STRATA_DEVICE_TYPE(op->device) != STRATA_DEV_CPU ||
        !op->count)
        return rc;
    cudaError_t e = cudaMemcpy(op->buf, mb->stage, op->count * sizeof(float),
                               cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
        c->host->log(c->hc, STRATA_LOG_ERROR, "nccl", "gpu:%d: copying a "
                     "result to the host: %s", mb->dev, cudaGetErrorString(e));
        (void)cudaGetLastError();
        return STRATA_EDEVICE;
    }
    return STRATA_OK;
}

static int nccl_reduce(void *pctx, strata_op_t *op)
{
    nc_ctx_t *c = pctx;
    nc_member_t *mb;
    int rc = check_op(c, op, &mb);
    if (rc != STRATA_OK)
        return rc;
    int mean = op->reduce_op == STRATA_REDUCE_MEAN;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
    ncclRedOp_t red = mean ? ncclAvg : ncclSum;
#else
    ncclRedOp_t red = ncclSum; /* no ncclAvg: sum, then scale below */
#endif
    char what[64];
    snprintf(what, sizeof what, "all-reduce of step %lld", (long long)op->step);
    float *buf;
    rc = stage_in(c, mb, op, &buf);
    if (rc == STRATA_OK)
        rc = nc_issued(c, mb, ncclAllReduce(buf, buf, op->count, ncclFloat,
                                            red, mb->comm, mb->stream),
                       1, what);
    rc = stage_out(c, mb, op, rc);
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 10, 0)
    if (rc == STRATA_OK && mean && c->size > 1)
        rc = c->host->scale(c->hc, op->device, op->count,
                            1.0f / (float)c->size, op->buf);
#endif
    return rc;
}

static int nccl_update(void *pctx, strata_op_t *op)
{
    nc_ctx_t *c = pctx;
    nc_member_t *mb;
    int rc = check_op(c, op, &mb);
    if (rc != STRATA_OK)
        return rc;
    char what[64];
    snprintf(what, sizeof what, "broadcast from member %d", op->root);
    float *buf;
    rc = stage_in(c, mb, op, &buf);
    if (rc == STRATA_OK)
        rc = nc_issued(c, mb, ncclBroadcast(buf, buf, op->count, ncclFloat,
                                            op->root, mb->comm, mb->stream),
                       1, what);
    return stage_out(c, mb, op, rc);
}

static int nccl_barrier(void *pctx, int slot)
{
    nc_ctx_t *c = pctx;
    nc_member_t *mb;
    int rc = begin(c, c->scope == STRATA_SCOPE_WORLD ? 0 : slot, &mb);
    if (rc != STRATA_OK)
        return rc;
    return nc_issued(c, mb, ncclAllReduce(mb->one, mb->one, 1, ncclFloat,
                                          ncclSum, mb->comm, mb->stream),
                     1, "barrier");
}

static int nccl_ctl(void *pctx, int op, void *arg)
{
    nc_ctx_t *c = pctx;
    switch (op) {
    case STRATA_CTL_BARRIER: /* frozen 2.4 op, for callers without a host */
        return nccl_barrier(c, arg ? *(int *)arg : -1);
    case STRATA_CTL_ABORT:
        /* Any thread: each waiting member aborts its own communicator. */
        atomic_store(&c->aborted, 1);
        return STRATA_OK;
    default:
        return STRATA_ENOTSUP;
    }
}

STRATA_EXPORT const strata_plugin_v2_t strata_plugin_v2 = {
    STRATA_PLUGIN_HEADER_CAPS(STRATA_KIND_TRANSPORT, "nccl", "0.1.0",
                              "GPUs: NCCL all-reduce and broadcast, one "
                              "communicator per GPU, non-blocking with a "
                              "timeout",
                              STRATA_CAP_BARRIER | STRATA_CAP_DEVICE_MEM),
    .options = nccl_options,
    .cfg_size = sizeof(nccl_cfg_t),
    .init = nccl_init,
    .fini = nccl_fini,
    .reduce = nccl_reduce,
    .update = nccl_update,
    .ctl = nccl_ctl,
    .barrier = nccl_barrier,
};
