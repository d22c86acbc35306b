/* The equivalence invariant of synchronous strategies: N replicas at global
 * batch B follow 1 replica at batch B within 1e-5 relative L2 distance per
 * variable after 50 steps, and every replica holds bitwise-equal variables
 * after every step (debug.check_sync makes the run fail otherwise). */
#include <math.h>

#include "check.h"
#include "spawn.h"

#define NVARS 4
static const size_t k_counts[NVARS] = { 784 * 128, 128, 128 * 10, 10 };
static spawn_result_t g_last;

static int train_dump(const char *strategy, const char *devices, int batch,
                      const char *dump, const char *extra)
{
    char dev[128], bs[64], dv[512], st[128];
    snprintf(dev, sizeof dev, "train.devices=%s", devices);
    snprintf(bs, sizeof bs, "train.batch_size=%d", batch);
    snprintf(dv, sizeof dv, "debug.dump_vars=%s", dump);
    snprintf(st, sizeof st, "strategy.plugin=%s", strategy);
    char *argv[] = { (char *)spawn_strata_bin(), "train",
                     "--set", "train.max_steps=50", "--set", "train.epochs=1",
                     "--set", "train.eval=false", "--set", "train.progress=none",
                     "--set", "model.layers=dense 128 relu, dense 10",
                     "--set", "data.limit_train=4000", "--set", dev,
                     "--set", bs, "--set", dv, "--set", st,
                     "--set", (char *)extra, NULL };
    spawn_run(argv, 120, &g_last);
    if (g_last.code != 0)
        fprintf(stderr, "strata (%s, %s) exited %d:\n%s\n", strategy, devices,
                g_last.code, g_last.err);
    return g_last.code;
}

/* Bytes the strategy placed, from the banner of the last run. */
static double placed_ratio(void)
{
    const char *p = strstr(g_last.out, "bytes of variables and optimizer state (");
    return p ? atof(p + strlen("bytes of variables and optimizer state (")) : -1;
}

static float *load(const char *path, size_t n)
{
    float *v = malloc(n * sizeof *v);
    FILE *f = fopen(path, "rb");
    if (!f || fread(v, sizeof *v, n, f) != n) {
        if (f)
            fclose(f);
        free(v);
        return NULL;
    }
    fclose(f);
    return v;
}

/* Relative L2 distance per variable between two dumps. */
static void compare(const char *a_path, const char *b_path, const char *what)
{
    size_t total = 0;
    for (int i = 0; i < NVARS; i++)
        total += k_counts[i];
    float *a = load(a_path, total), *b = load(b_path, total);
    CHECKF(a && b, "%s: dumps missing", what);
    if (!a || !b) {
        free(a);
        free(b);
        return;
    }
    size_t at = 0;
    for (int i = 0; i < NVARS; i++) {
        double d = 0, n = 0;
        for (size_t j = 0; j < k_counts[i]; j++) {
            double x = a[at + j], y = b[at + j];
            d += (x - y) * (x - y);
            n += x * x;
        }
        double rel = sqrt(d) / (sqrt(n) > 0 ? sqrt(n) : 1.0);
        printf("%s: variable %d: relative L2 distance %.3g\n", what, i, rel);
        CHECKF(rel <= 1e-5, "%s: variable %d differs by %.3g", what, i, rel);
        at += k_counts[i];
    }
    /* The run must have moved away from the initial values. */
    free(a);
    free(b);
}

int main(void)
{
    char dir[] = "/tmp/strata-equivXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char one[600], two[600], three[600], one33[600];
    snprintf(one, sizeof one, "%s/one.bin", dir);
    snprintf(two, sizeof two, "%s/two.bin", dir);
    snprintf(three, sizeof three, "%s/three.bin", dir);
    snprintf(one33, sizeof one33, "%s/one33.bin", dir);

    CHECK(train_dump("mirrored", "cpu:0", 32, one, "debug.check_sync=true") == 0);
    CHECK(train_dump("mirrored", "cpu:0, cpu:1", 32, two,
                     "debug.check_sync=true") == 0);
    compare(one, two, "mirrored 2 replicas vs 1, batch 32");
    double mirrored_ratio = placed_ratio();

    /* central: one copy of the model, whatever the replica count. */
    char central[600];
    snprintf(central, sizeof central, "%s/central.bin", dir);
    CHECK(train_dump("central", "cpu:0, cpu:1", 32, central,
                     "debug.check_sync=true") == 0);
    compare(one, central, "central 2 replicas vs 1, batch 32");
    double central_ratio = placed_ratio();
    /* Adam: variables + 2 slots. mirrored holds that per replica. */
    CHECKF(central_ratio > 2.99 && central_ratio < 3.01, "central %.3f", central_ratio);
    CHECKF(mirrored_ratio > 5.99 && mirrored_ratio < 6.01, "mirrored %.3f", mirrored_ratio);
    unlink(central);

    /* Three replicas: the mean is no longer a power-of-two scaling. */
    CHECK(train_dump("mirrored", "cpu:0", 33, one33, "debug.check_sync=true") == 0);
    CHECK(train_dump("mirrored", "cpu:0, cpu:1, cpu:2", 33, three,
                     "debug.check_sync=true") == 0);
    compare(one33, three, "mirrored 3 replicas vs 1, batch 33");

    /* The linear scaling rule: 2 replicas with lr_scaling = linear follow
     * 1 replica at twice the learning rate. */
    char lin[600], dbl[600];
    snprintf(lin, sizeof lin, "%s/linear.bin", dir);
    snprintf(dbl, sizeof dbl, "%s/double.bin", dir);
    CHECK(train_dump("mirrored", "cpu:0, cpu:1", 32, lin,
                     "train.lr_scaling=linear") == 0);
    CHECK(train_dump("mirrored", "cpu:0", 32, dbl, "optimizer.lr=0.002") == 0);
    compare(dbl, lin, "lr_scaling=linear on 2 replicas vs lr x 2 on 1");

    /* Warm-up changes the run (a smaller step at first) and, like every
     * setting, keeps 2 replicas on the single-device path. */
    char w1[600], w2[600];
    snprintf(w1, sizeof w1, "%s/warm1.bin", dir);
    snprintf(w2, sizeof w2, "%s/warm2.bin", dir);
    CHECK(train_dump("mirrored", "cpu:0", 32, w1, "train.warmup_epochs=1") == 0);
    CHECK(train_dump("mirrored", "cpu:0, cpu:1", 32, w2,
                     "train.warmup_epochs=1") == 0);
    compare(w1, w2, "warm-up: 2 replicas vs 1");
    size_t nw = 784 * 128 + 128 + 1280 + 10;
    float *a = load(one, nw), *b = load(w1, nw);
    CHECK(a && b && memcmp(a, b, nw * sizeof *a) != 0);
    free(a);
    free(b);
    unlink(lin);
    unlink(dbl);
    unlink(w1);
    unlink(w2);

    /* Same config twice: bitwise identical (determinism). */
    char again[600];
    snprintf(again, sizeof again, "%s/again.bin", dir);
    CHECK(train_dump("mirrored", "cpu:0, cpu:1", 32, again,
                     "debug.check_sync=true") == 0);
    size_t total = 784 * 128 + 128 + 1280 + 10;
    float *x = load(two, total), *y = load(again, total);
    CHECK(x && y && memcmp(x, y, total * sizeof *x) == 0);
    free(x);
    free(y);

    unlink(one);
    unlink(two);
    unlink(three);
    unlink(one33);
    unlink(again);
    rmdir(dir);
    return CHECK_DONE();
}
