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
 *  - "ps" (plugin ABI 2.8, ps.so carries the workers' moving statistics to
 *    the coordinator): 1 worker gives mirrored's bits with 1 replica, the
 *    checkpoint's moving statistics included; 2 workers learn, their
 *    checkpoint's statistics moved and `strata eval` of it scores what the
 *    job's end did; a job stopped at step 70 and resumed ends on the bits
 *    of an uninterrupted one (its worker starts from the checkpoint's
 *    statistics). */
#include "check.h"
#include "ckpt_tensor.h"
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

/* A dense model with batchnorm that learns within 2 short epochs. */
static const char k_dense[] =
    "[data]\n"
    "limit_train = 3200\n"
    "limit_test = 500\n"
    "[graph]\n"
    "flat = flatten\n"
    "d1 = dense 64\n"
    "bn = batchnorm\n"
    "a1 = relu\n"
    "logits = dense 10\n";

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

static char g_dense[600];

static void write_dense(void)
{
    snprintf(g_dense, sizeof g_dense, "%s/dense.ini", g_dir);
    FILE *f = fopen(g_dense, "w");
    CHECK(f && fputs(k_dense, f) >= 0 && fclose(f) == 0);
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
    CHECKF(strstr(g_r.out, "total: 175530 parameters") &&
               strstr(g_r.out, " s3b_add ") && strstr(g_r.out, "(7, 7, 64)"),
           "resnet.ini:\n%s", g_r.out);
    const char *b[] = { "strategy.plugin=mwms", "train.devices=cpu:0",
                        "train.max_steps=2", "data.limit_train=640",
                        "data.limit_test=64", dm, NULL };
    CHECK(run("launch", ini, b) == 0);
    path_of(p2, sizeof p2, "resnet-two", ".bin");
    path_of(pm, sizeof pm, "resnet-mwms", ".bin");
    size_t n2 = 0, nm = 0;
    char *x = slurp(p2, &n2), *y = slurp(pm, &nm);
    CHECKF(x && y && n2 == 175530 * 4 && n2 == nm &&
               memcmp(x, y, n2) == 0,
           "resnet: mirrored 2 replicas and mwms 2 workers differ (%zu, %zu "
           "bytes)", n2, nm);
    free(x);
    free(y);
}

/* ---- ps (plugin ABI 2.8): the workers' moving statistics reach the
 * coordinator, which evaluates and checkpoints ---------------------------- */

/* `strata launch` of a ps job: a chief (the coordinator), 1 ps, `workers`
 * workers, `more` settings (NULL-ended). */
static int ps_launch(const char *job, const char *workers,
                     const char *const *more)
{
    char *args[64] = { "--ps", "1", "--workers", (char *)workers, "--chief",
                       "-c", (char *)job, "--set", "strategy.plugin=ps",
                       "--set", "train.devices=cpu:0", "--set",
                       "train.batch_size=32", "--set", "train.progress=none" };
    int a = 15;
    for (int i = 0; more[i] && a < 61; i++) {
        args[a++] = "--set";
        args[a++] = (char *)more[i];
    }
    args[a] = NULL;
    return spawn_strata("launch", args, 300, &g_r);
}

/* The moving statistics of checkpoints a and b: bitwise equal (1), or
 * not (0); both must hold them. */
static int same_states(const char *a, const char *b, const char *const *names,
                       int n)
{
    int same = 1;
    for (int i = 0; i < n; i++) {
        float x[256], y[256];
        size_t nx = ckpt_tensor_bytes(a, names[i], x, sizeof x),
               ny = ckpt_tensor_bytes(b, names[i], y, sizeof y);
        CHECKF(nx > 0 && ny > 0, "%s: %s missing (%zu, %zu bytes)", names[i],
               nx ? b : a, nx, ny);
        same &= nx == ny && nx > 0 && memcmp(x, y, nx) == 0;
    }
    return same;
}

static double done_accuracy(const char *out)
{
    const char *p = strstr(out, "done: ");
    p = p ? strstr(p, "test accuracy ") : NULL;
    return p ? atof(p + strlen("test accuracy ")) : -1.0;
}

/* ps with 1 worker computes what one device computes: its variables and
 * (through the STEP_REQs' states) its checkpoint's moving statistics are
 * mirrored's with 1 replica, bit for bit (the conv model, sync = true:
 * the worker's own replicas). */
static void ps_one_worker(void)
{
    char dm[700], dp[700], cm[700], cp[700], pm[700], pp[700];
    snprintf(dm, sizeof dm, "debug.dump_vars=%s/ps1-m.bin", g_dir);
    snprintf(dp, sizeof dp, "debug.dump_vars=%s/ps1-p.bin", g_dir);
    snprintf(cm, sizeof cm, "checkpoint.dir=%s/ck-ps1-m", g_dir);
    snprintf(cp, sizeof cp, "checkpoint.dir=%s/ck-ps1-p", g_dir);
    const char *a[] = { "train.devices=cpu:0", dm, cm, NULL };
    CHECK(run("train", g_sync, a) == 0);
    const char *b[] = { "train.epochs=1", dp, cp, NULL };
    CHECK(ps_launch(g_sync, "1", b) == 0);
    CHECKF(strstr(g_r.err, "layer states (64) taken from the coordinator"),
           "the worker took no layer states:\n%s", g_r.err);
    path_of(pm, sizeof pm, "ps1-m", ".bin");
    path_of(pp, sizeof pp, "ps1-p", ".bin");
    dump_compare_model(pm, pp, "batchnorm: ps 1 worker vs mirrored 1 replica",
                       0.0, k_counts, NVARS);
    char fm[800], fp[800];
    snprintf(fm, sizeof fm, "%s/ck-ps1-m/ckpt-0000000050.safetensors", g_dir);
    snprintf(fp, sizeof fp, "%s/ck-ps1-p/ckpt-0000000050.safetensors", g_dir);
    static const char *const names[] = { "bn0/moving_mean",
        "bn0/moving_variance", "bn1/moving_mean", "bn1/moving_variance" };
    CHECKF(same_states(fm, fp, names, 4), "ps 1 worker: the checkpoint's "
           "moving statistics differ from mirrored's");
}

/* 2 workers: the job learns, its checkpoint holds moving statistics that
 * moved, and `strata eval` of it scores what the coordinator's end did
 * (its evaluation used them). Then a job of 1 worker stopped at step 70
 * and resumed ends on the bits of an uninterrupted one: the worker's
 * first step starts from the checkpoint's statistics. */
static void ps_two_workers_and_resume(void)
{
    static const char *const names[] = { "bn/moving_mean",
                                         "bn/moving_variance" };
    char c2[700], f2[800];
    snprintf(c2, sizeof c2, "checkpoint.dir=%s/ck-ps2", g_dir);
    const char *a[] = { "train.epochs=2", c2, NULL };
    CHECK(ps_launch(g_dense, "2", a) == 0);
    double acc = done_accuracy(g_r.out);
    printf("ps, 2 workers, batchnorm: test accuracy %.4f\n", acc);
    CHECKF(acc > 0.6, "ps 2 workers: test accuracy %.4f (chance 0.1)", acc);
    snprintf(f2, sizeof f2, "%s/ck-ps2/ckpt-0000000200.safetensors", g_dir);
    float mean[64], var[64];
    CHECK(ckpt_tensor_bytes(f2, names[0], mean, sizeof mean) == sizeof mean);
    CHECK(ckpt_tensor_bytes(f2, names[1], var, sizeof var) == sizeof var);
    int moved_mean = 0, moved_var = 0;
    for (int i = 0; i < 64; i++) {
        moved_mean += mean[i] != 0.0f;
        moved_var += var[i] != 1.0f;
    }
    CHECKF(moved_mean == 64 && moved_var == 64, "moving statistics that did "
           "not move: %d means, %d variances of 64", 64 - moved_mean,
           64 - moved_var);
    char *ev[] = { "-c", g_dense, "--checkpoint", f2, NULL };
    CHECK(spawn_strata("eval", ev, 120, &g_r) == 0);
    const char *e = strstr(g_r.out, "test accuracy ");
    double eacc = e ? atof(e + strlen("test accuracy ")) : -1.0;
    CHECKF(eacc == acc, "eval of the checkpoint: %.4f, the job: %.4f", eacc,
           acc);

    char cu[700], cr[700], fu[800], fr[800];
    snprintf(cu, sizeof cu, "checkpoint.dir=%s/ck-psu", g_dir);
    snprintf(cr, sizeof cr, "checkpoint.dir=%s/ck-psr", g_dir);
    const char *u[] = { "train.epochs=2", cu, NULL };
    CHECK(ps_launch(g_dense, "1", u) == 0);
    const char *r1[] = { "train.epochs=2", cr, "train.max_steps=70", NULL };
    CHECK(ps_launch(g_dense, "1", r1) == 0);
    const char *r2[] = { "train.epochs=2", cr, NULL };
    CHECK(ps_launch(g_dense, "1", r2) == 0);
    CHECKF(strstr(g_r.out, "resumed from ") &&
               strstr(g_r.err, "layer states (128) taken from the "
                      "coordinator before step 70"),
           "the resumed worker did not start from the checkpoint's "
           "statistics:\n%s%s", g_r.out, g_r.err);
    snprintf(fu, sizeof fu, "%s/ck-psu/ckpt-0000000200.safetensors", g_dir);
    snprintf(fr, sizeof fr, "%s/ck-psr/ckpt-0000000200.safetensors", g_dir);
    CHECKF(same_states(fu, fr, names, 2), "ps resumed at step 70: moving "
           "statistics differ from the uninterrupted job's");
    static const char *const vars[] = { "d1/kernel", "bn/gamma",
                                        "logits/kernel" };
    for (int i = 0; i < 3; i++) {
        static float x[784 * 64], y[784 * 64];
        size_t nx = ckpt_tensor_bytes(fu, vars[i], x, sizeof x),
               ny = ckpt_tensor_bytes(fr, vars[i], y, sizeof y);
        CHECKF(nx > 0 && nx == ny && memcmp(x, y, nx) == 0,
               "ps resumed at step 70: %s differs", vars[i]);
    }
}

/* "replicas": only the replicas' sums of 20 steps of 2 replicas, both
 * modes (what ThreadSanitizer runs). */
int main(int argc, char **argv)
{
    if (!mkdtemp(g_dir) || spawn_job_keys() != 0)
        return 1;
    write_job(g_sync, sizeof g_sync, "sync", "true");
    write_job(g_local, sizeof g_local, "local", "false");
    write_dense();
    if (argc > 1 && !strcmp(argv[1], "ps")) {
        ps_one_worker();
        ps_two_workers_and_resume();
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
        CHECK(system(cmd) == 0);
        return CHECK_DONE();
    }
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
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    CHECK(system(cmd) == 0);
    return CHECK_DONE();
}
