/* Max pooling on NHWC float32, 'valid' windows; the forward pass records
 * each output's argmax (its index in X) for the backward pass. */
#include "kernels_cpu.h"

#include <string.h>

void kc_maxpool2d_fwd(const kc_pool_geom_t *g, const float *X, float *Y,
                      int32_t *argmax)
{
    size_t c = (size_t)g->c;
    for (int i = 0; i < g->n; i++) {
        size_t img = (size_t)i * g->h * g->w * c;
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++) {
                size_t o = (((size_t)i * g->oh + oy) * g->ow + ox) * c;
                size_t first = img + ((size_t)oy * g->stride_h * g->w +
                                      (size_t)ox * g->stride_w) * c;
                /* The window's first element starts every channel; a strict
                 * '>' keeps the first maximum in row-major window order. */
                for (size_t ch = 0; ch < c; ch++) {
                    Y[o + ch] = X[first + ch];
                    argmax[o + ch] = (int32_t)(first + ch);
                }
                for (int ky = 0; ky < g->ph; ky++)
                    for (int kx = 0; kx < g->pw; kx++) {
                        size_t at = img + (((size_t)oy * g->stride_h + ky) *
                                           g->w + (size_t)ox * g->stride_w +
                                           kx) * c;
                        for (size_t ch = 0; ch < c; ch++)
                            if (X[at + ch] > Y[o + ch]) {
                                Y[o + ch] = X[at + ch];
                                argmax[o + ch] = (int32_t)(at + ch);
                            }
                    }
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
