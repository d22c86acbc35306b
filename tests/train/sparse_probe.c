/* A strategy of one replica that declares STRATA_CAP_SPARSE, built twice
 * (tests/train/CMakeLists.txt): as a plugin of ABI 2.9 (sparse_probe29)
 * and as one of 2.8 (sparse_probe28, PROBE_MINOR=8), whose bit the
 * loader drops. Each step it notes whether the gradient came as rows,
 * copies them into their ranges (the dense gradient, bit for bit) and
 * steps the optimizer; fini says "sparse_probe: R steps with rows, D
 * dense". train_sparse checks that the 2.8 one only ever sees the dense
 * form and that both train to mirrored's bits. */
#include <stdlib.h>

#include <strata/kit.h>

#ifndef PROBE_MINOR
#define PROBE_MINOR STRATA_ABI_MINOR
#endif
#ifndef PROBE_NAME
#define PROBE_NAME "sparse_probe29"
#endif

typedef struct probe {
    strata_kit_replicas_t rs;
    long                  rows, dense;
} probe_t;

static void probe_fini(void *pctx)
{
    probe_t *p = pctx;
    if (!p)
        return;
    if (p->rs.host)
        p->rs.host->log(p->rs.hc, STRATA_LOG_INFO, NULL, "sparse_probe: %ld "
                        "steps with rows, %ld dense", p->rows, p->dense);
    strata_kit_replicas_fini(&p->rs);
    free(p);
}

static int probe_init(const strata_host_v2_t *host, strata_hctx_t *hc,
                      const strata_env_t *env, void **pctx)
{
    *pctx = NULL;
    if (env->nreplicas != 1)
        return STRATA_EINVAL;
    probe_t *p = calloc(1, sizeof *p);
    if (!p)
        return STRATA_ENOMEM;
    int rc = strata_kit_replicas_init(&p->rs, host, hc, env);
    if (rc != STRATA_OK) {
        probe_fini(p);
        return rc;
    }
    *pctx = p;
    return STRATA_OK;
}

static int probe_create_var(void *pctx, strata_var_t *var)
{
    return strata_kit_replicas_create_var(&((probe_t *)pctx)->rs, var);
}

static int probe_reduce(void *pctx, strata_op_t *op)
{
    probe_t *p = pctx;
    if (STRATA_KIT_HAS_ROWS(op))
        p->rows++;
    else
        p->dense++;
    return strata_kit_sparse_densify(p->rs.host, p->rs.hc, op);
}

static int probe_update(void *pctx, strata_op_t *op)
{
    return strata_kit_replicas_update(&((probe_t *)pctx)->rs, op);
}

STRATA_EXPORT const strata_plugin_v2_t strata_plugin_v2 = {
    .hdr = { STRATA_ABI_MAJOR, PROBE_MINOR,
             (uint32_t)sizeof(strata_plugin_v2_t), STRATA_KIND_STRATEGY,
             STRATA_CAP_SPARSE, PROBE_NAME, "0.1.0",
             "test: notes the form of the gradients", STRATA_BUILD_SIG },
    .init = probe_init,
    .fini = probe_fini,
    .create_var = probe_create_var,
    .reduce = probe_reduce,
    .update = probe_update,
};
