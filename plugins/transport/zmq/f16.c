/* zmq.so -- float32 <-> 16-bit conversions for compressed gradients
 * ([transport.zmq] compression = fp16 | bf16).
 *
 * Why a transport converts numbers: the core's rule is that plugins do no
 * arithmetic of their own. A format conversion is not arithmetic on the
 * values: it is how the bytes of a gradient are laid out on the wire (as
 * byte order would be), exact on the way back, and chosen by the
 * transport's own key. The sums stay float32 (sum.c).
 *
 * Both directions are mostly integer bit manipulation. Two float
 * operations remain, chosen so that the thread's floating-point environment
 * (the core's compute threads flush denormals, FTZ/DAZ) cannot change
 * them: an fp16 subnormal is decoded as (float)m * 2^-24, a product of
 * normal numbers whose exact result is normal; and |x| < 2^-14 is encoded
 * through |x| + 0.5, whose rounding to float32 (to nearest even, the only
 * rounding mode strata runs in) is the rounding to fp16's subnormal steps
 * -- a float32 subnormal x, read as 0 under DAZ, encodes to 0 either way.
 * (Measured on AVX2: 1.5-2x faster than shifting the significand by a
 * per-element amount.)
 *
 * float32 -> 16 bits rounds to nearest, ties to even:
 *   fp16: |x| >= 65520 (halfway from 65504, the largest fp16, to 2^16)
 *         becomes inf -- the documented hazard of fp16 gradients; below
 *         2^-14 the result is an fp16 subnormal (steps of 2^-24), and at
 *         most 2^-25 rounds to zero. Infinities stay infinite.
 *   bf16: the float32's top 16 bits, rounded: float32's exponent range,
 *         so only values within half a bf16 step of FLT_MAX (|x| >=
 *         0x1.ffp127) round up to inf; subnormals keep their top bits.
 * NaN stays NaN (sign and the top payload bits kept, quiet bit set), so a
 * NaN gradient still shows as NaN after the all-reduce.
 *
 * The loops keep the shape gcc -O2 vectorises (constant inner trip count,
 * selects instead of branches; kernels/cpu/kc_loop.h) and are compiled for
 * AVX2 and the baseline where gcc supports it, as sum.c's. */
#include "strz.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define F16_HOT __attribute__((target_clones("avx2", "default")))
#else
#define F16_HOT
#endif

#define F16_VEC 16

static inline uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* `sub` is |x| + 0.5 in float32: for |x| < 2^-14 its last 10 bits are
 * |x| rounded to fp16's subnormal steps of 2^-24 (the addition rounds to
 * nearest even); the caller computes it for every element (see
 * unpack_fp16 for why). */
static inline uint16_t enc_fp16(uint32_t x, float sub)
{
    uint32_t sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    /* normal: rebias the exponent (127 -> 15), round away 13 bits */
    uint32_t nv = a - 0x38000000u;
    nv = (nv + 0x0fffu + ((nv >> 13) & 1u)) >> 13;
    uint32_t sv = bits_of(sub) - 0x3f000000u;
    uint32_t out = a >= 0x38800000u ? nv : sv;
    out = a >= 0x477ff000u ? 0x7c00u : out;                 /* overflow, inf */
    out = a > 0x7f800000u ? 0x7e00u | ((a >> 13) & 0x3ffu) : out; /* NaN */
    return (uint16_t)(sign | out);
}

static inline float subnormal_sum(float x)
{
    return fabsf(x) + 0.5f;
}

/* `sub` is the value of h's significand as a subnormal, m * 2^-24, which
 * the caller computes for every element (a float operation the compiler
 * would not speculate inside the select, which keeps the loop scalar). */
static inline uint32_t dec_fp16(uint16_t h, float sub)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t normal = ((e + 112u) << 23) | (m << 13);
    uint32_t special = 0x7f800000u | (m << 13);       /* inf, NaN */
    uint32_t out = e == 0 ? bits_of(sub) : e == 31u ? special : normal;
    return sign | out;
}

static inline float subnormal_fp16(uint16_t h)
{
    return (float)(int32_t)(h & 0x3ffu) * 0x1p-24f;
}

static inline uint16_t enc_bf16(uint32_t x)
{
    uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    uint32_t nan = (x >> 16) | 0x0040u;
    return (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

static inline uint16_t load16(const unsigned char *p, size_t i)
{
    uint16_t h;
    memcpy(&h, p + 2 * i, sizeof h);
    return h;
}

static inline void store16(unsigned char *p, size_t i, uint16_t h)
{
    memcpy(p + 2 * i, &h, sizeof h);
}

static F16_HOT void pack_fp16(unsigned char *restrict d,
                              const float *restrict s, size_t n)
{
    size_t b = 0;
    for (; b + F16_VEC <= n; b += F16_VEC) {
        float sub[F16_VEC];
        for (size_t i = 0; i < F16_VEC; i++)
            sub[i] = subnormal_sum(s[b + i]);
        for (size_t i = 0; i < F16_VEC; i++)
            store16(d, b + i, enc_fp16(bits_of(s[b + i]), sub[i]));
    }
    for (size_t i = b; i < n; i++)
        store16(d, i, enc_fp16(bits_of(s[i]), subnormal_sum(s[i])));
}

static F16_HOT void pack_bf16(unsigned char *restrict d,
                              const float *restrict s, size_t n)
{
    size_t b = 0;
    for (; b + F16_VEC <= n; b += F16_VEC)
        for (size_t i = b; i < b + F16_VEC; i++)
            store16(d, i, enc_bf16(bits_of(s[i])));
    for (size_t i = b; i < n; i++)
        store16(d, i, enc_bf16(bits_of(s[i])));
}

static F16_HOT void unpack_fp16(float *restrict d,
                                const unsigned char *restrict s, size_t n)
{
    size_t b = 0;
    for (; b + F16_VEC <= n; b += F16_VEC) {
        float sub[F16_VEC];
        for (size_t i = 0; i < F16_VEC; i++)
            sub[i] = subnormal_fp16(load16(s, b + i));
        for (size_t i = 0; i < F16_VEC; i++)
            d[b + i] = float_of(dec_fp16(load16(s, b + i), sub[i]));
    }
    for (size_t i = b; i < n; i++) {
        uint16_t h = load16(s, i);
        d[i] = float_of(dec_fp16(h, subnormal_fp16(h)));
    }
}

static F16_HOT void unpack_bf16(float *restrict d,
                                const unsigned char *restrict s, size_t n)
{
    size_t b = 0;
    for (; b + F16_VEC <= n; b += F16_VEC)
        for (size_t i = b; i < b + F16_VEC; i++)
            d[i] = float_of((uint32_t)load16(s, i) << 16);
    for (size_t i = b; i < n; i++)
        d[i] = float_of((uint32_t)load16(s, i) << 16);
}

void strz_pack16(void *dst, const float *src, size_t n, int fmt)
{
    if (fmt == STRZ_COMP_BF16)
        pack_bf16(dst, src, n);
    else
        pack_fp16(dst, src, n);
}

void strz_unpack16(float *dst, const void *src, size_t n, int fmt)
{
    if (fmt == STRZ_COMP_BF16)
        unpack_bf16(dst, src, n);
    else
        unpack_fp16(dst, src, n);
}

const char *strz_comp_name(int fmt)
{
    return fmt == STRZ_COMP_FP16 ? "fp16"
           : fmt == STRZ_COMP_BF16 ? "bf16" : "none";
}
