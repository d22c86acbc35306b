/* [optimizer] clip_norm and weight_decay end to end, through the strata
 * binary and `strata launch`, with SGD (whose step is the gradient itself,
 * so the bounds below are exact):
 *  - a tiny clip_norm sets every step's length: one step moves the
 *    variables by lr x clip_norm (L2, all variables together), 50 steps
 *    stay within 50 x lr x clip_norm, where the unclipped run is far away;
 *  - clipped after the reduce, alike on every replica: 2 replicas stay
 *    bitwise equal (debug.check_sync) and move as 1 replica does, within
 *    the equivalence tolerance, under mirrored, central, mwms (2 workers,
 *    equal hashes) and ps (1 worker: its push is the whole gradient);
 *  - weight decay, with the gradient clipped to nothing: every variable
 *    ends at its initial value x (1 - lr x weight_decay)^steps, on one
 *    replica, on two and on a ps. */
#include <math.h>

#include "check.h"
#include "dumps.h"
#include "spawn.h"
#include "testutil.h"

static char g_dir[] = "/tmp/strata-clipXXXXXX";
static spawn_result_t g_r;

#define COMMON "--set", "train.epochs=1", "--set", "train.max_steps=50",    \
    "--set", "data.limit_train=4000", "--set", "train.eval=false",           \
    "--set", "train.progress=none", "--set", "optimizer.name=sgd",           \
    "--set", "optimizer.lr=0.1", "--set", "debug.hash_vars=true"

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

static char *dump(const char *name)
{
    static char buf[8][800];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof buf[0], "debug.dump_vars=%s/%s", g_dir, name);
    return p;
}

/* L2 distance between two dumps, all variables together. */
static double dist(const char *a_name, const char *b_name)
{
    size_t n = dump_total();
    float *a = dump_load(path(a_name), n), *b = dump_load(path(b_name), n);
    double d = 0;
    for (size_t i = 0; a && b && i < n; i++)
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    int ok = a && b;
    free(a);
    free(b);
    return ok ? sqrt(d) : INFINITY;
}

/* How the moves from `base` of runs a and b differ: |(a - base) -
 * (b - base)| / |a - base|. */
static double move_diff(const char *a_name, const char *b_name,
                        const char *base_name)
{
    double m = dist(a_name, base_name);
    return m > 0 ? dist(a_name, b_name) / m : INFINITY;
}

/* |x - init (1 - lr wd)^50| / |x|: the decay alone. */
static double decay_error(const char *x_name, const char *init_name)
{
    size_t n = dump_total();
    float *x = dump_load(path(x_name), n), *w = dump_load(path(init_name), n);
    double f = pow(1.0 - 0.1 * 0.1, 50), d = 0, s = 0;
    for (size_t i = 0; x && w && i < n; i++) {
        double e = x[i] - w[i] * f;
        d += e * e;
        s += (double)x[i] * x[i];
    }
    int ok = x && w;
    free(x);
    free(w);
    return ok && s > 0 ? sqrt(d / s) : INFINITY;
}

/* Logged for the record, then checked. */
static double show(const char *what, double v)
{
    printf("%s: %.3g\n", what, v);
    return v;
}

int main(void)
{
    CHECK(mkdtemp(g_dir) != NULL);
    char *tiny = "optimizer.clip_norm=0.001";

    /* the initial values: one step at the smallest learning rate */
    CHECK(train("--set", "train.max_steps=1", "--set", "optimizer.lr=1e-12",
                "--set", "train.devices=cpu:0", "--set", dump("init.bin")) == 0);

    /* the bound, and what it holds back */
    CHECK(train("--set", "train.devices=cpu:0", "--set", tiny, "--set",
                dump("c1.bin")) == 0);
    CHECK(strstr(g_r.out, "gradients clipped to a global norm of 0.001"));
    CHECK(train("--set", "train.devices=cpu:0", "--set", dump("n1.bin")) == 0);
    double moved = dist("c1.bin", "init.bin");
    double free_move = dist("n1.bin", "init.bin");
    printf("clipped: moved %.6g (bound %.6g); unclipped: %.6g\n", moved,
           50 * 0.1 * 0.001, free_move);
    CHECK(moved > 0 && moved <= 50 * 0.1 * 0.001 * (1 + 1e-4));
    CHECK(free_move > 100 * moved);
    /* one step moves by exactly lr x clip_norm */
    CHECK(train("--set", "train.devices=cpu:0", "--set", tiny, "--set",
                "train.max_steps=1", "--set", dump("c1step.bin")) == 0);
    CHECK(fabs(show("one clipped step moved", dist("c1step.bin", "init.bin"))
               - 0.1 * 0.001) <= 1e-7);

    /* alike on every replica, and as 1 replica */
    CHECK(train("--set", "train.devices=cpu:0, cpu:1", "--set", tiny, "--set",
                "debug.check_sync=true", "--set", dump("c2.bin")) == 0);
    CHECK(show("mirrored 2 vs 1, moves differ by",
               move_diff("c1.bin", "c2.bin", "init.bin")) <= 1e-4);
    CHECK(train("--set", "train.devices=cpu:0, cpu:1", "--set", tiny, "--set",
                "strategy.plugin=central", "--set", "debug.check_sync=true",
                "--set", dump("cc.bin")) == 0);
    CHECK(show("central 2 vs 1, moves differ by",
               move_diff("c1.bin", "cc.bin", "init.bin")) <= 1e-4);
    CHECK(launch("-n", "2", "--set", "strategy.plugin=mwms", "--set",
                 "transport.plugin=zmq", "--set", "train.devices=cpu:0",
                 "--set", tiny, "--set", dump("cm.bin")) == 0);
    CHECKF(dump_hashes_equal(g_r.out, 2), "mwms workers differ:\n%s", g_r.out);
    CHECK(show("mwms 2 workers vs 1 replica, moves differ by",
               move_diff("c1.bin", "cm.bin", "init.bin")) <= 1e-4);
    CHECK(launch("--chief", "-n", "1", "--ps", "1", "--set",
                 "strategy.plugin=ps", "--set", "train.devices=cpu:0",
                 "--set", tiny, "--set", dump("cp.bin")) == 0);
    CHECK(show("ps 1 worker vs 1 replica, moves differ by",
               move_diff("c1.bin", "cp.bin", "init.bin")) <= 1e-4);

    /* weight decay alone: the gradient clipped to (almost) nothing */
    char *wd = "optimizer.weight_decay=0.1";
    char *none = "optimizer.clip_norm=1e-12";
    CHECK(train("--set", "train.devices=cpu:0", "--set", wd, "--set", none,
                "--set", dump("d1.bin")) == 0);
    CHECK(strstr(g_r.out, "decoupled weight decay 0.1"));
    CHECK(show("decay alone, 1 replica: relative error",
               decay_error("d1.bin", "init.bin")) <= 1e-5);
    CHECK(train("--set", "train.devices=cpu:0, cpu:1", "--set", wd, "--set",
                none, "--set", "debug.check_sync=true", "--set",
                dump("d2.bin")) == 0);
    CHECK(show("decay alone, 2 replicas: relative error",
               decay_error("d2.bin", "init.bin")) <= 1e-5);
    CHECK(launch("--chief", "-n", "1", "--ps", "1", "--set",
                 "strategy.plugin=ps", "--set", "train.devices=cpu:0",
                 "--set", wd, "--set", none, "--set", dump("dp.bin")) == 0);
    CHECK(show("decay alone, ps: relative error",
               decay_error("dp.bin", "init.bin")) <= 1e-5);
    /* with the gradient: 2 replicas follow 1 */
    CHECK(train("--set", "train.devices=cpu:0", "--set", wd, "--set",
                dump("g1.bin")) == 0);
    CHECK(train("--set", "train.devices=cpu:0, cpu:1", "--set", wd, "--set",
                dump("g2.bin")) == 0);
    dump_compare(path("g1.bin"), path("g2.bin"), "weight decay, 2 replicas "
                 "vs 1", 1e-5);
    CHECK(dist("g1.bin", "n1.bin") > 0);

    rm_tree(g_dir);
    return CHECK_DONE();
}
