/* The direct convolution's micro-kernel for AVX2 + FMA: 8 floats a
 * vector, 16 registers: blocks of 12 pixels x 1 vector or 6 x 2 (one more
 * register holds the broadcast). Lane masks are vmaskmov's: a masked-off
 * lane is neither read nor written. */
#include "conv_direct.h"

#ifdef KC_CONV_X86
#include <immintrin.h>

#define UK_TGT __attribute__((target("avx2,fma")))
#define UK_V __m256
#define UK_M __m256i
#define UK_VW 8
#define UK_PMAX1 12
#define UK_PMAX2 6
#define UK_MASK(n)                                                            \
    _mm256_cmpgt_epi32(_mm256_set1_epi32(n),                                  \
                       _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
#define UK_LOAD(p) _mm256_loadu_ps(p)
#define UK_MLOAD(p, m) _mm256_maskload_ps((p), (m))
#define UK_STORE(p, v) _mm256_storeu_ps((p), (v))
#define UK_MSTORE(p, m, v) _mm256_maskstore_ps((p), (m), (v))
#define UK_STREAM(p, v) _mm256_stream_ps((p), (v))
#define UK_BCAST(p) _mm256_broadcast_ss(p)
#define UK_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define UK_ADD(a, b) _mm256_add_ps((a), (b))
#define UK_ZERO() _mm256_setzero_ps()
#define UK_MAX(a, b) _mm256_max_ps((a), (b))
#define UK_NAME kc_conv_avx2
#define UK_DWT 1
#include "conv_ukern.h"
#endif
