/* [train] precision = mixed_bfloat16 through the strata binary:
 *  - a small CNN (two convs, two dense layers) on 2000 Fashion-MNIST
 *    samples, 3 epochs, mirrored over 2 CPU replicas: the replicas are
 *    bitwise equal after every step (debug.check_sync), the training loss
 *    falls epoch after epoch and stays within 5 % of float32's, the banner
 *    says "precision: mixed_bfloat16 (AMX-BF16)" where the CPU has AMX
 *    (and that the first conv2d, reading one channel, stays float32)
 *    (and the run again on the vector engine, KC_CPU_HIDE=amx_bf16: its
 *    banner "(AVX512_BF16)", its losses as close), else "(AVX512_BF16)";
 *    and the checkpoint
 *    holds float32 tensors (F32: the master weights) that a float32 run
 *    resumes from;
 *  - refusals, one line each, exit 2, nothing written: a value that is not
 *    a precision (with its file:line), a CPU without AVX512_BF16
 *    (simulated with KC_CPU_HIDE=avx512_bf16, and for real with QEMU's
 *    user-mode Haswell where qemu-x86_64 exists).
 * The training part SKIPs (77, the rest still checked) on a CPU without
 * AVX512_BF16. */
#include <math.h>
#include <sys/stat.h>

#include "check.h"
#include "kc_cpu.h"
#include "spawn.h"

/* QEMU cannot map a sanitizer's shadow memory (AddressSanitizer's in
 * reasonable time; ThreadSanitizer's fixed layout not at all: the child
 * was killed after two minutes). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif

#define CNN "conv2d 8 3 relu, conv2d 16 3 relu, maxpool2d 2, flatten, " \
            "dense 32 relu, dense 10"
/* the banner's end: the first conv2d reads one channel (grey images) and
 * stays float32 */
#define KEPT "; float32 in conv2d_0 (one input channel)\n"

static char g_dir[] = "/tmp/strata-precisionXXXXXX";
static spawn_result_t g_r;

/* `strata train` with the CNN on 2000 samples, no evaluation, then the
 * NULL-terminated `more` settings; argv0 NULL: the strata binary, else
 * argv0 and its own first argument before it (qemu). */
static int train(const char *const *pre, const char *const *more)
{
    const char *common[] = { "model.layers=" CNN, "data.limit_train=2000",
                             "data.limit_test=200", "train.batch_size=64",
                             "train.eval=false", "train.progress=none", NULL };
    char *argv[64];
    int a = 0;
    for (int i = 0; pre && pre[i]; i++)
        argv[a++] = (char *)pre[i];
    argv[a++] = (char *)spawn_strata_bin();
    argv[a++] = "train";
    for (int i = 0; common[i]; i++) {
        argv[a++] = "--set";
        argv[a++] = (char *)common[i];
    }
    for (int i = 0; more[i] && a < 60; i++) {
        argv[a++] = "--set";
        argv[a++] = (char *)more[i];
    }
    argv[a] = NULL;
    spawn_run(argv, 600, &g_r);
    return g_r.code;
}

static int csv_losses(const char *path, double *loss, int max)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f) && n < max) {
        int epoch;
        long long steps;
        double l;
        if (sscanf(line, "%d,%lld,%lf,", &epoch, &steps, &l) == 3)
            loss[n++] = l;
    }
    fclose(f);
    return n;
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

static void trains(void)
{
    char csv16[640], csv32[640], set16[700], set32[700], ck[640], setck[700];
    snprintf(csv16, sizeof csv16, "%s/bf16.csv", g_dir);
    snprintf(csv32, sizeof csv32, "%s/fp32.csv", g_dir);
    snprintf(ck, sizeof ck, "%s/ckpt", g_dir);
    snprintf(set16, sizeof set16, "train.metrics_csv=%s", csv16);
    snprintf(set32, sizeof set32, "train.metrics_csv=%s", csv32);
    snprintf(setck, sizeof setck, "checkpoint.dir=%s", ck);
    const char *a[] = { "train.epochs=3", "train.devices=cpu:0, cpu:1",
                        "train.precision=mixed_bfloat16",
                        "debug.check_sync=true", set16, setck, NULL };
    CHECKF(train(NULL, a) == 0, "exit %d:\n%s%s", g_r.code, g_r.out, g_r.err);
    kc_cpu_t cpu;
    kc_cpu_detect(&cpu);
    const char *banner = cpu.amx_bf16
                             ? "\nprecision: mixed_bfloat16 (AMX-BF16)" KEPT
                             : "\nprecision: mixed_bfloat16 (AVX512_BF16)" KEPT;
    CHECKF(strstr(g_r.out, banner) &&
           strstr(g_r.out, "\nconv: direct, bf16 inputs, fp32 sums"),
           "%s", g_r.out);
    /* where the tiles multiply, the vector engine too (KC_CPU_HIDE) */
    char csvv[640], setv[700];
    snprintf(csvv, sizeof csvv, "%s/bf16v.csv", g_dir);
    snprintf(setv, sizeof setv, "train.metrics_csv=%s", csvv);
    if (cpu.amx_bf16) {
        const char *v[] = { "train.epochs=3", "train.devices=cpu:0, cpu:1",
                            "train.precision=mixed_bfloat16",
                            "debug.check_sync=true", setv, NULL };
        setenv("KC_CPU_HIDE", "amx_bf16", 1);
        CHECKF(train(NULL, v) == 0, "exit %d:\n%s", g_r.code, g_r.err);
        unsetenv("KC_CPU_HIDE");
        CHECKF(strstr(g_r.out, "\nprecision: mixed_bfloat16 (AVX512_BF16)" KEPT),
               "%s", g_r.out);
    }
    const char *b[] = { "train.epochs=3", "train.devices=cpu:0, cpu:1",
                        set32, NULL };
    CHECKF(train(NULL, b) == 0, "exit %d:\n%s", g_r.code, g_r.err);
    CHECKF(!strstr(g_r.out, "precision:"), "%s", g_r.out);
    double l16[3] = { 0 }, l32[3] = { 0 };
    int n16 = csv_losses(csv16, l16, 3), n32 = csv_losses(csv32, l32, 3);
    printf("train loss by epoch: mixed_bfloat16 %.4f %.4f %.4f, float32 "
           "%.4f %.4f %.4f\n", l16[0], l16[1], l16[2], l32[0], l32[1],
           l32[2]);
    CHECKF(n16 == 3 && n32 == 3, "epochs in the CSVs: %d, %d", n16, n32);
    CHECKF(l16[0] < log(10.0) && l16[1] < l16[0] && l16[2] < l16[1],
           "mixed_bfloat16: the loss does not fall");
    for (int e = 0; e < 3; e++)
        CHECKF(fabs(l16[e] - l32[e]) <= 0.05 * l32[e], "epoch %d: loss "
               "%.4f in mixed_bfloat16, %.4f in float32", e + 1, l16[e],
               l32[e]);
    if (cpu.amx_bf16) {
        double lv[3] = { 0 };
        CHECKF(csv_losses(csvv, lv, 3) == 3, "epochs in %s", csvv);
        printf("train loss by epoch, vector engine: %.4f %.4f %.4f\n", lv[0],
               lv[1], lv[2]);
        for (int e = 0; e < 3; e++)
            CHECKF(fabs(lv[e] - l32[e]) <= 0.05 * l32[e], "epoch %d: loss "
                   "%.4f on the vector engine, %.4f in float32", e + 1,
                   lv[e], l32[e]);
    }
    /* The checkpoint: the variables and slots in F32, nothing in BF16; a
     * float32 run takes it up. */
    char file[700];
    snprintf(file, sizeof file, "%s/ckpt-0000000093.safetensors", ck);
    FILE *f = fopen(file, "rb");
    char head[8192] = "";
    if (f) {
        unsigned char len[8];
        if (fread(len, 1, 8, f) == 8) {
            size_t n = fread(head, 1, sizeof head - 1, f);
            head[n] = '\0';
        }
        fclose(f);
    }
    CHECKF(strstr(head, "\"F32\"") && !strstr(head, "BF16"),
           "%s: header %.300s", file, head);
    const char *c[] = { "train.epochs=4", "train.devices=cpu:0, cpu:1",
                        setck, NULL };
    CHECKF(train(NULL, c) == 0, "exit %d:\n%s", g_r.code, g_r.err);
    CHECKF(strstr(g_r.out, "ckpt-0000000093.safetensors: epoch 3, batch 0, "
                  "step 93") && strstr(g_r.out, "done: 4 epochs"),
           "a float32 run does not resume from the mixed_bfloat16 "
           "checkpoint:\n%s%s", g_r.out, g_r.err);
}

/* One error line naming the key; exit 2; neither the CSV nor the
 * checkpoint directory made. */
static void refused(const char *what, const char *const *pre,
                    const char *want)
{
    char csv[640], setcsv[700], ck[640], setck[700];
    snprintf(csv, sizeof csv, "%s/refused.csv", g_dir);
    snprintf(ck, sizeof ck, "%s/refused-ckpt", g_dir);
    snprintf(setcsv, sizeof setcsv, "train.metrics_csv=%s", csv);
    snprintf(setck, sizeof setck, "checkpoint.dir=%s", ck);
    const char *a[] = { "train.precision=mixed_bfloat16", setcsv, setck,
                        NULL };
    int code = train(pre, a);
    CHECKF(code == 2, "%s: exit %d:\n%s", what, code, g_r.err);
    CHECKF(strstr(g_r.err, want) != NULL, "%s: no '%s' in:\n%s", what, want,
           g_r.err);
    int lines = 0;
    for (const char *p = g_r.err; (p = strstr(p, ": error: ")); p++)
        lines++;
    CHECKF(lines == 1, "%s: %d error lines:\n%s", what, lines, g_r.err);
    CHECKF(!exists(csv) && !exists(ck), "%s: something was written", what);
}

static void refusals(void)
{
    static const char want[] = "--set: [train] precision = mixed_bfloat16 "
                               "needs AVX512_BF16";
    setenv("KC_CPU_HIDE", "avx512_bf16", 1);
    refused("KC_CPU_HIDE=avx512_bf16", NULL, want);
    unsetenv("KC_CPU_HIDE");

    /* a value that is not a precision, from a file: its line */
    char ini[640], setc[700];
    snprintf(ini, sizeof ini, "%s/job.ini", g_dir);
    FILE *f = fopen(ini, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("[train]\nepochs = 1\nprecision = bfloat16\n", f);
        fclose(f);
    }
    char *argv[] = { (char *)spawn_strata_bin(), "train", "-c", ini, NULL };
    spawn_run(argv, 60, &g_r);
    (void)setc;
    CHECKF(g_r.code == 2 && strstr(g_r.err, "job.ini:3: [train] precision = "
                                   "'bfloat16': expected one of: float32, "
                                   "mixed_bfloat16"),
           "exit %d:\n%s", g_r.code, g_r.err);

#ifdef UNDER_SANITIZER
    printf("SKIPPED: the emulated CPU without AVX512_BF16: a sanitizer's "
           "build does not run under qemu-x86_64\n");
    return;
#endif
    static char qemu[4096];
    const char *p = getenv("PATH");
    int found = 0;
    while (p && *p && !found) {
        size_t n = strcspn(p, ":");
        snprintf(qemu, sizeof qemu, "%.*s/qemu-x86_64", (int)n, p);
        found = access(qemu, X_OK) == 0;
        p += n + (p[n] == ':');
    }
    if (!found) {
        printf("SKIPPED: the emulated CPU without AVX512_BF16: no "
               "qemu-x86_64 on PATH (Debian's qemu-user)\n");
        return;
    }
    /* OPENBLAS_CORETYPE set: strata does not start itself again (a child
     * of execve would run on the real CPU, not the emulated one). */
    setenv("OPENBLAS_CORETYPE", "Haswell", 1);
    const char *pre[] = { qemu, "-cpu", "Haswell", NULL };
    refused("qemu -cpu Haswell", pre, want);
    unsetenv("OPENBLAS_CORETYPE");
}

int main(void)
{
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    unsetenv("KC_CPU_HIDE");
    refusals();
    kc_cpu_t cpu;
    kc_cpu_detect(&cpu);
    int skip = !cpu.bf16;
    if (skip)
        printf("SKIPPED: training in mixed_bfloat16: this CPU has no "
               "AVX512_BF16\n");
    else
        trains();
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    int rc = CHECK_DONE();
    return rc == 0 && skip ? 77 : rc;
}
