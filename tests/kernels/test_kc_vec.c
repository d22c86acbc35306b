/* Vector helpers: kc_sum bitwise against in-order float addition (also with
 * dst == srcs[0]), axpy/scale against references (also axpy with x == y),
 * u8 -> f32 exactly, kc_sumsq bitwise against its documented order (16
 * lanes) and near a plain sum. Sizes 1, 7 and 1000 cover tail-only and
 * block+tail. */
#include "kc_test.h"
#include "kernels_cpu.h"

#include <string.h>

enum { NMAX = 1000, SMAX = 9 };

static float src[SMAX][NMAX], dst[NMAX], ref[NMAX];

/* The contract: dst = ((srcs[0] + srcs[1]) + srcs[2]) + ..., in float. */
static void ref_sum(size_t n, const float *const *s, int k)
{
    for (size_t i = 0; i < n; i++) {
        float acc = s[0][i];
        for (int j = 1; j < k; j++)
            acc = acc + s[j][i];
        ref[i] = acc;
    }
}

static void test_sum(size_t n)
{
    const float *s[SMAX];
    for (int j = 0; j < SMAX; j++) {
        kc_fill(n, src[j], -1, 1);
        src[j][0] = j == 0 ? 1e8f : src[j][0];   /* rounding-order sensitive */
        s[j] = src[j];
    }
    for (int k = 1; k <= SMAX; k++) {
        ref_sum(n, s, k);
        memset(dst, 0xff, sizeof dst);            /* NaN garbage */
        kc_sum(n, dst, s, k);
        CHECKF(memcmp(dst, ref, n * sizeof *dst) == 0, "sum n=%zu nsrc=%d", n, k);

        /* dst == srcs[0]: accumulate in place. */
        float save[NMAX];
        memcpy(save, src[0], n * sizeof *save);
        const float *s2[SMAX];
        memcpy(s2, s, sizeof s2);
        kc_sum(n, src[0], s2, k);
        CHECKF(memcmp(src[0], ref, n * sizeof *dst) == 0,
               "sum in place n=%zu nsrc=%d", n, k);
        memcpy(src[0], save, n * sizeof *save);
    }
    /* The same source twice is fine (read-only). */
    const float *dup[3] = { src[1], src[2], src[2] };
    ref_sum(n, dup, 3);
    kc_sum(n, dst, dup, 3);
    CHECK(memcmp(dst, ref, n * sizeof *dst) == 0);
}

static void test_axpy_scale(size_t n)
{
    static float x[NMAX], y[NMAX], y0[NMAX];
    static double r[NMAX];
    const float a = -0.37f;
    kc_fill(n, x, -1, 1);
    kc_fill(n, y, -1, 1);
    memcpy(y0, y, n * sizeof *y);
    kc_axpy(n, a, x, y);
    for (size_t i = 0; i < n; i++)
        r[i] = (double)y0[i] + (double)a * x[i];
    KC_CHECK_NEAR("axpy", n, y, r, 1e-6, 1e-7);

    memcpy(y, y0, n * sizeof *y);
    kc_axpy(n, a, y, y);                          /* x == y */
    for (size_t i = 0; i < n; i++)
        r[i] = (double)y0[i] * (1 + (double)a);
    KC_CHECK_NEAR("axpy x==y", n, y, r, 1e-6, 1e-7);

    memcpy(y, y0, n * sizeof *y);
    kc_scale(n, a, y);
    int ok = 1;
    for (size_t i = 0; i < n; i++)
        ok &= y[i] == y0[i] * a;                  /* one rounding: exact */
    CHECKF(ok, "scale n=%zu", n);
}

static void test_u8(size_t n)
{
    static uint8_t u[NMAX];
    static float f[NMAX];
    const float scale = 1.0f / 255.0f;
    for (size_t i = 0; i < n; i++)
        u[i] = (uint8_t)((i * 37 + 11) & 0xff);
    if (n > 2) {
        u[0] = 0;
        u[1] = 255;
    }
    memset(f, 0xff, sizeof f);
    kc_u8_to_f32(n, u, scale, f);
    int ok = 1;
    for (size_t i = 0; i < n; i++)
        ok &= f[i] == (float)u[i] * scale;
    CHECKF(ok, "u8_to_f32 n=%zu", n);
    if (n > 2)
        CHECK(f[0] == 0.0f && kc_close(f[1], 1.0, 1e-7, 0));
}

static void test_sumsq(size_t n)
{
    kc_fill(n, src[0], -3, 3);
    double lane[16] = { 0 }, plain = 0.0;
    for (size_t i = 0; i < n; i++) {
        double x = src[0][i];
        lane[i % 16] += x * x;
        plain += x * x;
    }
    double want = 0.0;
    for (int j = 0; j < 16; j++)
        want += lane[j];
    double got = kc_sumsq(n, src[0]);
    CHECKF(memcmp(&got, &want, sizeof got) == 0, "sumsq n=%zu: %.17g, the "
           "lanes give %.17g", n, got, want);
    CHECK(kc_close(got, plain, 1e-12, 0));
}

int main(void)
{
    CHECK(kc_sumsq(0, src[0]) == 0.0);
    static const size_t sizes[] = { 1, 7, 1000 };
    kc_seed(5);
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        test_sum(sizes[i]);
        test_axpy_scale(sizes[i]);
        test_u8(sizes[i]);
        test_sumsq(sizes[i]);
    }
    return CHECK_DONE();
}
