/* A stand-in for kernels/cuda on the CPU, to test the core's GPU path
 * (the CUDA module's core/cuda/kops_cuda.c, and cuda_load.c, device.c,
 * model.c, optimizer.c) where no GPU exists: built with kops_cuda.c into
 * strata_cuda_fake.so, which the test's core loads as it would the real
 * strata_cuda.so.
 *
 * "Device" memory is host memory that this file hands out and keeps a
 * record of, per fake device; every kg_* call checks where its pointers
 * are: a kernel's data must be device memory of the calling thread's
 * current device (kg_set_device), a copy's ends must be on the side its
 * name says, and so on. Each breach is printed and counted
 * (fake_kg_violations), so host/device mix-ups, a missing kg_set_device
 * or a buffer too small show up as test failures. Work runs at once, on
 * the CPU kernels, so results equal the CPU path's bit for bit.
 * FAKE_KG_DEVICES (default 2) is the number of devices it reports. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels_cpu.h"
#include "cuda/kernels_cuda.h"
#include "fake_kg.h"

typedef struct block {
    char         *p;
    size_t        bytes;
    int           dev;      /* -1: page-locked host memory */
    struct block *next;
} block_t;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static block_t *g_blocks;
static _Thread_local int t_dev = 0;
static _Thread_local const char *t_err = "no error";
int fake_kg_violations;

static void violation(const char *what, const void *p)
{
    pthread_mutex_lock(&g_lock);
    fake_kg_violations++;
    pthread_mutex_unlock(&g_lock);
    fprintf(stderr, "fake_kg: VIOLATION: %s (%p, current device %d)\n", what,
            p, t_dev);
}

/* The block holding [p, p + bytes), or NULL. */
static block_t *find(const void *p, size_t bytes)
{
    const char *c = p;
    block_t *hit = NULL;
    pthread_mutex_lock(&g_lock);
    for (block_t *b = g_blocks; b && !hit; b = b->next)
        if (c >= b->p && c + bytes <= b->p + b->bytes)
            hit = b;
    pthread_mutex_unlock(&g_lock);
    return hit;
}

/* `bytes` at p are device memory of the current device. */
static int on_dev(const char *what, const void *p, size_t bytes)
{
    if (bytes == 0)
        return 1;
    block_t *b = p ? find(p, bytes) : NULL;
    if (!b || b->dev < 0) {
        violation(what, p);
        return 0;
    }
    if (b->dev != t_dev) {
        violation(what, p);
        return 0;
    }
    return 1;
}

static int on_host(const char *what, const void *p, size_t bytes)
{
    block_t *b = bytes && p ? find(p, bytes) : NULL;
    if (bytes && (!p || (b && b->dev >= 0))) {
        violation(what, p);
        return 0;
    }
    return 1;
}

static void *add_block(size_t bytes, int dev)
{
    block_t *b = calloc(1, sizeof *b);
    char *p = malloc(bytes ? bytes : 1);
    if (!b || !p) {
        free(b);
        free(p);
        return NULL;
    }
    memset(p, 0xa5, bytes); /* like cudaMalloc: not zeroed */
    b->p = p;
    b->bytes = bytes;
    b->dev = dev;
    pthread_mutex_lock(&g_lock);
    b->next = g_blocks;
    g_blocks = b;
    pthread_mutex_unlock(&g_lock);
    return p;
}

static int drop_block(void *p, int host)
{
    pthread_mutex_lock(&g_lock);
    block_t **pp = &g_blocks;
    while (*pp && (*pp)->p != p)
        pp = &(*pp)->next;
    block_t *b = *pp;
    if (b && (b->dev < 0) == host)
        *pp = b->next;
    else
        b = NULL;
    pthread_mutex_unlock(&g_lock);
    if (!b) {
        violation(host ? "kg_free_host: not page-locked memory"
                       : "kg_free: not device memory", p);
        return KG_EINVAL;
    }
    if (!host && b->dev != t_dev)
        violation("kg_free: memory of another device", p);
    free(b->p);
    free(b);
    return KG_OK;
}

size_t fake_kg_live_blocks(void)
{
    size_t n = 0;
    pthread_mutex_lock(&g_lock);
    for (block_t *b = g_blocks; b; b = b->next)
        n++;
    pthread_mutex_unlock(&g_lock);
    return n;
}

int fake_kg_device_of(const void *p)
{
    block_t *b = p ? find(p, 1) : NULL;
    return b ? b->dev : -2;
}

/* ---- runtime -------------------------------------------------------------- */

const char *kg_last_error(void) { return t_err; }

static int ndev(void)
{
    const char *e = getenv("FAKE_KG_DEVICES");
    return e ? atoi(e) : 2;
}

int kg_device_count(int *n)
{
    *n = ndev();
    if (*n == 0)
        t_err = "no CUDA device (fake)";
    return KG_OK;
}

int kg_set_device(int dev)
{
    if (dev < 0 || dev >= ndev()) {
        t_err = "invalid device ordinal (fake)";
        return KG_ECUDA;
    }
    t_dev = dev;
    return KG_OK;
}

/* A stream remembers its device: work on it must come from that device. */
typedef struct fake_stream { int dev; } fake_stream_t;

static int stream_ok(kg_stream_t s)
{
    const fake_stream_t *f = (const fake_stream_t *)s;
    if (f && f->dev != t_dev) {
        violation("work on a stream of another device", s);
        return 0;
    }
    return 1;
}

int kg_stream_create(kg_stream_t *out)
{
    fake_stream_t *f = malloc(sizeof *f);
    if (!f)
        return KG_ECUDA;
    f->dev = t_dev;
    *out = (kg_stream_t)f;
    return KG_OK;
}

int kg_stream_destroy(kg_stream_t s) { free(s); return KG_OK; }
int kg_stream_sync(kg_stream_t s) { return stream_ok(s) ? KG_OK : KG_ECUDA; }

int kg_malloc(void **p, size_t bytes, kg_stream_t s)
{
    stream_ok(s);
    *p = bytes ? add_block(bytes, t_dev) : NULL;
    return !bytes || *p ? KG_OK : KG_ECUDA;
}

int kg_free(void *p, kg_stream_t s)
{
    stream_ok(s);
    return p ? drop_block(p, 0) : KG_OK;
}

int kg_malloc_host(void **p, size_t bytes)
{
    *p = bytes ? add_block(bytes, -1) : NULL;
    return !bytes || *p ? KG_OK : KG_ECUDA;
}

int kg_free_host(void *p) { return p ? drop_block(p, 1) : KG_OK; }

int kg_memcpy_h2d(void *dst, const void *src, size_t bytes, kg_stream_t s)
{
    if (stream_ok(s) && on_dev("h2d: dst", dst, bytes) &&
        on_host("h2d: src", src, bytes) && bytes)
        memcpy(dst, src, bytes);
    return KG_OK;
}

int kg_memcpy_d2h(void *dst, const void *src, size_t bytes, kg_stream_t s)
{
    if (stream_ok(s) && on_host("d2h: dst", dst, bytes) &&
        on_dev("d2h: src", src, bytes) && bytes)
        memcpy(dst, src, bytes);
    return KG_OK;
}

int kg_memcpy_d2d(void *dst, const void *src, size_t bytes, kg_stream_t s)
{
    if (stream_ok(s) && on_dev("d2d: dst", dst, bytes) &&
        on_dev("d2d: src", src, bytes) && bytes)
        memmove(dst, src, bytes);
    return KG_OK;
}

int kg_memset(void *dst, int byte, size_t bytes, kg_stream_t s)
{
    if (stream_ok(s) && on_dev("memset", dst, bytes) && bytes)
        memset(dst, byte, bytes);
    return KG_OK;
}

int kg_blas_create(kg_blas_t *out, kg_stream_t s)
{
    (void)s;
    *out = (kg_blas_t)malloc(1);
    return *out ? KG_OK : KG_ECUBLAS;
}

int kg_blas_destroy(kg_blas_t h) { free(h); return KG_OK; }

/* ---- kernels: the CPU twins, after the checks ------------------------------ */

#define F(n) ((size_t)(n) * sizeof(float))
#define MN(a, b) ((size_t)(a) * (size_t)(b))

int kg_dense_fwd(kg_blas_t h, int m, int k, int n, const float *X,
                 const float *W, const float *b, float *Y, kg_stream_t s)
{
    if (!h || !stream_ok(s) || !on_dev("dense_fwd X", X, F(MN(m, k))) ||
        !on_dev("dense_fwd W", W, F(MN(k, n))) ||
        (b && !on_dev("dense_fwd b", b, F(n))) ||
        !on_dev("dense_fwd Y", Y, F(MN(m, n))))
        return KG_EINVAL;
    kc_dense_fwd(m, k, n, X, W, b, Y);
    return KG_OK;
}

int kg_dense_bwd(kg_blas_t h, int m, int k, int n, const float *X,
                 const float *W, const float *dY, float *dW, float *db,
                 float *dX, kg_stream_t s)
{
    if (!h || !stream_ok(s) || !on_dev("dense_bwd X", X, F(MN(m, k))) ||
        !on_dev("dense_bwd W", W, F(MN(k, n))) ||
        !on_dev("dense_bwd dY", dY, F(MN(m, n))) ||
        !on_dev("dense_bwd dW", dW, F(MN(k, n))) ||
        !on_dev("dense_bwd db", db, F(n)) ||
        (dX && !on_dev("dense_bwd dX", dX, F(MN(m, k)))))
        return KG_EINVAL;
    kc_dense_bwd(m, k, n, X, W, dY, dW, db, dX);
    return KG_OK;
}

int kg_relu_fwd(size_t n, const float *x, float *y, kg_stream_t s)
{
    if (!stream_ok(s) || !on_dev("relu_fwd x", x, F(n)) ||
        !on_dev("relu_fwd y", y, F(n)))
        return KG_EINVAL;
    kc_relu_fwd(n, x, y);
    return KG_OK;
}

int kg_relu_bwd(size_t n, const float *y, const float *dy, float *dx,
                kg_stream_t s)
{
    if (!stream_ok(s) || !on_dev("relu_bwd y", y, F(n)) ||
        !on_dev("relu_bwd dy", dy, F(n)) || !on_dev("relu_bwd dx", dx, F(n)))
        return KG_EINVAL;
    kc_relu_bwd(n, y, dy, dx);
    return KG_OK;
}

int kg_softmax_xent(int m, int c, const float *logits, const int32_t *labels,
                    float *dlogits, float scale, kg_xent_acc_t *acc,
                    kg_stream_t s)
{
    if (!stream_ok(s) || !on_dev("xent logits", logits, F(MN(m, c))) ||
        !on_dev("xent labels", labels, (size_t)m * sizeof(int32_t)) ||
        (dlogits && !on_dev("xent dlogits", dlogits, F(MN(m, c)))) ||
        !on_dev("xent acc", acc, sizeof *acc))
        return KG_EINVAL;
    if (acc->ticket != 0)
        violation("xent acc: not zeroed (ticket)", acc);
    acc->loss_sum += kc_softmax_xent(m, c, logits, labels, dlogits, scale,
                                     &acc->correct);
    return KG_OK;
}

int kg_sgd(size_t n, float *w, const float *g, float lr, float wd,
           kg_stream_t s)
{
    if (!stream_ok(s) || !on_dev("sgd w", w, F(n)) || !on_dev("sgd g", g, F(n)))
        return KG_EINVAL;
    kc_sgd(n, w, g, lr, wd);
    return KG_OK;
}

int kg_momentum(size_t n, float *w, const float *g, float *v, float lr,
                float momentum, float wd, kg_stream_t s)
{
    if (!stream_ok(s) || !on_dev("momentum w", w, F(n)) ||
        !on_dev("momentum g", g, F(n)) || !on_dev("momentum v", v, F(n)))
        return KG_EINVAL;
    kc_momentum(n, w, g, v, lr, momentum, wd);
    return KG_OK;
}

int kg_adam(size_t n, float *w, const float *g, float *m, float *v, float lr,
            float b1, float b2, float eps, int64_t t, float wd, kg_stream_t s)
{
    if (!stream_ok(s) || !on_dev("adam w", w, F(n)) ||
        !on_dev("adam g", g, F(n)) || !on_dev("adam m", m, F(n)) ||
        !on_dev("adam v", v, F(n)))
        return KG_EINVAL;
    kc_adam(n, w, g, m, v, lr, b1, b2, eps, t, wd);
    return KG_OK;
}

int kg_sumsq(size_t n, const float *x, double *scratch, kg_stream_t s)
{
    if (!stream_ok(s) || !on_dev("sumsq x", x, F(n)) ||
        !on_dev("sumsq scratch", scratch, KG_SUMSQ_SCRATCH * sizeof(double)))
        return KG_EINVAL;
    scratch[0] = kc_sumsq(n, x);
    return KG_OK;
}

int kg_scale(size_t n, float a, float *x, kg_stream_t s)
{
    if (!stream_ok(s) || !on_dev("scale x", x, F(n)))
        return KG_EINVAL;
    kc_scale(n, a, x);
    return KG_OK;
}

int kg_axpy(size_t n, float a, const float *x, float *y, kg_stream_t s)
{
    if (!stream_ok(s) || !on_dev("axpy x", x, F(n)) ||
        !on_dev("axpy y", y, F(n)))
        return KG_EINVAL;
    kc_axpy(n, a, x, y);
    return KG_OK;
}

int kg_sum(size_t n, float *dst, const float *const *srcs, int nsrc,
           kg_stream_t s)
{
    if (!stream_ok(s) || nsrc < 1 || !on_host("sum srcs", srcs, sizeof *srcs) ||
        !on_dev("sum dst", dst, F(n)))
        return KG_EINVAL;
    for (int i = 0; i < nsrc; i++)
        if (!on_dev("sum src", srcs[i], F(n)))
            return KG_EINVAL;
    kc_sum(n, dst, srcs, nsrc);
    return KG_OK;
}

int kg_u8_to_f32(size_t n, const uint8_t *src, float scale, float *dst,
                 kg_stream_t s)
{
    if (!stream_ok(s) || !on_dev("u8_to_f32 src", src, n) ||
        !on_dev("u8_to_f32 dst", dst, F(n)))
        return KG_EINVAL;
    kc_u8_to_f32(n, src, scale, dst);
    return KG_OK;
}

/* ---- CNN kernels ------------------------------------------------------------ */

/* Elements of an n x a x b x c tensor; a negative size counts as 0. */
static size_t dims4(int n, int a, int b, int c)
{
    if (n <= 0 || a <= 0 || b <= 0 || c <= 0)
        return 0;
    return (size_t)n * (size_t)a * (size_t)b * (size_t)c;
}

static kc_conv_geom_t kc_conv(const kg_conv_geom_t *g)
{
    return (kc_conv_geom_t){ g->n, g->h, g->w, g->c, g->kh, g->kw, g->f,
                             g->stride_h, g->stride_w, g->pad_top,
                             g->pad_left, g->oh, g->ow, g->col_ready };
}

static kc_pool_geom_t kc_pool(const kg_pool_geom_t *g)
{
    return (kc_pool_geom_t){ g->n, g->h, g->w, g->c, g->ph, g->pw,
                             g->stride_h, g->stride_w, g->oh, g->ow };
}

/* The checks of both conv passes: X, W and the workspace (at least one
 * image, as the real kernels demand). */
static int conv_args(const char *pass, const kg_conv_geom_t *g,
                     const float *X, const float *W, const float *col,
                     size_t col_len)
{
    kc_conv_geom_t kg = kc_conv(g);
    char what[64];
    snprintf(what, sizeof what, "%s col (col_len below one image)", pass);
    if (col_len < kc_conv2d_col_len(&kg)) {
        violation(what, col);
        return 0;
    }
    snprintf(what, sizeof what, "%s X", pass);
    if (!on_dev(what, X, F(dims4(g->n, g->h, g->w, g->c))))
        return 0;
    snprintf(what, sizeof what, "%s W", pass);
    if (!on_dev(what, W, F(dims4(g->kh, g->kw, g->c, g->f))))
        return 0;
    snprintf(what, sizeof what, "%s col", pass);
    return on_dev(what, col, F(col_len));
}

int kg_conv2d_fwd(kg_blas_t h, const kg_conv_geom_t *g, const float *X,
                  const float *W, const float *b, float *Y, float *col,
                  size_t col_len, kg_stream_t s)
{
    if (!g || g->n <= 0 || g->f <= 0)
        return g ? KG_OK : KG_EINVAL;
    if (!h || !stream_ok(s) || !conv_args("conv2d_fwd", g, X, W, col, col_len) ||
        (b && !on_dev("conv2d_fwd b", b, F(g->f))) ||
        !on_dev("conv2d_fwd Y", Y, F(dims4(g->n, g->oh, g->ow, g->f))))
        return KG_EINVAL;
    kc_conv_geom_t kg = kc_conv(g);
    kc_conv2d_fwd(&kg, X, W, b, Y, col, col_len);
    return KG_OK;
}

int kg_conv2d_bwd(kg_blas_t h, const kg_conv_geom_t *g, const float *X,
                  const float *W, const float *dY, float *dW, float *db,
                  float *dX, float *col, size_t col_len, kg_stream_t s)
{
    if (!g || !h || !stream_ok(s) ||
        !on_dev("conv2d_bwd dW", dW, F(dims4(g->kh, g->kw, g->c, g->f))) ||
        (db && !on_dev("conv2d_bwd db", db, F(g->f > 0 ? g->f : 0))))
        return KG_EINVAL;
    if (g->n > 0 &&
        (!conv_args("conv2d_bwd", g, X, W, col, col_len) ||
         !on_dev("conv2d_bwd dY", dY, F(dims4(g->n, g->oh, g->ow, g->f))) ||
         (dX && !on_dev("conv2d_bwd dX", dX, F(dims4(g->n, g->h, g->w, g->c))))))
        return KG_EINVAL;
    kc_conv_geom_t kg = kc_conv(g);
    kc_conv2d_bwd(&kg, X, W, dY, dW, db, dX, col, col_len);
    return KG_OK;
}

int kg_maxpool2d_fwd(const kg_pool_geom_t *g, const float *X, float *Y,
                     int32_t *argmax, kg_stream_t s)
{
    size_t out = g ? dims4(g->n, g->oh, g->ow, g->c) : 0;
    if (!g || !stream_ok(s) ||
        !on_dev("maxpool2d_fwd X", X, F(dims4(g->n, g->h, g->w, g->c))) ||
        !on_dev("maxpool2d_fwd Y", Y, F(out)) ||
        !on_dev("maxpool2d_fwd argmax", argmax, out * sizeof(int32_t)))
        return KG_EINVAL;
    kc_pool_geom_t kg = kc_pool(g);
    kc_maxpool2d_fwd(&kg, X, Y, argmax);
    return KG_OK;
}

int kg_maxpool2d_bwd(const kg_pool_geom_t *g, const float *dY,
                     const int32_t *argmax, float *dX, kg_stream_t s)
{
    size_t out = g ? dims4(g->n, g->oh, g->ow, g->c) : 0;
    if (!g || !stream_ok(s) || !on_dev("maxpool2d_bwd dY", dY, F(out)) ||
        !on_dev("maxpool2d_bwd argmax", argmax, out * sizeof(int32_t)) ||
        !on_dev("maxpool2d_bwd dX", dX, F(dims4(g->n, g->h, g->w, g->c))))
        return KG_EINVAL;
    kc_pool_geom_t kg = kc_pool(g);
    kc_maxpool2d_bwd(&kg, dY, argmax, dX);
    return KG_OK;
}

int kg_dropout_fwd(size_t n, const float *x, float *y, float rate,
                   uint64_t seed, uint64_t first, kg_stream_t s)
{
    if (!stream_ok(s) || !on_dev("dropout_fwd x", x, F(n)) ||
        !on_dev("dropout_fwd y", y, F(n)))
        return KG_EINVAL;
    kc_dropout_fwd(n, x, y, rate, seed, first);
    return KG_OK;
}

int kg_dropout_bwd(size_t n, const float *dy, float *dx, float rate,
                   uint64_t seed, uint64_t first, kg_stream_t s)
{
    if (!stream_ok(s) || !on_dev("dropout_bwd dy", dy, F(n)) ||
        !on_dev("dropout_bwd dx", dx, F(n)))
        return KG_EINVAL;
    kc_dropout_bwd(n, dy, dx, rate, seed, first);
    return KG_OK;
}

/* tanh and sigmoid, each way, with relu's checks. */
#define FAKE_ACT(name)                                                       \
    int kg_##name##_fwd(size_t n, const float *x, float *y, kg_stream_t s)   \
    {                                                                        \
        if (!stream_ok(s) || !on_dev(#name "_fwd x", x, F(n)) ||             \
            !on_dev(#name "_fwd y", y, F(n)))                                \
            return KG_EINVAL;                                                \
        kc_##name##_fwd(n, x, y);                                            \
        return KG_OK;                                                        \
    }                                                                        \
    int kg_##name##_bwd(size_t n, const float *y, const float *dy,           \
                        float *dx, kg_stream_t s)                            \
    {                                                                        \
        if (!stream_ok(s) || !on_dev(#name "_bwd y", y, F(n)) ||             \
            !on_dev(#name "_bwd dy", dy, F(n)) ||                            \
            !on_dev(#name "_bwd dx", dx, F(n)))                              \
            return KG_EINVAL;                                                \
        kc_##name##_bwd(n, y, dy, dx);                                       \
        return KG_OK;                                                        \
    }
FAKE_ACT(tanh)
FAKE_ACT(sigmoid)
