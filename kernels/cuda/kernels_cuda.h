/* CUDA compute kernels: the twin of kernels/cpu/kernels_cpu.h on the GPU.
 * Each kg_X takes the arguments of kc_X plus a stream (and a cuBLAS handle
 * for GEMM); every data pointer is a DEVICE pointer unless said otherwise.
 * Like the CPU kernels they know nothing of strata, never log and never
 * exit; unlike them they only ENQUEUE work on the stream and return at once:
 * no function here waits for the GPU except kg_stream_sync and (by CUDA's
 * rules) copies to pageable host memory.
 *
 * Return value: 0, or
 *   KG_ECUDA   (-1) a CUDA call or kernel launch failed (also an earlier
 *                   asynchronous failure seen by this call),
 *   KG_ECUBLAS (-2) a cuBLAS call failed,
 *   KG_EINVAL  (-3) a NULL handle, accumulator or output where one is needed.
 * kg_last_error() then names the cause (per thread, static string).
 * Sizes <= 0 do what the CPU twin does (nothing, or zeros where kc writes
 * zeros), not an error. Elementwise kernels are built without FMA
 * contraction, so relu, SGD, momentum, Adam, scale, axpy, sum, bias and
 * u8_to_f32 give the same bits as kc_* where the C compiler does not
 * contract either (x86-64 default); GEMM and the loss agree to ~1e-6.
 *
 * Including this header needs no CUDA header: streams and cuBLAS handles are
 * opaque pointers of the same types as cudaStream_t and cublasHandle_t. A
 * NULL stream is the legacy default stream. The calling thread's current
 * device (kg_set_device) must be the one that owns the pointers. */
#ifndef STRATA_KERNELS_CUDA_H
#define STRATA_KERNELS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "../kops_list.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CUstream_st *kg_stream_t;      /* == cudaStream_t   */
typedef struct cublasContext *kg_blas_t;      /* == cublasHandle_t */

enum { KG_OK = 0, KG_ECUDA = -1, KG_ECUBLAS = -2, KG_EINVAL = -3 };

/* Why the calling thread's last kg_* call failed (or why kg_device_count
 * found no device): a static string, never NULL ("no error" at start). */
const char *kg_last_error(void);

/* ---- devices, streams, memory ------------------------------------------ */
/* *n = number of usable CUDA devices. No driver, no device or a broken
 * install give *n = 0 and return 0 (kg_last_error() says why): never an
 * error, never a crash, so callers can probe freely. */
int kg_device_count(int *n);
int kg_set_device(int dev);                 /* for the calling thread */
/* The compute capability of device dev (8.0 and up: bf16 tensor cores,
 * which the *_bf16 ops below need). */
int kg_device_arch(int dev, int *major, int *minor);

int kg_stream_create(kg_stream_t *out);     /* non-blocking stream; NULL on failure */
int kg_stream_destroy(kg_stream_t s);       /* NULL: no-op */
int kg_stream_sync(kg_stream_t s);          /* waits for all work on s */

/* Stream-ordered device memory: the block is usable by work enqueued on s
 * after the call (other streams: after a sync). bytes == 0 gives *p = NULL.
 * kg_free(NULL) is a no-op. */
int kg_malloc(void **p, size_t bytes, kg_stream_t s);
int kg_free(void *p, kg_stream_t s);
/* Page-locked host memory: copies to/from it are truly asynchronous. */
int kg_malloc_host(void **p, size_t bytes);
int kg_free_host(void *p);
/* Asynchronous copies on s. With pageable host memory CUDA may block the
 * caller; use kg_malloc_host for the per-step loss read-back. */
int kg_memcpy_h2d(void *dst, const void *src, size_t bytes, kg_stream_t s);
int kg_memcpy_d2h(void *dst, const void *src, size_t bytes, kg_stream_t s);
int kg_memcpy_d2d(void *dst, const void *src, size_t bytes, kg_stream_t s);
int kg_memset(void *dst, int byte, size_t bytes, kg_stream_t s);

/* A cuBLAS handle bound to s, in plain FP32 math (no TF32; note that the
 * NVIDIA_TF32_OVERRIDE=1 environment variable can still force TF32). */
int kg_blas_create(kg_blas_t *out, kg_stream_t s);  /* NULL on failure */
int kg_blas_destroy(kg_blas_t h);                   /* NULL: no-op */

/* ---- the ops of the kernel table, declared once in ../kops_list.h ------
 * int kg_NAME([kg_blas_t h,] PARAMS..., kg_stream_t s) for each: the
 * arguments of kc_NAME plus a stream, and a cuBLAS handle first for the
 * ops that run GEMM (dense, conv2d: the handle is (re)bound to s on each
 * call). Results: the same bits as kc_NAME where the list says so, else
 * as the header's comment above says. */
#define KG_BLAS_0
#define KG_BLAS_1 kg_blas_t h,
#define KOP(name, blas, what, params, args, data) \
    int kg_##name(KG_BLAS_##blas KOP_UNPAREN params, kg_stream_t s);
#include "../kops_list.h"
#undef KOP

/* ---- the GPU kernels outside the table ----------------------------------- */
/* Y[m x n] += b[n], as kc_bias_add. */
int kg_bias_add(int m, int n, const float *b, float *Y, kg_stream_t s);
/* db[j] = dY[0][j] + dY[1][j] + ... in row order in double, rounded once:
 * kc_bias_grad's bits. */
int kg_bias_grad(int m, int n, const float *dY, float *db, kg_stream_t s);

/* ---- fused softmax + sparse categorical cross-entropy --------------------
 * The loss and accuracy must reach the host, but reading them back after
 * every call would stall the GPU. So kg_softmax_xent ACCUMULATES them into a
 * device-resident kg_xent_acc_t: zero it once per step (kg_memset), call
 * kg_softmax_xent for each micro-batch, then copy the first
 * KG_XENT_ACC_RESULT_BYTES bytes (loss_sum, correct) to pinned host memory
 * once per step. The sum is bitwise deterministic for a given m and c (fixed
 * per-block partials, combined in block order by the last block; no
 * floating-point atomics). One accumulator serves one stream at a time.
 * Row loss = log-sum-exp(row) - row[label] (max-shifted). A label outside
 * [0, c) makes that row's loss NaN and its gradient softmax * scale. */
#define KG_XENT_MAX_BLOCKS 256
typedef struct kg_xent_acc {
    double  loss_sum;  /* += sum over rows of the row loss                 */
    int64_t correct;   /* += rows counted (argmax == label, top-k)         */
    double  metric;    /* += sum over rows of kg_dense_loss's row metric   */
    double  hist[2 * KOPS_AUC_BINS]; /* += kg_auc_hist's                   */
    /* scratch of one call; ticket must start at 0 (kg_memset of the whole
     * struct) and each call leaves it at 0 again */
    double  part_loss[KG_XENT_MAX_BLOCKS];
    int64_t part_correct[KG_XENT_MAX_BLOCKS];
    double  part_metric[KG_XENT_MAX_BLOCKS];
    uint32_t ticket;
    uint32_t pad_;
} kg_xent_acc_t;
#define KG_XENT_ACC_RESULT_BYTES \
    ((2 + 2 * KOPS_AUC_BINS) * sizeof(double) + sizeof(int64_t))

/* dlogits (may be NULL, may alias logits) = (softmax - onehot) * scale.
 * count: 1 adds the rows whose argmax == label to acc->correct, 0 not. */
int kg_softmax_xent(int m, int c, const float *logits, const int32_t *labels,
                    float *dlogits, float scale, int count,
                    kg_xent_acc_t *acc, kg_stream_t s);
/* *correct (device int64) += rows whose argmax (first on ties) == label. */
int kg_count_correct(int m, int c, const float *logits, const int32_t *labels,
                     int64_t *correct, kg_stream_t s);
/* kc_dense_loss on the device (its kinds and metrics, the same formulas in
 * the same precision): loss and metric accumulated into acc as
 * kg_softmax_xent's, deterministic for a given m and c. */
int kg_dense_loss(int kind, int metric, int m, int c, const float *x,
                  const float *y, float *dx, float scale, kg_xent_acc_t *acc,
                  kg_stream_t s);
/* acc->hist += kc_auc_hist(m, c, x, y) (double atomics: the order of the
 * additions varies, exact for 0/1 labels). */
int kg_auc_hist(int m, int c, const float *x, const float *y,
                kg_xent_acc_t *acc, kg_stream_t s);
/* acc->correct += kc_topk_count(m, c, k, x, labels, y) (integer atomics:
 * order-free). Call before a loss that overwrites x. */
int kg_topk_count(int m, int c, int k, const float *x, const int32_t *labels,
                  const float *y, kg_xent_acc_t *acc, kg_stream_t s);

/* scratch[0] (device) = sum of x[i]^2 in double: KG_SUMSQ_BLOCKS blocks of
 * partial sums in scratch[1..], added in a fixed tree order, so the same
 * bytes give the same bits on a given GPU (not necessarily kc_sumsq's).
 * scratch: device memory of KG_SUMSQ_SCRATCH doubles. */
#define KG_SUMSQ_BLOCKS 256
#define KG_SUMSQ_SCRATCH (KG_SUMSQ_BLOCKS + 1)
int kg_sumsq(size_t n, const float *x, double *scratch, kg_stream_t s);

/* ---- mixed_bfloat16: bf16 GEMM inputs, fp32 accumulation ----------------
 * The twins of kernels_cpu.h's kc_*_bf16 on a GPU of compute capability
 * 8.0 or newer: the operands are rounded to bf16 (round to nearest even,
 * __float2bfloat16_rn) into `work` and multiplied by cuBLAS GemmEx with
 * fp32 accumulation (CUBLAS_COMPUTE_32F, tensor cores); bias, relu,
 * outputs and gradients fp32, as the float32 ops. `work`: DEVICE memory of
 * work_len floats, at least kops_conv2d_bf16_gpu_len(g, 1) /
 * kops_dense_bf16_gpu_len(m, kk, n) (kops_list.h; else KG_EINVAL); a
 * conv2d takes as many images per GEMM as work_len holds. Deterministic
 * on a given GPU for given shapes and work_len (cuBLAS's guarantee), not
 * the CPU's bits. */
int kg_conv2d_fwd_bf16(kg_blas_t h, const kops_conv2d_t *g, const float *X,
                       const float *W, const float *b, float *Y, float *work,
                       size_t work_len, kg_stream_t s);
int kg_conv2d_bwd_bf16(kg_blas_t h, const kops_conv2d_t *g, const float *X,
                       const float *W, const float *dY, float *dW, float *db,
                       float *dX, float *work, size_t work_len,
                       kg_stream_t s);
int kg_dense_fwd_bf16(kg_blas_t h, int m, int kk, int n, const float *X,
                      const float *W, const float *b, float *Y, float *work,
                      size_t work_len, kg_stream_t s);
int kg_dense_bwd_bf16(kg_blas_t h, int m, int kk, int n, const float *X,
                      const float *W, const float *dY, float *dW, float *db,
                      float *dX, float *work, size_t work_len,
                      kg_stream_t s);

/* Host function: kops_conv2d_col_len(g), the im2col workspace of one
 * image; conv2d's `col` is DEVICE workspace of at least this many floats
 * (else KG_EINVAL). */
size_t kg_conv2d_col_len(const kops_conv2d_t *g);

#ifdef __cplusplus
}
#endif
#endif /* STRATA_KERNELS_CUDA_H */
