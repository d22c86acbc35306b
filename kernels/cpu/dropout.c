/* Inverted dropout with a counter-based mask: element i of a call is kept
 * when a hash of (seed, first + i) clears the rate, so forward and backward
 * agree without a stored mask and any split of a batch draws the same bits
 * (kernels/cuda/ computes the same hash). */
#include "kernels_cpu.h"
#include "kc_loop.h"

/* MurmurHash3's finaliser: a bijection of 32 bits with full avalanche.
 * 32-bit arithmetic, so the mask loop vectorises (AVX2 has no 64-bit
 * multiply). */
static inline uint32_t fmix32(uint32_t h)
{
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    return h ^ (h >> 16);
}

/* The key of the 2^32 indices that share index >> 32, from the seed. */
static inline uint32_t key_of(uint64_t seed, uint64_t index)
{
    return fmix32((uint32_t)seed ^
                  fmix32((uint32_t)(seed >> 32) ^ (uint32_t)(index >> 32)));
}

/* Element `lo` (the low 32 bits of its index) under `key`: 24 random bits
 * as a float in [0, 1), exact, the same on a GPU, against the rate. */
static inline int keep(uint32_t key, uint32_t lo, float rate)
{
    uint32_t h = fmix32(lo * 0x9E3779B9u + key);
    return (float)(int32_t)(h >> 8) * 0x1p-24f >= rate;
}

int kc_dropout_keep(uint64_t seed, uint64_t index, float rate)
{
    return keep(key_of(seed, index), (uint32_t)index, rate);
}

/* Elements whose indices share one key: lo .. lo + n - 1 without wrapping.
 * A multiply by the mask's factor (as Keras does: a NaN stays NaN, a
 * dropped negative becomes -0), branch-free so the loop vectorises. */
static void dropout_copy(size_t n, const float *restrict x, float *restrict y,
                         float rate, float scale, uint32_t key, uint32_t lo)
{
    KC_FOR(i, n, y[i] = x[i] * (keep(key, lo + (uint32_t)i, rate) ? scale
                                                                  : 0.0f));
}

static void dropout_inplace(size_t n, float *restrict x, float rate,
                            float scale, uint32_t key, uint32_t lo)
{
    KC_FOR(i, n, x[i] *= keep(key, lo + (uint32_t)i, rate) ? scale : 0.0f);
}

KC_HOT void kc_dropout_fwd(size_t n, const float *x, float *y, float rate,
                           uint64_t seed, uint64_t first)
{
    float scale = 1.0f / (1.0f - rate);
    for (size_t done = 0; done < n;) {
        uint64_t index = first + done;
        /* Up to the next multiple of 2^32, where the key changes. */
        uint64_t room = ((index | 0xFFFFFFFFull) - index) + 1;
        size_t len = n - done < room ? n - done : (size_t)room;
        uint32_t key = key_of(seed, index), lo = (uint32_t)index;
        if (y == x)
            dropout_inplace(len, y + done, rate, scale, key, lo);
        else
            dropout_copy(len, x + done, y + done, rate, scale, key, lo);
        done += len;
    }
}

void kc_dropout_bwd(size_t n, const float *dy, float *dx, float rate,
                    uint64_t seed, uint64_t first)
{
    kc_dropout_fwd(n, dy, dx, rate, seed, first);
}
