/* A real validation set ([data] validation_split), end to end through the
 * strata binary: what trains and what validates are the same samples on
 * every replica, every worker and across a resume; val_* are the held-out
 * samples' figures and the test set is scored once, at the end; a job
 * without one says so; a strategy that drives the job (ps) validates on the
 * split and leaves the test set to strata eval. */
#include <math.h>

#include "check.h"
#include "dumps.h"
#include "spawn.h"

#define COMMON "--set", "train.epochs=2", "--set", "train.progress=none", \
               "--set", "model.layers=dense 128 relu, dense 10",         \
               "--set", "data.limit_train=3000", "--set",                  \
               "data.limit_test=1000", "--set", "train.batch_size=50"
#define SPLIT "--set", "data.validation_split=0.2"

static spawn_result_t g_r;
static char g_dir[] = "/tmp/strata-valXXXXXX";

static int run_(const char *cmd, char *const *args, int timeout_s)
{
    return spawn_strata(cmd, args, timeout_s, &g_r);
}
#define train(...) run_("train", (char *const[]){ __VA_ARGS__, COMMON, NULL }, 240)
#define launch(...) run_("launch", (char *const[]){ __VA_ARGS__, COMMON, NULL }, 240)

static char *path(const char *name)
{
    static char buf[8][700];
    static int i;
    char *p = buf[i++ % 8];
    snprintf(p, 700, "%s/%s", g_dir, name);
    return p;
}

static char *set(const char *key, const char *value)
{
    static char buf[8][800];
    static int i;
    char *p = buf[i++ % 8];
    snprintf(p, 800, "%s=%s", key, value);
    return p;
}

/* The figure after `label` in the last line that has it. */
static double figure(const char *text, const char *label)
{
    const char *p = NULL;
    for (const char *q = text; (q = strstr(q, label)); q++)
        p = q;
    return p ? atof(p + strlen(label)) : -1.0;
}

static int same_file(const char *a, const char *b)
{
    size_t n = dump_total();
    float *x = dump_load(a, n), *y = dump_load(b, n);
    int same = x && y && memcmp(x, y, n * sizeof *x) == 0;
    free(x);
    free(y);
    return same;
}

int main(void)
{
    CHECK(mkdtemp(g_dir) != NULL);

    /* One replica; then two: the same split, equivalent training. */
    CHECK(train(SPLIT, "--set", "train.devices=cpu:0", "--set",
                set("debug.dump_vars", path("one.bin"))) == 0);
    CHECKF(strstr(g_r.out, "done: 2 epochs, test accuracy ") &&
           strstr(g_r.out, " (val_accuracy "), "%s", g_r.out);
    CHECKF(!strstr(g_r.err, "no validation set"), "%s", g_r.err);
    /* 3000 samples, 600 held out: 2400 train, 48 steps of 50 an epoch */
    CHECKF(strstr(g_r.out, "2400 training samples"), "%s", g_r.out);
    double val = figure(g_r.out, "(val_accuracy "),
           test = figure(g_r.out, "test accuracy ");
    CHECKF(val > 0.5 && val <= 1.0 && test > 0.5 && test <= 1.0,
           "val %g test %g", val, test);

    CHECK(train(SPLIT, "--set", "train.devices=cpu:0, cpu:1", "--set",
                "debug.check_sync=true", "--set",
                set("debug.dump_vars", path("two.bin"))) == 0);
    dump_compare(path("one.bin"), path("two.bin"),
                 "validation_split: 2 replicas vs 1", 1e-5);

    /* The split is a function of the seed: a run again trains the same
     * bits; another seed holds out other samples. */
    CHECK(train(SPLIT, "--set", "train.devices=cpu:0", "--set",
                set("debug.dump_vars", path("again.bin"))) == 0);
    CHECKF(same_file(path("one.bin"), path("again.bin")),
           "the same job twice trained different variables");
    CHECK(train(SPLIT, "--set", "train.devices=cpu:0", "--set",
                "train.seed=7", "--set",
                set("debug.dump_vars", path("seed7.bin"))) == 0);
    CHECKF(!same_file(path("one.bin"), path("seed7.bin")),
           "another seed trained the same variables");

    /* eval off: the same samples train (the split does not follow eval) */
    CHECK(train(SPLIT, "--set", "train.devices=cpu:0", "--set",
                "train.eval=false", "--set",
                set("debug.dump_vars", path("noeval.bin"))) == 0);
    CHECKF(same_file(path("one.bin"), path("noeval.bin")),
           "train.eval=false trained on other samples");

    /* Interrupted after epoch 1 and resumed: the same bits. */
    CHECK(train(SPLIT, "--set", "train.devices=cpu:0", "--set",
                "train.max_steps=48", "--set",
                set("checkpoint.dir", path("ck"))) == 0);
    CHECK(train(SPLIT, "--set", "train.devices=cpu:0", "--set",
                set("checkpoint.dir", path("ck")), "--set",
                set("debug.dump_vars", path("resumed.bin"))) == 0);
    CHECKF(strstr(g_r.err, "resum") || strstr(g_r.out, "resum"),
           "no resume: %s%s", g_r.out, g_r.err);
    CHECKF(same_file(path("one.bin"), path("resumed.bin")),
           "a resumed run trained other variables");

    /* mwms, 2 workers through strata launch: the same split on both. */
    CHECK(launch("-n", "2", SPLIT, "--set", "strategy.plugin=mwms", "--set",
                 "train.devices=cpu:0", "--set", "debug.hash_vars=true") == 0);
    CHECKF(dump_hashes_equal(g_r.out, 2), "%s", g_r.out);
    CHECKF(strstr(g_r.out, "done: 2 epochs, test accuracy ") &&
           strstr(g_r.out, " (val_accuracy "), "%s", g_r.out);

    /* ps validates on the split, and says where the test set is scored. */
    CHECK(launch("--chief", "-n", "2", "--ps", "1", SPLIT, "--set",
                 "strategy.plugin=ps", "--set", "train.devices=cpu:0") == 0);
    CHECKF(strstr(g_r.out, "done: 2 epochs, val_accuracy ") &&
           strstr(g_r.out, "strata eval"), "%s", g_r.out);

    /* No validation set: today's behaviour, and one warning naming it. */
    CHECK(train("--set", "train.devices=cpu:0") == 0);
    const char *w = strstr(g_r.err, "no validation set");
    CHECKF(w && !strstr(w + 1, "no validation set"), "%s", g_r.err);
    CHECKF(strstr(g_r.out, "done: 2 epochs, test accuracy ") &&
           !strstr(g_r.out, "val_accuracy 0"), "%s", g_r.out);

    /* Hostile: a split that leaves nothing to validate on; nothing written */
    CHECK(train("--set", "data.validation_split=0.0001", "--set",
                set("checkpoint.dir", path("bad"))) != 0);
    CHECKF(strstr(g_r.err, "leaves 0 to validate on"), "%s", g_r.err);
    CHECKF(access(path("bad"), F_OK) != 0, "a refused run created its dir");

    char cmd[800];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    CHECK(system(cmd) == 0);
    return CHECK_DONE();
}
