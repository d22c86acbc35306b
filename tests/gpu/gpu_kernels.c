/* Every CUDA kernel (kernels/cuda) against its CPU twin (kernels/cpu) on the
 * same random input, over several shapes including odd and empty ones.
 * Tolerances: 1e-5 relative for elementwise results (and the same bits on
 * x86-64, where neither side contracts a*b+c into an FMA), 1e-4 for GEMM
 * (dense, conv2d) and the loss gradient, 6 ulps for tanh / sigmoid forward,
 * 1e-5 relative for gelu and softmax forward (CUDA's erfcf / expf);
 * 1e-6 for batchnorm and layernorm, whose sums over rows are a tree of
 * doubles on the GPU (bn_stats: the same bits from the same sums);
 * maxpool2d, avgpool2d and dropout are bitwise equal everywhere.
 * mixed_bfloat16 (kg_*_bf16): against the CPU's float32 kernels on the
 * operands rounded to bf16 (exact products, fp32 sums: the same
 * arithmetic but for the order), 5e-4 norm-wise. Without a CUDA device it prints the reason and
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
    /* Zeroed: an empty array is no uninitialised read, even to gcc -O2. */
    float *x = calloc(n ? n : 1, sizeof *x);
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

/* The distance in ulps between two floats (0 when both are NaN, huge when
 * one is). */
static int64_t ulps(float a, float b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b) ? 0 : INT64_MAX;
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    int64_t la = ia < 0 ? (int64_t)INT32_MIN - ia : ia;   /* monotonic */
    int64_t lb = ib < 0 ? (int64_t)INT32_MIN - ib : ib;
    return la > lb ? la - lb : lb - la;
}

/* Floats a and b are the same: the same bits, or both NaN. A NaN's sign
 * and payload are the hardware's: x86 makes -nan (0xffc00000) and carries
 * an input NaN's bits through, the GPU makes 0x7fffffff. */
static int same_float(float a, float b)
{
    return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b));
}

/* Elementwise result d (device) against CPU result want (host): within
 * `tol` relative, and the same floats (same_float) where the CPU does not
 * contract. */
static void expect_rel(const char *what, size_t n, const float *want,
                       const float *d, double tol)
{
    float *got = fill(n, 0, 0);
    to_host(got, d, n * sizeof *got);
    double e = max_rel(got, want, n, 1e-3);
    CHECKF(e <= tol, "%s n=%zu: relative error %g", what, n, e);
    size_t first = n, count = 0;
    for (size_t i = 0; SAME_BITS && i < n; i++)
        if (!same_float(got[i], want[i])) {
            count++;
            if (first == n)
                first = i;
        }
    CHECKF(count == 0, "%s n=%zu: bits differ in %zu elements, the first "
           "[%zu] %a against the CPU's %a (%lld ulps)", what, n, count,
           first, count ? got[first] : 0.0f, count ? want[first] : 0.0f,
           count ? (long long)ulps(got[first], want[first]) : 0LL);
    free(got);
}

/* Largest |got - want| / max(|want|, floor) of device d against host want,
 * NaN where exactly one side is NaN. */
static double dev_rel(const float *want, const float *d, size_t n,
                      double floor)
{
    float *got = fill(n, 0, 0);
    to_host(got, d, n * sizeof *got);
    double e = max_rel(got, want, n, floor);
    free(got);
    return e;
}

/* A bias gradient (kg_bias_grad: a fixed tree of doubles per column on
 * the GPU, the CPU's row order) within rounding of the CPU's, not bitwise. */
static void expect_colsum(const char *what, size_t n, const float *want,
                          const float *d)
{
    double e = dev_rel(want, d, n, 1e-3);
    CHECKF(e <= 1e-6, "%s n=%zu: relative error %g", what, n, e);
}

static void expect_elem(const char *what, size_t n, const float *want,
                        const float *d)
{
    expect_rel(what, n, want, d, 1e-5);
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
    expect_colsum("dense_bwd db", (size_t)n, db, gdb);

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
    expect_colsum("bias_grad", (size_t)n, db, gdb);
    /* the same bits when asked again */
    float *once = fill(n, 0, 0), *twice = fill(n, 0, 0);
    to_host(once, gdb, (size_t)n * 4);
    CHECK(kg_bias_grad(m, n, gY, gdb, S) == 0);
    to_host(twice, gdb, (size_t)n * 4);
    CHECKF(same_bits(once, twice, (size_t)n * 4), "bias_grad %dx%d: not the "
           "same bits twice", m, n);
    free(once), free(twice);
    CHECK(kg_bias_add(m, n, gb, gY, S) == 0);
    kc_bias_add(m, n, b, Y);
    expect_elem("bias_add", mn, Y, gY);
    free(Y), free(b), free(db);
    dev_free(gY), dev_free(gb), dev_free(gdb);
}

/* relu backward fused with the bias gradient: kc's bits, db NULL masks
 * only. */
static void test_relu_bias(int m, int n)
{
    size_t mn = (size_t)m * n;
    float *y = fill(mn, -1, 1), *dy = fill(mn, -1, 1), *db = fill(n, 0, 0);
    float *gy = dev_from(y, mn * 4), *gdy = dev_from(dy, mn * 4);
    float *gdy2 = dev_from(dy, mn * 4), *gdb = dev_from(NULL, (size_t)n * 4);
    CHECK(kg_relu_bias_grad(m, n, gy, gdy, gdb, S) == 0);
    CHECK(kg_relu_bias_grad(m, n, gy, gdy2, NULL, S) == 0);
    kc_relu_bias_grad(m, n, y, dy, db);
    expect_elem("relu_bias_grad dy", mn, dy, gdy);
    expect_elem("relu_bias_grad dy (no db)", mn, dy, gdy2);
    expect_colsum("relu_bias_grad db", (size_t)n, db, gdb);
    free(y), free(dy), free(db);
    dev_free(gy), dev_free(gdy), dev_free(gdy2), dev_free(gdb);
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

    int rc = kg_softmax_xent(m, c, gx, glab, gdl, scale, 1, acc, S);
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
        CHECK(kg_softmax_xent(m, c, gx, glab, NULL, scale, 1, acc, S) == 0);
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

/* ---- losses on dense targets, top-k ------------------------------------ */
/* kind's loss, metric and dx (aliasing x when alias) against kc_dense_loss;
 * then top-k from integer labels and from the targets' first maxima. */
static void test_dense_loss(int kind, int metric, int m, int c, int alias)
{
    size_t mc = (size_t)m * c;
    float *x = fill(mc, -4, 4), *y = fill(mc, 0, 1);
    if (kind == KOPS_LOSS_CATEGORICAL)          /* soft labels summing to 1 */
        for (int r = 0; r < m; r++) {
            float t = 0;
            for (int j = 0; j < c; j++)
                t += y[(size_t)r * c + j];
            for (int j = 0; j < c; j++)
                y[(size_t)r * c + j] /= t;
        }
    float scale = 1.0f / (float)m;
    float *dl = fill(mc, 0, 0), *got = fill(mc, 0, 0);
    double want_m = 0.0;
    double want = kc_dense_loss(kind, metric, m, c, x, y, dl, scale, &want_m);
    int32_t *lab = malloc((size_t)m * sizeof *lab);
    for (int r = 0; r < m; r++)
        lab[r] = (int32_t)(rnd() % (uint32_t)c);
    int k = c > 3 ? 3 : 1;
    int64_t want_k = kc_topk_count(m, c, k, x, lab, NULL) +
                     kc_topk_count(m, c, k, x, NULL, y);

    float *gx = dev_from(x, mc * 4), *gy = dev_from(y, mc * 4);
    int32_t *glab = dev_from(lab, (size_t)m * sizeof *lab);
    float *gdl = alias ? gx : dev_from(NULL, mc * 4);
    kg_xent_acc_t *acc = dev_from(NULL, sizeof *acc);
    kg_xent_acc_t res;
    CHECK(kg_memset(acc, 0, sizeof *acc, S) == 0);
    CHECK(kg_topk_count(m, c, k, gx, glab, NULL, acc, S) == 0);
    CHECK(kg_topk_count(m, c, k, gx, NULL, gy, acc, S) == 0);
    if (kind == KOPS_LOSS_BINARY)   /* the AUC's bins, before dx */
        CHECK(kg_auc_hist(m, c, gx, gy, acc, S) == 0);
    int rc = kg_dense_loss(kind, metric, m, c, gx, gy, gdl, scale, acc, S);
    CHECKF(rc == 0, "kg_dense_loss: %s", kg_last_error());
    to_host(&res, acc, KG_XENT_ACC_RESULT_BYTES);
    CHECKF(fabs(res.loss_sum - want) <= 1e-5 * fmax(fabs(want), 1e-6),
           "dense loss %d %dx%d: %.9g, want %.9g", kind, m, c, res.loss_sum,
           want);
    CHECKF(fabs(res.metric - want_m) <= 1e-6 * fmax(fabs(want_m), 1.0),
           "dense loss %d metric %d %dx%d: %.9g, want %.9g", kind, metric, m,
           c, res.metric, want_m);
    CHECKF(res.correct == want_k, "top-%d %dx%d: %lld, want %lld", k, m, c,
           (long long)res.correct, (long long)want_k);
    if (kind == KOPS_LOSS_BINARY) {
        double want_h[2 * KOPS_AUC_BINS] = { 0 };
        kc_auc_hist(m, c, x, y, want_h);
        double worst_h = 0.0;
        for (int i = 0; i < 2 * KOPS_AUC_BINS; i++)
            worst_h = fmax(worst_h, fabs(res.hist[i] - want_h[i]));
        /* a sigmoid a rounding away from a threshold may change bins */
        CHECKF(worst_h <= 1.0 + 1e-9 && fabs(kc_auc(res.hist) -
                                             kc_auc(want_h)) < 1e-3,
               "auc bins %dx%d: off by %g", m, c, worst_h);
    }
    to_host(got, gdl, mc * 4);
    double worst = 0.0;
    for (size_t i = 0; i < mc; i++)
        worst = fmax(worst, fabs((double)got[i] - dl[i]) / scale);
    CHECKF(worst <= 1e-5, "dense loss %d %dx%d: dx error %g (units of scale)",
           kind, m, c, worst);
    free(x), free(y), free(dl), free(got), free(lab);
    dev_free(gy), dev_free(glab), dev_free(acc);
    if (!alias)
        dev_free(gdl);
    dev_free(gx);
}

/* ---- optimizers ---------------------------------------------------------------- */
/* wd: the decoupled weight decay (0: none), the same bits as the CPU. */
static void test_optim(size_t n, float wd)
{
    float *w = fill(n, -1, 1), *g = fill(n, -1, 1), *v = fill(n, -0.1f, 0.1f);
    float *m = fill(n, -0.1f, 0.1f), *v2 = fill(n, 0, 0.01f);
    float *gw = dev_from(w, n * 4), *gg = dev_from(g, n * 4);
    float *gv = dev_from(v, n * 4), *gm = dev_from(m, n * 4);
    float *gv2 = dev_from(v2, n * 4);

    CHECK(kg_sgd(n, gw, gg, 0.01f, wd, S) == 0);
    kc_sgd(n, w, g, 0.01f, wd);
    expect_elem("sgd", n, w, gw);

    CHECK(kg_momentum(n, gw, gg, gv, 0.01f, 0.9f, wd, S) == 0);
    kc_momentum(n, w, g, v, 0.01f, 0.9f, wd);
    expect_elem("momentum w", n, w, gw);
    expect_elem("momentum v", n, v, gv);

    static const int64_t steps[] = { 1, 2, 10, 0 };   /* 0 counts as 1 */
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
        CHECK(kg_adam(n, gw, gg, gm, gv2, 1e-3f, 0.9f, 0.999f, 1e-7f,
                      steps[i], wd, S) == 0);
        kc_adam(n, w, g, m, v2, 1e-3f, 0.9f, 0.999f, 1e-7f, steps[i], wd);
        expect_elem("adam w", n, w, gw);
        expect_elem("adam m", n, m, gm);
        expect_elem("adam v", n, v2, gv2);
    }

    /* RMSprop, without and with momentum (m as the velocity), and Adagrad
     * from the accumulator fill_const gives it (v2 as the accumulator).
     * RMSprop's mean square starts >= 0, as in training: the momentum
     * above left a signed velocity in v, whose square root is a NaN (the
     * CPU's -nan, the GPU's nan: no result to compare). */
    for (size_t i = 0; i < n; i++)
        v[i] = frand(0, 0.01f);
    if (n)
        CHECK(kg_memcpy_h2d(gv, v, n * 4, S) == 0);
    for (int k = 0; k < 3; k++) {
        float *mom = k == 1 ? m : NULL, *gmom = k == 1 ? gm : NULL;
        CHECK(kg_rmsprop(n, gw, gg, gv, gmom, 1e-3f, 0.9f, 0.5f, 1e-7f, wd,
                         S) == 0);
        kc_rmsprop(n, w, g, v, mom, 1e-3f, 0.9f, 0.5f, 1e-7f, wd);
        expect_elem("rmsprop w", n, w, gw);
        expect_elem("rmsprop rms", n, v, gv);
        if (mom)
            expect_elem("rmsprop momentum", n, m, gm);
    }
    CHECK(kg_fill_const(n, gv2, 0.1f, S) == 0);
    kc_fill_const(n, v2, 0.1f);
    expect_elem("fill_const", n, v2, gv2);
    for (int k = 0; k < 3; k++) {
        CHECK(kg_adagrad(n, gw, gg, gv2, 1e-2f, 1e-7f, wd, S) == 0);
        kc_adagrad(n, w, g, v2, 1e-2f, 1e-7f, wd);
        expect_elem("adagrad w", n, w, gw);
        expect_elem("adagrad accumulator", n, v2, gv2);
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

    /* The sum of squares (clip_norm): the CPU's to 1e-12, and the same
     * bits when asked twice. */
    double *scratch = dev_from(NULL, KG_SUMSQ_SCRATCH * sizeof(double));
    double got[2];
    for (int k = 0; k < 2; k++) {
        CHECK(kg_sumsq(n, gy, scratch, S) == 0);
        to_host(&got[k], scratch, sizeof got[k]);
    }
    double want = kc_sumsq(n, y);
    CHECKF(fabs(got[0] - want) <= 1e-12 * (want > 1 ? want : 1),
           "sumsq n=%zu: %.17g, want %.17g", n, got[0], want);
    CHECKF(same_bits(&got[0], &got[1], sizeof got[0]), "sumsq n=%zu: %.17g "
           "then %.17g", n, got[0], got[1]);
    free(x), free(y), free(u);
    dev_free(gx), dev_free(gy), dev_free(gu), dev_free(scratch);
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

/* ---- conv2d ---------------------------------------------------------------------- */
/* GEMM-shaped result d (device) against the CPU's want (host), within
 * tol norm-wise. */
static void expect_norm(const char *what, const char *shape, size_t n,
                        const float *want, const float *d, double tol)
{
    float *got = fill(n, 0, 0);
    to_host(got, d, n * sizeof *got);
    double e = norm_rel(got, want, n);
    CHECKF(e <= tol, "%s %s: error %g", what, shape, e);
    free(got);
}

static void expect_gemm(const char *what, const char *shape, size_t n,
                        const float *want, const float *d)
{
    expect_norm(what, shape, n, want, d, 1e-4);
}

/* One conv2d geometry: padding (pt, pl, pb, pr) explicit, `group` images
 * per GEMM through col_len (plus half an image more, which must not count),
 * with and without bias / dX. */
static void test_conv(int n, int h, int w, int c, int kh, int kw, int f,
                      int sh, int sw, int pt, int pl, int pb, int pr,
                      int group)
{
    kops_conv2d_t g = { n, h, w, c, kh, kw, f, sh, sw, pt, pl,
                         (h + pt + pb - kh) / sh + 1,
                         (w + pl + pr - kw) / sw + 1, 0, 0 };
    kops_conv2d_t gg = g;
    char shape[128];
    snprintf(shape, sizeof shape,
             "n%d %dx%dx%d k%dx%d f%d s%d,%d pad %d,%d,%d,%d group %d", n, h,
             w, c, kh, kw, f, sh, sw, pt, pl, pb, pr, group);
    size_t one = kc_conv2d_col_len(&g);
    CHECKF(kg_conv2d_col_len(&gg) == one, "conv col_len %s", shape);
    size_t col_len = one * (size_t)group + one / 2;
    size_t nx = (size_t)n * h * w * c, nw = (size_t)kh * kw * c * f;
    size_t ny = (size_t)n * g.oh * g.ow * f;
    float *X = fill(nx, -1, 1), *W = fill(nw, -1, 1), *b = fill(f, -1, 1);
    float *dY = fill(ny, -1, 1), *col = fill(col_len, 0, 0);
    float *Y = fill(ny, 0, 0), *Ynb = fill(ny, 0, 0), *dW = fill(nw, 0, 0);
    float *db = fill(f, 0, 0), *dX = fill(nx, 0, 0);
    kc_conv2d_fwd(&g, X, W, b, Y, col, col_len);
    kc_conv2d_fwd(&g, X, W, NULL, Ynb, col, col_len);
    kc_conv2d_bwd(&g, X, W, dY, dW, db, dX, col, col_len);

    float *gX = dev_from(X, nx * 4), *gW = dev_from(W, nw * 4);
    float *gb = dev_from(b, (size_t)f * 4), *gdY = dev_from(dY, ny * 4);
    float *gcol = dev_from(NULL, col_len * 4), *gY = dev_from(NULL, ny * 4);
    float *gdW = dev_from(NULL, nw * 4), *gdb = dev_from(NULL, (size_t)f * 4);
    float *gdX = dev_from(NULL, nx * 4);
    int rc = kg_conv2d_fwd(H, &gg, gX, gW, gb, gY, gcol, col_len, S);
    CHECKF(rc == 0, "kg_conv2d_fwd %s: %s", shape, kg_last_error());
    expect_gemm("conv2d_fwd Y", shape, ny, Y, gY);
    rc = kg_conv2d_fwd(H, &gg, gX, gW, NULL, gY, gcol, col_len, S);
    CHECKF(rc == 0, "kg_conv2d_fwd(b NULL) %s: %s", shape, kg_last_error());
    expect_gemm("conv2d_fwd Y (no bias)", shape, ny, Ynb, gY);
    /* the fused relu: Y through relu */
    {
        kops_conv2d_t gr = gg;
        gr.relu = 1;
        float *Yr = fill(ny, 0, 0);
        kc_relu_fwd(ny, Y, Yr);
        rc = kg_conv2d_fwd(H, &gr, gX, gW, gb, gY, gcol, col_len, S);
        CHECKF(rc == 0, "kg_conv2d_fwd(relu) %s: %s", shape, kg_last_error());
        expect_gemm("conv2d_fwd Y (relu)", shape, ny, Yr, gY);
        free(Yr);
    }

    /* Garbage first: the backward pass must overwrite, not accumulate. */
    CHECK(kg_memset(gdX, 0x7f, nx * 4, S) == 0);
    CHECK(kg_memset(gdW, 0x7f, nw * 4, S) == 0);
    rc = kg_conv2d_bwd(H, &gg, gX, gW, gdY, gdW, NULL, NULL, gcol, col_len, S);
    CHECKF(rc == 0, "kg_conv2d_bwd(db, dX NULL) %s: %s", shape,
           kg_last_error());
    expect_gemm("conv2d_bwd dW (no dX)", shape, nw, dW, gdW);
    rc = kg_conv2d_bwd(H, &gg, gX, gW, gdY, gdW, gdb, gdX, gcol, col_len, S);
    CHECKF(rc == 0, "kg_conv2d_bwd %s: %s", shape, kg_last_error());
    expect_gemm("conv2d_bwd dW", shape, nw, dW, gdW);
    expect_gemm("conv2d_bwd dX", shape, nx, dX, gdX);
    expect_colsum("conv2d_bwd db", (size_t)f, db, gdb);
    /* col_ready: a forward pass whose workspace held the whole batch, then
     * a backward pass that reuses its im2col: the same results. */
    if (col_len >= kg_conv2d_col_len(&gg) * (size_t)n) {
        kops_conv2d_t ready = gg;
        ready.col_ready = 1;
        CHECK(kg_conv2d_fwd(H, &gg, gX, gW, gb, gY, gcol, col_len, S) == 0);
        CHECK(kg_memset(gdX, 0x7f, nx * 4, S) == 0);
        rc = kg_conv2d_bwd(H, &ready, gX, gW, gdY, gdW, gdb, gdX, gcol,
                           col_len, S);
        CHECKF(rc == 0, "kg_conv2d_bwd(col_ready) %s: %s", shape,
               kg_last_error());
        expect_gemm("conv2d_bwd dW (col_ready)", shape, nw, dW, gdW);
        expect_gemm("conv2d_bwd dX (col_ready)", shape, nx, dX, gdX);
    }

    /* through the layer's relu: dY masked in place by the relu's output,
     * db from the masked values, then the backward */
    {
        float *Yr = fill(ny, 0, 0), *dYr = fill(ny, 0, 0);
        float *dWr = fill(nw, 0, 0), *dbr = fill(f, 0, 0), *dXr = fill(nx, 0, 0);
        kc_relu_fwd(ny, Y, Yr);
        memcpy(dYr, dY, ny * 4);
        kc_conv2d_bwd_relu(&g, X, W, Yr, dYr, dWr, dbr, dXr, col, col_len);
        float *gYr = dev_from(Yr, ny * 4), *gdYr = dev_from(dY, ny * 4);
        CHECK(kg_memset(gdX, 0x7f, nx * 4, S) == 0);
        rc = kg_conv2d_bwd_relu(H, &gg, gX, gW, gYr, gdYr, gdW, gdb, gdX,
                                gcol, col_len, S);
        CHECKF(rc == 0, "kg_conv2d_bwd_relu %s: %s", shape, kg_last_error());
        expect_elem("conv2d_bwd_relu dY", ny, dYr, gdYr);
        expect_gemm("conv2d_bwd_relu dW", shape, nw, dWr, gdW);
        expect_gemm("conv2d_bwd_relu dX", shape, nx, dXr, gdX);
        expect_colsum("conv2d_bwd_relu db", (size_t)f, dbr, gdb);
        free(Yr), free(dYr), free(dWr), free(dbr), free(dXr);
        dev_free(gYr), dev_free(gdYr);
    }

    /* from a 2x2 max pooling of the relu's output, pooled in one call */
    if (g.oh >= 2 && g.ow >= 2) {
        kops_pool2d_t pg = { n, g.oh, g.ow, f, 2, 2, 2, 2, (g.oh - 2) / 2 + 1,
                             (g.ow - 2) / 2 + 1 };
        size_t np = (size_t)n * pg.oh * pg.ow * f;
        float *Yr = fill(ny, 0, 0), *P = fill(np, 0, 0), *dP = fill(np, -1, 1);
        float *dYp = fill(ny, 0, 0), *dWp = fill(nw, 0, 0);
        float *dbp = fill(f, 0, 0), *dXp = fill(nx, 0, 0);
        int32_t *am = malloc(np ? np * sizeof *am : 1);
        kc_relu_fwd(ny, Y, Yr);
        kc_maxpool2d_fwd(&pg, Yr, P, am);
        kc_conv2d_bwd_pooled(&g, &pg, n, dP, am, P, X, W, dYp, dWp, dbp, dXp,
                             col, col_len);
        float *gP = dev_from(P, np * 4), *gdP = dev_from(dP, np * 4);
        int32_t *gam = dev_from(am, np * sizeof *am);
        float *gdYp = dev_from(NULL, ny * 4);
        CHECK(kg_memset(gdX, 0x7f, nx * 4, S) == 0);
        rc = kg_conv2d_bwd_pooled(H, &gg, &pg, n, gdP, gam, gP, gX, gW, gdYp,
                                  gdW, gdb, gdX, gcol, col_len, S);
        CHECKF(rc == 0, "kg_conv2d_bwd_pooled %s: %s", shape,
               kg_last_error());
        expect_elem("conv2d_bwd_pooled dY", ny, dYp, gdYp);
        expect_gemm("conv2d_bwd_pooled dW", shape, nw, dWp, gdW);
        expect_gemm("conv2d_bwd_pooled dX", shape, nx, dXp, gdX);
        expect_colsum("conv2d_bwd_pooled db", (size_t)f, dbp, gdb);
        free(Yr), free(P), free(dP), free(dYp), free(dWp), free(dbp);
        free(dXp), free(am);
        dev_free(gP), dev_free(gdP), dev_free(gam), dev_free(gdYp);
    }

    float *ptrs[] = { X, W, b, dY, col, Y, Ynb, dW, db, dX };
    for (size_t i = 0; i < sizeof ptrs / sizeof *ptrs; i++)
        free(ptrs[i]);
    float *gptrs[] = { gX, gW, gb, gdY, gcol, gY, gdW, gdb, gdX };
    for (size_t i = 0; i < sizeof gptrs / sizeof *gptrs; i++)
        dev_free(gptrs[i]);
}

/* ---- mixed_bfloat16 ---------------------------------------------------- */

/* x rounded to bf16 (kc_bf16_round), as floats. */
static float *bf16_copy(const float *x, size_t n)
{
    float *y = fill(n, 0, 0);
    kc_bf16_round(n, x, y);
    return y;
}

static void expect_bf16(const char *what, const char *shape, size_t n,
                        const float *want, const float *d)
{
    expect_norm(what, shape, n, want, d, 5e-4);
}

static void test_dense_bf16(int m, int k, int n)
{
    size_t mk = (size_t)m * k, kn = (size_t)k * n, mn = (size_t)m * n;
    char shape[64];
    snprintf(shape, sizeof shape, "%dx%dx%d", m, k, n);
    float *X = fill(mk, -1, 1), *W = fill(kn, -1, 1), *b = fill(n, -1, 1);
    float *dY = fill(mn, -1, 1);
    float *Xr = bf16_copy(X, mk), *Wr = bf16_copy(W, kn);
    float *dYr = bf16_copy(dY, mn);
    float *Y = fill(mn, 0, 0), *dW = fill(kn, 0, 0), *db = fill(n, 0, 0);
    float *dX = fill(mk, 0, 0), *db32 = fill(n, 0, 0);
    kc_dense_fwd(m, k, n, Xr, Wr, b, Y);
    kc_dense_bwd(m, k, n, Xr, Wr, dYr, dW, db, dX);
    kc_bias_grad(m, n, dY, db32);             /* db from the fp32 dY */
    size_t wl = kops_dense_bf16_gpu_len(m, k, n);
    float *gX = dev_from(X, mk * 4), *gW = dev_from(W, kn * 4);
    float *gb = dev_from(b, (size_t)n * 4), *gdY = dev_from(dY, mn * 4);
    float *gY = dev_from(NULL, mn * 4), *gdW = dev_from(NULL, kn * 4);
    float *gdb = dev_from(NULL, (size_t)n * 4), *gdX = dev_from(NULL, mk * 4);
    float *gw = dev_from(NULL, wl * 4);
    int rc = kg_dense_fwd_bf16(H, m, k, n, gX, gW, gb, gY, gw, wl, S);
    CHECKF(rc == 0, "kg_dense_fwd_bf16 %s: %s", shape, kg_last_error());
    expect_bf16("dense_fwd_bf16 Y", shape, mn, Y, gY);
    rc = kg_dense_bwd_bf16(H, m, k, n, gX, gW, gdY, gdW, gdb, gdX, gw, wl, S);
    CHECKF(rc == 0, "kg_dense_bwd_bf16 %s: %s", shape, kg_last_error());
    expect_bf16("dense_bwd_bf16 dW", shape, kn, dW, gdW);
    expect_bf16("dense_bwd_bf16 dX", shape, mk, dX, gdX);
    expect_colsum("dense_bwd_bf16 db", (size_t)n, db32, gdb);
    if (m > 0 && n > 0 && wl > 64)      /* a workspace too short: refused */
        CHECK(kg_dense_fwd_bf16(H, m, k, n, gX, gW, gb, gY, gw, wl - 64, S)
              == KG_EINVAL);
    float *ptrs[] = { X, W, b, dY, Xr, Wr, dYr, Y, dW, db, dX, db32 };
    for (size_t i = 0; i < sizeof ptrs / sizeof *ptrs; i++)
        free(ptrs[i]);
    float *gptrs[] = { gX, gW, gb, gdY, gY, gdW, gdb, gdX, gw };
    for (size_t i = 0; i < sizeof gptrs / sizeof *gptrs; i++)
        dev_free(gptrs[i]);
}

/* One conv2d geometry in bf16 (the fused relu forward too), with a
 * workspace of `group` images (and some floats more, which must not
 * count). */
static void test_conv_bf16(int n, int h, int w, int c, int kh, int kw, int f,
                           int sh, int sw, int pt, int pl, int pb, int pr,
                           int group)
{
    kops_conv2d_t g = { n, h, w, c, kh, kw, f, sh, sw, pt, pl,
                         (h + pt + pb - kh) / sh + 1,
                         (w + pl + pr - kw) / sw + 1, 0, 0 };
    char shape[128];
    snprintf(shape, sizeof shape,
             "bf16 n%d %dx%dx%d k%dx%d f%d s%d,%d pad %d,%d,%d,%d group %d",
             n, h, w, c, kh, kw, f, sh, sw, pt, pl, pb, pr, group);
    size_t nx = (size_t)n * h * w * c, nw = (size_t)kh * kw * c * f;
    size_t ny = (size_t)n * g.oh * g.ow * f, cl = kc_conv2d_col_len(&g);
    size_t wl = kops_conv2d_bf16_gpu_len(&g, (size_t)group) + 100;
    float *X = fill(nx, -1, 1), *W = fill(nw, -1, 1), *b = fill(f, -1, 1);
    float *dY = fill(ny, -1, 1), *col = fill(cl, 0, 0);
    float *Xr = bf16_copy(X, nx), *Wr = bf16_copy(W, nw);
    float *dYr = bf16_copy(dY, ny);
    float *Y = fill(ny, 0, 0), *Yr = fill(ny, 0, 0), *dW = fill(nw, 0, 0);
    float *db = fill(f, 0, 0), *dX = fill(nx, 0, 0);
    kc_conv2d_fwd(&g, Xr, Wr, b, Y, col, cl);
    kc_relu_fwd(ny, Y, Yr);
    kc_conv2d_bwd(&g, Xr, Wr, dYr, dW, NULL, dX, col, cl);
    kc_bias_grad(n * g.oh * g.ow, f, dY, db);

    float *gX = dev_from(X, nx * 4), *gW = dev_from(W, nw * 4);
    float *gb = dev_from(b, (size_t)f * 4), *gdY = dev_from(dY, ny * 4);
    float *gw = dev_from(NULL, wl * 4), *gY = dev_from(NULL, ny * 4);
    float *gdW = dev_from(NULL, nw * 4), *gdb = dev_from(NULL, (size_t)f * 4);
    float *gdX = dev_from(NULL, nx * 4);
    int rc = kg_conv2d_fwd_bf16(H, &g, gX, gW, gb, gY, gw, wl, S);
    CHECKF(rc == 0, "kg_conv2d_fwd_bf16 %s: %s", shape, kg_last_error());
    expect_bf16("conv2d_fwd_bf16 Y", shape, ny, Y, gY);
    kops_conv2d_t gr = g;
    gr.relu = 1;
    rc = kg_conv2d_fwd_bf16(H, &gr, gX, gW, gb, gY, gw, wl, S);
    CHECKF(rc == 0, "kg_conv2d_fwd_bf16(relu) %s: %s", shape,
           kg_last_error());
    expect_bf16("conv2d_fwd_bf16 Y (relu)", shape, ny, Yr, gY);
    /* garbage first: the backward pass overwrites */
    CHECK(kg_memset(gdX, 0x7f, nx * 4, S) == 0);
    CHECK(kg_memset(gdW, 0x7f, nw * 4, S) == 0);
    rc = kg_conv2d_bwd_bf16(H, &g, gX, gW, gdY, gdW, gdb, gdX, gw, wl, S);
    CHECKF(rc == 0, "kg_conv2d_bwd_bf16 %s: %s", shape, kg_last_error());
    expect_bf16("conv2d_bwd_bf16 dW", shape, nw, dW, gdW);
    expect_bf16("conv2d_bwd_bf16 dX", shape, nx, dX, gdX);
    expect_colsum("conv2d_bwd_bf16 db", (size_t)f, db, gdb);
    rc = kg_conv2d_bwd_bf16(H, &g, gX, gW, gdY, gdW, NULL, NULL, gw, wl, S);
    CHECKF(rc == 0, "kg_conv2d_bwd_bf16(db, dX NULL) %s: %s", shape,
           kg_last_error());
    expect_bf16("conv2d_bwd_bf16 dW (no dX)", shape, nw, dW, gdW);
    CHECK(kg_conv2d_fwd_bf16(H, &g, gX, gW, gb, gY, gw,
                             kops_conv2d_bf16_gpu_len(&g, 1) - 1, S) ==
          KG_EINVAL);

    float *ptrs[] = { X, W, b, dY, col, Xr, Wr, dYr, Y, Yr, dW, db, dX };
    for (size_t i = 0; i < sizeof ptrs / sizeof *ptrs; i++)
        free(ptrs[i]);
    float *gptrs[] = { gX, gW, gb, gdY, gw, gY, gdW, gdb, gdX };
    for (size_t i = 0; i < sizeof gptrs / sizeof *gptrs; i++)
        dev_free(gptrs[i]);
}

/* n = 0: nothing forward; backward writes zeros to dW and db, as kc. */
static void test_conv_empty(void)
{
    kops_conv2d_t gg = { 0, 4, 4, 2, 3, 3, 5, 1, 1, 0, 0, 2, 2, 0, 0 };
    size_t nw = 3 * 3 * 2 * 5;
    float *gdW = dev_from(NULL, nw * 4), *gdb = dev_from(NULL, 5 * 4);
    float *got = fill(nw, 1, 1);
    CHECK(kg_memset(gdW, 0x7f, nw * 4, S) == 0);
    CHECK(kg_memset(gdb, 0x7f, 5 * 4, S) == 0);
    CHECK(kg_conv2d_fwd(H, &gg, NULL, NULL, NULL, NULL, NULL, 0, S) == 0);
    CHECK(kg_conv2d_bwd(H, &gg, NULL, NULL, NULL, gdW, gdb, NULL, NULL, 0,
                        S) == 0);
    to_host(got, gdW, nw * 4);
    int zero = 1;
    for (size_t i = 0; i < nw; i++)
        zero &= got[i] == 0.0f;
    to_host(got, gdb, 5 * 4);
    for (size_t i = 0; i < 5; i++)
        zero &= got[i] == 0.0f;
    CHECKF(zero, "conv2d_bwd n=0: dW and db not zeroed");
    free(got);
    dev_free(gdW), dev_free(gdb);
}

/* ---- maxpool2d --------------------------------------------------------------------- */
/* ties: small integers, so windows often hold several maxima and "first in
 * row-major window order" decides; a few NaNs too. */
static void test_pool(int n, int h, int w, int c, int ph, int pw, int sh,
                      int sw, int ties)
{
    kops_pool2d_t g = { n, h, w, c, ph, pw, sh, sw, (h - ph) / sh + 1,
                        (w - pw) / sw + 1 };
    kops_pool2d_t gg = g;
    size_t nx = (size_t)n * h * w * c, ny = (size_t)n * g.oh * g.ow * c;
    float *X = fill(nx, -1, 1), *dY = fill(ny, -1, 1);
    if (ties) {
        for (size_t i = 0; i < nx; i++)
            X[i] = (float)(rnd() % 3);
        for (size_t i = 0; i < nx; i += 37)
            X[i] = NAN;
    }
    float *Y = fill(ny, 0, 0), *dX = fill(nx, 0, 0);
    float *gotY = fill(ny, 0, 0), *gotdX = fill(nx, 0, 0);
    int32_t *am = malloc(ny ? ny * sizeof *am : 1);
    int32_t *gotam = malloc(ny ? ny * sizeof *am : 1);
    kc_maxpool2d_fwd(&g, X, Y, am);
    kc_maxpool2d_bwd(&g, dY, am, dX);

    float *gX = dev_from(X, nx * 4), *gdY = dev_from(dY, ny * 4);
    float *gY = dev_from(NULL, ny * 4), *gdX = dev_from(NULL, nx * 4);
    int32_t *gam = dev_from(NULL, ny * sizeof *gam);
    CHECK(kg_memset(gdX, 0x7f, nx * 4, S) == 0);
    int rc = kg_maxpool2d_fwd(&gg, gX, gY, gam, S);
    CHECKF(rc == 0, "kg_maxpool2d_fwd: %s", kg_last_error());
    to_host(gotY, gY, ny * 4);
    to_host(gotam, gam, ny * sizeof *gam);
    CHECKF(same_bits(gotY, Y, ny * 4) && same_bits(gotam, am, ny * 4),
           "maxpool2d_fwd n%d %dx%dx%d p%dx%d s%d,%d ties %d: Y or argmax "
           "differ", n, h, w, c, ph, pw, sh, sw, ties);
    rc = kg_maxpool2d_bwd(&gg, gdY, gam, gdX, S);
    CHECKF(rc == 0, "kg_maxpool2d_bwd: %s", kg_last_error());
    to_host(gotdX, gdX, nx * 4);
    CHECKF(same_bits(gotdX, dX, nx * 4),
           "maxpool2d_bwd n%d %dx%dx%d p%dx%d s%d,%d ties %d: dX differs",
           n, h, w, c, ph, pw, sh, sw, ties);
    /* Into a relu (X's ties hold zeros and negatives: outputs Y <= 0) */
    kc_maxpool2d_bwd_relu(&g, dY, am, Y, dX);
    CHECK(kg_memset(gdX, 0x7f, nx * 4, S) == 0);
    rc = kg_maxpool2d_bwd_relu(&gg, gdY, gam, gY, gdX, S);
    CHECKF(rc == 0, "kg_maxpool2d_bwd_relu: %s", kg_last_error());
    to_host(gotdX, gdX, nx * 4);
    CHECKF(same_bits(gotdX, dX, nx * 4),
           "maxpool2d_bwd_relu n%d %dx%dx%d p%dx%d s%d,%d ties %d: dX "
           "differs", n, h, w, c, ph, pw, sh, sw, ties);
    free(X), free(dY), free(Y), free(dX), free(gotY), free(gotdX);
    free(am), free(gotam);
    dev_free(gX), dev_free(gdY), dev_free(gY), dev_free(gdX), dev_free(gam);
}

/* ---- avgpool2d --------------------------------------------------------------------- */
/* Forward and backward: the CPU's bits (the same tap order, one IEEE
 * division); every input of dX written, 0 in the gaps. */
static void test_avgpool(int n, int h, int w, int c, int ph, int pw, int sh,
                         int sw)
{
    kops_pool2d_t g = { n, h, w, c, ph, pw, sh, sw, (h - ph) / sh + 1,
                        (w - pw) / sw + 1 };
    size_t nx = (size_t)n * h * w * c, ny = (size_t)n * g.oh * g.ow * c;
    float *X = fill(nx, -1, 1), *dY = fill(ny, -1, 1);
    float *Y = fill(ny, 0, 0), *dX = fill(nx, 0, 0);
    float *gotY = fill(ny, 0, 0), *gotdX = fill(nx, 0, 0);
    kc_avgpool2d_fwd(&g, X, Y);
    kc_avgpool2d_bwd(&g, dY, dX);

    float *gX = dev_from(X, nx * 4), *gdY = dev_from(dY, ny * 4);
    float *gY = dev_from(NULL, ny * 4), *gdX = dev_from(NULL, nx * 4);
    CHECK(kg_memset(gdX, 0x7f, nx * 4, S) == 0);
    int rc = kg_avgpool2d_fwd(&g, gX, gY, S);
    CHECKF(rc == 0, "kg_avgpool2d_fwd: %s", kg_last_error());
    to_host(gotY, gY, ny * 4);
    CHECKF(same_bits(gotY, Y, ny * 4),
           "avgpool2d_fwd n%d %dx%dx%d p%dx%d s%d,%d: Y differs", n, h, w, c,
           ph, pw, sh, sw);
    rc = kg_avgpool2d_bwd(&g, gdY, gdX, S);
    CHECKF(rc == 0, "kg_avgpool2d_bwd: %s", kg_last_error());
    to_host(gotdX, gdX, nx * 4);
    CHECKF(same_bits(gotdX, dX, nx * 4),
           "avgpool2d_bwd n%d %dx%dx%d p%dx%d s%d,%d: dX differs", n, h, w, c,
           ph, pw, sh, sw);
    free(X), free(dY), free(Y), free(dX), free(gotY), free(gotdX);
    dev_free(gX), dev_free(gdY), dev_free(gY), dev_free(gdX);
}

/* ---- dropout ----------------------------------------------------------------------- */
/* The GPU's mask and values equal the CPU's bit for bit, in place too. */
static void test_dropout(size_t n, float rate, uint64_t seed, uint64_t first)
{
    float *x = fill(n, -1, 1), *y = fill(n, 0, 0), *dx = fill(n, 0, 0);
    float *got = fill(n, 0, 0);
    kc_dropout_fwd(n, x, y, rate, seed, first);
    kc_dropout_bwd(n, x, dx, rate, seed, first);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        kept += (size_t)kc_dropout_keep(seed, first + i, rate);

    float *gx = dev_from(x, n * 4), *gy = dev_from(NULL, n * 4);
    CHECK(kg_dropout_fwd(n, gx, gy, rate, seed, first, S) == 0);
    to_host(got, gy, n * 4);
    CHECKF(same_bits(got, y, n * 4),
           "dropout_fwd n=%zu rate %g seed %llu first %llu: differs", n, rate,
           (unsigned long long)seed, (unsigned long long)first);
    /* The mask itself is sane: about 1 - rate of the elements are kept. */
    if (n >= 1000)
        CHECKF(fabs((double)kept / (double)n - (1.0 - rate)) < 0.05,
               "dropout n=%zu rate %g: kept %zu", n, rate, kept);
    CHECK(kg_dropout_bwd(n, gx, gx, rate, seed, first, S) == 0);
    to_host(got, gx, n * 4);
    CHECKF(same_bits(got, dx, n * 4), "dropout_bwd in place n=%zu rate %g: "
           "differs", n, rate);
    free(x), free(y), free(dx), free(got);
    dev_free(gx), dev_free(gy);
}

/* ---- embeddings: gather, dense and sparse gradient, bit for bit ------------ */
static void test_emb(int m, int k, int dim, int vocab, int comb)
{
    size_t n = (size_t)m * k, out = (size_t)m * (comb ? 1 : k) * dim;
    size_t tab = (size_t)vocab * dim;
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    for (size_t i = 0; i < n; i++)        /* -1 .. vocab - 1: padding, dups */
        ids[i] = (int32_t)(rnd() % (uint32_t)(vocab + 1)) - 1;
    float *W = fill(tab, -1, 1), *dy = fill(out, -1, 1);
    /* got holds the forward's output, then the table's gradient */
    float *y = fill(out, 0, 0), *dW = fill(tab, 0, 0);
    float *got = fill(tab > out ? tab : out, 0, 0);
    float *rows = fill(n * dim, 0, 0), *grows = fill(n * dim, 0, 0);
    int32_t *work = malloc(KOPS_EMB_WORK(n ? n : 1) * sizeof *work);
    int32_t *uniq = malloc((n ? n : 1) * sizeof *uniq);
    int32_t *guniq = malloc((n ? n : 1) * sizeof *guniq), nu = 0, gnu = -1;
    kc_emb_fwd(m, k, dim, vocab, comb, ids, W, y);
    kc_emb_bwd(m, k, dim, vocab, comb, ids, dy, dW, work);
    kc_emb_sparse(m, k, dim, vocab, comb, ids, dy, uniq, rows, &nu, work);

    int32_t *gids = dev_from(ids, n * 4), *gwork = dev_from(NULL,
                                                           KOPS_EMB_WORK(n) * 4);
    int32_t *gu = dev_from(NULL, n * 4), *gn = dev_from(NULL, 4);
    float *gW = dev_from(W, tab * 4), *gdy = dev_from(dy, out * 4);
    float *gy = dev_from(NULL, out * 4), *gdW = dev_from(NULL, tab * 4);
    float *gr = dev_from(NULL, n * dim * 4);
    CHECK(kg_emb_fwd(m, k, dim, vocab, comb, gids, gW, gy, S) == 0);
    to_host(got, gy, out * 4);
    CHECKF(same_bits(got, y, out * 4), "emb_fwd %dx%d dim %d vocab %d comb "
           "%d: differs", m, k, dim, vocab, comb);
    CHECK(kg_emb_bwd(m, k, dim, vocab, comb, gids, gdy, gdW, gwork, S) == 0);
    to_host(got, gdW, tab * 4);
    CHECKF(same_bits(got, dW, tab * 4), "emb_bwd %dx%d dim %d vocab %d comb "
           "%d: differs", m, k, dim, vocab, comb);
    CHECK(kg_emb_sparse(m, k, dim, vocab, comb, gids, gdy, gu, gr, gn, gwork,
                        S) == 0);
    to_host(&gnu, gn, 4);
    CHECKF(gnu == nu, "emb_sparse: %d ids, CPU %d", gnu, nu);
    if (gnu == nu) {
        to_host(guniq, gu, (size_t)nu * 4);
        to_host(grows, gr, (size_t)nu * dim * 4);
        CHECKF(same_bits(guniq, uniq, (size_t)nu * 4) &&
                   same_bits(grows, rows, (size_t)nu * dim * 4),
               "emb_sparse %dx%d dim %d comb %d: differs", m, k, dim, comb);
    }
    free(ids), free(W), free(dy), free(y), free(dW), free(got), free(rows);
    free(grows), free(work), free(uniq), free(guniq);
    dev_free(gids), dev_free(gwork), dev_free(gu), dev_free(gn), dev_free(gW);
    dev_free(gdy), dev_free(gy), dev_free(gdW), dev_free(gr);
}

/* ---- tanh, sigmoid ------------------------------------------------------------------ */
typedef void (*cpu_act_fn)(size_t, const float *, float *);
typedef void (*cpu_act_bwd_fn)(size_t, const float *, const float *, float *);
typedef int (*gpu_act_fn)(size_t, const float *, float *, kg_stream_t);
typedef int (*gpu_act_bwd_fn)(size_t, const float *, const float *, float *,
                              kg_stream_t);

/* Forward within ACT_ULPS of libm (CUDA's tanhf / expf are within 2 ulps,
 * glibc's within 1, and sigmoid rounds twice more); backward (from the
 * CPU's y, so both sides see the same input) as every elementwise kernel. */
#define ACT_ULPS 6
static void test_act(const char *name, cpu_act_fn cf, cpu_act_bwd_fn cb,
                     gpu_act_fn gf, gpu_act_bwd_fn gb, size_t n)
{
    float *x = fill(n, -10, 10), *dy = fill(n, -1, 1);
    static const float special[] = { 0.0f, -0.0f, 1e-30f, -1e-6f, 20.0f,
                                     -20.0f, 100.0f, -100.0f, NAN, INFINITY,
                                     -INFINITY };
    for (size_t i = 0; i < n && i < sizeof special / sizeof *special; i++)
        x[i] = special[i];
    float *y = fill(n, 0, 0), *dx = fill(n, 0, 0), *got = fill(n, 0, 0);
    cf(n, x, y);
    cb(n, y, dy, dx);
    float *gx = dev_from(x, n * 4), *gy = dev_from(NULL, n * 4);
    float *gdy = dev_from(dy, n * 4), *gdx = dev_from(NULL, n * 4);
    CHECK(gf(n, gx, gy, S) == 0);
    to_host(got, gy, n * 4);
    int64_t worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        if (ulps(got[i], y[i]) > worst)
            worst = ulps(got[i], y[i]), at = i;
    CHECKF(worst <= ACT_ULPS, "%s_fwd n=%zu: %lld ulps at x=%.9g (%.9g, want %.9g)",
           name, n, (long long)worst, n ? x[at] : 0.0f, n ? got[at] : 0.0f,
           n ? y[at] : 0.0f);
    CHECK(gf(n, gx, gx, S) == 0);                          /* y == x */
    to_host(got, gx, n * 4);
    worst = 0;
    for (size_t i = 0; i < n; i++)
        worst = ulps(got[i], y[i]) > worst ? ulps(got[i], y[i]) : worst;
    CHECKF(worst <= ACT_ULPS, "%s_fwd in place n=%zu: %lld ulps", name, n,
           (long long)worst);

    CHECK(kg_memcpy_h2d(gy, y, n * 4, S) == 0);
    char what[48];
    snprintf(what, sizeof what, "%s_bwd", name);
    CHECK(gb(n, gy, gdy, gdx, S) == 0);
    expect_elem(what, n, dx, gdx);
    snprintf(what, sizeof what, "%s_bwd in place", name);
    CHECK(gb(n, gy, gdy, gdy, S) == 0);                    /* dx == dy */
    expect_elem(what, n, dx, gdy);
    free(x), free(dy), free(y), free(dx), free(got);
    dev_free(gx), dev_free(gy), dev_free(gdy), dev_free(gdx);
}

/* ---- the activation layers' kernels ---------------------------------------------- */
/* leaky_relu: one compare and one multiply, the CPU's bits (0 and -0
 * among the inputs), in place too. No NaN here: a product with a NaN is
 * NaN on both sides, but x86 keeps the input's payload and a GPU gives its
 * canonical NaN (test_kc_act checks that NaN stays NaN). */
static void test_leaky(size_t n, float alpha)
{
    float *x = fill(n, -2, 2), *dy = fill(n, -1, 1);
    if (n > 3) {
        x[2] = 0.0f;
        x[3] = -0.0f;
    }
    float *y = fill(n, 0, 0), *dx = fill(n, 0, 0);
    kc_leaky_relu_fwd(n, x, y, alpha);
    kc_leaky_relu_bwd(n, x, dy, dx, alpha);
    float *gx = dev_from(x, n * 4), *gy = dev_from(NULL, n * 4);
    float *gdy = dev_from(dy, n * 4), *gdx = dev_from(NULL, n * 4);
    CHECK(kg_leaky_relu_fwd(n, gx, gy, alpha, S) == 0);
    expect_elem("leaky_relu_fwd", n, y, gy);
    CHECK(kg_leaky_relu_bwd(n, gx, gdy, gdx, alpha, S) == 0);
    expect_elem("leaky_relu_bwd", n, dx, gdx);
    CHECK(kg_leaky_relu_bwd(n, gx, gdy, gdy, alpha, S) == 0);  /* dx == dy */
    expect_elem("leaky_relu_bwd in place", n, dx, gdy);
    CHECK(kg_leaky_relu_fwd(n, gx, gx, alpha, S) == 0);       /* y == x */
    expect_elem("leaky_relu_fwd in place", n, y, gx);
    free(x), free(dy), free(y), free(dx);
    dev_free(gx), dev_free(gy), dev_free(gdy), dev_free(gdx);
}

/* gelu: CUDA's erfcf (4 ulps) and expf (2 ulps) against glibc's, in the
 * same expressions: forward within 1e-5 relative (inputs in [-10, 10] keep
 * Phi normal: no denormal ulps), backward within 1e-6 absolute where the
 * slope crosses 0 (x near -0.75, a sum of two terms of 0.23). */
static void test_gelu(size_t n)
{
    float *x = fill(n, -10, 10), *dy = fill(n, -1, 1);
    static const float special[] = { 0.0f, -0.0f, 1e-30f, -0.7518f, 20.0f,
                                     -20.0f, 100.0f, -100.0f, NAN, INFINITY,
                                     -INFINITY };
    for (size_t i = 0; i < n && i < sizeof special / sizeof *special; i++)
        x[i] = special[i];
    float *y = fill(n, 0, 0), *dx = fill(n, 0, 0);
    kc_gelu_fwd(n, x, y);
    kc_gelu_bwd(n, x, dy, dx);
    float *gx = dev_from(x, n * 4), *gy = dev_from(NULL, n * 4);
    float *gdy = dev_from(dy, n * 4), *gdx = dev_from(NULL, n * 4);
    CHECK(kg_gelu_fwd(n, gx, gy, S) == 0);
    double e = dev_rel(y, gy, n, 1e-30);
    CHECKF(e <= 1e-5, "gelu_fwd n=%zu: relative error %g", n, e);
    CHECK(kg_gelu_bwd(n, gx, gdy, gdx, S) == 0);
    e = dev_rel(dx, gdx, n, 0.1);
    CHECKF(e <= 1e-5, "gelu_bwd n=%zu: error %g", n, e);
    CHECK(kg_gelu_bwd(n, gx, gdy, gdy, S) == 0);              /* dx == dy */
    e = dev_rel(dx, gdy, n, 0.1);
    CHECKF(e <= 1e-5, "gelu_bwd in place n=%zu: error %g", n, e);
    CHECK(kg_gelu_fwd(n, gx, gx, S) == 0);                    /* y == x */
    e = dev_rel(y, gx, n, 1e-30);
    CHECKF(e <= 1e-5, "gelu_fwd in place n=%zu: relative error %g", n, e);
    free(x), free(dy), free(y), free(dx);
    dev_free(gx), dev_free(gy), dev_free(gdy), dev_free(gdx);
}

/* softmax over rows of c: forward within 1e-5 relative (expf's ulps, the
 * same summation order); backward from the CPU's y, so both sides see the
 * same input: an elementwise result (the same dot product in the same
 * order, the same bits without FMA). */
static void test_softmax(int m, int c, float spread)
{
    size_t n = (size_t)m * (size_t)c;
    float *x = fill(n, -spread, spread), *dy = fill(n, -1, 1);
    float *y = fill(n, 0, 0), *dx = fill(n, 0, 0);
    kc_softmax_fwd(m, c, x, y);
    kc_softmax_bwd(m, c, y, dy, dx);
    float *gx = dev_from(x, n * 4), *gy = dev_from(NULL, n * 4);
    float *gdy = dev_from(dy, n * 4), *gdx = dev_from(NULL, n * 4);
    CHECK(kg_softmax_fwd(m, c, gx, gy, S) == 0);
    double e = dev_rel(y, gy, n, 1e-30);
    CHECKF(e <= 1e-5, "softmax_fwd %dx%d: relative error %g", m, c, e);
    CHECK(kg_memcpy_h2d(gy, y, n * 4, S) == 0);
    char what[64];
    snprintf(what, sizeof what, "softmax_bwd %dx%d", m, c);
    CHECK(kg_softmax_bwd(m, c, gy, gdy, gdx, S) == 0);
    expect_elem(what, n, dx, gdx);
    snprintf(what, sizeof what, "softmax_bwd in place %dx%d", m, c);
    CHECK(kg_softmax_bwd(m, c, gy, gdy, gdy, S) == 0);        /* dx == dy */
    expect_elem(what, n, dx, gdy);
    CHECK(kg_softmax_fwd(m, c, gx, gx, S) == 0);              /* y == x */
    e = dev_rel(y, gx, n, 1e-30);
    CHECKF(e <= 1e-5, "softmax_fwd in place %dx%d: relative error %g", m, c,
           e);
    free(x), free(dy), free(y), free(dx);
    dev_free(gx), dev_free(gy), dev_free(gdy), dev_free(gdx);
}

/* ---- batchnorm, layernorm ------------------------------------------------------ */
/* Each op on the CPU's inputs against the CPU's result, 1e-6 relative and
 * the same bits where the CPU does not contract; the sums over rows (a
 * tree per channel on the GPU) within rounding, and the same bits when
 * asked twice; bn_stats the same bits from the same sums. */
static void expect_sums(const char *what, size_t n, const double *want,
                        const double *d)
{
    double *got = calloc(n ? n : 1, sizeof *got), worst = 0.0;
    to_host(got, d, n * sizeof *got);
    for (size_t i = 0; i < n; i++)
        worst = fmax(worst, fabs(got[i] - want[i]) / fmax(fabs(want[i]), 1.0));
    CHECKF(worst <= 1e-9, "%s: relative error %g", what, worst);
    free(got);
}

static void test_bn(size_t rows, int c)
{
    size_t n = rows * (size_t)c, nc = 2 * (size_t)c, sb = nc * sizeof(double);
    const float eps = 1e-3f, mom = 0.99f;
    float *x = fill(n, -2, 3), *dy = fill(n, -1, 1);
    float *gamma = fill(c, 0.5f, 1.5f), *beta = fill(c, -1, 1);
    float *mm = fill(c, -1, 1), *mv = fill(c, 0.5f, 2);
    float *mm0 = copy_of(mm, c), *mv0 = copy_of(mv, c);
    float *mean = fill(c, 0, 0), *invstd = fill(c, 0, 0), *y = fill(n, 0, 0);
    float *dg = fill(c, 0, 0), *db = fill(c, 0, 0), *dx = fill(n, 0, 0);
    double *sums = calloc(nc, sizeof *sums), *bsums = calloc(nc, sizeof *bsums);
    double *twice = calloc(nc, sizeof *twice);
    kc_bn_sums(rows, c, x, sums);
    kc_bn_stats(c, sums, (double)rows, eps, mom, mean, invstd, mm, mv);
    kc_bn_norm(rows, c, x, mean, invstd, gamma, beta, y);
    kc_bn_bwd_sums(rows, c, x, dy, mean, invstd, bsums, dg, db);
    kc_bn_bwd_dx(rows, c, x, dy, mean, invstd, gamma, bsums, (double)rows, dx);

    float *gx = dev_from(x, n * 4), *gdy = dev_from(dy, n * 4);
    float *ggamma = dev_from(gamma, c * 4), *gbeta = dev_from(beta, c * 4);
    float *gmm = dev_from(mm0, c * 4), *gmv = dev_from(mv0, c * 4);
    float *gmean = dev_from(mean, c * 4), *ginv = dev_from(invstd, c * 4);
    float *gy = dev_from(NULL, n * 4), *gdx = dev_from(NULL, n * 4);
    float *gdg = dev_from(NULL, c * 4), *gdb = dev_from(NULL, c * 4);
    double *gsums = dev_from(NULL, sb), *gcpu = dev_from(sums, sb);
    double *gbsums = dev_from(NULL, sb), *gbcpu = dev_from(bsums, sb);
    float *gm2 = dev_from(NULL, c * 4), *gi2 = dev_from(NULL, c * 4);
    char what[96];

    CHECK(kg_memset(gsums, 0x7f, sb, S) == 0);       /* written, not added */
    CHECK(kg_bn_sums(rows, c, gx, gsums, S) == 0);
    snprintf(what, sizeof what, "bn_sums %zux%d", rows, c);
    expect_sums(what, nc, sums, gsums);
    to_host(twice, gsums, sb);
    CHECK(kg_bn_sums(rows, c, gx, gsums, S) == 0);
    double *back = calloc(nc, sizeof *back);
    to_host(back, gsums, sb);
    CHECKF(same_bits(back, twice, sb), "%s: not deterministic", what);

    /* bn_stats from the CPU's sums: its bits, the moving update too. */
    CHECK(kg_bn_stats(c, gcpu, (double)rows, eps, mom, gm2, gi2, gmm, gmv,
                      S) == 0);
    snprintf(what, sizeof what, "bn_stats %zux%d", rows, c);
    float *got = fill(c, 0, 0);
    to_host(got, gm2, c * 4);
    CHECKF(same_bits(got, mean, c * 4), "%s: mean", what);
    to_host(got, gi2, c * 4);
    CHECKF(same_bits(got, invstd, c * 4), "%s: invstd", what);
    to_host(got, gmm, c * 4);
    CHECKF(same_bits(got, mm, c * 4), "%s: moving mean", what);
    to_host(got, gmv, c * 4);
    CHECKF(same_bits(got, mv, c * 4), "%s: moving variance", what);
    /* Inference (sums NULL, count 0) and no moving statistics. */
    float *im = fill(c, 0, 0), *ii = fill(c, 0, 0);
    kc_bn_stats(c, NULL, 0.0, eps, mom, im, ii, mm, mv);
    CHECK(kg_bn_stats(c, NULL, 0.0, eps, mom, gm2, gi2, gmm, gmv, S) == 0);
    to_host(got, gi2, c * 4);
    CHECKF(same_bits(got, ii, c * 4), "%s: inference invstd", what);
    CHECK(kg_bn_stats(c, gcpu, 0.0, eps, mom, gm2, gi2, gmm, gmv, S) == 0);
    to_host(got, gm2, c * 4);
    CHECKF(same_bits(got, im, c * 4), "%s: count 0 mean", what);
    kc_bn_stats(c, NULL, 0.0, eps, mom, im, ii, NULL, NULL);
    CHECK(kg_bn_stats(c, NULL, 0.0, eps, mom, gm2, gi2, NULL, NULL, S) == 0);
    to_host(got, gi2, c * 4);
    CHECKF(same_bits(got, ii, c * 4), "%s: no statistics", what);
    to_host(got, gmm, c * 4);
    CHECKF(same_bits(got, mm, c * 4), "%s: inference moved the mean", what);

    snprintf(what, sizeof what, "bn_norm %zux%d", rows, c);
    CHECK(kg_bn_norm(rows, c, gx, gmean, ginv, ggamma, gbeta, gy, S) == 0);
    expect_rel(what, n, y, gy, 1e-6);
    CHECK(kg_memset(gbsums, 0x7f, sb, S) == 0);
    CHECK(kg_bn_bwd_sums(rows, c, gx, gdy, gmean, ginv, gbsums, gdg, gdb,
                         S) == 0);
    snprintf(what, sizeof what, "bn_bwd_sums %zux%d", rows, c);
    expect_sums(what, nc, bsums, gbsums);
    CHECKF(dev_rel(dg, gdg, c, 1e-3) <= 1e-6, "%s: dgamma", what);
    CHECKF(dev_rel(db, gdb, c, 1e-3) <= 1e-6, "%s: dbeta", what);
    snprintf(what, sizeof what, "bn_bwd_dx %zux%d", rows, c);
    CHECK(kg_bn_bwd_dx(rows, c, gx, gdy, gmean, ginv, ggamma, gbcpu,
                       (double)rows, gdx, S) == 0);
    expect_rel(what, n, dx, gdx, 1e-6);
    snprintf(what, sizeof what, "bn_bwd_dx in place %zux%d", rows, c);
    CHECK(kg_bn_bwd_dx(rows, c, gx, gdy, gmean, ginv, ggamma, gbcpu,
                       (double)rows, gdy, S) == 0);          /* dx == dy */
    expect_rel(what, n, dx, gdy, 1e-6);
    free(x), free(dy), free(gamma), free(beta), free(mm), free(mv);
    free(mm0), free(mv0), free(mean), free(invstd), free(y), free(dg);
    free(db), free(dx), free(sums), free(bsums), free(twice), free(back);
    free(got), free(im), free(ii);
    dev_free(gx), dev_free(gdy), dev_free(ggamma), dev_free(gbeta);
    dev_free(gmm), dev_free(gmv), dev_free(gmean), dev_free(ginv);
    dev_free(gy), dev_free(gdx), dev_free(gdg), dev_free(gdb);
    dev_free(gsums), dev_free(gcpu), dev_free(gbsums), dev_free(gbcpu);
    dev_free(gm2), dev_free(gi2);
}

/* layernorm: the forward and dx are one thread per row in the CPU's
 * order (its bits without FMA on the CPU); dgamma and dbeta are column
 * sums in a tree, within rounding. */
static void test_ln(size_t rows, int c)
{
    size_t n = rows * (size_t)c;
    float *x = fill(n, -2, 3), *dy = fill(n, -1, 1);
    float *gamma = fill(c, 0.5f, 1.5f), *beta = fill(c, -1, 1);
    float *y = fill(n, 0, 0), *mean = fill(rows, 0, 0);
    float *invstd = fill(rows, 0, 0), *dx = fill(n, 0, 0);
    float *dg = fill(c, 0, 0), *db = fill(c, 0, 0);
    kc_ln_fwd(rows, c, x, gamma, beta, 1e-3f, y, mean, invstd);
    kc_ln_bwd(rows, c, x, dy, mean, invstd, gamma, dx, dg, db);

    float *gx = dev_from(x, n * 4), *gdy = dev_from(dy, n * 4);
    float *ggamma = dev_from(gamma, c * 4), *gbeta = dev_from(beta, c * 4);
    float *gy = dev_from(NULL, n * 4), *gdx = dev_from(NULL, n * 4);
    float *gmean = dev_from(NULL, rows * 4), *ginv = dev_from(NULL, rows * 4);
    float *gdg = dev_from(NULL, c * 4), *gdb = dev_from(NULL, c * 4);
    char what[96];
    snprintf(what, sizeof what, "ln_fwd %zux%d", rows, c);
    CHECK(kg_ln_fwd(rows, c, gx, ggamma, gbeta, 1e-3f, gy, gmean, ginv,
                    S) == 0);
    expect_rel(what, n, y, gy, 1e-6);
    expect_rel(what, rows, mean, gmean, 1e-6);
    expect_rel(what, rows, invstd, ginv, 1e-6);
    /* The backward from the CPU's statistics. */
    if (rows) {
        CHECK(kg_memcpy_h2d(gmean, mean, rows * 4, S) == 0);
        CHECK(kg_memcpy_h2d(ginv, invstd, rows * 4, S) == 0);
    }
    snprintf(what, sizeof what, "ln_bwd %zux%d", rows, c);
    CHECK(kg_memset(gdg, 0x7f, c * 4, S) == 0);   /* written, not added */
    CHECK(kg_ln_bwd(rows, c, gx, gdy, gmean, ginv, ggamma, gdx, gdg, gdb,
                    S) == 0);
    expect_rel(what, n, dx, gdx, 1e-6);
    CHECKF(dev_rel(dg, gdg, c, 1e-3) <= 1e-6, "%s: dgamma", what);
    CHECKF(dev_rel(db, gdb, c, 1e-3) <= 1e-6, "%s: dbeta", what);
    snprintf(what, sizeof what, "ln_bwd without dx %zux%d", rows, c);
    CHECK(kg_ln_bwd(rows, c, gx, gdy, gmean, ginv, ggamma, NULL, gdg, gdb,
                    S) == 0);
    CHECKF(dev_rel(dg, gdg, c, 1e-3) <= 1e-6, "%s: dgamma", what);
    snprintf(what, sizeof what, "ln_bwd in place %zux%d", rows, c);
    CHECK(kg_ln_bwd(rows, c, gx, gdy, gmean, ginv, ggamma, gdy, gdg, gdb,
                    S) == 0);                                /* dx == dy */
    expect_rel(what, n, dx, gdy, 1e-6);
    CHECKF(dev_rel(db, gdb, c, 1e-3) <= 1e-6, "%s: dbeta", what);
    free(x), free(dy), free(gamma), free(beta), free(y), free(mean);
    free(invstd), free(dx), free(dg), free(db);
    dev_free(gx), dev_free(gdy), dev_free(ggamma), dev_free(gbeta);
    dev_free(gy), dev_free(gdx), dev_free(gmean), dev_free(ginv);
    dev_free(gdg), dev_free(gdb);
}

/* ---- argument errors: a code and a reason, never a crash ------------------------ */
static void test_errors(void)
{
    CHECK(kg_device_count(NULL) == KG_EINVAL);
    CHECK(strlen(kg_last_error()) > 0);
    CHECK(kg_softmax_xent(4, 3, NULL, NULL, NULL, 1.0f, 1, NULL, S) == KG_EINVAL);
    CHECK(kg_dense_loss(KOPS_LOSS_MSE, -1, 4, 3, NULL, NULL, NULL, 1.0f, NULL, S)
          == KG_EINVAL);
    CHECK(kg_topk_count(4, 3, 2, NULL, NULL, NULL, NULL, S) == KG_EINVAL);
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
    CHECK(kg_dropout_fwd(0, NULL, NULL, 0.5f, 1, 0, S) == 0);
    CHECK(kg_tanh_fwd(0, NULL, NULL, S) == 0);
    CHECK(kg_leaky_relu_fwd(0, NULL, NULL, 0.3f, S) == 0);
    CHECK(kg_gelu_bwd(0, NULL, NULL, NULL, S) == 0);
    CHECK(kg_softmax_fwd(0, 10, NULL, NULL, S) == 0);
    CHECK(kg_softmax_bwd(4, 0, NULL, NULL, NULL, S) == 0);
    /* conv2d: a handle and a workspace of at least one image are needed. */
    kops_conv2d_t cg = { 2, 5, 5, 3, 3, 3, 4, 1, 1, 0, 0, 3, 3, 0, 0 };
    float *col = dev_from(NULL, 16);
    CHECK(kg_conv2d_fwd(NULL, &cg, col, col, NULL, col, col, 1000, S) ==
          KG_EINVAL);
    CHECK(kg_conv2d_fwd(H, &cg, col, col, NULL, col, col, 4, S) == KG_EINVAL);
    CHECK(kg_conv2d_fwd(H, &cg, col, col, NULL, col, NULL, 1000, S) ==
          KG_EINVAL);
    CHECK(kg_conv2d_bwd(H, &cg, col, col, col, col, NULL, NULL, col, 4, S) ==
          KG_EINVAL);
    CHECK(strlen(kg_last_error()) > 0);
    CHECK(kg_conv2d_fwd(H, NULL, NULL, NULL, NULL, NULL, NULL, 0, S) ==
          KG_EINVAL);
    CHECK(kg_maxpool2d_fwd(NULL, NULL, NULL, NULL, S) == KG_EINVAL);
    CHECK(kg_avgpool2d_fwd(NULL, NULL, NULL, S) == KG_EINVAL);
    CHECK(kg_avgpool2d_bwd(NULL, NULL, NULL, S) == KG_EINVAL);
    kops_pool2d_t empty = { 0, 4, 4, 2, 2, 2, 2, 2, 2, 2 };
    CHECK(kg_avgpool2d_fwd(&empty, NULL, NULL, S) == 0);   /* as kc */
    dev_free(col);
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
    test_bias(32 * 24 * 24, 8);             /* a conv2d bias: many rows */
    test_bias(256 * 24 * 24, 64);           /* the seeds' conv2 at 256 */
    test_relu_bias(1, 1);
    test_relu_bias(32 * 24 * 24, 8);
    test_relu_bias(0, 5);

    static const size_t sizes[] = { 1, 7, 16, 1000, 4099, 2100003 };
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        test_relu(sizes[i]);
        test_optim(sizes[i], 0.0f);
        test_optim(sizes[i], 0.1f);
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
    static const int dense_loss[][2] = {
        { KOPS_LOSS_CATEGORICAL, KOPS_METRIC_ACCURACY },
        { KOPS_LOSS_BINARY, KOPS_METRIC_ACCURACY },
        { KOPS_LOSS_MSE, KOPS_METRIC_MAE }, { KOPS_LOSS_MAE, KOPS_METRIC_MSE },
        { KOPS_LOSS_MSE, -1 },
    };
    for (size_t i = 0; i < sizeof dense_loss / sizeof *dense_loss; i++)
        for (size_t j = 0; j < sizeof xent / sizeof *xent; j++)
            test_dense_loss(dense_loss[i][0], dense_loss[i][1], xent[j][0],
                            xent[j][1], (int)(j & 1));

    static const int nsrcs[] = { 1, 2, 3, 4, 7, 40 };
    for (size_t i = 0; i < sizeof nsrcs / sizeof *nsrcs; i++) {
        test_sum(1001, nsrcs[i], 0);
        test_sum(1001, nsrcs[i], 1);
    }
    test_sum(5, 40, 1);

    /* conv2d: n, h, w, c, kh, kw, f, strides, pads (top, left, bottom,
     * right), images per GEMM (more than n: all at once). */
    static const int conv[][14] = {
        { 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1 },
        { 2, 5, 5, 1, 3, 3, 4, 1, 1, 0, 0, 0, 0, 1 },       /* valid   */
        { 3, 7, 6, 3, 3, 3, 5, 1, 1, 1, 1, 1, 1, 2 },       /* same    */
        { 5, 8, 8, 4, 3, 3, 8, 2, 2, 0, 0, 1, 1, 2 },       /* same/2  */
        { 4, 9, 7, 2, 5, 3, 3, 2, 3, 2, 1, 2, 1, 3 },       /* odd     */
        { 3, 6, 6, 3, 2, 2, 7, 3, 3, 0, 0, 0, 0, 8 },       /* gaps    */
        { 2, 5, 5, 3, 5, 5, 2, 1, 1, 0, 0, 0, 0, 1 },       /* 1x1 out */
        { 7, 4, 4, 16, 1, 1, 33, 1, 1, 0, 0, 0, 0, 3 },     /* 1x1 k   */
        { 32, 28, 28, 1, 3, 3, 32, 1, 1, 1, 1, 1, 1, 5 },   /* MNIST   */
        { 16, 14, 14, 32, 3, 3, 64, 1, 1, 0, 0, 0, 0, 16 },
    };
    for (size_t i = 0; i < sizeof conv / sizeof *conv; i++) {
        const int *v = conv[i];
        test_conv(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9],
                  v[10], v[11], v[12], v[13]);
    }
    test_conv_empty();

    int arch_major = 0, arch_minor = 0;
    CHECKF(kg_device_arch(0, &arch_major, &arch_minor) == 0,
           "kg_device_arch: %s", kg_last_error());
    printf("device 0: compute capability %d.%d\n", arch_major, arch_minor);
    if (arch_major >= 8) {
        for (size_t i = 0; i < 5; i++)
            test_dense_bf16(dense[i][0], dense[i][1], dense[i][2]);
        test_dense_bf16(128, 36864, 64);         /* the seeds' CNN's */
        for (size_t i = 0; i < sizeof conv / sizeof *conv; i++) {
            const int *v = conv[i];
            test_conv_bf16(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7],
                           v[8], v[9], v[10], v[11], v[12], v[13]);
        }
    }

    /* maxpool2d: n, h, w, c, ph, pw, strides. */
    static const int pool[][8] = {
        { 1, 1, 1, 1, 1, 1, 1, 1 }, { 2, 4, 4, 3, 2, 2, 2, 2 },
        { 3, 7, 5, 2, 2, 2, 2, 2 }, { 2, 7, 7, 5, 3, 3, 2, 2 },  /* overlap */
        { 2, 9, 8, 3, 2, 3, 3, 4 },                              /* gaps    */
        { 4, 6, 6, 1, 6, 6, 1, 1 }, { 32, 28, 28, 32, 2, 2, 2, 2 },
    };
    for (size_t i = 0; i < sizeof pool / sizeof *pool; i++)
        for (int ties = 0; ties < 2; ties++) {
            const int *v = pool[i];
            test_pool(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], ties);
        }
    for (size_t i = 0; i < sizeof pool / sizeof *pool; i++) {
        const int *v = pool[i];
        test_avgpool(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
    }
    test_avgpool(2, 4, 4, 37, 2, 2, 2, 2);                  /* odd channels */
    test_avgpool(32, 24, 24, 8, 24, 24, 24, 24);      /* global_avgpool2d */

    static const float rates[] = { 0.0f, 0.25f, 0.5f, 0.9f };
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (size_t r = 0; r < sizeof rates / sizeof *rates; r++)
            test_dropout(sizes[i], rates[r], 42 + r, 0);
    for (int comb = KOPS_EMB_NONE; comb <= KOPS_EMB_MEAN; comb++) {
        test_emb(32, 3, 8, 50, comb);
        test_emb(256, 26, 16, 1000, comb);     /* many duplicates per id */
        test_emb(7, 1, 5, 3, comb);
        test_emb(1000, 4, 33, 100000, comb);   /* a large sparse table */
    }
    test_dropout(4099, 0.5f, 0xdeadbeefcafef00dull, (1ull << 40) + 3);
    test_dropout(1000, 0.3f, 7, UINT64_MAX - 500);       /* index wraps */

    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        test_act("tanh", kc_tanh_fwd, kc_tanh_bwd, kg_tanh_fwd, kg_tanh_bwd,
                 sizes[i]);
        test_act("sigmoid", kc_sigmoid_fwd, kc_sigmoid_bwd, kg_sigmoid_fwd,
                 kg_sigmoid_bwd, sizes[i]);
    }

    static const float alphas[] = { 0.3f, 0.0f, 1.5f };
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        for (size_t a = 0; a < sizeof alphas / sizeof *alphas; a++)
            test_leaky(sizes[i], alphas[a]);
        test_gelu(sizes[i]);
    }
    /* rows x classes: an image's positions x channels, samples x
     * features, one class, wide rows; the spread of the logits */
    static const int soft[][2] = {
        { 1, 1 }, { 7, 1 }, { 32 * 26 * 26, 8 }, { 33, 10 }, { 5, 1000 },
        { 64, 64 }, { 3, 0 }, { 0, 5 },
    };
    for (size_t i = 0; i < sizeof soft / sizeof *soft; i++) {
        test_softmax(soft[i][0], soft[i][1], 3.0f);
        test_softmax(soft[i][0], soft[i][1], 30.0f);
    }

    /* rows (positions) x channels: empty, one channel, a flat layer's
     * features, an image's positions, channel groups of 32 and a tail */
    static const int norm[][2] = {
        { 0, 3 }, { 0, 1 }, { 1, 1 }, { 7, 1 }, { 5, 3 }, { 32, 128 },
        { 32 * 26 * 26, 8 }, { 4099, 1 }, { 1000, 37 }, { 3, 70 },
    };
    for (size_t i = 0; i < sizeof norm / sizeof *norm; i++) {
        test_bn((size_t)norm[i][0], norm[i][1]);
        test_ln((size_t)norm[i][0], norm[i][1]);
    }

    test_errors();

    CHECK(kg_blas_destroy(H) == 0);
    CHECK(kg_stream_sync(S) == 0);
    CHECK(kg_stream_destroy(S) == 0);
    return CHECK_DONE();
}
