/* central.so -- CentralStorageStrategy: synchronous replicas that share one
 * copy of every variable and of the optimizer state, on the parameter
 * device. On CPU devices the replicas read the central copy itself, no
 * copies. Each step the replicas' gradients are summed and one optimizer
 * step updates the central copy; both are done in parallel, every replica
 * thread taking its own chunk of the flat layout (so the sum of an element
 * is always made by one thread in replica order: deterministic). With
 * [optimizer] clip_norm the threads meet once more, to clip their chunks
 * by the norm of the whole summed gradient. */
#include <stdlib.h>
#include <string.h>

#include <strata/plugin.h>

typedef struct central_cfg {
    int         reduce_op;         /* 0 mean, 1 sum                        */
    const char *parameter_device;  /* "cpu"                                */
} central_cfg_t;

static const strata_option_t central_options[] = {
    { .key = "reduce_op", .type = STRATA_OPT_ENUM, .def = "mean",
      .offset = offsetof(central_cfg_t, reduce_op), .min = 1, .max = 0,
      .choices = "mean|sum",
      .help = "how replica gradients combine: mean (the global-batch "
              "gradient) or sum (N times larger)" },
    { .key = "parameter_device", .type = STRATA_OPT_STRING, .def = "cpu",
      .offset = offsetof(central_cfg_t, parameter_device), .min = 1, .max = 0,
      .help = "device that holds the only copy of the variables and of the "
              "optimizer state (cpu)" },
    { .key = NULL },
};

typedef struct central {
    const strata_host_v2_t *host;
    strata_hctx_t          *hc;        /* first argument of host calls     */
    int                     n;
    int32_t                 pdev;      /* parameter device                 */
    size_t                  count;
    int                     mean;
    float                  *vars;      /* the central copy                 */
    strata_opt_t          **opt;       /* per replica: its chunk's state   */
    float                 **grads;     /* per replica, published per step  */
    double                 *sumsq;     /* per replica: its chunk's, to clip */
    strata_transport_t     *t;         /* barrier between replica threads  */
    /* GPU compute devices: each replica reads a staged copy of the central
     * variables in its device memory, refreshed once per step, and its
     * gradients are staged to the host for the sum. */
    const int32_t          *devices;
    int                     staged;
    float                 **stage;     /* per replica: device copy          */
    float                 **hgrad;     /* per replica: host gradients       */
    int32_t                *cpus;      /* the barrier group's "devices"     */
} central_t;

static void central_fini(void *pctx);

/* Chunk i of n on 16-float (64-byte) lines: no two threads share a line. */
static size_t chunk_lo(size_t count, int n, int i)
{
    size_t lines = (count + 15) / 16;
    size_t lo = lines * (size_t)i / (size_t)n * 16;
    return lo < count ? lo : count;
}

static int central_init(const strata_host_v2_t *host, strata_hctx_t *hc,
                        const strata_env_t *env, void **pctx)
{
    *pctx = NULL;
    const central_cfg_t *cfg = env->cfg;
    if (strcmp(cfg->parameter_device, "cpu") != 0 &&
        strcmp(cfg->parameter_device, "cpu:0") != 0) {
        host->log(hc, STRATA_LOG_ERROR, "central",
                  "[strategy] parameter_device = '%s': only cpu is supported",
                  cfg->parameter_device);
        return STRATA_EINVAL;
    }
    central_t *c = calloc(1, sizeof *c);
    if (!c)
        return STRATA_ENOMEM;
    c->host = host;
    c->hc = hc;
    c->n = env->nreplicas;
    c->pdev = STRATA_DEVICE(STRATA_DEV_CPU, 0);
    c->count = env->model_count;
    c->mean = cfg->reduce_op == 0;
    c->vars = host->alloc(hc, c->pdev, c->count * sizeof(float));
    c->opt = calloc((size_t)c->n, sizeof *c->opt);
    c->grads = calloc((size_t)c->n, sizeof *c->grads);
    c->sumsq = calloc((size_t)c->n, sizeof *c->sumsq);
    c->devices = env->devices;
    c->staged = STRATA_DEVICE_TYPE(env->devices[0]) != STRATA_DEV_CPU;
    c->stage = calloc((size_t)c->n, sizeof *c->stage);
    c->hgrad = calloc((size_t)c->n, sizeof *c->hgrad);
    c->cpus = calloc((size_t)c->n, sizeof *c->cpus);
    int rc = c->vars && c->opt && c->grads && c->sumsq && c->stage &&
                     c->hgrad && c->cpus
                 ? STRATA_OK : STRATA_ENOMEM;
    for (int r = 0; rc == STRATA_OK && c->staged && r < c->n; r++) {
        c->stage[r] = host->alloc(hc, c->devices[r], c->count * sizeof(float));
        c->hgrad[r] = host->alloc(hc, c->pdev, c->count * sizeof(float));
        if (!c->stage[r] || !c->hgrad[r])
            rc = STRATA_ENOMEM;
    }
    for (int r = 0; rc == STRATA_OK && r < c->n; r++)
        rc = host->opt_create(hc, c->pdev, chunk_lo(c->count, c->n, r + 1) -
                                               chunk_lo(c->count, c->n, r),
                              &c->opt[r]);
    if (rc == STRATA_OK && c->n > 1) {
        const strata_group_t g = {
            .struct_size = sizeof g, .scope = STRATA_SCOPE_LOCAL, .size = c->n,
            .rank = 0, .nlocal = c->n, .devices = c->cpus,
            .tag = "central",
        };
        /* Only a barrier between the replica threads: whatever their
         * devices, the shared memory is the host's. */
        for (int r = 0; r < c->n; r++)
            c->cpus[r] = STRATA_DEVICE(STRATA_DEV_CPU, 0);
        rc = host->t_open(hc, &g, &c->t);
    }
    if (rc != STRATA_OK) {
        central_fini(c);
        return rc;
    }
    *pctx = c;
    return STRATA_OK;
}

static void central_fini(void *pctx)
{
    central_t *c = pctx;
    if (!c)
        return;
    c->host->t_close(c->hc, c->t);
    for (int r = 0; c->opt && r < c->n; r++)
        c->host->opt_destroy(c->hc, c->opt[r]);
    for (int r = 0; c->stage && c->hgrad && r < c->n; r++) {
        c->host->free(c->hc, c->devices[r], c->stage[r]);
        c->host->free(c->hc, c->pdev, c->hgrad[r]);
    }
    c->host->free(c->hc, c->pdev, c->vars);
    free(c->opt);
    free(c->grads);
    free(c->sumsq);
    free(c->stage);
    free(c->hgrad);
    free(c->cpus);
    free(c);
}

/* One copy: every replica reads the central variable itself (CPU), or
 * its staged copy of it (GPU). */
static int central_create_var(void *pctx, strata_var_t *var)
{
    central_t *c = pctx;
    if (var->offset + var->count > c->count)
        return STRATA_EINVAL;
    float *dst = c->vars + var->offset;
    size_t bytes = var->count * sizeof(float);
    int rc = c->host->copy(c->hc, c->pdev, dst,
                           STRATA_DEVICE(STRATA_DEV_CPU, 0), var->init, bytes);
    for (int r = 0; rc == STRATA_OK && r < c->n; r++) {
        var->value[r] = c->staged ? c->stage[r] + var->offset : dst;
        if (c->staged)
            rc = c->host->copy(c->hc, c->devices[r], var->value[r], c->pdev,
                               dst, bytes);
    }
    return rc;
}

/* GPU replicas: the central copy to replica r's device. */
static int restage(central_t *c, int r)
{
    return c->staged ? c->host->copy(c->hc, c->devices[r], c->stage[r],
                                     c->pdev, c->vars,
                                     c->count * sizeof(float))
                     : STRATA_OK;
}

static int barrier(central_t *c, int slot)
{
    const strata_host_v2_t *h = c->host;
    if (c->n == 1)
        return STRATA_OK;
    /* A core before 2.5 has the barrier as a ctl op only. */
    return STRATA_HAS_FIELD(strata_host_v2_t, h, t_barrier)
               ? h->t_barrier(c->hc, c->t, slot)
               : h->t_ctl(c->hc, c->t, STRATA_CTL_BARRIER, &slot);
}

/* Sum this replica's chunk of every replica's gradients into replica 0's
 * buffer, once all gradients of the step are there. */
static int central_reduce(void *pctx, strata_op_t *op)
{
    central_t *c = pctx;
    if (op->slot < 0 || op->slot >= c->n || op->count != c->count)
        return STRATA_EINVAL;
    int rc = STRATA_OK;
    c->grads[op->slot] = op->buf;
    if (c->staged) { /* the host sums: the gradients come over first */
        rc = c->host->copy(c->hc, c->pdev, c->hgrad[op->slot], op->device,
                           op->buf, c->count * sizeof(float));
        c->grads[op->slot] = c->hgrad[op->slot];
    }
    if (rc == STRATA_OK)
        rc = barrier(c, op->slot);
    if (rc != STRATA_OK || c->n == 1)
        return rc;
    size_t lo = chunk_lo(c->count, c->n, op->slot);
    size_t hi = chunk_lo(c->count, c->n, op->slot + 1);
    if (hi == lo)
        return STRATA_OK;
    const float *srcs[c->n];
    for (int r = 0; r < c->n; r++)
        srcs[r] = c->grads[r] + lo;
    rc = c->host->sum(c->hc, c->pdev, hi - lo, c->grads[0] + lo, srcs, c->n);
    if (rc == STRATA_OK && c->mean)
        rc = c->host->scale(c->hc, c->pdev, hi - lo, 1.0f / (float)c->n,
                            c->grads[0] + lo);
    return rc;
}

/* [optimizer] clip_norm: each thread measures the chunk it summed, all
 * meet, and each clips its chunk by the total of every chunk's, added in
 * slot order (the same figure in every thread). Nobody overwrites its
 * sumsq[] before all have read it: the update's last barrier is between. */
static int clip_chunk(central_t *c, int slot, size_t lo, size_t hi)
{
    const strata_host_v2_t *h = c->host;
    if (!STRATA_HAS_FIELD(strata_host_v2_t, h, grad_clip))
        return STRATA_OK; /* a core before ABI 2.2 has no clip_norm */
    int rc = h->grad_sumsq(c->hc, c->pdev, hi - lo, c->grads[0] + lo,
                           &c->sumsq[slot]);
    if (rc != 1)
        return rc; /* 0: clipping is off, for every thread alike */
    rc = barrier(c, slot);
    double total = 0.0;
    for (int r = 0; r < c->n; r++)
        total += c->sumsq[r];
    return rc == STRATA_OK ? h->grad_clip(c->hc, c->pdev, hi - lo,
                                          c->grads[0] + lo, total)
                           : rc;
}

/* One optimizer step on the central copy, each replica its chunk; then
 * everybody waits so that no replica reads a half-updated variable. */
static int central_update(void *pctx, strata_op_t *op)
{
    central_t *c = pctx;
    if (op->slot < 0 || op->slot >= c->n)
        return STRATA_EINVAL;
    size_t lo = chunk_lo(c->count, c->n, op->slot);
    size_t hi = chunk_lo(c->count, c->n, op->slot + 1);
    int rc = clip_chunk(c, op->slot, lo, hi);
    if (rc == STRATA_OK && hi > lo)
        rc = c->host->opt_step(c->hc, c->opt[op->slot], c->vars + lo,
                               c->grads[0] + lo, hi - lo, op->lr);
    /* On failure the core aborts the step through ctl(STRATA_CTL_ABORT),
     * which wakes the replicas waiting here. */
    if (rc == STRATA_OK)
        rc = barrier(c, op->slot);
    return rc == STRATA_OK ? restage(c, op->slot) : rc;
}

/* The central copy, and each replica's chunk of the optimizer state. */
static int central_state(central_t *c, int set, strata_state_t *st)
{
    const int32_t cpu = STRATA_DEVICE(STRATA_DEV_CPU, 0);
    size_t bytes = c->count * sizeof(float);
    int rc = set
        ? c->host->copy(c->hc, c->pdev, c->vars, cpu, st->vars, bytes)
        : c->host->copy(c->hc, cpu, st->vars, c->pdev, c->vars, bytes);
    for (int r = 0; rc == STRATA_OK && r < c->n; r++) {
        size_t lo = chunk_lo(c->count, c->n, r);
        float *slots[4] = { 0 };
        for (int i = 0; i < st->nslots && i < 4; i++)
            slots[i] = st->slots[i] + lo;
        rc = c->host->opt_io(c->hc, c->opt[r], set, slots, st->nslots,
                             &st->opt_steps);
    }
    for (int r = 0; rc == STRATA_OK && set && r < c->n; r++)
        rc = restage(c, r);
    return rc;
}

static int central_ctl(void *pctx, int op, void *arg)
{
    central_t *c = pctx;
    switch (op) {
    case STRATA_CTL_ABORT:
        return c->t ? c->host->t_ctl(c->hc, c->t, op, arg) : STRATA_OK;
    case STRATA_CTL_STATE_GET:
    case STRATA_CTL_STATE_SET:
        return central_state(c, op == STRATA_CTL_STATE_SET, arg);
    default:
        return STRATA_ENOTSUP;
    }
}

STRATA_EXPORT const strata_plugin_v2_t strata_plugin_v2 = {
    STRATA_PLUGIN_HEADER_CAPS(STRATA_KIND_STRATEGY, "central", "0.1.0",
                              "CentralStorageStrategy: synchronous "
                              "replicas sharing one copy of the variables "
                              "on the parameter device",
                              STRATA_CAP_STATE | STRATA_CAP_CLIP),
    .options = central_options,
    .cfg_size = sizeof(central_cfg_t),
    .init = central_init,
    .fini = central_fini,
    .create_var = central_create_var,
    .reduce = central_reduce,
    .update = central_update,
    .ctl = central_ctl,
};
