/* Inverted dropout with the counter-based mask of kernels/cpu/dropout.c:
 * element i is kept when a hash of (seed, first + i) clears the rate. The
 * hash is integer arithmetic and the uniform is exact, so every mask bit
 * and every value equals the CPU's. */
#include "cpu/kc_hash.h"
#include "kg_internal.h"

/* kc_dropout_keep(seed, index, rate): the CPU's own hash (cpu/kc_hash.h). */
__device__ __forceinline__ bool kg_keep(uint64_t seed, uint64_t index,
                                        float rate)
{
    return kc_dropout_kept(kc_dropout_key(seed, index), (uint32_t)index, rate);
}

/* y = x * (kept ? scale : 0): a multiply, as the CPU twin (a NaN stays NaN,
 * a dropped negative becomes -0). */
__global__ void kg_dropout_k(size_t n, const float *x, float *y, float rate,
                             float scale, uint64_t seed, uint64_t first)
{
    KG_FOR(i, n) y[i] = x[i] * (kg_keep(seed, first + i, rate) ? scale : 0.0f);
}

int kg_dropout_fwd(size_t n, const float *x, float *y, float rate,
                   uint64_t seed, uint64_t first, kg_stream_t s)
{
    if (n == 0)
        return KG_OK;
    /* The scale is rounded on the host, as the CPU twin rounds it. */
    float scale = 1.0f / (1.0f - rate);
    kg_dropout_k<<<kg__blocks(n), KG_THREADS, 0, s>>>(n, x, y, rate, scale,
                                                      seed, first);
    return kg__launched();
}

int kg_dropout_bwd(size_t n, const float *dy, float *dx, float rate,
                   uint64_t seed, uint64_t first, kg_stream_t s)
{
    return kg_dropout_fwd(n, dy, dx, rate, seed, first, s);
}
