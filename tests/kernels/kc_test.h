/* Helpers shared by the CPU kernel tests: a deterministic RNG, tolerant
 * comparisons and a central finite-difference gradient checker. */
#ifndef STRATA_TESTS_KC_TEST_H
#define STRATA_TESTS_KC_TEST_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "check.h"

static uint64_t kc_rng_state = 0x9E3779B97F4A7C15ull;

static inline void kc_seed(uint64_t s) { kc_rng_state = s * 2 + 1; }

/* xorshift64*: same sequence on every platform. */
static inline double kc_unif(double lo, double hi)
{
    kc_rng_state ^= kc_rng_state >> 12;
    kc_rng_state ^= kc_rng_state << 25;
    kc_rng_state ^= kc_rng_state >> 27;
    uint64_t r = kc_rng_state * 0x2545F4914F6CDD1Dull;
    return lo + (hi - lo) * ((double)(r >> 11) / 9007199254740992.0);
}

static inline void kc_fill(size_t n, float *x, double lo, double hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)kc_unif(lo, hi);
}

/* |a - b| <= abs + rel * max(|a|, |b|) */
static inline int kc_close(double a, double b, double rel, double abs_tol)
{
    double m = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
    return fabs(a - b) <= abs_tol + rel * m;
}

/* Compares n values against a reference; one CHECK per array, naming the
 * first mismatch. */
#define KC_CHECK_NEAR(what, n, got, want, rel, abs_tol)                        \
    do {                                                                       \
        size_t kc_bad_ = (size_t)-1;                                           \
        for (size_t kc_i_ = 0; kc_i_ < (size_t)(n); kc_i_++)                   \
            if (!kc_close((double)(got)[kc_i_], (double)(want)[kc_i_],         \
                          (rel), (abs_tol))) { kc_bad_ = kc_i_; break; }       \
        CHECKF(kc_bad_ == (size_t)-1, "%s[%zu]: got %.9g want %.9g", (what),   \
               kc_bad_, kc_bad_ == (size_t)-1 ? 0.0 : (double)(got)[kc_bad_],  \
               kc_bad_ == (size_t)-1 ? 0.0 : (double)(want)[kc_bad_]);         \
    } while (0)

/* Central finite differences of loss() w.r.t. every element of p[n],
 * compared with the analytic gradient g[n] (step h, the actually
 * representable perturbation is used as the denominator). */
typedef double (*kc_loss_fn)(void *ctx);

static inline void kc_grad_check(const char *what, size_t n, float *p,
                                 const float *g, kc_loss_fn loss, void *ctx,
                                 double h)
{
    size_t bad = (size_t)-1;
    double bad_fd = 0, bad_an = 0;
    for (size_t i = 0; i < n; i++) {
        float v = p[i];
        float vp = (float)(v + h), vm = (float)(v - h);
        p[i] = vp;
        double lp = loss(ctx);
        p[i] = vm;
        double lm = loss(ctx);
        p[i] = v;
        double fd = (lp - lm) / ((double)vp - (double)vm);
        if (!kc_close(fd, g[i], 1e-2, 1e-3) && bad == (size_t)-1) {
            bad = i;
            bad_fd = fd;
            bad_an = g[i];
        }
    }
    CHECKF(bad == (size_t)-1, "%s[%zu]: finite difference %.7g, analytic %.7g",
           what, bad, bad_fd, bad_an);
}

#endif /* STRATA_TESTS_KC_TEST_H */
