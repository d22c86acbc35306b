/* Elementwise activations: ReLU, tanh, sigmoid, forward and backward. */
#include "kernels_cpu.h"
#include "kc_loop.h"

#include <math.h>

/* x < 0 ? 0 : x keeps NaN (as max(x, 0) does in TF), unlike x > 0 ? x : 0. */
static inline float relu(float x) { return x < 0.0f ? 0.0f : x; }

/* The in-place and the out-of-place case each get an alias-free loop, since
 * the caller may pass y == x (restrict would be a lie then). */
static void relu_inplace(size_t n, float *x)
{
    KC_FOR(i, n, x[i] = relu(x[i]));
}

static void relu_copy(size_t n, const float *restrict x, float *restrict y)
{
    KC_FOR(i, n, y[i] = relu(x[i]));
}

KC_HOT void kc_relu_fwd(size_t n, const float *x, float *y)
{
    if (y == x)
        relu_inplace(n, y);
    else
        relu_copy(n, x, y);
}

static void relu_bwd_inplace(size_t n, const float *restrict y, float *restrict d)
{
    KC_FOR(i, n, d[i] = y[i] > 0.0f ? d[i] : 0.0f);
}

static void relu_bwd_copy(size_t n, const float *restrict y,
                          const float *restrict dy, float *restrict dx)
{
    KC_FOR(i, n, float g = dy[i]; dx[i] = y[i] > 0.0f ? g : 0.0f);
}

KC_HOT void kc_relu_bwd(size_t n, const float *y, const float *dy, float *dx)
{
    if (dx == dy)
        relu_bwd_inplace(n, y, dx);
    else
        relu_bwd_copy(n, y, dy, dx);
}

/* tanh and the logistic sigmoid, through libm (the GPU twin uses CUDA's
 * tanhf / expf: equal to within a few ulps, not bitwise). The backward
 * passes read the forward output. */
void kc_tanh_fwd(size_t n, const float *x, float *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = tanhf(x[i]);
}

KC_HOT void kc_tanh_bwd(size_t n, const float *y, const float *dy, float *dx)
{
    for (size_t i = 0; i < n; i++)
        dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

void kc_sigmoid_fwd(size_t n, const float *x, float *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = 1.0f / (1.0f + expf(-x[i]));
}

KC_HOT void kc_sigmoid_bwd(size_t n, const float *y, const float *dy,
                           float *dx)
{
    for (size_t i = 0; i < n; i++)
        dx[i] = dy[i] * y[i] * (1.0f - y[i]);
}
