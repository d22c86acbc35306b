/* Shared by the kg_*.cu files only (C++ linkage, hidden): error recording
 * and launch geometry. */
#ifndef STRATA_KG_INTERNAL_H
#define STRATA_KG_INTERNAL_H

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels_cuda.h"

/* Records why the call failed for kg_last_error(); returns KG_ECUDA or
 * KG_ECUBLAS as given, for `return kg__fail(...)`. */
int kg__fail(int rc, const char *why);
/* 0 when e == cudaSuccess, else records cudaGetErrorString(e), KG_ECUDA. */
int kg__cuda(cudaError_t e);
/* After a launch: catches bad launch configurations (and earlier sticky
 * asynchronous errors) without waiting for the GPU. */
int kg__launched(void);

enum { KG_THREADS = 256 };
/* Blocks for a grid-stride loop over n items: enough to fill any current
 * GPU, never more than needed. */
static inline unsigned kg__blocks(size_t n)
{
    size_t b = (n + KG_THREADS - 1) / KG_THREADS;
    return (unsigned)(b < 8192 ? (b ? b : 1) : 8192);
}

/* Grid-stride loop over [0, n) inside a kernel. */
#define KG_FOR(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); \
         i += (size_t)gridDim.x * blockDim.x)

/* In a kg_X function: launch kernel `k` over n items (its first argument)
 * on stream s, return the launch's result; n == 0 returns KG_OK. */
#define KG_LAUNCH(k, n, s, ...) do { \
    if ((n) == 0) return KG_OK; \
    k<<<kg__blocks(n), KG_THREADS, 0, (s)>>>((n), __VA_ARGS__); \
    return kg__launched(); } while (0)

/* A flat index into an NHWC tensor [n][h][w][c]: image i, row y, column x,
 * channel ch. */
struct kg_nhwc { size_t i; int y, x, ch; };
static __device__ __forceinline__ kg_nhwc kg_nhwc_of(size_t idx, int h, int w,
                                                     int c)
{
    kg_nhwc o;
    o.ch = (int)(idx % (size_t)c);
    size_t p = idx / (size_t)c;
    o.x = (int)(p % (size_t)w);
    p /= (size_t)w;
    o.y = (int)(p % (size_t)h);
    o.i = p / (size_t)h;
    return o;
}

/* Row-major C[rows x cols] = op(A) op(B) + beta C on cuBLAS (kg_dense.cu);
 * ta/tb: A/B used transposed, inner: the shared dimension, ldc = cols.
 * beta is 0 or 1 (1: accumulate into C). */
int kg__gemm_rm(kg_blas_t h, kg_stream_t s, bool ta, bool tb, int rows,
                int cols, int inner, const float *A, int lda, const float *B,
                int ldb, float beta, float *C);

/* mixed_bfloat16 (kg_dense.cu): y[i] = x[i] rounded to bf16 (nearest
 * even), and kg__gemm_rm on bf16 operands with fp32 accumulation into an
 * fp32 C. */
typedef __nv_bfloat16 kg_bf16;
int kg__bf16_of(size_t n, const float *x, kg_bf16 *y, kg_stream_t s);
int kg__gemm_bf16_rm(kg_blas_t h, kg_stream_t s, bool ta, bool tb, int rows,
                     int cols, int inner, const kg_bf16 *A, int lda,
                     const kg_bf16 *B, int ldb, float beta, float *C);

/* ---- per-channel sums over the rows (kg_norm.cu, kg_dense.cu's db) -------
 * Block b owns channels b*cl .. b*cl + cl - 1 (cl a power of two up to 32,
 * so that a warp reads neighbouring channels of a row). Thread (tx, ty)
 * adds rows ty, ty + rl, ty + 2 rl, ... of its channel in row order (rl =
 * KG_THREADS / cl), then the rl lanes are added in a fixed tree in shared
 * memory. The order depends on rows and c only. F gives two terms per
 * (row, channel) and stores the channel's two sums. One block per 32
 * channels: a layer with few channels keeps few multiprocessors busy. */
template <class F>
__global__ void kg_colsum_k(size_t rows, int c, F f)
{
    __shared__ double sa[KG_THREADS], sb[KG_THREADS];
    unsigned tx = threadIdx.x, ty = threadIdx.y, cl = blockDim.x;
    unsigned t = ty * cl + tx;
    int j = (int)(blockIdx.x * cl + tx);
    double a = 0.0, b = 0.0;
    if (j < c)
        for (size_t r = ty; r < rows; r += blockDim.y) {
            double u, v;
            f.at(r, j, u, v);
            a += u;
            b += v;
        }
    sa[t] = a;
    sb[t] = b;
    __syncthreads();
    for (unsigned half = blockDim.y / 2; half > 0; half /= 2) {
        if (ty < half) {
            sa[t] += sa[t + half * cl];
            sb[t] += sb[t + half * cl];
        }
        __syncthreads();
    }
    if (ty == 0 && j < c)
        f.put(j, sa[tx], sb[tx]);
}

template <class F>
static int kg_colsum(size_t rows, int c, F f, kg_stream_t s)
{
    unsigned cl = 1;
    while (cl < 32 && cl < (unsigned)c)
        cl *= 2;
    dim3 block(cl, KG_THREADS / cl);
    unsigned blocks = ((unsigned)c + cl - 1) / cl;
    kg_colsum_k<<<blocks, block, 0, s>>>(rows, c, f);
    return kg__launched();
}

#endif /* STRATA_KG_INTERNAL_H */
