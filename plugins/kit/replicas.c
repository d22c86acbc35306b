/* Mirrored replicas for strategy plugins, sharded or not: the kit's helpers
 * (shipped in libstrata_kit.a, include/strata/kit.h). */
#include <strata/kit.h>

#include <stdlib.h>
#include <string.h>

/* Shard i of n on 16-float (64-byte) lines, as local.so's chunks: no two
 * replicas write one cache line, and every shard starts aligned for the
 * vector loops. */
size_t strata_kit_replicas_shard_lo(size_t count, int n, int i)
{
    size_t lines = (count + 15) / 16;
    size_t lo = lines * (size_t)i / (size_t)n * 16;
    return lo < count ? lo : count;
}

static int init(strata_kit_replicas_t *rs, const strata_host_v2_t *host,
                strata_hctx_t *hc, const strata_env_t *env, int sharded,
                int with_opt);

int strata_kit_replicas_init(strata_kit_replicas_t *rs,
                             const strata_host_v2_t *host, strata_hctx_t *hc,
                             const strata_env_t *env)
{
    return init(rs, host, hc, env, 0, 1);
}

int strata_kit_replicas_init_sharded(strata_kit_replicas_t *rs,
                                     const strata_host_v2_t *host,
                                     strata_hctx_t *hc,
                                     const strata_env_t *env, int sharded)
{
    return init(rs, host, hc, env, sharded, 1);
}

int strata_kit_replicas_init_bare(strata_kit_replicas_t *rs,
                                  const strata_host_v2_t *host,
                                  strata_hctx_t *hc, const strata_env_t *env)
{
    return init(rs, host, hc, env, 0, 0);
}

static int init(strata_kit_replicas_t *rs, const strata_host_v2_t *host,
                strata_hctx_t *hc, const strata_env_t *env, int sharded,
                int with_opt)
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
    if (rc == STRATA_OK && sharded && rs->n > 1) {
        rs->shard = calloc((size_t)rs->n + 1, sizeof *rs->shard);
        rs->grads = calloc((size_t)rs->n, sizeof *rs->grads);
        if (!rs->shard || !rs->grads)
            rc = STRATA_ENOMEM;
        for (int r = 0; rc == STRATA_OK && r <= rs->n; r++)
            rs->shard[r] = strata_kit_replicas_shard_lo(rs->count, rs->n, r);
    }
    for (int r = 0; rc == STRATA_OK && r < rs->n; r++) {
        size_t own = rs->shard ? rs->shard[r + 1] - rs->shard[r] : rs->count;
        rs->slab[r] = host->alloc(hc, rs->devices[r],
                                  rs->count * sizeof(float));
        rc = !rs->slab[r] ? STRATA_ENOMEM
             : with_opt   ? host->opt_create(hc, rs->devices[r], own,
                                             &rs->opt[r])
                          : STRATA_OK;
    }
    if (rc != STRATA_OK)
        strata_kit_replicas_fini(rs);
    return rc;
}

void strata_kit_replicas_fini(strata_kit_replicas_t *rs)
{
    for (int r = 0; r < rs->n; r++) {
        if (rs->opt && rs->opt[r])
            rs->host->opt_destroy(rs->hc, rs->opt[r]);
        if (rs->slab)
            rs->host->free(rs->hc, rs->devices[r], rs->slab[r]);
    }
    free(rs->opt);
    free(rs->slab);
    free(rs->shard);
    free(rs->grads);
    rs->opt = NULL;
    rs->slab = NULL;
    rs->shard = NULL;
    rs->grads = NULL;
}

int strata_kit_replicas_create_var(strata_kit_replicas_t *rs,
                                   strata_var_t *var)
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

int strata_kit_replicas_clip_range(const strata_host_v2_t *host,
                                   strata_hctx_t *hc, int32_t device,
                                   size_t n, float *grad, size_t lo,
                                   size_t len)
{
    if (!STRATA_HAS_FIELD(strata_host_v2_t, host, grad_clip))
        return STRATA_OK; /* a core before ABI 2.2 has no clip_norm */
    double sumsq;
    int rc = host->grad_sumsq(hc, device, n, grad, &sumsq);
    return rc == 1 ? host->grad_clip(hc, device, len, grad + lo, sumsq) : rc;
}

int strata_kit_replicas_clip(const strata_host_v2_t *host, strata_hctx_t *hc,
                             int32_t device, size_t n, float *grad)
{
    return strata_kit_replicas_clip_range(host, hc, device, n, grad, 0, n);
}

int strata_kit_replicas_update(strata_kit_replicas_t *rs,
                               const strata_op_t *op)
{
    if (op->slot < 0 || op->slot >= rs->n || op->count != rs->count)
        return STRATA_EINVAL;
    /* Every replica holds the same reduced gradient of every variable:
     * each clips it alike. */
    int rc = strata_kit_replicas_clip(rs->host, rs->hc, rs->devices[op->slot],
                                      rs->count, op->buf);
    return rc == STRATA_OK
               ? rs->host->opt_step(rs->hc, rs->opt[op->slot],
                                    rs->slab[op->slot], op->buf, rs->count,
                                    op->lr)
               : rc;
}

/* Replica r's optimizer state to or from st: all of it, or (sharded) its
 * shard's range of every slot. */
static int opt_state(strata_kit_replicas_t *rs, int r, int set,
                     strata_state_t *st)
{
    float *slots[8];
    if (!rs->shard)
        return rs->host->opt_io(rs->hc, rs->opt[r], set, st->slots,
                                st->nslots, &st->opt_steps);
    if (st->nslots < 0 || st->nslots > 8)
        return STRATA_EINVAL;
    for (int i = 0; i < st->nslots; i++)
        slots[i] = st->slots[i] + rs->shard[r];
    return rs->host->opt_io(rs->hc, rs->opt[r], set, slots, st->nslots,
                            &st->opt_steps);
}

int strata_kit_replicas_state(strata_kit_replicas_t *rs, int set,
                              strata_state_t *st)
{
    const int32_t cpu = STRATA_DEVICE(STRATA_DEV_CPU, 0);
    const size_t bytes = rs->count * sizeof(float);
    /* variables: every replica's copy (SET), replica 0's (GET); optimizer
     * state: every replica's (SET), replica 0's -- or every shard (GET) */
    for (int r = 0; r < rs->n; r++) {
        int rc = STRATA_OK;
        if (set)
            rc = rs->host->copy(rs->hc, rs->devices[r], rs->slab[r], cpu,
                                st->vars, bytes);
        else if (r == 0)
            rc = rs->host->copy(rs->hc, cpu, st->vars, rs->devices[r],
                                rs->slab[r], bytes);
        if (rc == STRATA_OK && rs->opt[r] && (set || r == 0 || rs->shard))
            rc = opt_state(rs, r, set, st);
        if (rc != STRATA_OK)
            return rc;
    }
    return STRATA_OK;
}
