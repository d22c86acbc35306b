/* A run with [train] reduce_lr_patience and [data] augmentation, stopped
 * after its first learning-rate reduction and resumed, ends bitwise equal
 * to the uninterrupted run, at every step's rate: the reductions, the
 * plateau's count and its cooldown are in the checkpoint, and every draw
 * of the augmentation is a function of (seed, epoch, sample).
 *  - max_steps ends the run mid-epoch 5 at a checkpoint (the plateau waits
 *    for the run that completes the epoch), the same command without it
 *    resumes;
 *  - kill -9 once a checkpoint after the reduction exists, then the same
 *    command again. */
#include <dirent.h>

#include "check.h"
#include "spawn.h"
#include "testutil.h"

/* 10 steps an epoch; reductions after epochs 3 and 6 (the metric never
 * improves by 10 after epoch 1; cooldown 2) */
#define COMMON "--set", "train.epochs=7", "--set", "data.limit_train=800",   \
    "--set", "data.limit_test=200", "--set", "train.batch_size=64",          \
    "--set", "data.validation_split=0.2", "--set", "train.progress=none",    \
    "--set", "train.devices=cpu:0", "--set", "optimizer.lr=0.01",            \
    "--set", "train.reduce_lr_patience=2", "--set",                          \
    "train.reduce_lr_cooldown=2", "--set", "train.reduce_lr_min_delta=10",   \
    "--set", "train.reduce_lr_min_lr=0.0005", "--set",                       \
    "data.augment_flip=true", "--set", "data.augment_crop_padding=3"

static spawn_result_t g_r;

#define train(...) spawn_strata("train", (char *const[]){ COMMON,           \
                                __VA_ARGS__, NULL }, 120, &g_r)

/* The newest checkpoint's step in `dir`, -1 none. */
static long newest_step(const char *dir)
{
    DIR *d = opendir(dir);
    long best = -1;
    for (struct dirent *e; d && (e = readdir(d));)
        if (!strncmp(e->d_name, "ckpt-", 5) && !strstr(e->d_name, ".tmp") &&
            atol(e->d_name + 5) > best)
            best = atol(e->d_name + 5);
    if (d)
        closedir(d);
    return best;
}

/* The rates of two dumps, one after the other, make `whole`. */
static int rates_join(const char *a, const char *b, const char *whole)
{
    size_t na, nb, nw;
    char *x = read_all(a, &na), *y = read_all(b, &nb), *w = read_all(whole,
                                                                     &nw);
    int ok = x && y && w && na + nb == nw && !memcmp(w, x, na) &&
             !memcmp(w + na, y, nb);
    free(x);
    free(y);
    free(w);
    return ok;
}

int main(void)
{
    tmp_make("resume-plateau");
    CHECK(train("--set", set_path("debug.dump_vars", "ref.bin"), "--set",
                set_path("debug.dump_lr", "ref.txt")) == 0);
    CHECKF(strstr(g_r.out, "epoch 3: val_loss did not improve") &&
           strstr(g_r.out, "epoch 6: val_loss did not improve"), "%s",
           g_r.out);

    /* max_steps: to step 45, then on */
    CHECK(train("--set", set_path("checkpoint.dir", "ck1"), "--set",
                "train.max_steps=45", "--set",
                set_path("debug.dump_lr", "a.txt")) == 0);
    CHECKF(strstr(g_r.out, "epoch 3: ") && !strstr(g_r.out, "epoch 5: ") &&
           !strstr(g_r.out, "epoch 6: "), "%s", g_r.out);
    CHECK(train("--set", set_path("checkpoint.dir", "ck1"), "--set",
                set_path("debug.dump_vars", "got1.bin"), "--set",
                set_path("debug.dump_lr", "b.txt")) == 0);
    CHECKF(strstr(g_r.out, "resumed from ") && strstr(g_r.out, "step 45") &&
           strstr(g_r.out, "epoch 6: val_loss did not improve for 2 epochs; "
                           "learning rate 0.001 -> 0.0005") &&
           !strstr(g_r.out, "epoch 3: "), "%s", g_r.out);
    CHECK(rates_join(tmp_path("a.txt"), tmp_path("b.txt"),
                     tmp_path("ref.txt")));
    CHECKF(same_file(tmp_path("ref.bin"), tmp_path("got1.bin")),
           "max_steps: the resumed run differs from the uninterrupted one");

    /* kill -9 after a checkpoint past the reduction (step >= 40), each
     * step slowed so that the kill lands before the end */
    char *argv[64] = { (char *)spawn_strata_bin(), "train" };
    char *const args[] = { COMMON, "--set", set_path("checkpoint.dir", "ck2"),
                           "--set", "checkpoint.every_steps=7", "--set",
                           "debug.step_delay_ms=20", NULL };
    int n = 2;
    for (int i = 0; args[i] && n < 63; i++)
        argv[n++] = args[i];
    spawn_child_t c;
    CHECK(spawn_start(argv, NULL, &c) == 0);
    for (int i = 0; i < 1200 && newest_step(tmp_path("ck2")) < 40; i++)
        usleep(10000);
    long at = newest_step(tmp_path("ck2"));
    kill(c.pid, SIGKILL);
    spawn_wait(&c, 60);
    static char out[65536], err[65536];
    spawn_collect(&c, out, sizeof out, err, sizeof err);
    CHECKF(c.code == 128 + SIGKILL && at >= 40 && at < 70,
           "killed run: exit %d, newest checkpoint step %ld: %s", c.code, at,
           err);
    CHECK(train("--set", set_path("checkpoint.dir", "ck2"), "--set",
                "checkpoint.every_steps=7", "--set",
                set_path("debug.dump_vars", "got2.bin")) == 0);
    CHECKF(strstr(g_r.out, "resumed from ") && !strstr(g_r.out, "epoch 3: "),
           "%s", g_r.out);
    CHECKF(same_file(tmp_path("ref.bin"), tmp_path("got2.bin")),
           "kill -9: the resumed run differs from the uninterrupted one");

    tmp_cleanup();
    return CHECK_DONE();
}
