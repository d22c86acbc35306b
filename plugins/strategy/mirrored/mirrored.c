/* mirrored.so -- MirroredStrategy: synchronous data parallelism on the
 * replicas of one process. Every replica holds its own copy of every
 * variable and of the optimizer state (a MirroredVariable); reduce
 * all-reduces the replicas' gradients through the transport, update applies
 * the same optimizer step to every copy, so the copies stay bitwise equal. */
#include <stdlib.h>
#include <string.h>

#include <strata/plugin.h>

typedef struct mirrored_cfg {
    int reduce_op; /* index into "mean|sum" = STRATA_REDUCE_MEAN/SUM - 1 */
} mirrored_cfg_t;

static const strata_option_t mirrored_options[] = {
    { .key = "reduce_op", .type = STRATA_OPT_ENUM, .def = "mean",
      .offset = offsetof(mirrored_cfg_t, reduce_op), .min = 1, .max = 0,
      .choices = "mean|sum",
      .help = "how replica gradients combine: mean (the global-batch "
              "gradient) or sum (N times larger)" },
    { .key = NULL },
};

typedef struct mirrored {
    const strata_host_v1_t *host;
    int                     n;
    const int32_t          *devices;
    size_t                  count;      /* flat layout elements             */
    int                     reduce_op;  /* STRATA_REDUCE_*                  */
    float                 **slab;       /* per replica: all its variables   */
    strata_opt_t          **opt;        /* per replica: its optimizer state */
    strata_transport_t     *t;
    char                    tname[64];
} mirrored_t;

static void mirrored_fini(void *pctx);

/* Open the first transport of the [transport] list that accepts a group of
 * this process's replica threads. */
static int open_transport(mirrored_t *m, const strata_env_t *env)
{
    const strata_group_t g = {
        .struct_size = sizeof g, .scope = STRATA_SCOPE_LOCAL, .size = m->n,
        .rank = 0, .nlocal = m->n, .devices = m->devices, .tag = "mirrored",
    };
    const char *p = env->transport && env->transport[0] ? env->transport
                                                        : "local";
    while (*p) {
        p += strspn(p, " ,");
        size_t len = strcspn(p, " ,");
        if (len == 0)
            break;
        if (len >= sizeof m->tname)
            len = sizeof m->tname - 1;
        memcpy(m->tname, p, len);
        m->tname[len] = '\0';
        p += len;
        int rc = m->host->t_open(m->tname, &g, &m->t);
        if (rc == STRATA_OK)
            return STRATA_OK;
        if (rc != STRATA_EDECLINE)
            return rc;
        m->host->log(STRATA_LOG_INFO, "mirrored",
                     "transport %s declined; trying the next", m->tname);
    }
    m->host->log(STRATA_LOG_ERROR, "mirrored",
                 "no transport of [transport] plugin = %s accepts %d local "
                 "replicas", env->transport, m->n);
    return STRATA_EDECLINE;
}

static int mirrored_init(const strata_host_v1_t *host, const strata_env_t *env,
                         void **pctx)
{
    *pctx = NULL;
    mirrored_t *m = calloc(1, sizeof *m);
    if (!m)
        return STRATA_ENOMEM;
    const mirrored_cfg_t *cfg = env->cfg;
    m->host = host;
    m->n = env->nreplicas;
    m->devices = env->devices;
    m->count = env->model_count;
    m->reduce_op = cfg->reduce_op == 0 ? STRATA_REDUCE_MEAN : STRATA_REDUCE_SUM;
    m->slab = calloc((size_t)m->n, sizeof *m->slab);
    m->opt = calloc((size_t)m->n, sizeof *m->opt);
    int rc = m->slab && m->opt ? STRATA_OK : STRATA_ENOMEM;
    for (int r = 0; rc == STRATA_OK && r < m->n; r++) {
        m->slab[r] = host->alloc(m->devices[r], m->count * sizeof(float));
        rc = m->slab[r] ? host->opt_create(m->devices[r], m->count, &m->opt[r])
                        : STRATA_ENOMEM;
    }
    if (rc == STRATA_OK)
        rc = open_transport(m, env);
    if (rc != STRATA_OK) {
        mirrored_fini(m);
        return rc;
    }
    *pctx = m;
    return STRATA_OK;
}

static void mirrored_fini(void *pctx)
{
    mirrored_t *m = pctx;
    if (!m)
        return;
    m->host->t_close(m->t);
    for (int r = 0; r < m->n; r++) {
        if (m->opt)
            m->host->opt_destroy(m->opt[r]);
        if (m->slab)
            m->host->free(m->devices[r], m->slab[r]);
    }
    free(m->opt);
    free(m->slab);
    free(m);
}

/* Every replica gets its own copy, placed in its slab at the variable's
 * offset of the flat layout. */
static int mirrored_create_var(void *pctx, strata_var_t *var)
{
    mirrored_t *m = pctx;
    if (var->offset + var->count > m->count)
        return STRATA_EINVAL;
    for (int r = 0; r < m->n; r++) {
        float *dst = m->slab[r] + var->offset;
        int rc = m->host->copy(m->devices[r], dst,
                               STRATA_DEVICE(STRATA_DEV_CPU, 0), var->init,
                               var->count * sizeof(float));
        if (rc != STRATA_OK)
            return rc;
        var->value[r] = dst;
    }
    return STRATA_OK;
}

static int mirrored_reduce(void *pctx, strata_op_t *op)
{
    mirrored_t *m = pctx;
    strata_op_t t = *op;
    t.reduce_op = m->reduce_op;
    return m->host->t_reduce(m->t, &t);
}

static int mirrored_update(void *pctx, strata_op_t *op)
{
    mirrored_t *m = pctx;
    if (op->slot < 0 || op->slot >= m->n || op->count != m->count)
        return STRATA_EINVAL;
    return m->host->opt_step(m->opt[op->slot], m->slab[op->slot], op->buf,
                             m->count, op->lr);
}

static int mirrored_ctl(void *pctx, int op, void *arg)
{
    mirrored_t *m = pctx;
    if (op == STRATA_CTL_ABORT)
        return m->host->t_ctl(m->t, op, arg);
    return STRATA_ENOTSUP;
}

STRATA_EXPORT const strata_plugin_v1_t strata_plugin_v1 = {
    STRATA_PLUGIN_HEADER_V1(STRATA_KIND_STRATEGY, "mirrored", "0.1.0",
                            "MirroredStrategy: synchronous replicas in one "
                            "process, all-reduced gradients, a copy per "
                            "replica"),
    .options = mirrored_options,
    .cfg_size = sizeof(mirrored_cfg_t),
    .init = mirrored_init,
    .fini = mirrored_fini,
    .create_var = mirrored_create_var,
    .reduce = mirrored_reduce,
    .update = mirrored_update,
    .ctl = mirrored_ctl,
};
