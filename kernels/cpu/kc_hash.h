/* The dropout mask's hash, shared by kernels/cpu and kernels/cuda (which
 * includes this file as "cpu/kc_hash.h"), so the two draw the same bits.
 * Integer arithmetic only, and a uniform that is exact in float.
 *
 * Element `index` of a mask seeded with `seed` is kept when
 *   key  = fmix32(lo32(seed) ^ fmix32(hi32(seed) ^ hi32(index)))
 *   h    = fmix32(lo32(index) * 0x9E3779B9 + key)        (mod 2^32)
 *   kept = (float)(h >> 8) * 2^-24 >= rate
 * with fmix32 MurmurHash3's 32-bit finaliser. 32-bit arithmetic, so the
 * CPU loop vectorises (AVX2 has no 64-bit multiply); the key changes only
 * every 2^32 indices. */
#ifndef STRATA_KC_HASH_H
#define STRATA_KC_HASH_H

#include <stdint.h>

#ifdef __CUDACC__
#define KC_HASH_FN static __host__ __device__ __forceinline__
#else
#define KC_HASH_FN static inline
#endif

KC_HASH_FN uint32_t kc_fmix32(uint32_t h)
{
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    return h ^ (h >> 16);
}

/* The key of the 2^32 indices that share index >> 32. */
KC_HASH_FN uint32_t kc_dropout_key(uint64_t seed, uint64_t index)
{
    return kc_fmix32((uint32_t)seed ^ kc_fmix32((uint32_t)(seed >> 32) ^
                                                (uint32_t)(index >> 32)));
}

/* Whether the element whose index has low half `lo` is kept under `key`. */
KC_HASH_FN int kc_dropout_kept(uint32_t key, uint32_t lo, float rate)
{
    uint32_t h = kc_fmix32(lo * 0x9E3779B9u + key);
    return (float)(int32_t)(h >> 8) * 0x1p-24f >= rate;
}

#endif /* STRATA_KC_HASH_H */
