/* [optimizer] name = rmsprop and adagrad end to end, through the strata
 * binary: the default MLP, 1 epoch of 2000 Fashion-MNIST samples, with
 * RMSprop (Keras' defaults), RMSprop with rmsprop_momentum and Adagrad
 * (with and without weight decay):
 *  - the loss goes down: the epoch's mean training loss and the test loss
 *    after it are below the loss of the first step;
 *  - mirrored on 2 replicas (debug.check_sync: bitwise-equal replicas after
 *    every step) and central on 2 follow 1 replica within 1e-5 relative L2
 *    per variable; the bytes placed say how many slots each holds (rmsprop
 *    1, with momentum 2; adagrad 1);
 *  - a run stopped after 40 steps with a checkpoint, then resumed
 *    mid-epoch, ends with the bits of an uninterrupted one (the slots,
 *    Adagrad's accumulator and RMSprop's velocity too, travel through the
 *    checkpoint), under mirrored on 2 replicas and under central; RMSprop
 *    with momentum does not resume from one without (exit 2);
 *  - Adagrad's accumulator starts at initial_accumulator_value, on every
 *    strategy: another value gives another run, mirrored's sharded
 *    optimizer state gives the bits of the whole one, and mwms (2 workers)
 *    and ps (a worker and a ps) follow 1 replica. */
#include <math.h>

#include "check.h"
#include "dumps.h"
#include "spawn.h"
#include "testutil.h"

static char g_dir[] = "/tmp/strata-optimXXXXXX";
static spawn_result_t g_r;

#define COMMON "--set", "train.epochs=1", "--set", "data.limit_train=2000",  \
    "--set", "data.limit_test=1000", "--set", "train.progress=line",         \
    "--set", "model.layers=dense 128 relu, dense 10"

static int run_(const char *cmd, char *const *args)
{
    return spawn_strata(cmd, args, 240, &g_r);
}
#define train(...) run_("train", (char *const[]){ COMMON, __VA_ARGS__, NULL })
#define launch(...) run_("launch", (char *const[]){ __VA_ARGS__, COMMON, NULL })

static char *path(const char *name)
{
    static char buf[8][700];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", g_dir, name);
    return p;
}

static char *setf(const char *key, const char *name)
{
    static char buf[8][800];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof buf[0], "%s=%s/%s", key, g_dir, name);
    return p;
}

/* The number after `key` in the last run's output, or NAN. */
static double figure(const char *key)
{
    const char *p = strstr(g_r.out, key);
    return p ? atof(p + strlen(key)) : NAN;
}

/* "placed N bytes of variables and optimizer state (R x ...)": R. */
static double placed_ratio(void)
{
    return figure("bytes of variables and optimizer state (");
}

typedef struct optcase {
    const char *tag;
    const char *set[3];     /* the optimizer's --set values: name first */
    double      slots;      /* slots per variable element */
} optcase_t;

static const optcase_t k_cases[] = {
    { "rmsprop", { "optimizer.name=rmsprop", "optimizer.lr=0.001",
                   "optimizer.rho=0.9" }, 1 },
    { "rmsprop-momentum", { "optimizer.name=rmsprop",
                            "optimizer.rmsprop_momentum=0.5",
                            "optimizer.lr=0.0005" }, 2 },
    { "adagrad", { "optimizer.name=adagrad", "optimizer.lr=0.01",
                   "optimizer.initial_accumulator_value=0.1" }, 1 },
    { "adagrad-wd", { "optimizer.name=adagrad", "optimizer.lr=0.01",
                      "optimizer.weight_decay=0.004" }, 1 },
};

#define O(c) "--set", (char *)(c)->set[0], "--set", (char *)(c)->set[1], \
             "--set", (char *)(c)->set[2]

static void one(const optcase_t *c)
{
    char f1[64], f2[64], fc[64], fr[64], fk[64], fcr[64], fck[64];
    snprintf(f1, sizeof f1, "%s-1.bin", c->tag);
    snprintf(f2, sizeof f2, "%s-2.bin", c->tag);
    snprintf(fc, sizeof fc, "%s-central.bin", c->tag);
    snprintf(fr, sizeof fr, "%s-resumed.bin", c->tag);
    snprintf(fk, sizeof fk, "ck-%s", c->tag);
    snprintf(fcr, sizeof fcr, "%s-central-resumed.bin", c->tag);
    snprintf(fck, sizeof fck, "ck-central-%s", c->tag);
    const char *name = strchr(c->set[0], '=') + 1;
    char banner[64];
    snprintf(banner, sizeof banner, "optimizer: %s, ", name);

    /* the loss of the first step, then of the epoch and after it */
    CHECK(train(O(c), "--set", "train.devices=cpu:0", "--set",
                "train.max_steps=1", "--set", "train.eval=false") == 0);
    double first = figure(" - loss: ");
    CHECK(train(O(c), "--set", "train.devices=cpu:0", "--set",
                setf("debug.dump_vars", f1)) == 0);
    CHECKF(strstr(g_r.out, banner) != NULL, "%s: no '%s' in\n%s", c->tag,
           banner, g_r.out);
    double mean = figure(" - loss: "), test = figure("test loss ");
    printf("%s: first step loss %.4f, epoch mean %.4f, test loss after %.4f\n",
           c->tag, first, mean, test);
    CHECKF(first > 1.5 && mean < first - 0.1 && test < mean,
           "%s: the loss does not go down: %g, %g, %g", c->tag, first, mean,
           test);
    CHECKF(fabs(placed_ratio() - (1 + c->slots)) < 0.01,
           "%s: 1 replica placed %.3f x the model", c->tag, placed_ratio());

    /* 2 replicas, mirrored and central, follow 1 */
    CHECK(train(O(c), "--set", "train.devices=cpu:0, cpu:1", "--set",
                "debug.check_sync=true", "--set", "train.eval=false", "--set",
                setf("debug.dump_vars", f2)) == 0);
    /* shard_optimizer = auto: the slots sharded over the CPU replicas */
    CHECKF(fabs(placed_ratio() - (2 + c->slots)) < 0.01,
           "%s: mirrored placed %.3f x the model", c->tag, placed_ratio());
    char what[128];
    snprintf(what, sizeof what, "%s: mirrored 2 replicas vs 1", c->tag);
    dump_compare(path(f1), path(f2), what, 1e-5);
    CHECK(train(O(c), "--set", "train.devices=cpu:0, cpu:1", "--set",
                "strategy.plugin=central", "--set", "debug.check_sync=true",
                "--set", "train.eval=false", "--set",
                setf("debug.dump_vars", fc)) == 0);
    CHECKF(fabs(placed_ratio() - (1 + c->slots)) < 0.01,
           "%s: central placed %.3f x the model", c->tag, placed_ratio());
    snprintf(what, sizeof what, "%s: central 2 replicas vs 1", c->tag);
    dump_compare(path(f1), path(fc), what, 1e-5);

    /* stopped after 40 of 62 steps, resumed: the uninterrupted bits */
    CHECK(train(O(c), "--set", "train.devices=cpu:0, cpu:1", "--set",
                "train.eval=false", "--set", "train.max_steps=40", "--set",
                setf("checkpoint.dir", fk)) == 0);
    CHECK(train(O(c), "--set", "train.devices=cpu:0, cpu:1", "--set",
                "train.eval=false", "--set", setf("checkpoint.dir", fk),
                "--set", setf("debug.dump_vars", fr)) == 0);
    CHECKF(strstr(g_r.out, "resumed from ") && strstr(g_r.out, "batch 40"),
           "%s: not resumed at batch 40:\n%s", c->tag, g_r.out);
    CHECKF(same_file(path(f2), path(fr)), "%s: the resumed run differs from "
           "the uninterrupted one", c->tag);
    CHECK(train(O(c), "--set", "train.devices=cpu:0, cpu:1", "--set",
                "strategy.plugin=central", "--set", "train.eval=false", "--set",
                "train.max_steps=40", "--set",
                setf("checkpoint.dir", fck)) == 0);
    CHECK(train(O(c), "--set", "train.devices=cpu:0, cpu:1", "--set",
                "strategy.plugin=central", "--set", "train.eval=false", "--set",
                setf("checkpoint.dir", fck), "--set",
                setf("debug.dump_vars", fcr)) == 0);
    CHECKF(strstr(g_r.out, "resumed from ") != NULL, "%s: central not "
           "resumed:\n%s", c->tag, g_r.out);
    CHECKF(same_file(path(fc), path(fcr)), "%s: central: the resumed run "
           "differs from the uninterrupted one", c->tag);
}

/* Adagrad's start value counts, and every strategy starts from it. */
static void accumulator(void)
{
    const optcase_t *c = &k_cases[2];
    CHECK(train(O(c), "--set", "train.devices=cpu:0", "--set",
                "train.eval=false", "--set",
                "optimizer.initial_accumulator_value=1", "--set",
                setf("debug.dump_vars", "adagrad-acc1.bin")) == 0);
    size_t n = dump_total();
    float *a = dump_load(path("adagrad-1.bin"), n);
    float *b = dump_load(path("adagrad-acc1.bin"), n);
    CHECK(a && b && memcmp(a, b, n * sizeof *a) != 0);
    free(a);
    free(b);
    /* the sharded optimizer state (ZeRO 1): the bits of the whole one */
    CHECK(train(O(c), "--set", "train.devices=cpu:0, cpu:1", "--set",
                "train.eval=false", "--set",
                "strategy.mirrored.shard_optimizer=true", "--set",
                setf("debug.dump_vars", "adagrad-shard.bin")) == 0);
    CHECK(same_file(path("adagrad-2.bin"), path("adagrad-shard.bin")));
    CHECK(launch("-n", "2", "--set", "strategy.plugin=mwms", "--set",
                 "transport.plugin=zmq", "--set", "train.devices=cpu:0",
                 "--set", "train.eval=false", "--set", "debug.hash_vars=true",
                 O(c), "--set", setf("debug.dump_vars", "adagrad-mwms.bin"))
          == 0);
    CHECKF(dump_hashes_equal(g_r.out, 2), "mwms workers differ:\n%s",
           g_r.out);
    dump_compare(path("adagrad-1.bin"), path("adagrad-mwms.bin"),
                 "adagrad: mwms 2 workers vs 1 replica", 1e-5);
    CHECK(launch("--chief", "-n", "1", "--ps", "1", "--set",
                 "strategy.plugin=ps", "--set", "train.devices=cpu:0",
                 "--set", "train.eval=false", O(c), "--set",
                 setf("debug.dump_vars", "adagrad-ps.bin")) == 0);
    dump_compare(path("adagrad-1.bin"), path("adagrad-ps.bin"),
                 "adagrad: ps 1 worker vs 1 replica", 1e-5);
}

int main(void)
{
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
               R_OK) != 0)
        CHECK_SKIP("Fashion-MNIST not installed");
    CHECK(mkdtemp(g_dir) != NULL);
    for (size_t i = 0; i < sizeof k_cases / sizeof *k_cases; i++)
        one(&k_cases[i]);
    /* rmsprop with momentum keeps another slot: its checkpoints and those
     * without do not resume one another */
    CHECK(train(O(&k_cases[0]), "--set", "train.devices=cpu:0, cpu:1",
                "--set", "train.eval=false", "--set",
                "optimizer.rmsprop_momentum=0.5", "--set",
                setf("checkpoint.dir", "ck-rmsprop")) == 2);
    CHECKF(strstr(g_r.err, "optimizer keeps the slots 'rms', this run's "
                  "'rms,momentum'") != NULL, "%s", g_r.err);
    accumulator();
    rm_tree(g_dir);
    return CHECK_DONE();
}
