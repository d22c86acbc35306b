/* The bf16 micro-kernel (mixed_bfloat16, conv_bf16.c and dense_bf16.c) for
 * AVX512_BF16, and the float -> bf16 conversions that feed it. Compiled
 * for the target on any x86-64; called only where kc_bf16_usable().
 *
 * conv_ukern.h's template, with a 32-bit element that is a PAIR of bf16
 * (the even index of the reduction in the low half): the broadcast operand
 * broadcasts one pair, the vector operand loads 16 pairs, and the step is
 * VDPBF16PS, acc[i] += a.lo*b.lo + a.hi*b.hi into fp32 (bf16 products are
 * exact in fp32; the instruction flushes denormals and rounds to nearest
 * even). Accumulators, bias and outputs stay fp32, loaded and stored as
 * the fp32 kernel does. Blocks of 14 pixels x 1 vector or 12 x 2, as
 * conv_avx512.c. */
#include "conv_direct.h"

#ifdef KC_CONV_X86
#include <immintrin.h>
#include <string.h>

#define UK_TGT __attribute__((target("avx512f,avx512vl,avx512bw,avx512bf16")))
#define UK_V __m512
#define UK_M __mmask16
#define UK_VW 16
#define UK_PMAX1 14
#define UK_PMAX2 12
#define UK_MASK(n) ((__mmask16)((1u << (n)) - 1u))
#define UK_LOAD(p) _mm512_loadu_ps(p)
#define UK_MLOAD(p, m) _mm512_maskz_loadu_ps((m), (p))
#define UK_STORE(p, v) _mm512_storeu_ps((p), (v))
#define UK_MSTORE(p, m, v) _mm512_mask_storeu_ps((p), (m), (v))
#define UK_STREAM(p, v) _mm512_stream_ps((p), (v))
#define UK_BCAST(p) _mm512_set1_ps(*(p))
#define UK_FMA(a, b, c) _mm512_dpbf16_ps((c), (__m512bh)(a), (__m512bh)(b))
#define UK_ADD(a, b) _mm512_add_ps((a), (b))
#define UK_ZERO() _mm512_setzero_ps()
#define UK_MAX(a, b) _mm512_max_ps((a), (b))
#define UK_NAME kc_conv_avx512bf16
#include "conv_ukern.h"

/* dst[0 .. n) as bf16 of src[0 .. n), round to nearest even (VCVTNE2PS2BF16,
 * which kc__bf16_of() reproduces bit for bit); dst holds (n + 1) / 2
 * 32-bit words, an odd n's last pair ends in +0. */
UK_TGT void kc__bf16_pack(const float *src, size_t n, float *dst)
{
    uint16_t *d = (uint16_t *)(void *)dst;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + i + 16),
                                         _mm512_loadu_ps(src + i));
        _mm512_storeu_si512((void *)(d + i), (__m512i)v);
    }
    if (i < n) {
        size_t r = n - i;
        __mmask16 lo = (__mmask16)(r >= 16 ? 0xffffu : (1u << r) - 1u);
        __mmask16 hi = (__mmask16)(r <= 16 ? 0u : (1u << (r - 16)) - 1u);
        __m512bh v = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, src + i + 16),
                                         _mm512_maskz_loadu_ps(lo, src + i));
        size_t words = (r + 1) / 2;       /* the +0 of an odd tail too */
        _mm512_mask_storeu_epi32((void *)(d + i),
                                 (__mmask16)((1u << words) - 1u),
                                 (__m512i)v);
    }
}

/* dst[j] = the pair (bf16 of lo[j], bf16 of hi[j]) for j < n words; lo or
 * hi NULL reads zeros. */
UK_TGT void kc__bf16_zip(const float *lo, const float *hi, size_t n,
                         float *dst)
{
    /* cvtne2ps puts lo's 16 in the low half, hi's in the high half:
     * interleave them, word j = lo j | hi j << 16 */
    const __m512i idx = _mm512_set_epi16(
        31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
        23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    for (size_t j = 0; j < n; j += 16) {
        __mmask16 m = (__mmask16)(n - j >= 16 ? 0xffffu
                                              : (1u << (n - j)) - 1u);
        __m512 a = lo ? _mm512_maskz_loadu_ps(m, lo + j) : _mm512_setzero_ps();
        __m512 b = hi ? _mm512_maskz_loadu_ps(m, hi + j) : _mm512_setzero_ps();
        __m512i v = _mm512_permutexvar_epi16(idx,
                                             (__m512i)_mm512_cvtne2ps_pbh(b, a));
        _mm512_mask_storeu_epi32(dst + j, m, v);
    }
}
#endif
