/* conv2d in mixed_bfloat16 (kernels_cpu.h): the direct convolution's
 * drivers (conv_direct.c) on bf16 operands, fp32 accumulators and outputs.
 *
 * The micro-kernel -- AMX tiles (conv_amx.c) where the CPU has them, else
 * VDPBF16PS vectors (conv_avx512bf16.c) -- steps over 32-bit elements that
 * are pairs of bf16 along the reduction, so each driver packs its operands
 * in pairs -- in the workspace, never allocating -- and then runs the fp32
 * driver's geometry with "pair" for "float" (dW's input pairs laid out
 * across for the tiles, whose rows read side by side):
 *   forward  pairs of channels (c, c+1) of the same pixel: the image, zero
 *            padded, with C rounded up to even (a +0 channel); the weights
 *            Wp[tap][c/2][f] once per call;
 *   dX       pairs of filters (f, f+1): dY (padded for the gather form)
 *            and the weights per tap, [f/2][c];
 *   dW       pairs of neighbouring outputs (ox, ox+1) of a row: the input
 *            zero padded, per kernel column kx the pairs (x(2q), x(2q+1))
 *            it reads, and dY's pairs; the row's odd end a +0.
 * So every output element is still ONE fixed chain, now of VDPBF16PS
 * steps (a pair each) or TDPBF16PS steps (16 pairs) -- forward from the
 * bias over (ky, kx, c pairs); dX
 * from +0 over the taps (ky, kx), each over f pairs, or the gather's
 * flipped taps; dW per image from +0 over (oy, ox pairs), image 0's, + image
 * 1's ... -- and depends only on the geometry: an image's output is the
 * same bits whatever batch it is in, and replicas on any CPU with
 * AVX512_BF16 agree. The taps that fall in dW's padding multiply +0 (the
 * fp32 path skips them): the sums do not change. Every float becomes bf16
 * by round to nearest even, as VCVTNE2PS2BF16 does (kc__bf16_pack, _zip,
 * and kc_bf16_of below bit for bit). */
#include "conv_direct.h"
#include "kc_cpu.h"
#include "kernels_cpu.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

uint16_t kc_bf16_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint32_t e = (u >> 23) & 0xff, m = u & 0x7fffff;
    if (e == 0)                                   /* zero, denormal */
        return (uint16_t)((u >> 16) & 0x8000);
    if (e == 0xff)                                /* inf; NaN quieted */
        return (uint16_t)((u >> 16) | (m ? 0x40 : 0));
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

void kc_bf16_round(size_t n, const float *x, float *y)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)kc_bf16_of(x[i]) << 16;
        memcpy(&y[i], &u, sizeof u);
    }
}

int kc_bf16_usable(void)
{
    static _Atomic int known = -1;
    int k = atomic_load(&known);
    if (k < 0) {
        kc_cpu_t cpu;
        kc_cpu_detect(&cpu);
        k = cpu.bf16;
        atomic_store(&known, k);
    }
    return k;
}

#ifdef KC_CONV_X86

/* -1: AMX where the CPU has it and Linux grants it; 0 / 1 forced. */
static _Atomic int forced = -1;

static int amx_usable(void)
{
    static _Atomic int known = -1;
    int k = atomic_load(&known);
    if (k < 0) {
        kc_cpu_t cpu;
        kc_cpu_detect(&cpu);
        k = cpu.bf16 && cpu.amx_bf16 && kc__amx_ready();
        atomic_store(&known, k);
    }
    return k;
}

const kc_conv_isa_t *kc__bf16_isa(void)
{
    int f = atomic_load(&forced);
    return (f < 0 ? amx_usable() : f) ? &kc_conv_amx : &kc_conv_avx512bf16;
}

const char *kc_bf16_engine(void)
{
    return kc__bf16_isa() == &kc_conv_amx ? "AMX-BF16" : "AVX512_BF16";
}

int kc_bf16_force_engine(int amx)
{
    if (amx > 0 && !amx_usable())
        return -1;
    atomic_store(&forced, amx < 0 ? -1 : amx > 0);
    return 0;
}

static size_t half(size_t n) { return (n + 1) / 2; }

/* The word of the pair (lo, hi), as the kernel reads it. */
static float pair_of(float lo, float hi)
{
    uint32_t u = (uint32_t)kc_bf16_of(lo) | (uint32_t)kc_bf16_of(hi) << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Channels below which a pixel's words are made one by one (pair_of, the
 * same bits): a call of the vector converters per pixel of a first layer's
 * 1 or 3 channels cost the seeds' CNN more than its conv1 multiplies. */
#define SMALL_C 16

/* npix pixels of C floats at src -> npix x half(C) words at dst (pairs of
 * channels; an odd C's last pair ends in +0). */
static void pack_pixels(const float *src, size_t npix, size_t C, float *dst)
{
    if (C % 2 == 0) {
        kc__bf16_pack(src, npix * C, dst);
        return;
    }
    size_t Ch = half(C);
    for (size_t p = 0; p < npix; p++) {
        const float *s = src + p * C;
        if (C >= SMALL_C) {
            kc__bf16_pack(s, C, dst + p * Ch);
            continue;
        }
        for (size_t q = 0; q < Ch; q++)
            dst[p * Ch + q] = pair_of(s[2 * q], 2 * q + 1 < C ? s[2 * q + 1]
                                                              : 0.0f);
    }
}

/* Weights W[T][C][F] with the reduction over c: wp[t][c/2][f]. */
static void pack_w_c(const float *W, size_t T, size_t C, size_t F,
                     float *wp)
{
    for (size_t t = 0; t < T; t++)
        for (size_t q = 0; q < half(C); q++)
            kc__bf16_zip(W + (t * C + 2 * q) * F,
                         2 * q + 1 < C ? W + (t * C + 2 * q + 1) * F : NULL,
                         F, wp + (t * half(C) + q) * F);
}

/* Weights W[T][C][F] with the reduction over f: wt[t'][f/2][c], where t' =
 * T-1-t when flip (the gather form), else t. */
static void pack_w_f(const float *W, size_t T, size_t C, size_t F, int flip,
                     float *wt)
{
    size_t Fh = half(F);
    for (size_t t = 0; t < T; t++) {
        float *dst = wt + (flip ? T - 1 - t : t) * Fh * C;
        for (size_t c = 0; c < C; c++) {
            const float *w = W + (t * C + c) * F;
            for (size_t q = 0; q < Fh; q++)
                dst[q * C + c] = pair_of(w[2 * q],
                                         2 * q + 1 < F ? w[2 * q + 1] : 0.0f);
        }
    }
}

static int pad_rows(const kops_conv2d_t *g)
{
    return (g->oh - 1) * g->stride_h + g->kh;
}
static int pad_cols(const kops_conv2d_t *g)
{
    return (g->ow - 1) * g->stride_w + g->kw;
}

/* Image img[h][w][C] into out[hp][wp][half(C)] words: zeros, the image at
 * (pad_top, pad_left), cut to the rows and columns the windows read. */
static void pad_image(const kops_conv2d_t *g, const float *img, size_t C,
                      float *out)
{
    int hp = pad_rows(g), wp = pad_cols(g);
    size_t row = (size_t)wp * half(C);
    memset(out, 0, (size_t)hp * row * sizeof *out);
    int nx = g->w < wp - g->pad_left ? g->w : wp - g->pad_left;
    for (int y = 0; y < g->h && y + g->pad_top < hp && nx > 0; y++)
        pack_pixels(img + (size_t)y * g->w * C, (size_t)nx, C,
                    out + (size_t)(y + g->pad_top) * row +
                        (size_t)g->pad_left * half(C));
}

static void fwd(const kops_conv2d_t *g, const float *X, const float *W,
                const float *b, float *Y, float *work)
{
    const kc_conv_isa_t *isa = kc__bf16_isa();
    size_t C = (size_t)g->c, F = (size_t)g->f, Ch = half(C);
    size_t T = (size_t)g->kh * g->kw;
    float *wp = work, *img = work + T * Ch * F;
    pack_w_c(W, T, C, F, wp);
    size_t row = (size_t)pad_cols(g) * Ch;          /* words per input row */
    kc_uk_t u = { .nrow = g->oh, .brow = (ptrdiff_t)(g->stride_h * row),
                  .orow = (ptrdiff_t)((size_t)g->ow * F),
                  .nseg = g->kh, .R = (int)((size_t)g->kw * Ch),
                  .bseg = (ptrdiff_t)row, .vseg = (ptrdiff_t)(g->kw * Ch * F),
                  .bp = (ptrdiff_t)(g->stride_w * Ch), .br = 1,
                  .vr = (ptrdiff_t)F, .op = (ptrdiff_t)F,
                  .init = b ? KC_UK_BIAS : KC_UK_ZERO, .fin = KC_UK_STORE,
                  .bias = b };
    for (int i = 0; i < g->n; i++) {
        pad_image(g, X + (size_t)i * g->h * g->w * C, C, img);
        float *yi = Y + (size_t)i * g->oh * g->ow * F;
        kc__conv_blocks(isa, &u, g->ow, g->f, img, wp, yi);
        if (g->relu)
            kc_relu_fwd((size_t)g->oh * g->ow * F, yi, yi);
    }
}

/* Word q of the pairs (lo[c], hi[c]) for c < C, at dst + c * cs: cs = 1
 * side by side (the vector kernel's [q][C]), cs = ow2 across (AMX's
 * [C][q], whose steps over q must be side by side). */
static void zip_to(const float *lo, const float *hi, size_t C, float *dst,
                   size_t cs)
{
    if (C < SMALL_C) {
        for (size_t c = 0; c < C; c++)
            dst[c * cs] = pair_of(lo ? lo[c] : 0.0f, hi ? hi[c] : 0.0f);
        return;
    }
    if (cs == 1) {
        kc__bf16_zip(lo, hi, C, dst);
        return;
    }
    float t[16];
    for (size_t c0 = 0; c0 < C; c0 += 16) {
        size_t n = C - c0 < 16 ? C - c0 : 16;
        kc__bf16_zip(lo ? lo + c0 : NULL, hi ? hi + c0 : NULL, n, t);
        for (size_t j = 0; j < n; j++)
            dst[(c0 + j) * cs] = t[j];
    }
}

/* AMX's input pairs of one row (y, kx) at out[C][ow2]: pixel pair q's
 * words made 16 channels at a time side by side (tmp[q][16]), then
 * transposed 16 x 16 (kc__tr16), where a word at a time cost the seeds'
 * CNN's mixed_bfloat16 step 10 %. For ow2 <= 16 and C a multiple of 16;
 * each chunk's last row runs 16 - ow2 words past it, into what is written
 * next (the next chunk or row, or dyq after xq). */
static void zip_row_amx(const kops_conv2d_t *g, const float *img, int kx,
                        int yy, size_t ow2, float *out)
{
    size_t C = (size_t)g->c;
    float tmp[16 * 16];
    memset(tmp + ow2 * 16, 0, (16 - ow2) * 16 * sizeof *tmp);
    for (size_t c0 = 0; c0 < C; c0 += 16) {
        for (size_t q = 0; q < ow2; q++) {
            const float *px[2] = { NULL, NULL };
            for (int j = 0; j < 2; j++) {
                int ox = (int)(2 * q) + j;
                int xx = ox * g->stride_w + kx - g->pad_left;
                if (ox < g->ow && yy >= 0 && yy < g->h && xx >= 0 && xx < g->w)
                    px[j] = img + ((size_t)yy * g->w + xx) * C + c0;
            }
            kc__bf16_zip(px[0], px[1], 16, tmp + q * 16);
        }
        kc__tr16(tmp, 16, out + c0 * ow2, ow2);
    }
}

/* The input pairs of one image for dW at stride 1, by parity of the
 * kernel column: out[par][y][p][C] = the pair (x(2p + par - pad_left),
 * x(2p + par + 1 - pad_left)) of padded row y, +0 outside the image; tap
 * kx's pair q is pair q + kx / 2 of parity kx % 2. */
static void zip_parities(const kops_conv2d_t *g, const float *img, size_t hp,
                         size_t rp, int npar, float *out)
{
    size_t C = (size_t)g->c;
    for (int par = 0; par < npar; par++)
        for (size_t y = 0; y < hp; y++) {
            int yy = (int)y - g->pad_top;
            const float *row = img + (size_t)(yy < 0 ? 0 : yy) * g->w * C;
            int in_row = yy >= 0 && yy < g->h;
            for (size_t p = 0; p < rp; p++) {
                int xx = (int)(2 * p) + par - g->pad_left;
                const float *lo = in_row && xx >= 0 && xx < g->w
                                      ? row + (size_t)xx * C : NULL;
                const float *hi = in_row && xx + 1 >= 0 && xx + 1 < g->w
                                      ? row + (size_t)(xx + 1) * C : NULL;
                zip_to(lo, hi, C, out + (((size_t)par * hp + y) * rp + p) * C,
                       1);
            }
        }
}

/* dW[tap][c][f] = per image, a chain over (oy, ox pairs) of x . dy. */
static void dw(const kops_conv2d_t *g, const float *X, const float *dY,
               float *dW, float *work, int i0, int i1)
{
    const kc_conv_isa_t *isa = kc__bf16_isa();
    size_t C = (size_t)g->c, F = (size_t)g->f;
    size_t hp = (size_t)pad_rows(g), ow2 = half((size_t)g->ow);
    /* the input's pairs per kx: [kx][hp][ow2][C], or [kx][hp][C][ow2] for
     * AMX; word (y, q, c) at xq + (kx * hp + y) * ow2 * C + q * sq + c * sc */
    int amx = isa == &kc_conv_amx;
    size_t sq = amx ? 1 : C, sc = amx ? ow2 : 1;
    float *xq = work;
    float *dyq = work + (size_t)g->kw * hp * ow2 * C;   /* [oh][ow2][F] */
    kc_uk_t u = { .nrow = 1, .nseg = g->oh, .R = (int)ow2,
                  .bseg = (ptrdiff_t)((size_t)g->stride_h * ow2 * C),
                  .vseg = (ptrdiff_t)(ow2 * F), .bp = (ptrdiff_t)sc,
                  .br = (ptrdiff_t)sq, .vr = (ptrdiff_t)F,
                  .op = (ptrdiff_t)F, .init = KC_UK_ZERO };
    /* the transposes' last overrun lands in dyq, written after xq */
    int tr = amx && C % 16 == 0 && ow2 <= 16 && (size_t)g->oh * ow2 * F >= 16;
    /* Stride 1 and an even ow on the vector engine: kernel columns kx and
     * kx + 2 read the same pairs one pair apart, so each row's pairs are
     * made once per parity of kx, rp = ow2 + (kw - 1) / 2 of them (where
     * that takes no more room), not once per kx. */
    size_t rp = ow2 + (size_t)(g->kw - 1) / 2, npar = g->kw > 1 ? 2 : 1;
    int shared = !amx && g->stride_w == 1 && g->ow % 2 == 0 &&
                 npar * rp <= (size_t)g->kw * ow2;
    if (shared)
        u.bseg = (ptrdiff_t)((size_t)g->stride_h * rp * C);
    for (int i = i0; i < i1; i++) {
        const float *img = X + (size_t)i * g->h * g->w * C;
        const float *dy = dY + (size_t)i * g->oh * g->ow * F;
        if (shared)
            zip_parities(g, img, hp, rp, (int)npar, xq);
        for (int kx = 0; !shared && kx < g->kw; kx++)
            for (size_t y = 0; y < hp; y++) {
                int yy = (int)y - g->pad_top;
                if (tr) {
                    zip_row_amx(g, img, kx, yy, ow2,
                                xq + ((size_t)kx * hp + y) * ow2 * C);
                    continue;
                }
                for (size_t q = 0; q < ow2; q++) {
                    const float *px[2] = { NULL, NULL };
                    for (int j = 0; j < 2; j++) {
                        int ox = (int)(2 * q) + j;
                        int xx = ox * g->stride_w + kx - g->pad_left;
                        if (ox < g->ow && yy >= 0 && yy < g->h && xx >= 0 &&
                            xx < g->w)
                            px[j] = img + ((size_t)yy * g->w + xx) * C;
                    }
                    zip_to(px[0], px[1], C,
                           xq + ((size_t)kx * hp + y) * ow2 * C + q * sq, sc);
                }
            }
        for (int oy = 0; oy < g->oh; oy++)
            for (size_t q = 0; q < ow2; q++) {
                const float *d = dy + ((size_t)oy * g->ow + 2 * q) * F;
                kc__bf16_zip(d, 2 * q + 1 < (size_t)g->ow ? d + F : NULL, F,
                             dyq + ((size_t)oy * ow2 + q) * F);
            }
        u.fin = i == 0 ? KC_UK_STORE : KC_UK_ADD;
        for (int ky = 0; ky < g->kh; ky++)
            for (int kx = 0; kx < g->kw; kx++) {
                const float *b =
                    shared ? xq + (((size_t)(kx & 1) * hp + (size_t)ky) * rp +
                                   (size_t)(kx >> 1)) * C
                           : xq + ((size_t)kx * hp + (size_t)ky) * ow2 * C;
                kc__conv_blocks(isa, &u, g->c, g->f, b, dyq,
                                dW + ((size_t)ky * g->kw + kx) * C * F);
            }
    }
}

/* dX by the gather form: a stride-1 convolution of dY, padded, with the
 * flipped weights (conv_direct.c's dx_vec_gather), pairs of filters; the
 * tap rows that read only the padding's zero rows left out.
 * dx_gather_prep packs the weights and zeroes the borders once. */
static void dx_gather_prep(const kops_conv2d_t *g, const float *W,
                           float *work)
{
    size_t C = (size_t)g->c, F = (size_t)g->f, Fh = half(F);
    size_t T = (size_t)g->kh * g->kw;
    size_t hq = (size_t)g->h + g->kh - 1, wq = (size_t)g->w + g->kw - 1;
    pack_w_f(W, T, C, F, 1, work);
    memset(work + T * Fh * C, 0, hq * wq * Fh * sizeof *work);
}

static void dx_gather(const kops_conv2d_t *g, const float *dY, float *dX,
                      float *work, int i0, int i1)
{
    const kc_conv_isa_t *isa = kc__bf16_isa();
    size_t C = (size_t)g->c, F = (size_t)g->f, Fh = half(F);
    size_t T = (size_t)g->kh * g->kw;
    int wq = g->w + g->kw - 1;
    int oy0 = g->kh - 1 - g->pad_top, ox0 = g->kw - 1 - g->pad_left;
    const float *wf = work;
    float *dyp = work + T * Fh * C;
    size_t row = (size_t)wq * Fh;
    kc_uk_t u = { .brow = (ptrdiff_t)row,
                  .orow = (ptrdiff_t)((size_t)g->w * C),
                  .R = (int)((size_t)g->kw * Fh),
                  .bseg = (ptrdiff_t)row,
                  .vseg = (ptrdiff_t)((size_t)g->kw * Fh * C),
                  .bp = (ptrdiff_t)Fh, .br = 1, .vr = (ptrdiff_t)C,
                  .op = (ptrdiff_t)C, .init = KC_UK_ZERO, .fin = KC_UK_STORE };
    for (int i = i0; i < i1; i++) {
        const float *dy = dY + (size_t)i * g->oh * g->ow * F;
        for (int oy = 0; oy < g->oh; oy++)   /* the borders stay zero */
            pack_pixels(dy + (size_t)oy * g->ow * F, (size_t)g->ow, F,
                        dyp + (size_t)(oy + oy0) * row + (size_t)ox0 * Fh);
        kc__gather_bands(isa, g, &u, dyp, row, wf,
                         dX + (size_t)i * g->h * g->w * C);
    }
}

/* dX by taps (conv_direct.c's dx_vec): zeroed, then per tap (ky, kx) the
 * chain goes on over f pairs of that tap. */
static void dx_taps(const kops_conv2d_t *g, const float *dY, float *dX,
                    float *work, int i0, int i1)
{
    const kc_conv_isa_t *isa = kc__bf16_isa();
    size_t C = (size_t)g->c, F = (size_t)g->f, Fh = half(F);
    size_t T = (size_t)g->kh * g->kw, img = (size_t)g->h * g->w * C;
    const float *wt = work;
    float *dyb = work + T * Fh * C;                /* [oh][ow][Fh] */
    memset(dX + (size_t)i0 * img, 0, (size_t)(i1 - i0) * img * sizeof *dX);
    kc_uk_t u = { .brow = (ptrdiff_t)((size_t)g->ow * Fh),
                  .orow = (ptrdiff_t)((size_t)g->stride_h * g->w * C),
                  .nseg = 1, .R = (int)Fh, .bp = (ptrdiff_t)Fh, .br = 1,
                  .vr = (ptrdiff_t)C, .op = (ptrdiff_t)(g->stride_w * C),
                  .init = KC_UK_LOAD, .fin = KC_UK_STORE };
    for (int i = i0; i < i1; i++) {
        pack_pixels(dY + (size_t)i * g->oh * g->ow * F,
                    (size_t)g->oh * g->ow, F, dyb);
        for (int ky = 0; ky < g->kh; ky++)
            for (int kx = 0; kx < g->kw; kx++) {
                int ya, yb, xa, xb;
                kc__conv_range(g->oh, g->stride_h, g->pad_top, ky, g->h, &ya,
                               &yb);
                kc__conv_range(g->ow, g->stride_w, g->pad_left, kx, g->w, &xa,
                               &xb);
                if (ya >= yb || xa >= xb)
                    continue;
                u.nrow = yb - ya;
                int y = ya * g->stride_h - g->pad_top + ky;
                int x = xa * g->stride_w - g->pad_left + kx;
                kc__conv_blocks(isa, &u, xb - xa, g->c,
                                dyb + ((size_t)ya * g->ow + xa) * Fh,
                                wt + ((size_t)ky * g->kw + kx) * Fh * C,
                                dX + (((size_t)i * g->h + y) * g->w + x) * C);
            }
    }
}

void kc_conv2d_fwd_bf16(const kops_conv2d_t *g, const float *X,
                        const float *W, const float *b, float *Y, float *work,
                        size_t work_len)
{
    (void)work_len;
    if (g->n <= 0 || g->f <= 0)
        return;
    fwd(g, X, W, b, Y, work);
    kc__amx_release();
}

/* The backward a group of images at a time (kc__bwd_group: each group's
 * dY masked, summed, packed for dW and for dX while it is in L2), dW's
 * and dX's packed operands side by side in work (kops_conv2d_bf16_len). */
static void bwd(const kops_conv2d_t *g, const float *X, const float *W,
                const float *Y, float *dY, float *dW, float *db, float *dX,
                float *work)
{
    size_t F = (size_t)g->f;
    double *acc = kc__bwd_sums(g, &Y, dY, db);
    if (g->n <= 0) {
        kc__bwd_sums_done(g, acc, db);                  /* db = 0 */
        memset(dW, 0, kops_n4(g->kh, g->kw, g->c, g->f) * sizeof *dW);
        return;
    }
    float *wdx = work + kops_conv2d_bf16_dw_len(g);
    int gather = dX && kc__conv_dx_gather(g);
    if (gather)
        dx_gather_prep(g, W, wdx);
    else if (dX)
        pack_w_f(W, (size_t)g->kh * g->kw, (size_t)g->c, F, 0, wdx);
    int group = kc__bwd_group(g);
    for (int i0 = 0, i1; i0 < g->n; i0 = i1) {
        i1 = kc__bwd_next(g, i0, group, Y, NULL, dY, acc);
        dw(g, X, dY, dW, work, i0, i1);
        if (gather)
            dx_gather(g, dY, dX, wdx, i0, i1);
        else if (dX)
            dx_taps(g, dY, dX, wdx, i0, i1);
    }
    kc__bwd_sums_done(g, acc, db);
    kc__amx_release();
}

void kc_conv2d_bwd_bf16(const kops_conv2d_t *g, const float *X,
                        const float *W, const float *dY, float *dW, float *db,
                        float *dX, float *work, size_t work_len)
{
    (void)work_len;
    bwd(g, X, W, NULL, (float *)dY, dW, db, dX, work);  /* dY read only */
}

void kc_conv2d_bwd_relu_bf16(const kops_conv2d_t *g, const float *X,
                             const float *W, const float *Y, float *dY,
                             float *dW, float *db, float *dX, float *work,
                             size_t work_len)
{
    (void)work_len;
    bwd(g, X, W, Y, dY, dW, db, dX, work);
}

#else /* not x86-64: no AVX512_BF16, kc_bf16_usable() is 0 */

const char *kc_bf16_engine(void) { return "none"; }

int kc_bf16_force_engine(int amx) { return amx > 0 ? -1 : 0; }

void kc_conv2d_fwd_bf16(const kops_conv2d_t *g, const float *X,
                        const float *W, const float *b, float *Y, float *work,
                        size_t work_len)
{
    (void)g, (void)X, (void)W, (void)b, (void)Y, (void)work, (void)work_len;
    abort();
}

void kc_conv2d_bwd_bf16(const kops_conv2d_t *g, const float *X,
                        const float *W, const float *dY, float *dW, float *db,
                        float *dX, float *work, size_t work_len)
{
    (void)g, (void)X, (void)W, (void)dY, (void)dW, (void)db, (void)dX;
    (void)work, (void)work_len;
    abort();
}

void kc_conv2d_bwd_relu_bf16(const kops_conv2d_t *g, const float *X,
                             const float *W, const float *Y, float *dY,
                             float *dW, float *db, float *dX, float *work,
                             size_t work_len)
{
    (void)g, (void)X, (void)W, (void)Y, (void)dY, (void)dW, (void)db;
    (void)dX, (void)work, (void)work_len;
    abort();
}
#endif
