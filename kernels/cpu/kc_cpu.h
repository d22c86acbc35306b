/* What the CPU offers and which GEMM kernels the BLAS runs on it.
 *
 * A BLAS built with runtime dispatch (OpenBLAS's DYNAMIC_ARCH) picks its
 * kernels from the CPU's family and model numbers; a CPU newer than the
 * library is "unknown" to it and gets the oldest x86-64 kernels (Prescott,
 * SSE3) although it has AVX2 or AVX-512: 3-4x slower GEMM, silently. Here
 * the CPU is judged by its feature bits (cpuid, and xgetbv for the state the
 * OS saves) and the BLAS by the kernels it reports, so a caller can tell
 * when they disagree and which kernels to ask for. Nothing of strata. */
#ifndef STRATA_KC_CPU_H
#define STRATA_KC_CPU_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Vector instruction levels that decide a GEMM kernel, lowest first. */
typedef enum kc_isa {
    KC_ISA_UNKNOWN = -1, /* not x86-64, or a kernel name not in the table */
    KC_ISA_SSE = 0,      /* SSE2/SSE3/SSE4: what every x86-64 has */
    KC_ISA_AVX,
    KC_ISA_AVX2,         /* AVX2 with FMA3 */
    KC_ISA_AVX512,       /* AVX-512 F, CD, BW, DQ, VL (Skylake-SP's set) */
} kc_isa_t;

typedef struct kc_cpu {
    char     vendor[13];  /* "GenuineIntel", "AuthenticAMD", "" off x86 */
    unsigned family, model;
    kc_isa_t isa;         /* usable: the CPU has it and the OS saves it */
    int      bf16;        /* AVX512_BF16 usable */
    int      amx_bf16;    /* AMX-TILE and AMX-BF16, tile state saved by the
                             OS (a process must still ask Linux for it) */
} kc_cpu_t;

/* This CPU, from cpuid. $KC_CPU_HIDE, a comma-separated list of feature
 * names (for now: avx512_bf16, amx_bf16, /proc/cpuinfo's names), makes it
 * report those as absent: tests and benchmarks simulate a CPU without
 * them. */
void kc_cpu_detect(kc_cpu_t *cpu);

/* "SSE3", "AVX", "AVX2", "AVX-512", "unknown". */
const char *kc_isa_name(kc_isa_t isa);

/* The BLAS linked in, as it names itself ("OpenBLAS 0.3.21"), into
 * buf[cap]; and the kernels it runs ("Prescott"). */
void kc_blas_name(char *buf, size_t cap);
const char *kc_blas_core(void);

/* The instruction level of an OpenBLAS x86-64 kernel name (any case). */
kc_isa_t kc_blas_core_isa(const char *core);

/* The OpenBLAS kernel name for the best level `cpu` has ("SkylakeX",
 * "Haswell", "Zen", "Sandybridge"), or NULL where the SSE kernels are all
 * there is. */
const char *kc_blas_best_core(const kc_cpu_t *cpu);

/* How the running kernels `core` suit `cpu`. `env_set`: the user chose the
 * kernels (OPENBLAS_CORETYPE is set), which a caller respects. */
typedef enum kc_blas_fit {
    KC_BLAS_FITS,        /* the best the CPU allows, or nothing to judge */
    KC_BLAS_FALLBACK,    /* weaker than the CPU: *want names the right ones */
    KC_BLAS_USER_WEAKER, /* weaker, as the user asked: *want names better */
    KC_BLAS_TOO_NEW,     /* needs instructions the CPU lacks: would fault */
} kc_blas_fit_t;
kc_blas_fit_t kc_blas_fit(const kc_cpu_t *cpu, const char *core, int env_set,
                          const char **want);

#ifdef __cplusplus
}
#endif
#endif
