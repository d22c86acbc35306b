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

static int cpu_dense_fwd(strata__kdev_t *k, int m, int kk, int n,
                         const float *X, const float *W, const float *b,
                         float *Y)
{
    (void)k;
    kc_dense_fwd(m, kk, n, X, W, b, Y);
    return STRATA_OK;
}

static int cpu_dense_bwd(strata__kdev_t *k, int m, int kk, int n,
                         const float *X, const float *W, const float *dY,
                         float *dW, float *db, float *dX)
{
    (void)k;
    kc_dense_bwd(m, kk, n, X, W, dY, dW, db, dX);
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
    a->correct = 0;
    return STRATA_OK;
}

static int cpu_softmax_xent(strata__kdev_t *k, int m, int c,
                            const float *logits, const int32_t *labels,
                            float *dlogits, float scale, strata__xacc_t *a)
{
    (void)k;
    a->loss += kc_softmax_xent(m, c, logits, labels, dlogits, scale,
                               &a->correct);
    return STRATA_OK;
}

static int cpu_xent_read(strata__kdev_t *k, strata__xacc_t *a)
{
    (void)k;
    (void)a;
    return STRATA_OK;
}

static int cpu_sgd(strata__kdev_t *k, size_t n, float *w, const float *g,
                   float lr, float wd)
{
    (void)k;
    kc_sgd(n, w, g, lr, wd);
    return STRATA_OK;
}

static int cpu_momentum(strata__kdev_t *k, size_t n, float *w, const float *g,
                        float *v, float lr, float momentum, float wd)
{
    (void)k;
    kc_momentum(n, w, g, v, lr, momentum, wd);
    return STRATA_OK;
}

static int cpu_adam(strata__kdev_t *k, size_t n, float *w, const float *g,
                    float *m, float *v, float lr, float b1, float b2,
                    float eps, int64_t t, float wd)
{
    (void)k;
    kc_adam(n, w, g, m, v, lr, b1, b2, eps, t, wd);
    return STRATA_OK;
}

static int cpu_sumsq(strata__kdev_t *k, size_t n, const float *x, double *out)
{
    (void)k;
    *out = kc_sumsq(n, x);
    return STRATA_OK;
}

static int cpu_scale(strata__kdev_t *k, size_t n, float a, float *x)
{
    (void)k;
    kc_scale(n, a, x);
    return STRATA_OK;
}

static int cpu_axpy(strata__kdev_t *k, size_t n, float a, const float *x,
                    float *y)
{
    (void)k;
    kc_axpy(n, a, x, y);
    return STRATA_OK;
}

static int cpu_sum(strata__kdev_t *k, size_t n, float *dst,
                   const float *const *srcs, int nsrc)
{
    (void)k;
    kc_sum(n, dst, srcs, nsrc);
    return STRATA_OK;
}

static int cpu_u8_to_f32(strata__kdev_t *k, size_t n, const uint8_t *src,
                         float scale, float *dst)
{
    (void)k;
    kc_u8_to_f32(n, src, scale, dst);
    return STRATA_OK;
}

/* strata__conv_t / strata__pool_t have the kernels' members in order. */
_Static_assert(sizeof(strata__conv_t) == sizeof(kc_conv_geom_t),
               "strata__conv_t must mirror kc_conv_geom_t");
_Static_assert(sizeof(strata__pool_t) == sizeof(kc_pool_geom_t),
               "strata__pool_t must mirror kc_pool_geom_t");

static kc_conv_geom_t kc_conv(const strata__conv_t *g)
{
    return (kc_conv_geom_t){ g->n, g->h, g->w, g->c, g->kh, g->kw, g->f,
                             g->stride_h, g->stride_w, g->pad_top,
                             g->pad_left, g->oh, g->ow, g->col_ready };
}

static kc_pool_geom_t kc_pool(const strata__pool_t *g)
{
    return (kc_pool_geom_t){ g->n, g->h, g->w, g->c, g->ph, g->pw,
                             g->stride_h, g->stride_w, g->oh, g->ow };
}

static int cpu_conv2d_fwd(strata__kdev_t *k, const strata__conv_t *g,
                          const float *X, const float *W, const float *b,
                          float *Y, float *col, size_t col_len)
{
    (void)k;
    kc_conv_geom_t kg = kc_conv(g);
    kc_conv2d_fwd(&kg, X, W, b, Y, col, col_len);
    return STRATA_OK;
}

static int cpu_conv2d_bwd(strata__kdev_t *k, const strata__conv_t *g,
                          const float *X, const float *W, const float *dY,
                          float *dW, float *db, float *dX, float *col,
                          size_t col_len)
{
    (void)k;
    kc_conv_geom_t kg = kc_conv(g);
    kc_conv2d_bwd(&kg, X, W, dY, dW, db, dX, col, col_len);
    return STRATA_OK;
}

static int cpu_maxpool2d_fwd(strata__kdev_t *k, const strata__pool_t *g,
                             const float *X, float *Y, int32_t *argmax)
{
    (void)k;
    kc_pool_geom_t kg = kc_pool(g);
    kc_maxpool2d_fwd(&kg, X, Y, argmax);
    return STRATA_OK;
}

static int cpu_maxpool2d_bwd(strata__kdev_t *k, const strata__pool_t *g,
                             const float *dY, const int32_t *argmax,
                             float *dX)
{
    (void)k;
    kc_pool_geom_t kg = kc_pool(g);
    kc_maxpool2d_bwd(&kg, dY, argmax, dX);
    return STRATA_OK;
}

static int cpu_dropout_fwd(strata__kdev_t *k, size_t n, const float *x,
                           float *y, float rate, uint64_t seed, uint64_t first)
{
    (void)k;
    kc_dropout_fwd(n, x, y, rate, seed, first);
    return STRATA_OK;
}

static int cpu_dropout_bwd(strata__kdev_t *k, size_t n, const float *dy,
                           float *dx, float rate, uint64_t seed,
                           uint64_t first)
{
    (void)k;
    kc_dropout_bwd(n, dy, dx, rate, seed, first);
    return STRATA_OK;
}

/* The elementwise activations: one wrapper shape each way. */
#define CPU_ACT(name)                                                        \
    static int cpu_##name##_fwd(strata__kdev_t *k, size_t n, const float *x, \
                                float *y)                                    \
    {                                                                        \
        (void)k;                                                             \
        kc_##name##_fwd(n, x, y);                                            \
        return STRATA_OK;                                                    \
    }                                                                        \
    static int cpu_##name##_bwd(strata__kdev_t *k, size_t n, const float *y, \
                                const float *dy, float *dx)                  \
    {                                                                        \
        (void)k;                                                             \
        kc_##name##_bwd(n, y, dy, dx);                                       \
        return STRATA_OK;                                                    \
    }
CPU_ACT(relu)
CPU_ACT(tanh)
CPU_ACT(sigmoid)

const strata__kops_t strata__kops_cpu = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .host_alloc = cpu_alloc,
    .host_free = cpu_free,
    .copy = cpu_copy,
    .sync = cpu_sync,
    .dense_fwd = cpu_dense_fwd,
    .dense_bwd = cpu_dense_bwd,
    .relu_fwd = cpu_relu_fwd,
    .relu_bwd = cpu_relu_bwd,
    .xacc_init = cpu_xacc_init,
    .xacc_fini = cpu_xacc_fini,
    .xent_zero = cpu_xent_zero,
    .softmax_xent = cpu_softmax_xent,
    .xent_read = cpu_xent_read,
    .sgd = cpu_sgd,
    .momentum = cpu_momentum,
    .adam = cpu_adam,
    .sumsq = cpu_sumsq,
    .scale = cpu_scale,
    .axpy = cpu_axpy,
    .sum = cpu_sum,
    .u8_to_f32 = cpu_u8_to_f32,
    .conv2d_fwd = cpu_conv2d_fwd,
    .conv2d_bwd = cpu_conv2d_bwd,
    .maxpool2d_fwd = cpu_maxpool2d_fwd,
    .maxpool2d_bwd = cpu_maxpool2d_bwd,
    .dropout_fwd = cpu_dropout_fwd,
    .dropout_bwd = cpu_dropout_bwd,
    .tanh_fwd = cpu_tanh_fwd,
    .tanh_bwd = cpu_tanh_bwd,
    .sigmoid_fwd = cpu_sigmoid_fwd,
    .sigmoid_bwd = cpu_sigmoid_bwd,
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
