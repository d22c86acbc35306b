/* The equivalence invariant of synchronous strategies: N replicas at global
 * batch B follow 1 replica at batch B within 1e-5 relative L2 distance per
 * variable after 50 steps, and every replica holds bitwise-equal variables
 * after every step (debug.check_sync makes the run fail otherwise). */
#include <math.h>

#include "check.h"
#include "dumps.h"
#include "spawn.h"

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
    dump_compare(one, two, "mirrored 2 replicas vs 1, batch 32", 1e-05);
    double mirrored_ratio = placed_ratio();

    /* central: one copy of the model, whatever the replica count. */
    char central[600];
    snprintf(central, sizeof central, "%s/central.bin", dir);
    CHECK(train_dump("central", "cpu:0, cpu:1", 32, central,
                     "debug.check_sync=true") == 0);
    dump_compare(one, central, "central 2 replicas vs 1, batch 32", 1e-05);
    double central_ratio = placed_ratio();
    /* Adam: variables + 2 slots. mirrored holds a copy of the variables
     * per replica and, its optimizer state sharded over the CPU replicas
     * (shard_optimizer = auto), the slots once. */
    CHECKF(central_ratio > 2.99 && central_ratio < 3.01, "central %.3f", central_ratio);
    CHECKF(mirrored_ratio > 3.99 && mirrored_ratio < 4.01, "mirrored %.3f", mirrored_ratio);
    unlink(central);

    /* Three replicas: the mean is no longer a power-of-two scaling. */
    CHECK(train_dump("mirrored", "cpu:0", 33, one33, "debug.check_sync=true") == 0);
    CHECK(train_dump("mirrored", "cpu:0, cpu:1, cpu:2", 33, three,
                     "debug.check_sync=true") == 0);
    dump_compare(one33, three, "mirrored 3 replicas vs 1, batch 33", 1e-05);

    /* The linear scaling rule: 2 replicas with lr_scaling = linear follow
     * 1 replica at twice the learning rate. */
    char lin[600], dbl[600];
    snprintf(lin, sizeof lin, "%s/linear.bin", dir);
    snprintf(dbl, sizeof dbl, "%s/double.bin", dir);
    CHECK(train_dump("mirrored", "cpu:0, cpu:1", 32, lin,
                     "train.lr_scaling=linear") == 0);
    CHECK(train_dump("mirrored", "cpu:0", 32, dbl, "optimizer.lr=0.002") == 0);
    dump_compare(dbl, lin, "lr_scaling=linear on 2 replicas vs lr x 2 on 1", 1e-05);

    /* Warm-up changes the run (a smaller step at first) and, like every
     * setting, keeps 2 replicas on the single-device path. */
    char w1[600], w2[600];
    snprintf(w1, sizeof w1, "%s/warm1.bin", dir);
    snprintf(w2, sizeof w2, "%s/warm2.bin", dir);
    CHECK(train_dump("mirrored", "cpu:0", 32, w1, "train.warmup_epochs=1") == 0);
    CHECK(train_dump("mirrored", "cpu:0, cpu:1", 32, w2,
                     "train.warmup_epochs=1") == 0);
    dump_compare(w1, w2, "warm-up: 2 replicas vs 1", 1e-05);
    size_t nw = 784 * 128 + 128 + 1280 + 10;
    float *a = dump_load(one, nw), *b = dump_load(w1, nw);
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
    float *x = dump_load(two, total), *y = dump_load(again, total);
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
