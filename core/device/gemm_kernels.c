/* Which GEMM kernels the BLAS runs, judged against the CPU (kernels/cpu/
 * kc_cpu.h): the banner's "gemm:" line, the hint the strata command acts on
 * (it re-executes itself once with OPENBLAS_CORETYPE set, since OpenBLAS
 * reads it only while the library loads), and the check a run makes before
 * its first GEMM. The user's OPENBLAS_CORETYPE is respected, unless it
 * names kernels this CPU cannot execute. */
#include <stdio.h>
#include <stdlib.h>

#include "kc_cpu.h"
#include "kernels_cpu.h"
#include "runtime.h"

#define WHO "gemm"
#define ENV "OPENBLAS_CORETYPE"

typedef struct fit {
    kc_cpu_t      cpu;
    const char   *core, *env, *want;
    kc_blas_fit_t verdict;
    char          isa[64]; /* the running kernels' set, and the user's word */
} fit_t;

static void judge(fit_t *f)
{
    kc_cpu_detect(&f->cpu);
    f->core = kc_blas_core();
    f->env = getenv(ENV);
    if (f->env && !*f->env)
        f->env = NULL;
    f->verdict = kc_blas_fit(&f->cpu, f->core, f->env != NULL, &f->want);
    snprintf(f->isa, sizeof f->isa, "%s%s%s",
             kc_isa_name(kc_blas_core_isa(f->core)), f->env ? ", " ENV "=" : "",
             f->env ? f->env : "");
}

const char *strata_blas_coretype_hint(void)
{
    fit_t f;
    judge(&f);
    return f.verdict == KC_BLAS_FALLBACK ? f.want : NULL;
}

int strata_gemm_kernels(char *buf, size_t cap)
{
    if (!buf || cap == 0)
        return STRATA_EINVAL;
    fit_t f;
    judge(&f);
    char blas[48];
    kc_blas_name(blas, sizeof blas);
    const char *cpu = kc_isa_name(f.cpu.isa);
    if (f.verdict == KC_BLAS_FITS)
        snprintf(buf, cap, "%s %s (%s)", blas, f.core, f.isa);
    else if (f.verdict == KC_BLAS_TOO_NEW)
        snprintf(buf, cap, "%s %s (%s) on a CPU with only %s", blas, f.core,
                 f.isa, cpu);
    else
        snprintf(buf, cap, "%s %s (%s) on a CPU with %s: %s would be faster",
                 blas, f.core, f.isa, cpu, f.want);
    return STRATA_OK;
}

const char *strata_conv_kernels(void)
{
    return kc_conv2d_kernels();
}

int strata__gemm_check(void)
{
    static atomic_int warned;
    fit_t f;
    judge(&f);
    const char *cpu = kc_isa_name(f.cpu.isa);
    const char *best = kc_blas_best_core(&f.cpu);
    if (f.verdict == KC_BLAS_TOO_NEW) {
        strata__log(STRATA_LOG_ERROR, WHO, "OpenBLAS runs its %s kernels "
                    "(%s), which this CPU lacks (it has %s): the first GEMM "
                    "would stop on an illegal instruction; unset " ENV "%s%s",
                    f.core, f.isa, cpu, best ? " or set it to " : "",
                    best ? best : "");
        return STRATA_EINVAL;
    }
    /* The user's own weaker choice is theirs: the banner shows it. */
    if (f.verdict == KC_BLAS_FALLBACK && !atomic_exchange(&warned, 1))
        strata__log(STRATA_LOG_WARN, WHO, "OpenBLAS runs its %s kernels (%s) "
                    "on this CPU, which has %s: GEMM is several times slower; "
                    "set " ENV "=%s before the process starts (the strata "
                    "command does so itself)", f.core, f.isa, cpu, f.want);
    return STRATA_OK;
}
