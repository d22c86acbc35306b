/* Dense layer forward/backward on row-major float32, GEMM through CBLAS. */
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

void kc_dense_fwd(int m, int k, int n, const float *X, const float *W,
                  const float *b, float *Y)
{
    if (m <= 0 || n <= 0 || k < 0)
        return;
    /* Y starts as the bias rows, then one sgemm accumulates X W (beta = 1).
     * Measured as fast as sgemm + kc_bias_add for 784-128-10 at batch
     * 16..256 (GEMM dominates), and Y is not re-read after BLAS. */
    size_t nn = (size_t)n;
    for (size_t r = 0; r < (size_t)m; r++)
        memcpy(Y + r * nn, b, nn * sizeof *Y);
    if (k == 0)
        return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k,
                1.0f, X, k, W, n, 1.0f, Y, n);
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
    if (dX)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, k, n,
                    1.0f, dY, n, W, n, 0.0f, dX, k);
}
