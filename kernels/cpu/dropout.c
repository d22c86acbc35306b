/* Inverted dropout with a counter-based mask: element i of a call is kept
 * when a hash of (seed, first + i) clears the rate, so forward and backward
 * agree without a stored mask and any split of a batch draws the same bits
 * (kc_hash.h: kernels/cuda/ computes the same hash). */
#include "kernels_cpu.h"
#include "kc_hash.h"
#include "kc_loop.h"

int kc_dropout_keep(uint64_t seed, uint64_t index, float rate)
{
    return kc_dropout_kept(kc_dropout_key(seed, index), (uint32_t)index, rate);
}

/* Elements whose indices share one key: lo .. lo + n - 1 without wrapping.
 * A multiply by the mask's factor (as Keras does: a NaN stays NaN, a
 * dropped negative becomes -0), branch-free so the loop vectorises; inlined
 * into each of kc_dropout_fwd's clones (out of line it ran the baseline's
 * SSE2, which has no 32-bit multiply: 1 ns an element). */
static inline __attribute__((always_inline)) void dropout_copy(size_t n, const float *restrict x, float *restrict y,
                         float rate, float scale, uint32_t key, uint32_t lo)
{
    KC_FOR(i, n, y[i] = x[i] * (kc_dropout_kept(key, lo + (uint32_t)i, rate)
                                    ? scale : 0.0f));
}

static inline __attribute__((always_inline)) void dropout_inplace(size_t n, float *restrict x, float rate,
                            float scale, uint32_t key, uint32_t lo)
{
    KC_FOR(i, n, x[i] *= kc_dropout_kept(key, lo + (uint32_t)i, rate) ? scale
                                                                    : 0.0f);
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
        uint32_t key = kc_dropout_key(seed, index), lo = (uint32_t)index;
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
