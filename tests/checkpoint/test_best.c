/* [checkpoint] keep_best through the strata binary. A step schedule makes
 * the training diverge after epoch 2 (lr 0.1, then 30), so the best
 * val_loss is epoch 2's and later epochs are worse:
 *  - DIR/best.safetensors holds epoch 2 (its metadata says so, and `strata
 *    eval` of it gives epoch 2's validation figures to the printed digit)
 *    while the rotation (keep = 1) has moved on to the last checkpoint;
 *  - a resumed run starts from the newest checkpoint, not the best, and
 *    remembers the best so far (a worse epoch 6 leaves best.safetensors as
 *    it was);
 *  - with monitor = val_accuracy the best is the highest accuracy. */
#include <sys/stat.h>

#include "check.h"
#include "spawn.h"
#include "testutil.h"

static char g_dir[] = "/tmp/strata-bestXXXXXX";
static spawn_result_t g_r;
static char g_ck[800], g_best[800];

#define COMMON "--set", "data.limit_train=1600", "--set", "data.limit_test=500", \
    "--set", "train.progress=line", "--set", "optimizer.name=sgd",          \
    "--set", "optimizer.schedule=step", "--set", "optimizer.boundaries=100", \
    "--set", "optimizer.values=0.1, 30", "--set", "checkpoint.keep=1",      \
    "--set", "checkpoint.keep_best=true", "--set", g_ck

static int run_(char *const *args)
{
    char *argv[64] = { (char *)spawn_strata_bin() };
    int n = 1;
    for (int i = 0; args[i] && n < 63; i++)
        argv[n++] = args[i];
    spawn_run(argv, 180, &g_r);
    if (g_r.code != 0)
        fprintf(stderr, "strata exited %d:\n%s\n%s\n", g_r.code, g_r.out,
                g_r.err);
    return g_r.code;
}
#define run(...) run_((char *const[]){ __VA_ARGS__, NULL })

/* The figures of the line of epoch `e` ("Epoch E/N - ... - val_loss: X -
 * val_accuracy: Y"), as printed; 0 when found. */
static int epoch_line(int e, char loss[16], char acc[16])
{
    char head[32];
    snprintf(head, sizeof head, "Epoch %d/", e);
    const char *p = strstr(g_r.out, head), *l, *a;
    if (!p || !(l = strstr(p, "val_loss: ")) || !(a = strstr(p, "val_accuracy: ")))
        return -1;
    snprintf(loss, 16, "%.6s", l + 10);
    snprintf(acc, 16, "%.6s", a + 14);
    return 0;
}

static long mtime_ns(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_mtim.tv_sec * 1000000000L +
                                      st.st_mtim.tv_nsec
                                : -1;
}

int main(void)
{
    CHECK(mkdtemp(g_dir) != NULL);
    snprintf(g_ck, sizeof g_ck, "checkpoint.dir=%s/ck", g_dir);
    snprintf(g_best, sizeof g_best, "%s/ck/best.safetensors", g_dir);

    CHECK(run("train", COMMON, "--set", "train.epochs=5") == 0);
    char loss[6][16], acc[6][16];
    for (int e = 1; e <= 5; e++)
        CHECKF(epoch_line(e, loss[e], acc[e]) == 0, "epoch %d:\n%s", e,
               g_r.out);
    /* the schedule did its part: epoch 2 better than 1, 3..5 worse */
    for (int e = 3; e <= 5; e++)
        CHECKF(atof(loss[e]) > atof(loss[2]), "epoch %d: %s, epoch 2: %s", e,
               loss[e], loss[2]);
    CHECK(atof(loss[2]) < atof(loss[1]));
    CHECK(strstr(g_r.err, "best.safetensors: the best val_loss so far") != NULL);

    /* the rotation kept the last; best.safetensors is epoch 2's */
    char last[900];
    snprintf(last, sizeof last, "%s/ck/ckpt-0000000250.safetensors", g_dir);
    CHECK(file_exists(last) && file_exists(g_best));
    CHECK(run("inspect", g_best) == 0);
    CHECKF(strstr(g_r.out, "strata.best_epoch = 2\n") &&
           strstr(g_r.out, "strata.epoch = 2\n") &&
           strstr(g_r.out, "strata.step = 100\n"), "%s", g_r.out);
    CHECK(run("eval", "--checkpoint", g_best, "--set", "data.limit_test=500")
          == 0);
    char want[96];
    snprintf(want, sizeof want, "test loss %s, test accuracy %s", loss[2],
             acc[2]);
    CHECKF(strstr(g_r.out, want), "want '%s':\n%s", want, g_r.out);

    /* resumed from the newest (step 250), the best remembered: epoch 6 is
     * no better, best.safetensors stays */
    long before = mtime_ns(g_best);
    CHECK(run("train", COMMON, "--set", "train.epochs=6") == 0);
    CHECKF(strstr(g_r.out, "resumed from ") &&
           strstr(g_r.out, "ckpt-0000000250.safetensors"), "%s", g_r.out);
    CHECK(epoch_line(6, loss[0], acc[0]) == 0 &&
          atof(loss[0]) > atof(loss[2]));
    CHECKF(mtime_ns(g_best) == before && !strstr(g_r.err, "best.safetensors"),
           "%s", g_r.err);

    /* val_accuracy: the highest */
    snprintf(g_ck, sizeof g_ck, "checkpoint.dir=%s/acc", g_dir);
    snprintf(g_best, sizeof g_best, "%s/acc/best.safetensors", g_dir);
    CHECK(run("train", COMMON, "--set", "train.epochs=4", "--set",
              "train.monitor=val_accuracy") == 0);
    int top = 1;
    for (int e = 1; e <= 4; e++) {
        CHECK(epoch_line(e, loss[e], acc[e]) == 0);
        if (atof(acc[e]) > atof(acc[top]))
            top = e;
    }
    CHECK(run("inspect", g_best) == 0);
    char ep[48];
    snprintf(ep, sizeof ep, "strata.best_epoch = %d\n", top);
    CHECKF(strstr(g_r.out, ep) && strstr(g_r.out, "strata.monitor = "
                                          "val_accuracy"), "%s", g_r.out);

    rm_tree(g_dir);
    return CHECK_DONE();
}
