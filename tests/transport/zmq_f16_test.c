/* zmq_f16_test -- zmq.so's float32 <-> fp16/bf16 conversions (f16.c) and
 * the sums over 16-bit sources (sum.c): exact values, ties to even,
 * subnormals, overflow, inf and NaN, every 16-bit pattern's round trip,
 * and millions of floats against a reference written another way (double
 * arithmetic, rint), through the vector loops and their scalar tails;
 * fp16 once more with denormals flushed (FTZ/DAZ), as training runs. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "../../plugins/transport/zmq/strz.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float flt(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint16_t enc(float x, int fmt)
{
    uint16_t h;
    strz_pack16(&h, &x, 1, fmt);
    return h;
}

static float dec(uint16_t h, int fmt)
{
    float f;
    strz_unpack16(&f, &h, 1, fmt);
    return f;
}

/* Reference fp16 bits of a finite or infinite non-NaN x: the grid spacing
 * at |x|, the quotient rounded by rint (nearest, ties to even), the bits
 * assembled from exponent and quotient. */
static uint16_t ref_fp16(float x)
{
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs((double)x);
    if (a >= 65520.0)
        return sign | 0x7c00;
    if (a < 0x1p-14) /* subnormal grid: 2^-24; rint may reach 1024 = 2^-14 */
        return sign | (uint16_t)rint(a * 0x1p24);
    int e;
    frexp(a, &e); /* a = f * 2^e, f in [0.5, 1): a in [2^(e-1), 2^e) */
    double q = rint(ldexp(a, 11 - e)); /* in [1024, 2048] */
    return sign | (uint16_t)(((e - 1 + 15) << 10) + (int)q - 1024);
}

/* Reference bf16 of a non-NaN x: the two bf16 neighbours by truncation,
 * the nearer one, ties to the even one. */
static uint16_t ref_bf16(float x)
{
    uint32_t u = bits(x);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    if ((u & 0xffffu) == 0)
        return lo;
    double dl = fabs((double)x - (double)flt((uint32_t)lo << 16));
    double dh = fabs((double)flt((uint32_t)hi << 16) - (double)x);
    if ((hi & 0x7f80u) == 0x7f80u) /* above the largest: the next is 2^128 */
        dh = fabs(ldexp(signbit(x) ? -1.0 : 1.0, 128) - (double)x);
    if (dl != dh)
        return dl < dh ? lo : hi;
    return (lo & 1) ? hi : lo;
}

static void exact_fp16(void)
{
    const int F = STRZ_COMP_FP16;
    static const struct { float x; uint16_t h; } k[] = {
        { 0.0f, 0x0000 }, { -0.0f, 0x8000 }, { 1.0f, 0x3c00 },
        { -2.0f, 0xc000 }, { 0.5f, 0x3800 }, { 65504.0f, 0x7bff },
        { 0x1p-14f, 0x0400 }, { 0x1p-24f, 0x0001 }, { -0x1p-24f, 0x8001 },
        { 0x3ffp-24f, 0x03ff }, { 1.0f / 3.0f, 0x3555 }, { 3.14159265f, 0x4248 },
        /* ties to even */
        { 1.0f + 0x1p-11f, 0x3c00 }, { 1.0f + 3 * 0x1p-11f, 0x3c02 },
        { 1.0f + 0x1p-11f + 0x1p-23f, 0x3c01 }, { 2048.0f + 1.0f, 0x6800 },
        { 2048.0f + 3.0f, 0x6802 },
        /* overflow: 65520 is halfway from 65504 to 2^16, and 65504's last
         * bit is odd: inf */
        { 65519.0f, 0x7bff }, { 65520.0f, 0x7c00 }, { 1e6f, 0x7c00 },
        { -1e6f, 0xfc00 }, { FLT_MAX, 0x7c00 }, { INFINITY, 0x7c00 },
        { -INFINITY, 0xfc00 },
        /* subnormals and underflow */
        { 0x1p-25f, 0x0000 }, { 0x1.000002p-25f, 0x0001 },
        { 3 * 0x1p-25f, 0x0002 }, { 5 * 0x1p-25f, 0x0002 },
        { 0x1p-14f - 0x1p-25f, 0x0400 }, { 0x1p-14f - 0x1p-24f, 0x03ff },
        { 1e-40f, 0x0000 }, { -1e-40f, 0x8000 }, { FLT_MIN, 0x0000 },
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        uint16_t h = enc(k[i].x, F);
        CHECKF(h == k[i].h, "fp16(%a) = 0x%04x, want 0x%04x", k[i].x, h,
               k[i].h);
    }
    /* NaN stays NaN: sign and top payload bits kept, quiet */
    CHECK(enc(flt(0x7fc00000u), F) == 0x7e00);
    CHECK(enc(flt(0xffc00000u), F) == 0xfe00);
    CHECK(enc(flt(0x7f802000u), F) == 0x7e01);  /* signalling, payload */
    CHECK(enc(flt(0x7f800001u), F) == 0x7e00);  /* payload below 16 bits */
    CHECK(isnan(dec(0x7e01, F)) && bits(dec(0x7e01, F)) == 0x7fc02000u);
    CHECK(isinf(dec(0xfc00, F)) && dec(0xfc00, F) < 0);
    CHECK(dec(0x0001, F) == 0x1p-24f && dec(0x83ff, F) == -0x3ffp-24f);
    CHECK(bits(dec(0x8000, F)) == 0x80000000u);
}

static void exact_bf16(void)
{
    const int B = STRZ_COMP_BF16;
    static const struct { float x; uint16_t h; } k[] = {
        { 0.0f, 0x0000 }, { -0.0f, 0x8000 }, { 1.0f, 0x3f80 },
        { -2.0f, 0xc000 }, { 1.0f + 0x1p-8f, 0x3f80 },
        { 1.0f + 3 * 0x1p-8f, 0x3f82 }, { 1.0f + 0x1p-8f + 0x1p-23f, 0x3f81 },
        { 65520.0f, 0x4780 }, { 1e6f, 0x4974 },
        { INFINITY, 0x7f80 }, { -INFINITY, 0xff80 },
        /* the largest bf16 is (2 - 2^-7) 2^127; from halfway to 2^128 up,
         * inf -- FLT_MAX among them */
        { 0x1.fep127f, 0x7f7f }, { 0x1.fefffep127f, 0x7f7f },
        { 0x1.ffp127f, 0x7f80 }, { FLT_MAX, 0x7f80 },
        /* float32 subnormals keep their top bits, rounded */
        { 0x1p-149f, 0x0000 }, { 0x1p-133f, 0x0001 },
        { 0x3p-134f, 0x0002 }, { 0x1p-126f, 0x0080 },
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        uint16_t h = enc(k[i].x, B);
        CHECKF(h == k[i].h, "bf16(%a) = 0x%04x, want 0x%04x", k[i].x, h,
               k[i].h);
    }
    CHECK(enc(flt(0x7fc00000u), B) == 0x7fc0);
    CHECK(enc(flt(0xff800001u), B) == 0xffc0); /* signalling: quiet, sign */
    CHECK(enc(flt(0x7fa00000u), B) == 0x7fe0); /* payload kept */
    CHECK(bits(dec(0x7fc1, B)) == 0x7fc10000u && dec(0x0001, B) == 0x1p-133f);
}

/* Every 16-bit pattern: decoded exactly (against ldexp), and packed back
 * to itself -- a NaN to itself made quiet. Through the vector loops:
 * 65536 values in one call, from an odd address. */
static void round_trip(int fmt)
{
    static unsigned char in[2 * 65536 + 1], back[2 * 65536 + 3];
    static float f[65536];
    int bad_dec = 0, bad_rt = 0;
    for (uint32_t i = 0; i < 65536; i++)
        memcpy(in + 1 + 2 * i, &(uint16_t){ (uint16_t)i }, 2);
    strz_unpack16(f, in + 1, 65536, fmt);
    strz_pack16(back + 3, f, 65536, fmt);
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i, g;
        memcpy(&g, back + 3 + 2 * i, 2);
        double want;
        int nan;
        if (fmt == STRZ_COMP_FP16) {
            int e = (h >> 10) & 31, m = h & 0x3ff;
            nan = e == 31 && m;
            want = e == 0 ? ldexp(m, -24) : e == 31 ? INFINITY
                          : ldexp(1024 + m, e - 25);
            want = (h & 0x8000) ? -want : want;
        } else {
            nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
            want = (double)flt((uint32_t)h << 16);
        }
        if (nan ? !isnan(f[i]) : (double)f[i] != want
                                       || !!signbit(f[i]) != !!(h & 0x8000))
            bad_dec++;
        uint16_t quiet = fmt == STRZ_COMP_FP16 ? 0x0200 : 0x0040;
        if (g != (nan ? (h | quiet) : h))
            bad_rt++;
    }
    CHECKF(bad_dec == 0, "%s: %d patterns decoded wrong", strz_comp_name(fmt),
           bad_dec);
    CHECKF(bad_rt == 0, "%s: %d patterns do not round-trip",
           strz_comp_name(fmt), bad_rt);
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd32(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}

/* Floats against the reference: every significand of exponents around
 * fp16's edges (and a few of bf16's), and random bit patterns; in blocks
 * of 1000 (vector loops and a tail), packed to an odd address. */
static void against_reference(int fmt)
{
    enum { B = 1000 };
    static float x[B];
    static unsigned char out[2 * B + 1];
    static const int fp16_exps[] = { -26, -25, -24, -20, -15, -14, 0, 15, 16 };
    static const int bf16_exps[] = { -133, -127, -126, 0, 127 };
    const int *exps = fmt == STRZ_COMP_FP16 ? fp16_exps : bf16_exps;
    int nexp = fmt == STRZ_COMP_FP16 ? 9 : 5, bad = 0;
    long checked = 0;

    for (int pass = 0; pass < nexp + 1; pass++) {
        uint32_t total = pass < nexp ? (1u << 23) : 4000000u;
        for (uint32_t base = 0; base < total; base += B) {
            for (int i = 0; i < B; i++) {
                uint32_t j = base + (uint32_t)i;
                uint32_t u = pass < nexp
                    ? ((uint32_t)(exps[pass] + 127) << 23) | (j & 0x7fffffu)
                    : rnd32() ^ (rnd32() << 16);
                if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu))
                    u &= 0xff800000u; /* NaNs have their own test: inf */
                x[i] = flt(u | (j & 1u) << 31);
            }
            strz_pack16(out + 1, x, B, fmt);
            for (int i = 0; i < B; i++) {
                uint16_t h, want = fmt == STRZ_COMP_FP16 ? ref_fp16(x[i])
                                                         : ref_bf16(x[i]);
                memcpy(&h, out + 1 + 2 * i, 2);
                if (h != want && bad++ < 5)
                    fprintf(stderr, "%s(%a): 0x%04x, reference 0x%04x\n",
                            strz_comp_name(fmt), x[i], h, want);
                checked++;
            }
        }
    }
    CHECKF(bad == 0, "%s: %d of %ld floats differ from the reference",
           strz_comp_name(fmt), bad, checked);
    printf("%s: %ld floats as the reference rounds them\n",
           strz_comp_name(fmt), checked);
}

/* The sums the collectives use: 16-bit sources decoded, added in float32
 * in the order given, scaled; and the ring's add/copy. */
static void sums(void)
{
    enum { N = 1037 }; /* blocks and a tail */
    static float a[N], b[N], c[N], dst[N], want[N];
    static unsigned char ha[2 * N + 1], hb[2 * N], hc[2 * N];
    for (int i = 0; i < N; i++) {
        a[i] = (float)(i % 97) * 0.37f - 11.0f;
        b[i] = 1.0f / (float)(i + 1);
        c[i] = -(float)(i % 13) * 1e-3f;
    }
    for (int fmt = STRZ_COMP_FP16; fmt <= STRZ_COMP_BF16; fmt++) {
        strz_pack16(ha + 1, a, N, fmt);
        strz_pack16(hb, b, N, fmt);
        strz_pack16(hc, c, N, fmt);
        const void *src[3] = { ha + 1, hb, hc };
        strz_sum16(dst, src, 3, N, 0.25f, fmt);
        int bad = 0;
        for (int i = 0; i < N; i++) {
            float s = dec(enc(a[i], fmt), fmt);
            s += dec(enc(b[i], fmt), fmt);
            s += dec(enc(c[i], fmt), fmt);
            want[i] = s * 0.25f;
            bad += bits(dst[i]) != bits(want[i]);
        }
        CHECKF(bad == 0, "%s: sum16 differs in %d elements",
               strz_comp_name(fmt), bad);
        memcpy(dst, a, sizeof dst);
        strz_apply16(dst, hb, N, 1, 0.5f, fmt);
        bad = 0;
        for (int i = 0; i < N; i++)
            bad += bits(dst[i]) != bits((a[i] + dec(enc(b[i], fmt), fmt)) * 0.5f);
        strz_apply16(dst, hc, N, 0, 1.0f, fmt);
        for (int i = 0; i < N; i++)
            bad += bits(dst[i]) != bits(dec(enc(c[i], fmt), fmt));
        CHECKF(bad == 0, "%s: apply16 differs in %d elements",
               strz_comp_name(fmt), bad);
    }
}

int main(void)
{
    exact_fp16();
    exact_bf16();
    round_trip(STRZ_COMP_FP16);
    round_trip(STRZ_COMP_BF16);
    against_reference(STRZ_COMP_FP16);
    against_reference(STRZ_COMP_BF16);
    sums();
#if defined(__x86_64__) || defined(__i386__)
    /* The same bits under the core's compute threads' FTZ/DAZ (fp16: bf16
     * decodes to float32 subnormals, which DAZ would hide from the
     * reference's own comparisons). */
    _mm_setcsr(_mm_getcsr() | 0x8040);
    exact_fp16();
    round_trip(STRZ_COMP_FP16);
    against_reference(STRZ_COMP_FP16);
#endif
    CHECK(strcmp(strz_comp_name(STRZ_COMP_FP16), "fp16") == 0
          && strcmp(strz_comp_name(STRZ_COMP_BF16), "bf16") == 0
          && strcmp(strz_comp_name(STRZ_COMP_NONE), "none") == 0);
    return CHECK_DONE();
}
