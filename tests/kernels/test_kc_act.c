/* Activation kernels: ReLU, leaky ReLU, GELU (exact) and softmax over the
 * last axis, forward and backward: values against double references,
 * NaN / infinity / -0 where they matter, in place the same bits as out of
 * place, gradients against central finite differences. */
#include "kc_test.h"
#include "kernels_cpu.h"

#include <stdlib.h>
#include <string.h>

enum { N = 1000 };

struct relu_case {
    size_t n;
    float *x, *y, *r;
};

static double relu_loss(void *vctx)
{
    struct relu_case *c = vctx;
    kc_relu_fwd(c->n, c->x, c->y);
    double s = 0;
    for (size_t i = 0; i < c->n; i++)
        s += (double)c->y[i] * c->r[i];
    return s;
}

static void test_values(size_t n)
{
    static float x[N], y[N], z[N], dy[N], dx[N];
    kc_fill(n, x, -1, 1);
    if (n > 2) {
        x[0] = 0.0f;
        x[1] = -0.0f;
        x[2] = NAN;
    }
    kc_relu_fwd(n, x, y);
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        if (x[i] != x[i])
            ok &= y[i] != y[i];           /* NaN propagates */
        else
            ok &= y[i] == (x[i] > 0 ? x[i] : 0.0f);
    }
    CHECKF(ok, "relu fwd n=%zu", n);

    memcpy(z, x, n * sizeof *z);           /* in place gives the same bits */
    kc_relu_fwd(n, z, z);
    CHECK(memcmp(z, y, n * sizeof *z) == 0);

    kc_fill(n, dy, -1, 1);
    kc_relu_bwd(n, y, dy, dx);
    ok = 1;
    for (size_t i = 0; i < n; i++)
        ok &= dx[i] == (y[i] > 0 ? dy[i] : 0.0f);
    CHECKF(ok, "relu bwd n=%zu", n);
    kc_relu_bwd(n, y, dy, dy);             /* dx == dy */
    CHECK(memcmp(dx, dy, n * sizeof *dx) == 0);
}

static void test_grad(void)
{
    enum { M = 257 };
    float x[M], y[M], r[M], dx[M];
    /* Keep inputs away from the kink at 0 so the step never crosses it. */
    for (size_t i = 0; i < M; i++) {
        double v = kc_unif(0.01, 1);
        x[i] = (float)(kc_unif(0, 1) < 0.5 ? -v : v);
    }
    kc_fill(M, r, -1, 1);
    struct relu_case c = { M, x, y, r };
    kc_relu_fwd(M, x, y);
    kc_relu_bwd(M, y, r, dx);
    kc_grad_check("relu dx", M, x, dx, relu_loss, &c, 1e-3);
}

/* ---- leaky_relu ---------------------------------------------------------- */

struct ew_case {
    size_t n;
    float *x, *y, *r;
    float alpha;
};

static double leaky_loss(void *vctx)
{
    struct ew_case *c = vctx;
    kc_leaky_relu_fwd(c->n, c->x, c->y, c->alpha);
    double s = 0;
    for (size_t i = 0; i < c->n; i++)
        s += (double)c->y[i] * c->r[i];
    return s;
}

static void test_leaky(size_t n, float alpha)
{
    static float x[N], y[N], z[N], dy[N], dx[N], r[N];
    kc_fill(n, x, -2, 2);
    if (n > 2) {
        x[0] = 0.0f;
        x[1] = -0.0f;
        x[2] = NAN;
    }
    kc_leaky_relu_fwd(n, x, y, alpha);
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        float want = x[i] > 0.0f ? x[i] : alpha * x[i];
        ok &= x[i] != x[i] ? y[i] != y[i]
                           : memcmp(&y[i], &want, sizeof want) == 0;
    }
    CHECKF(ok, "leaky_relu fwd n=%zu alpha=%g", n, alpha);
    memcpy(z, x, n * sizeof *z);
    kc_leaky_relu_fwd(n, z, z, alpha);
    CHECKF(memcmp(z, y, n * sizeof *z) == 0, "leaky_relu fwd in place");

    kc_fill(n, dy, -1, 1);
    kc_leaky_relu_bwd(n, x, dy, dx, alpha);
    ok = 1;
    for (size_t i = 0; i < n; i++)
        ok &= dx[i] == (x[i] > 0.0f ? dy[i] : alpha * dy[i]);
    CHECKF(ok, "leaky_relu bwd n=%zu alpha=%g", n, alpha);
    memcpy(z, dy, n * sizeof *z);
    kc_leaky_relu_bwd(n, x, z, z, alpha);
    CHECKF(memcmp(z, dx, n * sizeof *z) == 0, "leaky_relu bwd in place");

    /* Away from the kink at 0. */
    for (size_t i = 0; i < n; i++) {
        double v = kc_unif(0.01, 1);
        x[i] = (float)(kc_unif(0, 1) < 0.5 ? -v : v);
    }
    kc_fill(n, r, -1, 1);
    struct ew_case c = { n, x, y, r, alpha };
    kc_leaky_relu_bwd(n, x, r, dx, alpha);
    kc_grad_check("leaky_relu dx", n, x, dx, leaky_loss, &c, 1e-3);
}

/* ---- gelu -------------------------------------------------------------------- */

static double gelu_ref(double x)
{
    return 0.5 * x * erfc(-x / sqrt(2.0));
}

static double gelu_slope_ref(double x)
{
    return 0.5 * erfc(-x / sqrt(2.0)) +
           x * exp(-0.5 * x * x) / sqrt(2.0 * 3.14159265358979323846);
}

static double gelu_loss(void *vctx)
{
    struct ew_case *c = vctx;
    kc_gelu_fwd(c->n, c->x, c->y);
    double s = 0;
    for (size_t i = 0; i < c->n; i++)
        s += (double)c->y[i] * c->r[i];
    return s;
}

static void test_gelu(size_t n)
{
    static float x[N], y[N], z[N], dy[N], dx[N], r[N];
    kc_fill(n, x, -8, 8);
    kc_gelu_fwd(n, x, y);
    kc_fill(n, dy, -1, 1);
    kc_gelu_bwd(n, x, dy, dx);
    int fwd = 1, bwd = 1;
    for (size_t i = 0; i < n; i++) {
        /* Relative accuracy also far below 0, where 1 + erf would cancel
         * to 0; erfc's condition number grows as x^2 there, so rounding
         * x / sqrt 2 to float costs up to 4e-6 at x = -8. */
        fwd &= kc_close(y[i], gelu_ref(x[i]), 5e-6, 1e-37);
        bwd &= kc_close(dx[i], dy[i] * gelu_slope_ref(x[i]), 2e-6, 1e-7);
    }
    CHECKF(fwd, "gelu fwd n=%zu off the double reference", n);
    CHECKF(bwd, "gelu bwd n=%zu off the double reference", n);
    memcpy(z, x, n * sizeof *z);
    kc_gelu_fwd(n, z, z);
    CHECKF(memcmp(z, y, n * sizeof *z) == 0, "gelu fwd in place");
    memcpy(z, dy, n * sizeof *z);
    kc_gelu_bwd(n, x, z, z);
    CHECKF(memcmp(z, dx, n * sizeof *z) == 0, "gelu bwd in place");

    kc_fill(n, r, -1, 1);
    struct ew_case c = { n, x, y, r, 0.0f };
    kc_gelu_bwd(n, x, r, dx);
    kc_grad_check("gelu dx", n, x, dx, gelu_loss, &c, 1e-2);
}

/* Known values and the edges: gelu(1) = 0.8413447, gelu(-1) = -0.1586553,
 * far below 0 a tiny negative number (not 0 from cancellation), then 0;
 * -inf gives 0 and slope 0, +inf itself and slope 1, NaN stays NaN. */
static void test_gelu_edges(void)
{
    static const float x[] = { 0.0f, 1.0f, -1.0f, -6.0f, -12.0f, -30.0f,
                               -INFINITY, INFINITY, NAN, 30.0f };
    enum { K = sizeof x / sizeof *x };
    float y[K], ones[K], d[K];
    for (int i = 0; i < K; i++)
        ones[i] = 1.0f;
    kc_gelu_fwd(K, x, y);
    kc_gelu_bwd(K, x, ones, d);
    CHECK(y[0] == 0.0f && d[0] == 0.5f);
    CHECKF(kc_close(y[1], 0.8413447460685429, 1e-6, 0) &&
               kc_close(y[2], -0.15865525393145707, 1e-6, 0),
           "gelu(1) = %.9g, gelu(-1) = %.9g", y[1], y[2]);
    CHECKF(y[3] < 0.0f && kc_close(y[3], gelu_ref(-6.0), 1e-5, 0),
           "gelu(-6) = %.9g, want %.9g", y[3], gelu_ref(-6.0));
    CHECKF(y[4] < 0.0f && kc_close(y[4], gelu_ref(-12.0), 1e-5, 0),
           "gelu(-12) = %.9g, want %.9g", y[4], gelu_ref(-12.0));
    CHECK(y[5] == 0.0f && d[5] == 0.0f);
    CHECK(y[6] == 0.0f && d[6] == 0.0f);
    CHECK(y[7] == INFINITY && d[7] == 1.0f);
    CHECK(isnan(y[8]) && isnan(d[8]));
    CHECK(y[9] == 30.0f && d[9] == 1.0f);
}

/* ---- softmax ----------------------------------------------------------------- */

struct sm_case {
    int m, c;
    float *x, *y, *r;
};

static double softmax_loss(void *vctx)
{
    struct sm_case *c = vctx;
    kc_softmax_fwd(c->m, c->c, c->x, c->y);
    double s = 0;
    for (size_t i = 0; i < (size_t)c->m * c->c; i++)
        s += (double)c->y[i] * c->r[i];
    return s;
}

static void test_softmax(int m, int c, double spread)
{
    size_t n = (size_t)m * c;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    float *z = malloc(n * sizeof *z), *dy = malloc(n * sizeof *dy);
    float *dx = malloc(n * sizeof *dx), *r = malloc(n * sizeof *r);
    kc_fill(n, x, -spread, spread);
    kc_softmax_fwd(m, c, x, y);
    kc_fill(n, dy, -1, 1);
    kc_softmax_bwd(m, c, y, dy, dx);
    int fwd = 1, bwd = 1, sums = 1;
    for (int i = 0; i < m; i++) {
        const float *xr = x + (size_t)i * c;
        double mx = xr[0], sum = 0, ysum = 0, dot = 0;
        for (int j = 1; j < c; j++)
            mx = xr[j] > mx ? xr[j] : mx;
        for (int j = 0; j < c; j++)
            sum += exp(xr[j] - mx);
        for (int j = 0; j < c; j++) {
            double p = exp(xr[j] - mx) / sum;
            fwd &= kc_close(y[(size_t)i * c + j], p, 2e-6, 1e-30);
            ysum += y[(size_t)i * c + j];
            dot += (double)dy[(size_t)i * c + j] * p;
        }
        sums &= fabs(ysum - 1.0) < 1e-5;
        for (int j = 0; j < c; j++) {
            double p = exp(xr[j] - mx) / sum;
            bwd &= kc_close(dx[(size_t)i * c + j],
                            p * (dy[(size_t)i * c + j] - dot), 1e-5, 1e-7);
        }
    }
    CHECKF(fwd && sums, "softmax fwd %dx%d spread %g off the double "
           "reference (rows summing to 1: %d)", m, c, spread, sums);
    CHECKF(bwd, "softmax bwd %dx%d off the double reference", m, c);
    memcpy(z, x, n * sizeof *z);
    kc_softmax_fwd(m, c, z, z);
    CHECKF(memcmp(z, y, n * sizeof *z) == 0, "softmax fwd in place");
    memcpy(z, dy, n * sizeof *z);
    kc_softmax_bwd(m, c, y, z, z);
    CHECKF(memcmp(z, dx, n * sizeof *z) == 0, "softmax bwd in place");

    if (spread <= 10) {
        kc_fill(n, r, -1, 1);
        struct sm_case sc = { m, c, x, y, r };
        kc_softmax_fwd(m, c, x, y);
        kc_softmax_bwd(m, c, y, r, dx);
        kc_grad_check("softmax dx", n, x, dx, softmax_loss, &sc, 1e-2);
    }
    free(x), free(y), free(z), free(dy), free(dx), free(r);
}

/* Large logits do not overflow (max-shifted); a NaN makes its row NaN and
 * leaves the others; one class gives 1; empty shapes touch nothing. */
static void test_softmax_edges(void)
{
    float x[6] = { 1000.0f, 999.0f, -1000.0f, 1.0f, NAN, 2.0f }, y[6];
    kc_softmax_fwd(2, 3, x, y);
    CHECKF(kc_close(y[0], 1.0 / (1.0 + exp(-1.0)), 1e-6, 0) &&
               kc_close(y[1], exp(-1.0) / (1.0 + exp(-1.0)), 1e-6, 0) &&
               y[2] == 0.0f,
           "softmax of large logits: %g %g %g", y[0], y[1], y[2]);
    CHECK(isnan(y[3]) && isnan(y[4]) && isnan(y[5]));
    float one[4] = { -3.0f, 0.0f, 7.0f, 1e30f }, o[4];
    kc_softmax_fwd(4, 1, one, o);
    CHECK(o[0] == 1.0f && o[1] == 1.0f && o[2] == 1.0f && o[3] == 1.0f);
    float guard = 7.0f;
    kc_softmax_fwd(0, 3, NULL, &guard);
    kc_softmax_bwd(3, 0, NULL, NULL, &guard);
    CHECK(guard == 7.0f);
}

/* kc_relu_bias_grad = kc_relu_bwd then kc_bias_grad, bit for bit; db NULL
 * masks only; no rows: db = 0. */
static void test_relu_bias_grad(int m, int n)
{
    size_t mn = (size_t)m * (size_t)n;
    float *y = malloc((mn + 1) * sizeof *y), *d1 = malloc((mn + 1) * sizeof *d1);
    float *d2 = malloc((mn + 1) * sizeof *d2), *d3 = malloc((mn + 1) * sizeof *d3);
    float *b1 = malloc((size_t)n * sizeof *b1), *b2 = malloc((size_t)n * sizeof *b2);
    CHECK(y && d1 && d2 && d3 && b1 && b2);
    kc_fill(mn, y, -1, 1);
    for (size_t i = 0; i < mn; i += 5)
        y[i] = 0.0f;                      /* relu's zeros: masked too */
    kc_fill(mn, d1, -1, 1);
    memcpy(d2, d1, mn * sizeof *d1);
    memcpy(d3, d1, mn * sizeof *d1);
    kc_relu_bwd(mn, y, d1, d1);
    kc_bias_grad(m, n, d1, b1);
    kc_relu_bias_grad(m, n, y, d2, b2);
    kc_relu_bias_grad(m, n, y, d3, NULL);
    CHECKF(!memcmp(d1, d2, mn * sizeof *d1) && !memcmp(d1, d3, mn * sizeof *d1)
           && !memcmp(b1, b2, (size_t)n * sizeof *b1),
           "relu_bias_grad %dx%d differs from relu_bwd + bias_grad", m, n);
    kc_relu_bias_grad(0, n, y, d2, b2);
    int zero = 1;
    for (int j = 0; j < n; j++)
        zero &= b2[j] == 0.0f;
    CHECK(zero);
    free(y), free(d1), free(d2), free(d3), free(b1), free(b2);
}

int main(void)
{
    kc_seed(2);
    test_values(1);
    test_values(7);
    test_values(1000);
    test_grad();

    static const size_t sizes[] = { 1, 7, 17, 257, 1000 };
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        test_leaky(sizes[i], 0.3f);
        test_leaky(sizes[i], 0.0f);
        test_leaky(sizes[i], 1.5f);
        test_gelu(sizes[i]);
    }
    test_gelu_edges();

    /* rows, classes (an image's positions x channels, or samples x
     * features), the spread of the logits */
    test_softmax(1, 1, 1);
    test_softmax(1, 10, 3);
    test_softmax(6, 5, 3);
    test_softmax(7 * 9, 4, 10);
    test_softmax(3, 100, 5);
    test_softmax(4, 33, 60);
    test_softmax_edges();
    test_relu_bias_grad(1, 1);
    test_relu_bias_grad(677, 32);
    test_relu_bias_grad(50, 300);         /* more than one chunk of columns */
    /* widths at each edge of the AVX-512 loop's 1, 2 and 4 vectors a
     * chunk of 64 columns (dense.c's relu_sum_512) */
    static const int widths[] = { 10, 16, 17, 20, 32, 33, 48, 64, 81, 97 };
    for (size_t i = 0; i < sizeof widths / sizeof *widths; i++)
        test_relu_bias_grad(9, widths[i]);
    return CHECK_DONE();
}
