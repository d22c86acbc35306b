/* The [optimizer] section as a service: state (slots) next to the variable
 * it updates, one fused kernel pass per step (the decoupled weight decay
 * included), through the kernel table of the variable's device (kops.h).
 * sgd, momentum, adam, rmsprop and adagrad; the slots start at 0, but for
 * adagrad's accumulator (initial_accumulator_value, as Keras).
 * On a GPU the step is enqueued on the device's stream and step() returns
 * at once: the next forward pass runs on the same stream, and every copy
 * off the device (host->copy) waits for it, so nobody sees the variable
 * before its update. */
#include <math.h>
#include <stdlib.h>

#include "runtime.h"

static const char *const k_names[STRATA__OPT_COUNT] = {
    "sgd", "momentum", "adam", "rmsprop", "adagrad"
};

const char *strata__opt_name(int kind)
{
    return kind >= 0 && kind < STRATA__OPT_COUNT ? k_names[kind] : "?";
}

int strata__opt_nslots(const strata__optimizer_cfg_t *cfg)
{
    switch (cfg->name) {
    case STRATA__OPT_MOMENTUM:
    case STRATA__OPT_ADAGRAD:
        return 1;
    case STRATA__OPT_ADAM:
        return 2;
    case STRATA__OPT_RMSPROP:
        return cfg->rmsprop_momentum > 0.0 ? 2 : 1;
    default:
        return 0;
    }
}

const char *strata__opt_slot_name(int kind, int i)
{
    switch (kind) {
    case STRATA__OPT_MOMENTUM:
        return "velocity";
    case STRATA__OPT_ADAM:
        return i == 0 ? "m" : "v";
    case STRATA__OPT_RMSPROP:
        return i == 0 ? "rms" : "momentum";
    case STRATA__OPT_ADAGRAD:
        return "accumulator";
    default:
        return "?";
    }
}

float strata__opt_slot_init(const strata__optimizer_cfg_t *cfg, int i)
{
    return cfg->name == STRATA__OPT_ADAGRAD && i == 0
               ? (float)cfg->initial_accumulator_value : 0.0f;
}

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
    o->rho = (float)cfg->rho;
    o->rms_momentum = (float)cfg->rmsprop_momentum;
    o->weight_decay = (float)cfg->weight_decay;
    o->nslots = strata__opt_nslots(cfg);
    /* dev_alloc zeroes; a slot that starts elsewhere is filled, and the
     * state is ready for any stream (as dev_alloc's) when this returns */
    int filled = 0;
    for (int i = 0; i < o->nslots; i++) {
        if (!(o->slot[i] = strata__dev_alloc(device, count * sizeof(float)))) {
            strata__opt_destroy(o);
            return STRATA_ENOMEM;
        }
        float init = strata__opt_slot_init(cfg, i);
        if (init != 0.0f) {
            rc = kd->ops->fill_const(kd, count, o->slot[i], init);
            filled = 1;
        }
        if (rc != STRATA_OK) {
            strata__opt_destroy(o);
            return rc;
        }
    }
    if (filled && (rc = kd->ops->sync(kd)) != STRATA_OK) {
        strata__opt_destroy(o);
        return rc;
    }
    *out = o;
    return STRATA_OK;
}

/* One update of n elements at `at` of the variable (and of its slots), with
 * the optimizer's current step count. */
static int step_range(strata_opt_t *o, size_t at, float *param,
                      const float *grad, size_t n, float lr)
{
    strata__kdev_t *k = o->kd;
    float *s0 = o->slot[0] ? o->slot[0] + at : NULL;
    float *s1 = o->slot[1] ? o->slot[1] + at : NULL;
    switch (o->kind) {
    case STRATA__OPT_SGD:
        return k->ops->sgd(k, n, param, grad, lr, o->weight_decay);
    case STRATA__OPT_MOMENTUM:
        return k->ops->momentum(k, n, param, grad, s0, lr, o->momentum,
                                o->weight_decay);
    case STRATA__OPT_ADAM:
        return k->ops->adam(k, n, param, grad, s0, s1, lr, o->beta1,
                            o->beta2, o->epsilon, o->t, o->weight_decay);
    case STRATA__OPT_RMSPROP:
        return k->ops->rmsprop(k, n, param, grad, s0, s1, lr, o->rho,
                               o->rms_momentum, o->epsilon, o->weight_decay);
    case STRATA__OPT_ADAGRAD:
        return k->ops->adagrad(k, n, param, grad, s0, lr, o->epsilon,
                               o->weight_decay);
    default:
        return STRATA_EINVAL;
    }
}

int strata__opt_step(strata_opt_t *o, float *param, const float *grad,
                     size_t count, float lr)
{
    if (!o || count > o->count)
        return STRATA_EINVAL;
    o->t++;
    return step_range(o, 0, param, grad, count, lr);
}

/* Lazy: only the rows named move, their slots with them; t counts the call
 * once (TensorFlow's sparse apply: Adam's bias correction uses the global
 * step, not how often a row was touched). Consecutive rows go as one run:
 * the kernels are elementwise, so the bits are those of a row at a time. */
int strata__opt_step_rows(strata_opt_t *o, float *param, const int64_t *rows,
                          size_t nrows, size_t row_len, const float *grad,
                          float lr)
{
    if (!o || row_len == 0 || o->count % row_len != 0
        || (nrows > 0 && (!rows || !grad || !param)))
        return STRATA_EINVAL;
    int64_t nr = (int64_t)(o->count / row_len);
    for (size_t i = 0; i < nrows; i++)
        if (rows[i] < 0 || rows[i] >= nr || (i > 0 && rows[i] <= rows[i - 1]))
            return STRATA_EINVAL;
    o->t++;
    for (size_t i = 0; i < nrows;) {
        size_t j = i + 1;
        while (j < nrows && rows[j] == rows[j - 1] + 1)
            j++;
        size_t at = (size_t)rows[i] * row_len;
        int rc = step_range(o, at, param + at, grad + i * row_len,
                            (j - i) * row_len, lr);
        if (rc != STRATA_OK)
            return rc;
        i = j;
    }
    return STRATA_OK;
}

void strata__opt_destroy(strata_opt_t *o)
{
    if (!o)
        return;
    for (int i = 0; i < 2; i++)
        strata__dev_free(o->device, o->slot[i]);
    free(o);
}

int strata__opt_io(strata_opt_t *o, int set, float *const *slots, int nslots,
                   int64_t *steps)
{
    if (!o || nslots != o->nslots || (nslots > 0 && !slots) || !steps)
        return STRATA_EINVAL;
    for (int i = 0; i < nslots; i++) {
        int rc = set ? strata__dev_copy(o->device, o->slot[i],
                                        STRATA_DEVICE(STRATA_DEV_CPU, 0),
                                        slots[i], o->count * sizeof(float))
                     : strata__dev_copy(STRATA_DEVICE(STRATA_DEV_CPU, 0),
                                        slots[i], o->device, o->slot[i],
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
