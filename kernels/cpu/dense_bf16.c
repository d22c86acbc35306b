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

/* W[k][n] as pairs along its rows, across: wt[half(n)][k] (dX's operand
 * W^T), in blocks of 16 rows of W. */
static void pack_rows_across(const float *w, size_t k, size_t n, float *wt)
{
    size_t nh = half(n);
    float t[16][256];
    for (size_t j0 = 0; j0 < nh; j0 += 256) {
        size_t nj = nh - j0 < 256 ? nh - j0 : 256;
        size_t cnt = n - 2 * j0 < 512 ? n - 2 * j0 : 512;
        for (size_t k0 = 0; k0 < k; k0 += 16) {
            size_t nk = k - k0 < 16 ? k - k0 : 16;
            for (size_t i = 0; i < nk; i++)
                kc__bf16_pack(w + (k0 + i) * n + 2 * j0, cnt, t[i]);
            put_across(&t[0][0], nk, nj, wt + j0 * k + k0, k);
        }
    }
}

void kc_dense_fwd_bf16(int m, int kk, int n, const float *X, const float *W,
                       const float *b, float *Y, float *work, size_t work_len)
{
    (void)work_len;
    if (m <= 0 || n <= 0 || kk < 0)
        return;
    size_t M = (size_t)m, K = (size_t)kk, N = (size_t)n, Kh = half(K);
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
    /* dW[k x n] = X^T dY: pairs of rows */
    float *xq = work, *dyq = work + Mh * K;
    int amx = kc__bf16_isa() == &kc_conv_amx;
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
