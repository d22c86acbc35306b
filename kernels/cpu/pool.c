/* Max pooling on NHWC float32, 'valid' windows; the forward pass records
 * each output's argmax (its index in X) for the backward pass. */
#include "kernels_cpu.h"
#include "kc_loop.h"

#include <string.h>

/* One output position over its c channels: the max of the window's taps
 * and the index in X of the first maximum (row-major window order). A
 * function of its own, not inlined, so that `restrict` holds and the
 * channel loops vectorise (branch-free selects). */
KC_HOT __attribute__((noinline)) static void
pool_window(size_t c, const float *restrict x, size_t first, size_t row,
            int ph, int pw, float *restrict y, int32_t *restrict arg)
{
    const float *restrict x0 = x + first;
    KC_FOR(ch, c, {
        y[ch] = x0[ch];
        arg[ch] = (int32_t)(first + ch);
    });
    for (int ky = 0; ky < ph; ky++)
        for (int kx = ky ? 0 : 1; kx < pw; kx++) {
            size_t at = first + (size_t)ky * row + (size_t)kx * c;
            const float *restrict xt = x + at;
            KC_FOR(ch, c, {
                int better = xt[ch] > y[ch];
                y[ch] = better ? xt[ch] : y[ch];
                arg[ch] = better ? (int32_t)(at + ch) : arg[ch];
            });
        }
}

void kc_maxpool2d_fwd(const kc_pool_geom_t *g, const float *X,
                             float *Y, int32_t *argmax)
{
    size_t c = (size_t)g->c, row = (size_t)g->w * c;
    for (int i = 0; i < g->n; i++) {
        size_t img = (size_t)i * g->h * row;
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++) {
                size_t o = (((size_t)i * g->oh + oy) * g->ow + ox) * c;
                size_t first = img + (size_t)oy * g->stride_h * row +
                               (size_t)ox * g->stride_w * c;
                pool_window(c, X, first, row, g->ph, g->pw, Y + o,
                            argmax + o);
            }
    }
}

void kc_maxpool2d_bwd(const kc_pool_geom_t *g, const float *dY,
                      const int32_t *argmax, float *dX)
{
    size_t in = (size_t)g->n * g->h * g->w * g->c;
    size_t out = (size_t)g->n * g->oh * g->ow * g->c;
    memset(dX, 0, in * sizeof *dX);
    for (size_t o = 0; o < out; o++)
        dX[argmax[o]] += dY[o];
}
