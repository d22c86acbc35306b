/* Optimizer steps: one fused, in-place pass each, the decoupled weight
 * decay included (w - d * w with d = lr * wd, rounded before the update as
 * Keras applies it before the step). w, g and the slots are distinct
 * buffers, hence restrict. */
#include "kernels_cpu.h"
#include "kc_loop.h"

#include <math.h>

KC_HOT void kc_sgd(size_t n, float *restrict w, const float *restrict g,
                   float lr, float wd)
{
    float d = lr * wd;
    KC_FOR(i, n, float wi = w[i] - d * w[i]; w[i] = wi - lr * g[i]);
}

static inline void momentum_one(float *restrict w, const float *restrict g,
                                float *restrict v, float lr, float mu, float d)
{
    float wi = *w - d * *w;
    float vi = mu * *v - lr * *g;
    *v = vi;
    *w = wi + vi;
}

KC_HOT void kc_momentum(size_t n, float *restrict w, const float *restrict g,
                        float *restrict v, float lr, float momentum, float wd)
{
    float d = lr * wd;
    KC_FOR(i, n, momentum_one(w + i, g + i, v + i, lr, momentum, d));
}

/* PyTorch's arithmetic: step = lr / (1 - b1^t),
 * denom = sqrt(v) / sqrt(1 - b2^t) + eps (here times the reciprocal). */
static inline void adam_one(float *restrict w, const float *restrict g,
                            float *restrict m, float *restrict v, float b1,
                            float b2, float eps, float step, float rsq_bc2,
                            float d)
{
    float gi = *g;
    float mi = b1 * *m + (1.0f - b1) * gi;
    float vi = b2 * *v + (1.0f - b2) * gi * gi;
    float wi = *w - d * *w;
    *m = mi;
    *v = vi;
    /* sqrtf vectorises only without errno handling (-fno-math-errno). */
    *w = wi - step * mi / (sqrtf(vi) * rsq_bc2 + eps);
}

KC_HOT void kc_adam(size_t n, float *restrict w, const float *restrict g,
                    float *restrict m, float *restrict v, float lr, float b1,
                    float b2, float eps, int64_t t, float wd)
{
    if (t < 1)
        t = 1;              /* t counts this update; 0 would divide by 0 */
    double bc1 = 1.0 - pow((double)b1, (double)t);
    double bc2 = 1.0 - pow((double)b2, (double)t);
    float step = (float)((double)lr / bc1);
    float rsq_bc2 = (float)(1.0 / sqrt(bc2));
    float d = lr * wd;
    KC_FOR(i, n, adam_one(w + i, g + i, m + i, v + i, b1, b2, eps, step,
                          rsq_bc2, d));
}

/* Keras RMSprop: eps under the square root; (lr g) / sqrt(v + eps). */
static inline void rmsprop_one(float *restrict w, const float *restrict g,
                               float *restrict v, float lr, float rho,
                               float eps, float d)
{
    float gi = *g;
    float vi = rho * *v + (1.0f - rho) * (gi * gi);
    float wi = *w - d * *w;
    *v = vi;
    *w = wi - lr * gi / sqrtf(vi + eps);
}

static inline void rmsprop_mom_one(float *restrict w, const float *restrict g,
                                   float *restrict v, float *restrict mom,
                                   float lr, float rho, float mu, float eps,
                                   float d)
{
    float gi = *g;
    float vi = rho * *v + (1.0f - rho) * (gi * gi);
    float wi = *w - d * *w;
    float mi = mu * *mom + lr * gi / sqrtf(vi + eps);
    *v = vi;
    *mom = mi;
    *w = wi - mi;
}

KC_HOT void kc_rmsprop(size_t n, float *restrict w, const float *restrict g,
                       float *restrict v, float *restrict mom, float lr,
                       float rho, float momentum, float eps, float wd)
{
    float d = lr * wd;
    if (mom)
        KC_FOR(i, n, rmsprop_mom_one(w + i, g + i, v + i, mom + i, lr, rho,
                                     momentum, eps, d));
    else
        KC_FOR(i, n, rmsprop_one(w + i, g + i, v + i, lr, rho, eps, d));
}

/* Keras Adagrad: acc += g^2 ; w -= (lr g) / sqrt(acc + eps). */
static inline void adagrad_one(float *restrict w, const float *restrict g,
                               float *restrict acc, float lr, float eps,
                               float d)
{
    float gi = *g;
    float ai = *acc + gi * gi;
    float wi = *w - d * *w;
    *acc = ai;
    *w = wi - lr * gi / sqrtf(ai + eps);
}

KC_HOT void kc_adagrad(size_t n, float *restrict w, const float *restrict g,
                       float *restrict acc, float lr, float eps, float wd)
{
    float d = lr * wd;
    KC_FOR(i, n, adagrad_one(w + i, g + i, acc + i, lr, eps, d));
}
