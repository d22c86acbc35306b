/* The CPU kernel table: kernels/cpu behind the per-device interface of
 * kops.h. Everything is done when a call returns; nothing can fail. */
#include <stdlib.h>
#include <string.h>

#include "kernels_cpu.h"
#include "runtime.h"

#define CPU0 STRATA_DEVICE(STRATA_DEV_CPU, 0)

static void *cpu_alloc(strata__kdev_t *k, size_t bytes)
{
    (void)k;
    return strata__dev_alloc(CPU0, bytes);
}

static void cpu_free(strata__kdev_t *k, void *p)
{
    (void)k;
    strata__dev_free(CPU0, p);
}

static int cpu_copy(strata__kdev_t *k, int dir, void *dst, const void *src,
                    size_t bytes)
{
    (void)k;
    (void)dir;
    if (bytes)
        memmove(dst, src, bytes);
    return STRATA_OK;
}

static int cpu_sync(strata__kdev_t *k)
{
    (void)k;
    return STRATA_OK;
}

static int cpu_xacc_init(strata__kdev_t *k, strata__xacc_t *a)
{
    (void)k;
    memset(a, 0, sizeof *a);
    return STRATA_OK;
}

static void cpu_xacc_fini(strata__kdev_t *k, strata__xacc_t *a)
{
    (void)k;
    memset(a, 0, sizeof *a);
}

static int cpu_xent_zero(strata__kdev_t *k, strata__xacc_t *a)
{
    (void)k;
    a->loss = 0.0;
    a->metric = 0.0;
    if (a->hist_on)
        memset(a->hist, 0, sizeof a->hist);
    return STRATA_OK;
}

static int cpu_loss(strata__kdev_t *k, const strata__lossfn_t *f, int m,
                    int c, const float *x, const void *y, float *dx,
                    float scale, strata__xacc_t *a)
{
    (void)k;
    int sparse = f->kind == STRATA__LOSS_SPARSE;
    if (f->top_k > 0)   /* before the loss: dx may overwrite x */
        a->metric += (double)kc_topk_count(m, c, f->top_k, x,
                                           sparse ? y : NULL,
                                           sparse ? NULL : y);
    if (f->metric == KOPS_METRIC_AUC)   /* before the loss, as top-k */
        kc_auc_hist(m, c, x, y, a->hist);
    int metric = f->top_k > 0 || f->metric == KOPS_METRIC_AUC ? -1
                                                              : f->metric;
    if (sparse) {
        int64_t n = 0;
        a->loss += kc_softmax_xent(m, c, x, y, dx, scale,
                                   metric >= 0 ? &n : NULL);
        a->metric += (double)n;
    } else {
        a->loss += kc_dense_loss(f->kind, metric, m, c, x, y, dx, scale,
                                 &a->metric);
    }
    return STRATA_OK;
}

static int cpu_xent_read(strata__kdev_t *k, strata__xacc_t *a)
{
    (void)k;
    (void)a;
    return STRATA_OK;
}

static int cpu_sumsq(strata__kdev_t *k, size_t n, const float *x, double *out)
{
    (void)k;
    *out = kc_sumsq(n, x);
    return STRATA_OK;
}

/* mixed_bfloat16: kc_*_bf16 (the run has checked kc_bf16_usable()). */
static int cpu_conv2d_fwd_bf16(strata__kdev_t *k, const kops_conv2d_t *g,
                               const float *X, const float *W, const float *b,
                               float *Y, float *work, size_t work_len)
{
    (void)k;
    kc_conv2d_fwd_bf16(g, X, W, b, Y, work, work_len);
    return STRATA_OK;
}

static int cpu_conv2d_bwd_bf16(strata__kdev_t *k, const kops_conv2d_t *g,
                               const float *X, const float *W, const float *Y,
                               float *dY, float *dW, float *db, float *dX,
                               float *work, size_t work_len)
{
    (void)k;
    if (Y)
        kc_conv2d_bwd_relu_bf16(g, X, W, Y, dY, dW, db, dX, work, work_len);
    else
        kc_conv2d_bwd_bf16(g, X, W, dY, dW, db, dX, work, work_len);
    return STRATA_OK;
}

static int cpu_dense_fwd_bf16(strata__kdev_t *k, int m, int kk, int n,
                              const float *X, const float *W, const float *b,
                              float *Y, float *work, size_t work_len)
{
    (void)k;
    kc_dense_fwd_bf16(m, kk, n, X, W, b, Y, work, work_len);
    return STRATA_OK;
}

static int cpu_dense_bwd_bf16(strata__kdev_t *k, int m, int kk, int n,
                              const float *X, const float *W, const float *dY,
                              float *dW, float *db, float *dX, float *work,
                              size_t work_len)
{
    (void)k;
    kc_dense_bwd_bf16(m, kk, n, X, W, dY, dW, db, dX, work, work_len);
    return STRATA_OK;
}

/* The ops of the list: kc_NAME, done when it returns. */
#define KOP(name, blas, what, params, args, data)                            \
    static int cpu_##name(strata__kdev_t *k, KOP_UNPAREN params)             \
    {                                                                        \
        (void)k;                                                             \
        kc_##name args;                                                      \
        return STRATA_OK;                                                    \
    }
#include "../../kernels/kops_list.h"
#undef KOP

const strata__kops_t strata__kops_cpu = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .host_alloc = cpu_alloc,
    .host_free = cpu_free,
    .copy = cpu_copy,
    .sync = cpu_sync,
    .xacc_init = cpu_xacc_init,
    .xacc_fini = cpu_xacc_fini,
    .xent_zero = cpu_xent_zero,
    .loss = cpu_loss,
    .xent_read = cpu_xent_read,
    .sumsq = cpu_sumsq,
    .conv2d_fwd_bf16 = cpu_conv2d_fwd_bf16,
    .conv2d_bwd_bf16 = cpu_conv2d_bwd_bf16,
    .dense_fwd_bf16 = cpu_dense_fwd_bf16,
    .dense_bwd_bf16 = cpu_dense_bwd_bf16,
#define KOP(name, blas, what, params, args, data) .name = cpu_##name,
#include "../../kernels/kops_list.h"
#undef KOP
};

/* CPU devices have no state of their own: they share this context. */
static strata__kdev_t g_cpu = { &strata__kops_cpu, CPU0 };

int strata__kdev_get(int32_t device, strata__kdev_t **out)
{
    switch (STRATA_DEVICE_TYPE(device)) {
    case STRATA_DEV_CPU:
        *out = &g_cpu;
        return STRATA_OK;
    case STRATA_DEV_GPU:
        return strata__kdev_gpu(STRATA_DEVICE_INDEX(device), out);
    default:
        *out = NULL;
        strata__log(STRATA_LOG_ERROR, "device", "device id %#x: unknown "
                    "device type", (unsigned)device);
        return STRATA_ENOTSUP;
    }
}
