/* Dense layer kernels: forward against a double reference, every gradient
 * against central finite differences, edge shapes; the direct kernels'
 * promises (a row's Y and dX the same bits in any batch and on each vector
 * path, near the BLAS path's). */
#include "kc_test.h"
#include "kernels_cpu.h"

#include <stdlib.h>
#include <string.h>

struct dense_case {
    int m, k, n;
    float *X, *W, *b, *R, *Y;
};

/* Scalar loss sum(Y * R): its gradient w.r.t. Y is R. */
static double dense_loss(void *vctx)
{
    struct dense_case *c = vctx;
    kc_dense_fwd(c->m, c->k, c->n, c->X, c->W, c->b, c->Y);
    double s = 0;
    for (size_t i = 0; i < (size_t)c->m * (size_t)c->n; i++)
        s += (double)c->Y[i] * c->R[i];
    return s;
}

static void ref_fwd(int m, int k, int n, const float *X, const float *W,
                    const float *b, double *Y)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = b[j];
            for (int p = 0; p < k; p++)
                s += (double)X[i * k + p] * W[p * n + j];
            Y[i * n + j] = s;
        }
}

static float *nanbuf(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = NAN;
    return p;
}

static void test_fwd(int m, int k, int n)
{
    float *X = malloc(sizeof(float) * (size_t)m * k), *W = malloc(sizeof(float) * (size_t)k * n);
    float *b = malloc(sizeof(float) * n), *Y = nanbuf((size_t)m * n);
    double *ref = malloc(sizeof(double) * (size_t)m * n);
    kc_fill((size_t)m * k, X, 0, 1);
    kc_fill((size_t)k * n, W, -0.1, 0.1);
    kc_fill((size_t)n, b, -1, 1);
    kc_dense_fwd(m, k, n, X, W, b, Y);   /* Y held NaN: must be overwritten */
    ref_fwd(m, k, n, X, W, b, ref);
    char what[64];
    snprintf(what, sizeof what, "fwd %dx%dx%d", m, k, n);
    KC_CHECK_NEAR(what, (size_t)m * n, Y, ref, 1e-4, 1e-4);
    free(X); free(W); free(b); free(Y); free(ref);
}

static void test_grads(int m, int k, int n)
{
    struct dense_case c = { m, k, n, NULL, NULL, NULL, NULL, NULL };
    c.X = malloc(sizeof(float) * (size_t)m * k);
    c.W = malloc(sizeof(float) * (size_t)k * n);
    c.b = malloc(sizeof(float) * n);
    c.R = malloc(sizeof(float) * (size_t)m * n);
    c.Y = malloc(sizeof(float) * (size_t)m * n);
    float *dW = nanbuf((size_t)k * n), *db = nanbuf(n), *dX = nanbuf((size_t)m * k);
    kc_fill((size_t)m * k, c.X, -1, 1);
    kc_fill((size_t)k * n, c.W, -1, 1);
    kc_fill((size_t)n, c.b, -1, 1);
    kc_fill((size_t)m * n, c.R, -1, 1);

    kc_dense_bwd(m, k, n, c.X, c.W, c.R, dW, db, dX);
    kc_grad_check("dense dW", (size_t)k * n, c.W, dW, dense_loss, &c, 1e-3);
    kc_grad_check("dense db", (size_t)n, c.b, db, dense_loss, &c, 1e-3);
    kc_grad_check("dense dX", (size_t)m * k, c.X, dX, dense_loss, &c, 1e-3);

    /* dX == NULL (input layer): same dW and db, nothing else touched. */
    float *dW2 = nanbuf((size_t)k * n), *db2 = nanbuf(n);
    kc_dense_bwd(m, k, n, c.X, c.W, c.R, dW2, db2, NULL);
    CHECK(memcmp(dW, dW2, sizeof(float) * (size_t)k * n) == 0);
    CHECK(memcmp(db, db2, sizeof(float) * n) == 0);

    free(c.X); free(c.W); free(c.b); free(c.R); free(c.Y);
    free(dW); free(db); free(dX); free(dW2); free(db2);
}

static void test_bias(void)
{
    enum { M = 5, N = 21 };
    float b[N], Y[M * N], Y0[M * N], db[N];
    double ref[N];
    kc_fill(N, b, -1, 1);
    kc_fill(M * N, Y, -1, 1);
    memcpy(Y0, Y, sizeof Y);
    kc_bias_add(M, N, b, Y);
    int ok = 1;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            ok &= Y[i * N + j] == Y0[i * N + j] + b[j];
    CHECK(ok);

    for (int j = 0; j < N; j++) {
        db[j] = NAN;
        ref[j] = 0;
        for (int i = 0; i < M; i++)
            ref[j] += Y0[i * N + j];
    }
    kc_bias_grad(M, N, Y0, db);
    KC_CHECK_NEAR("bias_grad", N, db, ref, 1e-6, 1e-6);
    kc_bias_grad(0, N, Y0, db);          /* no rows: sums are zero */
    ok = 1;
    for (int j = 0; j < N; j++)
        ok &= db[j] == 0.0f;
    CHECK(ok);
}

/* Many rows (a conv2d bias sums n*oh*ow of them) of one sign per block of
 * rows, signs alternating, so that the sum nearly cancels: the result is
 * the float nearest the exact sum (added in double, rounded once), over
 * more columns than one chunk of the accumulator; and the halves of the
 * rows, summed apart and added, give it to within a few ulps -- what two
 * replicas that split a batch need. */
static void test_bias_many_rows(void)
{
    enum { M = 18432, N = 300, BLOCK = 576 };
    float *Y = malloc((size_t)M * N * sizeof *Y);
    float db[N], h1[N], h2[N];
    double ref[N];
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            Y[(size_t)i * N + j] = (float)((i / BLOCK) % 2 ? -1 : 1) *
                                   (float)kc_unif(0.5e-4, 1.5e-4);
    for (int j = 0; j < N; j++) {
        ref[j] = 0;
        for (int i = 0; i < M; i++)
            ref[j] += Y[(size_t)i * N + j];
    }
    kc_bias_grad(M, N, Y, db);
    kc_bias_grad(M / 2, N, Y, h1);
    kc_bias_grad(M / 2, N, Y + (size_t)(M / 2) * N, h2);
    int nearest = 1, split = 1;
    for (int j = 0; j < N; j++) {
        nearest &= db[j] == (float)ref[j];
        /* each half rounded once, then one float addition */
        double m = fmax(fabs(h1[j]), fabs(h2[j]));
        split &= fabs((double)(h1[j] + h2[j]) - ref[j]) <= 3e-7 * m;
    }
    CHECK(nearest);
    CHECKF(split, "bias_grad: halves of the rows do not add up to the whole");
    free(Y);
}

/* Y and dX of m rows on the current path (dW and db thrown away). */
static void run_rows(int m, int k, int n, const float *X, const float *W,
                     const float *b, const float *dY, float *Y, float *dX)
{
    float *dW = malloc(sizeof(float) * (size_t)k * n);
    float *db = malloc(sizeof(float) * n);
    kc_dense_fwd(m, k, n, X, W, b, Y);
    kc_dense_bwd(m, k, n, X, W, dY, dW, db, dX);
    free(dW);
    free(db);
}

static int same(size_t n, const float *a, const float *b)
{
    return memcmp(a, b, n * sizeof *a) == 0;
}

/* dW[i][j] on the direct paths: one fmaf chain from +0 over the rows in
 * order */
static void chain_dw(int m, int k, int n, const float *X, const float *dY,
                     float *dW)
{
    for (int i = 0; i < k; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int r = 0; r < m; r++)
                acc = fmaf(X[(size_t)r * k + i], dY[(size_t)r * n + j], acc);
            dW[(size_t)i * n + j] = acc;
        }
}

/* dW of the current path, checked against chain_dw's bits (direct) or
 * near them (BLAS) */
static void check_dw(int m, int k, int n, const float *X, const float *dY,
                     const float *want, int bits, const char *path)
{
    size_t KN = (size_t)k * n;
    float *dW = nanbuf(KN), *db = nanbuf((size_t)n);
    double *ref = malloc(KN * sizeof *ref);
    kc_dense_bwd(m, k, n, X, NULL, dY, dW, db, NULL);
    for (size_t i = 0; i < KN; i++)
        ref[i] = want[i];
    char what[96];
    snprintf(what, sizeof what, "%s dW %dx%dx%d", path, m, k, n);
    if (bits)
        CHECKF(same(KN, dW, want), "%s: not the chain's bits", what);
    else
        KC_CHECK_NEAR(what, KN, dW, ref, 1e-4, 1e-4);
    free(dW), free(db), free(ref);
}

/* k > 512 takes several passes of the forward's chain; n > 32 several
 * lane blocks and a masked tail; dX direct up to n = 16384 / (lanes of a
 * chunk) (512 on AVX-512), in panels of 16384/n/chunk*chunk columns, the
 * AVX-512 path's transposes 16 x 16 with scalar edges (n = 40: 24 columns
 * of each row by the scalar loop); n = 1100 leaves dX to BLAS (dx_direct
 * 0: its rows are not checked for bits). dW direct on every vector path,
 * 112 of its rows a panel, 146 of X's rows a pass (m = 300: three passes
 * through dW). Without bias too (the chain then starts from +0). */
static void test_paths(int m, int k, int n, int bias, int dx_direct)
{
    size_t MK = (size_t)m * k, KN = (size_t)k * n, MN = (size_t)m * n;
    float *X = malloc(MK * sizeof *X), *W = malloc(KN * sizeof *W);
    float *b = malloc((size_t)n * sizeof *b), *dY = malloc(MN * sizeof *dY);
    float *Y = nanbuf(MN), *dX = nanbuf(MK), *Y1 = nanbuf(n), *dX1 = nanbuf(k);
    float *Yv = nanbuf(MN), *dXv = nanbuf(MK);
    double *ref = malloc(MN * sizeof *ref), *rdx = malloc(MK * sizeof *rdx);
    kc_fill(MK, X, -1, 1);
    kc_fill(KN, W, -0.1, 0.1);
    kc_fill((size_t)n, b, -1, 1);
    kc_fill(MN, dY, -1, 1);
    const float *bb = bias ? b : NULL;
    char what[96];

    CHECK(kc_conv2d_force_path(KC_CONV_AUTO) == 0);
    /* the promises of the direct kernels, where the CPU has them */
    int direct = strstr(kc_conv2d_kernels(), "AVX") != NULL;
    dx_direct &= direct;
    run_rows(m, k, n, X, W, bb, dY, Y, dX);
    float *zero = calloc((size_t)n, sizeof *zero);
    ref_fwd(m, k, n, X, W, bias ? b : zero, ref);
    for (int r = 0; r < m; r++)
        for (int i = 0; i < k; i++) {
            double s = 0;
            for (int j = 0; j < n; j++)
                s += (double)dY[(size_t)r * n + j] * W[(size_t)i * n + j];
            rdx[(size_t)r * k + i] = s;
        }
    snprintf(what, sizeof what, "fwd %dx%dx%d%s", m, k, n,
             bias ? "" : " no bias");
    KC_CHECK_NEAR(what, MN, Y, ref, 1e-4, 1e-4);
    snprintf(what, sizeof what, "dX %dx%dx%d", m, k, n);
    KC_CHECK_NEAR(what, MK, dX, rdx, 1e-4, 1e-4);

    /* each row alone: the same bits as in the batch */
    int rows = 1;
    for (int r = 0; r < m; r++) {
        run_rows(1, k, n, X + (size_t)r * k, W, bb, dY + (size_t)r * n, Y1,
                 dX1);
        rows &= same((size_t)n, Y1, Y + (size_t)r * n) &&
                (!dx_direct || same((size_t)k, dX1, dX + (size_t)r * k));
    }
    CHECKF(rows || !direct, "%dx%dx%d: a row alone differs from the batch's",
           m, k, n);
    float *cdw = malloc((size_t)k * n * sizeof *cdw);
    chain_dw(m, k, n, X, dY, cdw);
    check_dw(m, k, n, X, dY, cdw, direct, "auto");

    /* every vector path this CPU has: the same bits; BLAS near them */
    for (int p = KC_CONV_AVX2; direct && p <= KC_CONV_AVX512; p++) {
        if (kc_conv2d_force_path(p) != 0)
            continue;
        run_rows(m, k, n, X, W, bb, dY, Yv, dXv);
        CHECKF(same(MN, Yv, Y) && (!dx_direct || same(MK, dXv, dX)),
               "%dx%dx%d: path %d gives other bits", m, k, n, p);
        check_dw(m, k, n, X, dY, cdw, 1, p == KC_CONV_AVX2 ? "AVX2" : "AVX-512");
    }
    CHECK(kc_conv2d_force_path(KC_CONV_GEMM) == 0);
    check_dw(m, k, n, X, dY, cdw, 0, "BLAS");
    run_rows(m, k, n, X, W, bb, dY, Yv, dXv);
    snprintf(what, sizeof what, "BLAS fwd %dx%dx%d", m, k, n);
    KC_CHECK_NEAR(what, MN, Yv, ref, 1e-4, 1e-4);
    snprintf(what, sizeof what, "BLAS dX %dx%dx%d", m, k, n);
    KC_CHECK_NEAR(what, MK, dXv, rdx, 1e-4, 1e-4);
    CHECK(kc_conv2d_force_path(KC_CONV_AUTO) == 0);

    free(X); free(W); free(b); free(dY); free(Y); free(dX); free(Y1);
    free(dX1); free(Yv); free(dXv); free(ref); free(rdx); free(zero);
    free(cdw);
}

static void test_edges(void)
{
    float X[12], W[12], b[4] = { 1, 2, 3, 4 }, Y[12], dW[12], db[4], dX[12];
    kc_fill(12, X, -1, 1);
    kc_fill(12, W, -1, 1);

    /* k = 0: Y is the bias rows. */
    for (int i = 0; i < 12; i++)
        Y[i] = NAN;
    kc_dense_fwd(3, 0, 4, X, W, b, Y);
    int ok = 1;
    for (int i = 0; i < 12; i++)
        ok &= Y[i] == b[i % 4];
    CHECK(ok);

    /* m = 0: dW and db are sums over no rows. */
    for (int i = 0; i < 12; i++)
        dW[i] = NAN;
    for (int i = 0; i < 4; i++)
        db[i] = NAN;
    kc_dense_bwd(0, 3, 4, X, W, Y, dW, db, dX);
    ok = 1;
    for (int i = 0; i < 12; i++)
        ok &= dW[i] == 0.0f;
    for (int i = 0; i < 4; i++)
        ok &= db[i] == 0.0f;
    CHECK(ok);

    /* n = 0: dX = dY W^T is an empty sum. */
    for (int i = 0; i < 12; i++)
        dX[i] = NAN;
    kc_dense_bwd(3, 4, 0, X, W, Y, dW, db, dX);
    ok = 1;
    for (int i = 0; i < 12; i++)
        ok &= dX[i] == 0.0f;
    CHECK(ok);

    /* Negative sizes are ignored, not crashes. */
    kc_dense_fwd(-1, 3, 4, X, W, b, Y);
    kc_dense_bwd(3, -1, 4, X, W, Y, dW, db, dX);
    kc_bias_add(-2, 4, b, Y);
    CHECK(1);
}

int main(void)
{
    kc_seed(1);
    test_fwd(1, 1, 1);
    test_fwd(5, 7, 3);
    test_fwd(33, 70, 17);
    test_fwd(64, 784, 128);
    test_fwd(256, 128, 10);
    test_grads(5, 7, 3);
    test_grads(4, 19, 17);
    test_bias();
    test_bias_many_rows();
    test_edges();
    test_paths(13, 1100, 40, 1, 1);
    test_paths(7, 36, 300, 0, 1);
    test_paths(5, 70, 1100, 1, 0);
    test_paths(3, 3000, 10, 0, 1);
    test_paths(300, 230, 40, 1, 1);
    test_paths(29, 64, 512, 0, 1);
    /* few rows of a wide layer: dX with dY's rows as the lanes (AVX-512;
     * a row alone takes the panels of W^T), a last panel of 4 columns,
     * one of 37 */
    test_paths(32, 4100, 40, 1, 1);
    test_paths(16, 4096 + 37, 64, 0, 1);
    /* a dW of over 2^20 floats in one pass goes out through non-temporal
     * stores (rows 280 bytes apart: aligned vectors and not, a masked
     * last one) */
    test_paths(32, 16400, 70, 0, 1);
    /* and a dX of over 2^20 floats from dY's rows as the lanes */
    test_paths(32, 32768 + 16, 20, 1, 1);
    /* more rows of a wide layer: slices of 32 rows as the lanes */
    test_paths(96, 4096 + 16, 64, 0, 1);
    test_paths(64, 32768 + 16, 20, 1, 1);
    return CHECK_DONE();
}
