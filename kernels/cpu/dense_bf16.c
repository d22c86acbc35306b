/* The dense layer in mixed_bfloat16 (kernels_cpu.h): the three GEMMs on
 * bf16 pairs along their reduction, fp32 accumulation and outputs, through
 * the direct convolution's bf16 micro-kernel, tiles or vectors (a GEMM is a
 * 1x1 convolution of one row):
 *   Y  = X W + b   rows of X are "pixels", pairs (k, k+1) of a row of X
 *                  (contiguous), W packed once per call [k/2][n];
 *   dX = dY W^T    pairs (j, j+1) of a row of dY, W^T packed [n/2][k];
 *   dW = X^T dY    the k inputs are "pixels", pairs of rows (r, r+1) of X
 *                  and of dY; an odd m's last pair ends in +0 (X's pairs
 *                  laid out across, [k][m/2], for the tiles).
 * The tile engine keeps its tiles for one call and releases them at the
 * end (kc__amx_release).
 * On the vector engine each operand is converted slice by slice into a
 * panel that stays in L2 while the blocks read it (vec_fwd, vec_dw,
 * vec_dx): the operands come from memory once, in float32, where the
 * whole-matrix packings wrote a bf16 copy out and read it back (and read
 * it with strides of a row, falling on few cache sets) -- the seeds'
 * CNN's 128 x 36864 x 64 layer on a Zen 5, best of runs: forward 3.3 ->
 * 2.8 ms, backward 7.8 -> 5.9 ms. The chains are the same, so are the
 * bits. The tile engine
 * keeps the whole-matrix layouts its tiles want.
 * Each output element is one fixed chain of VDPBF16PS steps: from the bias
 * (Y) or +0 over the pairs in order -- cut in blocks of KB pairs whose
 * accumulators go through the fp32 output (stored and loaded back, which
 * is exact), so the chain is the same whatever the block. A row of Y or dX
 * depends only on its own row of X or dY, not on the rows beside it. */
#include "conv_direct.h"
#include "kernels_cpu.h"

#include <stdlib.h>
#include <string.h>

#ifdef KC_CONV_X86
#include <immintrin.h>

/* Pairs of the reduction per pass over a block of outputs: the vector
 * operand's slice (KB x 32 lanes x 4 bytes, 64 KiB) stays in L2 while every
 * block of rows reads it. */
#define KB 512

static size_t half(size_t n) { return (n + 1) / 2; }

/* Rows [0, m) of a[m][k] -> words out[m][half(k)]: pairs along the row. */
static void pack_rows(const float *a, size_t m, size_t k, float *out)
{
    if (k % 2 == 0) {
        kc__bf16_pack(a, m * k, out);
        return;
    }
    for (size_t r = 0; r < m; r++)
        kc__bf16_pack(a + r * k, k, out + r * half(k));
}

/* Pairs of rows of a[m][k] -> words out[half(m)][k]. */
static void zip_rows(const float *a, size_t m, size_t k, float *out)
{
    for (size_t q = 0; q < half(m); q++)
        kc__bf16_zip(a + 2 * q * k, 2 * q + 1 < m ? a + (2 * q + 1) * k : NULL,
                     k, out + q * k);
}

/* The block t[ni][nj] (rows of 256) transposed into out: out[j * stride +
 * i] = t[i][j] (the two "across" packings below fill t along rows, then
 * write it so). */
static void put_across(const float *t, size_t ni, size_t nj, float *out,
                       size_t stride)
{
    for (size_t j = 0; j < nj; j++)
        for (size_t i = 0; i < ni; i++)
            out[j * stride + i] = t[i * 256 + j];
}

/* Pairs of rows of a[m][k], across: out[k][half(m)] (the AMX path's
 * operand of X^T, whose steps over the pairs must be side by side). In
 * blocks of 16 pairs x 256 columns: reads run along rows, writes fill
 * lines. */
static void zip_rows_across(const float *a, size_t m, size_t k, float *out)
{
    size_t mh = half(m);
    float t[16][256];
    for (size_t k0 = 0; k0 < k; k0 += 256) {
        size_t n = k - k0 < 256 ? k - k0 : 256;
        for (size_t q0 = 0; q0 < mh; q0 += 16) {
            size_t nq = mh - q0 < 16 ? mh - q0 : 16;
            for (size_t i = 0; i < nq; i++) {
                size_t q = q0 + i;
                kc__bf16_zip(a + 2 * q * k + k0,
                             2 * q + 1 < m ? a + (2 * q + 1) * k + k0 : NULL,
                             n, t[i]);
            }
            put_across(&t[0][0], nq, n, out + k0 * mh + q0, mh);
        }
    }
}

/* The first c columns of k rows of W (rows n floats apart) as pairs
 * along the rows, across: wt[half(c)][k] (dX's operand W^T), in blocks
 * of 16 rows. */
static void pack_cols_across(const float *w, size_t k, size_t n, size_t c,
                             float *wt)
{
    size_t ch = half(c);
    float t[16][256];
    for (size_t j0 = 0; j0 < ch; j0 += 256) {
        size_t nj = ch - j0 < 256 ? ch - j0 : 256;
        size_t cnt = c - 2 * j0 < 512 ? c - 2 * j0 : 512;
        for (size_t k0 = 0; k0 < k; k0 += 16) {
            size_t nk = k - k0 < 16 ? k - k0 : 16;
            for (size_t i = 0; i < nk; i++)
                kc__bf16_pack(w + (k0 + i) * n + 2 * j0, cnt, t[i]);
            put_across(&t[0][0], nk, nj, wt + j0 * k + k0, k);
        }
    }
}

/* W[k][n] as pairs along its rows, across: wt[half(n)][k]. */
static void pack_rows_across(const float *w, size_t k, size_t n, float *wt)
{
    pack_cols_across(w, k, n, n, wt);
}

/* Words of a panel (128 KiB): a slice of the vector operand, or of the
 * broadcast one, that the blocks read over and over from L2. */
#define PANEL 32768
/* dW: columns of X (dW's rows, the "pixels") per panel of up to two
 * PANELs: rows 31 cache lines apart, on different sets; long runs of
 * each row of X per zip (112 columns, dense.c's DWP, took 3.7 ms where
 * 496 took 2.9, the layer above's dW). */
#define DWC 496

static size_t min_z(size_t a, size_t b) { return a < b ? a : b; }

/* Y = X W + b: passes of np pairs; W's slice zipped into wp[np][N] once a
 * pass, X's slice packed for a group of rows into xs[nr][np]. */
static void vec_fwd(const kc_conv_isa_t *isa, size_t M, size_t K, size_t N,
                    const float *X, const float *W, const float *b, float *Y,
                    float *work)
{
    size_t Kh = half(K), kb = min_z(Kh, min_z(KB, PANEL / N ? PANEL / N : 1));
    size_t rm = min_z(M, 2 * PANEL / kb);
    float *wp = work, *xs = work + kb * N;
    for (size_t p0 = 0; p0 < Kh; p0 += kb) {
        size_t np = min_z(kb, Kh - p0);
        for (size_t q = 0; q < np; q++) {
            size_t r = 2 * (p0 + q);
            kc__bf16_zip(W + r * N, r + 1 < K ? W + (r + 1) * N : NULL, N,
                         wp + q * N);
        }
        size_t cnt = min_z(2 * np, K - 2 * p0);   /* X's floats a row */
        kc_uk_t u = { .nrow = 1, .nseg = 1, .bp = (ptrdiff_t)np, .br = 1,
                      .vr = (ptrdiff_t)N, .op = (ptrdiff_t)N, .bias = b,
                      .R = (int)np, .fin = KC_UK_STORE,
                      .init = p0 ? KC_UK_LOAD
                                 : b ? KC_UK_BIAS : KC_UK_ZERO };
        for (size_t r0 = 0; r0 < M; r0 += rm) {
            size_t nr = min_z(rm, M - r0);
            for (size_t r = 0; r < nr; r++)
                kc__bf16_pack(X + (r0 + r) * K + 2 * p0, cnt, xs + r * np);
            kc__conv_blocks(isa, &u, (int)nr, (int)N, xs, wp, Y + r0 * N);
        }
    }
}

/* dW = X^T dY: dY's pairs of rows zipped once into dyq[Mh][N]; for each
 * DWC columns of X, passes of nq pairs of its rows zipped into
 * xp[nq][DWC] (fewer columns where X has fewer). */
static void vec_dw(const kc_conv_isa_t *isa, size_t M, size_t K, size_t N,
                   const float *X, const float *dY, float *dW, float *work)
{
    size_t Mh = half(M), kb = min_z(Mh, min_z(KB, 2 * PANEL / DWC));
    size_t wc = min_z(DWC, K);      /* the panel's row: within the work */
    float *dyq = work, *xp = work + Mh * N;
    zip_rows(dY, M, N, dyq);
    int stream = kb == Mh && K * N > KC_STREAM_MIN;
    kc_uk_t u = { .nrow = 1, .nseg = 1, .bp = 1, .br = (ptrdiff_t)wc,
                  .vr = (ptrdiff_t)N, .op = (ptrdiff_t)N,
                  .fin = stream ? KC_UK_STREAM : KC_UK_STORE };
    for (size_t k0 = 0; k0 < K; k0 += wc) {
        size_t w = min_z(wc, K - k0);
        for (size_t q0 = 0; q0 < Mh; q0 += kb) {
            size_t nq = min_z(kb, Mh - q0);
            for (size_t q = 0; q < nq; q++) {
                size_t r = 2 * (q0 + q);
                /* the same two rows' next panel into L1 first: X comes
                 * from memory in runs of 31 lines a row, which the
                 * hardware prefetchers did not cover (dense.c's dw_direct
                 * likewise; the seeds' CNN's layer, dW at 128 rows
                 * 2.49-2.51 -> 2.05-2.19 ms, at 32 0.64-0.65 -> 0.53) */
                for (size_t f = wc; f < 2 * wc && k0 + f < K; f += 16) {
                    _mm_prefetch((const char *)(X + r * K + k0 + f),
                                 _MM_HINT_T0);
                    if (r + 1 < M)
                        _mm_prefetch((const char *)(X + (r + 1) * K + k0 + f),
                                     _MM_HINT_T0);
                }
                kc__bf16_zip(X + r * K + k0,
                             r + 1 < M ? X + (r + 1) * K + k0 : NULL, w,
                             xp + q * wc);
            }
            u.R = (int)nq;
            u.init = q0 ? KC_UK_LOAD : KC_UK_ZERO;
            kc__conv_blocks(isa, &u, (int)w, (int)N, xp, dyq + q0 * N,
                            dW + k0 * N);
        }
    }
    if (stream)
        _mm_sfence();   /* the streamed lines before anyone reads dW */
}

/* dX = dY W^T: dY's rows packed once into dyw[M][Nh]; for each lc columns
 * of dX, passes of nq pairs of W's columns laid out across into
 * wt[nq][lc]. */
static void vec_dx(const kc_conv_isa_t *isa, size_t M, size_t K, size_t N,
                   const float *dY, const float *W, float *dX, float *work)
{
    size_t Nh = half(N), kb = min_z(Nh, KB);
    size_t lc = PANEL / kb / 32 * 32;
    if (lc < 32)
        lc = 32;
    float *dyw = work, *wt = work + M * Nh;
    pack_rows(dY, M, N, dyw);
    int stream = kb == Nh && M * K > KC_STREAM_MIN;
    kc_uk_t u = { .nrow = 1, .nseg = 1, .bp = (ptrdiff_t)Nh, .br = 1,
                  .op = (ptrdiff_t)K,
                  .fin = stream ? KC_UK_STREAM : KC_UK_STORE };
    for (size_t k0 = 0; k0 < K; k0 += lc) {
        size_t w = min_z(lc, K - k0);
        for (size_t q0 = 0; q0 < Nh; q0 += kb) {
            size_t nq = min_z(kb, Nh - q0);
            /* columns 2 q0 .. of W's rows k0 .. k0 + w, across */
            pack_cols_across(W + k0 * N + 2 * q0, w, N,
                             min_z(2 * nq, N - 2 * q0), wt);
            u.R = (int)nq;
            u.vr = (ptrdiff_t)w;
            u.init = q0 ? KC_UK_LOAD : KC_UK_ZERO;
            kc__conv_blocks(isa, &u, (int)M, (int)w, dyw + q0, wt, dX + k0);
        }
    }
    if (stream)
        _mm_sfence();   /* the streamed lines before anyone reads dX */
}

void kc_dense_fwd_bf16(int m, int kk, int n, const float *X, const float *W,
                       const float *b, float *Y, float *work, size_t work_len)
{
    (void)work_len;
    if (m <= 0 || n <= 0 || kk < 0)
        return;
    size_t M = (size_t)m, K = (size_t)kk, N = (size_t)n, Kh = half(K);
    if (kc__bf16_isa() != &kc_conv_amx) {
        vec_fwd(kc__bf16_isa(), M, K, N, X, W, b, Y, work);
        return;
    }
    float *xw = work, *wp = work + M * Kh;
    pack_rows(X, M, K, xw);
    zip_rows(W, K, N, wp);
    kc_uk_t u = { .nrow = 1, .nseg = 1, .bp = (ptrdiff_t)Kh, .br = 1,
                  .vr = (ptrdiff_t)N, .op = (ptrdiff_t)N, .bias = b };
    kc__uk_passes(kc__bf16_isa(), &u, b ? KC_UK_BIAS : KC_UK_ZERO, m, n,
                  (int)Kh, KB, xw, wp, Y);
    kc__amx_release();
}

void kc_dense_bwd_bf16(int m, int kk, int n, const float *X, const float *W,
                       const float *dY, float *dW, float *db, float *dX,
                       float *work, size_t work_len)
{
    (void)work_len;
    if (kk < 0 || n < 0 || m < 0)
        return;
    kc_bias_grad(m, n, dY, db);
    size_t M = (size_t)m, K = (size_t)kk, N = (size_t)n;
    if (kk == 0)
        return;                                  /* dW and dX are empty */
    if (m == 0 || n == 0) {
        if (n > 0)
            memset(dW, 0, K * N * sizeof *dW);
        if (dX && m > 0)
            memset(dX, 0, M * K * sizeof *dX);
        return;
    }
    size_t Mh = half(M), Nh = half(N);
    int amx = kc__bf16_isa() == &kc_conv_amx;
    if (!amx) {
        vec_dw(kc__bf16_isa(), M, K, N, X, dY, dW, work);
        if (dX)
            vec_dx(kc__bf16_isa(), M, K, N, dY, W, dX, work);
        return;
    }
    /* dW[k x n] = X^T dY: pairs of rows */
    float *xq = work, *dyq = work + Mh * K;
    if (amx)
        zip_rows_across(X, M, K, xq);          /* [k][Mh] */
    else
        zip_rows(X, M, K, xq);                 /* [Mh][k] */
    zip_rows(dY, M, N, dyq);
    kc_uk_t u = { .nrow = 1, .nseg = 1, .bp = amx ? (ptrdiff_t)Mh : 1,
                  .br = amx ? 1 : (ptrdiff_t)K, .vr = (ptrdiff_t)N,
                  .op = (ptrdiff_t)N };
    kc__uk_passes(kc__bf16_isa(), &u, KC_UK_ZERO, kk, n, (int)Mh, KB, xq,
                  dyq, dW);
    if (!dX) {
        kc__amx_release();
        return;
    }
    /* dX[m x k] = dY W^T: pairs (j, j+1) of dY's rows and of W's */
    float *dyw = work, *wt = work + M * Nh;
    pack_rows(dY, M, N, dyw);
    pack_rows_across(W, K, N, wt);
    kc_uk_t v = { .nrow = 1, .nseg = 1, .bp = (ptrdiff_t)Nh, .br = 1,
                  .vr = (ptrdiff_t)K, .op = (ptrdiff_t)K };
    kc__uk_passes(kc__bf16_isa(), &v, KC_UK_ZERO, m, kk, (int)Nh, KB, dyw,
                  wt, dX);
    kc__amx_release();
}

#else /* not x86-64: no AVX512_BF16, kc_bf16_usable() is 0 */

void kc_dense_fwd_bf16(int m, int kk, int n, const float *X, const float *W,
                       const float *b, float *Y, float *work, size_t work_len)
{
    (void)m, (void)kk, (void)n, (void)X, (void)W, (void)b, (void)Y;
    (void)work, (void)work_len;
    abort();
}

void kc_dense_bwd_bf16(int m, int kk, int n, const float *X, const float *W,
                       const float *dY, float *dW, float *db, float *dX,
                       float *work, size_t work_len)
{
    (void)m, (void)kk, (void)n, (void)X, (void)W, (void)dY, (void)dW;
    (void)db, (void)dX, (void)work, (void)work_len;
    abort();
}
#endif
