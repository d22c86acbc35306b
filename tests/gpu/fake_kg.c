/* A stand-in for kernels/cuda on the CPU, to test the core's GPU path
 * (the CUDA module's core/device/cuda/kops_cuda.c, and cuda_load.c, device.c,
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
 * the CPU kernels, so results equal the CPU path's bit for bit. The ops of
 * kernels/kops_list.h are made from the list: each checks the data its
 * entry declares, then calls its kc_ twin.
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

int kg_softmax_xent(int m, int c, const float *logits, const int32_t *labels,
                    float *dlogits, float scale, int count,
                    kg_xent_acc_t *acc, kg_stream_t s)
{
    if (!stream_ok(s) || !on_dev("xent logits", logits, F(MN(m, c))) ||
        !on_dev("xent labels", labels, (size_t)m * sizeof(int32_t)) ||
        (dlogits && !on_dev("xent dlogits", dlogits, F(MN(m, c)))) ||
        !on_dev("xent acc", acc, sizeof *acc))
        return KG_EINVAL;
    if (acc->ticket != 0)
        violation("xent acc: not zeroed (ticket)", acc);
    acc->loss_sum += kc_softmax_xent(m, c, logits, labels, dlogits, scale,
                                     count ? &acc->correct : NULL);
    return KG_OK;
}

int kg_dense_loss(int kind, int metric, int m, int c, const float *x,
                  const float *y, float *dx, float scale, kg_xent_acc_t *acc,
                  kg_stream_t s)
{
    if (!stream_ok(s) || !on_dev("loss outputs", x, F(MN(m, c))) ||
        !on_dev("loss targets", y, F(MN(m, c))) ||
        (dx && !on_dev("loss dx", dx, F(MN(m, c)))) ||
        !on_dev("loss acc", acc, sizeof *acc))
        return KG_EINVAL;
    if (kind < KOPS_LOSS_CATEGORICAL || kind > KOPS_LOSS_MAE)
        return KG_EINVAL;
    if (acc->ticket != 0)
        violation("loss acc: not zeroed (ticket)", acc);
    acc->loss_sum += kc_dense_loss(kind, metric, m, c, x, y, dx, scale,
                                   &acc->metric);
    return KG_OK;
}

int kg_auc_hist(int m, int c, const float *x, const float *y,
                kg_xent_acc_t *acc, kg_stream_t s)
{
    if (!stream_ok(s) || !on_dev("auc outputs", x, F(MN(m, c))) ||
        !on_dev("auc targets", y, F(MN(m, c))) ||
        !on_dev("auc acc", acc, sizeof *acc))
        return KG_EINVAL;
    kc_auc_hist(m, c, x, y, acc->hist);
    return KG_OK;
}

int kg_topk_count(int m, int c, int k, const float *x, const int32_t *labels,
                  const float *y, kg_xent_acc_t *acc, kg_stream_t s)
{
    if (!stream_ok(s) || !on_dev("top-k outputs", x, F(MN(m, c))) ||
        (labels && !on_dev("top-k labels", labels,
                           (size_t)m * sizeof(int32_t))) ||
        (!labels && !on_dev("top-k targets", y, F(MN(m, c)))) ||
        !on_dev("top-k acc", acc, sizeof *acc))
        return KG_EINVAL;
    acc->correct += kc_topk_count(m, c, k, x, labels, y);
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

/* ---- the ops of kernels/kops_list.h: each checks the op's DATA, then
 * runs the CPU twin ------------------------------------------------------ */

/* `bytes` at p are device memory of the current device; a breach names
 * the op and the argument. */
static int arg_dev(const char *op, const char *arg, const void *p,
                   size_t bytes)
{
    char what[96];
    snprintf(what, sizeof what, "%s %s", op, arg);
    return on_dev(what, p, bytes);
}

/* pp: a host array of n device pointers of `bytes` each. */
static int arg_devs(const char *op, const char *arg, const float *const *pp,
                    int n, size_t bytes)
{
    char what[96];
    snprintf(what, sizeof what, "%s %s", op, arg);
    if (n < 1 || !on_host(what, pp, (size_t)n * sizeof *pp))
        return 0;
    for (int i = 0; i < n; i++)
        if (!on_dev(what, pp[i], bytes))
            return 0;
    return 1;
}

static int arg_req(const char *op, const char *cond, int ok)
{
    if (!ok) {
        char what[160];
        snprintf(what, sizeof what, "%s: not (%s)", op, cond);
        violation(what, NULL);
    }
    return ok;
}

#define KOP_REQ(cond) if (!arg_req(__func__, #cond, (cond))) return KG_EINVAL;
#define KOP_NOOP(cond) if (cond) return KG_OK;
#define KOP_DEV(p, bytes) \
    if (!arg_dev(__func__, #p, (p), (bytes))) return KG_EINVAL;
#define KOP_OPT(p, bytes) \
    if ((p) && !arg_dev(__func__, #p, (p), (bytes))) return KG_EINVAL;
#define KOP_DEVS(pp, n, bytes) \
    if (!arg_devs(__func__, #pp, (pp), (n), (bytes))) return KG_EINVAL;
#define FAKE_BLAS_0
#define FAKE_BLAS_1 kg_blas_t kop_h,
#define FAKE_HANDLE_0
#define FAKE_HANDLE_1 if (!kop_h) return KG_EINVAL;
#define KOP(name, blas, what, params, args, data)                            \
    int kg_##name(FAKE_BLAS_##blas KOP_UNPAREN params, kg_stream_t kop_s)    \
    {                                                                        \
        FAKE_HANDLE_##blas                                                   \
        if (!stream_ok(kop_s))                                               \
            return KG_EINVAL;                                                \
        KOP_UNPAREN data                                                     \
        kc_##name args;                                                      \
        return KG_OK;                                                        \
    }
#include "kops_list.h"
#undef KOP

/* ---- mixed_bfloat16 --------------------------------------------------------
 * The twins round their operands to bf16 into host copies (kc_bf16_of:
 * nearest even, as __float2bfloat16_rn, but denormals to zero) and run
 * the float32 kernels on them: a product of two bf16 is exact in fp32, so
 * this is the GPU ops' arithmetic but for the order of the sums. Bias
 * gradients from the fp32 dY, as the GPU's. The device workspace is
 * checked for the length kernels/cuda asks, and not used. */

int kg_device_arch(int dev, int *major, int *minor)
{
    if (dev < 0 || dev >= ndev()) {
        t_err = "invalid device ordinal (fake)";
        return KG_ECUDA;
    }
    const char *e = getenv("FAKE_KG_ARCH");    /* "8.6"; default 9.0 */
    *major = 9;
    *minor = 0;
    if (e && sscanf(e, "%d.%d", major, minor) != 2)
        *major = 0;
    return KG_OK;
}

static float *bf16_copy(const float *x, size_t n)
{
    float *y = malloc(F(n ? n : 1));
    if (y)
        kc_bf16_round(n, x, y);
    return y;
}

/* The checks every twin makes: handle, stream, the workspace. */
static int bf16_args(const char *op, kg_blas_t h, kg_stream_t s,
                     const float *work, size_t work_len, size_t need)
{
    return arg_req(op, "a cuBLAS handle", h != NULL) && stream_ok(s) &&
           arg_req(op, "work_len >= the kernels' length", work_len >= need) &&
           arg_dev(op, "work", work, F(work_len));
}

static size_t conv_in(const kops_conv2d_t *g)
{
    return kops_n4(g->n, g->h, g->w, g->c);
}
static size_t conv_out(const kops_conv2d_t *g)
{
    return kops_n4(g->n, g->oh, g->ow, g->f);
}
static size_t conv_w(const kops_conv2d_t *g)
{
    return kops_n4(g->kh, g->kw, g->c, g->f);
}

int kg_conv2d_fwd_bf16(kg_blas_t h, const kops_conv2d_t *g, const float *X,
                       const float *W, const float *b, float *Y, float *work,
                       size_t work_len, kg_stream_t s)
{
    if (!g)
        return KG_EINVAL;
    if (g->n <= 0 || g->f <= 0)
        return KG_OK;
    const char *op = __func__;
    if (!bf16_args(op, h, s, work, work_len, kops_conv2d_bf16_gpu_len(g, 1))
        || !arg_dev(op, "X", X, F(conv_in(g))) ||
        !arg_dev(op, "W", W, F(conv_w(g))) ||
        (b && !arg_dev(op, "b", b, F(g->f))) ||
        !arg_dev(op, "Y", Y, F(conv_out(g))))
        return KG_EINVAL;
    size_t cl = kops_conv2d_col_len(g);
    float *xr = bf16_copy(X, conv_in(g)), *wr = bf16_copy(W, conv_w(g));
    float *col = malloc(F(cl ? cl : 1));
    int rc = xr && wr && col ? KG_OK : KG_ECUDA;
    if (rc == KG_OK)
        kc_conv2d_fwd(g, xr, wr, b, Y, col, cl);
    free(xr);
    free(wr);
    free(col);
    return rc;
}

int kg_conv2d_bwd_bf16(kg_blas_t h, const kops_conv2d_t *g, const float *X,
                       const float *W, const float *dY, float *dW, float *db,
                       float *dX, float *work, size_t work_len,
                       kg_stream_t s)
{
    const char *op = __func__;
    if (!g || !arg_dev(op, "dW", dW, F(conv_w(g))) ||
        (db && !arg_dev(op, "db", db, F(g->f > 0 ? g->f : 0))))
        return KG_EINVAL;
    if (g->n <= 0) {
        memset(dW, 0, F(conv_w(g)));
        if (db)
            memset(db, 0, F(g->f > 0 ? g->f : 0));
        return KG_OK;
    }
    if (!bf16_args(op, h, s, work, work_len, kops_conv2d_bf16_gpu_len(g, 1))
        || !arg_dev(op, "X", X, F(conv_in(g))) ||
        !arg_dev(op, "W", W, F(conv_w(g))) ||
        !arg_dev(op, "dY", dY, F(conv_out(g))) ||
        (dX && !arg_dev(op, "dX", dX, F(conv_in(g)))))
        return KG_EINVAL;
    size_t cl = kops_conv2d_col_len(g);
    float *xr = bf16_copy(X, conv_in(g)), *wr = bf16_copy(W, conv_w(g));
    float *dyr = bf16_copy(dY, conv_out(g)), *col = malloc(F(cl ? cl : 1));
    int rc = xr && wr && dyr && col ? KG_OK : KG_ECUDA;
    if (rc == KG_OK) {
        kc_conv2d_bwd(g, xr, wr, dyr, dW, NULL, dX, col, cl);
        if (db)
            kc_bias_grad(g->n * g->oh * g->ow, g->f, dY, db);
    }
    free(xr);
    free(wr);
    free(dyr);
    free(col);
    return rc;
}

int kg_dense_fwd_bf16(kg_blas_t h, int m, int kk, int n, const float *X,
                      const float *W, const float *b, float *Y, float *work,
                      size_t work_len, kg_stream_t s)
{
    if (m <= 0 || n <= 0 || kk < 0)
        return KG_OK;
    const char *op = __func__;
    if (!bf16_args(op, h, s, work, work_len, kops_dense_bf16_gpu_len(m, kk, n))
        || !arg_dev(op, "X", X, F(MN(m, kk))) ||
        !arg_dev(op, "W", W, F(MN(kk, n))) ||
        (b && !arg_dev(op, "b", b, F(n))) ||
        !arg_dev(op, "Y", Y, F(MN(m, n))))
        return KG_EINVAL;
    float *xr = bf16_copy(X, MN(m, kk)), *wr = bf16_copy(W, MN(kk, n));
    int rc = xr && wr ? KG_OK : KG_ECUDA;
    if (rc == KG_OK)
        kc_dense_fwd(m, kk, n, xr, wr, b, Y);
    free(xr);
    free(wr);
    return rc;
}

int kg_dense_bwd_bf16(kg_blas_t h, int m, int kk, int n, const float *X,
                      const float *W, const float *dY, float *dW, float *db,
                      float *dX, float *work, size_t work_len,
                      kg_stream_t s)
{
    if (m < 0 || kk < 0 || n < 0)
        return KG_OK;
    const char *op = __func__;
    if (!bf16_args(op, h, s, work, work_len, kops_dense_bf16_gpu_len(m, kk, n))
        || !arg_dev(op, "X", X, F(MN(m, kk))) ||
        !arg_dev(op, "W", W, F(MN(kk, n))) ||
        !arg_dev(op, "dY", dY, F(MN(m, n))) ||
        !arg_dev(op, "dW", dW, F(MN(kk, n))) ||
        !arg_dev(op, "db", db, F(n)) ||
        (dX && !arg_dev(op, "dX", dX, F(MN(m, kk)))))
        return KG_EINVAL;
    float *xr = bf16_copy(X, MN(m, kk)), *wr = bf16_copy(W, MN(kk, n));
    float *dyr = bf16_copy(dY, MN(m, n)), *dbr = malloc(F(n ? n : 1));
    int rc = xr && wr && dyr && dbr ? KG_OK : KG_ECUDA;
    if (rc == KG_OK) {
        kc_dense_bwd(m, kk, n, xr, wr, dyr, dW, dbr, dX);
        kc_bias_grad(m, n, dY, db);
    }
    free(xr);
    free(wr);
    free(dyr);
    free(dbr);
    return rc;
}
