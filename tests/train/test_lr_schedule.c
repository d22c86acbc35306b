/* The learning-rate schedule is the same under every strategy, through the
 * strata binary and `strata launch`, read back from debug.dump_lr (the
 * rate that went into every step):
 *  - mirrored on 2 replicas and central on 2 give 1 replica's sequence,
 *    byte for byte, and that sequence is Keras' cosine decay with the
 *    linear warm-up, computed here;
 *  - lr_scaling = linear on 2 replicas is 1 replica at twice the lr;
 *  - mwms, 2 workers: each worker's sequence is 1 replica's (both workers
 *    of one global batch: the same steps);
 *  - ps, 2 workers: the steps are shared out, each once, and together they
 *    are 1 replica's sequence;
 *  - a run ended by max_steps and resumed from its final checkpoint
 *    continues the schedule exactly (the two halves make the uninterrupted
 *    sequence) and ends with the uninterrupted run's variables, bit for
 *    bit. */
#include <math.h>
#include <sys/stat.h>

#include "check.h"
#include "spawn.h"
#include "testutil.h"

static char g_dir[] = "/tmp/strata-lrXXXXXX";
static spawn_result_t g_r;

/* The job: 2 epochs of 50 steps, cosine decay over 60 steps to 0 (the ps
 * then get pushes with a learning rate of 0), a warm-up of 25 steps. */
#define STEPS 100
#define COMMON "--set", "train.epochs=2", "--set", "data.limit_train=1600", \
    "--set", "train.batch_size=32", "--set", "train.eval=false",          \
    "--set", "train.progress=none", "--set", "optimizer.schedule=cosine", \
    "--set", "optimizer.decay_steps=60", "--set", "optimizer.alpha=0",    \
    "--set", "train.warmup_epochs=0.5"

static int run_(const char *cmd, char *const *args, int timeout_s)
{
    return spawn_strata(cmd, args, timeout_s, &g_r);
}
#define train(...) run_("train", (char *const[]){ COMMON, __VA_ARGS__, NULL }, 120)
#define launch(...) run_("launch", (char *const[]){ __VA_ARGS__, COMMON, NULL }, 240)

static char *path(const char *name)
{
    static char buf[8][700];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", g_dir, name);
    return p;
}

static char *set(const char *key, const char *value)
{
    static char buf[8][800];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof buf[0], "%s=%s", key, value);
    return p;
}

/* The rates of a dump, by step (NAN where a step is missing); the number
 * of lines, -1 when unreadable or malformed. */
static int load(const char *file, float lr[STEPS])
{
    for (int i = 0; i < STEPS; i++)
        lr[i] = NAN;
    FILE *f = fopen(file, "r");
    if (!f)
        return -1;
    long long step;
    float v;
    int n = 0, r;
    while ((r = fscanf(f, "%lld %g", &step, &v)) == 2) {
        if (step < 0 || step >= STEPS || !isnan(lr[step]))
            n = -1000000; /* out of range, or twice */
        else
            lr[step] = v;
        n++;
    }
    fclose(f);
    return r == EOF && n >= 0 ? n : -1;
}

static int same(const float *a, const float *b, int from, int to)
{
    for (int i = from; i < to; i++)
        if (memcmp(&a[i], &b[i], sizeof *a) != 0)
            return 0;
    return 1;
}

/* Keras' CosineDecay(0.001, 60) times the warm-up. */
static void expected(float out[STEPS], double lr)
{
    for (int k = 0; k < STEPS; k++) {
        double done = k < 60 ? k : 60;
        double v = lr * 0.5 * (1 + cos(M_PI * done / 60));
        if (k < 25)
            v *= (k + 1) / 25.0;
        out[k] = (float)v;
    }
}

int main(void)
{
    CHECK(mkdtemp(g_dir) != NULL);
    float one[STEPS], got[STEPS], want[STEPS];

    /* 1 replica, against the formula */
    CHECK(train("--set", "train.devices=cpu:0", "--set",
                set("debug.dump_lr", path("one.txt")), "--set",
                set("debug.dump_vars", path("ref.bin"))) == 0);
    CHECK(load(path("one.txt"), one) == STEPS);
    expected(want, 0.001);
    for (int k = 0; k < STEPS; k++)
        CHECKF(fabsf(one[k] - want[k]) <= 1e-6f * want[k] + 1e-12f, "step %d: "
               "%.9g, Keras %.9g", k, one[k], want[k]);
    CHECK(one[STEPS - 1] == 0.0f);
    CHECK(strstr(g_r.out, "then cosine decay to 0 over 60 steps") != NULL);

    /* mirrored and central on 2 replicas: the same bytes */
    CHECK(train("--set", "train.devices=cpu:0, cpu:1", "--set",
                set("debug.dump_lr", path("two.txt"))) == 0);
    CHECKF(same_file(path("one.txt"), path("two.txt")), "mirrored 2 replicas");
    CHECK(train("--set", "train.devices=cpu:0, cpu:1", "--set",
                "strategy.plugin=central", "--set",
                set("debug.dump_lr", path("central.txt"))) == 0);
    CHECKF(same_file(path("one.txt"), path("central.txt")), "central");

    /* the linear scaling rule: 2 replicas at lr are 1 at 2 lr */
    CHECK(train("--set", "train.devices=cpu:0, cpu:1", "--set",
                "train.lr_scaling=linear", "--set",
                set("debug.dump_lr", path("lin.txt"))) == 0);
    CHECK(train("--set", "train.devices=cpu:0", "--set", "optimizer.lr=0.002",
                "--set", set("debug.dump_lr", path("dbl.txt"))) == 0);
    CHECKF(same_file(path("lin.txt"), path("dbl.txt")), "lr_scaling");
    CHECK(load(path("lin.txt"), got) == STEPS && !same(got, one, 0, STEPS));

    /* mwms, 2 workers of 1 replica: each did every step */
    CHECK(launch("-n", "2", "--set", "strategy.plugin=mwms", "--set",
                 "transport.plugin=zmq", "--set", "train.devices=cpu:0",
                 "--set", set("debug.dump_lr", path("mwms.txt"))) == 0);
    CHECKF(same_file(path("one.txt"), path("mwms.txt.worker-0")) &&
           same_file(path("one.txt"), path("mwms.txt.worker-1")),
           "mwms workers");

    /* ps, a chief, 2 workers, 1 ps: each step run once, by one worker */
    CHECK(launch("--chief", "-n", "2", "--ps", "1", "--set",
                 "strategy.plugin=ps", "--set", "train.devices=cpu:0",
                 "--set", set("debug.dump_lr", path("ps.txt"))) == 0);
    float w0[STEPS], w1[STEPS];
    int n0 = load(path("ps.txt.worker-0"), w0);
    int n1 = load(path("ps.txt.worker-1"), w1);
    CHECKF(n0 >= 0 && n1 >= 0 && n0 + n1 == STEPS, "ps: %d + %d steps", n0,
           n1);
    for (int k = 0; k < STEPS; k++) {
        int a = !isnan(w0[k]), b = !isnan(w1[k]);
        CHECKF(a + b == 1 && same(a ? w0 : w1, one, k, k + 1), "ps step %d",
               k);
    }
    /* the coordinator and the ps ran no step: no file */
    CHECK(!file_exists(path("ps.txt.chief-0")) &&
          !file_exists(path("ps.txt.ps-0")));

    /* max_steps = 70 with a checkpoint dir ends at a final checkpoint of
     * step 70 (mid-epoch 2, no other checkpoint due); the same command
     * without max_steps resumes from it */
    char ck[800];
    snprintf(ck, sizeof ck, "checkpoint.dir=%s", path("ck"));
    CHECK(train("--set", "train.devices=cpu:0", "--set", ck, "--set",
                "checkpoint.every_epochs=0", "--set", "train.max_steps=70",
                "--set", set("debug.dump_lr", path("a.txt"))) == 0);
    CHECK(file_exists(path("ck/ckpt-0000000070.safetensors")));
    CHECK(train("--set", "train.devices=cpu:0", "--set", ck, "--set",
                "checkpoint.every_epochs=0", "--set",
                set("debug.dump_lr", path("b.txt")), "--set",
                set("debug.dump_vars", path("got.bin"))) == 0);
    CHECKF(strstr(g_r.out, "resumed from ") && strstr(g_r.out, "step 70"),
           "%s", g_r.out);
    float a[STEPS], b[STEPS];
    CHECK(load(path("a.txt"), a) == 70 && load(path("b.txt"), b) == 30);
    CHECK(same(a, one, 0, 70) && same(b, one, 70, STEPS));
    CHECKF(same_file(path("ref.bin"), path("got.bin")), "resumed run's "
           "variables differ from the uninterrupted run's");

    rm_tree(g_dir);
    return CHECK_DONE();
}
