/* strata_cuda.so, the CUDA module: kernels/cuda behind the per-device
 * interface of kops.h, and the contexts of the GPUs (one stream and one
 * cuBLAS handle each, made on first use, kept for the life of the process
 * like CUDA's own primary context). The core loads it only when GPUs are
 * wanted (core/device/cuda_load.c) and reaches it through the one exported table
 * at the end (core/device/cuda_module.h); it links no core code, and logs through
 * the core's logger handed to init. */
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/kernels_cuda.h"
#include "device/cuda_module.h"
#include "runtime.h"
#include "strata/plugin.h"

#ifndef STRATA_MAX_GPUS
#define STRATA_MAX_GPUS 64 /* GPU contexts per process */
#endif

static strata__cuda_log_fn g_log;

static void cuda_init(strata__cuda_log_fn log) { g_log = log; }

/* An error line through the core's logger. */
static void cuda_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static void cuda_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (g_log)
        g_log(STRATA_LOG_ERROR, "cuda", fmt, ap);
    va_end(ap);
}

typedef struct kdev_cuda {
    strata__kdev_t pub;    /* first: the kops functions get &pub */
    int            index;  /* CUDA device ordinal                 */
    kg_stream_t    stream;
    kg_blas_t      blas;
} kdev_cuda_t;

static kdev_cuda_t *cu(strata__kdev_t *k) { return (kdev_cuda_t *)k; }

/* One line naming the GPU, what failed and CUDA's reason. */
static int gpu_fail(int index, const char *what)
{
    cuda_error("gpu:%d: %s: %s", index, what, kg_last_error());
    return STRATA_EDEVICE;
}

/* Select the context's device for the calling thread (replica threads,
 * the main thread and plugins all call in), then make the kg_ call. */
#define KG(c, what, call)                                                    \
    ((kg_set_device((c)->index) != KG_OK || (call) != KG_OK)                 \
         ? gpu_fail((c)->index, (what)) : STRATA_OK)

/* ---- memory --------------------------------------------------------- */

static void *cu_alloc(strata__kdev_t *k, size_t bytes)
{
    kdev_cuda_t *c = cu(k);
    size_t n = bytes ? bytes : 64;
    void *p = NULL;
    if (KG(c, "allocate device memory", kg_malloc(&p, n, c->stream)) != 0)
        return NULL;
    /* Stream-ordered memory: the sync makes it usable on every stream
     * (a transport's) and guarantees the zeroes. */
    if (KG(c, "zero device memory", kg_memset(p, 0, n, c->stream)) != 0 ||
        KG(c, "allocate device memory", kg_stream_sync(c->stream)) != 0) {
        (void)kg_free(p, c->stream);
        return NULL;
    }
    return p;
}

static void cu_free(strata__kdev_t *k, void *p)
{
    kdev_cuda_t *c = cu(k);
    if (p)
        (void)KG(c, "free device memory", kg_free(p, c->stream));
}

static void *cu_host_alloc(strata__kdev_t *k, size_t bytes)
{
    kdev_cuda_t *c = cu(k);
    void *p = NULL;
    if (KG(c, "allocate page-locked host memory",
           kg_malloc_host(&p, bytes ? bytes : 64)) != 0)
        return NULL;
    return p;
}

static void cu_host_free(strata__kdev_t *k, void *p)
{
    kdev_cuda_t *c = cu(k);
    if (p)
        (void)KG(c, "free page-locked host memory", kg_free_host(p));
}

static int cu_copy(strata__kdev_t *k, int dir, void *dst, const void *src,
                   size_t bytes)
{
    kdev_cuda_t *c = cu(k);
    switch (dir) {
    case STRATA__H2D:
        return KG(c, "copy to the device",
                  kg_memcpy_h2d(dst, src, bytes, c->stream));
    case STRATA__D2H:
        return KG(c, "copy from the device",
                  kg_memcpy_d2h(dst, src, bytes, c->stream));
    default:
        return KG(c, "copy on the device",
                  kg_memcpy_d2d(dst, src, bytes, c->stream));
    }
}

static int cu_sync(strata__kdev_t *k)
{
    kdev_cuda_t *c = cu(k);
    return KG(c, "wait for the stream", kg_stream_sync(c->stream));
}

/* ---- kernels ---------------------------------------------------------- */

static void cu_xacc_fini(strata__kdev_t *k, strata__xacc_t *a)
{
    cu_free(k, a->dev);
    cu_host_free(k, a->host);
    memset(a, 0, sizeof *a);
}

static int cu_xacc_init(strata__kdev_t *k, strata__xacc_t *a)
{
    memset(a, 0, sizeof *a);
    a->dev = cu_alloc(k, sizeof(kg_xent_acc_t));
    a->host = cu_host_alloc(k, KG_XENT_ACC_RESULT_BYTES);
    if (!a->dev || !a->host) {
        cu_xacc_fini(k, a);
        return STRATA_ENOMEM;
    }
    return STRATA_OK;
}

static int cu_xent_zero(strata__kdev_t *k, strata__xacc_t *a)
{
    kdev_cuda_t *c = cu(k);
    return KG(c, "zero the loss accumulator",
              kg_memset(a->dev, 0, sizeof(kg_xent_acc_t), c->stream));
}

static int cu_loss(strata__kdev_t *k, const strata__lossfn_t *f, int m,
                   int nc, const float *x, const void *y, float *dx,
                   float scale, strata__xacc_t *a)
{
    kdev_cuda_t *c = cu(k);
    int sparse = f->kind == STRATA__LOSS_SPARSE, rc = STRATA_OK;
    if (f->top_k > 0)   /* before the loss: dx may overwrite x */
        rc = KG(c, "top-k accuracy",
                kg_topk_count(m, nc, f->top_k, x, sparse ? y : NULL,
                              sparse ? NULL : y, a->dev, c->stream));
    if (rc == STRATA_OK && f->metric == KOPS_METRIC_AUC)
        rc = KG(c, "AUC bins", kg_auc_hist(m, nc, x, y, a->dev, c->stream));
    int metric = f->top_k > 0 || f->metric == KOPS_METRIC_AUC ? -1
                                                              : f->metric;
    if (rc == STRATA_OK && sparse)
        rc = KG(c, "softmax cross-entropy",
                kg_softmax_xent(m, nc, x, y, dx, scale, metric >= 0, a->dev,
                                c->stream));
    else if (rc == STRATA_OK)
        rc = KG(c, "loss", kg_dense_loss(f->kind, metric, m, nc, x, y, dx,
                                         scale, a->dev, c->stream));
    return rc;
}

/* The step's one host synchronisation: loss and metric come back. */
static int cu_xent_read(strata__kdev_t *k, strata__xacc_t *a)
{
    kdev_cuda_t *c = cu(k);
    int rc = KG(c, "read the loss back",
                kg_memcpy_d2h(a->host, a->dev, a->hist_on
                                  ? KG_XENT_ACC_RESULT_BYTES
                                  : offsetof(kg_xent_acc_t, hist),
                              c->stream));
    if (rc == STRATA_OK)
        rc = KG(c, "wait for the step", kg_stream_sync(c->stream));
    if (rc == STRATA_OK) {
        const char *h = a->host;
        int64_t counted;
        double summed;
        memcpy(&a->loss, h + offsetof(kg_xent_acc_t, loss_sum),
               sizeof a->loss);
        memcpy(&counted, h + offsetof(kg_xent_acc_t, correct),
               sizeof counted);
        memcpy(&summed, h + offsetof(kg_xent_acc_t, metric), sizeof summed);
        a->metric = (double)counted + summed;
        if (a->hist_on)
            memcpy(a->hist, h + offsetof(kg_xent_acc_t, hist),
                   sizeof a->hist);
    }
    return rc;
}

/* The global gradient norm's sum: partial sums in device scratch, the
 * result read back and waited for (clipping happens once per step). */
static int cu_sumsq(strata__kdev_t *k, size_t n, const float *x, double *out)
{
    kdev_cuda_t *c = cu(k);
    void *scratch = NULL;
    int rc = KG(c, "allocate device memory",
                kg_malloc(&scratch, KG_SUMSQ_SCRATCH * sizeof(double),
                          c->stream));
    if (rc == STRATA_OK)
        rc = KG(c, "sum of squares", kg_sumsq(n, x, scratch, c->stream));
    if (rc == STRATA_OK)
        rc = KG(c, "read the sum of squares back",
                kg_memcpy_d2h(out, scratch, sizeof *out, c->stream));
    if (rc == STRATA_OK)
        rc = KG(c, "wait for the stream", kg_stream_sync(c->stream));
    if (scratch)
        (void)KG(c, "free device memory", kg_free(scratch, c->stream));
    return rc;
}

/* The ops of the list: kg_NAME on the device's stream, after its cuBLAS
 * handle where the op runs GEMM. (The device is cu_dev_: an op's own
 * parameters may be called c.) */
#define CU_BLAS_0
#define CU_BLAS_1 cu_dev_->blas,
#define KOP(name, blas, what, params, args, data)                            \
    static int cu_##name(strata__kdev_t *k, KOP_UNPAREN params)              \
    {                                                                        \
        kdev_cuda_t *cu_dev_ = cu(k);                                        \
        return KG(cu_dev_, what,                                             \
                  kg_##name(CU_BLAS_##blas KOP_UNPAREN args,                 \
                            cu_dev_->stream));                               \
    }
#include "../../../kernels/kops_list.h"
#undef KOP

/* mixed_bfloat16: kg_*_bf16 (the run has checked the GPUs' arch). */
static int cu_conv2d_fwd_bf16(strata__kdev_t *k, const kops_conv2d_t *g,
                              const float *X, const float *W, const float *b,
                              float *Y, float *work, size_t work_len)
{
    kdev_cuda_t *c = cu(k);
    return KG(c, "conv2d forward (bf16)",
              kg_conv2d_fwd_bf16(c->blas, g, X, W, b, Y, work, work_len,
                                 c->stream));
}

static int cu_conv2d_bwd_bf16(strata__kdev_t *k, const kops_conv2d_t *g,
                              const float *X, const float *W, const float *Y,
                              float *dY, float *dW, float *db, float *dX,
                              float *work, size_t work_len)
{
    kdev_cuda_t *c = cu(k);
    if (Y) {          /* the relu's mask and db, then the plain backward */
        int rows = g->n > 0 ? g->n * g->oh * g->ow : 0;
        int rc = KG(c, "relu backward and bias gradient",
                    kg_relu_bias_grad(rows, g->f, Y, dY, db, c->stream));
        if (rc != STRATA_OK)
            return rc;
        db = NULL;
    }
    return KG(c, "conv2d backward (bf16)",
              kg_conv2d_bwd_bf16(c->blas, g, X, W, dY, dW, db, dX, work,
                                 work_len, c->stream));
}

static int cu_dense_fwd_bf16(strata__kdev_t *k, int m, int kk, int n,
                             const float *X, const float *W, const float *b,
                             float *Y, float *work, size_t work_len)
{
    kdev_cuda_t *c = cu(k);
    return KG(c, "dense forward (bf16)",
              kg_dense_fwd_bf16(c->blas, m, kk, n, X, W, b, Y, work, work_len,
                                c->stream));
}

static int cu_dense_bwd_bf16(strata__kdev_t *k, int m, int kk, int n,
                             const float *X, const float *W, const float *dY,
                             float *dW, float *db, float *dX, float *work,
                             size_t work_len)
{
    kdev_cuda_t *c = cu(k);
    return KG(c, "dense backward (bf16)",
              kg_dense_bwd_bf16(c->blas, m, kk, n, X, W, dY, dW, db, dX, work,
                                work_len, c->stream));
}

static const strata__kops_t k_kops_cuda = {
    .name = "cuda",
    .alloc = cu_alloc,
    .free = cu_free,
    .host_alloc = cu_host_alloc,
    .host_free = cu_host_free,
    .copy = cu_copy,
    .sync = cu_sync,
    .xacc_init = cu_xacc_init,
    .xacc_fini = cu_xacc_fini,
    .xent_zero = cu_xent_zero,
    .loss = cu_loss,
    .xent_read = cu_xent_read,
    .sumsq = cu_sumsq,
    .conv2d_fwd_bf16 = cu_conv2d_fwd_bf16,
    .conv2d_bwd_bf16 = cu_conv2d_bwd_bf16,
    .dense_fwd_bf16 = cu_dense_fwd_bf16,
    .dense_bwd_bf16 = cu_dense_bwd_bf16,
#define KOP(name, blas, what, params, args, data) .name = cu_##name,
#include "../../../kernels/kops_list.h"
#undef KOP
};

/* ---- the GPUs of this process ------------------------------------------ */

static pthread_once_t  g_once = PTHREAD_ONCE_INIT;
static int             g_count;
static char            g_why[256];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static kdev_cuda_t    *g_dev[STRATA_MAX_GPUS];

static void probe(void)
{
    int n = 0;
    (void)kg_device_count(&n); /* never fails; n = 0 says "none" */
    g_count = n;
    snprintf(g_why, sizeof g_why, "%s", kg_last_error());
}

static int cuda_gpu_count(int *n, const char **why)
{
    pthread_once(&g_once, probe);
    *n = g_count;
    *why = g_why;
    return STRATA_OK;
}

static int make(int index, kdev_cuda_t **out)
{
    kdev_cuda_t *c = calloc(1, sizeof *c);
    if (!c)
        return STRATA_ENOMEM;
    c->pub.ops = &k_kops_cuda;
    c->pub.device = STRATA_DEVICE(STRATA_DEV_GPU, index);
    c->index = index;
    int rc = KG(c, "create a stream", kg_stream_create(&c->stream));
    if (rc == STRATA_OK)
        rc = KG(c, "create a cuBLAS handle", kg_blas_create(&c->blas,
                                                             c->stream));
    if (rc != STRATA_OK) {
        (void)kg_stream_destroy(c->stream);
        free(c);
        return rc;
    }
    *out = c;
    return STRATA_OK;
}

static int cuda_kdev_gpu(int index, strata__kdev_t **out)
{
    *out = NULL;
    int n;
    const char *why;
    cuda_gpu_count(&n, &why);
    if (n == 0) {
        cuda_error("gpu:%d: no CUDA device: %s", index, why);
        return STRATA_EDEVICE;
    }
    if (index < 0 || index >= n || index >= STRATA_MAX_GPUS) {
        if (n == 1)
            cuda_error("gpu:%d: no such GPU (this process sees one: "
                       "gpu:0)", index);
        else
            cuda_error("gpu:%d: no such GPU (this process sees %d: gpu:0 "
                       "to gpu:%d)", index, n, n - 1);
        return STRATA_EDEVICE;
    }
    pthread_mutex_lock(&g_lock);
    int rc = STRATA_OK;
    if (!g_dev[index])
        rc = make(index, &g_dev[index]);
    kdev_cuda_t *c = g_dev[index];
    pthread_mutex_unlock(&g_lock);
    if (rc == STRATA_OK)
        *out = &c->pub;
    return rc;
}

static int cuda_gpu_arch(int index, int *major, int *minor)
{
    int n;
    const char *why;
    cuda_gpu_count(&n, &why);
    if (index < 0 || index >= n)
        return STRATA_EDEVICE;
    return kg_device_arch(index, major, minor) == KG_OK ? STRATA_OK
                                                        : STRATA_EDEVICE;
}

/* ---- the one exported symbol --------------------------------------------- */

STRATA_EXPORT const strata_cuda_v1_t strata_cuda_v1 = {
    .struct_size = sizeof(strata_cuda_v1_t),
    .kops_size = sizeof(strata__kops_t),
    .version = STRATA_VERSION_STRING,
    .init = cuda_init,
    .gpu_count = cuda_gpu_count,
    .kdev_gpu = cuda_kdev_gpu,
    .gpu_arch = cuda_gpu_arch,
};
