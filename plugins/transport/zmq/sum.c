/* zmq.so -- the element-wise sums of the collectives.
 *
 * Every member must get the same bits, so a sum always adds its sources in
 * the order given, element by element (no reassociation, no FMA: the
 * project builds without contraction). The loops work on blocks of
 * SUM_BLOCK floats in a local buffer: a source that is not float-aligned
 * (a tiny zmq message lives inside the message struct) is copied there
 * first, and dst may be one of the sources because a block is read whole
 * before it is written. The inner loops have a constant trip count, the
 * shape that gcc -O2 vectorises (see kernels/cpu/kc_loop.h), and are
 * compiled twice, for AVX2 and the baseline, where gcc supports it. */
#include "strz.h"

#include <stdalign.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define SUM_HOT __attribute__((target_clones("avx2", "default")))
#else
#define SUM_HOT
#endif

#define SUM_BLOCK 1024 /* floats: 4 KiB, stays in L1 */
#define SUM_VEC   16

static SUM_HOT void add_block(float *restrict acc, const float *restrict x,
                              size_t n)
{
    size_t b = 0;
    for (; b + SUM_VEC <= n; b += SUM_VEC)
        for (size_t i = b; i < b + SUM_VEC; i++)
            acc[i] += x[i];
    for (size_t i = b; i < n; i++)
        acc[i] += x[i];
}

static SUM_HOT void scale_block(float *restrict dst, const float *restrict x,
                                size_t n, float scale)
{
    size_t b = 0;
    for (; b + SUM_VEC <= n; b += SUM_VEC)
        for (size_t i = b; i < b + SUM_VEC; i++)
            dst[i] = x[i] * scale;
    for (size_t i = b; i < n; i++)
        dst[i] = x[i] * scale;
}

static SUM_HOT void scale_inplace(float *restrict x, size_t n, float scale)
{
    size_t b = 0;
    for (; b + SUM_VEC <= n; b += SUM_VEC)
        for (size_t i = b; i < b + SUM_VEC; i++)
            x[i] *= scale;
    for (size_t i = b; i < n; i++)
        x[i] *= scale;
}

/* src + off floats as an aligned pointer: itself, or a copy in `tmp`. */
static const float *view(const void *src, size_t off, size_t m, float *tmp)
{
    const unsigned char *p = (const unsigned char *)src + off * sizeof(float);
    if (((uintptr_t)p % alignof(float)) == 0)
        return (const float *)(const void *)p;
    memcpy(tmp, p, m * sizeof(float));
    return tmp;
}

void strz_sum(float *dst, const void *const *src, int k, size_t n,
              float scale)
{
    alignas(64) float acc[SUM_BLOCK];
    alignas(64) float tmp[SUM_BLOCK];

    for (size_t off = 0; off < n; off += SUM_BLOCK) {
        size_t m = n - off < SUM_BLOCK ? n - off : SUM_BLOCK;
        memcpy(acc, (const unsigned char *)src[0] + off * sizeof(float),
               m * sizeof(float));
        for (int j = 1; j < k; j++)
            add_block(acc, view(src[j], off, m, tmp), m);
        if (scale != 1.0f)
            scale_block(dst + off, acc, m, scale);
        else
            memcpy(dst + off, acc, m * sizeof(float));
    }
}

void strz_apply(float *dst, const void *src, size_t n, int add, float scale)
{
    alignas(64) float tmp[SUM_BLOCK];

    for (size_t off = 0; off < n; off += SUM_BLOCK) {
        size_t m = n - off < SUM_BLOCK ? n - off : SUM_BLOCK;
        const float *x = view(src, off, m, tmp);
        if (add)
            add_block(dst + off, x, m);
        else if (x != dst + off)
            memcpy(dst + off, x, m * sizeof(float));
        if (scale != 1.0f)
            scale_inplace(dst + off, m, scale);
    }
}

/* ---- 16-bit sources (compressed gradients) ----------------------------- */

void strz_sum16(float *dst, const void *const *src, int k, size_t n,
                float scale, int fmt)
{
    alignas(64) float acc[SUM_BLOCK];
    alignas(64) float tmp[SUM_BLOCK];

    for (size_t off = 0; off < n; off += SUM_BLOCK) {
        size_t m = n - off < SUM_BLOCK ? n - off : SUM_BLOCK;
        strz_unpack16(acc, (const unsigned char *)src[0] + 2 * off, m, fmt);
        for (int j = 1; j < k; j++) {
            strz_unpack16(tmp, (const unsigned char *)src[j] + 2 * off, m,
                          fmt);
            add_block(acc, tmp, m);
        }
        if (scale != 1.0f)
            scale_block(dst + off, acc, m, scale);
        else
            memcpy(dst + off, acc, m * sizeof(float));
    }
}

void strz_apply16(float *dst, const void *src, size_t n, int add, float scale,
                  int fmt)
{
    alignas(64) float tmp[SUM_BLOCK];

    for (size_t off = 0; off < n; off += SUM_BLOCK) {
        size_t m = n - off < SUM_BLOCK ? n - off : SUM_BLOCK;
        const unsigned char *s = (const unsigned char *)src + 2 * off;
        if (add) {
            strz_unpack16(tmp, s, m, fmt);
            add_block(dst + off, tmp, m);
        } else {
            strz_unpack16(dst + off, s, m, fmt);
        }
        if (scale != 1.0f)
            scale_inplace(dst + off, m, scale);
    }
}
