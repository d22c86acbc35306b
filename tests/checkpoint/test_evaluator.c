/* The sidecar evaluator (a task of type evaluator), end to end through the
 * strata binary, the way a TF user runs one: the same INI, [cluster] naming
 * a worker and an evaluator, `strata train --task evaluator:0` beside the
 * training task.
 *
 *   - started before training: it scores each checkpoint as it appears (one
 *     row per checkpoint, steps increasing), the last one being training's
 *     last step, then exits 0; that last score equals the trainer's own
 *     validation of its final epoch (same weights, same test set);
 *   - started after training ended: it scores the final checkpoint and
 *     exits at once;
 *   - [checkpoint] dir unset: one error naming the key, non-zero exit;
 *   - an empty directory and [evaluator] timeout_s = 1: one error naming
 *     timeout_s, non-zero exit, within seconds;
 *   - SIGTERM while waiting: it stops promptly;
 *   - `strata launch --evaluator` beside an mwms and a ps job: it scores the
 *     final checkpoint and finishes with the job; one that fails (no
 *     [checkpoint] dir) does not stop training, and its code is launch's;
 *   - training stopped early (early stopping after epoch 2 of 3): its
 *     final checkpoint says so (strata.final) and the evaluator exits 0
 *     after scoring it, rather than waiting for step 48;
 *   - with [train] tensorboard, its scores read back with TensorBoard's
 *     reader from DIR/evaluation at the training steps (eval_tb.py; that
 *     check is skipped without the tensorboard package). */
#include <math.h>
#include <signal.h>
#include <sys/stat.h>

#include "check.h"
#include "ckpt_util.h"
#include "spawn.h"

#define EPOCHS 3
#define LIMIT 512
#define BATCH 32
#define LAST_STEP (EPOCHS * (LIMIT / BATCH))

static char g_out[65536], g_err[65536];
static char g_dir[256], g_cluster_w[64], g_cluster_e[64], g_ckdir[300];
static char g_eval_csv[300], g_train_csv[300];

#define COMMON "--set", "train.progress=none", "--set", "data.limit_train=512",\
               "--set", "data.limit_test=256", "--set", "train.batch_size=32", \
               "--set", "train.devices=cpu:0", "--set", "train.epochs=3",     \
               "--set", "model.layers=dense 16 relu, dense 10",               \
               "--set", g_cluster_w, "--set", g_cluster_e

static char *set_kv(char *buf, size_t n, const char *k, const char *v)
{
    snprintf(buf, n, "%s=%s", k, v);
    return buf;
}

static void start(spawn_child_t *c, char *const *args)
{
    char *argv[64] = { (char *)spawn_strata_bin(), "train" };
    int n = 2;
    for (int i = 0; args[i] && n < 63; i++)
        argv[n++] = args[i];
    CHECK(spawn_start(argv, NULL, c) == 0);
}

static int finish(spawn_child_t *c, double timeout_s)
{
    spawn_wait(c, timeout_s);
    spawn_collect(c, g_out, sizeof g_out, g_err, sizeof g_err);
    return c->code;
}

/* The rows of a CSV after its header: up to `max` lines into rows. */
static int csv_rows(const char *path, char rows[][256], int max)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[256];
    int n = -1;
    while (fgets(line, sizeof line, f)) {
        if (n >= 0 && n < max)
            snprintf(rows[n], 256, "%s", line);
        n++;
    }
    fclose(f);
    return n < 0 ? 0 : n;
}

/* Lines of s that contain `what`. */
static int count_lines_with(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)) != NULL; p++)
        n++;
    return n;
}

static void reset_dir(void)
{
    rm_tree(g_ckdir);
    CHECK(mkdir(g_ckdir, 0700) == 0);
    unlink(g_eval_csv);
    unlink(g_train_csv);
}

static void test_alongside(void)
{
    reset_dir();
    char ck[400], ecsv[400], tcsv[400];
    set_kv(ck, sizeof ck, "checkpoint.dir", g_ckdir);
    set_kv(ecsv, sizeof ecsv, "evaluator.metrics_csv", g_eval_csv);
    set_kv(tcsv, sizeof tcsv, "train.metrics_csv", g_train_csv);
    spawn_child_t ev, tr;
    start(&ev, (char *const[]){ COMMON, "--set", ck, "--set", ecsv,
                                "--set", "evaluator.poll_ms=20",
                                "--task", "evaluator:0", NULL });
    start(&tr, (char *const[]){ COMMON, "--set", ck, "--set", tcsv,
                                "--task", "worker:0", NULL });
    CHECKF(finish(&tr, 180) == 0, "trainer: %s", g_err);
    int code = finish(&ev, 60);
    CHECKF(code == 0, "evaluator exit %d: %s", code, g_err);
    CHECKF(strstr(g_out, "evaluator: done"), "evaluator stdout: %s", g_out);

    char rows[16][256];
    int n = csv_rows(g_eval_csv, rows, 16);
    CHECKF(n >= 1 && n <= EPOCHS, "%d evaluator rows", n);
    long long prev = -1, step = 0;
    int epoch = 0;
    double eloss = 0, eacc = 0;
    for (int i = 0; i < n && i < 16; i++) {
        CHECKF(sscanf(rows[i], "%lld,%d,%lf,%lf", &step, &epoch, &eloss,
                      &eacc) == 4, "row '%s'", rows[i]);
        CHECKF(step > prev, "steps not increasing: %lld after %lld", step, prev);
        prev = step;
    }
    CHECKF(step == LAST_STEP && epoch == EPOCHS, "last row: step %lld epoch %d",
           step, epoch);

    char trows[16][256];
    int tn = csv_rows(g_train_csv, trows, 16);
    CHECKF(tn == EPOCHS, "%d trainer rows", tn);
    if (tn == EPOCHS) {
        int te;
        long long ts;
        double tl, ta, vl, va;
        CHECKF(sscanf(trows[EPOCHS - 1], "%d,%lld,%lf,%lf,%lf,%lf", &te, &ts,
                      &tl, &ta, &vl, &va) == 6, "row '%s'", trows[EPOCHS - 1]);
        /* the same weights on the same samples: only the summation order
         * of the loss differs (other batch splits) */
        CHECKF(fabs(vl - eloss) <= 1e-4 * fmax(1.0, vl), "loss %g vs %g", vl,
               eloss);
        CHECKF(fabs(va - eacc) <= 1.5 / 256, "accuracy %g vs %g", va, eacc);
    }
}

static void test_after(const char *script)
{
    /* the directory of test_alongside: training is over */
    char ck[400], ecsv[400], tb[400], tbdir[300];
    snprintf(tbdir, sizeof tbdir, "%s/tb", g_dir);
    set_kv(ck, sizeof ck, "checkpoint.dir", g_ckdir);
    set_kv(ecsv, sizeof ecsv, "evaluator.metrics_csv", g_eval_csv);
    set_kv(tb, sizeof tb, "train.tensorboard", tbdir);
    spawn_child_t ev;
    start(&ev, (char *const[]){ COMMON, "--set", ck, "--set", ecsv, "--set",
                                tb, "--task", "evaluator:0", NULL });
    int code = finish(&ev, 60);
    CHECKF(code == 0, "exit %d: %s", code, g_err);
    char rows[4][256];
    CHECKF(csv_rows(g_eval_csv, rows, 4) == 1, "one row expected");
    long long step = 0;
    double loss = 0, acc = 0;
    CHECK(sscanf(rows[0], "%lld,%*d,%lf,%lf", &step, &loss, &acc) == 3 &&
          step == LAST_STEP);

    char py[4096];
    if (find_python(py, sizeof py) != 0) {
        printf("SKIPPED: no python3 to read the TensorBoard files\n");
        return;
    }
    char *argv[] = { py, (char *)script, tbdir, NULL };
    spawn_result_t *r = malloc(sizeof *r);
    CHECK(r && spawn_run(argv, 120, r) == 0);
    if (r && r->code == 77) {
        printf("%s", r->out); /* SKIPPED: ... (the rest still counts) */
    } else if (r) {
        long long tstep = -1;
        double tloss = -1, tacc = -1;
        CHECKF(r->code == 0 && sscanf(r->out, "%lld %lf %lf", &tstep, &tloss,
                                      &tacc) == 3,
               "eval_tb.py exit %d: %s%s", r->code, r->out, r->err);
        CHECKF(tstep == LAST_STEP && fabs(tloss - loss) < 1e-5 &&
                   fabs(tacc - acc) < 1e-5,
               "tensorboard: %lld %g %g vs csv %lld %g %g", tstep, tloss, tacc,
               step, loss, acc);
    }
    free(r);
}

static void test_early_stop(void)
{
    reset_dir();
    char ck[400], ecsv[400];
    set_kv(ck, sizeof ck, "checkpoint.dir", g_ckdir);
    set_kv(ecsv, sizeof ecsv, "evaluator.metrics_csv", g_eval_csv);
    spawn_child_t ev, tr;
    start(&ev, (char *const[]){ COMMON, "--set", ck, "--set", ecsv,
                                "--set", "evaluator.poll_ms=20",
                                "--task", "evaluator:0", NULL });
    start(&tr, (char *const[]){ COMMON, "--set", ck, "--set",
                                "train.early_stopping_patience=1", "--set",
                                "train.early_stopping_min_delta=10",
                                "--task", "worker:0", NULL });
    CHECKF(finish(&tr, 180) == 0 && strstr(g_out, "early stopping after "
                                           "epoch 2"), "trainer: %s%s", g_out,
           g_err);
    int code = finish(&ev, 60);
    CHECKF(code == 0 && strstr(g_out, "evaluator: done"), "evaluator exit "
           "%d: %s%s", code, g_out, g_err);
    char rows[16][256];
    int n = csv_rows(g_eval_csv, rows, 16);
    long long step = 0;
    CHECKF(n >= 1 && n <= 2 && sscanf(rows[n - 1], "%lld", &step) == 1 &&
           step == 2 * (LIMIT / BATCH), "%d rows, last step %lld", n, step);
}

static void test_errors(void)
{
    spawn_child_t ev;
    start(&ev, (char *const[]){ COMMON, "--task", "evaluator:0", NULL });
    int code = finish(&ev, 60);
    CHECKF(code != 0 && strstr(g_err, "[checkpoint] dir") &&
               count_lines_with(g_err, ": error: ") == 1,
           "no dir: exit %d: %s", code, g_err);

    reset_dir();
    char ck[400];
    set_kv(ck, sizeof ck, "checkpoint.dir", g_ckdir);
    start(&ev, (char *const[]){ COMMON, "--set", ck, "--set",
                                "evaluator.timeout_s=1", "--set",
                                "evaluator.poll_ms=50", "--task",
                                "evaluator:0", NULL });
    code = finish(&ev, 30);
    CHECKF(code != 0 && strstr(g_err, "timeout_s") &&
               count_lines_with(g_err, ": error: ") == 1,
           "timeout: exit %d: %s", code, g_err);

    start(&ev, (char *const[]){ COMMON, "--set", ck, "--task", "evaluator:0",
                                NULL });
    usleep(1500 * 1000); /* it is waiting (timeout_s is 600) */
    kill(ev.pid, SIGTERM);
    double waited = spawn_wait(&ev, 30);
    spawn_collect(&ev, g_out, sizeof g_out, g_err, sizeof g_err);
    CHECKF(waited < 20 && ev.code != 0 && strstr(g_err, "stopped on request"),
           "SIGTERM: exit %d after %.1f s: %s", ev.code, waited, g_err);
}

static int launch(char *const *args, spawn_result_t *r)
{
    char *argv[48] = { (char *)spawn_strata_bin(), "launch" };
    int n = 2;
    for (int i = 0; args[i] && n < 46; i++)
        argv[n++] = args[i];
    spawn_run(argv, 240, r);
    return r->timed_out ? -2 : r->code;
}

#define LAUNCHED "--set", "train.progress=none", "--set",                   \
                 "data.limit_train=1024", "--set", "data.limit_test=256",    \
                 "--set", "train.devices=cpu:0", "--set", "train.epochs=2",  \
                 "--set", "model.layers=dense 16 relu, dense 10"

static void test_launch(void)
{
    char ck[400];
    set_kv(ck, sizeof ck, "checkpoint.dir", g_ckdir);
    spawn_result_t *r = malloc(sizeof *r);
    if (!r)
        return;
    static const char *const plugins[] = { "strategy.plugin=mwms",
                                           "strategy.plugin=ps" };
    for (int k = 0; k < 2; k++) {
        reset_dir();
        int code = k == 0
            ? launch((char *const[]){ "-n", "2", "--evaluator", LAUNCHED,
                                      "--set", (char *)plugins[k], "--set",
                                      ck, NULL }, r)
            : launch((char *const[]){ "-n", "2", "--ps", "1", "--chief",
                                      "--evaluator", LAUNCHED, "--set",
                                      (char *)plugins[k], "--set", ck, NULL },
                     r);
        CHECKF(code == 0 && strstr(r->out, "[evaluator:0] evaluator: done") &&
                   strstr(r->out, "(epoch 2, step 64)") &&
                   strstr(r->out, "[launch] evaluator:0 finished"),
               "%s: exit %d\n%s\n%s", plugins[k], code, r->out, r->err);
    }
    /* [data] validation_split: the evaluator scores the held-out samples,
     * the very figure the workers validate on at the end (768 training
     * samples: 24 steps of 32 an epoch). */
    reset_dir();
    int vcode = launch((char *const[]){ "-n", "2", "--evaluator", LAUNCHED,
                                        "--set", "strategy.plugin=mwms",
                                        "--set", "data.validation_split=0.25",
                                        "--set", ck, NULL }, r);
    const char *ev = strstr(r->out, "(epoch 2, step 48): validation loss ");
    const char *acc = ev ? strstr(ev, "validation accuracy ") : NULL;
    const char *done = strstr(r->out, "(val_accuracy ");
    CHECKF(vcode == 0 && acc && done &&
               strncmp(acc + strlen("validation accuracy "),
                       done + strlen("(val_accuracy "), 6) == 0,
           "validation_split: exit %d\n%s\n%s", vcode, r->out, r->err);
    /* an evaluator that cannot work: training finishes, launch says so */
    int code = launch((char *const[]){ "-n", "2", "--evaluator", LAUNCHED,
                                       "--set", "strategy.plugin=mwms", NULL },
                      r);
    CHECKF(code == 2 && strstr(r->err, "evaluator:0 failed (exit 2); training "
                               "goes on") &&
               strstr(r->out, "[launch] worker:0 finished") &&
               strstr(r->out, "[launch] worker:1 finished"),
           "failing evaluator: exit %d\n%s\n%s", code, r->out, r->err);
    free(r);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_evaluator EVAL_TB_PY\n");
        return 2;
    }
    snprintf(g_dir, sizeof g_dir, "%s", tmp_make("evaluator"));
    snprintf(g_ckdir, sizeof g_ckdir, "%s/ckpt", g_dir);
    snprintf(g_eval_csv, sizeof g_eval_csv, "%s/eval.csv", g_dir);
    snprintf(g_train_csv, sizeof g_train_csv, "%s/train.csv", g_dir);
    snprintf(g_cluster_w, sizeof g_cluster_w, "cluster.worker=127.0.0.1:%d",
             spawn_free_port());
    snprintf(g_cluster_e, sizeof g_cluster_e, "cluster.evaluator=127.0.0.1:%d",
             spawn_free_port());
    test_alongside();
    test_after(argv[1]);
    test_early_stop();
    test_errors();
    test_launch();
    tmp_cleanup();
    return CHECK_DONE();
}
