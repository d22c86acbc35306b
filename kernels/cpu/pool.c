/* Max pooling on NHWC float32, 'valid' windows; the forward pass records
 * each output's argmax (its index in X) for the backward pass. */
#include "kernels_cpu.h"
#include "kc_loop.h"

#include <string.h>

/* One output position: the max of its window and the index in X of the
 * first maximum (row-major window order). While the taps run, arg holds the
 * winning tap's offset from the window's first element (a constant per
 * tap), chosen branch-free on 32-bit lanes with a strict '>'; the indices
 * are added once at the end. A function of its own, not inlined, so that
 * `restrict` holds and the channel loops vectorise. */
KC_HOT __attribute__((noinline)) static void
pool_window(size_t c, const float *restrict x0, int32_t first, size_t row,
            int ph, int pw, float *restrict y, int32_t *restrict arg)
{
    KC_FOR(ch, c, {
        y[ch] = x0[ch];
        arg[ch] = 0;
    });
    for (int ky = 0; ky < ph; ky++)
        for (int kx = ky ? 0 : 1; kx < pw; kx++) {
            size_t off = (size_t)ky * row + (size_t)kx * c;
            const float *restrict xt = x0 + off;
            int32_t off32 = (int32_t)off;
            KC_FOR(ch, c, {
                float v = xt[ch];
                float m = y[ch];
                int32_t win = -(int32_t)(v > m);
                y[ch] = v > m ? v : m;
                arg[ch] = (off32 & win) | (arg[ch] & ~win);
            });
        }
    KC_FOR(ch, c, arg[ch] += first + (int32_t)ch);
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
                pool_window(c, X + first, (int32_t)first, row, g->ph,
                            g->pw, Y + o, argmax + o);
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
