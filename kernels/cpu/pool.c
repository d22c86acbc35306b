/* Pooling on NHWC float32, 'valid' windows. Max: the forward pass records
 * each output's argmax (its index in X) for the backward pass. Average: the
 * window's sum in row-major tap order over ph*pw, and back. */
#include "conv_direct.h"
#include "kernels_cpu.h"
#include "kc_loop.h"

#include <string.h>

#ifdef KC_CONV_X86
static void max_rows_512(const kops_pool2d_t *g, const float *X, float *Y,
                         int32_t *argmax, int i);
static void max_bwd_512(const kops_pool2d_t *g, const float *dY,
                        const int32_t *argmax, const float *Y, float *call,
                        size_t first, size_t i);
#endif

/* Max pooling on AVX-512 (the forward; the backward where the windows
 * tile the image) where the direct convolutions run on it, and so follows
 * kc_conv2d_force_path (tests hold both paths to the same bits), for 16k
 * channels and windows of up to MAX_TAPS. */
#define MAX_TAPS 64
static int max_512(const kops_pool2d_t *g)
{
#ifdef KC_CONV_X86
    return g->c % 16 == 0 && g->ph * g->pw <= MAX_TAPS &&
           kc__direct_isa() == &kc_conv_avx512;
#else
    (void)g;
    return 0;
#endif
}

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

void kc_maxpool2d_fwd(const kops_pool2d_t *g, const float *X,
                             float *Y, int32_t *argmax)
{
    size_t c = (size_t)g->c, row = (size_t)g->w * c;
    for (int i = 0; i < g->n; i++) {
#ifdef KC_CONV_X86
        if (max_512(g)) {
            max_rows_512(g, X, Y, argmax, i);
            continue;
        }
#endif
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

/* Images [i0, i1) of dX from dY through the argmaxes, which count from
 * the first image of their forward call (`rows` images a call); with Y
 * (maxpool2d_bwd_relu), only the outputs with Y > 0. Image by image: an
 * image's windows read only that image, so its dX is zeroed and filled
 * while it is in cache (the same adds in the same order as over the whole
 * batch at once). */
static void max_bwd(const kops_pool2d_t *g, int rows, const float *dY,
                    const int32_t *argmax, const float *Y, float *dX,
                    size_t i0, size_t i1)
{
    size_t in = (size_t)g->h * g->w * g->c;
    size_t out = (size_t)g->oh * g->ow * g->c;
    /* Windows that tile the image: every input is in one window or none */
    int tiles = g->stride_h == g->ph && g->stride_w == g->pw && max_512(g);
    for (size_t i = i0; i < i1; i++) {
        size_t call0 = i / (size_t)rows * (size_t)rows;
        float *call = dX + call0 * in;
#ifdef KC_CONV_X86
        if (tiles) {
            max_bwd_512(g, dY, argmax, Y, call, (i - call0) * in, i);
            continue;
        }
#else
        (void)tiles;
#endif
        memset(dX + i * in, 0, in * sizeof *dX);
        if (Y) {
            /* +0 added where Y <= 0, chosen by a mask of bits: a branch on
             * a sign that is a coin toss costs more than the scatter */
            for (size_t o = i * out; o < (i + 1) * out; o++) {
                uint32_t bits;
                float d = dY[o];
                memcpy(&bits, &d, sizeof bits);
                bits &= -(uint32_t)(Y[o] > 0.0f);
                memcpy(&d, &bits, sizeof d);
                call[argmax[o]] += d;
            }
        } else {
            for (size_t o = i * out; o < (i + 1) * out; o++)
                call[argmax[o]] += dY[o];
        }
    }
}

static size_t images(const kops_pool2d_t *g)
{
    return (size_t)(g->n > 0 ? g->n : 0);
}

void kc_maxpool2d_bwd(const kops_pool2d_t *g, const float *dY,
                      const int32_t *argmax, float *dX)
{
    max_bwd(g, g->n > 0 ? g->n : 1, dY, argmax, NULL, dX, 0, images(g));
}

void kc_maxpool2d_bwd_relu(const kops_pool2d_t *g, const float *dY,
                           const int32_t *argmax, const float *Y, float *dX)
{
    max_bwd(g, g->n > 0 ? g->n : 1, dY, argmax, Y, dX, 0, images(g));
}

void kc__maxpool_bwd_rows(const kc_pool_src_t *s, int i0, int i1, float *dY)
{
    max_bwd(s->g, s->rows, s->dP, s->argmax, s->P, dY, (size_t)i0,
            (size_t)i1);
}

/* One output position of average pooling: the taps added in row-major
 * window order from the first, then one division (kg_pool.cu adds and
 * divides the same way: the same bits). Not inlined, as pool_window. */
KC_HOT __attribute__((noinline)) static void
avg_window(size_t c, const float *restrict x0, size_t row, int ph, int pw,
           float count, float *restrict y)
{
    KC_FOR(ch, c, y[ch] = x0[ch]);
    for (int ky = 0; ky < ph; ky++)
        for (int kx = ky ? 0 : 1; kx < pw; kx++) {
            const float *restrict xt = x0 + (size_t)ky * row + (size_t)kx * c;
            KC_FOR(ch, c, y[ch] += xt[ch]);
        }
    KC_FOR(ch, c, y[ch] = y[ch] / count);
}

void kc_avgpool2d_fwd(const kops_pool2d_t *g, const float *X, float *Y)
{
    size_t c = (size_t)g->c, row = (size_t)g->w * c;
    float count = (float)g->ph * (float)g->pw;
    for (int i = 0; i < g->n; i++) {
        size_t img = (size_t)i * g->h * row;
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++) {
                size_t o = (((size_t)i * g->oh + oy) * g->ow + ox) * c;
                size_t first = img + (size_t)oy * g->stride_h * row +
                               (size_t)ox * g->stride_w * c;
                avg_window(c, X + first, row, g->ph, g->pw, count, Y + o);
            }
    }
}

/* One output's share, dy / count, added to each tap of its window (the
 * quotient is the same bits at every tap). */
KC_HOT __attribute__((noinline)) static void
avg_window_bwd(size_t c, const float *restrict dy, size_t row, int ph,
               int pw, float count, float *restrict dx0)
{
    for (int ky = 0; ky < ph; ky++)
        for (int kx = 0; kx < pw; kx++) {
            float *restrict dxt = dx0 + (size_t)ky * row + (size_t)kx * c;
            KC_FOR(ch, c, dxt[ch] += dy[ch] / count);
        }
}

/* Outputs in ascending order, so that each input sums its windows' shares
 * in output order, as the CUDA twin's gather does. */
void kc_avgpool2d_bwd(const kops_pool2d_t *g, const float *dY, float *dX)
{
    size_t c = (size_t)g->c, row = (size_t)g->w * c;
    size_t in = (size_t)g->n * g->h * row;
    float count = (float)g->ph * (float)g->pw;
    if (g->n <= 0 || g->h <= 0 || g->w <= 0 || g->c <= 0)
        return;
    memset(dX, 0, in * sizeof *dX);
    for (int i = 0; i < g->n; i++) {
        size_t img = (size_t)i * g->h * row;
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++) {
                size_t o = (((size_t)i * g->oh + oy) * g->ow + ox) * c;
                size_t first = img + (size_t)oy * g->stride_h * row +
                               (size_t)ox * g->stride_w * c;
                avg_window_bwd(c, dY + o, row, g->ph, g->pw, count,
                               dX + first);
            }
    }
}

#ifdef KC_CONV_X86
#include <immintrin.h>

/* Image i's outputs as pool_window computes them, 16 channels to a
 * register: the window's first element, then each later tap taken where
 * it is strictly greater (_CMP_GT_OQ: never a NaN, and a NaN first element
 * stays), its offset kept under the same mask. */
__attribute__((target("avx512f"))) static void
max_rows_512(const kops_pool2d_t *g, const float *X, float *Y,
             int32_t *argmax, int i)
{
    size_t c = (size_t)g->c, row = (size_t)g->w * c;
    size_t img = (size_t)i * g->h * row;
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                           11, 12, 13, 14, 15);
    /* The taps after the first, flat: one short loop of a constant count */
    size_t off[MAX_TAPS];
    int taps = 0;
    for (int ky = 0; ky < g->ph; ky++)
        for (int kx = ky ? 0 : 1; kx < g->pw; kx++)
            off[taps++] = (size_t)ky * row + (size_t)kx * c;
    for (int oy = 0; oy < g->oh; oy++)
        for (int ox = 0; ox < g->ow; ox++) {
            size_t o = (((size_t)i * g->oh + oy) * g->ow + ox) * c;
            size_t first = img + (size_t)oy * g->stride_h * row +
                           (size_t)ox * g->stride_w * c;
            const float *x0 = X + first;
            for (size_t ch = 0; ch < c; ch += 16) {
                __m512 m = _mm512_loadu_ps(x0 + ch);
                __m512i a = _mm512_setzero_si512();
                for (int t = 0; t < taps; t++) {
                    __m512 v = _mm512_loadu_ps(x0 + off[t] + ch);
                    __mmask16 k = _mm512_cmp_ps_mask(v, m, _CMP_GT_OQ);
                    m = _mm512_mask_mov_ps(m, k, v);
                    a = _mm512_mask_mov_epi32(
                        a, k, _mm512_set1_epi32((int32_t)off[t]));
                }
                _mm512_storeu_ps(Y + o + ch, m);
                a = _mm512_add_epi32(
                    a, _mm512_add_epi32(iota, _mm512_set1_epi32(
                                                  (int32_t)(first + ch))));
                _mm512_storeu_si512(argmax + o + ch, a);
            }
        }
}


/* Image i's dX where the windows tile it, `first` its first element in
 * call (its forward call's dX): each input written once, no zeroing pass
 * -- a window's taps take dY + 0 (the scatter's 0 + dY: +0 for -0, a NaN
 * quieted; with Y, +0 where Y <= 0) where the window chose them, else 0;
 * the rows and columns past the last window 0. */
__attribute__((target("avx512f"))) static void
max_bwd_512(const kops_pool2d_t *g, const float *dY, const int32_t *argmax,
            const float *Y, float *call, size_t first, size_t i)
{
    size_t c = (size_t)g->c, row = (size_t)g->w * c;
    size_t wide = (size_t)g->ow * g->pw * c;        /* columns in windows */
    const __m512 zero = _mm512_setzero_ps();
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                           11, 12, 13, 14, 15);
    for (int oy = 0; oy < g->oh; oy++) {
        size_t y0 = first + (size_t)oy * g->ph * row;
        for (int ox = 0; ox < g->ow; ox++) {
            size_t o = ((i * g->oh + oy) * g->ow + ox) * c;
            size_t at = y0 + (size_t)ox * g->pw * c;
            for (size_t ch = 0; ch < c; ch += 16) {
                __m512 d = _mm512_loadu_ps(dY + o + ch);
                if (Y)
                    d = _mm512_maskz_mov_ps(
                        _mm512_cmp_ps_mask(_mm512_loadu_ps(Y + o + ch), zero,
                                           _CMP_GT_OQ), d);
                d = _mm512_add_ps(d, zero);
                /* the chosen tap's offset in the window, per channel */
                __m512i t = _mm512_sub_epi32(
                    _mm512_loadu_si512(argmax + o + ch),
                    _mm512_add_epi32(iota,
                                     _mm512_set1_epi32((int32_t)(at + ch))));
                for (int ky = 0; ky < g->ph; ky++)
                    for (int kx = 0; kx < g->pw; kx++) {
                        size_t off = (size_t)ky * row + (size_t)kx * c;
                        __mmask16 k = _mm512_cmpeq_epi32_mask(
                            t, _mm512_set1_epi32((int32_t)off));
                        _mm512_storeu_ps(call + at + off + ch,
                                         _mm512_maskz_mov_ps(k, d));
                    }
            }
        }
        if (wide < row)
            for (int ky = 0; ky < g->ph; ky++)
                memset(call + y0 + (size_t)ky * row + wide, 0,
                       (row - wide) * sizeof *call);
    }
    size_t tall = (size_t)g->oh * g->ph;
    if (tall < (size_t)g->h)
        memset(call + first + tall * row, 0,
               ((size_t)g->h - tall) * row * sizeof *call);
}
#endif
