/* Elementwise activations: ReLU, tanh, sigmoid, leaky ReLU, GELU, forward
 * and backward; softmax over the last axis. */
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

/* ---- the activation layers' own kernels (kops_list.h) ------------------ */

/* Leaky ReLU, Keras's LeakyReLU: x > 0 ? x : alpha * x, which keeps NaN
 * (alpha * NaN); one multiply, so the GPU twin gives the same bits. */
static void leaky_inplace(size_t n, float *x, float alpha)
{
    KC_FOR(i, n, float v = x[i]; x[i] = v > 0.0f ? v : alpha * v);
}

static void leaky_copy(size_t n, const float *restrict x, float *restrict y,
                       float alpha)
{
    KC_FOR(i, n, float v = x[i]; y[i] = v > 0.0f ? v : alpha * v);
}

KC_HOT void kc_leaky_relu_fwd(size_t n, const float *x, float *y, float alpha)
{
    if (y == x)
        leaky_inplace(n, y, alpha);
    else
        leaky_copy(n, x, y, alpha);
}

static void leaky_bwd_inplace(size_t n, const float *restrict x,
                              float *restrict d, float alpha)
{
    KC_FOR(i, n, float g = d[i]; d[i] = x[i] > 0.0f ? g : alpha * g);
}

static void leaky_bwd_copy(size_t n, const float *restrict x,
                           const float *restrict dy, float *restrict dx,
                           float alpha)
{
    KC_FOR(i, n, float g = dy[i]; dx[i] = x[i] > 0.0f ? g : alpha * g);
}

KC_HOT void kc_leaky_relu_bwd(size_t n, const float *x, const float *dy,
                              float *dx, float alpha)
{
    if (dx == dy)
        leaky_bwd_inplace(n, x, dx, alpha);
    else
        leaky_bwd_copy(n, x, dy, dx, alpha);
}

/* GELU, exact: x * Phi(x) with Phi(x) = erfc(-x / sqrt 2) / 2, which keeps
 * its relative accuracy where Phi is tiny (1 + erf(x / sqrt 2) would
 * cancel to 0 below x = -5.5). A product with a Phi or a density that
 * underflowed to 0 is 0, not inf * 0 (x = -inf gives 0, as its limit);
 * NaN stays NaN. kg_elementwise.cu computes the same expressions with
 * CUDA's erfcf / expf. */
#define KC_SQRT1_2       0.70710678118654752440f
#define KC_INV_SQRT_2PI  0.39894228040143267794f

void kc_gelu_fwd(size_t n, const float *x, float *y)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        float cdf = 0.5f * erfcf(-v * KC_SQRT1_2);
        y[i] = cdf == 0.0f ? 0.0f : v * cdf;
    }
}

void kc_gelu_bwd(size_t n, const float *x, const float *dy, float *dx)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        float cdf = 0.5f * erfcf(-v * KC_SQRT1_2);
        float pdf = expf(-0.5f * v * v) * KC_INV_SQRT_2PI;
        float slope = cdf + (pdf == 0.0f ? 0.0f : v * pdf);
        dx[i] = dy[i] * slope;
    }
}

/* Softmax over each row of x[m][c]: shifted by the row's max (the first
 * element starts it, a strict '>' keeps it: a NaN there makes the row NaN,
 * as a NaN anywhere else does through the sum), exp, the sum in index
 * order, one division per element. y may be x: a row is read whole before
 * it is written. */
void kc_softmax_fwd(int m, int c, const float *x, float *y)
{
    if (m <= 0 || c <= 0)
        return;
    for (int i = 0; i < m; i++) {
        const float *xr = x + (size_t)i * c;
        float *yr = y + (size_t)i * c;
        float mx = xr[0];
        for (int j = 1; j < c; j++)
            mx = xr[j] > mx ? xr[j] : mx;
        float sum = 0.0f;
        for (int j = 0; j < c; j++) {
            float e = expf(xr[j] - mx);
            yr[j] = e;
            sum += e;
        }
        for (int j = 0; j < c; j++)
            yr[j] = yr[j] / sum;
    }
}

/* dx = y * (dy - <dy, y>) per row, the dot product in index order; dx may
 * be dy (the dot product is taken first). */
void kc_softmax_bwd(int m, int c, const float *y, const float *dy, float *dx)
{
    if (m <= 0 || c <= 0)
        return;
    for (int i = 0; i < m; i++) {
        const float *yr = y + (size_t)i * c, *gr = dy + (size_t)i * c;
        float *dr = dx + (size_t)i * c;
        float dot = 0.0f;
        for (int j = 0; j < c; j++)
            dot += gr[j] * yr[j];
        for (int j = 0; j < c; j++)
            dr[j] = yr[j] * (gr[j] - dot);
    }
}
