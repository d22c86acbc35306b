/* Dense layer forward/backward on row-major float32.
 *
 * Where the direct convolution has vector kernels (AVX-512 or AVX2 with
 * FMA: kc__direct_isa), Y = X W + b and, for weights of at most
 * DX_DIRECT_MAX floats, dX = dY W^T run on its micro-kernel (a GEMM is a
 * 1x1 convolution of one row): each element one fixed chain of fmas --
 * Y from b[j] over i = 0..k-1, dX from +0 over j = 0..n-1 -- so a row
 * depends only on its own row of X or dY (a sample's output is the same
 * bits whatever batch it is in) and the AVX-512 and AVX2 kernels give the
 * same bits. dW = X^T dY, the other dX and every GEMM elsewhere go through
 * CBLAS (OpenBLAS was as fast or faster there: dW's broadcast operand
 * runs down X's columns; a large W^T costs more to lay out than BLAS's
 * own packing). */
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

void kc_bias_grad(int m, int n, const float *restrict dY, float *restrict db)
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

/* One row: d masked by y as relu's backward, then added into acc -- two
 * loops over the row while it is in L1 (one loop does not vectorise), on
 * restrict parameters (locals' restrict does not free gcc's vectoriser). */
static inline void relu_row_sum(size_t w, const float *restrict y,
                                float *restrict d, double *restrict acc)
{
    KC_FOR(j, w, d[j] = y[j] > 0.0f ? d[j] : 0.0f);
    KC_FOR(j, w, acc[j] += (double)d[j]);
}

KC_HOT void kc_relu_bias_grad(int m, int n, const float *y, float *dy,
                              float *db)
{
    if (n <= 0)
        return;
    size_t nn = (size_t)n, mm = (size_t)(m > 0 ? m : 0);
    if (!db) {
        kc_relu_bwd(mm * nn, y, dy, dy);
        return;
    }
    /* kc_bias_grad's loop, each value masked as relu_bwd masks it first */
    double acc[KC_BIAS_CHUNK];
    for (size_t j0 = 0; j0 < nn; j0 += KC_BIAS_CHUNK) {
        size_t w = nn - j0 < KC_BIAS_CHUNK ? nn - j0 : KC_BIAS_CHUNK;
        for (size_t j = 0; j < w; j++)
            acc[j] = 0.0;
        for (size_t r = 0; r < mm; r++)
            relu_row_sum(w, y + r * nn + j0, dy + r * nn + j0, acc);
        for (size_t j = 0; j < w; j++)
            db[j0 + j] = (float)acc[j];
    }
}

/* Steps of a chain per pass over a block of outputs: W's slice (KB rows
 * x 32 lanes, 64 KiB) stays in L2 while every block of rows reads it
 * (the forward of 128 x 36864 x 64, the seeds' CNN's dense layer: 148
 * GFLOP/s at 512, 126-145 at 128, 256 or 4096, OpenBLAS SkylakeX 107-114
 * on the same Xeon core). */
#define KB 512
/* dX direct up to this many floats of W: W^T is laid out a panel at a
 * time (PANEL floats, on the stack). 128 x 784 x 128: 170 GFLOP/s against
 * OpenBLAS's 139; 128 x 36864 x 64: 85 against 105. */
#define DX_DIRECT_MAX (256 * 1024)
#define PANEL 16384

/* dX[m x k] = dY[m x n] W^T: panels wt[n][w] of W's rows k0..k0+w-1 (the
 * vector operand: lanes along k) */
static void dx_direct(const kc_conv_isa_t *isa, int m, int k, int n,
                      const float *dY, const float *W, float *dX)
{
    float wt[PANEL];
    int kl = PANEL / n / 16 * 16;
    for (int k0 = 0; k0 < k; k0 += kl) {
        int w = k - k0 < kl ? k - k0 : kl;
        for (int i = 0; i < w; i++) {
            const float *row = W + (size_t)(k0 + i) * (size_t)n;
            for (int j = 0; j < n; j++)
                wt[(size_t)j * (size_t)w + (size_t)i] = row[j];
        }
        kc_uk_t u = { .nrow = 1, .nseg = 1, .bp = n, .br = 1, .vr = w,
                      .op = k };
        kc__uk_passes(isa, &u, KC_UK_ZERO, m, w, n, KB, dY, wt, dX + k0);
    }
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
    /* dW[k x n] = X^T[k x m] dY[m x n] */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, n, m,
                1.0f, X, k, dY, n, 0.0f, dW, n);
    /* dX[m x k] = dY[m x n] W^T[n x k] */
    const kc_conv_isa_t *isa = kc__direct_isa();
    if (dX && isa && (size_t)k * (size_t)n <= DX_DIRECT_MAX &&
        n <= PANEL / 16)
        dx_direct(isa, m, k, n, dY, W, dX);
    else if (dX)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, k, n,
                    1.0f, dY, n, W, n, 0.0f, dX, k);
}
