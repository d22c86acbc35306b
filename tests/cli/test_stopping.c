/* Where a run ends, as a user sees it through `strata train` and `strata
 * launch`:
 *  - max_steps: the header counts the epochs the run touches ("Epoch 2/2",
 *    not "2/5"), the cut epoch is validated, and a final checkpoint holds
 *    the last step;
 *  - early stopping (Keras' EarlyStopping as keys): one line says why and
 *    after which epoch, exit 0, a final checkpoint, under mirrored and
 *    central (val_loss and val_accuracy), mwms with 2 workers (only the
 *    chief's decision counts: both stop after the same epoch with the same
 *    variables) and ps (the coordinator ends the job, every step applied
 *    exactly once);
 *  - early stopping without validation is a configuration error (exit 2);
 *  - a non-finite loss (Keras' TerminateOnNaN, [train] on_nan = stop):
 *    the run stops within a segment of steps with one line (naming the
 *    epoch and step, suggesting a lower lr) and exit 1, no checkpoint
 *    after it, under mirrored, central, mwms (every worker alike) and ps
 *    (the coordinator's core decides on the losses its workers report;
 *    the wire carried no non-finite loss, and the job hung until its
 *    timeout); on_nan = ignore trains on. */
#include "check.h"
#include "dumps.h"
#include "spawn.h"
#include "testutil.h"

static char g_dir[] = "/tmp/strata-stopXXXXXX";
static spawn_result_t g_r;

/* 50 steps an epoch; validation on 500 samples. */
#define COMMON "--set", "data.limit_train=1600", "--set", "data.limit_test=500", \
    "--set", "train.progress=line", "--set", "train.devices=cpu:0, cpu:1"

static int run_(const char *cmd, char *const *args)
{
    return spawn_strata(cmd, args, 240, &g_r);
}
#define train(...) run_("train", (char *const[]){ COMMON, __VA_ARGS__, NULL })
#define launch(...) run_("launch", (char *const[]){ __VA_ARGS__, COMMON, NULL })

static char *ckdir(const char *name)
{
    static char buf[4][800];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, sizeof buf[0], "checkpoint.dir=%s/%s", g_dir, name);
    return p;
}

static int has_ckpt(const char *dir, long step)
{
    char p[900];
    snprintf(p, sizeof p, "%s/%s/ckpt-%010ld.safetensors", g_dir, dir, step);
    return file_exists(p);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

static void max_steps(void)
{
    /* 70 steps of 5 epochs: 50 + 20, the second cut and validated */
    CHECK(train("--set", "train.epochs=5", "--set", "train.max_steps=70",
                "--set", ckdir("ms"), "--set", "checkpoint.every_epochs=0")
          == 0);
    CHECKF(strstr(g_r.out, "Epoch 1/2 - 50 steps") &&
           strstr(g_r.out, "Epoch 2/2 - 20 steps") &&
           !strstr(g_r.out, "Epoch 1/5"), "%s", g_r.out);
    CHECKF(count(g_r.out, "val_loss: ") == 2, "%s", g_r.out);
    CHECK(strstr(g_r.out, "done: 2 epochs, test accuracy") != NULL);
    CHECK(has_ckpt("ms", 70) && !has_ckpt("ms", 50));
    /* the redrawn bar's header too */
    CHECK(train("--set", "train.epochs=5", "--set", "train.max_steps=70",
                "--set", "train.progress=bar", "--set", "train.eval=false")
          == 0);
    CHECKF(strstr(g_r.out, "Epoch 1/2\n") && strstr(g_r.out, "Epoch 2/2\n") &&
           !strstr(g_r.out, "Epoch 1/5"), "%s", g_r.out);
}

static void early_stopping(void)
{
    /* no improvement can be bigger than 10: the best stays epoch 1's, and
     * patience 2 ends the run after epoch 3 of 6 */
    CHECK(train("--set", "train.epochs=6", "--set",
                "train.early_stopping_patience=2", "--set",
                "train.early_stopping_min_delta=10", "--set", ckdir("es"),
                "--set", "checkpoint.every_epochs=0") == 0);
    CHECKF(count(g_r.out, "early stopping after epoch 3: val_loss has not "
                 "improved by more than 10 for 2 epochs") == 1 &&
           !strstr(g_r.out, "Epoch 4/") &&
           strstr(g_r.out, "done: 3 epochs"), "%s", g_r.out);
    CHECK(has_ckpt("es", 150) && !has_ckpt("es", 100));
    /* val_accuracy, central, patience 1 */
    CHECK(train("--set", "train.epochs=6", "--set", "strategy.plugin=central",
                "--set", "train.monitor=val_accuracy", "--set",
                "train.early_stopping_patience=1", "--set",
                "train.early_stopping_min_delta=1") == 0);
    CHECKF(count(g_r.out, "early stopping after epoch 2: val_accuracy") == 1 &&
           !strstr(g_r.out, "Epoch 3/"), "%s", g_r.out);
    /* a patience that never runs out changes nothing */
    CHECK(train("--set", "train.epochs=3", "--set",
                "train.early_stopping_patience=5", "--set",
                "train.early_stopping_min_delta=10") == 0);
    CHECK(!strstr(g_r.out, "early stopping") &&
          strstr(g_r.out, "done: 3 epochs"));
    /* nothing to watch */
    CHECK(train("--set", "train.eval=false", "--set",
                "train.early_stopping_patience=2") == 2);
    CHECKF(count(g_r.err, "error") == 1 &&
           strstr(g_r.err, "--set: [train] early_stopping_patience watches "
                  "[train] monitor = val_loss"), "%s", g_r.err);
}

static void multi_process(void)
{
    /* mwms: the chief decides and both workers stop after epoch 2 */
    CHECK(launch("-n", "2", "--set", "strategy.plugin=mwms", "--set",
                 "transport.plugin=zmq", "--set", "train.devices=cpu:0",
                 "--set", "train.epochs=5", "--set",
                 "train.early_stopping_patience=1", "--set",
                 "train.early_stopping_min_delta=10", "--set",
                 "debug.hash_vars=true", "--set", ckdir("mwms"), "--set",
                 "checkpoint.keep_best=true") == 0);
    CHECKF(count(g_r.out, "early stopping after epoch 2") == 1 &&
           strstr(g_r.out, "[worker:0] early stopping after epoch 2") &&
           !strstr(g_r.out, "Epoch 3/"), "%s", g_r.out);
    CHECKF(dump_hashes_equal(g_r.out, 2), "%s", g_r.out);
    CHECK(has_ckpt("mwms", 100) && !has_ckpt("mwms", 150));
    char best[900];
    snprintf(best, sizeof best, "%s/mwms/best.safetensors", g_dir);
    CHECK(file_exists(best));

    /* ps: the coordinator stops the job after epoch 2; the ps applied the
     * 100 steps scheduled, each once */
    CHECK(launch("--chief", "-n", "2", "--ps", "1", "--set",
                 "strategy.plugin=ps", "--set", "train.devices=cpu:0",
                 "--set", "train.epochs=5", "--set",
                 "train.early_stopping_patience=1", "--set",
                 "train.early_stopping_min_delta=10", "--set", ckdir("ps"))
          == 0);
    CHECKF(count(g_r.out, "early stopping after epoch 2") == 1 &&
           strstr(g_r.out, "[chief:0] early stopping after epoch 2") &&
           !strstr(g_r.out, "Epoch 3/"), "%s", g_r.out);
    CHECKF(strstr(g_r.err, "applied every one of the 100 scheduled steps "
                  "once"), "%s", g_r.err);
    CHECK(has_ckpt("ps", 100) && !has_ckpt("ps", 150));
}

static void diverged(void)
{
    /* lr 1e30: the loss is inf or nan from the first steps; a checkpoint
     * every 64 steps would come after the stop */
    CHECK(train("--set", "optimizer.lr=1e30", "--set", "train.epochs=2",
                "--set", ckdir("nan"), "--set",
                "checkpoint.every_steps=64") == 1);
    CHECKF(count(g_r.err, "error:") == 1 &&
           strstr(g_r.err, "the training loss is not finite: training "
                           "stopped ([train] on_nan = stop") &&
           strstr(g_r.err, "(STRATA_EDIVERGED)") &&
           !strstr(g_r.out, "Epoch 1/2 - 50 steps"), "%s%s", g_r.out,
           g_r.err);
    CHECK(!has_ckpt("nan", 64) && !has_ckpt("nan", 50));
    /* on_nan = ignore: it trains on to the end */
    CHECK(train("--set", "optimizer.lr=1e30", "--set", "train.epochs=1",
                "--set", "train.on_nan=ignore") == 0);
    CHECKF(strstr(g_r.out, "done: 1 epoch") && !strstr(g_r.err, "error"),
           "%s%s", g_r.out, g_r.err);
    /* central: the same line */
    CHECK(train("--set", "strategy.plugin=central", "--set",
                "optimizer.lr=1e30", "--set", "train.epochs=2") == 1);
    CHECKF(count(g_r.err, "error:") == 1 &&
           strstr(g_r.err, "epoch 1, step ") &&
           strstr(g_r.err, "lower [optimizer] lr (now 1e+30)"), "%s%s",
           g_r.out, g_r.err);
    /* mwms, 2 workers: both stop at the same boundary, exit 1 */
    CHECK(launch("-n", "2", "--set", "strategy.plugin=mwms", "--set",
                 "optimizer.lr=1e30", "--set", "train.epochs=2") == 1);
    CHECKF(count(g_r.err, "the training loss is not finite") == 1 &&
           count(g_r.err, "(STRATA_EDIVERGED)") >= 1 &&
           !strstr(g_r.err, "peer"), "%s%s", g_r.out, g_r.err);
    /* ps, 2 workers and a ps: the coordinator stops the job at the first
     * non-finite loss reported, every task ends with its code at once
     * (it waited for strategy.timeout_s), no checkpoint */
    double t0 = now_s();
    CHECK(launch("-n", "2", "--ps", "1", "--set", "strategy.plugin=ps",
                 "--set", "optimizer.lr=1e30", "--set", "train.epochs=2",
                 "--set", ckdir("nanps"), "--set",
                 "checkpoint.every_steps=64") == 1);
    CHECKF(count(g_r.err, "error:") == 1 &&
           count(g_r.err, "the training loss is not finite: training "
                          "stopped") == 1 &&
           count(g_r.err, "(STRATA_EDIVERGED)") >= 1 &&
           !strstr(g_r.err, "malformed message from") &&
           /* the workers take the coordinator's ABORT: its tag is theirs */
           !strstr(g_r.err, "dropped ABORT") && now_s() - t0 < 20,
           "%.1f s\n%s%s", now_s() - t0, g_r.out, g_r.err);
    CHECK(!has_ckpt("nanps", 64) && !has_ckpt("nanps", 50));
    /* ps, on_nan = ignore: trains on to the end */
    CHECK(launch("-n", "2", "--ps", "1", "--set", "strategy.plugin=ps",
                 "--set", "optimizer.lr=1e30", "--set", "train.epochs=1",
                 "--set", "train.on_nan=ignore") == 0);
}

int main(void)
{
    CHECK(mkdtemp(g_dir) != NULL);
    max_steps();
    early_stopping();
    multi_process();
    diverged();
    rm_tree(g_dir);
    return CHECK_DONE();
}
