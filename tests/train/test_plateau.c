/* [train] reduce_lr_patience (Keras' ReduceLROnPlateau) end to end through
 * the strata binary, on a job of 10 steps an epoch whose metric never
 * improves after epoch 1 (reduce_lr_min_delta = 10), so that the
 * reductions fall on known epochs:
 *  - patience 2, cooldown 2: reductions after epochs 3 and 6, the second
 *    stopped at reduce_lr_min_lr; one line each; the rate of every step
 *    (debug.dump_lr) and the metrics CSV's learning_rate say the same;
 *  - val_accuracy, patience 1, no cooldown: a reduction every epoch until
 *    the rate reaches min_lr, then none;
 *  - mirrored on 2 replicas and mwms on 2 workers (strata launch): the
 *    same rate at every step as 1 replica, bitwise-equal workers, the line
 *    printed once;
 *  - ps (a strategy that drives the job) refused before anything trains;
 *    a factor of 0 refused. */
#include "check.h"
#include "spawn.h"
#include "testutil.h"

#define COMMON "--set", "train.epochs=7", "--set", "data.limit_train=800",   \
    "--set", "data.limit_test=200", "--set", "train.batch_size=64",          \
    "--set", "data.validation_split=0.2", "--set", "train.progress=none",    \
    "--set", "optimizer.lr=0.01", "--set", "train.reduce_lr_patience=2",     \
    "--set", "train.reduce_lr_cooldown=2", "--set",                          \
    "train.reduce_lr_min_delta=10", "--set", "train.reduce_lr_min_lr=0.0005"

static spawn_result_t g_r;

static int run_(const char *cmd, char *const *args)
{
    return spawn_strata(cmd, args, 120, &g_r);
}
#define train(...) run_("train", (char *const[]){ COMMON, __VA_ARGS__, NULL })
#define launch(...) run_("launch", (char *const[]){ __VA_ARGS__, COMMON, NULL })

/* debug.dump_lr: every step's rate, in order, is want[step / 10]. */
static int rates(const char *file, const float *want, int epochs)
{
    FILE *f = fopen(file, "r");
    long long step;
    float lr;
    int n = 0, ok = f != NULL;
    while (ok && fscanf(f, "%lld %g", &step, &lr) == 2) {
        ok = step == n && step / 10 < epochs && lr == want[step / 10];
        if (!ok)
            fprintf(stderr, "%s: step %lld at %g\n", file, step, lr);
        n++;
    }
    if (f)
        fclose(f);
    return ok && n == 10 * epochs;
}

int main(void)
{
    tmp_make("plateau");
    static const float want[7] = { 0.01f, 0.01f, 0.01f, 0.001f, 0.001f,
                                   0.001f, 0.0005f };

    /* 1 replica: the lines, the rates, the CSV */
    CHECK(train("--set", "train.devices=cpu:0", "--set",
                set_path("debug.dump_lr", "one.txt"), "--set",
                set_path("train.metrics_csv", "m.csv")) == 0);
    CHECKF(strstr(g_r.out, "; x 0.1 after 2 epochs without improvement of "
                           "val_loss (reduce_lr_patience)"), "%s", g_r.out);
    CHECKF(strstr(g_r.out, "epoch 3: val_loss did not improve for 2 epochs; "
                           "learning rate 0.01 -> 0.001\n") &&
           strstr(g_r.out, "epoch 6: val_loss did not improve for 2 epochs; "
                           "learning rate 0.001 -> 0.0005\n") &&
           count_of(g_r.out, "did not improve") == 2, "%s", g_r.out);
    /* each line after its epoch's progress line */
    const char *e3 = strstr(g_r.out, "Epoch 3/7"), *e4 =
        strstr(g_r.out, "Epoch 4/7"), *l3 = strstr(g_r.out, "epoch 3: ");
    CHECK(!e3 || !e4 || (e3 < l3 && l3 < e4));
    CHECK(rates(tmp_path("one.txt"), want, 7));
    char *csv = read_all(tmp_path("m.csv"), NULL);
    CHECKF(csv && strstr(csv, ",wall_s,learning_rate\n"), "%s", csv);
    const char *col[7] = { 0 };
    for (int e = 0; csv && e < 7; e++) {
        char row[16];
        snprintf(row, sizeof row, "\n%d,", e + 1);
        const char *p = strstr(csv, row), *nl = p ? strchr(p + 1, '\n') : NULL;
        for (const char *q = p; q && q < nl; q++)
            if (*q == ',')
                col[e] = q + 1;
    }
    static const char *const want_csv[7] = { "0.01\n", "0.01\n", "0.01\n",
                                             "0.001\n", "0.001\n", "0.001\n",
                                             "0.0005\n" };
    for (int e = 0; e < 7; e++)
        CHECKF(col[e] && !strncmp(col[e], want_csv[e], strlen(want_csv[e])),
               "epoch %d: learning_rate %.12s", e + 1, col[e] ? col[e] : "-");
    free(csv);

    /* val_accuracy, patience 1, no cooldown, factor 0.5: 0.01 -> 0.005 ->
     * 0.0025 -> 0.002 (min_lr), then no more */
    CHECK(train("--set", "train.devices=cpu:0", "--set", "train.epochs=5",
                "--set", "train.monitor=val_accuracy", "--set",
                "train.reduce_lr_patience=1", "--set",
                "train.reduce_lr_cooldown=0", "--set",
                "train.reduce_lr_factor=0.5", "--set",
                "train.reduce_lr_min_lr=0.002", "--set",
                set_path("debug.dump_lr", "acc.txt")) == 0);
    CHECKF(strstr(g_r.out, "epoch 2: val_accuracy did not improve for 1 "
                           "epoch; learning rate 0.01 -> 0.005\n") &&
           strstr(g_r.out, "epoch 3: val_accuracy did not improve for 1 "
                           "epoch; learning rate 0.005 -> 0.0025\n") &&
           strstr(g_r.out, "epoch 4: val_accuracy did not improve for 1 "
                           "epoch; learning rate 0.0025 -> 0.002\n") &&
           count_of(g_r.out, "did not improve") == 3, "%s", g_r.out);
    static const float want_acc[5] = { 0.01f, 0.01f, 0.005f, 0.0025f,
                                       0.002f };
    CHECK(rates(tmp_path("acc.txt"), want_acc, 5));

    /* mirrored, 2 replicas: every step at 1 replica's rate */
    CHECK(train("--set", "train.devices=cpu:0, cpu:1", "--set",
                "debug.check_sync=true", "--set",
                set_path("debug.dump_lr", "two.txt")) == 0);
    CHECKF(same_file(tmp_path("one.txt"), tmp_path("two.txt")), "mirrored");
    CHECK(count_of(g_r.out, "did not improve") == 2);

    /* mwms, 2 workers: the chief decides, both reduce; one line */
    CHECK(launch("-n", "2", "--set", "strategy.plugin=mwms", "--set",
                 "train.devices=cpu:0", "--set", "debug.hash_vars=true",
                 "--set", set_path("debug.dump_lr", "mwms.txt")) == 0);
    CHECKF(same_file(tmp_path("one.txt"), tmp_path("mwms.txt.worker-0")) &&
           same_file(tmp_path("one.txt"), tmp_path("mwms.txt.worker-1")),
           "mwms workers' rates");
    CHECKF(count_of(g_r.out, "did not improve") == 2, "%s", g_r.out);
    const char *h0 = strstr(g_r.out, "hash (rank 0): "),
               *h1 = strstr(g_r.out, "hash (rank 1): ");
    CHECKF(h0 && h1 && !strncmp(h0 + 15, h1 + 15, 16), "%s", g_r.out);

    /* ps drives the job: refused before anything trains */
    CHECK(launch("--chief", "-n", "2", "--ps", "1", "--set",
                 "strategy.plugin=ps", "--set", "train.devices=cpu:0") != 0);
    CHECKF(strstr(g_r.err, "[train] reduce_lr_patience = 2 is not for this "
                           "job: its strategy drives the job") &&
           !strstr(g_r.out, "Epoch 1/7"), "%s%s", g_r.out, g_r.err);

    /* hostile: a factor of 0 */
    CHECK(train("--set", "train.reduce_lr_factor=0") == 2);
    CHECKF(strstr(g_r.err, "[train] reduce_lr_factor = '0': expected a number "
                           "in [1e-12, 0.999999]") &&
           count_of(g_r.err, "error") == 1, "%s", g_r.err);

    tmp_cleanup();
    return CHECK_DONE();
}
