/* The [optimizer] section as a service: state (slots) next to the variable
 * it updates, one fused kernel pass per step. */
#include <stdlib.h>

#include "kernels_cpu.h"
#include "runtime.h"

int strata__opt_create(const strata__optimizer_cfg_t *cfg, int32_t device,
                       size_t count, strata_opt_t **out)
{
    *out = NULL;
    if (STRATA_DEVICE_TYPE(device) != STRATA_DEV_CPU) {
        strata__log(STRATA_LOG_ERROR, "optimizer",
                    "device %d: only CPU devices are supported by this build",
                    (int)device);
        return STRATA_ENOTSUP;
    }
    strata_opt_t *o = calloc(1, sizeof *o);
    if (!o)
        return STRATA_ENOMEM;
    o->kind = cfg->name;
    o->device = device;
    o->count = count;
    o->momentum = (float)cfg->momentum;
    o->beta1 = (float)cfg->beta1;
    o->beta2 = (float)cfg->beta2;
    o->epsilon = (float)cfg->epsilon;
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
    o->t++;
    switch (o->kind) {
    case STRATA__OPT_SGD:
        kc_sgd(count, param, grad, lr);
        break;
    case STRATA__OPT_MOMENTUM:
        kc_momentum(count, param, grad, o->m, lr, o->momentum);
        break;
    case STRATA__OPT_ADAM:
        kc_adam(count, param, grad, o->m, o->v, lr, o->beta1, o->beta2,
                o->epsilon, o->t);
        break;
    default:
        return STRATA_EINVAL;
    }
    return STRATA_OK;
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
