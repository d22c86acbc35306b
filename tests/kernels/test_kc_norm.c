/* Batch and layer normalisation kernels (kernels/cpu/norm.c).
 * batchnorm: bn_sums against a double loop in row order; bn_stats (mean,
 * biased variance, invstd, Keras's moving update, inference from the
 * moving statistics, no update without them, count 0); bn_norm; the
 * backward (bn_bwd_sums + bn_bwd_dx) against central differences of
 * L = sum(w * y) through the batch statistics, rows 1..7 x c 1..5; two
 * halves of a batch whose sums are added (a SyncBatchNorm of 2 replicas)
 * give the whole batch's sums within 1e-12 and, where the added sums are
 * the same bits, the same float outputs.
 * layernorm: ln_fwd against a double reference, in place, a row's output
 * independent of the batch; ln_bwd against central differences, dgamma
 * and dbeta as double column sums in row order (written, not added to),
 * dx optional and in place. */
#include "kc_test.h"
#include "kernels_cpu.h"

#include <stdlib.h>
#include <string.h>

static float *fbuf(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof *p);
    if (!p)
        abort();
    return p;
}

static double *dbuf(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof *p);
    if (!p)
        abort();
    return p;
}

static int same(const void *a, const void *b, size_t bytes)
{
    return bytes == 0 || memcmp(a, b, bytes) == 0;
}

/* ---- batchnorm: sums and statistics ------------------------------------ */

static void test_bn_sums(size_t rows, int c)
{
    size_t n = rows * (size_t)c;
    float *x = fbuf(n);
    double *sums = dbuf(2 * (size_t)c), *ref = dbuf(2 * (size_t)c);
    kc_fill(n, x, -3, 3);
    for (size_t i = 0; i < 2 * (size_t)c; i++)
        sums[i] = NAN;                          /* overwritten, not added */
    kc_bn_sums(rows, c, x, sums);
    for (size_t r = 0; r < rows; r++)
        for (int j = 0; j < c; j++) {
            double v = x[r * (size_t)c + j];
            ref[j] += v;
            ref[c + j] += v * v;
        }
    CHECKF(same(sums, ref, 2 * (size_t)c * sizeof *ref),
           "bn_sums %zux%d: not the row-order double sums", rows, c);
    free(x), free(sums), free(ref);
}

static void test_bn_stats(void)
{
    enum { R = 9, C = 4 };
    const float eps = 1e-3f, mom = 0.99f;
    float x[R * C], mean[C], invstd[C], mm[C], mv[C], mm0[C], mv0[C];
    double sums[2 * C];
    kc_fill(R * C, x, -2, 3);
    kc_fill(C, mm0, -1, 1);
    kc_fill(C, mv0, 0.5, 2);
    kc_bn_sums(R, C, x, sums);

    /* Training: the batch's mean and biased variance, then the update. */
    memcpy(mm, mm0, sizeof mm);
    memcpy(mv, mv0, sizeof mv);
    kc_bn_stats(C, sums, R, eps, mom, mean, invstd, mm, mv);
    for (int j = 0; j < C; j++) {
        double m = 0, v = 0;
        for (int r = 0; r < R; r++)
            m += x[r * C + j];
        m /= R;
        for (int r = 0; r < R; r++)
            v += (x[r * C + j] - m) * (x[r * C + j] - m);
        v /= R;                                          /* biased */
        CHECKF(kc_close(mean[j], m, 1e-6, 0), "mean[%d] %g, want %g", j,
               mean[j], m);
        CHECKF(kc_close(invstd[j], 1 / sqrt(v + eps), 1e-6, 0),
               "invstd[%d] %g, want %g", j, invstd[j], 1 / sqrt(v + eps));
        CHECKF(kc_close(mm[j], 0.99 * mm0[j] + 0.01 * m, 1e-6, 1e-7),
               "moving mean[%d] %g", j, mm[j]);
        CHECKF(kc_close(mv[j], 0.99 * mv0[j] + 0.01 * v, 1e-6, 1e-7),
               "moving variance[%d] %g", j, mv[j]);
    }

    /* Without the moving statistics: the same mean and invstd, no update. */
    float mean2[C], invstd2[C];
    kc_bn_stats(C, sums, R, eps, mom, mean2, invstd2, NULL, NULL);
    CHECK(same(mean, mean2, sizeof mean) && same(invstd, invstd2, sizeof invstd));

    /* Inference (sums NULL, or count 0): the moving ones, untouched. */
    for (int pass = 0; pass < 2; pass++) {
        memcpy(mm, mm0, sizeof mm);
        memcpy(mv, mv0, sizeof mv);
        kc_bn_stats(C, pass ? sums : NULL, 0.0, eps, mom, mean, invstd, mm, mv);
        CHECK(same(mm, mm0, sizeof mm) && same(mv, mv0, sizeof mv));
        CHECK(same(mean, mm0, sizeof mean));
        for (int j = 0; j < C; j++)
            CHECKF(invstd[j] == (float)(1.0 / sqrt((double)mv0[j] + eps)),
                   "inference invstd[%d] %g", j, invstd[j]);
    }
    /* Neither: mean 0, variance 1. */
    kc_bn_stats(C, NULL, 0.0, eps, mom, mean, invstd, NULL, NULL);
    for (int j = 0; j < C; j++)
        CHECK(mean[j] == 0.0f &&
              invstd[j] == (float)(1.0 / sqrt(1.0 + eps)));

    /* A constant channel: the variance's rounding below 0 clamps to 0. */
    double flat[2] = { 3 * 0.1, 3 * (0.1 * 0.1) };
    kc_bn_stats(1, flat, 3.0, eps, mom, mean, invstd, NULL, NULL);
    CHECKF(invstd[0] <= (float)(1.0 / sqrt((double)eps)) && !isnan(invstd[0]),
           "constant channel: invstd %g", invstd[0]);
}

/* bn_bwd_dx's bits are those of its formula written out per element
 * (the GPU's kernel computes it so), across channel blocks of 64. */
static void test_bn_bwd_dx_bits(size_t rows, int c)
{
    size_t n = rows * (size_t)c;
    float *x = malloc(n * sizeof *x), *dy = malloc(n * sizeof *dy),
          *dx = malloc(n * sizeof *dx), *mean = malloc(c * sizeof *mean),
          *invstd = malloc(c * sizeof *invstd),
          *gamma = malloc(c * sizeof *gamma);
    double *sums = malloc(2 * (size_t)c * sizeof *sums);
    kc_fill(n, x, -2, 3);
    kc_fill(n, dy, -1, 1);
    kc_fill(c, mean, -1, 1);
    kc_fill(c, invstd, 0.5, 2);
    kc_fill(c, gamma, -1.5, 1.5);
    for (int j = 0; j < 2 * c; j++)
        sums[j] = kc_unif(-50, 50);
    double count = (double)rows + 0.5;
    kc_bn_bwd_dx(rows, c, x, dy, mean, invstd, gamma, sums, count, dx);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = i % (size_t)c;
        double xhat = ((double)x[i] - mean[j]) * invstd[j];
        double g = (double)gamma[j] * invstd[j];
        float want = (float)(g * (dy[i] - sums[j] / count -
                                  xhat * sums[c + j] / count));
        bad += memcmp(&want, dx + i, sizeof want) != 0;
    }
    CHECKF(bad == 0, "bn_bwd_dx %zux%d: %zu values not the formula's bits",
           rows, c, bad);
    free(x), free(dy), free(dx), free(mean), free(invstd), free(gamma);
    free(sums);
}

static void test_bn_norm(void)
{
    enum { R = 5, C = 3 };
    float x[R * C], y[R * C], mean[C], invstd[C], gamma[C], beta[C];
    kc_fill(R * C, x, -2, 2);
    kc_fill(C, mean, -1, 1);
    kc_fill(C, invstd, 0.5, 2);
    kc_fill(C, gamma, 0.5, 1.5);
    kc_fill(C, beta, -1, 1);
    kc_bn_norm(R, C, x, mean, invstd, gamma, beta, y);
    int ok = 1;
    for (int i = 0; i < R * C; i++) {
        int j = i % C;
        float want = (x[i] - mean[j]) * invstd[j] * gamma[j] + beta[j];
        ok &= same(&y[i], &want, sizeof want);
    }
    CHECKF(ok, "bn_norm: not (x - mean) * invstd * gamma + beta");
    kc_bn_norm(R, C, x, mean, invstd, gamma, beta, x);          /* y == x */
    CHECK(same(x, y, sizeof y));
}

/* ---- batchnorm: the backward against finite differences ----------------- */

typedef struct bn_case {
    size_t rows;
    int c;
    float eps;
    float *x, *w, *gamma, *beta, *y, *mean, *invstd;
    double *sums;
} bn_case_t;

/* L = sum(w * y), y normalised with the batch's own statistics. */
static double bn_loss(void *vc)
{
    bn_case_t *k = vc;
    kc_bn_sums(k->rows, k->c, k->x, k->sums);
    kc_bn_stats(k->c, k->sums, (double)k->rows, k->eps, 0.99f, k->mean,
                k->invstd, NULL, NULL);
    kc_bn_norm(k->rows, k->c, k->x, k->mean, k->invstd, k->gamma, k->beta,
               k->y);
    double s = 0;
    for (size_t i = 0; i < k->rows * (size_t)k->c; i++)
        s += (double)k->w[i] * k->y[i];
    return s;
}

static void test_bn_backward(size_t rows, int c)
{
    size_t n = rows * (size_t)c;
    bn_case_t k = { rows, c, 0.05f, fbuf(n), fbuf(n), fbuf(c), fbuf(c),
                    fbuf(n), fbuf(c), fbuf(c), dbuf(2 * (size_t)c) };
    float *dx = fbuf(n), *dgamma = fbuf(c), *dbeta = fbuf(c);
    double *bsums = dbuf(2 * (size_t)c);
    kc_fill(n, k.x, -2, 2);
    kc_fill(n, k.w, -1, 1);
    kc_fill(c, k.gamma, 0.5, 1.5);
    kc_fill(c, k.beta, -1, 1);
    bn_loss(&k);
    kc_bn_bwd_sums(rows, c, k.x, k.w, k.mean, k.invstd, bsums, dgamma,
                   dbeta);
    kc_bn_bwd_dx(rows, c, k.x, k.w, k.mean, k.invstd, k.gamma, bsums,
                 (double)rows, dx);
    char what[64];
    snprintf(what, sizeof what, "bn dx %zux%d", rows, c);
    kc_grad_check(what, n, k.x, dx, bn_loss, &k, 1e-2);
    snprintf(what, sizeof what, "bn dgamma %zux%d", rows, c);
    kc_grad_check(what, (size_t)c, k.gamma, dgamma, bn_loss, &k, 1e-2);
    snprintf(what, sizeof what, "bn dbeta %zux%d", rows, c);
    kc_grad_check(what, (size_t)c, k.beta, dbeta, bn_loss, &k, 1e-2);

    /* dx may be dy. */
    float *inplace = fbuf(n);
    memcpy(inplace, k.w, n * sizeof *inplace);
    kc_bn_bwd_dx(rows, c, k.x, inplace, k.mean, k.invstd, k.gamma, bsums,
                 (double)rows, inplace);
    CHECKF(same(inplace, dx, n * sizeof *dx), "bn dx in place %zux%d", rows,
           c);
    free(k.x), free(k.w), free(k.gamma), free(k.beta), free(k.y);
    free(k.mean), free(k.invstd), free(k.sums);
    free(dx), free(dgamma), free(dbeta), free(bsums), free(inplace);
}

/* ---- batchnorm: two halves add up to the whole batch ---------------------- */

static int sums_close(const double *a, const double *b, int n)
{
    for (int i = 0; i < n; i++)
        if (!kc_close(a[i], b[i], 1e-12, 1e-300))
            return 0;
    return 1;
}

/* Rows [0, h) and [h, rows) as two replicas: sums added, normalised with
 * the added sums over all rows. `exact`: the data make every double sum
 * exact, so the added sums must be the whole's bits. */
static void test_bn_split(size_t rows, size_t h, int c, int exact)
{
    size_t n = rows * (size_t)c, nc = 2 * (size_t)c, off = h * (size_t)c;
    float *x = fbuf(n), *dy = fbuf(n), *gamma = fbuf(c), *beta = fbuf(c);
    float *y = fbuf(n), *y2 = fbuf(n), *dx = fbuf(n), *dx2 = fbuf(n);
    float *mean = fbuf(c), *invstd = fbuf(c), *mean2 = fbuf(c);
    float *invstd2 = fbuf(c), *dg = fbuf(c), *db = fbuf(c);
    double *whole = dbuf(nc), *a = dbuf(nc), *b = dbuf(nc);
    for (size_t i = 0; i < n; i++) {
        x[i] = exact ? (float)((int)kc_unif(-64, 64)) / 64 + 1.0f
                     : (float)kc_unif(-2, 2);
        dy[i] = exact ? (float)((int)kc_unif(-64, 64)) / 64
                      : (float)kc_unif(-1, 1);
    }
    kc_fill(c, gamma, 0.5, 1.5);
    kc_fill(c, beta, -1, 1);

    /* Forward. */
    kc_bn_sums(rows, c, x, whole);
    kc_bn_sums(h, c, x, a);
    kc_bn_sums(rows - h, c, x + off, b);
    for (size_t i = 0; i < nc; i++)
        a[i] += b[i];
    CHECKF(sums_close(a, whole, (int)nc), "bn split %zu+%zu x %d: sums",
           h, rows - h, c);
    int fwd_bits = same(a, whole, nc * sizeof *a);
    CHECKF(!exact || fwd_bits, "bn split %zu+%zu x %d: exact sums differ",
           h, rows - h, c);
    kc_bn_stats(c, whole, (double)rows, 1e-3f, 0.99f, mean, invstd, NULL,
                NULL);
    kc_bn_stats(c, a, (double)rows, 1e-3f, 0.99f, mean2, invstd2, NULL,
                NULL);
    kc_bn_norm(rows, c, x, mean, invstd, gamma, beta, y);
    kc_bn_norm(h, c, x, mean2, invstd2, gamma, beta, y2);
    kc_bn_norm(rows - h, c, x + off, mean2, invstd2, gamma, beta, y2 + off);
    if (fwd_bits)
        CHECKF(same(mean, mean2, (size_t)c * 4) &&
                   same(invstd, invstd2, (size_t)c * 4) &&
                   same(y, y2, n * 4),
               "bn split %zu+%zu x %d: forward bits", h, rows - h, c);
    else
        KC_CHECK_NEAR("bn split y", n, y2, y, 1e-5, 1e-6);

    /* Backward, with the whole batch's statistics on both. */
    kc_bn_bwd_sums(rows, c, x, dy, mean, invstd, whole, dg, db);
    kc_bn_bwd_sums(h, c, x, dy, mean, invstd, a, dg, db);
    kc_bn_bwd_sums(rows - h, c, x + off, dy + off, mean, invstd, b, dg, db);
    for (size_t i = 0; i < nc; i++)
        a[i] += b[i];
    CHECKF(sums_close(a, whole, (int)nc),
           "bn split %zu+%zu x %d: backward sums", h, rows - h, c);
    int bwd_bits = same(a, whole, nc * sizeof *a);
    CHECKF(!exact || bwd_bits,
           "bn split %zu+%zu x %d: exact backward sums differ", h, rows - h,
           c);
    kc_bn_bwd_dx(rows, c, x, dy, mean, invstd, gamma, whole, (double)rows,
                 dx);
    kc_bn_bwd_dx(h, c, x, dy, mean, invstd, gamma, a, (double)rows, dx2);
    kc_bn_bwd_dx(rows - h, c, x + off, dy + off, mean, invstd, gamma, a,
                 (double)rows, dx2 + off);
    if (bwd_bits)
        CHECKF(same(dx, dx2, n * 4), "bn split %zu+%zu x %d: dx bits", h,
               rows - h, c);
    else
        KC_CHECK_NEAR("bn split dx", n, dx2, dx, 1e-5, 1e-6);
    free(x), free(dy), free(gamma), free(beta), free(y), free(y2);
    free(dx), free(dx2), free(mean), free(invstd), free(mean2);
    free(invstd2), free(dg), free(db), free(whole), free(a), free(b);
}

/* ---- layernorm ------------------------------------------------------------ */

static void test_ln_fwd(size_t rows, int c)
{
    size_t n = rows * (size_t)c;
    const float eps = 1e-3f;
    float *x = fbuf(n), *y = fbuf(n), *gamma = fbuf(c), *beta = fbuf(c);
    float *mean = fbuf(rows), *invstd = fbuf(rows);
    kc_fill(n, x, -2, 3);
    kc_fill(c, gamma, 0.5, 1.5);
    kc_fill(c, beta, -1, 1);
    kc_ln_fwd(rows, c, x, gamma, beta, eps, y, mean, invstd);
    int ok = 1;
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * (size_t)c;
        double m = 0, v = 0;
        for (int j = 0; j < c; j++)
            m += xr[j];
        m /= c;
        for (int j = 0; j < c; j++)
            v += (xr[j] - m) * (xr[j] - m);
        double is = 1 / sqrt(v / c + eps);
        ok &= kc_close(mean[r], m, 1e-6, 1e-7) &&
              kc_close(invstd[r], is, 1e-6, 0);
        for (int j = 0; j < c; j++)
            ok &= kc_close(y[r * (size_t)c + j],
                           (xr[j] - m) * is * gamma[j] + beta[j], 1e-5, 1e-5);
    }
    CHECKF(ok, "ln_fwd %zux%d: off the double reference", rows, c);

    /* A row's output does not depend on the others: the last row alone. */
    if (rows > 1) {
        float last[64], lm, li;
        size_t off = (rows - 1) * (size_t)c;
        kc_ln_fwd(1, c, x + off, gamma, beta, eps, last, &lm, &li);
        CHECKF(same(last, y + off, (size_t)c * 4) && lm == mean[rows - 1] &&
                   li == invstd[rows - 1],
               "ln_fwd %zux%d: a row alone differs", rows, c);
    }
    kc_ln_fwd(rows, c, x, gamma, beta, eps, x, mean, invstd);   /* y == x */
    CHECKF(same(x, y, n * 4), "ln_fwd %zux%d in place", rows, c);
    free(x), free(y), free(gamma), free(beta), free(mean), free(invstd);
}

typedef struct ln_case {
    size_t rows;
    int c;
    float *x, *w, *gamma, *beta, *y, *mean, *invstd;
} ln_case_t;

static double ln_loss(void *vc)
{
    ln_case_t *k = vc;
    kc_ln_fwd(k->rows, k->c, k->x, k->gamma, k->beta, 0.05f, k->y, k->mean,
              k->invstd);
    double s = 0;
    for (size_t i = 0; i < k->rows * (size_t)k->c; i++)
        s += (double)k->w[i] * k->y[i];
    return s;
}

static void test_ln_backward(size_t rows, int c)
{
    size_t n = rows * (size_t)c;
    ln_case_t k = { rows, c, fbuf(n), fbuf(n), fbuf(c), fbuf(c), fbuf(n),
                    fbuf(rows), fbuf(rows) };
    float *dx = fbuf(n), *dg = fbuf(c), *db = fbuf(c);
    float *dg2 = fbuf(c), *db2 = fbuf(c), *inplace = fbuf(n);
    double *rg = dbuf(c), *rb = dbuf(c);
    kc_fill(n, k.x, -2, 2);
    kc_fill(n, k.w, -1, 1);
    kc_fill(c, k.gamma, 0.5, 1.5);
    kc_fill(c, k.beta, -1, 1);
    ln_loss(&k);
    for (int j = 0; j < c; j++)
        dg[j] = db[j] = NAN;                    /* written, not added to */
    kc_ln_bwd(rows, c, k.x, k.w, k.mean, k.invstd, k.gamma, dx, dg, db);
    char what[64];
    snprintf(what, sizeof what, "ln dx %zux%d", rows, c);
    kc_grad_check(what, n, k.x, dx, ln_loss, &k, 1e-2);
    snprintf(what, sizeof what, "ln dgamma %zux%d", rows, c);
    kc_grad_check(what, (size_t)c, k.gamma, dg, ln_loss, &k, 1e-2);
    snprintf(what, sizeof what, "ln dbeta %zux%d", rows, c);
    kc_grad_check(what, (size_t)c, k.beta, db, ln_loss, &k, 1e-2);

    /* dgamma, dbeta: double column sums in row order, rounded once. */
    for (size_t r = 0; r < rows; r++)
        for (int j = 0; j < c; j++) {
            size_t i = r * (size_t)c + j;
            double xhat = ((double)k.x[i] - k.mean[r]) * k.invstd[r];
            rb[j] += k.w[i];
            rg[j] += k.w[i] * xhat;
        }
    int ok = 1;
    for (int j = 0; j < c; j++)
        ok &= dg[j] == (float)rg[j] && db[j] == (float)rb[j];
    CHECKF(ok, "ln %zux%d: dgamma / dbeta not the row-order sums", rows, c);

    /* Without dx (a first layer): the same dgamma and dbeta. */
    kc_ln_bwd(rows, c, k.x, k.w, k.mean, k.invstd, k.gamma, NULL, dg2, db2);
    CHECK(same(dg, dg2, (size_t)c * 4) && same(db, db2, (size_t)c * 4));
    /* dx may be dy. */
    memcpy(inplace, k.w, n * sizeof *inplace);
    kc_ln_bwd(rows, c, k.x, inplace, k.mean, k.invstd, k.gamma, inplace, dg2,
              db2);
    CHECKF(same(inplace, dx, n * 4) && same(dg, dg2, (size_t)c * 4),
           "ln_bwd %zux%d in place", rows, c);
    free(k.x), free(k.w), free(k.gamma), free(k.beta), free(k.y);
    free(k.mean), free(k.invstd), free(dx), free(dg), free(db), free(dg2);
    free(db2), free(inplace), free(rg), free(rb);
}

/* rows = 0: the sums and parameter gradients are zeros, nothing is read. */
static void test_empty(void)
{
    double sums[4] = { 1, 2, 3, 4 };
    float dg[2] = { 1, 2 }, db[2] = { 3, 4 }, guard = 7.0f;
    kc_bn_sums(0, 2, NULL, sums);
    CHECK(sums[0] == 0 && sums[3] == 0);
    kc_bn_norm(0, 2, NULL, NULL, NULL, NULL, NULL, &guard);
    kc_ln_fwd(0, 2, NULL, NULL, NULL, 1e-3f, &guard, NULL, NULL);
    kc_ln_bwd(0, 2, NULL, NULL, NULL, NULL, NULL, &guard, dg, db);
    CHECK(guard == 7.0f && dg[0] == 0 && dg[1] == 0 && db[0] == 0 &&
          db[1] == 0);
}

int main(void)
{
    kc_seed(11);
    static const size_t rows[] = { 0, 1, 2, 7, 100, 4099 };
    static const int chans[] = { 1, 3, 16, 37 };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        for (size_t j = 0; j < sizeof chans / sizeof *chans; j++)
            test_bn_sums(rows[i], chans[j]);
    test_bn_stats();
    test_bn_norm();
    test_bn_bwd_dx_bits(301, 16);
    test_bn_bwd_dx_bits(77, 130);               /* channel blocks of 64 */
    for (size_t r = 1; r <= 7; r++)
        for (int c = 1; c <= 5; c++) {
            test_bn_backward(r, c);
            test_ln_backward(r, c);
        }
    test_bn_split(7, 3, 5, 0);
    test_bn_split(40, 20, 3, 0);
    test_bn_split(1000, 333, 8, 0);
    test_bn_split(8, 4, 5, 1);
    test_bn_split(64, 32, 3, 1);

    static const int lnc[] = { 1, 2, 5, 16, 64 };
    for (size_t i = 0; i < sizeof lnc / sizeof *lnc; i++) {
        test_ln_fwd(1, lnc[i]);
        test_ln_fwd(9, lnc[i]);
    }
    test_ln_backward(3, 130);                   /* channel blocks of 64 */
    test_ln_backward(50, 64);
    test_empty();
    return CHECK_DONE();
}
