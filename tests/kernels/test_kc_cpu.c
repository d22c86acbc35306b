/* kc_cpu: the CPU's instruction level from cpuid, checked against the
 * kernel's own /proc/cpuinfo; and the verdict on the BLAS's kernels for a
 * table of CPUs, the ones OpenBLAS 0.3.21 does not know among them (an
 * Emerald Rapids Xeon, family 6 model 207, gets its Prescott kernels). */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "kc_cpu.h"

/* 1 when every flag of `flags` (space separated) is on cpuinfo's line. */
static int cpuinfo_has(const char *line, const char *flags)
{
    char want[128];
    snprintf(want, sizeof want, "%s", flags);
    for (char *f = strtok(want, " "); f; f = strtok(NULL, " ")) {
        char pat[48];
        snprintf(pat, sizeof pat, " %s ", f);
        if (!strstr(line, pat))
            return 0;
    }
    return 1;
}

static void detect_matches_cpuinfo(void)
{
    kc_cpu_t cpu;
    kc_cpu_detect(&cpu);
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) {
        printf("no /proc/cpuinfo: detection not cross-checked\n");
        return;
    }
    static char line[8192];
    int found = 0;
    while (!found && fgets(line + 1, sizeof line - 2, f))
        found = !strncmp(line + 1, "flags", 5);
    fclose(f);
    if (!found)
        return;
    line[0] = ' ';
    line[strcspn(line, "\n")] = ' ';
    /* Linux lists a flag only where the OS supports its state. */
    kc_isa_t expect = KC_ISA_SSE;
    if (cpuinfo_has(line, "avx"))
        expect = KC_ISA_AVX;
    if (cpuinfo_has(line, "avx2 fma"))
        expect = KC_ISA_AVX2;
    if (cpuinfo_has(line, "avx512f avx512cd avx512bw avx512dq avx512vl"))
        expect = KC_ISA_AVX512;
    CHECKF(cpu.isa == expect, "cpuid says %s, /proc/cpuinfo %s",
           kc_isa_name(cpu.isa), kc_isa_name(expect));
    CHECK(cpu.bf16 == (expect == KC_ISA_AVX512 &&
                       cpuinfo_has(line, "avx512_bf16")));
    CHECK(cpu.amx_bf16 == (expect == KC_ISA_AVX512 &&
                           cpuinfo_has(line, "amx_bf16") &&
                           cpuinfo_has(line, "amx_tile")));
    CHECK(strlen(cpu.vendor) == 12);
    printf("this CPU: %s family %u model %u, %s%s%s\n", cpu.vendor,
           cpu.family, cpu.model, kc_isa_name(cpu.isa),
           cpu.bf16 ? " + BF16" : "", cpu.amx_bf16 ? " + AMX-BF16" : "");
    if (cpu.amx_bf16) {
        /* KC_CPU_HIDE takes it away, and only it */
        setenv("KC_CPU_HIDE", "amx_bf16", 1);
        kc_cpu_t hid;
        kc_cpu_detect(&hid);
        unsetenv("KC_CPU_HIDE");
        CHECK(!hid.amx_bf16 && hid.bf16 == cpu.bf16 && hid.isa == cpu.isa);
    }
}

static kc_cpu_t mk(const char *vendor, unsigned family, unsigned model,
                   kc_isa_t isa)
{
    kc_cpu_t c;
    memset(&c, 0, sizeof c);
    snprintf(c.vendor, sizeof c.vendor, "%s", vendor);
    c.family = family;
    c.model = model;
    c.isa = isa;
    return c;
}

static void verdicts(void)
{
    static const char intel[] = "GenuineIntel", amd[] = "AuthenticAMD";
    const struct {
        kc_cpu_t cpu;
        const char *core;
        int env;
        kc_blas_fit_t fit;
        const char *want;
    } t[] = {
        /* The fallback on CPUs newer than the library. */
        { mk(intel, 6, 207, KC_ISA_AVX512), "Prescott", 0, KC_BLAS_FALLBACK, "SkylakeX" },
        { mk(intel, 6, 207, KC_ISA_AVX2), "Prescott", 0, KC_BLAS_FALLBACK, "Haswell" },
        { mk(amd, 26, 2, KC_ISA_AVX512), "Zen", 0, KC_BLAS_FALLBACK, "SkylakeX" },
        { mk(amd, 25, 1, KC_ISA_AVX2), "Prescott", 0, KC_BLAS_FALLBACK, "Zen" },
        { mk(intel, 6, 42, KC_ISA_AVX), "Nehalem", 0, KC_BLAS_FALLBACK, "Sandybridge" },
        { mk(intel, 6, 60, KC_ISA_AVX2), "Sandybridge", 0, KC_BLAS_FALLBACK, "Haswell" },
        /* What the library chose well. */
        { mk(amd, 25, 1, KC_ISA_AVX2), "Zen", 0, KC_BLAS_FITS, NULL },
        { mk(amd, 25, 1, KC_ISA_AVX2), "Haswell", 0, KC_BLAS_FITS, NULL },
        { mk(intel, 6, 85, KC_ISA_AVX512), "SkylakeX", 0, KC_BLAS_FITS, NULL },
        { mk(intel, 6, 85, KC_ISA_AVX512), "cooperlake", 0, KC_BLAS_FITS, NULL },
        { mk(intel, 6, 15, KC_ISA_SSE), "Core2", 0, KC_BLAS_FITS, NULL },
        { mk(intel, 6, 15, KC_ISA_SSE), "Prescott", 0, KC_BLAS_FITS, NULL },
        /* Kernels the table does not know, or no kernels named. */
        { mk(intel, 6, 207, KC_ISA_AVX512), "Neoverse", 0, KC_BLAS_FITS, NULL },
        { mk(intel, 6, 207, KC_ISA_AVX512), NULL, 0, KC_BLAS_FITS, NULL },
        { mk("", 0, 0, KC_ISA_UNKNOWN), "Prescott", 0, KC_BLAS_FITS, NULL },
        /* The user's OPENBLAS_CORETYPE: respected when weaker, never
         * when the CPU cannot execute it. */
        { mk(intel, 6, 207, KC_ISA_AVX512), "Prescott", 1, KC_BLAS_USER_WEAKER, "SkylakeX" },
        { mk(amd, 25, 1, KC_ISA_AVX2), "Haswell", 1, KC_BLAS_FITS, NULL },
        { mk(amd, 25, 1, KC_ISA_AVX2), "SkylakeX", 1, KC_BLAS_TOO_NEW, NULL },
        { mk(intel, 6, 42, KC_ISA_AVX), "Haswell", 0, KC_BLAS_TOO_NEW, NULL },
        { mk(intel, 6, 15, KC_ISA_SSE), "Sandybridge", 1, KC_BLAS_TOO_NEW, NULL },
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        const char *want = "unset";
        kc_blas_fit_t fit = kc_blas_fit(&t[i].cpu, t[i].core, t[i].env, &want);
        CHECKF(fit == t[i].fit, "row %zu (%s on %s): verdict %d, expected %d",
               i, t[i].core ? t[i].core : "(none)",
               kc_isa_name(t[i].cpu.isa), (int)fit, (int)t[i].fit);
        CHECKF((want == NULL && t[i].want == NULL) ||
               (want && t[i].want && !strcmp(want, t[i].want)),
               "row %zu: want %s, expected %s", i, want ? want : "NULL",
               t[i].want ? t[i].want : "NULL");
    }
}

static void names(void)
{
    CHECK(kc_blas_core_isa("Prescott") == KC_ISA_SSE);
    CHECK(kc_blas_core_isa("HASWELL") == KC_ISA_AVX2);
    CHECK(kc_blas_core_isa("SkylakeX") == KC_ISA_AVX512);
    CHECK(kc_blas_core_isa("Sandybridge") == KC_ISA_AVX);
    CHECK(kc_blas_core_isa("bogus") == KC_ISA_UNKNOWN);
    CHECK(kc_blas_core_isa(NULL) == KC_ISA_UNKNOWN);
    /* Every name the best-core choice gives is one the table rates at the
     * level it was chosen for. */
    for (int isa = KC_ISA_AVX; isa <= KC_ISA_AVX512; isa++) {
        kc_cpu_t c = mk("GenuineIntel", 6, 1, (kc_isa_t)isa);
        CHECK(kc_blas_core_isa(kc_blas_best_core(&c)) == (kc_isa_t)isa);
        c = mk("AuthenticAMD", 25, 1, (kc_isa_t)isa);
        CHECK(kc_blas_core_isa(kc_blas_best_core(&c)) == (kc_isa_t)isa);
    }
    kc_cpu_t sse = mk("GenuineIntel", 6, 1, KC_ISA_SSE);
    CHECK(kc_blas_best_core(&sse) == NULL);
    char name[48];
    kc_blas_name(name, sizeof name);
    CHECKF(!strncmp(name, "OpenBLAS", 8), "BLAS name %s", name);
    kc_blas_name(name, 5);
    CHECK(strlen(name) == 4);
    CHECK(kc_blas_core() != NULL);
}

int main(void)
{
    detect_matches_cpuinfo();
    verdicts();
    names();
    return CHECK_DONE();
}
