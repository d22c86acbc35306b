/* A graph model ([graph] in the job file: a residual add, a concat of two
 * branches, a layer read three times) through the strata binary on
 * Fashion-MNIST, the way users run it:
 *  - the banner's table shows each layer's inputs;
 *  - mirrored with 2 replicas follows 1 replica within 1e-5 relative L2
 *    per variable after an epoch of 50 steps (tanh and average pooling:
 *    at relu's and max pooling's kinks, a last-bit difference between a
 *    GEMM of 16 rows and one of 32 takes another branch, and such
 *    differences grow to 1e-5 in 50 steps), the replicas bitwise equal
 *    after every step (debug.check_sync), and mwms with 2 workers through
 *    `strata launch` gives the 2 replicas' bits;
 *  - the checkpoint names the variables by layer name, and `strata eval`
 *    scores it;
 *  - a job that also sets [model] layers, and a graph with a cycle, are
 *    refused with one line naming the file and line, nothing written. */
#include <sys/stat.h>

#include "check.h"
#include "dumps.h"
#include "spawn.h"

static const char k_job[] =
    "[data]\n"
    "limit_train = 1600\n"
    "limit_test = 200\n"
    "[graph]\n"
    "stem = conv2d 8 3 padding=same tanh\n"
    "c1 = conv2d 8 3 padding=same tanh\n"
    "c2 = conv2d 8 3 padding=same\n"
    "sum = add <- c2, stem\n"
    "act = tanh\n"
    "pool = avgpool2d 2\n"
    "down = conv2d 8 3 stride=2 padding=same tanh <- stem\n"
    "wide = concat <- pool, down\n"
    "gap = global_avgpool2d\n"
    "logits = dense 10\n";
/* stem, c1, c2, down: kernel and bias; logits */
static const size_t k_counts[] = { 3 * 3 * 1 * 8, 8, 3 * 3 * 8 * 8, 8,
                                   3 * 3 * 8 * 8, 8, 3 * 3 * 8 * 8, 8,
                                   16 * 10, 10 };

static char g_dir[] = "/tmp/strata-graphXXXXXX";
static char g_job[600];
static spawn_result_t g_r;

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0);
}

/* strata CMD -c FILE with the common settings and `more` (NULL-ended). */
static int run(const char *cmd, const char *job, const char *const *more)
{
    static const char *const common[] = {
        "train.epochs=1", "train.batch_size=32", "train.eval=false",
        "train.progress=none", "debug.check_sync=true", NULL };
    return spawn_strata_job(cmd, job, common, more, 300, &g_r);
}

static void dump_set(char *out, size_t len, const char *name)
{
    snprintf(out, len, "debug.dump_vars=%s/%s.bin", g_dir, name);
}

static void dump_path(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s.bin", g_dir, name);
}

static void equivalence(void)
{
    char one[700], two[700], mw[700], p1[700], p2[700], pm[700];
    dump_set(one, sizeof one, "one");
    dump_set(two, sizeof two, "two");
    dump_set(mw, sizeof mw, "mwms");
    const char *a[] = { "train.devices=cpu:0", one, NULL };
    CHECK(run("train", g_job, a) == 0);
    CHECKF(strstr(g_r.out, " inputs ") &&
               strstr(g_r.out, " sum            add ") &&
               strstr(g_r.out, "c2, stem ") && strstr(g_r.out, "pool, down") &&
               strstr(g_r.out, "total: 2002 parameters"),
           "banner:\n%s", g_r.out);
    const char *b[] = { "train.devices=cpu:0,cpu:1", two, NULL };
    CHECK(run("train", g_job, b) == 0);
    const char *c[] = { "strategy.plugin=mwms", "train.devices=cpu:0", mw,
                        NULL };
    CHECK(run("launch", g_job, c) == 0);
    dump_path(p1, sizeof p1, "one");
    dump_path(p2, sizeof p2, "two");
    dump_path(pm, sizeof pm, "mwms");
    int nvars = (int)(sizeof k_counts / sizeof k_counts[0]);
    dump_compare_model(p1, p2, "graph: 2 replicas vs 1", 1e-5, k_counts,
                       nvars);
    dump_compare_model(p2, pm, "graph: mwms 2 workers vs 2 replicas", 0.0,
                       k_counts, nvars);
}

static void checkpoint(void)
{
    char dir[640], set_dir[700], file[700];
    snprintf(dir, sizeof dir, "%s/ckpt", g_dir);
    snprintf(set_dir, sizeof set_dir, "checkpoint.dir=%s", dir);
    snprintf(file, sizeof file, "%s/ckpt-0000000010.safetensors", dir);
    const char *a[] = { "train.max_steps=10", "train.devices=cpu:0",
                        set_dir, NULL };
    CHECK(run("train", g_job, a) == 0);
    char *argv[] = { (char *)spawn_strata_bin(), "inspect", file, NULL };
    spawn_run(argv, 60, &g_r);
    CHECKF(g_r.code == 0 && strstr(g_r.out, "  stem/kernel ") &&
               strstr(g_r.out, "  down/bias ") &&
               strstr(g_r.out, "  logits/kernel ") &&
               !strstr(g_r.out, "sum/") && !strstr(g_r.out, "wide/"),
           "inspect %s (%d):\n%s%s", file, g_r.code, g_r.out, g_r.err);
    char *ev[] = { "-c", g_job, "--checkpoint", file, NULL };
    CHECK(spawn_strata("eval", ev, 120, &g_r) == 0);
    CHECKF(strstr(g_r.out, "accuracy") != NULL, "eval:\n%s", g_r.out);
}

/* Bad jobs: one error line naming the file's line, exit 2, no dump. In
 * `want`, '@' stands for the job file's path. */
static void refused(const char *name, const char *text, const char *want)
{
    char job[700], dump[700], path[700], expect[2048];
    snprintf(job, sizeof job, "%s/%s.ini", g_dir, name);
    write_file(job, text);
    dump_set(dump, sizeof dump, name);
    const char *a[] = { dump, NULL };
    CHECK(run("train", job, a) == 2);
    size_t n = 0;
    for (const char *w = want; *w && n + strlen(job) < sizeof expect - 1; w++)
        if (*w == '@')
            n += (size_t)sprintf(expect + n, "%s", job);
        else
            expect[n++] = *w;
    expect[n] = '\0';
    CHECKF(strstr(g_r.err, expect) != NULL, "%s: wanted '%s' in:\n%s", name,
           expect, g_r.err);
    dump_path(path, sizeof path, name);
    struct stat st;
    CHECKF(stat(path, &st) != 0, "%s: %s written", name, path);
}

static void refusals(void)
{
    char text[2048];
    snprintf(text, sizeof text, "[model]\nlayers = dense 10\n%s", k_job);
    refused("twice", text, "@:2: [model] layers and [graph] (@:7) both "
            "describe the model; keep one");
    refused("cycle",
            "[data]\nlimit_train = 100\n[graph]\n"
            "a = dense 16 relu <- c\nb = dense 16 relu\nc = add <- a, b\n"
            "out = dense 10 <- c\n",
            "@:4: [graph] a = dense 16 relu <- c: a cycle: 'a' (@:4) reads "
            "'c' (@:6) reads 'a' (@:4)");
}

int main(void)
{
    if (!mkdtemp(g_dir))
        return 1;
    if (spawn_job_keys() != 0)
        return 1;
    snprintf(g_job, sizeof g_job, "%s/job.ini", g_dir);
    write_file(g_job, k_job);
    equivalence();
    checkpoint();
    refusals();
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    CHECK(system(cmd) == 0);
    return CHECK_DONE();
}
