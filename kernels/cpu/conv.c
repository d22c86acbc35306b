/* conv2d forward/backward on NHWC float32: the direct kernels
 * (conv_direct.c) where kc_conv2d_path says so, else lowered to GEMM
 * through CBLAS:
 * im2col turns a group of images into a matrix col[rows x K] (one row per
 * output position, K = kh*kw*c taps in the kernel's [kh][kw][c] order), so
 * that Y[rows x f] = col W[K x f] is one sgemm, and the backward pass is two
 * more (dW = col^T dY, dcol = dY W^T) plus col2im. */
#include "kernels_cpu.h"
#include "conv_direct.h"
#include "kc_loop.h"

#include <cblas.h>
#include <string.h>

static size_t taps(const kops_conv2d_t *g)
{
    return (size_t)g->kh * (size_t)g->kw * (size_t)g->c;
}

size_t kc_conv2d_col_len(const kops_conv2d_t *g)
{
    return kops_conv2d_col_len(g);
}

/* Images per GEMM: as many as col holds, at least one, at most n. */
static int group_of(const kops_conv2d_t *g, size_t col_len)
{
    size_t one = kc_conv2d_col_len(g);
    size_t k = one ? col_len / one : (size_t)g->n;
    if (k < 1)
        k = 1;
    return k > (size_t)g->n ? g->n : (int)k;
}

/* col[(i*oh + oy)*ow + ox][(ky*kw + kx)*c + ch] = X[i][y][x][ch] for the
 * images [0, m) at X, zero where (y, x) falls in the padding. */
static void im2col(const kops_conv2d_t *g, int m, const float *X, float *col)
{
    size_t c = (size_t)g->c, rowlen = (size_t)g->kw * c;
    size_t K = taps(g);
    for (int i = 0; i < m; i++) {
        const float *img = X + (size_t)i * g->h * g->w * c;
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++) {
                float *dst = col + (((size_t)i * g->oh + oy) * g->ow + ox) * K;
                int y0 = oy * g->stride_h - g->pad_top;
                int x0 = ox * g->stride_w - g->pad_left;
                for (int ky = 0; ky < g->kh; ky++, dst += rowlen) {
                    int y = y0 + ky;
                    if (y < 0 || y >= g->h) {
                        memset(dst, 0, rowlen * sizeof *dst);
                        continue;
                    }
                    const float *src = img + (size_t)y * g->w * c;
                    if (x0 >= 0 && x0 + g->kw <= g->w) {
                        /* The whole kernel row is inside: one copy. */
                        memcpy(dst, src + (size_t)x0 * c, rowlen * sizeof *dst);
                        continue;
                    }
                    for (int kx = 0; kx < g->kw; kx++) {
                        int x = x0 + kx;
                        if (x < 0 || x >= g->w)
                            memset(dst + kx * c, 0, c * sizeof *dst);
                        else
                            memcpy(dst + kx * c, src + (size_t)x * c,
                                   c * sizeof *dst);
                    }
                }
            }
    }
}

/* The adjoint of im2col: dX[i][y][x][ch] += dcol[...] for every tap that
 * read it (dX already zeroed). */
KC_HOT __attribute__((noinline)) static void
col2im(const kops_conv2d_t *g, int m, const float *dcol, float *dX)
{
    size_t c = (size_t)g->c, K = taps(g);
    for (int i = 0; i < m; i++) {
        float *img = dX + (size_t)i * g->h * g->w * c;
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++) {
                const float *src =
                    dcol + (((size_t)i * g->oh + oy) * g->ow + ox) * K;
                int y0 = oy * g->stride_h - g->pad_top;
                int x0 = ox * g->stride_w - g->pad_left;
                for (int ky = 0; ky < g->kh; ky++) {
                    int y = y0 + ky;
                    if (y < 0 || y >= g->h)
                        continue;
                    for (int kx = 0; kx < g->kw; kx++) {
                        int x = x0 + kx;
                        if (x < 0 || x >= g->w)
                            continue;
                        float *restrict d = img + ((size_t)y * g->w + x) * c;
                        const float *restrict s =
                            src + ((size_t)ky * g->kw + kx) * c;
                        KC_FOR(ch, c, d[ch] += s[ch]);
                    }
                }
            }
    }
}

void kc_conv2d_fwd(const kops_conv2d_t *g, const float *X, const float *W,
                   const float *b, float *Y, float *col, size_t col_len)
{
    if (g->n <= 0 || g->f <= 0)
        return;
    int path = kc_conv2d_path(g);
    if (path != KC_CONV_GEMM) {
        kc__conv2d_fwd_direct(path, g, X, W, b, Y, col, col_len);
        return;
    }
    size_t plane = (size_t)g->oh * g->ow;     /* output positions per image */
    size_t in_img = (size_t)g->h * g->w * g->c;
    int K = (int)taps(g), F = g->f, step = group_of(g, col_len);
    for (int i = 0; i < g->n; i += step) {
        int m = g->n - i < step ? g->n - i : step;
        int rows = (int)(plane * (size_t)m);
        float *y = Y + (size_t)i * plane * F;
        if (b)
            for (int r = 0; r < rows; r++)
                memcpy(y + (size_t)r * F, b, (size_t)F * sizeof *y);
        im2col(g, m, X + (size_t)i * in_img, col);
        /* One GEMM per image: an sgemm's rows may round differently with
         * the number of rows around them (OpenBLAS's tail kernels on some
         * CPUs), and an image must come out the same however the batch is
         * split over replicas and workers -- else max pooling's ties break
         * differently and a split job drifts from one device's. */
        for (int j = 0; j < m; j++) {
            float *yj = y + (size_t)j * plane * F;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)plane,
                        F, K, 1.0f, col + (size_t)j * plane * K, K, W, F,
                        b ? 1.0f : 0.0f, yj, F);
            if (g->relu)
                kc_relu_fwd(plane * (size_t)F, yj, yj);
        }
    }
}

/* kc_conv2d_bwd, with Y kc_conv2d_bwd_relu (dY then written: masked in
 * place, else only read), with src kc_conv2d_bwd_pooled (dY made first). */
static void bwd(const kops_conv2d_t *g, const float *X, const float *W,
                const float *Y, const kc_pool_src_t *src, float *dY,
                float *dW, float *db, float *dX, float *col, size_t col_len)
{
    size_t plane = (size_t)g->oh * g->ow;
    size_t in_img = (size_t)g->h * g->w * g->c;
    int K = (int)taps(g), F = g->f, step = group_of(g, col_len);
    int rows_all = (int)(plane * (size_t)(g->n > 0 ? g->n : 0));
    int path = g->n > 0 ? kc_conv2d_path(g) : KC_CONV_GEMM;
    if (path != KC_CONV_GEMM) {
        kc__conv2d_bwd_direct(path, g, X, W, Y, src, dY, dW, db, dX, col,
                              col_len);
        return;
    }
    if (src)
        kc__maxpool_bwd_rows(src, 0, g->n > 0 ? g->n : 0, dY);
    if (Y)
        kc_relu_bias_grad(rows_all, F, Y, dY, db);
    else if (db)
        kc_bias_grad(rows_all, F, dY, db);
    if (g->n <= 0) {
        memset(dW, 0, (size_t)K * F * sizeof *dW);
        return;
    }
    if (dX)
        memset(dX, 0, (size_t)g->n * in_img * sizeof *dX);
    for (int i = 0; i < g->n; i += step) {
        int m = g->n - i < step ? g->n - i : step;
        int rows = (int)(plane * (size_t)m);
        const float *dy = dY + (size_t)i * plane * F;
        if (!(g->col_ready && m == g->n))
            im2col(g, m, X + (size_t)i * in_img, col);
        /* dW[K x F] (+)= col^T[K x rows] dY[rows x F] */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, F, rows,
                    1.0f, col, K, dy, F, i == 0 ? 0.0f : 1.0f, dW, F);
        if (!dX)
            continue;
        /* dcol[rows x K] = dY[rows x F] W^T[F x K], into col (read above) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, K, F,
                    1.0f, dy, F, W, F, 0.0f, col, K);
        col2im(g, m, col, dX + (size_t)i * in_img);
    }
}

void kc_conv2d_bwd(const kops_conv2d_t *g, const float *X, const float *W,
                   const float *dY, float *dW, float *db, float *dX,
                   float *col, size_t col_len)
{
    bwd(g, X, W, NULL, NULL, (float *)dY, dW, db, dX, col, col_len);
}

void kc_conv2d_bwd_relu(const kops_conv2d_t *g, const float *X,
                        const float *W, const float *Y, float *dY, float *dW,
                        float *db, float *dX, float *col, size_t col_len)
{
    bwd(g, X, W, Y, NULL, dY, dW, db, dX, col, col_len);
}

void kc_conv2d_bwd_pooled(const kops_conv2d_t *g, const kops_pool2d_t *pg,
                          int pool_rows, const float *dP,
                          const int32_t *argmax, const float *P,
                          const float *X, const float *W, float *dY,
                          float *dW, float *db, float *dX, float *col,
                          size_t col_len)
{
    kc_pool_src_t src = { pg, pool_rows, dP, P, argmax };
    bwd(g, X, W, NULL, &src, dY, dW, db, dX, col, col_len);
}
