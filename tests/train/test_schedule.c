/* Learning-rate schedules (core/run/schedule.c), unit: the rate of every step
 * against Keras' formulas written out here (ExponentialDecay,
 * PiecewiseConstantDecay, CosineDecay), with the warm-up and the linear
 * scaling rule on top; the keys parsed from a config as a user writes
 * them; the banner's description. The config errors are golden files in
 * tests/config. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "run/schedule.h"

/* The schedule of these [optimizer] keys ("key=value" each). */
static int make(strata__schedule_t *s, double scale, int64_t warmup,
                const char *const *sets)
{
    strata__cfg_t *c;
    strata__settings_t st;
    int rc = strata__cfg_new(&c);
    for (int i = 0; rc == 0 && sets[i]; i++)
        rc = strata__cfg_set(c, sets[i], STRATA__CFG_CLI, "--set");
    if (rc == 0)
        rc = strata__settings_load(c, &st);
    if (rc == 0)
        rc = strata__schedule_init(s, &st.optimizer, scale, warmup);
    strata__cfg_free(c);
    return rc;
}

/* Equal to the float the core hands the step, within a float's rounding. */
static int near(double got, double want)
{
    return fabs(got - want) <= 1e-12 * fabs(want) + 1e-300;
}

static void constant_and_warmup(void)
{
    strata__schedule_t s;
    const char *sets[] = { "optimizer.lr=0.01", NULL };
    CHECK(make(&s, 1.0, 0, sets) == 0);
    for (int64_t k = 0; k < 100; k += 7)
        CHECK(strata__schedule_lr(&s, k) == 0.01);
    /* lr_scaling = linear on 4 replicas, 10 steps of warm-up: the existing
     * rule, (step + 1) / warmup of the scaled rate. */
    CHECK(make(&s, 4.0, 10, sets) == 0);
    for (int64_t k = 0; k < 30; k++) {
        double want = 0.04 * (k < 10 ? (double)(k + 1) / 10.0 : 1.0);
        CHECKF(near(strata__schedule_lr(&s, k), want), "step %lld: %g, want "
               "%g", (long long)k, strata__schedule_lr(&s, k), want);
    }
    char d[256];
    strata__schedule_describe(&s, d, sizeof d);
    CHECK(d[0] == '\0');
}

static void exponential(void)
{
    strata__schedule_t s;
    const char *smooth[] = { "optimizer.lr=0.1", "optimizer.schedule=exponential",
                             "optimizer.decay_steps=100",
                             "optimizer.decay_rate=0.5", NULL };
    CHECK(make(&s, 1.0, 0, smooth) == 0);
    for (int64_t k = 0; k < 1000; k += 37) {
        double want = 0.1 * pow(0.5, (double)k / 100.0);
        CHECKF(near(strata__schedule_lr(&s, k), want), "exp step %lld",
               (long long)k);
    }
    const char *stairs[] = { "optimizer.lr=0.1", "optimizer.schedule=exponential",
                             "optimizer.decay_steps=100",
                             "optimizer.decay_rate=0.5",
                             "optimizer.staircase=true", NULL };
    CHECK(make(&s, 2.0, 0, stairs) == 0);
    CHECK(strata__schedule_lr(&s, 0) == 0.2);
    CHECK(strata__schedule_lr(&s, 99) == 0.2);
    CHECK(near(strata__schedule_lr(&s, 100), 0.1));
    CHECK(near(strata__schedule_lr(&s, 250), 0.05));
    char d[256];
    strata__schedule_describe(&s, d, sizeof d);
    CHECKF(strstr(d, "x 0.5 every 100 steps") && strstr(d, "staircase"),
           "%s", d);
}

/* Keras: values[0] up to and including boundaries[0], values[1] after it
 * up to boundaries[1], ..., the last value after the last boundary. */
static void piecewise(void)
{
    strata__schedule_t s;
    const char *vals[] = { "optimizer.schedule=step",
                           "optimizer.boundaries=100, 200",
                           "optimizer.values=1.0, 0.5, 0.1", NULL };
    CHECK(make(&s, 1.0, 0, vals) == 0);
    CHECK(strata__schedule_lr(&s, 0) == 1.0);
    CHECK(strata__schedule_lr(&s, 100) == 1.0);
    CHECK(strata__schedule_lr(&s, 101) == 0.5);
    CHECK(strata__schedule_lr(&s, 200) == 0.5);
    CHECK(strata__schedule_lr(&s, 201) == 0.1);
    CHECK(strata__schedule_lr(&s, 100000) == 0.1);
    CHECK(strata__schedule_initial(&s) == 1.0);
    /* factor instead of values; blanks separate as well as commas */
    const char *fac[] = { "optimizer.lr=0.2", "optimizer.schedule=step",
                          "optimizer.boundaries=10 20 30",
                          "optimizer.factor=0.5", NULL };
    CHECK(make(&s, 3.0, 0, fac) == 0);
    CHECK(near(strata__schedule_lr(&s, 10), 0.6));
    CHECK(near(strata__schedule_lr(&s, 11), 0.3));
    CHECK(near(strata__schedule_lr(&s, 25), 0.15));
    CHECK(near(strata__schedule_lr(&s, 31), 0.075));
    CHECK(near(strata__schedule_initial(&s), 0.6));
    char d[256];
    strata__schedule_describe(&s, d, sizeof d);
    CHECKF(strstr(d, ", kept to step 10, then 0.3 to step 20, 0.15 to step 30, "
                     "0.075"),
           "%s", d);
}

static void cosine(void)
{
    strata__schedule_t s;
    const char *sets[] = { "optimizer.lr=0.01", "optimizer.schedule=cosine",
                           "optimizer.decay_steps=200", "optimizer.alpha=0.1",
                           NULL };
    CHECK(make(&s, 1.0, 20, sets) == 0);
    for (int64_t k = 0; k < 400; k += 3) {
        double done = (double)(k < 200 ? k : 200);
        double want = 0.01 * ((1 - 0.1) * 0.5 * (1 + cos(M_PI * done / 200.0))
                              + 0.1);
        if (k < 20)
            want *= (double)(k + 1) / 20.0;
        CHECKF(near(strata__schedule_lr(&s, k), want), "cosine step %lld: %.17g, "
               "want %.17g", (long long)k, strata__schedule_lr(&s, k), want);
    }
    CHECK(near(strata__schedule_lr(&s, 200), 0.001));
    CHECK(near(strata__schedule_lr(&s, 5000), 0.001));
    char d[256];
    strata__schedule_describe(&s, d, sizeof d);
    CHECKF(strstr(d, "cosine decay to 0.001 over 200 steps"), "%s", d);
}

int main(void)
{
    constant_and_warmup();
    exponential();
    piecewise();
    cosine();
    return CHECK_DONE();
}
