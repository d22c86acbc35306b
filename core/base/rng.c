/* xoshiro256** (Blackman & Vigna) seeded through splitmix64.
 *
 * The state comes from splitmix64 started at a point that mixes seed and
 * stream, so (seed, s) and (seed, s + 1) give unrelated sequences, and the
 * output depends on nothing but the two numbers: the same on every machine. */
#include "internal.h"

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void strata__rng_seed(strata__rng_t *r, uint64_t seed, uint64_t stream)
{
    /* Scramble the seed, then the stream (two splitmix64 outputs, each a
     * bijection of its input), and start the state's splitmix64 there. */
    uint64_t a = seed, b = stream;
    uint64_t x = splitmix64(&a) ^ rotl(splitmix64(&b), 32);
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
    if ((r->s[0] | r->s[1] | r->s[2] | r->s[3]) == 0)
        r->s[0] = 1;   /* the one state xoshiro cannot leave */
}

uint64_t strata__rng_next(strata__rng_t *r)
{
    uint64_t *s = r->s;
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double strata__rng_uniform(strata__rng_t *r)
{
    return (double)(strata__rng_next(r) >> 11) * 0x1.0p-53;
}

/* Lemire's multiply-and-reject ("Fast random integer generation in an
 * interval", 2019): unbiased, almost never divides. n == 0 gives 0. */
uint64_t strata__rng_below(strata__rng_t *r, uint64_t n)
{
    if (n == 0)
        return 0;
    unsigned __int128 m = (unsigned __int128)strata__rng_next(r) * n;
    uint64_t lo = (uint64_t)m;
    if (lo < n) {
        uint64_t thresh = (0 - n) % n;   /* 2^64 mod n */
        while (lo < thresh) {
            m = (unsigned __int128)strata__rng_next(r) * n;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}
