/* Dense layer on cuBLAS. cuBLAS is column-major; a row-major A[r x c] is the
 * column-major A^T, so row-major C = A B is computed as C^T = B^T A^T by
 * swapping the operands (no transposes are materialised). mixed_bfloat16:
 * the same GEMMs on bf16 copies (GemmEx, fp32 accumulation). */
#include <cublas_v2.h>

#include "kg_internal.h"

static int kg_blas_fail(cublasStatus_t st)
{
    return kg__fail(KG_ECUBLAS, cublasGetStatusString(st));
}

/* Row-major C[rows x cols] = op(A) op(B) + beta C with ldc = cols, i.e.
 * column-major C^T[cols x rows] = op(B)^T op(A)^T. ta/tb say whether A/B
 * are stored transposed (row-major), inner is the shared dimension. A and
 * B are float, or bf16 (then GemmEx sums their products in fp32, tensor
 * cores on compute capability 8.0+); C is float. */
static int gemm_rm(kg_blas_t h, kg_stream_t s, bool ta, bool tb, int rows,
                   int cols, int inner, const void *A, int lda, const void *B,
                   int ldb, float beta, float *C, bool bf16)
{
    if (rows == 0 || cols == 0)
        return KG_OK;
    if (inner == 0)   /* empty product: C = beta C, as BLAS does */
        return beta != 0.0f ? KG_OK
                            : kg__cuda(cudaMemsetAsync(C, 0, sizeof(float)
                                       * (size_t)rows * (size_t)cols, s));
    cublasStatus_t st = cublasSetStream(h, s);
    if (st != CUBLAS_STATUS_SUCCESS)
        return kg_blas_fail(st);
    const float one = 1.0f;
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (bf16)
        st = cublasGemmEx(h, opb, opa, cols, rows, inner, &one, B,
                          CUDA_R_16BF, ldb, A, CUDA_R_16BF, lda, &beta, C,
                          CUDA_R_32F, cols, CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT);
    else
        st = cublasSgemm(h, opb, opa, cols, rows, inner, &one,
                         (const float *)B, ldb, (const float *)A, lda, &beta,
                         C, cols);
    return st == CUBLAS_STATUS_SUCCESS ? KG_OK : kg_blas_fail(st);
}

int kg__gemm_rm(kg_blas_t h, kg_stream_t s, bool ta, bool tb, int rows,
                int cols, int inner, const float *A, int lda, const float *B,
                int ldb, float beta, float *C)
{
    return gemm_rm(h, s, ta, tb, rows, cols, inner, A, lda, B, ldb, beta, C,
                   false);
}

int kg__gemm_bf16_rm(kg_blas_t h, kg_stream_t s, bool ta, bool tb, int rows,
                     int cols, int inner, const kg_bf16 *A, int lda,
                     const kg_bf16 *B, int ldb, float beta, float *C)
{
    return gemm_rm(h, s, ta, tb, rows, cols, inner, A, lda, B, ldb, beta, C,
                   true);
}

__global__ void kg_bf16_of_k(size_t n, const float *x, kg_bf16 *y)
{
    KG_FOR(i, n)
        y[i] = __float2bfloat16_rn(x[i]);
}

int kg__bf16_of(size_t n, const float *x, kg_bf16 *y, kg_stream_t s)
{
    KG_LAUNCH(kg_bf16_of_k, n, s, x, y);
}

__global__ void kg_bias_add_k(size_t total, int n, const float *b, float *Y)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x)
        Y[i] += b[i % (size_t)n];
}

/* db: dY's column sums, in kg_colsum's fixed tree of doubles (the second
 * sum unused): the same bits every time, within rounding of kc_bias_grad's
 * row order. One thread a column in row order (kc_bias_grad's bits) made
 * each column one chain of 150 000 dependent adds for the seeds' convs at
 * batch 256, on one multiprocessor: up to 8.6 ms a call on an H200 under
 * Nsight Compute (clocks floating), 16 of the step's 18 ms there; in a
 * plain run the step went only from 12.6 to 12.5 ms. */
struct kg_bias_f {
    const float *dy;
    float *db;
    int c;
    __device__ void at(size_t r, int j, double &u, double &v) const
    {
        u = dy[r * (size_t)c + j];
        v = 0.0;
    }
    __device__ void put(int j, double a, double) const
    {
        db[j] = (float)a;
    }
};

int kg_bias_add(int m, int n, const float *b, float *Y, kg_stream_t s)
{
    if (m <= 0 || n <= 0)
        return KG_OK;
    size_t total = (size_t)m * (size_t)n;
    kg_bias_add_k<<<kg__blocks(total), KG_THREADS, 0, s>>>(total, n, b, Y);
    return kg__launched();
}

int kg_bias_grad(int m, int n, const float *dY, float *db, kg_stream_t s)
{
    if (n <= 0)
        return KG_OK;
    if (m < 0)
        m = 0;                                  /* db = 0, as kc_bias_grad */
    kg_bias_f f = { dY, db, n };
    return kg_colsum((size_t)m, n, f, s);
}

int kg_relu_bias_grad(int m, int n, const float *y, float *dy, float *db,
                      kg_stream_t s)
{
    if (n <= 0)
        return KG_OK;
    size_t mn = m > 0 ? (size_t)m * (size_t)n : 0;
    int rc = mn ? kg_relu_bwd(mn, y, dy, dy, s) : KG_OK;
    if (rc == KG_OK && db)
        rc = kg_bias_grad(m, n, dy, db, s);
    return rc;
}

int kg_dense_fwd(kg_blas_t h, int m, int k, int n, const float *X,
                 const float *W, const float *b, float *Y, kg_stream_t s)
{
    if (m <= 0 || n <= 0 || k < 0)
        return KG_OK;                           /* as kc_dense_fwd */
    if (!h)
        return kg__fail(KG_EINVAL, "kg_dense_fwd: no cuBLAS handle");
    /* Y[m x n] = X[m x k] W[k x n] */
    int rc = kg__gemm_rm(h, s, false, false, m, n, k, X, k, W, n, 0.0f, Y);
    if (rc == KG_OK && b)
        rc = kg_bias_add(m, n, b, Y, s);
    return rc;
}

int kg_dense_bwd(kg_blas_t h, int m, int k, int n, const float *X,
                 const float *W, const float *dY, float *dW, float *db,
                 float *dX, kg_stream_t s)
{
    if (m < 0 || k < 0 || n < 0)
        return KG_OK;                           /* as kc_dense_bwd */
    if (!h)
        return kg__fail(KG_EINVAL, "kg_dense_bwd: no cuBLAS handle");
    /* dW[k x n] = X^T[k x m] dY[m x n]: X (m x k, ld k) used transposed. */
    int rc = kg__gemm_rm(h, s, true, false, k, n, m, X, k, dY, n, 0.0f, dW);
    if (rc == KG_OK)
        rc = kg_bias_grad(m, n, dY, db, s);
    /* dX[m x k] = dY[m x n] W^T[n x k]: W (k x n, ld n) used transposed. */
    if (rc == KG_OK && dX)
        rc = kg__gemm_rm(h, s, false, true, m, k, n, dY, n, W, n, 0.0f, dX);
    return rc;
}

/* ---- mixed_bfloat16 ------------------------------------------------------ */

/* The workspace's parts (kops_dense_bf16_gpu_len): X, W and dY in bf16. */
typedef struct dense_bf16 {
    kg_bf16 *x, *w, *dy;
} dense_bf16_t;

/* Both passes start here: the handle and the workspace checked, the
 * parts laid out, X rounded into its part. */
static int dense_start(kg_blas_t h, int m, int k, int n, const float *X,
                       float *work, size_t work_len, dense_bf16_t *p,
                       kg_stream_t s)
{
    if (!h)
        return kg__fail(KG_EINVAL, "kg_dense_*_bf16: no cuBLAS handle");
    if (!work || work_len < kops_dense_bf16_gpu_len(m, k, n))
        return kg__fail(KG_EINVAL, "kg_dense_*_bf16: work_len below "
                                   "kops_dense_bf16_gpu_len");
    size_t M = (size_t)m, K = (size_t)k, N = (size_t)n;
    p->x = (kg_bf16 *)work;
    p->w = (kg_bf16 *)(work + kops_bf16_part(M * K));
    p->dy = (kg_bf16 *)(work + kops_bf16_part(M * K) +
                        kops_bf16_part(K * N));
    return kg__bf16_of(M * K, X, p->x, s);
}

int kg_dense_fwd_bf16(kg_blas_t h, int m, int k, int n, const float *X,
                      const float *W, const float *b, float *Y, float *work,
                      size_t work_len, kg_stream_t s)
{
    if (m <= 0 || n <= 0 || k < 0)
        return KG_OK;                           /* as kc_dense_fwd_bf16 */
    dense_bf16_t p = {};
    int rc = dense_start(h, m, k, n, X, work, work_len, &p, s);
    if (rc == KG_OK)
        rc = kg__bf16_of((size_t)k * n, W, p.w, s);
    if (rc == KG_OK)
        rc = kg__gemm_bf16_rm(h, s, false, false, m, n, k, p.x, k, p.w, n,
                              0.0f, Y);
    if (rc == KG_OK && b)
        rc = kg_bias_add(m, n, b, Y, s);
    return rc;
}

int kg_dense_bwd_bf16(kg_blas_t h, int m, int k, int n, const float *X,
                      const float *W, const float *dY, float *dW, float *db,
                      float *dX, float *work, size_t work_len,
                      kg_stream_t s)
{
    if (m < 0 || k < 0 || n < 0)
        return KG_OK;                           /* as kc_dense_bwd_bf16 */
    dense_bf16_t p = {};
    int rc = dense_start(h, m, k, n, X, work, work_len, &p, s);
    if (rc == KG_OK)
        rc = kg__bf16_of((size_t)m * n, dY, p.dy, s);
    /* dW[k x n] = X^T dY */
    if (rc == KG_OK)
        rc = kg__gemm_bf16_rm(h, s, true, false, k, n, m, p.x, k, p.dy, n,
                              0.0f, dW);
    if (rc == KG_OK)
        rc = kg_bias_grad(m, n, dY, db, s);
    /* dX[m x k] = dY W^T */
    if (rc == KG_OK && dX)
        rc = kg__bf16_of((size_t)k * n, W, p.w, s);
    if (rc == KG_OK && dX)
        rc = kg__gemm_bf16_rm(h, s, false, true, m, k, n, p.dy, n, p.w, n,
                              0.0f, dX);
    return rc;
}
