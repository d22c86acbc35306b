/* mixed_bfloat16's kernels (kernels_cpu.h: kc_conv2d_*_bf16,
 * kc_dense_*_bf16) on a CPU with AVX512_BF16 (else SKIP, exit 77):
 *  - kc_bf16_of is round to nearest even with denormals to signed zero and
 *    NaNs quieted, and the kernels' own vector conversion gives the same
 *    bits (a 1x1 convolution by 1.0 returns the rounded input);
 *  - conv2d forward, dW and dX over strides 1..3, valid and same padding,
 *    1x1 to 5x5 and non-square kernels, odd channel and filter counts,
 *    both dX forms, batches 1..4; and dense forward, dW, dX over odd and
 *    even sizes, against a double reference computed on the bf16-rounded
 *    inputs: within fp32's rounding of the chain (|error| <= (steps + 2) *
 *    2^-24 * the sum of |products|), and against the fp32 kernels within a
 *    relative L2 of 1e-2;
 *  - an image's (a row's) forward and dX are the same bits in a batch of 1
 *    as in a batch of 4, whatever their neighbours;
 *  - the gradients of a small conv net (conv, relu, conv, relu, dense,
 *    softmax cross-entropy) in bf16 against the fp32 kernels' within a
 *    relative L2 of 3e-2 per variable, and its loss within 1e-2. */
#include "kc_test.h"
#include "kernels_cpu.h"

#include <stdlib.h>
#include <string.h>

static float rb(float x) /* x rounded to bf16, as a float */
{
    float f;
    kc_bf16_round(1, &x, &f);
    return f;
}

static uint32_t bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static float of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The reference rounding, by another road: the two bf16 neighbours of a
 * normal x by truncation, the nearer one (the even one on a tie). */
static uint16_t ref_bf16(float x)
{
    uint32_t u = bits(x);
    uint32_t e = (u >> 23) & 0xff;
    if (e == 0)
        return (uint16_t)((u >> 16) & 0x8000);
    if (e == 0xff)
        return (uint16_t)((u >> 16) | ((u & 0x7fffff) ? 0x40 : 0));
    /* |x| between |lo| and |lo| + one bf16 ulp (2^(e - 134); past the
     * largest bf16 that is 2^128: infinity) */
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    double ax = fabs((double)x), al = fabs((double)of_bits((uint32_t)lo << 16));
    double dl = ax - al, dh = al + ldexp(1.0, (int)e - 134) - ax;
    if (dl < dh || (dl == dh && !(lo & 1)))
        return lo;
    return hi;
}

static void conversion(void)
{
    static const uint32_t special[] = {
        0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x00800000u,
        0x3f800000u, 0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x7f7fffffu,
        0xff7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u,
        0xff810000u, 0x3f807fffu, 0x477fe000u,
    };
    for (size_t i = 0; i < sizeof special / sizeof *special; i++) {
        float x = of_bits(special[i]);
        CHECKF(kc_bf16_of(x) == ref_bf16(x), "bf16(0x%08x) = 0x%04x, want "
               "0x%04x", special[i], kc_bf16_of(x), ref_bf16(x));
    }
    kc_seed(7);
    int bad = 0;
    for (int i = 0; i < 200000; i++) {
        uint32_t u = (uint32_t)(kc_unif(0, 4294967296.0));
        float x = of_bits(u);
        if (kc_bf16_of(x) != ref_bf16(x) && bad++ < 3)
            CHECKF(0, "bf16(0x%08x) = 0x%04x, want 0x%04x", u, kc_bf16_of(x),
                   ref_bf16(x));
    }
    CHECK(bad == 0);
    /* the vector conversion: Y = bf16(x) * 1.0 by a 1x1 convolution
     * (normal, finite inputs: the dot product flushes denormals too) */
    enum { N = 1000 };
    kops_conv2d_t g = { 1, 1, N, 1, 1, 1, 1, 1, 1, 0, 0, 1, N, 0, 0 };
    float *X = malloc(N * sizeof *X), *Y = malloc(N * sizeof *Y);
    float W = 1.0f;
    float *work = malloc(kops_conv2d_bf16_len(&g) * sizeof(float));
    CHECK(X && Y && work);
    for (int i = 0; i < N; i++) {
        uint32_t u;
        do
            u = (uint32_t)kc_unif(0, 4294967296.0);
        while (((u >> 23) & 0xff) == 0 || ((u >> 23) & 0xff) >= 0xfe);
        X[i] = of_bits(u);
    }
    X[0] = 1.00390625f;                    /* 1 + 2^-8: a tie, to even */
    X[1] = 1.01171875f;                    /* 1 + 3 * 2^-8: up */
    kc_conv2d_fwd_bf16(&g, X, &W, NULL, Y, work, kops_conv2d_bf16_len(&g));
    bad = 0;
    for (int i = 0; i < N; i++)
        if (bits(Y[i]) != (uint32_t)kc_bf16_of(X[i]) << 16 && bad++ < 3)
            CHECKF(0, "vector bf16(%a) = %a, scalar %a", (double)X[i],
                   (double)Y[i], (double)rb(X[i]));
    CHECK(bad == 0);
    CHECK(Y[0] == 1.0f && Y[1] == 1.015625f);
    free(X), free(Y), free(work);
}

/* ---- conv2d ------------------------------------------------------------ */

static int axis(int n, int k, int s, int same, int *pad)
{
    if (!same) {
        *pad = 0;
        return (n - k) / s + 1;
    }
    int out = (n + s - 1) / s, total = (out - 1) * s + k - n;
    *pad = total > 0 ? total / 2 : 0;
    return out;
}

static kops_conv2d_t geom(int n, int h, int w, int c, int kh, int kw, int f,
                          int s, int same)
{
    kops_conv2d_t g = { n, h, w, c, kh, kw, f, s, s, 0, 0, 0, 0, 0, 0 };
    g.oh = axis(h, kh, s, same, &g.pad_top);
    g.ow = axis(w, kw, s, same, &g.pad_left);
    return g;
}

static size_t nx(const kops_conv2d_t *g) { return kops_n4(g->n, g->h, g->w, g->c); }
static size_t ny(const kops_conv2d_t *g) { return kops_n4(g->n, g->oh, g->ow, g->f); }
static size_t nw(const kops_conv2d_t *g) { return kops_n4(g->kh, g->kw, g->c, g->f); }

/* Double references on bf16-rounded operands, and per element the sum of
 * |products| and the steps of its chain (pairs). */
static void ref_conv(const kops_conv2d_t *g, const float *X, const float *W,
                     const float *b, const float *dY, double *Y, double *Ya,
                     double *dW, double *dWa, double *dX, double *dXa)
{
    size_t C = (size_t)g->c, F = (size_t)g->f;
    memset(dW, 0, nw(g) * sizeof *dW), memset(dWa, 0, nw(g) * sizeof *dWa);
    memset(dX, 0, nx(g) * sizeof *dX), memset(dXa, 0, nx(g) * sizeof *dXa);
    for (int i = 0; i < g->n; i++)
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++)
                for (size_t f = 0; f < F; f++) {
                    size_t yo = (((size_t)i * g->oh + oy) * g->ow + ox) * F + f;
                    double acc = b ? b[f] : 0.0, abs_ = fabs(acc);
                    double dy = rb(dY[yo]);
                    for (int ky = 0; ky < g->kh; ky++)
                        for (int kx = 0; kx < g->kw; kx++) {
                            int y = oy * g->stride_h - g->pad_top + ky;
                            int x = ox * g->stride_w - g->pad_left + kx;
                            if (y < 0 || y >= g->h || x < 0 || x >= g->w)
                                continue;
                            for (size_t c = 0; c < C; c++) {
                                size_t xi = (((size_t)i * g->h + y) * g->w + x) * C + c;
                                size_t wi = (((size_t)ky * g->kw + kx) * C + c) * F + f;
                                double p = (double)rb(X[xi]) * rb(W[wi]);
                                acc += p, abs_ += fabs(p);
                                double q = (double)rb(X[xi]) * dy;
                                dW[wi] += q, dWa[wi] += fabs(q);
                                double r = dy * rb(W[wi]);
                                dX[xi] += r, dXa[xi] += fabs(r);
                            }
                        }
                    Y[yo] = acc, Ya[yo] = abs_;
                }
}

/* |got - want| <= tol * scale[i] for every i (+ a denormal's slack) */
static void check_chain(const char *what, size_t n, const float *got,
                        const double *want, const double *scale, double tol)
{
    size_t bad = (size_t)-1;
    for (size_t i = 0; i < n && bad == (size_t)-1; i++)
        if (!(fabs((double)got[i] - want[i]) <= tol * scale[i] + 1e-30))
            bad = i;
    CHECKF(bad == (size_t)-1, "%s[%zu]: got %.9g want %.9g (sum |p| %.3g)",
           what, bad, bad == (size_t)-1 ? 0.0 : (double)got[bad],
           bad == (size_t)-1 ? 0.0 : want[bad],
           bad == (size_t)-1 ? 0.0 : scale[bad]);
}

static double rel_l2(size_t n, const float *a, const float *b)
{
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return s > 0 ? sqrt(d / s) : sqrt(d);
}

static void conv_case(int n, int h, int w, int c, int kh, int kw, int f, int s,
                      int same)
{
    kops_conv2d_t g = geom(n, h, w, c, kh, kw, f, s, same);
    if (g.oh < 1 || g.ow < 1)
        return;
    char what[160];
    snprintf(what, sizeof what, "n%d %dx%dx%d k%dx%d f%d s%d %s", n, h, w, c,
             kh, kw, f, s, same ? "same" : "valid");
    size_t wl = kops_conv2d_bf16_len(&g), cl = kops_conv2d_col_len(&g);
    float *X = malloc(nx(&g) * 4), *W = malloc(nw(&g) * 4), *b = malloc(f * 4);
    float *dY = malloc(ny(&g) * 4), *Y = malloc(ny(&g) * 4);
    float *dW = malloc(nw(&g) * 4), *dX = malloc(nx(&g) * 4), *db = malloc(f * 4);
    float *Y32 = malloc(ny(&g) * 4), *dW32 = malloc(nw(&g) * 4);
    float *dX32 = malloc(nx(&g) * 4), *db32 = malloc(f * 4);
    float *work = malloc((wl + 16) * 4), *col = malloc(cl * 4);
    double *rY = malloc(ny(&g) * 8), *aY = malloc(ny(&g) * 8);
    double *rW = malloc(nw(&g) * 8), *aW = malloc(nw(&g) * 8);
    double *rX = malloc(nx(&g) * 8), *aX = malloc(nx(&g) * 8);
    CHECK(X && W && b && dY && Y && dW && dX && db && Y32 && dW32 && dX32 &&
          db32 && work && col && rY && aY && rW && aW && rX && aX);
    kc_fill(nx(&g), X, -1, 1);
    kc_fill(nw(&g), W, -0.5, 0.5);
    kc_fill((size_t)f, b, -0.2, 0.2);
    kc_fill(ny(&g), dY, -1, 1);
    /* the workspace is exactly the size the helper says: a guard past it */
    for (int i = 0; i < 16; i++)
        work[wl + i] = 12345.0f;
    kc_conv2d_fwd_bf16(&g, X, W, b, Y, work, wl);
    kc_conv2d_bwd_bf16(&g, X, W, dY, dW, db, dX, work, wl);
    int guard = 1;
    for (int i = 0; i < 16; i++)
        guard &= work[wl + i] == 12345.0f;
    CHECKF(guard, "%s: wrote past kops_conv2d_bf16_len", what);
    /* the fused relu: Y through kc_relu_fwd, bit for bit */
    {
        kops_conv2d_t gr = g;
        gr.relu = 1;
        float *Yr = malloc(ny(&g) * 4), *Yc = malloc(ny(&g) * 4);
        CHECK(Yr && Yc);
        memcpy(Yc, Y, ny(&g) * 4);
        kc_relu_fwd(ny(&g), Yc, Yc);
        kc_conv2d_fwd_bf16(&gr, X, W, b, Yr, work, wl);
        CHECKF(!memcmp(Yr, Yc, ny(&g) * 4), "%s: fused relu", what);
        /* the backward through that relu: as kc_relu_bias_grad then
         * kc_conv2d_bwd_bf16, bit for bit (dY masked, db, dW, dX) */
        float *d1 = malloc(ny(&g) * 4), *d2 = malloc(ny(&g) * 4);
        float *w1 = malloc(nw(&g) * 4), *w2 = malloc(nw(&g) * 4);
        float *x1 = malloc(nx(&g) * 4), *x2 = malloc(nx(&g) * 4);
        float *b1 = malloc(f * 4), *b2 = malloc(f * 4);
        CHECK(d1 && d2 && w1 && w2 && x1 && x2 && b1 && b2);
        memcpy(d1, dY, ny(&g) * 4);
        memcpy(d2, dY, ny(&g) * 4);
        kc_relu_bias_grad(n * g.oh * g.ow, f, Yr, d1, b1);
        kc_conv2d_bwd_bf16(&g, X, W, d1, w1, NULL, x1, work, wl);
        kc_conv2d_bwd_relu_bf16(&g, X, W, Yr, d2, w2, b2, x2, work, wl);
        CHECKF(!memcmp(d1, d2, ny(&g) * 4) && !memcmp(b1, b2, f * 4) &&
               !memcmp(w1, w2, nw(&g) * 4) && !memcmp(x1, x2, nx(&g) * 4),
               "%s: bwd_relu_bf16 differs from relu_bias_grad + bwd_bf16",
               what);
        int guard2 = 1;
        for (int i = 0; i < 16; i++)
            guard2 &= work[wl + i] == 12345.0f;
        CHECKF(guard2, "%s: bwd_relu_bf16 wrote past its workspace", what);
        free(d1), free(d2), free(w1), free(w2), free(x1), free(x2);
        free(b1), free(b2);
        free(Yr), free(Yc);
    }
    ref_conv(&g, X, W, b, dY, rY, aY, rW, aW, rX, aX);
    double u = ldexp(1.0, -24);
    size_t steps_y = (size_t)kh * kw * ((c + 1) / 2) + 2;
    size_t steps_w = (size_t)n * g.oh * ((g.ow + 1) / 2) + 2 + (size_t)n;
    size_t steps_x = (size_t)kh * kw * ((f + 1) / 2) + 2;
    char buf[200];
    snprintf(buf, sizeof buf, "%s Y", what);
    check_chain(buf, ny(&g), Y, rY, aY, 2.0 * (double)steps_y * u);
    snprintf(buf, sizeof buf, "%s dW", what);
    check_chain(buf, nw(&g), dW, rW, aW, 2.0 * (double)steps_w * u);
    snprintf(buf, sizeof buf, "%s dX", what);
    check_chain(buf, nx(&g), dX, rX, aX, 2.0 * (double)steps_x * u);
    /* against fp32 */
    kc_conv2d_fwd(&g, X, W, b, Y32, col, cl);
    kc_conv2d_bwd(&g, X, W, dY, dW32, db32, dX32, col, cl);
    CHECKF(rel_l2(ny(&g), Y, Y32) < 1e-2, "%s: Y rel L2 %.3g", what,
           rel_l2(ny(&g), Y, Y32));
    CHECKF(rel_l2(nw(&g), dW, dW32) < 1e-2, "%s: dW rel L2 %.3g", what,
           rel_l2(nw(&g), dW, dW32));
    CHECKF(rel_l2(nx(&g), dX, dX32) < 1e-2, "%s: dX rel L2 %.3g", what,
           rel_l2(nx(&g), dX, dX32));
    CHECKF(memcmp(db, db32, (size_t)f * 4) == 0, "%s: db", what);
    /* the last image alone: the same bits */
    if (n > 1) {
        kops_conv2d_t g1 = g;
        g1.n = 1;
        size_t xo = nx(&g) - nx(&g1), yo = ny(&g) - ny(&g1);
        float *Y1 = malloc(ny(&g1) * 4), *dX1 = malloc(nx(&g1) * 4);
        float *dW1 = malloc(nw(&g) * 4);
        CHECK(Y1 && dX1 && dW1);
        kc_conv2d_fwd_bf16(&g1, X + xo, W, b, Y1, work, wl);
        kc_conv2d_bwd_bf16(&g1, X + xo, W, dY + yo, dW1, NULL, dX1, work, wl);
        CHECKF(!memcmp(Y1, Y + yo, ny(&g1) * 4), "%s: Y of an image alone",
               what);
        CHECKF(!memcmp(dX1, dX + xo, nx(&g1) * 4), "%s: dX of an image "
               "alone", what);
        free(Y1), free(dX1), free(dW1);
    }
    free(X), free(W), free(b), free(dY), free(Y), free(dW), free(dX), free(db);
    free(Y32), free(dW32), free(dX32), free(db32), free(work), free(col);
    free(rY), free(aY), free(rW), free(aW), free(rX), free(aX);
}

static void conv(void)
{
    kc_seed(11);
    conv_case(2, 28, 28, 1, 3, 3, 32, 1, 0);       /* the CNNs' first layer */
    conv_case(5, 26, 26, 32, 3, 3, 64, 1, 0);      /* the seeds' second:
                                                    * groups of 2, 2, 1 */
    conv_case(3, 14, 14, 16, 3, 3, 32, 1, 1);      /* same: the gather form */
    conv_case(12, 13, 13, 32, 3, 3, 64, 1, 0);     /* valid 13: by taps,
                                                    * groups of 9, 3 */
    conv_case(4, 9, 11, 3, 3, 3, 5, 1, 1);         /* odd c and f */
    conv_case(1, 7, 9, 5, 2, 3, 17, 2, 1);
    conv_case(3, 10, 10, 7, 5, 5, 33, 2, 0);
    conv_case(2, 12, 9, 6, 1, 1, 40, 3, 0);        /* 1x1 stride 3 */
    conv_case(2, 8, 8, 4, 3, 3, 16, 3, 1);         /* same, s = k */
    conv_case(2, 9, 8, 2, 1, 1, 8, 2, 1);          /* same, s > k */
    conv_case(1, 6, 6, 300, 3, 3, 300, 1, 1);      /* wide: more than FMAX */
    conv_case(3, 5, 5, 1, 5, 5, 1, 1, 0);          /* one output pixel */
}

/* ---- dense ------------------------------------------------------------- */

static void dense_case(int m, int k, int n)
{
    char what[64];
    snprintf(what, sizeof what, "dense m%d k%d n%d", m, k, n);
    size_t M = (size_t)m, K = (size_t)k, N = (size_t)n;
    size_t wl = kops_dense_bf16_len(m, k, n);
    float *X = malloc(M * K * 4 + 4), *W = malloc(K * N * 4 + 4);
    float *b = malloc(N * 4), *dY = malloc(M * N * 4 + 4);
    float *Y = malloc(M * N * 4 + 4), *dW = malloc(K * N * 4 + 4);
    float *dX = malloc(M * K * 4 + 4), *db = malloc(N * 4);
    float *Y32 = malloc(M * N * 4 + 4), *dW32 = malloc(K * N * 4 + 4);
    float *dX32 = malloc(M * K * 4 + 4), *db32 = malloc(N * 4);
    float *work = malloc((wl + 16) * 4);
    double *r = malloc((M * N + K * N + M * K) * 8 + 8);
    double *a = malloc((M * N + K * N + M * K) * 8 + 8);
    CHECK(X && W && b && dY && Y && dW && dX && db && Y32 && dW32 && dX32 &&
          db32 && work && r && a);
    kc_fill(M * K, X, -1, 1);
    kc_fill(K * N, W, -0.3, 0.3);
    kc_fill(N, b, -0.2, 0.2);
    kc_fill(M * N, dY, -1, 1);
    for (int i = 0; i < 16; i++)
        work[wl + i] = 12345.0f;
    kc_dense_fwd_bf16(m, k, n, X, W, b, Y, work, wl);
    kc_dense_bwd_bf16(m, k, n, X, W, dY, dW, db, dX, work, wl);
    int guard = 1;
    for (int i = 0; i < 16; i++)
        guard &= work[wl + i] == 12345.0f;
    CHECKF(guard, "%s: wrote past kops_dense_bf16_len", what);
    double *rY = r, *rW = r + M * N, *rX = rW + K * N;
    double *aY = a, *aW = a + M * N, *aX = aW + K * N;
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            double acc = b[j], s = fabs(acc);
            for (size_t q = 0; q < K; q++) {
                double p = (double)rb(X[i * K + q]) * rb(W[q * N + j]);
                acc += p, s += fabs(p);
            }
            rY[i * N + j] = acc, aY[i * N + j] = s;
        }
    for (size_t q = 0; q < K; q++)
        for (size_t j = 0; j < N; j++) {
            double acc = 0, s = 0;
            for (size_t i = 0; i < M; i++) {
                double p = (double)rb(X[i * K + q]) * rb(dY[i * N + j]);
                acc += p, s += fabs(p);
            }
            rW[q * N + j] = acc, aW[q * N + j] = s;
        }
    for (size_t i = 0; i < M; i++)
        for (size_t q = 0; q < K; q++) {
            double acc = 0, s = 0;
            for (size_t j = 0; j < N; j++) {
                double p = (double)rb(dY[i * N + j]) * rb(W[q * N + j]);
                acc += p, s += fabs(p);
            }
            rX[i * K + q] = acc, aX[i * K + q] = s;
        }
    double u = ldexp(1.0, -24);
    char buf[100];
    snprintf(buf, sizeof buf, "%s Y", what);
    check_chain(buf, M * N, Y, rY, aY, 2.0 * (double)((K + 1) / 2 + 2) * u);
    snprintf(buf, sizeof buf, "%s dW", what);
    check_chain(buf, K * N, dW, rW, aW, 2.0 * (double)((M + 1) / 2 + 2) * u);
    snprintf(buf, sizeof buf, "%s dX", what);
    check_chain(buf, M * K, dX, rX, aX, 2.0 * (double)((N + 1) / 2 + 2) * u);
    kc_dense_fwd(m, k, n, X, W, b, Y32);
    kc_dense_bwd(m, k, n, X, W, dY, dW32, db32, dX32);
    CHECKF(rel_l2(M * N, Y, Y32) < 1e-2, "%s: Y rel L2 %.3g", what,
           rel_l2(M * N, Y, Y32));
    CHECKF(rel_l2(K * N, dW, dW32) < 1e-2, "%s: dW rel L2 %.3g", what,
           rel_l2(K * N, dW, dW32));
    CHECKF(rel_l2(M * K, dX, dX32) < 1e-2, "%s: dX rel L2 %.3g", what,
           rel_l2(M * K, dX, dX32));
    CHECKF(memcmp(db, db32, N * 4) == 0, "%s: db", what);
    if (m > 1) {   /* the last row alone */
        float *Y1 = malloc(N * 4), *dX1 = malloc(K * 4 + 4), *dW1 = malloc(K * N * 4 + 4);
        CHECK(Y1 && dX1 && dW1);
        kc_dense_fwd_bf16(1, k, n, X + (M - 1) * K, W, b, Y1, work, wl);
        kc_dense_bwd_bf16(1, k, n, X + (M - 1) * K, W, dY + (M - 1) * N, dW1,
                          db, dX1, work, wl);
        CHECKF(!memcmp(Y1, Y + (M - 1) * N, N * 4), "%s: a row alone", what);
        CHECKF(!memcmp(dX1, dX + (M - 1) * K, K * 4), "%s: dX of a row alone",
               what);
        free(Y1), free(dX1), free(dW1);
    }
    free(X), free(W), free(b), free(dY), free(Y), free(dW), free(dX), free(db);
    free(Y32), free(dW32), free(dX32), free(db32), free(work), free(r), free(a);
}

static void dense(void)
{
    kc_seed(13);
    dense_case(8, 784, 128);
    dense_case(7, 33, 10);
    dense_case(1, 1, 1);
    dense_case(5, 1200, 17);        /* more than one block of pairs */
    dense_case(13, 64, 100);
    dense_case(2, 2, 64);
    /* the vector engine's panels (dense_bf16.c): dW over several passes
     * of pairs of rows and a last narrow panel of columns, dX over
     * several passes of pairs (n > 1024), results streamed out (k n, and
     * m k, above 2^20 floats) */
    dense_case(301, 530, 20);
    dense_case(3, 40, 1100);
    dense_case(4, 20000, 64);
    dense_case(40, 30000, 8);
}

/* ---- a small conv net: gradients in bf16 against fp32 -------------------- */

typedef struct net {
    kops_conv2d_t c1, c2;
    int n, classes, flat;
} net_t;

/* Loss and gradients (into g[]: W1 b1 W2 b2 W3 b3) of the net, bf16 or
 * fp32 kernels. */
static double net_grads(const net_t *t, int bf16, const float *x,
                        const int32_t *lab, float *const *v, float *const *g)
{
    size_t a1 = ny(&t->c1), a2 = ny(&t->c2);
    size_t nl = (size_t)t->n * t->classes;
    size_t wl = kops_conv2d_bf16_len(&t->c1);
    if (kops_conv2d_bf16_len(&t->c2) > wl)
        wl = kops_conv2d_bf16_len(&t->c2);
    if (kops_dense_bf16_len(t->n, t->flat, t->classes) > wl)
        wl = kops_dense_bf16_len(t->n, t->flat, t->classes);
    size_t cl = kops_conv2d_col_len(&t->c1) * t->n;
    if (kops_conv2d_col_len(&t->c2) * t->n > cl)
        cl = kops_conv2d_col_len(&t->c2) * t->n;
    float *h1 = malloc(a1 * 4), *h2 = malloc(a2 * 4), *lg = malloc(nl * 4);
    float *d2 = malloc(a2 * 4), *d1 = malloc(a1 * 4);
    float *work = malloc(wl * 4), *col = malloc(cl * 4);
    CHECK(h1 && h2 && lg && d2 && d1 && work && col);
    if (bf16) {
        kc_conv2d_fwd_bf16(&t->c1, x, v[0], v[1], h1, work, wl);
    } else {
        kc_conv2d_fwd(&t->c1, x, v[0], v[1], h1, col, cl);
    }
    kc_relu_fwd(a1, h1, h1);
    if (bf16)
        kc_conv2d_fwd_bf16(&t->c2, h1, v[2], v[3], h2, work, wl);
    else
        kc_conv2d_fwd(&t->c2, h1, v[2], v[3], h2, col, cl);
    kc_relu_fwd(a2, h2, h2);
    if (bf16)
        kc_dense_fwd_bf16(t->n, t->flat, t->classes, h2, v[4], v[5], lg, work,
                          wl);
    else
        kc_dense_fwd(t->n, t->flat, t->classes, h2, v[4], v[5], lg);
    double loss = kc_softmax_xent(t->n, t->classes, lg, lab, lg,
                                  1.0f / (float)t->n, NULL) / t->n;
    if (bf16)
        kc_dense_bwd_bf16(t->n, t->flat, t->classes, h2, v[4], lg, g[4], g[5],
                          d2, work, wl);
    else
        kc_dense_bwd(t->n, t->flat, t->classes, h2, v[4], lg, g[4], g[5], d2);
    kc_relu_bwd(a2, h2, d2, d2);
    if (bf16)
        kc_conv2d_bwd_bf16(&t->c2, h1, v[2], d2, g[2], g[3], d1, work, wl);
    else
        kc_conv2d_bwd(&t->c2, h1, v[2], d2, g[2], g[3], d1, col, cl);
    kc_relu_bwd(a1, h1, d1, d1);
    if (bf16)
        kc_conv2d_bwd_bf16(&t->c1, x, v[0], d1, g[0], g[1], NULL, work, wl);
    else
        kc_conv2d_bwd(&t->c1, x, v[0], d1, g[0], g[1], NULL, col, cl);
    free(h1), free(h2), free(lg), free(d2), free(d1), free(work), free(col);
    return loss;
}

static void net(void)
{
    net_t t = { .n = 6, .classes = 10 };
    t.c1 = geom(t.n, 12, 12, 1, 3, 3, 8, 1, 0);
    t.c2 = geom(t.n, t.c1.oh, t.c1.ow, 8, 3, 3, 16, 1, 1);
    t.flat = t.c2.oh * t.c2.ow * t.c2.f;
    size_t sz[6] = { nw(&t.c1), 8, nw(&t.c2), 16,
                     (size_t)t.flat * t.classes, (size_t)t.classes };
    static const char *const names[6] = { "W1", "b1", "W2", "b2", "W3", "b3" };
    float *v[6], *g16[6], *g32[6];
    kc_seed(17);
    for (int i = 0; i < 6; i++) {
        v[i] = malloc(sz[i] * 4), g16[i] = malloc(sz[i] * 4);
        g32[i] = malloc(sz[i] * 4);
        CHECK(v[i] && g16[i] && g32[i]);
        kc_fill(sz[i], v[i], -0.3, 0.3);
    }
    float *x = malloc(nx(&t.c1) * 4);
    int32_t lab[6];
    CHECK(x != NULL);
    kc_fill(nx(&t.c1), x, 0, 1);
    for (int i = 0; i < t.n; i++)
        lab[i] = i % t.classes;
    double l16 = net_grads(&t, 1, x, lab, v, g16);
    double l32 = net_grads(&t, 0, x, lab, v, g32);
    CHECKF(fabs(l16 - l32) < 1e-2 * fabs(l32), "net loss bf16 %.6f fp32 %.6f",
           l16, l32);
    for (int i = 0; i < 6; i++) {
        double e = rel_l2(sz[i], g16[i], g32[i]);
        CHECKF(e < 3e-2, "net d%s: rel L2 %.3g", names[i], e);
        printf("net d%s: bf16 vs fp32 relative L2 %.2e\n", names[i], e);
    }
    for (int i = 0; i < 6; i++)
        free(v[i]), free(g16[i]), free(g32[i]);
    free(x);
}

int main(void)
{
    if (!kc_bf16_usable()) {
        printf("SKIPPED: this CPU has no AVX512_BF16 (or KC_CPU_HIDE hides "
               "it): the bf16 kernels do not run here\n");
        return 77;
    }
    conversion();
    /* every engine this CPU has: AMX tiles, VDPBF16PS vectors */
    for (int amx = 1; amx >= 0; amx--) {
        if (kc_bf16_force_engine(amx) != 0) {
            printf("no AMX-BF16 here (or KC_CPU_HIDE hides it): the vector "
                   "engine only\n");
            continue;
        }
        printf("engine %s\n", kc_bf16_engine());
        conv();
        dense();
        net();
    }
    kc_bf16_force_engine(-1);
    return CHECK_DONE();
}
