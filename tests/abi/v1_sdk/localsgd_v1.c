/* localsgd.so -- local SGD, a third-party strategy built against the
 * installed SDK only (<strata/plugin.h> and libc).
 *
 * Every replica keeps its own copy of the variables and its own optimizer
 * state, and steps on its own gradients: no gradient is exchanged. Every
 * `sync_every` steps the replicas average their variables through the
 * transport (a MEAN all-reduce of each replica's slab), so after a sync all
 * copies are bitwise equal. Optimizer slots (momentum, Adam moments) stay
 * local. With `local_after = N`, the first N steps all-reduce the gradients
 * instead, exactly as a synchronous strategy does ("post-local SGD", Lin et
 * al. 2020), and the replicas go local from step N on.
 *
 * One process only: the group is the replica threads of this process. */
#include <stdlib.h>
#include <string.h>

#include <strata/plugin.h>

#define WHO "localsgd"

/* Filled by the core from [strategy] before init(); INT options are int64_t. */
typedef struct localsgd_cfg {
    int64_t sync_every;
    int64_t local_after;
} localsgd_cfg_t;

static const strata_option_t localsgd_options[] = {
    { .key = "sync_every", .type = STRATA_OPT_INT, .def = "8",
      .offset = offsetof(localsgd_cfg_t, sync_every), .min = 1, .max = 1e18,
      .help = "average the replicas' variables every this many steps" },
    { .key = "local_after", .type = STRATA_OPT_INT, .def = "0",
      .offset = offsetof(localsgd_cfg_t, local_after), .min = 0, .max = 1e18,
      .help = "all-reduce gradients (synchronous training) for the first "
              "this many steps, then go local" },
    { .key = NULL },
};

typedef struct localsgd {
    const strata_host_v1_t *host;
    int                     n;           /* replicas of this process       */
    const int32_t          *devices;     /* env->devices, valid until fini  */
    size_t                  count;       /* floats in the flat layout      */
    int64_t                 sync_every, local_after;
    float                 **slab;        /* per replica: all its variables */
    strata_opt_t          **opt;         /* per replica: its optimizer     */
    strata_transport_t     *t;
} localsgd_t;

static void localsgd_fini(void *pctx)
{
    localsgd_t *s = pctx;
    if (!s)
        return;
    s->host->t_close(s->t);                  /* accepts NULL */
    for (int r = 0; r < s->n; r++) {
        if (s->opt)
            s->host->opt_destroy(s->opt[r]);
        if (s->slab)
            s->host->free(s->devices[r], s->slab[r]);
    }
    free(s->opt);
    free(s->slab);
    free(s);
}

/* For a core older than ABI 1.4, which does not choose transports: the
 * first of the [transport] list ("nccl, local") that does not decline a
 * group of this process's replicas. */
static int open_transport(localsgd_t *s, const char *list,
                          const strata_group_t *g)
{
    const char *p = list && list[0] ? list : "local";
    char name[64];
    for (;;) {
        p += strspn(p, " ,");
        size_t len = strcspn(p, " ,");
        if (len == 0)
            break;
        if (len >= sizeof name) {
            s->host->log(STRATA_LOG_ERROR, WHO, "transport name '%.*s' is "
                         "too long", (int)len, p);
            return STRATA_ECONFIG;
        }
        memcpy(name, p, len);
        name[len] = '\0';
        p += len;
        int rc = s->host->t_open(name, g, &s->t);
        if (rc != STRATA_EDECLINE)
            return rc;                       /* opened, or a real error */
        s->host->log(STRATA_LOG_INFO, WHO, "transport %s declined; trying "
                     "the next", name);
    }
    s->host->log(STRATA_LOG_ERROR, WHO, "no transport of '%s' accepts %d "
                 "local replicas", list, g->size);
    return STRATA_EDECLINE;
}

static int localsgd_init(const strata_host_v1_t *host, const strata_env_t *env,
                         void **pctx)
{
    *pctx = NULL;
    if (env->cluster && env->cluster->nworkers > 1) {
        host->log(STRATA_LOG_ERROR, WHO, "runs the replicas of one process; "
                  "this job has %d training tasks", env->cluster->nworkers);
        return STRATA_ECONFIG;
    }
    localsgd_t *s = calloc(1, sizeof *s);
    if (!s)
        return STRATA_ENOMEM;
    const localsgd_cfg_t *cfg = env->cfg;
    s->host = host;
    s->n = env->nreplicas;
    s->devices = env->devices;
    s->count = env->model_count;
    s->sync_every = cfg->sync_every;
    s->local_after = cfg->local_after;
    s->slab = calloc((size_t)s->n, sizeof *s->slab);
    s->opt = calloc((size_t)s->n, sizeof *s->opt);
    int rc = s->slab && s->opt ? STRATA_OK : STRATA_ENOMEM;
    for (int r = 0; rc == STRATA_OK && r < s->n; r++) {
        s->slab[r] = host->alloc(s->devices[r], s->count * sizeof(float));
        rc = s->slab[r] ? host->opt_create(s->devices[r], s->count, &s->opt[r])
                        : STRATA_ENOMEM;
    }
    if (rc == STRATA_OK) {
        const strata_group_t g = {
            .struct_size = sizeof g, .scope = STRATA_SCOPE_LOCAL,
            .size = s->n, .rank = 0, .nlocal = s->n, .devices = s->devices,
            .tag = WHO,
        };
        /* From ABI 1.4 the core chooses ([transport] local = ...). */
        if (STRATA_HAS_FIELD(strata_host_v1_t, host, t_open_group) &&
            host->t_open_group)
            rc = host->t_open_group(&g, &s->t);
        else
            rc = open_transport(s, env->transport, &g);
    }
    if (rc != STRATA_OK) {
        localsgd_fini(s);
        return rc;
    }
    host->log(STRATA_LOG_DEBUG, WHO, "%d replicas, sync_every %lld, "
              "local_after %lld", s->n, (long long)s->sync_every,
              (long long)s->local_after);
    *pctx = s;
    return STRATA_OK;
}

/* Every replica starts from the same initial value, in its own slab. */
static int localsgd_create_var(void *pctx, strata_var_t *var)
{
    localsgd_t *s = pctx;
    if (var->dtype != STRATA_DTYPE_F32 || var->offset > s->count
        || var->count > s->count - var->offset)
        return STRATA_EINVAL;
    for (int r = 0; r < s->n; r++) {
        float *dst = s->slab[r] + var->offset;
        int rc = s->host->copy(s->devices[r], dst,
                               STRATA_DEVICE(STRATA_DEV_CPU, 0), var->init,
                               var->count * sizeof(float));
        if (rc != STRATA_OK)
            return rc;
        var->value[r] = dst;
    }
    return STRATA_OK;
}

static int check_op(const localsgd_t *s, const strata_op_t *op)
{
    return op->slot < 0 || op->slot >= s->n || op->count != s->count
               ? STRATA_EINVAL : STRATA_OK;
}

/* Synchronous phase: the replicas' gradients become their mean. Local
 * phase: nothing to combine. Every replica sees the same op->step, so all
 * of them take the same branch of this collective. */
static int localsgd_reduce(void *pctx, strata_op_t *op)
{
    localsgd_t *s = pctx;
    int rc = check_op(s, op);
    if (rc != STRATA_OK || op->step >= s->local_after)
        return rc;
    strata_op_t t = *op;
    t.reduce_op = STRATA_REDUCE_MEAN;
    return s->host->t_reduce(s->t, &t);
}

/* The local optimizer step; on a sync step, then the variables' mean. */
static int localsgd_update(void *pctx, strata_op_t *op)
{
    localsgd_t *s = pctx;
    int r = op->slot, rc = check_op(s, op);
    if (rc == STRATA_OK)
        rc = s->host->opt_step(s->opt[r], s->slab[r], op->buf, s->count,
                               op->lr);
    if (rc != STRATA_OK || op->step < s->local_after
        || (op->step + 1) % s->sync_every != 0)
        return rc;
    strata_op_t avg = {
        .struct_size = sizeof avg, .slot = r, .buf = s->slab[r],
        .count = s->count, .device = s->devices[r],
        .reduce_op = STRATA_REDUCE_MEAN, .step = op->step,
    };
    return s->host->t_reduce(s->t, &avg);
}

static int localsgd_ctl(void *pctx, int op, void *arg)
{
    localsgd_t *s = pctx;
    if (op == STRATA_CTL_ABORT)              /* wake replicas in t_reduce */
        return s->host->t_ctl(s->t, op, arg);
    return STRATA_ENOTSUP;                   /* incl. WORLD_SUM: one process */
}

STRATA_EXPORT const strata_plugin_v1_t strata_plugin_v1 = {
    STRATA_PLUGIN_HEADER_V1(STRATA_KIND_STRATEGY, "localsgd", "1.0.0",
                            "local SGD: replicas step alone, average "
                            "their variables every sync_every steps"),
    .options = localsgd_options,
    .cfg_size = sizeof(localsgd_cfg_t),
    .init = localsgd_init,
    .fini = localsgd_fini,
    .create_var = localsgd_create_var,
    .reduce = localsgd_reduce,
    .update = localsgd_update,
    .ctl = localsgd_ctl,
};
