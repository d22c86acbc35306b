/* Optimizer steps against straightforward double references over several
 * steps, at sizes that exercise the vector blocks and the scalar tail, with
 * and without the decoupled weight decay (Keras' weight_decay: the variable
 * shrinks by lr * wd * itself, before the update, every step); RMSprop and
 * Adagrad also against three steps of Keras' values worked by hand. */
#include "kc_test.h"
#include "kernels_cpu.h"

#include <stdlib.h>
#include <string.h>

enum { STEPS = 5 };

struct bufs {
    size_t n;
    float *w, *g, *m, *v;
    double *rw, *rm, *rv;
};

static void bufs_init(struct bufs *b, size_t n)
{
    b->n = n;
    b->w = malloc(n * sizeof(float));
    b->g = malloc(n * sizeof(float));
    b->m = calloc(n, sizeof(float));
    b->v = calloc(n, sizeof(float));
    b->rw = malloc(n * sizeof(double));
    b->rm = calloc(n, sizeof(double));
    b->rv = calloc(n, sizeof(double));
    kc_fill(n, b->w, -1, 1);
    for (size_t i = 0; i < n; i++)
        b->rw[i] = b->w[i];
}

static void bufs_free(struct bufs *b)
{
    free(b->w); free(b->g); free(b->m); free(b->v);
    free(b->rw); free(b->rm); free(b->rv);
}

/* Gradients of mixed magnitude, including exact zeros and tiny values
 * (where eps dominates the Adam denominator). */
static void next_grad(struct bufs *b)
{
    for (size_t i = 0; i < b->n; i++) {
        double u = kc_unif(-1, 1);
        b->g[i] = (float)(i % 5 == 3 ? 0.0 : i % 5 == 4 ? u * 1e-6 : u);
    }
}

static void test_sgd(size_t n, float wd)
{
    struct bufs b;
    bufs_init(&b, n);
    const float lr = 0.05f;
    for (int s = 0; s < STEPS; s++) {
        next_grad(&b);
        kc_sgd(n, b.w, b.g, lr, wd);
        for (size_t i = 0; i < n; i++) {
            b.rw[i] -= (double)lr * wd * b.rw[i];
            b.rw[i] -= (double)lr * b.g[i];
        }
    }
    char what[96];
    snprintf(what, sizeof what, "sgd w n=%zu wd=%g", n, wd);
    KC_CHECK_NEAR(what, n, b.w, b.rw, 1e-6, 1e-7);
    bufs_free(&b);
}

static void test_momentum(size_t n, float wd)
{
    struct bufs b;
    bufs_init(&b, n);
    const float lr = 0.05f, mu = 0.9f;
    for (int s = 0; s < STEPS; s++) {
        next_grad(&b);
        kc_momentum(n, b.w, b.g, b.v, lr, mu, wd);
        for (size_t i = 0; i < n; i++) {
            b.rw[i] -= (double)lr * wd * b.rw[i];
            b.rv[i] = (double)mu * b.rv[i] - (double)lr * b.g[i];
            b.rw[i] += b.rv[i];
        }
    }
    char what[96];
    snprintf(what, sizeof what, "momentum w n=%zu wd=%g", n, wd);
    KC_CHECK_NEAR(what, n, b.w, b.rw, 1e-5, 1e-7);
    snprintf(what, sizeof what, "momentum v n=%zu", n);
    KC_CHECK_NEAR(what, n, b.v, b.rv, 1e-5, 1e-7);
    bufs_free(&b);
}

/* eps is large on purpose in one run: it tells "eps added to the corrected
 * sqrt(v)" (PyTorch, the paper) from "eps added to sqrt(v) before the
 * correction" (the Keras/TF epsilon-hat form). */
static void test_adam(size_t n, float eps, float wd)
{
    struct bufs b;
    bufs_init(&b, n);
    const float lr = 0.01f, b1 = 0.9f, b2 = 0.999f;
    for (int64_t t = 1; t <= STEPS; t++) {
        next_grad(&b);
        kc_adam(n, b.w, b.g, b.m, b.v, lr, b1, b2, eps, t, wd);
        double bc1 = 1 - pow(b1, (double)t), bc2 = 1 - pow(b2, (double)t);
        for (size_t i = 0; i < n; i++) {
            double g = b.g[i];
            b.rw[i] -= (double)lr * wd * b.rw[i]; /* AdamW: lr, not the
                                                     corrected step */
            b.rm[i] = b1 * b.rm[i] + (1 - (double)b1) * g;
            b.rv[i] = b2 * b.rv[i] + (1 - (double)b2) * g * g;
            b.rw[i] -= lr * (b.rm[i] / bc1) / (sqrt(b.rv[i] / bc2) + eps);
        }
    }
    char what[96];
    snprintf(what, sizeof what, "adam w n=%zu eps=%g wd=%g", n, eps, wd);
    KC_CHECK_NEAR(what, n, b.w, b.rw, 1e-5, 1e-7);
    snprintf(what, sizeof what, "adam m n=%zu", n);
    KC_CHECK_NEAR(what, n, b.m, b.rm, 1e-5, 1e-6);
    snprintf(what, sizeof what, "adam v n=%zu", n);
    KC_CHECK_NEAR(what, n, b.v, b.rv, 1e-5, 1e-8);
    bufs_free(&b);
}

/* Step 1 from zero slots: m_hat = g, v_hat = g^2, so the update is
 * exactly lr * g / (|g| + eps). */
static void test_adam_first_step(void)
{
    float w[3] = { 0, 0, 0 }, g[3] = { 2.0f, -0.5f, 0 }, m[3] = { 0 }, v[3] = { 0 };
    kc_adam(3, w, g, m, v, 0.1f, 0.9f, 0.999f, 0.5f, 1, 0.0f);
    CHECK(kc_close(w[0], -0.1 * 2 / 2.5, 1e-6, 0));
    CHECK(kc_close(w[1], 0.1 * 0.5 / 1.0, 1e-6, 0));
    CHECK(w[2] == 0.0f && m[2] == 0.0f && v[2] == 0.0f);
    float w0 = 1;
    kc_adam(1, &w0, g, m, v, 0.1f, 0.9f, 0.999f, 0.5f, 0, 0.0f); /* t < 1 */
    CHECK(isfinite(w0));
}

/* RMSprop (Keras, centered = False), with and without momentum (the
 * velocity in m), against the same arithmetic in double. */
static void test_rmsprop(size_t n, float mu, float wd)
{
    struct bufs b;
    bufs_init(&b, n);
    const float lr = 0.01f, rho = 0.9f, eps = 1e-7f;
    for (int s = 0; s < STEPS; s++) {
        next_grad(&b);
        kc_rmsprop(n, b.w, b.g, b.v, mu > 0 ? b.m : NULL, lr, rho, mu, eps,
                   wd);
        for (size_t i = 0; i < n; i++) {
            double g = b.g[i];
            b.rw[i] -= (double)lr * wd * b.rw[i];
            b.rv[i] = rho * b.rv[i] + (1 - (double)rho) * g * g;
            double inc = lr * g / sqrt(b.rv[i] + eps);
            if (mu > 0) {
                b.rm[i] = mu * b.rm[i] + inc;
                inc = b.rm[i];
            }
            b.rw[i] -= inc;
        }
    }
    char what[96];
    snprintf(what, sizeof what, "rmsprop w n=%zu mu=%g wd=%g", n, mu, wd);
    KC_CHECK_NEAR(what, n, b.w, b.rw, 1e-5, 1e-7);
    snprintf(what, sizeof what, "rmsprop rms n=%zu", n);
    KC_CHECK_NEAR(what, n, b.v, b.rv, 1e-5, 1e-8);
    snprintf(what, sizeof what, "rmsprop momentum n=%zu mu=%g", n, mu);
    KC_CHECK_NEAR(what, n, b.m, b.rm, 1e-5, 1e-7);  /* stays 0 without */
    bufs_free(&b);
}

/* Adagrad (Keras) from an accumulator of 0.1, against double. */
static void test_adagrad(size_t n, float wd)
{
    struct bufs b;
    bufs_init(&b, n);
    const float lr = 0.01f, eps = 1e-7f;
    kc_fill_const(n, b.v, 0.1f);
    for (size_t i = 0; i < n; i++) {
        CHECK(b.v[i] == 0.1f);
        b.rv[i] = 0.1f;
    }
    for (int s = 0; s < STEPS; s++) {
        next_grad(&b);
        kc_adagrad(n, b.w, b.g, b.v, lr, eps, wd);
        for (size_t i = 0; i < n; i++) {
            double g = b.g[i];
            b.rw[i] -= (double)lr * wd * b.rw[i];
            b.rv[i] += g * g;
            b.rw[i] -= lr * g / sqrt(b.rv[i] + eps);
        }
    }
    char what[96];
    snprintf(what, sizeof what, "adagrad w n=%zu wd=%g", n, wd);
    KC_CHECK_NEAR(what, n, b.w, b.rw, 1e-5, 1e-7);
    snprintf(what, sizeof what, "adagrad accumulator n=%zu", n);
    KC_CHECK_NEAR(what, n, b.v, b.rv, 1e-6, 1e-8);
    bufs_free(&b);
}

/* Three steps of Keras' RMSprop and Adagrad worked by hand (the formulas
 * of keras.optimizers.RMSprop / Adagrad update_step, in exact arithmetic):
 * w = (1, -0.5, 0.25), lr = 0.1, epsilon = 1e-7, the gradients
 * (1, -0.5, 0), (0.5, 2, 0), (-2, 0.25, 0). E.g. RMSprop (rho = 0.9),
 * element 0: v = 0.1 * 1 = 0.1, w = 1 - 0.1 / sqrt(0.1 + 1e-7) =
 * 0.683772392; v = 0.9 * 0.1 + 0.1 * 0.25 = 0.115, w -= 0.05 /
 * sqrt(0.115 + 1e-7) -> 0.536330500. Adagrad (initial_accumulator_value
 * 0.1), element 0: acc = 0.1 + 1 = 1.1, w = 1 - 0.1 / sqrt(1.1 + 1e-7) =
 * 0.904653745. With weight_decay 0.1 Keras first takes w * 0.1 * lr off. */
static const float k_w0[3] = { 1.0f, -0.5f, 0.25f };
static const float k_g[3][3] = { { 1.0f, -0.5f, 0 }, { 0.5f, 2.0f, 0 },
                                 { -2.0f, 0.25f, 0 } };

static void check3(const char *what, int step, const float *got,
                   const double *want)
{
    for (int i = 0; i < 3; i++)
        CHECKF(kc_close(got[i], want[i], 1e-6, 1e-9),
               "%s, step %d, element %d: %.9g, Keras %.9g", what, step + 1, i,
               got[i], want[i]);
}

static void test_keras_values(void)
{
    static const double rms_w[3][3] = {
        { 0.6837723921, -0.1837728664, 0.25 },
        { 0.5363305000, -0.4914651377, 0.25 },
        { 0.8181884021, -0.5316780201, 0.25 } };
    static const double rms_v[3][3] = {
        { 0.1, 0.025, 0 }, { 0.115, 0.4225, 0 }, { 0.5035, 0.3865, 0 } };
    /* momentum = 0.5: the velocity, and w */
    static const double mom_w[3][3] = {
        { 0.6837723921, -0.1837728664, 0.25 },
        { 0.3782166961, -0.3333515709, 0.25 },
        { 0.5072967502, -0.4483538055, 0.25 } };
    static const double mom_m[3][3] = {
        { 0.3162276079, -0.3162271336, 0 },
        { 0.3055556960, 0.1495787045, 0 },
        { -0.1290800541, 0.1150022346, 0 } };
    static const double rms_wd_w[3][3] = {     /* weight_decay = 0.1 */
        { 0.6737723921, -0.1787728664, 0.2475 },
        { 0.5195927761, -0.4846774091, 0.245025 },
        { 0.7962547505, -0.5200435173, 0.24257475 } };
    static const double ada_w[3][3] = {
        { 0.9046537454, -0.4154845866, 0.25 },
        { 0.8616205987, -0.5113772458, 0.25 },
        { 0.9480881381, -0.5232786346, 0.25 } };
    static const double ada_acc[3][3] = {
        { 1.1, 0.35, 0.1 }, { 1.35, 4.35, 0.1 }, { 5.35, 4.4125, 0.1 } };
    static const double ada_wd_w[3][3] = {     /* weight_decay = 0.1 */
        { 0.8946537454, -0.4104845866, 0.2475 },
        { 0.8426740613, -0.5022723999, 0.245025 },
        { 0.9207148601, -0.5091510648, 0.24257475 } };

    float w[3], v[3], m[3], w2[3], v2[3], w3[3], v3[3];
    memcpy(w, k_w0, sizeof w), memcpy(w2, k_w0, sizeof w);
    memcpy(w3, k_w0, sizeof w);
    memset(v, 0, sizeof v), memset(v2, 0, sizeof v), memset(m, 0, sizeof m);
    memset(v3, 0, sizeof v3);
    for (int s = 0; s < 3; s++) {
        kc_rmsprop(3, w, k_g[s], v, NULL, 0.1f, 0.9f, 0.0f, 1e-7f, 0.0f);
        check3("rmsprop w", s, w, rms_w[s]);
        check3("rmsprop rms", s, v, rms_v[s]);
        kc_rmsprop(3, w2, k_g[s], v2, m, 0.1f, 0.9f, 0.5f, 1e-7f, 0.0f);
        check3("rmsprop(momentum=0.5) w", s, w2, mom_w[s]);
        check3("rmsprop(momentum=0.5) momentum", s, m, mom_m[s]);
        check3("rmsprop(momentum=0.5) rms", s, v2, rms_v[s]);
        kc_rmsprop(3, w3, k_g[s], v3, NULL, 0.1f, 0.9f, 0.0f, 1e-7f, 0.1f);
        check3("rmsprop(weight_decay=0.1) w", s, w3, rms_wd_w[s]);
    }
    float acc[3], acc2[3];
    memcpy(w, k_w0, sizeof w), memcpy(w2, k_w0, sizeof w);
    kc_fill_const(3, acc, 0.1f);
    kc_fill_const(3, acc2, 0.1f);
    for (int s = 0; s < 3; s++) {
        kc_adagrad(3, w, k_g[s], acc, 0.1f, 1e-7f, 0.0f);
        check3("adagrad w", s, w, ada_w[s]);
        check3("adagrad accumulator", s, acc, ada_acc[s]);
        kc_adagrad(3, w2, k_g[s], acc2, 0.1f, 1e-7f, 0.1f);
        check3("adagrad(weight_decay=0.1) w", s, w2, ada_wd_w[s]);
    }
}

/* The decay alone (a zero gradient): w x (1 - lr wd) per step, whatever the
 * optimizer, and exactly nothing without decay. */
static void test_decay_only(void)
{
    float w[3] = { 1.0f, -2.0f, 0.5f }, g[3] = { 0 }, v[3] = { 0 };
    float m[3] = { 0 }, v2[3] = { 0 };
    float ws[3], wm[3], wa[3], wr[3], wrm[3], wg[3];
    float rv[3] = { 0 }, rm[3] = { 0 }, acc[3] = { 0.1f, 0.1f, 0.1f };
    memcpy(ws, w, sizeof w), memcpy(wm, w, sizeof w), memcpy(wa, w, sizeof w);
    memcpy(wr, w, sizeof w), memcpy(wrm, w, sizeof w), memcpy(wg, w, sizeof w);
    kc_sgd(3, ws, g, 0.1f, 0.5f);
    kc_momentum(3, wm, g, v, 0.1f, 0.9f, 0.5f);
    kc_adam(3, wa, g, m, v2, 0.1f, 0.9f, 0.999f, 1e-7f, 1, 0.5f);
    kc_rmsprop(3, wr, g, rv, NULL, 0.1f, 0.9f, 0.0f, 1e-7f, 0.5f);
    kc_rmsprop(3, wrm, g, rv, rm, 0.1f, 0.9f, 0.9f, 1e-7f, 0.5f);
    kc_adagrad(3, wg, g, acc, 0.1f, 1e-7f, 0.5f);
    for (int i = 0; i < 3; i++) {
        CHECK(kc_close(ws[i], w[i] * 0.95, 1e-7, 0));
        CHECK(kc_close(wm[i], w[i] * 0.95, 1e-7, 0));
        CHECK(kc_close(wa[i], w[i] * 0.95, 1e-7, 0));
        CHECK(kc_close(wr[i], w[i] * 0.95, 1e-7, 0));
        CHECK(kc_close(wrm[i], w[i] * 0.95, 1e-7, 0));
        CHECK(kc_close(wg[i], w[i] * 0.95, 1e-7, 0));
        CHECK(rv[i] == 0.0f && rm[i] == 0.0f && acc[i] == 0.1f);
    }
    memcpy(ws, w, sizeof w);
    kc_sgd(3, ws, g, 0.1f, 0.0f);
    CHECK(memcmp(ws, w, sizeof w) == 0);
}

int main(void)
{
    static const size_t sizes[] = { 1, 7, 1000 };
    kc_seed(4);
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        for (int d = 0; d < 2; d++) {
            float wd = d ? 0.04f : 0.0f;
            test_sgd(sizes[i], wd);
            test_momentum(sizes[i], wd);
            test_adam(sizes[i], 1e-7f, wd);
            test_adam(sizes[i], 0.1f, wd);
            test_rmsprop(sizes[i], 0.0f, wd);
            test_rmsprop(sizes[i], 0.9f, wd);
            test_adagrad(sizes[i], wd);
        }
    }
    test_adam_first_step();
    test_keras_values();
    test_decay_only();
    return CHECK_DONE();
}
