/* [train] restore_best_weights end to end through the strata binary: the
 * run ends with its best epoch's variables -- bitwise those of a run that
 * stopped at that epoch --, scores the test set with them, under mirrored
 * and mwms (through strata launch); a job it cannot serve (ps) is refused
 * with one line, nothing trained. */
#include "check.h"
#include "dumps.h"
#include "spawn.h"

/* lr 0.02 on 3000 samples: val_loss is best at epoch 3 of 6 (seed 42) */
#define COMMON "--set", "train.progress=none", "--set", "optimizer.lr=0.02",  \
               "--set", "data.limit_train=3000", "--set",                    \
               "data.limit_test=1000", "--set", "data.validation_split=0.2", \
               "--set", "train.devices=cpu:0, cpu:1"

static spawn_result_t g_r;
static char g_dir[] = "/tmp/strata-bestXXXXXX";

static int run_(const char *cmd, char *const *args)
{
    return spawn_strata(cmd, args, 240, &g_r);
}
#define train(...) run_("train", (char *const[]){ __VA_ARGS__, COMMON, NULL })
#define launch(...) run_("launch", (char *const[]){ __VA_ARGS__, COMMON, NULL })

static char *path(const char *name)
{
    static char buf[4][700];
    static int i;
    char *p = buf[i++ % 4];
    snprintf(p, 700, "%s/%s", g_dir, name);
    return p;
}

static char *set(const char *key, const char *value)
{
    static char buf[4][800];
    static int i;
    char *p = buf[i++ % 4];
    snprintf(p, 800, "%s=%s", key, value);
    return p;
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

    CHECK(train("--set", "train.epochs=6", "--set",
                "train.restore_best_weights=true", "--set",
                set("debug.dump_vars", path("best.bin"))) == 0);
    int epoch = 0;
    const char *r = strstr(g_r.out, "restored the variables of epoch ");
    if (r)
        epoch = atoi(r + strlen("restored the variables of epoch "));
    CHECKF(epoch >= 1 && epoch < 6, "%s", g_r.out);
    char tail[64];
    snprintf(tail, sizeof tail, "(the variables of epoch %d)", epoch);
    CHECKF(strstr(g_r.out, "done: 6 epochs, test accuracy ") &&
           strstr(g_r.out, tail), "%s", g_r.out);

    /* ... bitwise the variables of a run that ended at that epoch */
    char epochs[64];
    snprintf(epochs, sizeof epochs, "train.epochs=%d", epoch);
    CHECK(train("--set", epochs, "--set",
                set("debug.dump_vars", path("short.bin"))) == 0);
    CHECKF(same_file(path("best.bin"), path("short.bin")),
           "restored variables differ from epoch %d's", epoch);
    /* ... and not the last epoch's */
    CHECK(train("--set", "train.epochs=6", "--set",
                set("debug.dump_vars", path("last.bin"))) == 0);
    CHECKF(!same_file(path("best.bin"), path("last.bin")),
           "restore_best_weights ended on the last epoch");

    /* mwms, 2 workers: both end on the same (best) variables */
    CHECK(launch("-n", "2", "--set", "strategy.plugin=mwms", "--set",
                 "train.epochs=6", "--set", "train.restore_best_weights=true",
                 "--set", "debug.hash_vars=true") == 0);
    CHECKF(dump_hashes_equal(g_r.out, 2) &&
           strstr(g_r.out, "restored the variables of epoch "), "%s", g_r.out);

    /* ps drives the job: refused before anything trains */
    CHECK(launch("--chief", "-n", "2", "--ps", "1", "--set",
                 "strategy.plugin=ps", "--set", "train.epochs=2", "--set",
                 "train.restore_best_weights=true") != 0);
    CHECKF(strstr(g_r.err, "[train] restore_best_weights = true is not for "
                           "this job: its strategy drives the job") &&
           !strstr(g_r.out, "Epoch 1/2"), "%s%s", g_r.out, g_r.err);

    char cmd[800];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    CHECK(system(cmd) == 0);
    return CHECK_DONE();
}
