/* Shared by the kg_*.cu files only (C++ linkage, hidden): error recording
 * and launch geometry. */
#ifndef STRATA_KG_INTERNAL_H
#define STRATA_KG_INTERNAL_H

#include <cuda_runtime.h>

#include "kernels_cuda.h"

/* Records why the call failed for kg_last_error(); returns KG_ECUDA or
 * KG_ECUBLAS as given, for `return kg__fail(...)`. */
int kg__fail(int rc, const char *why);
/* 0 when e == cudaSuccess, else records cudaGetErrorString(e), KG_ECUDA. */
int kg__cuda(cudaError_t e);
/* After a launch: catches bad launch configurations (and earlier sticky
 * asynchronous errors) without waiting for the GPU. */
int kg__launched(void);

enum { KG_THREADS = 256 };
/* Blocks for a grid-stride loop over n items: enough to fill any current
 * GPU, never more than needed. */
static inline unsigned kg__blocks(size_t n)
{
    size_t b = (n + KG_THREADS - 1) / KG_THREADS;
    return (unsigned)(b < 8192 ? (b ? b : 1) : 8192);
}
#endif /* STRATA_KG_INTERNAL_H */
