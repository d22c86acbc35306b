/* mirrored.so -- MirroredStrategy: synchronous data parallelism on the
 * replicas of one process. Every replica holds its own copy of every
 * variable and of the optimizer state (a MirroredVariable); reduce
 * all-reduces the replicas' gradients through the transport, update applies
 * the same optimizer step to every copy, so the copies stay bitwise equal.
 * With shard_optimizer (ZeRO stage 1, plugins/kit/shards.c; auto, the
 * default: on CPU replicas) each replica keeps the optimizer state of its
 * shard only, reduces and steps that shard, and hands it to the other
 * copies: the same bits, 1/n of the optimizer's memory and work.
 * Embedding tables (ABI 2.9, STRATA_CAP_SPARSE): their gradients come as
 * rows; while the replicas' rows together are few (sparse_threshold of
 * the table's rows), each replica adds every replica's rows, read in
 * place, in replica order (plugins/kit/sparse.c) -- the bits of the dense
 * all-reduce, which local.so sums in replica order too -- else, or with
 * sparse_as_dense, the dense all-reduce. */
#include <stdlib.h>
#include <string.h>

#include <strata/plugin.h>

#include "../common/replicas.h"

typedef struct mirrored_cfg {
    int reduce_op; /* index into "mean|sum" = STRATA_REDUCE_MEAN/SUM - 1 */
    int shard_optimizer; /* index into "auto|true|false" */
    int sparse_as_dense;
    double sparse_threshold;
} mirrored_cfg_t;

static const strata_option_t mirrored_options[] = {
    { .key = "reduce_op", .type = STRATA_OPT_ENUM, .def = "mean",
      .offset = offsetof(mirrored_cfg_t, reduce_op), .min = 1, .max = 0,
      .choices = "mean|sum",
      .help = "how replica gradients combine: mean (the global-batch "
              "gradient) or sum (N times larger)" },
    { .key = "shard_optimizer", .type = STRATA_OPT_ENUM, .def = "auto",
      .offset = offsetof(mirrored_cfg_t, shard_optimizer), .min = 1, .max = 0,
      .choices = "auto|true|false",
      .help = "ZeRO stage 1: each replica keeps, reduces and updates only "
              "its shard of the optimizer state and variables, then hands "
              "it to the others: the same bits, 1/N of the optimizer's "
              "memory and work (CPU replicas). auto: when every replica is "
              "on a CPU" },
    { .key = "sparse_as_dense", .type = STRATA_OPT_BOOL, .def = "false",
      .offset = offsetof(mirrored_cfg_t, sparse_as_dense),
      .help = "embedding gradients always as the dense all-reduce of the "
              "whole table (Horovod's sparse_as_dense), never as rows" },
    { .key = "sparse_threshold", .type = STRATA_OPT_FLOAT, .def = "0.1",
      .offset = offsetof(mirrored_cfg_t, sparse_threshold), .min = 0,
      .max = 1e6,
      .help = "embedding gradients go as rows (all-gathered) while the rows "
              "of all replicas together are at most this fraction of the "
              "table's rows, else dense (measured: contrib/bench/sparse)" },
    { .key = NULL },
};

typedef struct mirrored {
    replicas_t          rs;
    int                 reduce_op;  /* STRATA_REDUCE_*                      */
    strata_transport_t *t;
    strata_kit_sparse_policy_t sparse_pol;
    strata_kit_sparse_t       *sparse; /* one per replica                 */
    const strata_op_t        **pub;    /* each replica's op, for the rows  */
} mirrored_t;

static void mirrored_fini(void *pctx)
{
    mirrored_t *m = pctx;
    if (!m)
        return;
    if (m->sparse && m->rs.host) {
        if (m->rs.n > 1 && m->sparse[0].as_rows + m->sparse[0].as_dense)
            m->rs.host->log(m->rs.hc, STRATA_LOG_INFO, "mirrored",
                            "embedding gradients: %lld table-steps as rows, "
                            "%lld dense", (long long)m->sparse[0].as_rows,
                            (long long)m->sparse[0].as_dense);
        for (int r = 0; r < m->rs.n; r++)
            strata_kit_sparse_fini(m->rs.host, m->rs.hc, &m->sparse[r]);
    }
    free(m->sparse);
    free(m->pub);
    if (m->rs.host)
        m->rs.host->t_close(m->rs.hc, m->t);
    replicas_fini(&m->rs);
    free(m);
}

static int mirrored_init(const strata_host_v2_t *host, strata_hctx_t *hc,
                         const strata_env_t *env, void **pctx)
{
    *pctx = NULL;
    mirrored_t *m = calloc(1, sizeof *m);
    if (!m)
        return STRATA_ENOMEM;
    const mirrored_cfg_t *cfg = env->cfg;
    m->reduce_op = cfg->reduce_op == 0 ? STRATA_REDUCE_MEAN : STRATA_REDUCE_SUM;
    int sharded = cfg->shard_optimizer != 2 && env->nreplicas > 1;
    for (int r = 0; sharded && r < env->nreplicas; r++)
        if (STRATA_DEVICE_TYPE(env->devices[r]) != STRATA_DEV_CPU) {
            sharded = 0; /* auto: the replicas cannot read each other */
            if (cfg->shard_optimizer == 0)
                break;
            host->log(hc, STRATA_LOG_ERROR, "mirrored", "[strategy.mirrored] "
                      "shard_optimizer = true needs CPU replicas (replica %d "
                      "is not on a CPU: the shards are reduced and gathered "
                      "through host memory); set it to auto or false", r);
            free(m);
            return STRATA_ECONFIG;
        }
    m->sparse_pol = (strata_kit_sparse_policy_t){
        .as_dense = cfg->sparse_as_dense,
        .threshold = cfg->sparse_threshold };
    m->sparse = calloc((size_t)env->nreplicas, sizeof *m->sparse);
    m->pub = calloc((size_t)env->nreplicas, sizeof *m->pub);
    int rc = m->sparse && m->pub
                 ? replicas_init_sharded(&m->rs, host, hc, env, sharded)
                 : STRATA_ENOMEM;
    if (rc == STRATA_OK) {
        /* The replica threads of this process are the group. */
        const strata_group_t g = {
            .struct_size = sizeof g, .scope = STRATA_SCOPE_LOCAL,
            .size = env->nreplicas, .rank = 0, .nlocal = env->nreplicas,
            .devices = env->devices, .tag = "mirrored",
        };
        rc = host->t_open(hc, &g, &m->t);
    }
    if (rc != STRATA_OK) {
        mirrored_fini(m);
        return rc;
    }
    *pctx = m;
    return STRATA_OK;
}

/* Every replica gets its own copy, placed in its slab at the variable's
 * offset of the flat layout. */
static int mirrored_create_var(void *pctx, strata_var_t *var)
{
    return replicas_create_var(&((mirrored_t *)pctx)->rs, var);
}

static int dense_reduce(void *arg, strata_op_t *op)
{
    mirrored_t *m = arg;
    return m->rs.host->t_reduce(m->rs.hc, m->t, op);
}

static int mirrored_reduce(void *pctx, strata_op_t *op)
{
    mirrored_t *m = pctx;
    if (op->slot < 0 || op->slot >= m->rs.n)
        return STRATA_EINVAL;
    if (m->rs.shard) /* the core's op: the others read it after we return */
        return replicas_shard_reduce_rows(&m->rs, m->t, &m->sparse_pol,
                                          &m->sparse[op->slot], m->pub, op,
                                          m->reduce_op == STRATA_REDUCE_MEAN);
    strata_op_t t = *op;
    t.reduce_op = m->reduce_op;
    return strata_kit_sparse_reduce_local(m->rs.host, m->rs.hc, m->t,
                                          op->slot, m->rs.n, &m->sparse_pol,
                                          &m->sparse[op->slot], m->pub, &t,
                                          dense_reduce, m);
}

static int mirrored_update(void *pctx, strata_op_t *op)
{
    mirrored_t *m = pctx;
    return m->rs.shard ? replicas_shard_update(&m->rs, m->t, op)
                       : replicas_update(&m->rs, op);
}

static int mirrored_ctl(void *pctx, int op, void *arg)
{
    mirrored_t *m = pctx;
    switch (op) {
    case STRATA_CTL_ABORT:
        return m->rs.host->t_ctl(m->rs.hc, m->t, op, arg);
    case STRATA_CTL_STATE_GET:
    case STRATA_CTL_STATE_SET:
        return replicas_state(&m->rs, op == STRATA_CTL_STATE_SET, arg);
    default:
        return STRATA_ENOTSUP;
    }
}

STRATA_EXPORT const strata_plugin_v2_t strata_plugin_v2 = {
    STRATA_PLUGIN_HEADER_CAPS(STRATA_KIND_STRATEGY, "mirrored", "0.1.0",
                              "MirroredStrategy: synchronous replicas in one "
                              "process, all-reduced gradients, a copy per "
                              "replica",
                              STRATA_CAP_STATE | STRATA_CAP_CLIP |
                                  STRATA_CAP_SPARSE),
    .options = mirrored_options,
    .cfg_size = sizeof(mirrored_cfg_t),
    .init = mirrored_init,
    .fini = mirrored_fini,
    .create_var = mirrored_create_var,
    .reduce = mirrored_reduce,
    .update = mirrored_update,
    .ctl = mirrored_ctl,
};
