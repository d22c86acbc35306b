/* batchnorm through the strata binary on Fashion-MNIST (a residual block
 * with two batchnorm layers, [graph]), the way users run it:
 *  - sync = true (SyncBatchNorm): mirrored with 2 replicas follows one
 *    device on the global batch within 1e-5 relative L2 per variable after
 *    an epoch of 50 steps (but the conv biases before batchnorm, whose
 *    gradient is rounding only), the replicas bitwise equal after every step, and
 *    mwms with 2 workers through `strata launch` gives the 2 replicas'
 *    bits, its checkpoint's moving statistics included;
 *  - sync = false: the replicas stay bitwise equal too;
 *  - the checkpoint holds the moving statistics, and `strata eval` of it
 *    scores what the run's last evaluation scored;
 *  - a run resumed from a checkpoint at step 20 ends with the variables
 *    and the moving statistics of an uninterrupted one;
 *  - etc/resnet.ini as shipped: Keras's parameter count, and mirrored
 *    with 2 replicas and mwms with 2 workers end 2 steps on the same bits;
 *  - ps refuses the model with one line. */
#include "check.h"
#include "dumps.h"
#include "spawn.h"

static const char k_job[] =
    "[data]\n"
    "limit_train = 1600\n"
    "limit_test = 300\n"
    "[graph]\n"
    "stem = conv2d 8 3 padding=same\n"
    "bn0 = batchnorm sync=%s\n"
    "r0 = tanh\n"
    "c1 = conv2d 8 3 padding=same\n"
    "bn1 = batchnorm momentum=0.9 sync=%s\n"
    "sum = add <- bn1, r0\n"
    "act = tanh\n"
    "gap = global_avgpool2d\n"
    "logits = dense 10\n";
static const size_t k_counts[] = { 3 * 3 * 1 * 8, 8, 8, 8, 3 * 3 * 8 * 8, 8,
                                   8, 8, 8 * 10, 10 };
enum { NVARS = sizeof k_counts / sizeof k_counts[0] };

static char g_dir[] = "/tmp/strata-bnXXXXXX";
static char g_sync[600], g_local[600];
static spawn_result_t g_r;

static void write_job(char *path, size_t len, const char *name,
                      const char *sync)
{
    snprintf(path, len, "%s/%s.ini", g_dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f && fprintf(f, k_job, sync, sync) > 0 && fclose(f) == 0);
}

/* strata CMD -c JOB, the common settings, `more` (NULL-ended). */
static int run(const char *cmd, const char *job, const char *const *more)
{
    static const char *const common[] = {
        "train.epochs=1", "train.batch_size=32", "train.progress=none",
        "debug.check_sync=true", NULL };
    return spawn_strata_job(cmd, job, common, more, 300, &g_r);
}

static void path_of(char *out, size_t len, const char *name, const char *ext)
{
    snprintf(out, len, "%s/%s%s", g_dir, name, ext);
}

/* `strata inspect` of the newest checkpoint in DIR/name: its moving
 * statistics' lines into out. */
static void moving_lines(const char *name, char *out, size_t cap)
{
    char dir[700], file[800];
    path_of(dir, sizeof dir, name, "");
    snprintf(file, sizeof file, "%s/ckpt-0000000050.safetensors", dir);
    char *argv[] = { (char *)spawn_strata_bin(), "inspect", file, NULL };
    spawn_run(argv, 60, &g_r);
    out[0] = '\0';
    size_t n = 0;
    for (const char *p = g_r.out; (p = strstr(p, "  bn")); p++) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) + 1 : strlen(p);
        if (strstr(p, "moving_") && strstr(p, "moving_") < p + len &&
            n + len < cap) {
            memcpy(out + n, p, len);
            n += len;
        }
    }
    out[n] = '\0';
    CHECKF(g_r.code == 0 && strstr(out, "bn0/moving_mean") &&
               strstr(out, "bn1/moving_variance"),
           "inspect %s:\n%s%s", file, g_r.out, g_r.err);
}

static void sync_equivalence(void)
{
    char d1[700], d2[700], dm[700], c2[700], cm[700], p1[700], p2[700],
        pm[700];
    snprintf(d1, sizeof d1, "debug.dump_vars=%s/one.bin", g_dir);
    snprintf(d2, sizeof d2, "debug.dump_vars=%s/two.bin", g_dir);
    snprintf(dm, sizeof dm, "debug.dump_vars=%s/mwms.bin", g_dir);
    snprintf(c2, sizeof c2, "checkpoint.dir=%s/ck-two", g_dir);
    snprintf(cm, sizeof cm, "checkpoint.dir=%s/ck-mwms", g_dir);
    const char *a[] = { "train.devices=cpu:0", d1, NULL };
    CHECK(run("train", g_sync, a) == 0);
    CHECKF(strstr(g_r.out, " bn0            batchnorm sync=true") &&
               strstr(g_r.out, "total: 786 parameters"),
           "banner:\n%s", g_r.out);
    const char *b[] = { "train.devices=cpu:0,cpu:1", d2, c2, NULL };
    CHECK(run("train", g_sync, b) == 0);
    const char *done = strstr(g_r.out, "done: ");
    char test_line[128] = "";
    if (done)
        snprintf(test_line, sizeof test_line, "%.*s",
                 (int)strcspn(done, "\n"), done);
    const char *c[] = { "strategy.plugin=mwms", "train.devices=cpu:0", dm, cm,
                        NULL };
    CHECK(run("launch", g_sync, c) == 0);
    path_of(p1, sizeof p1, "one", ".bin");
    path_of(p2, sizeof p2, "two", ".bin");
    path_of(pm, sizeof pm, "mwms", ".bin");
    /* A conv bias before batchnorm gets no gradient but rounding (the
     * normalisation takes the mean away), which Adam turns into steps of
     * lr: it walks apart and changes nothing downstream. */
    const double tols[NVARS] = { 1e-5, -1, 1e-5, 1e-5, 1e-5, -1, 1e-5, 1e-5,
                                 1e-5, 1e-5 };
    dump_compare_each(p1, p2, "SyncBatchNorm: 2 replicas vs 1", tols,
                      k_counts, NVARS);
    dump_compare_model(p2, pm, "SyncBatchNorm: mwms 2 workers vs 2 replicas",
                       0.0, k_counts, NVARS);
    static char m2[4096], mm[4096];
    moving_lines("ck-two", m2, sizeof m2);
    moving_lines("ck-mwms", mm, sizeof mm);
    CHECKF(strcmp(m2, mm) == 0, "moving statistics:\n%s\nvs mwms:\n%s", m2,
           mm);
    /* eval of the last checkpoint scores what the run's end did. */
    char file[800];
    snprintf(file, sizeof file, "%s/ck-two/ckpt-0000000050.safetensors",
             g_dir);
    char *ev[] = { "-c", g_sync, "--checkpoint", file, NULL };
    CHECK(spawn_strata("eval", ev, 120, &g_r) == 0);
    const char *acc = strstr(test_line, "test accuracy ");
    char want[64] = "";
    if (acc)
        snprintf(want, sizeof want, "%.20s", acc);
    CHECKF(acc && strstr(g_r.out, want), "run: '%s'; eval:\n%s", test_line,
           g_r.out);
}

static void local_statistics(void)
{
    const char *a[] = { "train.devices=cpu:0,cpu:1", "train.max_steps=20",
                        NULL };
    CHECK(run("train", g_local, a) == 0);
}

static void resume(void)
{
    char full[700], part[700], d1[700], d2[700], p1[700], p2[700];
    snprintf(full, sizeof full, "checkpoint.dir=%s/ck-full", g_dir);
    snprintf(part, sizeof part, "checkpoint.dir=%s/ck-part", g_dir);
    snprintf(d1, sizeof d1, "debug.dump_vars=%s/full.bin", g_dir);
    snprintf(d2, sizeof d2, "debug.dump_vars=%s/part.bin", g_dir);
    const char *a[] = { "train.devices=cpu:0,cpu:1", full, d1, NULL };
    CHECK(run("train", g_sync, a) == 0);
    const char *b[] = { "train.devices=cpu:0,cpu:1", part,
                        "train.max_steps=20", NULL };
    CHECK(run("train", g_sync, b) == 0);
    const char *c[] = { "train.devices=cpu:0,cpu:1", part, d2, NULL };
    CHECK(run("train", g_sync, c) == 0);
    CHECKF(strstr(g_r.out, "resumed from "), "%s", g_r.out);
    path_of(p1, sizeof p1, "full", ".bin");
    path_of(p2, sizeof p2, "part", ".bin");
    dump_compare_model(p1, p2, "batchnorm: resumed vs uninterrupted", 0.0,
                       k_counts, NVARS);
    static char mf[4096], mp[4096];
    moving_lines("ck-full", mf, sizeof mf);
    moving_lines("ck-part", mp, sizeof mp);
    CHECKF(strcmp(mf, mp) == 0, "moving statistics:\n%s\nresumed:\n%s", mf,
           mp);
}

/* The whole of a file, or NULL. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 &&
        fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n)) &&
        fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (f)
        fclose(f);
    *len = n > 0 ? (size_t)n : 0;
    return buf;
}

/* etc/resnet.ini as shipped: Keras's parameter count, and 2 steps of
 * mirrored (2 replicas, as shipped) and of mwms with 2 workers end on the
 * same bits. */
static void shipped_resnet(void)
{
    const char *src = getenv("STRATA_SRC");
    char ini[600], d2[700], dm[700], p2[700], pm[700];
    snprintf(ini, sizeof ini, "%s/etc/resnet.ini", src ? src : ".");
    snprintf(d2, sizeof d2, "debug.dump_vars=%s/resnet-two.bin", g_dir);
    snprintf(dm, sizeof dm, "debug.dump_vars=%s/resnet-mwms.bin", g_dir);
    const char *a[] = { "train.max_steps=2", "data.limit_train=640",
                        "data.limit_test=64", d2, NULL };
    CHECK(run("train", ini, a) == 0);
    CHECKF(strstr(g_r.out, "total: 78090 parameters") &&
               strstr(g_r.out, " s3_add ") && strstr(g_r.out, "(7, 7, 64)"),
           "resnet.ini:\n%s", g_r.out);
    const char *b[] = { "strategy.plugin=mwms", "train.devices=cpu:0",
                        "train.max_steps=2", "data.limit_train=640",
                        "data.limit_test=64", dm, NULL };
    CHECK(run("launch", ini, b) == 0);
    path_of(p2, sizeof p2, "resnet-two", ".bin");
    path_of(pm, sizeof pm, "resnet-mwms", ".bin");
    size_t n2 = 0, nm = 0;
    char *x = slurp(p2, &n2), *y = slurp(pm, &nm);
    CHECKF(x && y && n2 == 78090 * 4 && n2 == nm &&
               memcmp(x, y, n2) == 0,
           "resnet: mirrored 2 replicas and mwms 2 workers differ (%zu, %zu "
           "bytes)", n2, nm);
    free(x);
    free(y);
}

static void ps_refused(void)
{
    char *args[] = { "--ps", "1", "--workers", "1", "--chief", "-c", g_sync,
                     "--set", "strategy.plugin=ps", "--set",
                     "train.max_steps=2", NULL };
    int code = spawn_strata("launch", args, 120, &g_r);
    CHECKF(code == 2 && strstr(g_r.err, "batchnorm ('bn0/moving_mean') is "
                               "not for this job yet: its strategy drives "
                               "the job"),
           "ps: exit %d:\n%s", code, g_r.err);
}

/* "replicas": only the replicas' sums of 20 steps of 2 replicas, both
 * modes (what ThreadSanitizer runs). */
int main(int argc, char **argv)
{
    if (!mkdtemp(g_dir) || spawn_job_keys() != 0)
        return 1;
    write_job(g_sync, sizeof g_sync, "sync", "true");
    write_job(g_local, sizeof g_local, "local", "false");
    if (argc > 1 && !strcmp(argv[1], "replicas")) {
        const char *a[] = { "train.devices=cpu:0,cpu:1", "train.max_steps=20",
                            NULL };
        CHECK(run("train", g_sync, a) == 0);
        local_statistics();
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
        CHECK(system(cmd) == 0);
        return CHECK_DONE();
    }
    sync_equivalence();
    local_statistics();
    resume();
    shipped_resnet();
    ps_refused();
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    CHECK(system(cmd) == 0);
    return CHECK_DONE();
}
