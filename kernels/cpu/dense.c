/* Dense layer forward/backward on row-major float32.
 *
 * Where the direct convolution has vector kernels (AVX-512 or AVX2 with
 * FMA: kc__direct_isa), Y = X W + b, dW = X^T dY and (for up to 512
 * outputs on AVX-512, 1024 on AVX2) dX = dY W^T run on its micro-kernel
 * (a GEMM is a 1x1 convolution of one row): each element one fixed chain
 * of fmas -- Y from b[j] over i = 0..k-1, dX from +0 over j = 0..n-1, dW
 * from +0 over the rows in order -- so a row of Y or dX depends only on
 * its own row of X or dY (a sample's output is the same bits whatever
 * batch it is in) and the AVX-512 and AVX2 kernels give the same bits.
 * The backward's operands are laid out in stack panels first (dx_direct,
 * dw_direct: read in place, their strides fall on few cache sets); with
 * them the seeds' CNN's 128 x 36864 x 64 layer's backward takes 3 ms less
 * a step than OpenBLAS's (about 8 ms each for dW and dX there, with its
 * own packing and a separate pass that zeroes C). The other dX and every
 * GEMM elsewhere go through CBLAS. */
#include "conv_direct.h"
#include "kernels_cpu.h"
#include "kc_loop.h"

#include <cblas.h>
#include <string.h>

static void zero(size_t n, float *x)
{
    if (n)
        memset(x, 0, n * sizeof *x);
}

void kc_bias_add(int m, int n, const float *restrict b, float *restrict Y)
{
    if (m <= 0 || n <= 0)
        return;
    size_t nn = (size_t)n;
    for (size_t r = 0; r < (size_t)m; r++) {
        float *restrict y = Y + r * nn;
        KC_FOR(j, nn, y[j] += b[j]);
    }
}

/* Column sums in double, rounded to float once. A bias's gradient sums
 * every row: conv2d's n*oh*ow positions, 18 432 rows for a batch of 32
 * 24x24 planes, whose float running sum drifted by 3e-5 relative between
 * a batch and its halves on two replicas (global_avgpool2d makes every
 * position's share alike); in double the result is float's rounding of
 * the sum, whatever the rows' count. Rows in order, columns in chunks, so
 * reads stay row-major; kg_bias_grad adds in the same order in double:
 * the same bits. */
enum { KC_BIAS_CHUNK = 256 };

KC_HOT void kc_bias_grad(int m, int n, const float *restrict dY,
                         float *restrict db)
{
    if (n <= 0)
        return;
    size_t nn = (size_t)n, mm = (size_t)(m > 0 ? m : 0);
    double acc[KC_BIAS_CHUNK];
    for (size_t j0 = 0; j0 < nn; j0 += KC_BIAS_CHUNK) {
        size_t w = nn - j0 < KC_BIAS_CHUNK ? nn - j0 : KC_BIAS_CHUNK;
        for (size_t j = 0; j < w; j++)
            acc[j] = 0.0;
        for (size_t r = 0; r < mm; r++) {
            const float *restrict d = dY + r * nn + j0;
            KC_FOR(j, w, acc[j] += (double)d[j]);
        }
        for (size_t j = 0; j < w; j++)
            db[j0 + j] = (float)acc[j];
    }
}

/* One row: d masked by y as relu's backward (y NULL: as it is), then
 * added into acc -- two loops over the row while it is in L1 (one loop
 * does not vectorise), on restrict parameters (locals' restrict does not
 * free gcc's vectoriser). */
static inline void relu_row_sum(size_t w, const float *restrict y,
                                float *restrict d, double *restrict acc)
{
    if (y)
        KC_FOR(j, w, d[j] = y[j] > 0.0f ? d[j] : 0.0f);
    KC_FOR(j, w, acc[j] += (double)d[j]);
}

#ifdef KC_CONV_X86
static void relu_sum_512(size_t m, size_t w, size_t ld, const float *y,
                         float *dy, double *acc);
#endif

/* Rows [0, m) of w columns, rows ld floats apart: dy masked by y (unless
 * NULL), then added into acc[w] in double, the rows in order (the same
 * sums however the columns are cut, whatever the vectors). */
KC_HOT static void relu_sum_rows(size_t m, size_t w, size_t ld,
                                 const float *y, float *dy, double *acc)
{
#ifdef KC_CONV_X86
    if (__builtin_cpu_supports("avx512f")) {
        relu_sum_512(m, w, ld, y, dy, acc);
        return;
    }
#endif
    for (size_t j0 = 0; j0 < w; j0 += KC_BIAS_CHUNK) {
        size_t cw = w - j0 < KC_BIAS_CHUNK ? w - j0 : KC_BIAS_CHUNK;
        for (size_t r = 0; r < m; r++)
            relu_row_sum(cw, y ? y + r * ld + j0 : NULL, dy + r * ld + j0,
                         acc + j0);
    }
}

void kc_relu_bias_grad(int m, int n, const float *y, float *dy, float *db)
{
    if (n <= 0)
        return;
    size_t nn = (size_t)n, mm = (size_t)(m > 0 ? m : 0);
    if (!db) {
        kc_relu_bwd(mm * nn, y, dy, dy);
        return;
    }
    /* kc_bias_grad's sums, each value masked as relu_bwd masks it first */
    double acc[KC_BIAS_CHUNK];
    for (size_t j0 = 0; j0 < nn; j0 += KC_BIAS_CHUNK) {
        size_t w = nn - j0 < KC_BIAS_CHUNK ? nn - j0 : KC_BIAS_CHUNK;
        for (size_t j = 0; j < w; j++)
            acc[j] = 0.0;
        relu_sum_rows(mm, w, nn, y + j0, dy + j0, acc);
        for (size_t j = 0; j < w; j++)
            db[j0 + j] = (float)acc[j];
    }
}

void kc__relu_bias_rows(size_t m, size_t n, const float *y, float *dy,
                        double *acc)
{
    if (!acc) {
        if (y)
            kc_relu_bwd(m * n, y, dy, dy);
    } else
        relu_sum_rows(m, n, n, y, dy, acc);
}

/* Steps of a chain per pass over a block of outputs: W's slice (KB rows
 * x 32 lanes, 64 KiB) stays in L2 while every block of rows reads it
 * (the forward of 128 x 36864 x 64, the seeds' CNN's dense layer: 148
 * GFLOP/s at 512, 126-145 at 128, 256 or 4096, OpenBLAS SkylakeX 107-114
 * on the same Xeon core). */
#define KB 512
/* Floats of the stack panels that the backward's operands are laid out in
 * (64 KiB, as the direct conv's transposes). */
#define PANEL 16384

#ifdef KC_CONV_X86
#include <immintrin.h>

/* kc__tr16 (conv_direct.h): the scalar loop took 2.8 % of the seeds' CNN's
 * step in dx_direct alone. nt: non-temporal stores (dst and dp aligned to
 * 16 floats). */
static inline __attribute__((always_inline, target("avx512f"))) void
tr16(const float *src, size_t sp, float *dst, size_t dp, const int nt)
{
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++)
        r[i] = _mm512_loadu_ps(src + (size_t)i * sp);
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int h = 0; h < 16; h += 8)
        for (int i = 0; i < 4; i++) {
            t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + 4 + i], 0x88);
            t[h + 4 + i] = _mm512_shuffle_f32x4(r[h + i], r[h + 4 + i], 0xDD);
        }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
        r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xDD);
    }
    for (int i = 0; i < 16; i++)
        if (nt)
            _mm512_stream_ps(dst + (size_t)i * dp, r[i]);
        else
            _mm512_storeu_ps(dst + (size_t)i * dp, r[i]);
}

__attribute__((target("avx512f"))) void kc__tr16(const float *src, size_t sp,
                                                 float *dst, size_t dp)
{
    tr16(src, sp, dst, dp, 0);
}

__attribute__((target("avx512f"))) static void
tr16_nt(const float *src, size_t sp, float *dst, size_t dp)
{
    tr16(src, sp, dst, dp, 1);
}

/* relu_sum_rows on AVX-512: up to 64 columns at a time, their sums in up
 * to eight registers down all the rows (the portable loop's went through
 * memory at every row: the seeds' conv2's mask and db took 9 us an image
 * with its data in cache). (double)d added in row order: the same bits.
 * A chunk takes only the vectors its columns fill (NV of 16 floats, 2 NV
 * accumulators of 8 doubles): the conversions and adds, not the loads,
 * bound the loop, and a first layer's 32 filters in the 4 vectors of 64
 * columns took 12 cycles a row, half of them on zeros.
 * Its data come from memory (a layer's output and its gradient, written
 * long before or streamed out by the next layer's dX), in a short stream
 * per group of images that the hardware prefetchers did not run ahead
 * of: the rows RS_AHEAD on are touched into L1 first (the seeds' conv2,
 * 16 cold groups of 2 images: 0.74 -> 0.26 ms, one core; 4 to 32 rows
 * ahead within 5 % of each other). */
#define RS_AHEAD 8
static inline __attribute__((always_inline, target("avx512f"))) void
relu_sum_nv(const int NV, size_t m, size_t cw, size_t ld, const float *y,
            float *dy, double *acc)
{
    const __m512 zero = _mm512_setzero_ps();
    __mmask16 lm[4];
    __mmask8 am[8];
    __m512d a[8];
    for (int v = 0; v < NV; v++) {
        size_t left = cw > (size_t)v * 16 ? cw - (size_t)v * 16 : 0;
        lm[v] = (__mmask16)(left >= 16 ? 0xffffu : (1u << left) - 1u);
    }
    for (int h = 0; h < 2 * NV; h++) {
        size_t left = cw > (size_t)h * 8 ? cw - (size_t)h * 8 : 0;
        am[h] = (__mmask8)(left >= 8 ? 0xffu : (1u << left) - 1u);
        a[h] = _mm512_maskz_loadu_pd(am[h], acc + (size_t)h * 8);
    }
    for (size_t r = 0; r < m; r++) {
        const float *yr = y ? y + r * ld : NULL;
        float *dr = dy + r * ld;
        if (r + RS_AHEAD < m) /* the rows RS_AHEAD on, into L1 */
            for (int v = 0; v < NV; v++) {
                _mm_prefetch((const char *)(dr + RS_AHEAD * ld + v * 16),
                             _MM_HINT_T0);
                if (y)
                    _mm_prefetch((const char *)(yr + RS_AHEAD * ld + v * 16),
                                 _MM_HINT_T0);
            }
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) {
            __m512 dv = _mm512_maskz_loadu_ps(lm[v], dr + v * 16);
            if (y) {
                __m512 yv = _mm512_maskz_loadu_ps(lm[v], yr + v * 16);
                dv = _mm512_maskz_mov_ps(
                    _mm512_cmp_ps_mask(yv, zero, _CMP_GT_OQ), dv);
                _mm512_mask_storeu_ps(dr + v * 16, lm[v], dv);
            }
            __m256 lo = _mm512_castps512_ps256(dv);
            __m256 hi = _mm256_castpd_ps(
                _mm512_extractf64x4_pd(_mm512_castps_pd(dv), 1));
            a[2 * v] = _mm512_add_pd(a[2 * v], _mm512_cvtps_pd(lo));
            a[2 * v + 1] = _mm512_add_pd(a[2 * v + 1], _mm512_cvtps_pd(hi));
        }
    }
    for (int h = 0; h < 2 * NV; h++)
        _mm512_mask_storeu_pd(acc + (size_t)h * 8, am[h], a[h]);
}

__attribute__((target("avx512f"))) static void
relu_sum_512(size_t m, size_t w, size_t ld, const float *y, float *dy,
             double *acc)
{
    for (size_t j0 = 0; j0 < w; j0 += 64) {
        size_t cw = w - j0 < 64 ? w - j0 : 64;
        const float *yc = y ? y + j0 : NULL;
        if (cw > 32)
            relu_sum_nv(4, m, cw, ld, yc, dy + j0, acc + j0);
        else if (cw > 16)
            relu_sum_nv(2, m, cw, ld, yc, dy + j0, acc + j0);
        else
            relu_sum_nv(1, m, cw, ld, yc, dy + j0, acc + j0);
    }
}
#endif

/* wt[l / ch][j][l % ch] = W[l][j] for l < w, j < n (W's rows n apart) */
static void panel_wt(const kc_conv_isa_t *isa, const float *W, size_t w,
                     size_t n, size_t ch, float *wt)
{
    size_t l0 = 0, j16 = 0;
#ifdef KC_CONV_X86
    if (isa == &kc_conv_avx512 && ch % 16 == 0) {
        j16 = n / 16 * 16;
        for (; l0 + 16 <= w; l0 += 16)
            for (size_t j = 0; j < j16; j += 16)
                kc__tr16(W + l0 * n + j, n, wt + l0 / ch * ch * n + j * ch + l0 % ch,
                     ch);
    }
#else
    (void)isa;
#endif
    for (size_t l = 0; l < w; l++) {
        const float *row = W + l * n;
        float *d = wt + l / ch * ch * n + l % ch;
        for (size_t j = l < l0 ? j16 : 0; j < n; j++)
            d[j * ch] = row[j];
    }
}

/* dX[m x k] = dY[m x n] W^T, pl columns of dX at a time from the panel
 * wt[q][j][l] = W[i0 + q*ch + l][j]: each chunk of ch lanes contiguous
 * (in one wide panel a chunk's rows would fall on a few of L1's sets).
 * The chains from +0 over j = 0..n-1, in one pass. */
static void dx_direct(const kc_conv_isa_t *isa, int m, int k, int n,
                      const float *dY, const float *W, float *dX)
{
    float wt[PANEL];
    size_t ch = (size_t)(isa->nvmax * isa->vw), nn = (size_t)n;
    int pl = (int)(PANEL / nn / ch * ch), rows = 2 * isa->pmax[isa->nvmax];
    kc_uk_t u = { .nrow = 1, .nseg = 1, .bp = n, .br = 1, .vr = (ptrdiff_t)ch,
                  .vch = (ptrdiff_t)(ch * nn), .op = k, .R = n,
                  .init = KC_UK_ZERO, .fin = KC_UK_STORE };
    for (int i0 = 0; i0 < k; i0 += pl) {
        int w = k - i0 < pl ? k - i0 : pl;
        panel_wt(isa, W + (size_t)i0 * nn, (size_t)w, nn, ch, wt);
        /* a few blocks of rows through every chunk: dX's rows, a multiple
         * of 4 KiB apart, are written a panel-wide run at a time */
        for (int r0 = 0; r0 < m; r0 += rows) {
            int h = m - r0 < rows ? m - r0 : rows;
            kc__conv_blocks(isa, &u, h, w, dY + (size_t)r0 * nn, wt,
                            dX + (size_t)r0 * (size_t)k + i0);
        }
    }
}

#ifdef KC_CONV_X86
/* dX[m x k] = dY[m x n] W^T with dY's rows as the vector lanes, for few
 * rows: the broadcasts read W in place (a block's P rows of W, n floats
 * each, stay in L1 through its n steps), dY^T (n x m) is laid out once,
 * and each panel of dX^T (pw columns of dX x m rows) goes to dX 16 x 16 at
 * a time through kc__tr16. dx_direct lays out all of W (k x n) a call,
 * as much work as the product's own at 32 rows; this lays out m x (n +
 * k) floats, as much as W from 48 rows on (the seeds' CNN's 36864 x 64
 * layer, contrib/bench/conv: 57 -> 80 GFLOP/s at 16 rows, 83 -> 106 at
 * 32, 106 -> 103 at 48). Taken by shape: up to 32 rows (a multiple of
 * 16), W of at least 4096 rows (the 64 x 10 layer after it was slower so:
 * the lay-outs outweigh its product). The chains from +0 over j = 0..n-1:
 * dx_direct's bits. */
#define DX_ROWS_MAX 32
#define DX_ROWS_MIN_K 4096
/* The product reads W in place, a block's P rows a column at a time: P
 * lines 4 n bytes apart at once, which the hardware prefetchers did not
 * run ahead of (the seeds' CNN's 36864 x 64 layer at 32 rows on the Zen
 * 5: its loads waited on DRAM). So a panel goes through in sub-panels of
 * DX_SUB rows, each first touching the next one's rows into L1: that
 * layer's kc_dense_bwd (dW + dX) 2.5-3.0 -> 2.06-2.09 ms, best of 60
 * calls, alternating runs (sub-panels of 26-128 rows, one or two ahead,
 * into L1 or L2: all 1.8-2.4 ms). The same bits: each row of dX^T is one
 * chain whichever call computes it. */
#define DX_SUB 64
/* More rows than 32 (a multiple of 32: the seeds' CNN's layer at a
 * replica's 128 rows, half of a batch of 256) go as slices of 32 lanes
 * through each panel of W in turn: the panel comes from memory for the
 * first slice and from L2 for the others. dX at 128 rows, best of 60
 * calls, 5 alternating runs: dx_direct (lays out all of W, writes dX's
 * rows 4 KiB-multiples apart) 139-149 GFLOP/s, a whole call per slice
 * 158-171, the slices inside the panels 168-178. */
static int dx_rows_fit(const kc_conv_isa_t *isa, int m, int k, int n)
{
    return isa == &kc_conv_avx512 && m % 16 == 0 &&
           (m <= DX_ROWS_MAX || m % DX_ROWS_MAX == 0) &&
           k >= DX_ROWS_MIN_K && (size_t)m * (size_t)n <= PANEL;
}

static void dx_rows(const kc_conv_isa_t *isa, int m, int k, int n,
                    const float *dY, const float *W, float *dX)
{
    size_t mm = (size_t)m, nn = (size_t)n, kk = (size_t)k;
    size_t ms = mm < DX_ROWS_MAX ? mm : DX_ROWS_MAX, nsl = mm / ms;
    /* on the stack as dx_direct's panel: m x n <= PANEL (dx_rows_fit);
     * slice s's dY^T at dyt + s * n * ms */
    float dyt[PANEL], pan[PANEL];
    for (size_t r = 0; r < mm; r++)
        for (size_t j = 0; j < nn; j++)
            dyt[(r / ms * nn + j) * ms + r % ms] = dY[r * nn + j];
    int pw = (int)(PANEL / ms / 16 * 16);
    /* KC_STREAM_MIN: each 16 x 16 tile whose rows are aligned */
    int stream = mm * kk > KC_STREAM_MIN && kk % 16 == 0;
    kc_uk_t u = { .nrow = 1, .nseg = 1, .bp = n, .br = 1, .vr = (int)ms,
                  .op = (int)ms, .R = n, .init = KC_UK_ZERO,
                  .fin = KC_UK_STORE };
    for (int i0 = 0; i0 < k; i0 += pw) {
        int w = k - i0 < pw ? k - i0 : pw, w16 = w / 16 * 16;
        for (size_t sl = 0; sl < nsl; sl++) {
            for (int s0 = 0; s0 < w; s0 += DX_SUB) {
                size_t next = (size_t)(i0 + s0 + DX_SUB) * nn,
                       stop = next + (size_t)DX_SUB * nn;
                stop = stop < kk * nn ? stop : kk * nn;
                for (size_t f = next; sl == 0 && f < stop; f += 16)
                    _mm_prefetch((const char *)(W + f), _MM_HINT_T0);
                kc__conv_blocks(isa, &u, w - s0 < DX_SUB ? w - s0 : DX_SUB,
                                (int)ms, W + (size_t)(i0 + s0) * nn,
                                dyt + sl * nn * ms, pan + (size_t)s0 * ms);
            }
            /* pan[i][r] -> dX[sl * ms + r][i0 + i] */
            for (size_t r0 = 0; r0 < ms; r0 += 16) {
                float *row = dX + (sl * ms + r0) * kk + (size_t)i0;
                for (int i = 0; i < w16; i += 16) {
                    float *d = row + i;
                    if (stream && ((uintptr_t)d & 63) == 0)
                        tr16_nt(pan + (size_t)i * ms + r0, ms, d, kk);
                    else
                        kc__tr16(pan + (size_t)i * ms + r0, ms, d, kk);
                }
                for (size_t r = 0; r < 16; r++)
                    for (int i = w16; i < w; i++)
                        row[r * kk + (size_t)i] = pan[(size_t)i * ms + r0 + r];
            }
        }
    }
    if (stream)
        _mm_sfence();   /* the streamed lines before anyone reads dX */
}
#endif

/* dW[k x n] = X^T dY, DWP rows of dW at a time, over DWR of X's rows a
 * pass: the broadcast operand from a copy of X's slice, rows DWP floats
 * apart (7 cache lines: a block's steps fall on different sets; in X
 * itself each step would be a new page, and on one L1 set when X's rows
 * are a multiple of 4 KiB apart, as the seeds' CNN's 36864 floats). The
 * chains from +0 over X's rows in order, through dW between passes. */
#define DWP 112
#define DWR (PANEL / DWP)
/* Each row's copy first touches the same row's slice DW_AHEAD panels on:
 * X comes from memory, 7 lines of a row then a jump of 4 k bytes to the
 * next, short runs the hardware prefetchers did not cover (the seeds'
 * CNN's 36864 x 64 layer, dW alone, best of 60-100 calls, 3 alternating
 * runs: 1.06-1.08 -> 0.85-0.87 ms at 32 rows, 2.10-2.17 -> 1.63-1.72 at
 * 64, 4.24-4.35 -> 3.14-3.35 at 128; into L1, 1 or 2 panels ahead: within
 * 3 %, into L2 or L3 a little slower). Prefetches only: the same bits. */
#define DW_AHEAD 2
static void dw_direct(const kc_conv_isa_t *isa, int m, int k, int n,
                      const float *X, const float *dY, float *dW)
{
    float xp[DWR * DWP];
    int stream = m <= DWR && (size_t)k * (size_t)n > KC_STREAM_MIN;
    kc_uk_t u = { .nrow = 1, .nseg = 1, .bp = 1, .br = DWP, .vr = n,
                  .op = n, .fin = stream ? KC_UK_STREAM : KC_UK_STORE };
    for (int i0 = 0; i0 < k; i0 += DWP) {
        int w = k - i0 < DWP ? k - i0 : DWP;
        for (int r0 = 0; r0 < m; r0 += DWR) {
            int rb = m - r0 < DWR ? m - r0 : DWR;
            for (int r = 0; r < rb; r++) {
                const float *src = X + (size_t)(r0 + r) * (size_t)k + i0;
#ifdef KC_CONV_X86
                for (int f = DW_AHEAD * DWP; f < (DW_AHEAD + 1) * DWP &&
                                             i0 + f < k; f += 16)
                    _mm_prefetch((const char *)(src + f), _MM_HINT_T0);
#endif
                memcpy(xp + (size_t)r * DWP, src, (size_t)w * sizeof *xp);
            }
            u.R = rb;
            u.init = r0 ? KC_UK_LOAD : KC_UK_ZERO;
            kc__conv_blocks(isa, &u, w, n, xp, dY + (size_t)r0 * (size_t)n,
                            dW + (size_t)i0 * (size_t)n);
        }
    }
#ifdef KC_CONV_X86
    if (stream)
        _mm_sfence();   /* the streamed lines before anyone reads dW */
#endif
}

void kc_dense_fwd(int m, int k, int n, const float *X, const float *W,
                  const float *b, float *Y)
{
    if (m <= 0 || n <= 0 || k < 0)
        return;
    const kc_conv_isa_t *isa = kc__direct_isa();
    if (isa && k > 0) {
        kc_uk_t u = { .nrow = 1, .nseg = 1, .bp = k, .br = 1, .vr = n,
                      .op = n, .bias = b };
        kc__uk_passes(isa, &u, b ? KC_UK_BIAS : KC_UK_ZERO, m, n, k, KB, X,
                      W, Y);
        return;
    }
    /* Y starts as the bias rows (b NULL: none), then one sgemm accumulates
     * X W (beta = 1).
     * Measured as fast as sgemm + kc_bias_add for 784-128-10 at batch
     * 16..256 (GEMM dominates), and Y is not re-read after BLAS. */
    size_t nn = (size_t)n;
    for (size_t r = 0; b && r < (size_t)m; r++)
        memcpy(Y + r * nn, b, nn * sizeof *Y);
    if (k == 0 && !b)
        zero((size_t)m * nn, Y);
    if (k == 0)
        return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k,
                1.0f, X, k, W, n, b ? 1.0f : 0.0f, Y, n);
}

void kc_dense_bwd(int m, int k, int n, const float *X, const float *W,
                  const float *dY, float *dW, float *db, float *dX)
{
    if (k < 0 || n < 0 || m < 0)
        return;
    kc_bias_grad(m, n, dY, db);
    if (k == 0)
        return;                                  /* dW and dX are empty */
    if (m == 0 || n == 0) {
        /* Sums over an empty dimension; BLAS is not asked about K = 0. */
        if (n > 0)
            zero((size_t)k * (size_t)n, dW);
        if (dX && m > 0)
            zero((size_t)m * (size_t)k, dX);
        return;
    }
    const kc_conv_isa_t *isa = kc__direct_isa();
    /* dW[k x n] = X^T[k x m] dY[m x n] */
    if (isa)
        dw_direct(isa, m, k, n, X, dY, dW);
    else
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, n, m,
                    1.0f, X, k, dY, n, 0.0f, dW, n);
    /* dX[m x k] = dY[m x n] W^T[n x k] */
#ifdef KC_CONV_X86
    if (dX && isa && dx_rows_fit(isa, m, k, n)) {
        dx_rows(isa, m, k, n, dY, W, dX);
        return;
    }
#endif
    if (dX && isa && (size_t)n * (size_t)(isa->nvmax * isa->vw) <= PANEL)
        dx_direct(isa, m, k, n, dY, W, dX);
    else if (dX)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, k, n,
                    1.0f, dY, n, W, n, 0.0f, dX, k);
}
