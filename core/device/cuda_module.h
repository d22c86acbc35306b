/* strata core -- the entry table of the CUDA module. Internal; never
 * installed.
 *
 * The CUDA side of the core (cuda/kops_cuda.c on kernels/cuda, cudart and
 * cuBLAS) is a module of its own, strata_cuda.so, which cuda_load.c
 * dlopen()s only when GPUs are wanted: a CPU run of a CUDA build never maps
 * the CUDA libraries (NCCL's net plugins are loaded the same way). The
 * module exports this one object, `strata_cuda_v1`; all else is hidden.
 * It is built with the core from the same tree, so the core takes only a
 * table of its own build: equal sizes and version, or no GPUs. */
#ifndef STRATA_CORE_CUDA_MODULE_H
#define STRATA_CORE_CUDA_MODULE_H

#include <stdarg.h>
#include <stdint.h>

#include "kops.h"

#define STRATA_CUDA_SYMBOL "strata_cuda_v1"

/* The core's logger (strata__vlog): the module has no core to link to. */
typedef void (*strata__cuda_log_fn)(int level, const char *who,
                                    const char *fmt, va_list ap);

typedef struct strata_cuda_v1 {
    uint32_t    struct_size;   /* sizeof(strata_cuda_v1_t) in the module  */
    uint32_t    kops_size;     /* sizeof(strata__kops_t) in the module    */
    const char *version;       /* STRATA_VERSION_STRING of its build      */
    /* Called once, before anything else: where the module logs. */
    void (*init)(strata__cuda_log_fn log);
    /* As strata__gpu_count / strata__kdev_gpu of kops.h. */
    int  (*gpu_count)(int *n, const char **why);
    int  (*kdev_gpu)(int index, strata__kdev_t **out);
    /* As strata__gpu_arch of kops.h. */
    int  (*gpu_arch)(int index, int *major, int *minor);
} strata_cuda_v1_t;

#endif /* STRATA_CORE_CUDA_MODULE_H */
