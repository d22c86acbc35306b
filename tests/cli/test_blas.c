/* The strata command never runs its BLAS's fallback kernels unasked.
 *
 * A CPU that OpenBLAS does not know is simulated with QEMU's user-mode
 * emulator: `-cpu Haswell,model=207` is a Haswell (AVX2, FMA) whose model
 * number no Haswell has, and OpenBLAS 0.3.21 gives it its SSE3 "Prescott"
 * kernels, as it does the Xeon of family 6 model 207 this was found on.
 * strata, under that emulated CPU, must see the mismatch and start itself
 * again with OPENBLAS_CORETYPE=Haswell. Also: the user's own weaker choice
 * is respected and shown; kernels the CPU cannot execute are refused before
 * the first GEMM, with one line, instead of dying of SIGILL. */
#include "check.h"
#include "kc_cpu.h"
#include "spawn.h"

static spawn_result_t R;

/* QEMU cannot map AddressSanitizer's shadow memory in reasonable time. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

static int run_(char *const *args)
{
    char *argv[24];
    int n = 0;
    for (; args[n] && n < 23; n++)
        argv[n] = args[n];
    argv[n] = NULL;
    spawn_run(argv, 120, &R);
    return R.code;
}
#define run(...) run_((char *const[]){ __VA_ARGS__, NULL })
#define STRATA (char *)spawn_strata_bin()
/* A short real run of the default job: the banner, then two steps. */
#define TRAIN "train", "--set", "train.max_steps=2", "--set", \
              "data.limit_train=256", "--set", "data.limit_test=64"

/* The emulated CPU: AVX2 and FMA, a model number unknown to OpenBLAS. */
static const char k_qemu_cpu[] = "Haswell,model=207";

static const char *find_qemu(void)
{
    static char path[4096];
    const char *p = getenv("PATH");
    while (p && *p) {
        size_t n = strcspn(p, ":");
        snprintf(path, sizeof path, "%.*s/qemu-x86_64", (int)n, p);
        if (access(path, X_OK) == 0)
            return path;
        p += n + (p[n] == ':');
    }
    return NULL;
}

/* What this program sees of the CPU and the BLAS (run under the emulator:
 * is the simulation what it claims to be?). */
static int probe(void)
{
    kc_cpu_t cpu;
    kc_cpu_detect(&cpu);
    printf("%s %s\n", kc_blas_core(), kc_isa_name(cpu.isa));
    return 0;
}

static void native(const kc_cpu_t *cpu)
{
    char isa[32];
    snprintf(isa, sizeof isa, " (%s", kc_isa_name(cpu->isa));
    CHECK(run(STRATA, "--version") == 0);
    CHECKF(strstr(R.out, "gemm: OpenBLAS ") && strstr(R.out, isa) &&
           !strstr(R.out, "would be faster"), "%s", R.out);
}

static void unknown_cpu(const char *self)
{
#ifdef UNDER_ASAN
    (void)self;
    printf("SKIPPED: the unknown-CPU case: an AddressSanitizer build does "
           "not run under qemu-x86_64 (the gcc build runs it)\n");
    return;
#endif
    const char *qemu = find_qemu();
    if (!qemu) {
        printf("SKIPPED: the unknown-CPU case: no qemu-x86_64 on PATH "
               "(Debian's qemu-user)\n");
        return;
    }
    run((char *)qemu, "-cpu", (char *)k_qemu_cpu, (char *)self, "--probe");
    if (R.code != 0 || strncmp(R.out, "Prescott AVX2", 13)) {
        printf("SKIPPED: the unknown-CPU case: under qemu -cpu %s this "
               "OpenBLAS does not fall back (exit %d: %.200s%.200s)\n",
               k_qemu_cpu, R.code, R.out, R.err);
        return;
    }
    /* Without strata's check this prints "Prescott (SSE3)". */
    CHECK(run((char *)qemu, "-cpu", (char *)k_qemu_cpu, STRATA,
              "--version") == 0);
    CHECKF(strstr(R.out, "gemm: OpenBLAS ") &&
           strstr(R.out, "Haswell (AVX2, OPENBLAS_CORETYPE=Haswell)") &&
           !strstr(R.out, "Prescott"), "%s", R.out);
    CHECK(run((char *)qemu, "-cpu", (char *)k_qemu_cpu, STRATA, TRAIN) == 0);
    CHECKF(strstr(R.out, "\ngemm: OpenBLAS ") &&
           strstr(R.out, "Haswell (AVX2, OPENBLAS_CORETYPE=Haswell)") &&
           !strstr(R.err, "several times slower"), "%s%s", R.out, R.err);
}

static void user_weaker(const kc_cpu_t *cpu)
{
    if (cpu->isa <= KC_ISA_SSE) {
        printf("SKIPPED: the user's weaker choice: this CPU has nothing "
               "better than SSE3\n");
        return;
    }
    setenv("OPENBLAS_CORETYPE", "Prescott", 1);
    char line[160];
    snprintf(line, sizeof line, "Prescott (SSE3, OPENBLAS_CORETYPE=Prescott) "
             "on a CPU with %s: %s would be faster", kc_isa_name(cpu->isa),
             kc_blas_best_core(cpu));
    CHECK(run(STRATA, "--version") == 0);
    CHECKF(strstr(R.out, line), "%s", R.out);
    CHECK(run(STRATA, TRAIN) == 0);
    CHECKF(strstr(R.out, line), "%s", R.out);
    unsetenv("OPENBLAS_CORETYPE");
}

static void too_new(const kc_cpu_t *cpu)
{
    if (cpu->isa >= KC_ISA_AVX512) {
        printf("SKIPPED: kernels the CPU cannot run: this CPU has AVX-512, "
               "which every OpenBLAS x86-64 kernel set fits\n");
        return;
    }
    setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
    CHECK(run(STRATA, TRAIN) == 2);
    CHECKF(strstr(R.err, "OPENBLAS_CORETYPE=SkylakeX") &&
           strstr(R.err, "illegal instruction") &&
           strstr(R.err, kc_blas_best_core(cpu)), "%s", R.err);
    unsetenv("OPENBLAS_CORETYPE");
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--probe"))
        return probe();
    /* The children see what each case sets, not what this shell had. */
    unsetenv("OPENBLAS_CORETYPE");
    kc_cpu_t cpu;
    kc_cpu_detect(&cpu);
    native(&cpu);
    unknown_cpu(argv[0]);
    user_weaker(&cpu);
    too_new(&cpu);
    return CHECK_DONE();
}
