/* conv2d on NHWC float32, the twin of kernels/cpu/conv.c: im2col turns a
 * group of images into col[rows x K] (one row per output position, K =
 * kh*kw*c taps in the kernel's [kh][kw][c] order), Y = col W is one cuBLAS
 * sgemm, and the backward pass is dW (+)= col^T dY, dcol = dY W^T and
 * col2im. Groups hold as many images as col_len floats allow, exactly as the
 * CPU twin, so the same workspace serves both. mixed_bfloat16 (at the end):
 * the same steps with col, W and dY in bf16 and GemmEx. */
#include "kg_internal.h"

static size_t kg_taps(const kops_conv2d_t *g)
{
    return (size_t)g->kh * (size_t)g->kw * (size_t)g->c;
}

size_t kg_conv2d_col_len(const kops_conv2d_t *g)
{
    return kops_conv2d_col_len(g);
}

/* Images per GEMM: as many as col holds, at least one, at most n. */
static int kg_group_of(const kops_conv2d_t *g, size_t col_len)
{
    size_t one = kg_conv2d_col_len(g);
    size_t k = one ? col_len / one : (size_t)g->n;
    if (k < 1)
        k = 1;
    return k > (size_t)g->n ? g->n : (int)k;
}

/* A float stored as col's type: itself, or rounded to bf16. */
static __device__ __forceinline__ void kg_put(float *p, float v) { *p = v; }
static __device__ __forceinline__ void kg_put(kg_bf16 *p, float v)
{
    *p = __float2bfloat16_rn(v);
}

/* col[(i*oh + oy)*ow + ox][(ky*kw + kx)*c + ch] = X[i][y][x][ch], zero in
 * the padding; one thread per col element, taps innermost (coalesced
 * writes, and reads along channels). */
template <typename T>
__global__ void kg_im2col_k(size_t total, kops_conv2d_t g, const float *X,
                            T *col)
{
    size_t K = (size_t)g.kh * g.kw * g.c;
    KG_FOR(idx, total) {
        size_t r = idx / K;
        int t = (int)(idx - r * K);
        int ch = t % g.c, kx = (t / g.c) % g.kw, ky = t / (g.c * g.kw);
        /* output position r = (i, oy, ox): an NHWC index with one channel */
        kg_nhwc o = kg_nhwc_of(r, g.oh, g.ow, 1);
        int oy = o.y, ox = o.x;
        size_t i = o.i;
        int y = oy * g.stride_h - g.pad_top + ky;
        int x = ox * g.stride_w - g.pad_left + kx;
        kg_put(col + idx, (y >= 0 && y < g.h && x >= 0 && x < g.w)
                              ? X[((i * g.h + y) * g.w + x) * g.c + ch]
                              : 0.0f);
    }
}

/* The adjoint of im2col as a gather: each dX element sums the dcol entries
 * of the taps that read it, overwriting dX (no zeroing, no atomics). The
 * CPU scatters in (oy, ox) order; ky and kx descending visit oy and ox
 * ascending, so the sums round as the CPU's do. */
__global__ void kg_col2im_k(size_t total, kops_conv2d_t g,
                            const float *dcol, float *dX)
{
    size_t K = (size_t)g.kh * g.kw * g.c;
    KG_FOR(idx, total) {
        kg_nhwc o = kg_nhwc_of(idx, g.h, g.w, g.c);
        int ch = o.ch, x = o.x, y = o.y;
        size_t i = o.i;
        float acc = 0.0f;
        for (int ky = g.kh - 1; ky >= 0; ky--) {
            int ty = y + g.pad_top - ky;      /* = oy * stride_h */
            if (ty < 0 || ty % g.stride_h)
                continue;
            int oy = ty / g.stride_h;
            if (oy >= g.oh)
                continue;
            for (int kx = g.kw - 1; kx >= 0; kx--) {
                int tx = x + g.pad_left - kx;
                if (tx < 0 || tx % g.stride_w)
                    continue;
                int ox = tx / g.stride_w;
                if (ox >= g.ow)
                    continue;
                acc += dcol[((i * g.oh + oy) * g.ow + ox) * K +
                            ((size_t)ky * g.kw + kx) * g.c + ch];
            }
        }
        dX[idx] = acc;
    }
}

template <typename T>
static int kg_im2col(const kops_conv2d_t *g, int m, const float *X, T *col,
                     kg_stream_t s)
{
    size_t total = (size_t)m * kg_conv2d_col_len(g);
    if (total == 0)
        return KG_OK;
    kg_im2col_k<<<kg__blocks(total), KG_THREADS, 0, s>>>(total, *g, X, col);
    return kg__launched();
}

static int kg_col2im(const kops_conv2d_t *g, int m, const float *dcol,
                     float *dX, kg_stream_t s)
{
    size_t total = (size_t)m * g->h * g->w * g->c;
    if (total == 0)
        return KG_OK;
    kg_col2im_k<<<kg__blocks(total), KG_THREADS, 0, s>>>(total, *g, dcol,
                                                         dX);
    return kg__launched();
}

/* The workspace must hold one image (the CPU twin trusts its caller; here a
 * short one is an error rather than an overrun on the device). */
static int kg_col_ok(const kops_conv2d_t *g, const float *col,
                     size_t col_len)
{
    size_t one = kg_conv2d_col_len(g);
    return one == 0 || (col && col_len >= one);
}

/* The end of every forward pass: + b, then the fused relu. */
static int kg_fwd_bias_relu(const kops_conv2d_t *g, const float *b, float *Y,
                            kg_stream_t s)
{
    size_t rows = (size_t)g->oh * g->ow * (size_t)g->n;
    int rc = b ? kg_bias_add((int)rows, g->f, b, Y, s) : KG_OK;
    if (rc == KG_OK && g->relu)
        rc = kg_relu_fwd(rows * (size_t)g->f, Y, Y, s);
    return rc;
}

/* The start of every backward pass: db from dY, and for an empty batch
 * dW = 0 (as kc), which is then all there is to do. */
static int kg_bwd_bias_empty(const kops_conv2d_t *g, const float *dY,
                             float *dW, float *db, kg_stream_t s)
{
    size_t plane = (size_t)g->oh * g->ow;
    int rc = KG_OK;
    if (db)
        rc = kg_bias_grad((int)(plane * (size_t)(g->n > 0 ? g->n : 0)), g->f,
                          dY, db, s);
    if (rc != KG_OK || g->n > 0)
        return rc;
    size_t kf = kg_taps(g) * (size_t)(g->f > 0 ? g->f : 0);
    return kf ? kg__cuda(cudaMemsetAsync(dW, 0, kf * sizeof *dW, s)) : KG_OK;
}

/* ---- the drivers, for both precisions: T is the GEMMs' operand type
 * (float: the operands as they are; kg_bf16: rounded into the workspace) */

static int kg_gemm(kg_blas_t h, kg_stream_t s, bool ta, bool tb, int rows,
                   int cols, int inner, const float *A, int lda,
                   const float *B, int ldb, float beta, float *C)
{
    return kg__gemm_rm(h, s, ta, tb, rows, cols, inner, A, lda, B, ldb, beta,
                       C);
}
static int kg_gemm(kg_blas_t h, kg_stream_t s, bool ta, bool tb, int rows,
                   int cols, int inner, const kg_bf16 *A, int lda,
                   const kg_bf16 *B, int ldb, float beta, float *C)
{
    return kg__gemm_bf16_rm(h, s, ta, tb, rows, cols, inner, A, lda, B, ldb,
                            beta, C);
}

/* A group's dY as the GEMMs take it: itself, or rounded into buf. */
static int kg_dy_as(const float *dy, size_t n, float *buf, const float **out,
                    kg_stream_t s)
{
    (void)n, (void)buf, (void)s;
    *out = dy;
    return KG_OK;
}
static int kg_dy_as(const float *dy, size_t n, kg_bf16 *buf,
                    const kg_bf16 **out, kg_stream_t s)
{
    *out = buf;
    return kg__bf16_of(n, dy, buf, s);
}

/* Y = conv(X, W) + b (relu), `step` images per GEMM through col. */
template <typename T>
static int kg_fwd(kg_blas_t h, const kops_conv2d_t *g, const float *X,
                  const T *W, const float *b, float *Y, T *col, int step,
                  kg_stream_t s)
{
    size_t plane = (size_t)g->oh * g->ow;
    size_t in_img = (size_t)g->h * g->w * g->c;
    int K = (int)kg_taps(g), F = g->f, rc = KG_OK;
    for (int i = 0; i < g->n && rc == KG_OK; i += step) {
        int m = g->n - i < step ? g->n - i : step;
        int rows = (int)(plane * (size_t)m);
        rc = kg_im2col(g, m, X + (size_t)i * in_img, col, s);
        /* Y[rows x F] = col[rows x K] W[K x F] */
        if (rc == KG_OK)
            rc = kg_gemm(h, s, false, false, rows, F, K, col, K, W, F, 0.0f,
                         Y + (size_t)i * plane * F);
    }
    return rc == KG_OK ? kg_fwd_bias_relu(g, b, Y, s) : rc;
}

/* dW and dX (when dX), `step` images per GEMM: col for the im2col, dyb
 * for a group's dY (kg_dy_as), dcol for its dX columns (float32 may give
 * col itself: the stream runs that GEMM after the one that read col). */
template <typename T>
static int kg_bwd(kg_blas_t h, const kops_conv2d_t *g, const float *X,
                  const T *W, const float *dY, float *dW, float *dX, T *col,
                  T *dyb, float *dcol, int step, kg_stream_t s)
{
    size_t plane = (size_t)g->oh * g->ow;
    size_t in_img = (size_t)g->h * g->w * g->c;
    int K = (int)kg_taps(g), F = g->f, rc = KG_OK;
    for (int i = 0; i < g->n && rc == KG_OK; i += step) {
        int m = g->n - i < step ? g->n - i : step;
        int rows = (int)(plane * (size_t)m);
        const T *dy = NULL;
        if (!(g->col_ready && m == g->n))      /* else the forward's im2col */
            rc = kg_im2col(g, m, X + (size_t)i * in_img, col, s);
        if (rc == KG_OK)
            rc = kg_dy_as(dY + (size_t)i * plane * F, (size_t)rows * F, dyb,
                          &dy, s);
        /* dW[K x F] (+)= col^T[K x rows] dY[rows x F] */
        if (rc == KG_OK)
            rc = kg_gemm(h, s, true, false, K, F, rows, col, K, dy, F,
                         i == 0 ? 0.0f : 1.0f, dW);
        if (rc != KG_OK || !dX)
            continue;
        /* dcol[rows x K] = dY[rows x F] W^T[F x K] */
        rc = kg_gemm(h, s, false, true, rows, K, F, dy, F, W, F, 0.0f, dcol);
        if (rc == KG_OK)
            rc = kg_col2im(g, m, dcol, dX + (size_t)i * in_img, s);
    }
    return rc;
}

int kg_conv2d_fwd(kg_blas_t h, const kops_conv2d_t *g, const float *X,
                  const float *W, const float *b, float *Y, float *col,
                  size_t col_len, kg_stream_t s)
{
    if (!g)
        return kg__fail(KG_EINVAL, "kg_conv2d_fwd: no geometry");
    if (g->n <= 0 || g->f <= 0)
        return KG_OK;                           /* as kc_conv2d_fwd */
    if (!h)
        return kg__fail(KG_EINVAL, "kg_conv2d_fwd: no cuBLAS handle");
    if (!kg_col_ok(g, col, col_len))
        return kg__fail(KG_EINVAL, "kg_conv2d_fwd: col_len below one image");
    return kg_fwd(h, g, X, W, b, Y, col, kg_group_of(g, col_len), s);
}

int kg_conv2d_bwd(kg_blas_t h, const kops_conv2d_t *g, const float *X,
                  const float *W, const float *dY, float *dW, float *db,
                  float *dX, float *col, size_t col_len, kg_stream_t s)
{
    if (!g || !dW)
        return kg__fail(KG_EINVAL, "kg_conv2d_bwd: no geometry or dW");
    int rc = kg_bwd_bias_empty(g, dY, dW, db, s);
    if (rc != KG_OK || g->n <= 0)
        return rc;
    if (!h)
        return kg__fail(KG_EINVAL, "kg_conv2d_bwd: no cuBLAS handle");
    if (!kg_col_ok(g, col, col_len))
        return kg__fail(KG_EINVAL, "kg_conv2d_bwd: col_len below one image");
    return kg_bwd(h, g, X, W, dY, dW, dX, col, (float *)NULL, col,
                  kg_group_of(g, col_len), s);
}

/* The relu's mask and db first, one pass over dY on the device, then the
 * backward (kops_list.h: the same bits as the two ops). */
int kg_conv2d_bwd_relu(kg_blas_t h, const kops_conv2d_t *g, const float *X,
                       const float *W, const float *Y, float *dY, float *dW,
                       float *db, float *dX, float *col, size_t col_len,
                       kg_stream_t s)
{
    if (!g || !dW)
        return kg__fail(KG_EINVAL, "kg_conv2d_bwd_relu: no geometry or dW");
    int m = g->n > 0 ? g->n * g->oh * g->ow : 0;
    int rc = kg_relu_bias_grad(m, g->f, Y, dY, db, s);
    if (rc != KG_OK)
        return rc;
    return kg_conv2d_bwd(h, g, X, W, dY, dW, NULL, dX, col, col_len, s);
}

/* The pooling's backward into dY, then the backward (kops_list.h: the same
 * bits as the two ops). A GPU's forward pools the batch in one call. */
int kg_conv2d_bwd_pooled(kg_blas_t h, const kops_conv2d_t *g,
                         const kops_pool2d_t *pg, int pool_rows,
                         const float *dP, const int32_t *argmax,
                         const float *P, const float *X, const float *W,
                         float *dY, float *dW, float *db, float *dX,
                         float *col, size_t col_len, kg_stream_t s)
{
    if (!g || !pg || !dW)
        return kg__fail(KG_EINVAL, "kg_conv2d_bwd_pooled: no geometry or dW");
    if (pool_rows < pg->n)
        return kg__fail(KG_EINVAL, "kg_conv2d_bwd_pooled: the pooling's "
                        "forward ran in groups (a CPU's form)");
    int rc = kg_maxpool2d_bwd_relu(pg, dP, argmax, P, dY, s);
    if (rc != KG_OK)
        return rc;
    return kg_conv2d_bwd(h, g, X, W, dY, dW, db, dX, col, col_len, s);
}

/* ---- mixed_bfloat16 ------------------------------------------------------ */

/* The workspace's parts (kops_conv2d_bf16_gpu_len): W, a group's im2col
 * and its dY in bf16, the group's dX columns in fp32; `group` images, as
 * many as work_len holds. */
typedef struct conv_bf16 {
    kg_bf16 *w, *col, *dy;
    float   *dcol;
    int      group;
} conv_bf16_t;

static int conv_parts(const char *who, const kops_conv2d_t *g, float *work,
                      size_t work_len, conv_bf16_t *p)
{
    if (!work || work_len < kops_conv2d_bf16_gpu_len(g, 1))
        return kg__fail(KG_EINVAL, who);
    size_t one = kops_conv2d_bf16_gpu_len(g, 1);
    size_t each = kops_conv2d_bf16_gpu_len(g, 2) - one;  /* >= one image */
    size_t more = each ? (work_len - one) / each : 0;
    p->group = more + 1 < (size_t)g->n ? (int)(more + 1) : g->n;
    while (p->group > 1 &&
           kops_conv2d_bf16_gpu_len(g, (size_t)p->group) > work_len)
        p->group--;                  /* the parts' rounding, at the margin */
    size_t K = kg_taps(g), F = (size_t)g->f;
    size_t rows = (size_t)p->group * g->oh * g->ow;
    size_t at = 0;
    p->w = (kg_bf16 *)work;
    at += kops_bf16_part(K * F);
    p->col = (kg_bf16 *)(work + at);
    at += kops_bf16_part(rows * K);
    p->dy = (kg_bf16 *)(work + at);
    at += kops_bf16_part(rows * F);
    p->dcol = work + at;
    return KG_OK;
}

int kg_conv2d_fwd_bf16(kg_blas_t h, const kops_conv2d_t *g, const float *X,
                       const float *W, const float *b, float *Y, float *work,
                       size_t work_len, kg_stream_t s)
{
    if (!g)
        return kg__fail(KG_EINVAL, "kg_conv2d_fwd_bf16: no geometry");
    if (g->n <= 0 || g->f <= 0)
        return KG_OK;                           /* as kc_conv2d_fwd_bf16 */
    if (!h)
        return kg__fail(KG_EINVAL, "kg_conv2d_fwd_bf16: no cuBLAS handle");
    conv_bf16_t p = {};
    int rc = conv_parts("kg_conv2d_fwd_bf16: work_len below one image",
                        g, work, work_len, &p);
    if (rc == KG_OK)
        rc = kg__bf16_of(kg_taps(g) * (size_t)g->f, W, p.w, s);
    return rc == KG_OK ? kg_fwd(h, g, X, (const kg_bf16 *)p.w, b, Y, p.col,
                                p.group, s)
                       : rc;
}

int kg_conv2d_bwd_bf16(kg_blas_t h, const kops_conv2d_t *g, const float *X,
                       const float *W, const float *dY, float *dW, float *db,
                       float *dX, float *work, size_t work_len,
                       kg_stream_t s)
{
    if (!g || !dW)
        return kg__fail(KG_EINVAL, "kg_conv2d_bwd_bf16: no geometry or dW");
    int rc = kg_bwd_bias_empty(g, dY, dW, db, s);
    if (rc != KG_OK || g->n <= 0)
        return rc;
    if (!h)
        return kg__fail(KG_EINVAL, "kg_conv2d_bwd_bf16: no cuBLAS handle");
    conv_bf16_t p = {};
    rc = conv_parts("kg_conv2d_bwd_bf16: work_len below one image", g, work,
                    work_len, &p);
    if (rc == KG_OK && dX)
        rc = kg__bf16_of(kg_taps(g) * (size_t)g->f, W, p.w, s);
    kops_conv2d_t gb = *g;
    gb.col_ready = 0;                 /* the forward's col is not this one */
    return rc == KG_OK ? kg_bwd(h, &gb, X, (const kg_bf16 *)p.w, dY, dW, dX,
                                p.col, p.dy, p.dcol, p.group, s)
                       : rc;
}
