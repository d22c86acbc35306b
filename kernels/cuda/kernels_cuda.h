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

/* ---- dense layer (row-major, as kc_dense_*) ------------------------------
 * GEMM runs on cuBLAS; the handle is (re)bound to s on each call. b may be
 * NULL (no bias). */
int kg_dense_fwd(kg_blas_t h, int m, int k, int n, const float *X,
                 const float *W, const float *b, float *Y, kg_stream_t s);
int kg_dense_bwd(kg_blas_t h, int m, int k, int n, const float *X,
                 const float *W, const float *dY, float *dW, float *db,
                 float *dX, kg_stream_t s);
int kg_bias_add(int m, int n, const float *b, float *Y, kg_stream_t s);
/* db[j] = dY[0][j] + dY[1][j] + ... in row order (deterministic). */
int kg_bias_grad(int m, int n, const float *dY, float *db, kg_stream_t s);

/* ---- activations -------------------------------------------------------- */
int kg_relu_fwd(size_t n, const float *x, float *y, kg_stream_t s);
int kg_relu_bwd(size_t n, const float *y, const float *dy, float *dx,
                kg_stream_t s);

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
    double  loss_sum;  /* += sum over rows of -log softmax(logits)[label] */
    int64_t correct;   /* += rows whose argmax (first on ties) == label  */
    /* scratch of one call; ticket must start at 0 (kg_memset of the whole
     * struct) and each call leaves it at 0 again */
    double  part_loss[KG_XENT_MAX_BLOCKS];
    int64_t part_correct[KG_XENT_MAX_BLOCKS];
    uint32_t ticket;
    uint32_t pad_;
} kg_xent_acc_t;
#define KG_XENT_ACC_RESULT_BYTES (sizeof(double) + sizeof(int64_t))

/* dlogits (may be NULL, may alias logits) = (softmax - onehot) * scale. */
int kg_softmax_xent(int m, int c, const float *logits, const int32_t *labels,
                    float *dlogits, float scale, kg_xent_acc_t *acc,
                    kg_stream_t s);
/* *correct (device int64) += rows whose argmax (first on ties) == label. */
int kg_count_correct(int m, int c, const float *logits, const int32_t *labels,
                     int64_t *correct, kg_stream_t s);

/* ---- optimizer steps, in place, same formulas as kernels_cpu.h ----------
 * wd: the decoupled weight decay, first w -= (lr * wd) * w, as kc_*. */
int kg_sgd(size_t n, float *w, const float *g, float lr, float wd,
           kg_stream_t s);
int kg_momentum(size_t n, float *w, const float *g, float *v, float lr,
                float momentum, float wd, kg_stream_t s);
/* Bias corrections from double on the host, exactly as kc_adam (t < 1
 * counts as 1). */
int kg_adam(size_t n, float *w, const float *g, float *m, float *v, float lr,
            float b1, float b2, float eps, int64_t t, float wd,
            kg_stream_t s);

/* ---- vector helpers used by reductions ---------------------------------- */
int kg_scale(size_t n, float a, float *x, kg_stream_t s);
int kg_axpy(size_t n, float a, const float *x, float *y, kg_stream_t s);
/* dst = srcs[0] + srcs[1] + ... in that order (bitwise deterministic, and
 * bitwise equal to kc_sum); dst may equal srcs[0]. srcs is a HOST array of
 * nsrc >= 1 device pointers, read during the call only. */
int kg_sum(size_t n, float *dst, const float *const *srcs, int nsrc,
           kg_stream_t s);
int kg_u8_to_f32(size_t n, const uint8_t *src, float scale, float *dst,
                 kg_stream_t s);
/* scratch[0] (device) = sum of x[i]^2 in double: KG_SUMSQ_BLOCKS blocks of
 * partial sums in scratch[1..], added in a fixed tree order, so the same
 * bytes give the same bits on a given GPU (not necessarily kc_sumsq's).
 * scratch: device memory of KG_SUMSQ_SCRATCH doubles. */
#define KG_SUMSQ_BLOCKS 256
#define KG_SUMSQ_SCRATCH (KG_SUMSQ_BLOCKS + 1)
int kg_sumsq(size_t n, const float *x, double *scratch, kg_stream_t s);

/* ---- convolution and pooling: NHWC, row-major, as kernels_cpu.h -------
 * kg_conv_geom_t / kg_pool_geom_t have the members of kc_conv_geom_t /
 * kc_pool_geom_t in the same order (the same meaning: explicit padding,
 * oh/ow filled by the caller and >= 1). The geometry is read on the host
 * during the call. */
typedef struct kg_conv_geom {
    int n, h, w, c;
    int kh, kw, f;
    int stride_h, stride_w;
    int pad_top, pad_left;
    int oh, ow;
    int col_ready;
} kg_conv_geom_t;

/* Host function: floats of im2col workspace per image, oh*ow*kh*kw*c (as
 * kc_conv2d_col_len). `col` is DEVICE workspace of col_len floats, at least
 * this value (else KG_EINVAL); the images are lowered to GEMM in groups of
 * col_len / kg_conv2d_col_len(g), exactly as the CPU twin groups them. */
size_t kg_conv2d_col_len(const kg_conv_geom_t *g);
/* Y = conv(X, W) + b (b may be NULL). */
int kg_conv2d_fwd(kg_blas_t h, const kg_conv_geom_t *g, const float *X,
                  const float *W, const float *b, float *Y, float *col,
                  size_t col_len, kg_stream_t s);
/* dW, db (may be NULL) overwritten; dX overwritten when not NULL. dX is
 * gathered (each input sums the taps that read it, in the CPU's order):
 * deterministic, no atomics. */
int kg_conv2d_bwd(kg_blas_t h, const kg_conv_geom_t *g, const float *X,
                  const float *W, const float *dY, float *dW, float *db,
                  float *dX, float *col, size_t col_len, kg_stream_t s);

typedef struct kg_pool_geom {
    int n, h, w, c;
    int ph, pw, stride_h, stride_w;
    int oh, ow;
} kg_pool_geom_t;
/* argmax[o] = index in X of the first maximum in row-major window order
 * (NaN as the CPU twin: a NaN first element stays, a later one is never
 * chosen), so Y and argmax equal kc_maxpool2d_fwd's bit for bit. */
int kg_maxpool2d_fwd(const kg_pool_geom_t *g, const float *X, float *Y,
                     int32_t *argmax, kg_stream_t s);
/* dX overwritten: each input sums dY over the windows that chose it, in
 * output order (a gather, deterministic, the CPU's sums bit for bit).
 * argmax must come from kg_maxpool2d_fwd with the same geometry. */
int kg_maxpool2d_bwd(const kg_pool_geom_t *g, const float *dY,
                     const int32_t *argmax, float *dX, kg_stream_t s);

/* ---- inverted dropout: the CPU's counter-based hash ---------------------
 * Element i is kept exactly when kc_dropout_keep(seed, first + i, rate),
 * and y = x * (kept ? 1 / (1 - rate) : 0) as in kc_dropout_fwd/bwd: masks
 * and values equal the CPU's bit for bit (a NaN input stays NaN, though a
 * GPU may give it another payload). y may be x, dx may be dy;
 * 0 <= rate < 1. */
int kg_dropout_fwd(size_t n, const float *x, float *y, float rate,
                   uint64_t seed, uint64_t first, kg_stream_t s);
int kg_dropout_bwd(size_t n, const float *dy, float *dx, float rate,
                   uint64_t seed, uint64_t first, kg_stream_t s);

/* ---- tanh, sigmoid --------------------------------------------------------
 * Forward through CUDA's tanhf / expf: within a few ulps of libm, not
 * bitwise. Backward from the forward output y, same bits as kc_*:
 * tanh dx = dy * (1 - y*y), sigmoid dx = dy * y * (1 - y). In place allowed. */
int kg_tanh_fwd(size_t n, const float *x, float *y, kg_stream_t s);
int kg_tanh_bwd(size_t n, const float *y, const float *dy, float *dx,
                kg_stream_t s);
int kg_sigmoid_fwd(size_t n, const float *x, float *y, kg_stream_t s);
int kg_sigmoid_bwd(size_t n, const float *y, const float *dy, float *dx,
                   kg_stream_t s);

#ifdef __cplusplus
}
#endif
#endif /* STRATA_KERNELS_CUDA_H */
