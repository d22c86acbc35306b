/* Vector helpers for reductions and input scaling. */
#include "kernels_cpu.h"
#include "kc_loop.h"

#include <string.h>

KC_HOT void kc_scale(size_t n, float a, float *x)
{
    KC_FOR(i, n, x[i] *= a);
}

KC_HOT void kc_fill_const(size_t n, float *x, float a)
{
    KC_FOR(i, n, x[i] = a);
}

/* y += a x; x == y is legal, so it gets its own alias-free loop. */
static void axpy_self(size_t n, float a, float *y)
{
    KC_FOR(i, n, y[i] += a * y[i]);
}

static void axpy_two(size_t n, float a, const float *restrict x, float *restrict y)
{
    KC_FOR(i, n, y[i] += a * x[i]);
}

KC_HOT void kc_axpy(size_t n, float a, const float *x, float *y)
{
    if (x == y)
        axpy_self(n, a, y);
    else
        axpy_two(n, a, x, y);
}

/* kc_sum adds up to three sources per pass over dst (fewer trips through
 * memory), always as ((d + a) + b) + c element by element, so the result is
 * the same bits as adding the sources one at a time in order. Each partial
 * sum is assigned to a float, which rounds it even where the FPU keeps
 * excess precision. d never aliases a, b or c (only srcs[0] may be dst). */
static void acc1(size_t n, float *restrict d, const float *restrict a)
{
    KC_FOR(i, n, d[i] += a[i]);
}

static void acc2(size_t n, float *restrict d, const float *restrict a,
                 const float *restrict b)
{
    KC_FOR(i, n, float t = d[i] + a[i]; d[i] = t + b[i]);
}

static void acc3(size_t n, float *restrict d, const float *restrict a,
                 const float *restrict b, const float *restrict c)
{
    KC_FOR(i, n, float t = d[i] + a[i]; t = t + b[i]; d[i] = t + c[i]);
}

/* d = s + a (+ b (+ c)): the first pass when dst is not srcs[0]. */
static void set2(size_t n, float *restrict d, const float *restrict s,
                 const float *restrict a)
{
    KC_FOR(i, n, d[i] = s[i] + a[i]);
}

static void set3(size_t n, float *restrict d, const float *restrict s,
                 const float *restrict a, const float *restrict b)
{
    KC_FOR(i, n, float t = s[i] + a[i]; d[i] = t + b[i]);
}

static void set4(size_t n, float *restrict d, const float *restrict s,
                 const float *restrict a, const float *restrict b,
                 const float *restrict c)
{
    KC_FOR(i, n, float t = s[i] + a[i]; t = t + b[i]; d[i] = t + c[i]);
}

KC_HOT void kc_sum(size_t n, float *dst, const float *const *srcs, int nsrc)
{
    if (nsrc < 1 || n == 0)
        return;
    const float *const *s = srcs + 1;
    int left = nsrc - 1;
    if (dst != srcs[0]) {
        switch (left) {
        case 0:  memcpy(dst, srcs[0], n * sizeof *dst); return;
        case 1:  set2(n, dst, srcs[0], s[0]); return;
        case 2:  set3(n, dst, srcs[0], s[0], s[1]); return;
        default: set4(n, dst, srcs[0], s[0], s[1], s[2]); break;
        }
        s += 3;
        left -= 3;
    }
    for (; left >= 3; s += 3, left -= 3)
        acc3(n, dst, s[0], s[1], s[2]);
    if (left == 2)
        acc2(n, dst, s[0], s[1]);
    else if (left == 1)
        acc1(n, dst, s[0]);
}

/* 16 lanes, each summed in index order: vectorises without reordering
 * any lane's additions, so the result does not depend on the code path. */
KC_HOT double kc_sumsq(size_t n, const float *restrict x)
{
    double lane[KC_BLOCK] = { 0 };
    size_t b = 0;
    for (; b + KC_BLOCK <= n; b += KC_BLOCK)
        for (size_t j = 0; j < KC_BLOCK; j++)
            lane[j] += (double)x[b + j] * (double)x[b + j];
    for (size_t j = 0; b + j < n; j++)
        lane[j] += (double)x[b + j] * (double)x[b + j];
    double s = 0.0;
    for (size_t j = 0; j < KC_BLOCK; j++)
        s += lane[j];
    return s;
}

KC_HOT void kc_u8_to_f32(size_t n, const uint8_t *restrict src, float scale,
                  float *restrict dst)
{
    KC_FOR(i, n, dst[i] = (float)src[i] * scale);
}

KC_HOT void kc_channel_copy(size_t rows, int width, const float *x, int x_c,
                            int x_off, float *y, int y_c, int y_off)
{
    if (rows == 0 || width <= 0)
        return;
    for (size_t r = 0; r < rows; r++) {
        const float *src = x + r * (size_t)x_c + (size_t)x_off;
        float *dst = y + r * (size_t)y_c + (size_t)y_off;
        memcpy(dst, src, (size_t)width * sizeof *dst);
    }
}
