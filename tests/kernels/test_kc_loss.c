/* Fused softmax + sparse categorical cross-entropy and accuracy counting:
 * loss against a double reference, gradient by finite differences,
 * stability with huge logits, argmax ties, aliasing. */
#include "kc_test.h"
#include "kernels_cpu.h"

#include <string.h>

/* -log softmax(x)[y] summed over rows, naively in double (shifted only so
 * that the reference itself survives the huge-logit rows). */
static double ref_loss(int m, int c, const float *x, const int32_t *y)
{
    double s = 0;
    for (int i = 0; i < m; i++) {
        const float *r = x + (size_t)i * c;
        double mx = r[0], z = 0;
        for (int j = 1; j < c; j++)
            mx = r[j] > mx ? r[j] : mx;
        for (int j = 0; j < c; j++)
            z += exp((double)r[j] - mx);
        s += log(z) + mx - r[y[i]];
    }
    return s;
}

static int all_finite(size_t n, const float *x)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

struct xent_case {
    int m, c;
    float *x;
    const int32_t *y;
    float scale;
};

static double xent_loss(void *vctx)
{
    struct xent_case *k = vctx;
    return kc_softmax_xent(k->m, k->c, k->x, k->y, NULL, 0, NULL) * k->scale;
}

static void test_reference(void)
{
    enum { M = 37, C = 10 };
    float x[M * C], d[M * C], d2[M * C];
    int32_t y[M];
    kc_fill(M * C, x, -4, 4);
    for (int i = 0; i < M; i++)
        y[i] = (int32_t)(kc_unif(0, 1) * C) % C;
    double want = ref_loss(M, C, x, y);
    int64_t correct = 0;
    double got = kc_softmax_xent(M, C, x, y, d, 1.0f / M, &correct);
    CHECKF(kc_close(got, want, 1e-6, 1e-6), "loss %.12g want %.12g", got, want);
    CHECK(correct == kc_count_correct(M, C, x, y));
    CHECK(kc_softmax_xent(M, C, x, y, NULL, 0, NULL) == got);

    /* Each dlogits row is (softmax - onehot) * scale: sums to 0, and the
     * label entry is the only negative one. */
    int ok = 1;
    for (int i = 0; i < M; i++) {
        double s = 0;
        for (int j = 0; j < C; j++) {
            s += d[i * C + j];
            ok &= (j == y[i]) ? d[i * C + j] < 0 : d[i * C + j] > 0;
        }
        ok &= fabs(s) < 1e-7;
    }
    CHECK(ok);

    /* dlogits may alias logits: same bits, same loss. */
    memcpy(d2, x, sizeof x);
    int64_t c2 = 0;
    double got2 = kc_softmax_xent(M, C, d2, y, d2, 1.0f / M, &c2);
    CHECK(got2 == got);
    CHECK(c2 == correct);
    CHECK(memcmp(d, d2, sizeof d) == 0);
}

static void test_grad(void)
{
    enum { M = 4, C = 5 };
    float x[M * C], d[M * C];
    int32_t y[M] = { 0, 4, 2, 2 };
    kc_fill(M * C, x, -2, 2);
    struct xent_case k = { M, C, x, y, 0.37f };
    kc_softmax_xent(M, C, x, y, d, k.scale, NULL);
    kc_grad_check("xent dlogits", M * C, x, d, xent_loss, &k, 1e-3);
}

static void test_stability(void)
{
    enum { C = 4 };
    float x[6 * C] = {
        1e4f, -1e4f, 0, 5,            /* label 1: loss 2e4 */
        1e4f, -1e4f, 0, 5,            /* label 0: loss ~0  */
        -1e4f, -1e4f, -1e4f, -1e4f,   /* all equal: log(C) */
        1e4f, 1e4f, 1e4f, 1e4f,
        3e38f, -3e38f, 0, 1,          /* near FLT_MAX: exp(-inf) = 0 */
        -3e38f, -3e38f, -3e38f, -3e38f,
    };
    int32_t y[6] = { 1, 0, 2, 3, 1, 0 };
    float d[6 * C];
    double rows[6];
    for (int i = 0; i < 6; i++) {
        rows[i] = kc_softmax_xent(1, C, x + i * C, y + i, d + i * C, 1.0f, NULL);
        CHECKF(isfinite(rows[i]), "row %d loss %g", i, rows[i]);
    }
    CHECK(all_finite(6 * C, d));
    CHECK(kc_close(rows[0], 2e4, 1e-9, 0));
    CHECK(rows[1] >= 0 && rows[1] < 1e-30);
    CHECK(kc_close(rows[2], log(C), 1e-6, 0));
    CHECK(kc_close(rows[3], log(C), 1e-6, 0));
    CHECK(kc_close(rows[4], 6e38, 1e-6, 0));
    CHECK(kc_close(rows[5], log(C), 1e-6, 0));
    CHECK(d[0] == 1.0f && d[1] == -1.0f);        /* softmax one-hot on 0 */
    CHECK(d[4] == 0.0f && d[5] == 0.0f);          /* exactly right */
    CHECK(kc_close(d[2 * C + 2], 0.25 - 1, 1e-6, 0));
    double all = kc_softmax_xent(6, C, x, y, NULL, 0, NULL);
    CHECK(isfinite(all) && kc_close(all, ref_loss(6, C, x, y), 1e-9, 0));
}

static void test_correct(void)
{
    enum { C = 3 };
    float x[5 * C] = {
        1, 3, 3,        /* tie: argmax 1 */
        1, 3, 3,
        2, 2, 2,        /* all tie: argmax 0 */
        -5, -1, -9,
        0, 0, 7,
    };
    int32_t y[5] = { 1, 2, 0, 1, 0 };
    CHECK(kc_count_correct(5, C, x, y) == 3);
    int64_t correct = 5;                  /* added to, not overwritten */
    kc_softmax_xent(5, C, x, y, NULL, 0, &correct);
    CHECK(correct == 8);
    CHECK(kc_count_correct(0, C, x, y) == 0);
    CHECK(kc_softmax_xent(0, C, x, y, NULL, 0, &correct) == 0.0);
    CHECK(correct == 8);

    /* A label outside [0, c): NaN loss (visible), never counted, finite
     * gradient, and no out-of-bounds access (run under ASan). */
    int32_t bad[2] = { 3, -1 };
    float d[2 * C];
    correct = 0;
    double l = kc_softmax_xent(2, C, x + 3 * C, bad, d, 1.0f, &correct);
    CHECK(isnan(l));
    CHECK(correct == 0);
    CHECK(all_finite(2 * C, d));
}


/* ---- the dense losses ---------------------------------------------------- */

struct dense_case {
    int kind, m, c;
    float *x;
    const float *y;
    float scale;
};

static double dense_loss(void *vctx)
{
    struct dense_case *k = vctx;
    return kc_dense_loss(k->kind, -1, k->m, k->c, k->x, k->y, NULL, 0, NULL) *
           k->scale;
}

/* Each kind's dx against central differences of its loss (mae away from
 * its kink: |x - y| >= 0.05), dx aliasing x the same bits, and the loss and
 * metric against the formulas in double. */
static void test_dense(int kind)
{
    enum { M = 5, C = 4 };
    float x[M * C], y[M * C], d[M * C], d2[M * C];
    kc_fill(M * C, x, -2, 2);
    kc_fill(M * C, y, 0, 1);
    for (int i = 0; kind == KOPS_LOSS_MAE && i < M * C; i++)
        if (fabsf(x[i] - y[i]) < 0.05f)
            x[i] = y[i] + 0.1f;
    struct dense_case k = { kind, M, C, x, y, 0.29f };
    double metric = 0.0;
    int mk = kind == KOPS_LOSS_MSE || kind == KOPS_LOSS_MAE
                 ? KOPS_METRIC_MAE : KOPS_METRIC_ACCURACY;
    double loss = kc_dense_loss(kind, mk, M, C, x, y, d, k.scale, &metric);
    char what[64];
    snprintf(what, sizeof what, "dense loss %d dx", kind);
    kc_grad_check(what, M * C, x, d, dense_loss, &k, 1e-3);

    double want = 0.0, want_m = 0.0;
    for (int r = 0; r < M; r++) {
        const float *xr = x + r * C, *yr = y + r * C;
        double mx = xr[0], se = 0.0, rl = 0.0, rm = 0.0;
        int ax = 0, ay = 0;
        for (int j = 1; j < C; j++) {
            if (xr[j] > xr[ax]) ax = j;
            if (yr[j] > yr[ay]) ay = j;
        }
        mx = xr[ax];
        for (int j = 0; j < C; j++)
            se += exp(xr[j] - mx);
        for (int j = 0; j < C; j++) {
            double v = xr[j], t = yr[j], p = 1.0 / (1.0 + exp(-v));
            switch (kind) {
            case KOPS_LOSS_CATEGORICAL: rl -= t * (v - mx - log(se)); break;
            case KOPS_LOSS_BINARY:
                rl -= (t * log(p) + (1 - t) * log(1 - p)) / C;
                rm += ((v > 0) == (t >= 0.5)) / (double)C;
                break;
            case KOPS_LOSS_MSE: rl += (v - t) * (v - t) / C; break;
            default: rl += fabs(v - t) / C; break;
            }
            if (mk == KOPS_METRIC_MAE)
                rm += fabs(v - t) / C;
        }
        if (kind == KOPS_LOSS_CATEGORICAL)
            rm = ax == ay;
        want += rl;
        want_m += rm;
    }
    CHECKF(kc_close(loss, want, 1e-6, 1e-6), "dense loss %d: %.12g want %.12g",
           kind, loss, want);
    CHECKF(kc_close(metric, want_m, 1e-6, 1e-6),
           "dense loss %d metric: %.12g want %.12g", kind, metric, want_m);
    memcpy(d2, x, sizeof x);
    double m2 = 0.0;
    CHECK(kc_dense_loss(kind, mk, M, C, d2, y, d2, k.scale, &m2) == loss);
    CHECK(m2 == metric && memcmp(d, d2, sizeof d) == 0);
}

/* Top-k: ties count in; a label row's first maximum; invalid labels never. */
static void test_topk(void)
{
    const float x[] = { 1, 3, 3, 0,   5, 1, 2, 2,   0, 0, 0, 0 };
    const int32_t lab[] = { 2, 3, -1 };
    CHECK(kc_topk_count(3, 4, 1, x, lab, NULL) == 1);  /* row 0: a tie */
    CHECK(kc_topk_count(3, 4, 2, x, lab, NULL) == 2);  /* row 1: 1 above */
    CHECK(kc_topk_count(3, 4, 4, x, lab, NULL) == 2);
    const float y[] = { 0, 1, 0, 0,   0, 0, 0.5f, 0.5f,   1, 0, 0, 0 };
    /* rows' labels 1, 2 (first maximum), 0 */
    CHECK(kc_topk_count(3, 4, 1, x, NULL, y) == 2);
    CHECK(kc_topk_count(3, 4, 2, x, NULL, y) == 3);
    int64_t n = 0;
    CHECK(kc_softmax_xent(2, 4, x, lab, NULL, 0, &n) > 0 && n == 0);
}

/* Keras's AUC, computed as Keras does (each threshold's TP, FP, TN, FN
 * from every prediction, float32 comparisons, trapezoids), against the
 * bins; and near the exact area (the pairs ranked right) for scores that
 * are not too close. */
static double keras_auc(int n, const float *x, const float *y)
{
    double tpr[KOPS_AUC_THRESHOLDS], fpr[KOPS_AUC_THRESHOLDS];
    for (int i = 0; i < KOPS_AUC_THRESHOLDS; i++) {
        float t = i == 0 ? -1e-7f : i == KOPS_AUC_THRESHOLDS - 1
                                        ? 1.0f + 1e-7f
                                        : (float)(i / 199.0);
        double tp = 0, fp = 0, fn = 0, tn = 0;
        for (int j = 0; j < n; j++) {
            float p = 1.0f / (1.0f + expf(-x[j]));
            if (p > t) {
                tp += y[j];
                fp += 1 - y[j];
            } else {
                fn += y[j];
                tn += 1 - y[j];
            }
        }
        tpr[i] = tp / (tp + fn);
        fpr[i] = fp / (fp + tn);
    }
    double auc = 0;
    for (int i = 0; i + 1 < KOPS_AUC_THRESHOLDS; i++)
        auc += (fpr[i] - fpr[i + 1]) * (tpr[i] + tpr[i + 1]) / 2;
    return auc;
}

static void test_auc(void)
{
    enum { M = 300, C = 3 };
    static float x[M * C], y[M * C];
    for (int i = 0; i < M * C; i++) {
        y[i] = kc_unif(0, 1) < 0.4 ? 1.0f : 0.0f;
        x[i] = (float)(kc_unif(-3, 3) + (y[i] > 0 ? 1.2 : 0.0));
    }
    double hist[2 * KOPS_AUC_BINS] = { 0 };
    kc_auc_hist(M / 2, C, x, y, hist);       /* two batches add up */
    kc_auc_hist(M - M / 2, C, x + M / 2 * C, y + M / 2 * C, hist);
    double got = kc_auc(hist), want = keras_auc(M * C, x, y);
    CHECKF(fabs(got - want) < 1e-12, "auc %.15f, Keras's way %.15f", got,
           want);
    double right = 0, pairs = 0;
    for (int i = 0; i < M * C; i++)
        for (int j = 0; j < M * C; j++)
            if (y[i] > 0 && y[j] == 0) {
                pairs++;
                right += x[i] > x[j] ? 1.0 : x[i] == x[j] ? 0.5 : 0.0;
            }
    CHECKF(fabs(got - right / pairs) < 0.01, "auc %.4f, exact %.4f", got,
           right / pairs);
    /* soft labels weigh both ways; no positives: 0 */
    double soft[2 * KOPS_AUC_BINS] = { 0 };
    const float sx[] = { 2.0f, -2.0f }, sy[] = { 0.75f, 0.25f };
    kc_auc_hist(2, 1, sx, sy, soft);
    CHECKF(fabs(kc_auc(soft) - keras_auc(2, sx, sy)) < 1e-12,
           "soft labels: %.6f", kc_auc(soft));
    double none[2 * KOPS_AUC_BINS] = { 0 };
    const float zy[] = { 0.0f, 0.0f };
    kc_auc_hist(2, 1, sx, zy, none);
    CHECK(kc_auc(none) == 0.0);
}

int main(void)
{
    kc_seed(3);
    test_reference();
    test_grad();
    test_stability();
    test_correct();
    for (int kind = KOPS_LOSS_CATEGORICAL; kind <= KOPS_LOSS_MAE; kind++)
        test_dense(kind);
    test_topk();
    test_auc();
    return CHECK_DONE();
}
