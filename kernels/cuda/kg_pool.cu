/* Pooling on NHWC float32, 'valid' windows, the twin of kernels/cpu/pool.c.
 * Max: the forward pass keeps each output's argmax (its index in X); the
 * backward pass gathers, per input, the gradients of the windows that chose
 * it. Average: the window's sum over ph*pw; the backward pass gathers, per
 * input, the shares of the windows that hold it. */
#include "kg_internal.h"

/* One thread per output. The window's first element starts the search and
 * a strict '>' keeps the first maximum in row-major window order, as the
 * CPU twin (which also treats NaN this way). */
__global__ void kg_maxpool_fwd_k(size_t total, kops_pool2d_t g,
                                 const float *X, float *Y, int32_t *argmax)
{
    KG_FOR(o, total) {
        kg_nhwc at = kg_nhwc_of(o, g.oh, g.ow, g.c);
        int ch = at.ch, ox = at.x, oy = at.y;
        size_t i = at.i;
        size_t img = i * g.h * g.w * g.c;
        size_t best = img + ((size_t)oy * g.stride_h * g.w +
                             (size_t)ox * g.stride_w) * g.c + ch;
        float m = X[best];
        for (int ky = 0; ky < g.ph; ky++)
            for (int kx = 0; kx < g.pw; kx++) {
                size_t at = img + (((size_t)oy * g.stride_h + ky) * g.w +
                                   (size_t)ox * g.stride_w + kx) * g.c + ch;
                float v = X[at];
                if (v > m) {
                    m = v;
                    best = at;
                }
            }
        Y[o] = m;
        argmax[o] = (int32_t)best;
    }
}

/* One thread per input: the sum of dY over the windows that hold it and
 * chose it (with Y: and whose Y > 0), windows in ascending output order,
 * which is the order in which the CPU twin's scatter adds them (the same
 * bits, no atomics). */
__global__ void kg_maxpool_bwd_k(size_t total, kops_pool2d_t g,
                                 const float *dY, const int32_t *argmax,
                                 const float *Y, float *dX)
{
    KG_FOR(idx, total) {
        kg_nhwc at = kg_nhwc_of(idx, g.h, g.w, g.c);
        int ch = at.ch, x = at.x, y = at.y;
        size_t i = at.i;
        /* Windows oy with oy*stride_h <= y < oy*stride_h + ph. */
        int oy0 = y >= g.ph ? (y - g.ph) / g.stride_h + 1 : 0;
        int oy1 = min(y / g.stride_h, g.oh - 1);
        int ox0 = x >= g.pw ? (x - g.pw) / g.stride_w + 1 : 0;
        int ox1 = min(x / g.stride_w, g.ow - 1);
        float acc = 0.0f;
        for (int oy = oy0; oy <= oy1; oy++)
            for (int ox = ox0; ox <= ox1; ox++) {
                size_t o = ((i * g.oh + oy) * g.ow + ox) * g.c + ch;
                if (argmax[o] == (int32_t)idx && (!Y || Y[o] > 0.0f))
                    acc += dY[o];
            }
        dX[idx] = acc;
    }
}

int kg_maxpool2d_fwd(const kops_pool2d_t *g, const float *X, float *Y,
                     int32_t *argmax, kg_stream_t s)
{
    if (!g)
        return kg__fail(KG_EINVAL, "kg_maxpool2d_fwd: no geometry");
    if (g->n <= 0 || g->c <= 0 || g->oh <= 0 || g->ow <= 0)
        return KG_OK;                           /* no output, as kc */
    size_t total = (size_t)g->n * g->oh * g->ow * g->c;
    kg_maxpool_fwd_k<<<kg__blocks(total), KG_THREADS, 0, s>>>(total, *g, X, Y,
                                                              argmax);
    return kg__launched();
}

static int max_bwd(const char *no_geometry, const kops_pool2d_t *g,
                   const float *dY, const int32_t *argmax, const float *Y,
                   float *dX, kg_stream_t s)
{
    if (!g)
        return kg__fail(KG_EINVAL, no_geometry);
    if (g->n <= 0 || g->h <= 0 || g->w <= 0 || g->c <= 0)
        return KG_OK;                           /* dX is empty */
    size_t total = (size_t)g->n * g->h * g->w * g->c;
    kg_maxpool_bwd_k<<<kg__blocks(total), KG_THREADS, 0, s>>>(total, *g, dY,
                                                              argmax, Y, dX);
    return kg__launched();
}

int kg_maxpool2d_bwd(const kops_pool2d_t *g, const float *dY,
                     const int32_t *argmax, float *dX, kg_stream_t s)
{
    return max_bwd("kg_maxpool2d_bwd: no geometry", g, dY, argmax, NULL, dX, s);
}

int kg_maxpool2d_bwd_relu(const kops_pool2d_t *g, const float *dY,
                          const int32_t *argmax, const float *Y, float *dX,
                          kg_stream_t s)
{
    return max_bwd("kg_maxpool2d_bwd_relu: no geometry", g, dY, argmax, Y, dX, s);
}

/* One thread per output: the taps added in row-major window order from the
 * first, then one IEEE division (-fmad=false, no fast math): the CPU
 * twin's bits. */
__global__ void kg_avgpool_fwd_k(size_t total, kops_pool2d_t g, float count,
                                 const float *X, float *Y)
{
    KG_FOR(o, total) {
        kg_nhwc at = kg_nhwc_of(o, g.oh, g.ow, g.c);
        size_t img = at.i * g.h * g.w * g.c;
        size_t first = img + ((size_t)at.y * g.stride_h * g.w +
                              (size_t)at.x * g.stride_w) * g.c + at.ch;
        float acc = X[first];
        for (int ky = 0; ky < g.ph; ky++)
            for (int kx = ky ? 0 : 1; kx < g.pw; kx++)
                acc += X[first + ((size_t)ky * g.w + kx) * g.c];
        Y[o] = acc / count;
    }
}

/* One thread per input: the shares dY[o] / count of the windows that hold
 * it, in ascending output order from 0 -- the CPU twin's scatter order. */
__global__ void kg_avgpool_bwd_k(size_t total, kops_pool2d_t g, float count,
                                 const float *dY, float *dX)
{
    KG_FOR(idx, total) {
        kg_nhwc at = kg_nhwc_of(idx, g.h, g.w, g.c);
        int x = at.x, y = at.y;
        int oy0 = y >= g.ph ? (y - g.ph) / g.stride_h + 1 : 0;
        int oy1 = min(y / g.stride_h, g.oh - 1);
        int ox0 = x >= g.pw ? (x - g.pw) / g.stride_w + 1 : 0;
        int ox1 = min(x / g.stride_w, g.ow - 1);
        float acc = 0.0f;
        for (int oy = oy0; oy <= oy1; oy++)
            for (int ox = ox0; ox <= ox1; ox++)
                acc += dY[((at.i * g.oh + oy) * g.ow + ox) * g.c + at.ch] /
                       count;
        dX[idx] = acc;
    }
}

int kg_avgpool2d_fwd(const kops_pool2d_t *g, const float *X, float *Y,
                     kg_stream_t s)
{
    if (!g)
        return kg__fail(KG_EINVAL, "kg_avgpool2d_fwd: no geometry");
    if (g->n <= 0 || g->c <= 0 || g->oh <= 0 || g->ow <= 0)
        return KG_OK;                           /* no output, as kc */
    size_t total = (size_t)g->n * g->oh * g->ow * g->c;
    float count = (float)g->ph * (float)g->pw;
    kg_avgpool_fwd_k<<<kg__blocks(total), KG_THREADS, 0, s>>>(total, *g,
                                                              count, X, Y);
    return kg__launched();
}

int kg_avgpool2d_bwd(const kops_pool2d_t *g, const float *dY, float *dX,
                     kg_stream_t s)
{
    if (!g)
        return kg__fail(KG_EINVAL, "kg_avgpool2d_bwd: no geometry");
    if (g->n <= 0 || g->h <= 0 || g->w <= 0 || g->c <= 0)
        return KG_OK;                           /* dX is empty */
    size_t total = (size_t)g->n * g->h * g->w * g->c;
    float count = (float)g->ph * (float)g->pw;
    kg_avgpool_bwd_k<<<kg__blocks(total), KG_THREADS, 0, s>>>(total, *g,
                                                              count, dY, dX);
    return kg__launched();
}
