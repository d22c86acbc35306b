/* Optimizer steps against straightforward double references over several
 * steps, at sizes that exercise the vector blocks and the scalar tail, with
 * and without the decoupled weight decay (Keras' weight_decay: the variable
 * shrinks by lr * wd * itself, before the update, every step). */
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
    char what[48];
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
    char what[48];
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
    char what[48];
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

/* The decay alone (a zero gradient): w x (1 - lr wd) per step, whatever the
 * optimizer, and exactly nothing without decay. */
static void test_decay_only(void)
{
    float w[3] = { 1.0f, -2.0f, 0.5f }, g[3] = { 0 }, v[3] = { 0 };
    float m[3] = { 0 }, v2[3] = { 0 };
    float ws[3], wm[3], wa[3];
    memcpy(ws, w, sizeof w), memcpy(wm, w, sizeof w), memcpy(wa, w, sizeof w);
    kc_sgd(3, ws, g, 0.1f, 0.5f);
    kc_momentum(3, wm, g, v, 0.1f, 0.9f, 0.5f);
    kc_adam(3, wa, g, m, v2, 0.1f, 0.9f, 0.999f, 1e-7f, 1, 0.5f);
    for (int i = 0; i < 3; i++) {
        CHECK(kc_close(ws[i], w[i] * 0.95, 1e-7, 0));
        CHECK(kc_close(wm[i], w[i] * 0.95, 1e-7, 0));
        CHECK(kc_close(wa[i], w[i] * 0.95, 1e-7, 0));
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
        }
    }
    test_adam_first_step();
    test_decay_only();
    return CHECK_DONE();
}
