/* A CUDA module of another build of strata (gpu_module_bad): the table is
 * there, but its version is not the core's, so the core must not call it. */
#include <stdlib.h>

#include "device/cuda_module.h"
#include "strata/plugin.h"

static void bad_init(strata__cuda_log_fn log)
{
    (void)log;
    abort();
}

static int bad_count(int *n, const char **why)
{
    (void)n;
    (void)why;
    abort();
}

static int bad_kdev(int index, strata__kdev_t **out)
{
    (void)index;
    (void)out;
    abort();
}

STRATA_EXPORT const strata_cuda_v1_t strata_cuda_v1 = {
    .struct_size = sizeof(strata_cuda_v1_t),
    .kops_size = sizeof(strata__kops_t),
    .version = "0.0.0-another-build",
    .init = bad_init,
    .gpu_count = bad_count,
    .kdev_gpu = bad_kdev,
};
