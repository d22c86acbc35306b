/* The direct convolution's micro-kernel for AVX-512 (F, VL): 16 floats a
 * vector, 32 registers: blocks of 14 pixels x 1 vector or 13 x 2 (26
 * accumulators, 2 operand vectors, 1 broadcast: 29 registers, no spill; a
 * 26-wide row, as the seeds' CNN's dX, takes 2 blocks instead of 3: 109 ->
 * 122 GFLOP/s, contrib/bench/conv at batch 128), the broadcasts folded
 * into the FMAs. Compiled for the target on any x86-64;
 * conv_direct.c calls it only where the CPU has AVX-512F. */
#include "conv_direct.h"

#ifdef KC_CONV_X86
#include <immintrin.h>

#define UK_TGT __attribute__((target("avx512f,avx512vl,fma")))
#define UK_V __m512
#define UK_M __mmask16
#define UK_VW 16
#define UK_PMAX1 14
#define UK_PMAX2 13
#define UK_MASK(n) ((__mmask16)((1u << (n)) - 1u))
#define UK_LOAD(p) _mm512_loadu_ps(p)
#define UK_MLOAD(p, m) _mm512_maskz_loadu_ps((m), (p))
#define UK_STORE(p, v) _mm512_storeu_ps((p), (v))
#define UK_MSTORE(p, m, v) _mm512_mask_storeu_ps((p), (m), (v))
#define UK_STREAM(p, v) _mm512_stream_ps((p), (v))
#define UK_BCAST(p) _mm512_set1_ps(*(p))
#define UK_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define UK_ADD(a, b) _mm512_add_ps((a), (b))
#define UK_ZERO() _mm512_setzero_ps()
#define UK_MAX(a, b) _mm512_max_ps((a), (b))
#define UK_NAME kc_conv_avx512
#define UK_DWT 1
#include "conv_ukern.h"
#endif
