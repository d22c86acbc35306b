/* conv2d on NHWC float32, the twin of kernels/cpu/conv.c: im2col turns a
 * group of images into col[rows x K] (one row per output position, K =
 * kh*kw*c taps in the kernel's [kh][kw][c] order), Y = col W is one cuBLAS
 * sgemm, and the backward pass is dW (+)= col^T dY, dcol = dY W^T and
 * col2im. Groups hold as many images as col_len floats allow, exactly as the
 * CPU twin, so the same workspace serves both. */
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

/* col[(i*oh + oy)*ow + ox][(ky*kw + kx)*c + ch] = X[i][y][x][ch], zero in
 * the padding; one thread per col element, taps innermost (coalesced
 * writes, and reads along channels). */
__global__ void kg_im2col_k(size_t total, kops_conv2d_t g, const float *X,
                            float *col)
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
        col[idx] = (y >= 0 && y < g.h && x >= 0 && x < g.w)
                       ? X[((i * g.h + y) * g.w + x) * g.c + ch]
                       : 0.0f;
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

static int kg_im2col(const kops_conv2d_t *g, int m, const float *X,
                     float *col, kg_stream_t s)
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
