/* Inverted dropout with a counter-based mask: element i of a call is kept
 * when a hash of (seed, first + i) clears the rate, so forward and backward
 * agree without a stored mask and any split of a batch draws the same bits
 * (kernels/cuda/ computes the same hash). */
#include "kernels_cpu.h"

/* SplitMix64's finaliser: a bijection of 64 bits with full avalanche. */
static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int kc_dropout_keep(uint64_t seed, uint64_t index, float rate)
{
    uint64_t h = mix64(seed ^ mix64(index + 0x9E3779B97F4A7C15ull));
    /* 24 random bits as a float in [0, 1): exact, the same on a GPU. */
    float u = (float)(uint32_t)(h >> 40) * 0x1p-24f;
    return u >= rate;
}

void kc_dropout_fwd(size_t n, const float *x, float *y, float rate,
                    uint64_t seed, uint64_t first)
{
    float scale = 1.0f / (1.0f - rate);
    for (size_t i = 0; i < n; i++)
        y[i] = kc_dropout_keep(seed, first + i, rate) ? x[i] * scale : 0.0f;
}

void kc_dropout_bwd(size_t n, const float *dy, float *dx, float rate,
                    uint64_t seed, uint64_t first)
{
    kc_dropout_fwd(n, dy, dx, rate, seed, first);
}
