/* The [optimizer] section as a service: state (slots) next to the variable
 * it updates, one fused kernel pass per step (the decoupled weight decay
 * included), through the kernel table of the variable's device (kops.h).
 * On a GPU the step is enqueued on the device's stream and step() returns
 * at once: the next forward pass runs on the same stream, and every copy
 * off the device (host->copy) waits for it, so nobody sees the variable
 * before its update. */
#include <math.h>
#include <stdlib.h>

#include "runtime.h"

int strata__opt_create(const strata__optimizer_cfg_t *cfg, int32_t device,
                       size_t count, strata_opt_t **out)
{
    *out = NULL;
    strata__kdev_t *kd;
    int rc = strata__kdev_get(device, &kd);
    if (rc != STRATA_OK)
        return rc;
    strata_opt_t *o = calloc(1, sizeof *o);
    if (!o)
        return STRATA_ENOMEM;
    o->kind = cfg->name;
    o->device = device;
    o->kd = kd;
    o->count = count;
    o->momentum = (float)cfg->momentum;
    o->beta1 = (float)cfg->beta1;
    o->beta2 = (float)cfg->beta2;
    o->epsilon = (float)cfg->epsilon;
    o->weight_decay = (float)cfg->weight_decay;
    int slots = o->kind == STRATA__OPT_ADAM ? 2 : o->kind == STRATA__OPT_MOMENTUM;
    if (slots >= 1 && !(o->m = strata__dev_alloc(device, count * sizeof(float))))
        goto oom;
    if (slots >= 2 && !(o->v = strata__dev_alloc(device, count * sizeof(float))))
        goto oom;
    *out = o;
    return STRATA_OK;
oom:
    strata__opt_destroy(o);
    return STRATA_ENOMEM;
}

int strata__opt_step(strata_opt_t *o, float *param, const float *grad,
                     size_t count, float lr)
{
    if (!o || count > o->count)
        return STRATA_EINVAL;
    strata__kdev_t *k = o->kd;
    o->t++;
    switch (o->kind) {
    case STRATA__OPT_SGD:
        return k->ops->sgd(k, count, param, grad, lr, o->weight_decay);
    case STRATA__OPT_MOMENTUM:
        return k->ops->momentum(k, count, param, grad, o->m, lr, o->momentum,
                                o->weight_decay);
    case STRATA__OPT_ADAM:
        return k->ops->adam(k, count, param, grad, o->m, o->v, lr, o->beta1,
                            o->beta2, o->epsilon, o->t, o->weight_decay);
    default:
        return STRATA_EINVAL;
    }
}

void strata__opt_destroy(strata_opt_t *o)
{
    if (!o)
        return;
    strata__dev_free(o->device, o->m);
    strata__dev_free(o->device, o->v);
    free(o);
}

int strata__opt_io(strata_opt_t *o, int set, float *const *slots, int nslots,
                   int64_t *steps)
{
    float *mine[2] = { o ? o->m : NULL, o ? o->v : NULL };
    int have = o ? (o->v ? 2 : o->m ? 1 : 0) : -1;
    if (!o || nslots != have || (nslots > 0 && !slots) || !steps)
        return STRATA_EINVAL;
    for (int i = 0; i < nslots; i++) {
        int rc = set ? strata__dev_copy(o->device, mine[i],
                                        STRATA_DEVICE(STRATA_DEV_CPU, 0),
                                        slots[i], o->count * sizeof(float))
                     : strata__dev_copy(STRATA_DEVICE(STRATA_DEV_CPU, 0),
                                        slots[i], o->device, mine[i],
                                        o->count * sizeof(float));
        if (rc != STRATA_OK)
            return rc;
    }
    if (set)
        o->t = *steps;
    else
        *steps = o->t;
    return STRATA_OK;
}

int strata__grad_sumsq(const strata__optimizer_cfg_t *cfg, int32_t device,
                       size_t n, const float *g, double *sumsq)
{
    *sumsq = 0.0;
    if (!(cfg->clip_norm > 0.0))
        return 0;
    strata__kdev_t *k;
    int rc = strata__kdev_get(device, &k);
    if (rc == STRATA_OK)
        rc = k->ops->sumsq(k, n, g, sumsq);
    return rc == STRATA_OK ? 1 : rc;
}

/* tf.clip_by_global_norm: g x clip / max(norm, clip); a gradient within
 * the bound (or a NaN norm) is left as it is, bit for bit. */
int strata__grad_clip(const strata__optimizer_cfg_t *cfg, int32_t device,
                      size_t n, float *g, double sumsq)
{
    double norm = sqrt(sumsq);
    if (!(cfg->clip_norm > 0.0) || !(norm > cfg->clip_norm))
        return STRATA_OK;
    strata__kdev_t *k;
    int rc = strata__kdev_get(device, &k);
    if (rc == STRATA_OK)
        rc = k->ops->scale(k, n, (float)(cfg->clip_norm / norm), g);
    return rc == STRATA_OK ? k->ops->sync(k) : rc;
}
