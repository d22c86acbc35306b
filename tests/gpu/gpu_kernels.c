/* Every CUDA kernel (kernels/cuda) against its CPU twin (kernels/cpu) on the
 * same random input, over several shapes including odd and empty ones.
 * Tolerances: 1e-5 relative for elementwise results (and the same bits on
 * x86-64, where neither side contracts a*b+c into an FMA), 1e-4 for GEMM
 * and the loss gradient. Without a CUDA device it prints the reason and
 * exits 77 (ctest: Skipped). `gpu_kernels --probe` only does that check
 * (exit 0 with a device), for the compute-sanitizer wrapper. */
#include "check.h"
#include "cpu/kernels_cpu.h"
#include "cuda/kernels_cuda.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && !defined(__FMA__)
#define SAME_BITS 1    /* CPU side has no FMA to contract into */
#else
#define SAME_BITS 0
#endif

static kg_stream_t S;
static kg_blas_t H;

/* ---- deterministic input ------------------------------------------------ */
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

static float frand(float lo, float hi)
{
    return lo + (hi - lo) * (float)(rnd() >> 8) * (1.0f / 16777216.0f);
}

static float *fill(size_t n, float lo, float hi)
{
    float *x = malloc(n ? n * sizeof *x : 1);
    if (!x) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        x[i] = frand(lo, hi);
    return x;
}

static float *copy_of(const float *x, size_t n)
{
    float *y = fill(n, 0, 0);
    if (n)
        memcpy(y, x, n * sizeof *y);
    return y;
}

/* ---- device helpers: failures are CHECKed and give NULL / no copy ------- */
static void *dev_from(const void *h, size_t bytes)
{
    void *d = NULL;
    int rc = kg_malloc(&d, bytes, S);
    CHECKF(rc == 0, "kg_malloc(%zu): %s", bytes, kg_last_error());
    if (rc == 0 && bytes && h) {
        rc = kg_memcpy_h2d(d, h, bytes, S);
        CHECKF(rc == 0, "kg_memcpy_h2d: %s", kg_last_error());
    }
    return d;
}

static void to_host(void *h, const void *d, size_t bytes)
{
    if (bytes) {
        int rc = kg_memcpy_d2h(h, d, bytes, S);
        CHECKF(rc == 0, "kg_memcpy_d2h: %s", kg_last_error());
    }
    int rc = kg_stream_sync(S);
    CHECKF(rc == 0, "kg_stream_sync: %s", kg_last_error());
}

static void dev_free(void *d)
{
    CHECK(kg_free(d, S) == 0);
}

/* ---- comparisons ---------------------------------------------------------- */
/* Largest |a - b| / max(|b|, floor); NaN where exactly one side is NaN. */
static double max_rel(const float *a, const float *b, size_t n, double floor)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i])) {
            if (!(isnan(a[i]) && isnan(b[i])))
                return NAN;
            continue;
        }
        double d = fabs((double)a[i] - b[i]) / fmax(fabs((double)b[i]), floor);
        if (d > worst)
            worst = d;
    }
    return worst;
}

/* max|a - b| / max|b|: the norm-wise error of a GEMM result. */
static double norm_rel(const float *a, const float *b, size_t n)
{
    double md = 0.0, mb = 0.0;
    for (size_t i = 0; i < n; i++) {
        md = fmax(md, fabs((double)a[i] - b[i]));
        mb = fmax(mb, fabs((double)b[i]));
    }
    return isnan(md) ? NAN : md / fmax(mb, 1e-30);
}

static int same_bits(const void *a, const void *b, size_t bytes)
{
    return bytes == 0 || memcmp(a, b, bytes) == 0;
}

/* Elementwise result d (device) against CPU result want (host). */
static void expect_elem(const char *what, size_t n, const float *want,
                        const float *d)
{
    float *got = fill(n, 0, 0);
    to_host(got, d, n * sizeof *got);
    double e = max_rel(got, want, n, 1e-3);
    CHECKF(e <= 1e-5, "%s n=%zu: relative error %g", what, n, e);
    if (SAME_BITS)
        CHECKF(same_bits(got, want, n * sizeof *got), "%s n=%zu: bits differ",
               what, n);
    free(got);
}

/* ---- dense, bias ------------------------------------------------------------ */
static void test_dense(int m, int k, int n)
{
    size_t mk = (size_t)m * k, kn = (size_t)k * n, mn = (size_t)m * n;
    float *X = fill(mk, -1, 1), *W = fill(kn, -1, 1), *b = fill(n, -1, 1);
    float *dY = fill(mn, -1, 1);
    float *Y = fill(mn, 0, 0), *dW = fill(kn, 0, 0), *db = fill(n, 0, 0);
    float *dX = fill(mk, 0, 0), *got = fill(mk + kn + mn + n, 0, 0);
    kc_dense_fwd(m, k, n, X, W, b, Y);
    kc_dense_bwd(m, k, n, X, W, dY, dW, db, dX);

    float *gX = dev_from(X, mk * 4), *gW = dev_from(W, kn * 4);
    float *gb = dev_from(b, (size_t)n * 4), *gdY = dev_from(dY, mn * 4);
    float *gY = dev_from(NULL, mn * 4), *gdW = dev_from(NULL, kn * 4);
    float *gdb = dev_from(NULL, (size_t)n * 4), *gdX = dev_from(NULL, mk * 4);
    int rc = kg_dense_fwd(H, m, k, n, gX, gW, gb, gY, S);
    CHECKF(rc == 0, "kg_dense_fwd %dx%dx%d: %s", m, k, n, kg_last_error());
    to_host(got, gY, mn * 4);
    double e = norm_rel(got, Y, mn);
    CHECKF(e <= 1e-4, "dense_fwd %dx%dx%d: error %g", m, k, n, e);

    /* Without dX first (input layer), then with it. */
    rc = kg_dense_bwd(H, m, k, n, gX, gW, gdY, gdW, gdb, NULL, S);
    CHECKF(rc == 0, "kg_dense_bwd(dX NULL): %s", kg_last_error());
    rc = kg_dense_bwd(H, m, k, n, gX, gW, gdY, gdW, gdb, gdX, S);
    CHECKF(rc == 0, "kg_dense_bwd: %s", kg_last_error());
    to_host(got, gdW, kn * 4);
    e = norm_rel(got, dW, kn);
    CHECKF(e <= 1e-4, "dense_bwd dW %dx%dx%d: error %g", m, k, n, e);
    to_host(got, gdX, mk * 4);
    e = norm_rel(got, dX, mk);
    CHECKF(e <= 1e-4, "dense_bwd dX %dx%dx%d: error %g", m, k, n, e);
    expect_elem("dense_bwd db", (size_t)n, db, gdb);

    float *ptrs[] = { X, W, b, dY, Y, dW, db, dX, got };
    for (size_t i = 0; i < sizeof ptrs / sizeof *ptrs; i++)
        free(ptrs[i]);
    float *gptrs[] = { gX, gW, gb, gdY, gY, gdW, gdb, gdX };
    for (size_t i = 0; i < sizeof gptrs / sizeof *gptrs; i++)
        dev_free(gptrs[i]);
}

static void test_bias(int m, int n)
{
    size_t mn = (size_t)m * n;
    float *Y = fill(mn, -1, 1), *b = fill(n, -1, 1), *db = fill(n, 0, 0);
    float *gY = dev_from(Y, mn * 4), *gb = dev_from(b, (size_t)n * 4);
    float *gdb = dev_from(NULL, (size_t)n * 4);
    CHECK(kg_bias_grad(m, n, gY, gdb, S) == 0);
    kc_bias_grad(m, n, Y, db);
    expect_elem("bias_grad", (size_t)n, db, gdb);
    CHECK(kg_bias_add(m, n, gb, gY, S) == 0);
    kc_bias_add(m, n, b, Y);
    expect_elem("bias_add", mn, Y, gY);
    free(Y), free(b), free(db);
    dev_free(gY), dev_free(gb), dev_free(gdb);
}

/* ---- activations ------------------------------------------------------------ */
static void test_relu(size_t n)
{
    float *x = fill(n, -1, 1), *dy = fill(n, -1, 1);
    if (n > 3) {
        x[1] = NAN;           /* kept by relu, as TF's max(x, 0) */
        x[2] = 0.0f;
        x[3] = -0.0f;
    }
    float *y = fill(n, 0, 0), *dx = fill(n, 0, 0);
    kc_relu_fwd(n, x, y);
    kc_relu_bwd(n, y, dy, dx);

    float *gx = dev_from(x, n * 4), *gy = dev_from(NULL, n * 4);
    float *gdy = dev_from(dy, n * 4), *gdx = dev_from(NULL, n * 4);
    CHECK(kg_relu_fwd(n, gx, gy, S) == 0);
    expect_elem("relu_fwd", n, y, gy);
    CHECK(kg_relu_bwd(n, gy, gdy, gdx, S) == 0);
    expect_elem("relu_bwd", n, dx, gdx);
    /* In place: y == x, dx == dy. */
    CHECK(kg_relu_fwd(n, gx, gx, S) == 0);
    expect_elem("relu_fwd in place", n, y, gx);
    CHECK(kg_relu_bwd(n, gy, gdy, gdy, S) == 0);
    expect_elem("relu_bwd in place", n, dx, gdy);
    free(x), free(dy), free(y), free(dx);
    dev_free(gx), dev_free(gy), dev_free(gdy), dev_free(gdx);
}

/* ---- softmax cross-entropy, accuracy ---------------------------------------- */
/* ties: logits are small integers, so rows often have several maxima and
 * "first index on ties" is exercised. bad: row 0 has an invalid label. */
static void test_xent(int m, int c, int ties, int bad, int alias)
{
    size_t mc = (size_t)m * c;
    float *x = fill(mc, -5, 5);
    if (ties)
        for (size_t i = 0; i < mc; i++)
            x[i] = (float)(rnd() % 3);
    int32_t *lab = malloc((size_t)m * sizeof *lab);
    for (int r = 0; r < m; r++)
        lab[r] = (int32_t)(rnd() % (uint32_t)c);
    if (bad)
        lab[0] = c;
    float scale = 1.0f / (float)m;
    float *dl = fill(mc, 0, 0), *got = fill(mc, 0, 0);
    int64_t want_ok = 0;
    double want = kc_softmax_xent(m, c, x, lab, dl, scale, &want_ok);
    int64_t want_cc = kc_count_correct(m, c, x, lab);

    float *gx = dev_from(x, mc * 4);
    int32_t *glab = dev_from(lab, (size_t)m * sizeof *lab);
    float *gdl = alias ? gx : dev_from(NULL, mc * 4);
    kg_xent_acc_t *acc = dev_from(NULL, sizeof *acc);
    int64_t *gcc = dev_from(NULL, sizeof *gcc);
    void *pinned = NULL;                 /* as the per-step read-back */
    CHECK(kg_malloc_host(&pinned, sizeof(kg_xent_acc_t)) == 0 && pinned);
    kg_xent_acc_t *res = pinned;
    CHECK(kg_memset(acc, 0, sizeof *acc, S) == 0);
    CHECK(kg_memset(gcc, 0, sizeof *gcc, S) == 0);

    /* Accuracy first: with alias the logits are overwritten below. */
    CHECK(kg_count_correct(m, c, gx, glab, gcc, S) == 0);
    int64_t cc = -1;
    to_host(&cc, gcc, sizeof cc);
    CHECKF(cc == want_cc, "count_correct %dx%d: %lld, want %lld", m, c,
           (long long)cc, (long long)want_cc);

    int rc = kg_softmax_xent(m, c, gx, glab, gdl, scale, acc, S);
    CHECKF(rc == 0, "kg_softmax_xent: %s", kg_last_error());
    to_host(res, acc, KG_XENT_ACC_RESULT_BYTES);
    double loss = res->loss_sum;
    int64_t ok = res->correct;
    if (bad)
        CHECKF(isnan(loss) && isnan(want), "xent %dx%d bad label: %g, want %g",
               m, c, loss, want);
    else
        CHECKF(fabs(loss - want) <= 1e-4 * fmax(fabs(want), 1e-6),
               "xent %dx%d: loss %.9g, want %.9g", m, c, loss, want);
    CHECKF(ok == want_ok, "xent %dx%d: correct %lld, want %lld", m, c,
           (long long)ok, (long long)want_ok);
    to_host(got, gdl, mc * 4);
    double worst = 0.0;
    for (size_t i = 0; i < mc; i++)
        worst = fmax(worst, fabs((double)got[i] - dl[i]) / scale);
    CHECKF(worst <= 1e-4, "xent %dx%d: dlogits error %g (in units of scale)",
           m, c, worst);

    if (!alias) {
        /* Accumulates, bitwise deterministic: a second call adds the same. */
        CHECK(kg_softmax_xent(m, c, gx, glab, NULL, scale, acc, S) == 0);
        to_host(res, acc, KG_XENT_ACC_RESULT_BYTES);
        double twice = loss + loss;
        CHECKF(bad ? isnan(res->loss_sum) : same_bits(&res->loss_sum, &twice, 8),
               "xent %dx%d: second call gave %.17g, want %.17g", m, c,
               res->loss_sum, twice);
        CHECK(res->correct == 2 * want_ok);
    }
    CHECK(kg_free_host(res) == 0);
    free(x), free(lab), free(dl), free(got);
    dev_free(glab), dev_free(acc), dev_free(gcc);
    if (!alias)
        dev_free(gdl);
    dev_free(gx);
}

/* ---- optimizers ---------------------------------------------------------------- */
static void test_optim(size_t n)
{
    float *w = fill(n, -1, 1), *g = fill(n, -1, 1), *v = fill(n, -0.1f, 0.1f);
    float *m = fill(n, -0.1f, 0.1f), *v2 = fill(n, 0, 0.01f);
    float *gw = dev_from(w, n * 4), *gg = dev_from(g, n * 4);
    float *gv = dev_from(v, n * 4), *gm = dev_from(m, n * 4);
    float *gv2 = dev_from(v2, n * 4);

    CHECK(kg_sgd(n, gw, gg, 0.01f, S) == 0);
    kc_sgd(n, w, g, 0.01f);
    expect_elem("sgd", n, w, gw);

    CHECK(kg_momentum(n, gw, gg, gv, 0.01f, 0.9f, S) == 0);
    kc_momentum(n, w, g, v, 0.01f, 0.9f);
    expect_elem("momentum w", n, w, gw);
    expect_elem("momentum v", n, v, gv);

    static const int64_t steps[] = { 1, 2, 10, 0 };   /* 0 counts as 1 */
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
        CHECK(kg_adam(n, gw, gg, gm, gv2, 1e-3f, 0.9f, 0.999f, 1e-7f,
                      steps[i], S) == 0);
        kc_adam(n, w, g, m, v2, 1e-3f, 0.9f, 0.999f, 1e-7f, steps[i]);
        expect_elem("adam w", n, w, gw);
        expect_elem("adam m", n, m, gm);
        expect_elem("adam v", n, v2, gv2);
    }
    free(w), free(g), free(v), free(m), free(v2);
    dev_free(gw), dev_free(gg), dev_free(gv), dev_free(gm), dev_free(gv2);
}

/* ---- vector helpers -------------------------------------------------------------- */
static void test_vec(size_t n)
{
    float *x = fill(n, -1, 1), *y = fill(n, -1, 1);
    float *gx = dev_from(x, n * 4), *gy = dev_from(y, n * 4);
    CHECK(kg_scale(n, 0.37f, gx, S) == 0);
    kc_scale(n, 0.37f, x);
    expect_elem("scale", n, x, gx);
    CHECK(kg_axpy(n, -1.3f, gx, gy, S) == 0);
    kc_axpy(n, -1.3f, x, y);
    expect_elem("axpy", n, y, gy);
    CHECK(kg_axpy(n, 0.5f, gy, gy, S) == 0);       /* x == y */
    kc_axpy(n, 0.5f, y, y);
    expect_elem("axpy x == y", n, y, gy);

    uint8_t *u = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++)
        u[i] = (uint8_t)rnd();
    uint8_t *gu = dev_from(u, n);
    CHECK(kg_u8_to_f32(n, gu, 1.0f / 255.0f, gx, S) == 0);
    kc_u8_to_f32(n, u, 1.0f / 255.0f, x);
    expect_elem("u8_to_f32", n, x, gx);
    free(x), free(y), free(u);
    dev_free(gx), dev_free(gy), dev_free(gu);
}

/* kg_sum runs 32 sources per launch: 40 crosses that boundary. */
static void test_sum(size_t n, int nsrc, int into_first)
{
    enum { MAXS = 40 };
    float *h[MAXS], *want = fill(n, 0, 0);
    const float *hs[MAXS], *ds[MAXS];
    float *d[MAXS];
    for (int j = 0; j < nsrc; j++) {
        h[j] = fill(n, -1, 1);
        d[j] = dev_from(h[j], n * 4);
        hs[j] = h[j];
        ds[j] = d[j];
    }
    float *gdst = into_first ? d[0] : dev_from(NULL, n * 4);
    float *hdst = into_first ? copy_of(h[0], n) : want;
    if (into_first)
        hs[0] = hdst;
    kc_sum(n, hdst, hs, nsrc);
    CHECK(kg_sum(n, gdst, ds, nsrc, S) == 0);
    char what[48];
    snprintf(what, sizeof what, "sum of %d%s", nsrc, into_first ? " into srcs[0]" : "");
    expect_elem(what, n, hdst, gdst);
    if (into_first)
        free(hdst);
    else
        dev_free(gdst);
    for (int j = 0; j < nsrc; j++) {
        free(h[j]);
        dev_free(d[j]);
    }
    free(want);
}

/* ---- argument errors: a code and a reason, never a crash ------------------------ */
static void test_errors(void)
{
    CHECK(kg_device_count(NULL) == KG_EINVAL);
    CHECK(strlen(kg_last_error()) > 0);
    CHECK(kg_softmax_xent(4, 3, NULL, NULL, NULL, 1.0f, NULL, S) == KG_EINVAL);
    CHECK(kg_count_correct(4, 3, NULL, NULL, NULL, S) == KG_EINVAL);
    CHECK(kg_dense_fwd(NULL, 2, 2, 2, NULL, NULL, NULL, NULL, S) == KG_EINVAL);
    CHECK(kg_memcpy_h2d(NULL, "x", 1, S) == KG_EINVAL);
    float one = 1.0f;
    const float *none = NULL;
    CHECK(kg_sum(1, &one, NULL, 1, S) == KG_EINVAL);
    CHECK(kg_sum(1, &one, &none, 0, S) == 0);          /* nothing, as kc */
    void *p = &one;
    CHECK(kg_malloc(&p, 0, S) == 0 && p == NULL);
    CHECK(kg_free(NULL, S) == 0);
    CHECK(kg_stream_destroy(NULL) == 0);
    CHECK(kg_blas_destroy(NULL) == 0);
    /* Sizes <= 0 are "nothing to do", as in the CPU twin. */
    CHECK(kg_dense_fwd(H, 0, 3, 3, NULL, NULL, NULL, NULL, S) == 0);
    CHECK(kg_relu_fwd(0, NULL, NULL, S) == 0);
}

int main(int argc, char **argv)
{
    int ndev = -1;
    CHECK(kg_device_count(&ndev) == 0);
    if (ndev <= 0)
        CHECK_SKIP("no CUDA device (%s)", kg_last_error());
    if (argc > 1 && strcmp(argv[1], "--probe") == 0) {
        printf("%d CUDA device(s)\n", ndev);
        return 0;
    }
    CHECKF(kg_set_device(0) == 0, "kg_set_device: %s", kg_last_error());
    CHECKF(kg_stream_create(&S) == 0, "kg_stream_create: %s", kg_last_error());
    CHECKF(kg_blas_create(&H, S) == 0, "kg_blas_create: %s", kg_last_error());
    if (!S || !H)
        return CHECK_DONE();

    static const int dense[][3] = {
        { 1, 1, 1 }, { 3, 5, 7 }, { 33, 17, 65 }, { 128, 100, 10 },
        { 64, 784, 128 }, { 5, 0, 3 }, { 0, 4, 4 },
    };
    for (size_t i = 0; i < sizeof dense / sizeof *dense; i++)
        test_dense(dense[i][0], dense[i][1], dense[i][2]);
    test_bias(1, 1);
    test_bias(37, 129);
    test_bias(0, 5);

    static const size_t sizes[] = { 1, 7, 16, 1000, 4099, 2100003 };
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        test_relu(sizes[i]);
        test_optim(sizes[i]);
        test_vec(sizes[i]);
    }

    static const int xent[][2] = {
        { 1, 1 }, { 1, 10 }, { 5, 10 }, { 33, 3 }, { 64, 10 }, { 7, 33 },
        { 130, 1000 }, { 3000, 10 },
    };
    for (size_t i = 0; i < sizeof xent / sizeof *xent; i++) {
        test_xent(xent[i][0], xent[i][1], 0, 0, 0);
        test_xent(xent[i][0], xent[i][1], 1, 0, 0);
        test_xent(xent[i][0], xent[i][1], 0, 0, 1);
    }
    test_xent(4, 3, 0, 1, 0);

    static const int nsrcs[] = { 1, 2, 3, 4, 7, 40 };
    for (size_t i = 0; i < sizeof nsrcs / sizeof *nsrcs; i++) {
        test_sum(1001, nsrcs[i], 0);
        test_sum(1001, nsrcs[i], 1);
    }
    test_sum(5, 40, 1);

    test_errors();

    CHECK(kg_blas_destroy(H) == 0);
    CHECK(kg_stream_sync(S) == 0);
    CHECK(kg_stream_destroy(S) == 0);
    return CHECK_DONE();
}
