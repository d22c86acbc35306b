#include "replicas.h"

#include <stdlib.h>
#include <string.h>

int replicas_init(replicas_t *rs, const strata_host_v2_t *host,
                  strata_hctx_t *hc, const strata_env_t *env)
{
    memset(rs, 0, sizeof *rs);
    rs->host = host;
    rs->hc = hc;
    rs->n = env->nreplicas;
    rs->devices = env->devices;
    rs->count = env->model_count;
    rs->slab = calloc((size_t)rs->n, sizeof *rs->slab);
    rs->opt = calloc((size_t)rs->n, sizeof *rs->opt);
    int rc = rs->slab && rs->opt ? STRATA_OK : STRATA_ENOMEM;
    for (int r = 0; rc == STRATA_OK && r < rs->n; r++) {
        rs->slab[r] = host->alloc(hc, rs->devices[r],
                                  rs->count * sizeof(float));
        rc = rs->slab[r] ? host->opt_create(hc, rs->devices[r], rs->count,
                                            &rs->opt[r])
                         : STRATA_ENOMEM;
    }
    if (rc != STRATA_OK)
        replicas_fini(rs);
    return rc;
}

void replicas_fini(replicas_t *rs)
{
    for (int r = 0; r < rs->n; r++) {
        if (rs->opt)
            rs->host->opt_destroy(rs->hc, rs->opt[r]);
        if (rs->slab)
            rs->host->free(rs->hc, rs->devices[r], rs->slab[r]);
    }
    free(rs->opt);
    free(rs->slab);
    rs->opt = NULL;
    rs->slab = NULL;
}

int replicas_create_var(replicas_t *rs, strata_var_t *var)
{
    if (var->offset + var->count > rs->count)
        return STRATA_EINVAL;
    for (int r = 0; r < rs->n; r++) {
        float *dst = rs->slab[r] + var->offset;
        int rc = rs->host->copy(rs->hc, rs->devices[r], dst,
                                STRATA_DEVICE(STRATA_DEV_CPU, 0), var->init,
                                var->count * sizeof(float));
        if (rc != STRATA_OK)
            return rc;
        var->value[r] = dst;
    }
    return STRATA_OK;
}

int replicas_clip(const strata_host_v2_t *host, strata_hctx_t *hc,
                  int32_t device, size_t n, float *grad)
{
    if (!STRATA_HAS_FIELD(strata_host_v2_t, host, grad_clip))
        return STRATA_OK; /* a core before ABI 2.2 has no clip_norm */
    double sumsq;
    int rc = host->grad_sumsq(hc, device, n, grad, &sumsq);
    return rc == 1 ? host->grad_clip(hc, device, n, grad, sumsq) : rc;
}

int replicas_update(replicas_t *rs, const strata_op_t *op)
{
    if (op->slot < 0 || op->slot >= rs->n || op->count != rs->count)
        return STRATA_EINVAL;
    /* Every replica holds the same reduced gradient of every variable:
     * each clips it alike. */
    int rc = replicas_clip(rs->host, rs->hc, rs->devices[op->slot], rs->count,
                           op->buf);
    return rc == STRATA_OK
               ? rs->host->opt_step(rs->hc, rs->opt[op->slot],
                                    rs->slab[op->slot], op->buf, rs->count,
                                    op->lr)
               : rc;
}

int replicas_state(replicas_t *rs, int set, strata_state_t *st)
{
    const int32_t cpu = STRATA_DEVICE(STRATA_DEV_CPU, 0);
    const size_t bytes = rs->count * sizeof(float);
    for (int r = 0; r < (set ? rs->n : 1); r++) {
        int rc = set ? rs->host->copy(rs->hc, rs->devices[r], rs->slab[r],
                                      cpu, st->vars, bytes)
                     : rs->host->copy(rs->hc, cpu, st->vars, rs->devices[r],
                                      rs->slab[r], bytes);
        if (rc == STRATA_OK)
            rc = rs->host->opt_io(rs->hc, rs->opt[r], set, st->slots,
                                  st->nslots, &st->opt_steps);
        if (rc != STRATA_OK)
            return rc;
    }
    return STRATA_OK;
}
