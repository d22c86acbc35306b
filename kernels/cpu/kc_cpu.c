/* CPU features from cpuid and the BLAS's kernels: see kc_cpu.h. */
#include "kc_cpu.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* XCR0: the register state the OS saves on a context switch. An instruction
 * set whose registers the OS does not save is not usable, whatever cpuid
 * says (xgetbv without -mxsave: the raw opcode's mnemonic). */
static uint64_t xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* $KC_CPU_HIDE: a comma-separated list of features to treat as absent
 * (kc_cpu.h); is `name` in it? */
static int hidden(const char *name)
{
    const char *s = getenv("KC_CPU_HIDE");
    size_t n = strlen(name);
    while (s && *s) {
        size_t len = strcspn(s, ", ");
        if (len == n && strncasecmp(s, name, n) == 0)
            return 1;
        s += len;
        s += strspn(s, ", ");
    }
    return 0;
}

void kc_cpu_detect(kc_cpu_t *cpu)
{
    memset(cpu, 0, sizeof *cpu);
    cpu->isa = KC_ISA_SSE;
    unsigned a, b, c, d, max;
    if (!__get_cpuid(0, &max, &b, &c, &d))
        return;
    memcpy(cpu->vendor, &b, 4);
    memcpy(cpu->vendor + 4, &d, 4);
    memcpy(cpu->vendor + 8, &c, 4);
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return;
    unsigned family = (a >> 8) & 0xf, model = (a >> 4) & 0xf;
    if (family == 0xf)
        family += (a >> 20) & 0xff;
    if (family == 0x6 || family >= 0xf)
        model |= ((a >> 16) & 0xf) << 4;
    cpu->family = family;
    cpu->model = model;
    int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1;
    uint64_t xcr = osxsave ? xcr0() : 0;
    if (!avx || (xcr & 0x6) != 0x6)          /* XMM and YMM state */
        return;
    cpu->isa = KC_ISA_AVX;
    if (max < 7)
        return;
    __cpuid_count(7, 0, a, b, c, d);
    unsigned subleaves = a;
    if (((b >> 5) & 1) && fma)
        cpu->isa = KC_ISA_AVX2;
    const unsigned avx512 = (1u << 16) | (1u << 17) | (1u << 28) |
                            (1u << 30) | (1u << 31);  /* F DQ CD BW VL */
    if (cpu->isa == KC_ISA_AVX2 && (b & avx512) == avx512 &&
        (xcr & 0xe0) == 0xe0) {                 /* opmask, ZMM state */
        cpu->isa = KC_ISA_AVX512;
        /* AMX-TILE and AMX-BF16, with the OS saving the tile state
         * (XCR0 bits 17, 18) */
        cpu->amx_bf16 = ((d >> 22) & 1) && ((d >> 24) & 1) &&
                        (xcr & 0x60000) == 0x60000;
        if (subleaves >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            cpu->bf16 = (a >> 5) & 1;
        }
    }
    if (cpu->bf16 && hidden("avx512_bf16"))
        cpu->bf16 = 0;
    if (cpu->amx_bf16 && hidden("amx_bf16"))
        cpu->amx_bf16 = 0;
}
#else
void kc_cpu_detect(kc_cpu_t *cpu)
{
    memset(cpu, 0, sizeof *cpu);
    cpu->isa = KC_ISA_UNKNOWN;
}
#endif

const char *kc_isa_name(kc_isa_t isa)
{
    switch (isa) {
    case KC_ISA_SSE:     return "SSE3";
    case KC_ISA_AVX:     return "AVX";
    case KC_ISA_AVX2:    return "AVX2";
    case KC_ISA_AVX512:  return "AVX-512";
    default:             return "unknown";
    }
}

/* OpenBLAS's own answers (the build requires OpenBLAS: CMakeLists.txt). */
extern char *openblas_get_corename(void);
extern char *openblas_get_config(void);

void kc_blas_name(char *buf, size_t cap)
{
    /* "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...": the first two words. */
    const char *cfg = openblas_get_config();
    size_t n = 0;
    for (int words = 0; cfg[n] && n + 1 < cap; n++)
        if (cfg[n] == ' ' && ++words == 2)
            break;
    if (cap) {
        memcpy(buf, cfg, n);
        buf[n] = '\0';
    }
}

const char *kc_blas_core(void)
{
    return openblas_get_corename();
}

/* OpenBLAS's x86-64 kernel sets (driver/others/dynamic.c's corename list)
 * by the instructions their GEMM needs. */
static const struct { const char *name; kc_isa_t isa; } k_cores[] = {
    { "Katmai", KC_ISA_SSE },      { "Coppermine", KC_ISA_SSE },
    { "Northwood", KC_ISA_SSE },   { "Prescott", KC_ISA_SSE },
    { "Banias", KC_ISA_SSE },      { "Athlon", KC_ISA_SSE },
    { "Opteron", KC_ISA_SSE },     { "Barcelona", KC_ISA_SSE },
    { "Bobcat", KC_ISA_SSE },      { "Core2", KC_ISA_SSE },
    { "Penryn", KC_ISA_SSE },      { "Dunnington", KC_ISA_SSE },
    { "Atom", KC_ISA_SSE },        { "Nano", KC_ISA_SSE },
    { "Nehalem", KC_ISA_SSE },     { "Sandybridge", KC_ISA_AVX },
    { "Bulldozer", KC_ISA_AVX },   { "Piledriver", KC_ISA_AVX },
    { "Steamroller", KC_ISA_AVX }, { "Excavator", KC_ISA_AVX2 },
    { "Haswell", KC_ISA_AVX2 },    { "Zen", KC_ISA_AVX2 },
    { "SkylakeX", KC_ISA_AVX512 }, { "Cooperlake", KC_ISA_AVX512 },
    { "SapphireRapids", KC_ISA_AVX512 },
};

kc_isa_t kc_blas_core_isa(const char *core)
{
    for (size_t i = 0; core && i < sizeof k_cores / sizeof *k_cores; i++)
        if (!strcasecmp(core, k_cores[i].name))
            return k_cores[i].isa;
    return KC_ISA_UNKNOWN;
}

const char *kc_blas_best_core(const kc_cpu_t *cpu)
{
    switch (cpu->isa) {
    /* SkylakeX, not Cooperlake, where bf16 exists too: the same SGEMM
     * kernels, and OpenBLAS checks nothing more for it. */
    case KC_ISA_AVX512: return "SkylakeX";
    /* Zen's kernels are Haswell's with AMD's cache sizes. */
    case KC_ISA_AVX2:   return !strcmp(cpu->vendor, "AuthenticAMD")
                               ? "Zen" : "Haswell";
    case KC_ISA_AVX:    return "Sandybridge";
    default:            return NULL;
    }
}

kc_blas_fit_t kc_blas_fit(const kc_cpu_t *cpu, const char *core, int env_set,
                          const char **want)
{
    *want = NULL;
    kc_isa_t have = kc_blas_core_isa(core);
    if (have == KC_ISA_UNKNOWN || cpu->isa == KC_ISA_UNKNOWN)
        return KC_BLAS_FITS;
    if (have > cpu->isa)
        return KC_BLAS_TOO_NEW;
    const char *best = kc_blas_best_core(cpu);
    if (have == cpu->isa || !best)
        return KC_BLAS_FITS;
    *want = best;
    return env_set ? KC_BLAS_USER_WEAKER : KC_BLAS_FALLBACK;
}
