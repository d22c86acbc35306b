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
    size_t plane = (size_t)g->oh * g->ow;
    size_t in_img = (size_t)g->h * g->w * g->c;
    int K = (int)kg_taps(g), F = g->f, step = kg_group_of(g, col_len);
    int rc = KG_OK;
    for (int i = 0; i < g->n && rc == KG_OK; i += step) {
        int m = g->n - i < step ? g->n - i : step;
        int rows = (int)(plane * (size_t)m);
        rc = kg_im2col(g, m, X + (size_t)i * in_img, col, s);
        /* Y[rows x F] = col[rows x K] W[K x F] */
        if (rc == KG_OK)
            rc = kg__gemm_rm(h, s, false, false, rows, F, K, col, K, W, F,
                             0.0f, Y + (size_t)i * plane * F);
    }
    if (rc == KG_OK && b)
        rc = kg_bias_add((int)(plane * (size_t)g->n), F, b, Y, s);
    if (rc == KG_OK && g->relu)
        rc = kg_relu_fwd(plane * (size_t)g->n * (size_t)F, Y, Y, s);
    return rc;
}

int kg_conv2d_bwd(kg_blas_t h, const kops_conv2d_t *g, const float *X,
                  const float *W, const float *dY, float *dW, float *db,
                  float *dX, float *col, size_t col_len, kg_stream_t s)
{
    if (!g || !dW)
        return kg__fail(KG_EINVAL, "kg_conv2d_bwd: no geometry or dW");
    size_t plane = (size_t)g->oh * g->ow;
    size_t in_img = (size_t)g->h * g->w * g->c;
    int K = (int)kg_taps(g), F = g->f;
    int rc = KG_OK;
    if (db)
        rc = kg_bias_grad((int)(plane * (size_t)(g->n > 0 ? g->n : 0)), F, dY,
                          db, s);
    if (rc != KG_OK)
        return rc;
    if (g->n <= 0) {                            /* as kc: dW = 0 */
        size_t kf = (size_t)K * (size_t)(F > 0 ? F : 0);
        return kf ? kg__cuda(cudaMemsetAsync(dW, 0, kf * sizeof *dW, s))
                  : KG_OK;
    }
    if (!h)
        return kg__fail(KG_EINVAL, "kg_conv2d_bwd: no cuBLAS handle");
    if (!kg_col_ok(g, col, col_len))
        return kg__fail(KG_EINVAL, "kg_conv2d_bwd: col_len below one image");
    int step = kg_group_of(g, col_len);
    for (int i = 0; i < g->n && rc == KG_OK; i += step) {
        int m = g->n - i < step ? g->n - i : step;
        int rows = (int)(plane * (size_t)m);
        const float *dy = dY + (size_t)i * plane * F;
        if (!(g->col_ready && m == g->n))      /* else the forward's im2col */
            rc = kg_im2col(g, m, X + (size_t)i * in_img, col, s);
        /* dW[K x F] (+)= col^T[K x rows] dY[rows x F] */
        if (rc == KG_OK)
            rc = kg__gemm_rm(h, s, true, false, K, F, rows, col, K, dy, F,
                             i == 0 ? 0.0f : 1.0f, dW);
        if (rc != KG_OK || !dX)
            continue;
        /* dcol[rows x K] = dY[rows x F] W^T[F x K], into col: the stream
         * runs it after the GEMM above has read col. */
        rc = kg__gemm_rm(h, s, false, true, rows, K, F, dy, F, W, F, 0.0f,
                         col);
        if (rc == KG_OK)
            rc = kg_col2im(g, m, col, dX + (size_t)i * in_img, s);
    }
    return rc;
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
    conv_bf16_t p;
    int rc = conv_parts("kg_conv2d_fwd_bf16: work_len below one image",
                        g, work, work_len, &p);
    size_t plane = (size_t)g->oh * g->ow;
    size_t in_img = (size_t)g->h * g->w * g->c;
    int K = (int)kg_taps(g), F = g->f;
    if (rc == KG_OK)
        rc = kg__bf16_of((size_t)K * F, W, p.w, s);
    for (int i = 0; i < g->n && rc == KG_OK; i += p.group) {
        int m = g->n - i < p.group ? g->n - i : p.group;
        int rows = (int)(plane * (size_t)m);
        rc = kg_im2col(g, m, X + (size_t)i * in_img, p.col, s);
        /* Y[rows x F] = col[rows x K] W[K x F] */
        if (rc == KG_OK)
            rc = kg__gemm_bf16_rm(h, s, false, false, rows, F, K, p.col, K,
                                  p.w, F, 0.0f, Y + (size_t)i * plane * F);
    }
    if (rc == KG_OK && b)
        rc = kg_bias_add((int)(plane * (size_t)g->n), F, b, Y, s);
    if (rc == KG_OK && g->relu)
        rc = kg_relu_fwd(plane * (size_t)g->n * (size_t)F, Y, Y, s);
    return rc;
}

int kg_conv2d_bwd_bf16(kg_blas_t h, const kops_conv2d_t *g, const float *X,
                       const float *W, const float *dY, float *dW, float *db,
                       float *dX, float *work, size_t work_len,
                       kg_stream_t s)
{
    if (!g || !dW)
        return kg__fail(KG_EINVAL, "kg_conv2d_bwd_bf16: no geometry or dW");
    size_t plane = (size_t)g->oh * g->ow;
    size_t in_img = (size_t)g->h * g->w * g->c;
    int K = (int)kg_taps(g), F = g->f;
    int rc = KG_OK;
    if (db)
        rc = kg_bias_grad((int)(plane * (size_t)(g->n > 0 ? g->n : 0)), F, dY,
                          db, s);
    if (rc != KG_OK)
        return rc;
    if (g->n <= 0) {                            /* as kc: dW = 0 */
        size_t kf = (size_t)K * (size_t)(F > 0 ? F : 0);
        return kf ? kg__cuda(cudaMemsetAsync(dW, 0, kf * sizeof *dW, s))
                  : KG_OK;
    }
    if (!h)
        return kg__fail(KG_EINVAL, "kg_conv2d_bwd_bf16: no cuBLAS handle");
    conv_bf16_t p;
    rc = conv_parts("kg_conv2d_bwd_bf16: work_len below one image", g, work,
                    work_len, &p);
    if (rc == KG_OK && dX)
        rc = kg__bf16_of((size_t)K * F, W, p.w, s);
    for (int i = 0; i < g->n && rc == KG_OK; i += p.group) {
        int m = g->n - i < p.group ? g->n - i : p.group;
        int rows = (int)(plane * (size_t)m);
        rc = kg_im2col(g, m, X + (size_t)i * in_img, p.col, s);
        if (rc == KG_OK)
            rc = kg__bf16_of((size_t)rows * F, dY + (size_t)i * plane * F,
                             p.dy, s);
        /* dW[K x F] (+)= col^T[K x rows] dY[rows x F] */
        if (rc == KG_OK)
            rc = kg__gemm_bf16_rm(h, s, true, false, K, F, rows, p.col, K,
                                  p.dy, F, i == 0 ? 0.0f : 1.0f, dW);
        if (rc != KG_OK || !dX)
            continue;
        /* dcol[rows x K] = dY[rows x F] W^T[F x K], fp32 */
        rc = kg__gemm_bf16_rm(h, s, false, true, rows, K, F, p.dy, F, p.w, F,
                              0.0f, p.dcol);
        if (rc == KG_OK)
            rc = kg_col2im(g, m, p.dcol, dX + (size_t)i * in_img, s);
    }
    return rc;
}
