/* Direct convolution on NHWC (conv_direct.h has the order every element's
 * sum follows): the drivers that cut each op into micro-kernel blocks, the
 * portable scalar path (fmaf, the same chains element by element) and the
 * choice of path. */
#include "conv_direct.h"
#include "kernels_cpu.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- the path ------------------------------------------------------------ */

static _Atomic int forced = -1;       /* kc_conv2d_force_path's, else -1 */

static int supported(int path)
{
    switch (path) {
    case KC_CONV_GEMM:
    case KC_CONV_SCALAR:
        return 1;
#ifdef KC_CONV_X86
    case KC_CONV_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case KC_CONV_AVX512:
        return __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("fma");
#endif
    default:
        return 0;
    }
}

/* The widest vector path the CPU has -- GEMM where it has none (the scalar
 * path's fmaf is a library call without FMA hardware: a reference, not a
 * default) -- or $KC_CONV_PATH (gemm, scalar, avx2, avx512; for
 * benchmarks: an unknown or unsupported name is ignored). */
static int resolve(void)
{
    static _Atomic int best = -1;
    int b = atomic_load(&best);
    if (b >= 0)
        return b;
    static const char *const names[] = { "auto", "gemm", "scalar", "avx2",
                                         "avx512" };
    const char *env = getenv("KC_CONV_PATH");
    b = KC_CONV_GEMM;
    for (int p = KC_CONV_AVX512; p > KC_CONV_SCALAR; p--)
        if (supported(p)) {
            b = p;
            break;
        }
    for (int p = KC_CONV_GEMM; env && p <= KC_CONV_AVX512; p++)
        if (strcmp(env, names[p]) == 0 && supported(p))
            b = p;
    atomic_store(&best, b);
    return b;
}

int kc_conv2d_force_path(int path)
{
    if (path != KC_CONV_AUTO && !supported(path))
        return -1;
    atomic_store(&forced, path == KC_CONV_AUTO ? -1 : path);
    return 0;
}

/* Filters above this go through GEMM (dX's weight slices live on the stack
 * when `col` cannot hold them all). */
#define KC_WT 4096
#define FMAX (KC_WT / 16)

/* Forward needs the images zero-padded in `col` when there is padding:
 * (oh-1)*s + k rows and columns, at most the one image's im2col when
 * s <= k, which `col` always holds. */
static int pad_rows(const kops_conv2d_t *g)
{
    return (g->oh - 1) * g->stride_h + g->kh;
}
static int pad_cols(const kops_conv2d_t *g)
{
    return (g->ow - 1) * g->stride_w + g->kw;
}
static int needs_pad(const kops_conv2d_t *g)
{
    return g->pad_top > 0 || g->pad_left > 0 ||
           pad_rows(g) - g->pad_top > g->h || pad_cols(g) - g->pad_left > g->w;
}

const char *kc_conv2d_kernels(void)
{
    int f = atomic_load(&forced);
    switch (f >= 0 ? f : resolve()) {
    case KC_CONV_AVX512: return "direct (AVX-512)";
    case KC_CONV_AVX2:   return "direct (AVX2)";
    case KC_CONV_SCALAR: return "direct (scalar)";
    default:             return "im2col + GEMM";
    }
}

int kc_conv2d_path(const kops_conv2d_t *g)
{
    int f = atomic_load(&forced);
    int p = f >= 0 ? f : resolve();
    if (p == KC_CONV_GEMM)
        return p;
    /* Shapes the direct kernels do not take (by shape only, so fwd and bwd
     * agree and a replica's choice does not depend on its batch). */
    if (g->f > FMAX || g->f <= 0 || g->c <= 0)
        return KC_CONV_GEMM;
    if (needs_pad(g) && (g->stride_h > g->kh || g->stride_w > g->kw))
        return KC_CONV_GEMM;
    return p;
}

/* ---- scalar: the chains, element by element ------------------------------ */

static float xat(const kops_conv2d_t *g, const float *X, int i, int y, int x,
                 int c)
{
    if (y < 0 || y >= g->h || x < 0 || x >= g->w)
        return 0.0f;
    return X[(((size_t)i * g->h + y) * g->w + x) * g->c + c];
}

static void fwd_scalar(const kops_conv2d_t *g, const float *X, const float *W,
                       const float *b, float *Y)
{
    size_t F = (size_t)g->f;
    for (int i = 0; i < g->n; i++)
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++)
                for (int f = 0; f < g->f; f++) {
                    float acc = b ? b[f] : 0.0f;
                    for (int ky = 0; ky < g->kh; ky++)
                        for (int kx = 0; kx < g->kw; kx++)
                            for (int c = 0; c < g->c; c++)
                                acc = fmaf(xat(g, X, i,
                                               oy * g->stride_h - g->pad_top + ky,
                                               ox * g->stride_w - g->pad_left + kx, c),
                                           W[(((size_t)ky * g->kw + kx) * g->c + c) * F + f],
                                           acc);
                    Y[(((size_t)i * g->oh + oy) * g->ow + ox) * F + f] =
                        g->relu && acc < 0.0f ? 0.0f : acc;   /* kc_relu */
                }
}

/* The output range [*lo, *hi) whose taps at offset k land inside [0, n). */
static void range(int out, int s, int pad, int k, int n, int *lo, int *hi)
{
    int a = pad - k, e = n - 1 + pad - k;      /* o*s in [a, e] */
    *lo = a > 0 ? (a + s - 1) / s : 0;
    *hi = e < 0 ? 0 : e / s + 1;
    if (*hi > out)
        *hi = out;
    if (*lo > *hi)
        *lo = *hi;
}

/* The backward's image loops below run images [i0, i1) of the batch, so
 * that kc__conv2d_bwd_direct can take the batch a group at a time. */
static void dx_scalar(const kops_conv2d_t *g, const float *W, const float *dY,
                      float *dX, int i0, int i1)
{
    size_t C = (size_t)g->c, F = (size_t)g->f;
    for (int i = i0; i < i1; i++)
        for (int ky = 0; ky < g->kh; ky++)
            for (int kx = 0; kx < g->kw; kx++) {
                int ya, yb, xa, xb;
                range(g->oh, g->stride_h, g->pad_top, ky, g->h, &ya, &yb);
                range(g->ow, g->stride_w, g->pad_left, kx, g->w, &xa, &xb);
                const float *w = W + ((size_t)ky * g->kw + kx) * C * F;
                for (int oy = ya; oy < yb; oy++)
                    for (int ox = xa; ox < xb; ox++) {
                        int y = oy * g->stride_h - g->pad_top + ky;
                        int x = ox * g->stride_w - g->pad_left + kx;
                        const float *dy =
                            dY + (((size_t)i * g->oh + oy) * g->ow + ox) * F;
                        float *dx = dX + (((size_t)i * g->h + y) * g->w + x) * C;
                        for (size_t c = 0; c < C; c++) {
                            float acc = dx[c];
                            for (size_t f = 0; f < F; f++)
                                acc = fmaf(dy[f], w[c * F + f], acc);
                            dx[c] = acc;
                        }
                    }
            }
}

/* dX as a stride-1 convolution of dY, padded, with the weights flipped
 * and transposed: dX[y][x][c] = chain from +0 over (ky', kx', f) of
 * dYp[y + ky'][x + kx'][f] Wf[ky'][kx'][f][c], where dYp is dY at (kh-1-pt,
 * kw-1-pl) in zeros and Wf[ky'][kx'][f][c] = W[kh-1-ky'][kw-1-kx'][c][f].
 * The rows ky' that fall in dYp's zero rows are left out of the chain
 * (gather_ky): a product 0 * w added to a sum that is never -0 (it starts
 * at +0, and x + (-x) is +0) changes no bit. Taken for stride 1 where the
 * padded dY and Wf fit one image's col (by shape, so every batch takes the
 * same); else dx_scalar/dx_vec's form. */
static int gather_rows(const kops_conv2d_t *g) { return g->h + g->kh - 1; }
/* The rows [*lo, *hi) of taps ky' whose dYp row y + ky' is one of dY's. */
static void gather_ky(const kops_conv2d_t *g, int y, int *lo, int *hi)
{
    int oy0 = g->kh - 1 - g->pad_top;
    *lo = oy0 - y > 0 ? oy0 - y : 0;
    *hi = g->oh + oy0 - y < g->kh ? g->oh + oy0 - y : g->kh;
    if (*hi < *lo)
        *hi = *lo;
}

/* The band of output rows from y0 whose taps [*lo, *hi) are the same;
 * returns its end. */
static int gather_band(const kops_conv2d_t *g, int y0, int *lo, int *hi)
{
    int y1, lo1, hi1;
    gather_ky(g, y0, lo, hi);
    for (y1 = y0 + 1; y1 < g->h; y1++) {
        gather_ky(g, y1, &lo1, &hi1);
        if (lo1 != *lo || hi1 != *hi)
            break;
    }
    return y1;
}
static int gather_cols(const kops_conv2d_t *g) { return g->w + g->kw - 1; }
static size_t gather_scratch(const kops_conv2d_t *g)
{
    return (size_t)g->kh * g->kw * g->c * g->f +
           (size_t)gather_rows(g) * gather_cols(g) * g->f;
}
/* Pairs (input, tap) whose output exists along one axis. */
static int axis_pairs(int out, int pad, int k, int n)
{
    int sum = 0;
    for (int t = 0; t < k; t++) {
        int lo, hi;
        range(out, 1, pad, t, n, &lo, &hi);
        sum += hi - lo;
    }
    return sum;
}

/* The gather also multiplies the zeros around dY: taken where at least
 * 80 % of its products are real (a 'same' 3x3 on 14x14: 91 %; a 'valid'
 * one from 26x26: 85 %, 13x13: 72 %, where the scatter form was faster:
 * 105 against 78 GFLOP/s, contrib/bench/conv). */
int kc__conv_dx_gather(const kops_conv2d_t *g)
{
    int oy0 = g->kh - 1 - g->pad_top, ox0 = g->kw - 1 - g->pad_left;
    if (!(g->stride_h == 1 && g->stride_w == 1 && oy0 >= 0 && ox0 >= 0 &&
          g->oh + oy0 <= gather_rows(g) && g->ow + ox0 <= gather_cols(g)))
        return 0;
    double real = (double)axis_pairs(g->oh, g->pad_top, g->kh, g->h) *
                  axis_pairs(g->ow, g->pad_left, g->kw, g->w);
    return real >= 0.8 * (double)g->h * g->w * g->kh * g->kw;
}

/* ... and here where its scratch fits one image's col. */
static int dx_gather(const kops_conv2d_t *g)
{
    return gather_scratch(g) <= kops_conv2d_col_len(g) &&
           kc__conv_dx_gather(g);
}

void kc__conv_range(int out, int s, int pad, int k, int n, int *lo, int *hi)
{
    range(out, s, pad, k, n, lo, hi);
}

static void dx_scalar_gather(const kops_conv2d_t *g, const float *W,
                             const float *dY, float *dX, int i0, int i1)
{
    size_t C = (size_t)g->c, F = (size_t)g->f;
    int oy0 = g->kh - 1 - g->pad_top, ox0 = g->kw - 1 - g->pad_left;
    for (int i = i0; i < i1; i++)
        for (int y = 0; y < g->h; y++)
            for (int x = 0; x < g->w; x++)
                for (size_t c = 0; c < C; c++) {
                    float acc = 0.0f;
                    int klo, khi;
                    gather_ky(g, y, &klo, &khi);
                    for (int ky = klo; ky < khi; ky++)
                        for (int kx = 0; kx < g->kw; kx++) {
                            int oy = y + ky - oy0, ox = x + kx - ox0;
                            int in = oy >= 0 && oy < g->oh && ox >= 0 &&
                                     ox < g->ow;
                            const float *dy =
                                dY + (((size_t)i * g->oh + (in ? oy : 0)) *
                                          g->ow + (in ? ox : 0)) * F;
                            const float *w =
                                W + (((size_t)(g->kh - 1 - ky) * g->kw +
                                      (size_t)(g->kw - 1 - kx)) * C + c) * F;
                            for (size_t f = 0; f < F; f++)
                                acc = fmaf(in ? dy[f] : 0.0f, w[f], acc);
                        }
                    dX[(((size_t)i * g->h + y) * g->w + x) * C + c] = acc;
                }
}

static void dw_scalar(const kops_conv2d_t *g, const float *X, const float *dY,
                      float *dW, int i0, int i1)
{
    size_t C = (size_t)g->c, F = (size_t)g->f;
    for (int i = i0; i < i1; i++)
        for (int ky = 0; ky < g->kh; ky++)
            for (int kx = 0; kx < g->kw; kx++) {
                int ya, yb, xa, xb;
                range(g->oh, g->stride_h, g->pad_top, ky, g->h, &ya, &yb);
                range(g->ow, g->stride_w, g->pad_left, kx, g->w, &xa, &xb);
                float *dw = dW + ((size_t)ky * g->kw + kx) * C * F;
                for (size_t c = 0; c < C; c++)
                    for (size_t f = 0; f < F; f++) {
                        float acc = 0.0f;
                        for (int oy = ya; oy < yb; oy++)
                            for (int ox = xa; ox < xb; ox++)
                                acc = fmaf(xat(g, X, i,
                                               oy * g->stride_h - g->pad_top + ky,
                                               ox * g->stride_w - g->pad_left + kx,
                                               (int)c),
                                           dY[(((size_t)i * g->oh + oy) * g->ow + ox) * F + f],
                                           acc);
                        dw[c * F + f] = i == 0 ? acc : dw[c * F + f] + acc;
                    }
            }
}

/* ---- vector drivers ------------------------------------------------------- */

static void blocks(const kc_conv_isa_t *isa, kc_uk_t *u, int n, int lanes,
                   const float *b, const float *v, float *out)
{
    int chunk = isa->nvmax * isa->vw;
    const float *bias = u->bias;
    for (int l0 = 0; l0 < lanes; l0 += chunk) {
        int nl = lanes - l0 < chunk ? lanes - l0 : chunk;
        int nv = (nl + isa->vw - 1) / isa->vw, tail = nl - (nv - 1) * isa->vw;
        int pm = isa->pmax[nv], nb = (n + pm - 1) / pm;
        const float *vl = v + (u->vch ? l0 / chunk * u->vch : l0);
        if (bias)
            u->bias = bias + l0;
        for (int k = 0, p0 = 0; k < nb; k++) {
            int p = n / nb + (k < n % nb);
            isa->uk(u, p, nv, tail, b + (ptrdiff_t)p0 * u->bp, vl,
                    out + (ptrdiff_t)p0 * u->op + l0);
            p0 += p;
        }
    }
    u->bias = bias;
}

/* With more filters than one chunk of lanes, forward reads the weights
 * from wp[q][tap][c][chunk], chunk q's lanes side by side (one chunk's
 * 288 x 128 bytes of a 3x3x32 -> 64 conv), where col holds them after the
 * padded image: in W's rows, 256 bytes apart, a chunk would sit on half
 * of L1's sets and not stay there (contrib/bench/conv --reps 8, batch
 * 128: the Keras CNN's conv2 forward 157 -> 183 GFLOP/s, ResNet's s3_c1
 * 125 -> 144, the seeds' conv2 145 -> 152). The same chains, the same
 * bits. */
static const float *fwd_weights(const kc_conv_isa_t *isa,
                                const kops_conv2d_t *g, const float *W,
                                float *col, size_t col_len, size_t used,
                                kc_uk_t *u)
{
    size_t F = (size_t)g->f, chunk = (size_t)(isa->nvmax * isa->vw);
    size_t taps = (size_t)g->kh * g->kw * g->c, nq = (F + chunk - 1) / chunk;
    if (nq < 2 || used + nq * taps * chunk > col_len)
        return W;
    float *wp = col + used;
    for (size_t q = 0; q < nq; q++) {
        size_t w = F - q * chunk < chunk ? F - q * chunk : chunk;
        for (size_t t = 0; t < taps; t++)
            memcpy(wp + (q * taps + t) * chunk, W + t * F + q * chunk,
                   w * sizeof *wp);
    }
    u->vr = (ptrdiff_t)chunk;
    u->vseg = (ptrdiff_t)((size_t)g->kw * g->c * chunk);
    u->vch = (ptrdiff_t)(taps * chunk);
    return wp;
}

static void fwd_vec(const kc_conv_isa_t *isa, const kops_conv2d_t *g,
                    const float *X, const float *W, const float *b, float *Y,
                    float *col, size_t col_len)
{
    size_t C = (size_t)g->c, F = (size_t)g->f;
    int pad = needs_pad(g), hp = pad_rows(g), wp = pad_cols(g);
    size_t row = (size_t)(pad ? wp : g->w) * C;      /* floats per input row */
    kc_uk_t u = { .nrow = g->oh, .brow = (ptrdiff_t)(g->stride_h * row),
                  .orow = (ptrdiff_t)((size_t)g->ow * F),
                  .nseg = g->kh, .R = g->kw * g->c,
                  .bseg = (ptrdiff_t)row, .vseg = (ptrdiff_t)(g->kw * C * F),
                  .bp = (ptrdiff_t)(g->stride_w * C), .br = 1,
                  .vr = (ptrdiff_t)F, .op = (ptrdiff_t)F,
                  .init = b ? KC_UK_BIAS : KC_UK_ZERO, .fin = KC_UK_STORE,
                  .relu = g->relu, .bias = b };
    W = fwd_weights(isa, g, W, col, col_len, pad ? (size_t)hp * row : 0, &u);
    for (int i = 0; i < g->n; i++) {
        const float *img = X + (size_t)i * g->h * g->w * C;
        if (pad) {
            /* col[hp][wp][C]: zeros, the image at (pad_top, pad_left) */
            memset(col, 0, (size_t)hp * row * sizeof *col);
            for (int y = 0; y < g->h && y + g->pad_top < hp; y++) {
                int nx = g->w;
                if (nx > wp - g->pad_left)
                    nx = wp - g->pad_left;
                memcpy(col + (size_t)(y + g->pad_top) * row +
                           (size_t)g->pad_left * C,
                       img + (size_t)y * g->w * C, (size_t)nx * C * sizeof *col);
            }
            img = col;
        }
        float *yi = Y + (size_t)i * g->oh * g->ow * F;
        blocks(isa, &u, g->ow, g->f, img, W, yi);
    }
}

/* dX by the gather form: Wf[t'][f][c] (t' = T-1-t) and the padded dY's
 * zero borders set once in col (dx_gather_prep), then image by image. */
static void dx_gather_prep(const kops_conv2d_t *g, const float *W, float *col)
{
    size_t C = (size_t)g->c, F = (size_t)g->f, T = (size_t)g->kh * g->kw;
    float *wf = col, *dyp = col + T * C * F;
    for (size_t t = 0; t < T; t++)
        for (size_t c = 0; c < C; c++)
            for (size_t f = 0; f < F; f++)
                wf[((T - 1 - t) * F + f) * C + c] = W[(t * C + c) * F + f];
    memset(dyp, 0, (size_t)gather_rows(g) * gather_cols(g) * F * sizeof *dyp);
}

static void dx_vec_gather(const kc_conv_isa_t *isa, const kops_conv2d_t *g,
                          const float *dY, float *dX, float *col, int i0,
                          int i1)
{
    size_t C = (size_t)g->c, F = (size_t)g->f, T = (size_t)g->kh * g->kw;
    int wq = gather_cols(g);
    int oy0 = g->kh - 1 - g->pad_top, ox0 = g->kw - 1 - g->pad_left;
    const float *wf = col;
    float *dyp = col + T * C * F;
    size_t row = (size_t)wq * F;
    kc_uk_t u = { .nrow = g->h, .brow = (ptrdiff_t)row,
                  .orow = (ptrdiff_t)((size_t)g->w * C),
                  .nseg = g->kh, .R = g->kw * g->f, .bseg = (ptrdiff_t)row,
                  .vseg = (ptrdiff_t)((size_t)g->kw * F * C),
                  .bp = (ptrdiff_t)F, .br = 1, .vr = (ptrdiff_t)C,
                  .op = (ptrdiff_t)C, .init = KC_UK_ZERO, .fin = KC_UK_STORE };
    for (int i = i0; i < i1; i++) {
        const float *dy = dY + (size_t)i * g->oh * g->ow * F;
        for (int oy = 0; oy < g->oh; oy++)   /* the borders stay zero */
            memcpy(dyp + (size_t)(oy + oy0) * row + (size_t)ox0 * F,
                   dy + (size_t)oy * g->ow * F, (size_t)g->ow * F * sizeof *dy);
        kc__gather_bands(isa, g, &u, dyp, row, wf,
                         dX + (size_t)i * g->h * g->w * C);
    }
}

void kc__gather_bands(const kc_conv_isa_t *isa, const kops_conv2d_t *g,
                      kc_uk_t *u, const float *dyp, size_t row,
                      const float *wf, float *dx)
{
    size_t C = (size_t)g->c;
    /* bands of rows with the same taps ky' (the middle: all of them) */
    for (int y0 = 0, y1; y0 < g->h; y0 = y1) {
        int lo, hi;
        y1 = gather_band(g, y0, &lo, &hi);
        float *o = dx + (size_t)y0 * g->w * C;
        if (hi == lo) {                      /* no tap reads dY: zeros */
            memset(o, 0, (size_t)(y1 - y0) * g->w * C * sizeof *o);
            continue;
        }
        u->nrow = y1 - y0;
        u->nseg = hi - lo;
        blocks(isa, u, g->w, g->c, dyp + (size_t)(y0 + lo) * row,
               wf + (size_t)lo * (size_t)u->vseg, o);
    }
}

/* wt[f][cc] = W[tap][c0 + j][f] for j < cc */
static void transpose(const float *w, size_t F, size_t c0, size_t cc,
                      float *wt)
{
    for (size_t j = 0; j < cc; j++)
        for (size_t f = 0; f < F; f++)
            wt[f * cc + j] = w[(c0 + j) * F + f];
}

/* All the taps' transposes in col when it holds them, else one tap's
 * slice of *cc channels at a time on the stack: the same sums. */
static int dx_all(const kops_conv2d_t *g, size_t col_len, size_t *cc)
{
    size_t C = (size_t)g->c, F = (size_t)g->f, T = (size_t)g->kh * g->kw;
    int all = col_len >= T * C * F;
    *cc = all ? C : (KC_WT / F) / 16 * 16;
    if (*cc > C)
        *cc = C;
    return all;
}

static void dx_vec_prep(const kops_conv2d_t *g, const float *W, float *col,
                        size_t col_len)
{
    size_t C = (size_t)g->c, F = (size_t)g->f, T = (size_t)g->kh * g->kw, cc;
    if (dx_all(g, col_len, &cc))
        for (size_t t = 0; t < T; t++)
            transpose(W + t * C * F, F, 0, C, col + t * C * F);
}

static void dx_vec(const kc_conv_isa_t *isa, const kops_conv2d_t *g,
                   const float *W, const float *dY, float *dX, float *col,
                   size_t col_len, int i0, int i1)
{
    size_t C = (size_t)g->c, F = (size_t)g->f, cc;
    float stack[KC_WT];
    int all = dx_all(g, col_len, &cc);
    kc_uk_t u = { .brow = (ptrdiff_t)((size_t)g->ow * F),
                  .orow = (ptrdiff_t)((size_t)g->stride_h * g->w * C),
                  .nseg = 1, .R = g->f, .bp = (ptrdiff_t)F, .br = 1,
                  .op = (ptrdiff_t)(g->stride_w * C),
                  .init = KC_UK_LOAD, .fin = KC_UK_STORE };
    size_t img = (size_t)g->h * g->w * C;
    for (int i = i0; i < i1; i++) {
        /* zeroed image by image, while it is in cache */
        memset(dX + (size_t)i * img, 0, img * sizeof *dX);
        for (int ky = 0; ky < g->kh; ky++)
            for (int kx = 0; kx < g->kw; kx++) {
                size_t t = (size_t)ky * g->kw + kx;
                int ya, yb, xa, xb;
                range(g->oh, g->stride_h, g->pad_top, ky, g->h, &ya, &yb);
                range(g->ow, g->stride_w, g->pad_left, kx, g->w, &xa, &xb);
                if (ya >= yb || xa >= xb)
                    continue;
                for (size_t c0 = 0; c0 < C; c0 += cc) {
                    size_t n = C - c0 < cc ? C - c0 : cc;
                    const float *wt = col + t * C * F;
                    if (!all) {
                        transpose(W + t * C * F, F, c0, n, stack);
                        wt = stack;
                    }
                    u.vr = (ptrdiff_t)n;
                    u.nrow = yb - ya;
                    int y = ya * g->stride_h - g->pad_top + ky;
                    int x = xa * g->stride_w - g->pad_left + kx;
                    blocks(isa, &u, xb - xa, (int)n,
                           dY + (((size_t)i * g->oh + ya) * g->ow + xa) * F,
                           wt, dX + (((size_t)i * g->h + y) * g->w + x) * C + c0);
                }
            }
    }
}

/* Image i's tap (ky, kx) for dW: u->nseg rows of u->R outputs, *x at X's
 * first pixel they read, *dy at dY's first (an empty range reads nothing:
 * its unread start clamped to the image's first pixel). */
static void dw_tap(const kops_conv2d_t *g, int i, int ky, int kx,
                   kc_uk_t *u, const float *X, const float *dY,
                   const float **x, const float **dy)
{
    int ya, yb, xa, xb;
    range(g->oh, g->stride_h, g->pad_top, ky, g->h, &ya, &yb);
    range(g->ow, g->stride_w, g->pad_left, kx, g->w, &xa, &xb);
    u->nseg = yb - ya;
    u->R = xb - xa;
    int iy = ya * g->stride_h - g->pad_top + ky;
    int ix = xa * g->stride_w - g->pad_left + kx;
    if (u->nseg == 0 || u->R == 0)
        iy = ix = 0, ya = xa = 0;
    *x = X + (((size_t)i * g->h + iy) * g->w + ix) * (size_t)g->c;
    *dy = dY + (((size_t)i * g->oh + ya) * g->ow + xa) * (size_t)g->f;
}

/* dW's orders on the vector paths, each the same chains in the same order
 * (the same bits):
 *  DW_TAPS     a tap at a time, dY's filters as the vector lanes;
 *  DW_ACROSS   fewer channels than a block has pixels (a first layer's 1
 *              or 3): where every kx reads the same output columns (no
 *              padding across), a row of taps is one call, its kw x C (kx,
 *              c) side by side in X's rows (3 x 1 channel: blocks of 3
 *              pixels instead of 1; the seeds' conv1 dW 20 -> 27 GFLOP/s,
 *              contrib/bench/conv);
 *  DW_SWAPPED  the operands' roles swapped: X's channels as the vector
 *              lanes, dY's filters broadcast, into t[tap][f][c], then
 *              transposed into dW. Each r step then reads whole lines of X
 *              (all its C channels) and one of dY, where DW_TAPS read half
 *              of dY's 256-byte pixel row and a piece of X's.
 *              fma(dY, X, acc) is fma(X, dY, acc): t holds dW + S_i
 *              exactly. Where C is one chunk of lanes (2 vectors: with 1,
 *              a block's broadcasts would outnumber its vector loads 14 to
 *              1) and there are more filters than channels. */
enum { DW_TAPS, DW_ACROSS, DW_SWAPPED, DW_REGS };

/* Vectors of the chunks of lanes a block of filters takes */
static int chunk_nv(const kc_conv_isa_t *isa, int f)
{
    int chunk = isa->nvmax * isa->vw;
    return f >= chunk ? isa->nvmax : (f + isa->vw - 1) / isa->vw;
}

/* DW_REGS (isa->dwt, conv_direct.h's kc_dwt_fn): every tap of the layer
 * in the accumulators at once, where they fit and every tap reads inside
 * the image for every output pixel (no padding on the input's side): a
 * first layer's 3 x 3 x 1 has 18 chains in flight instead of DW_ACROSS's
 * 6, each of which waited on its FMA's latency. */
static int dw_regs(const kc_conv_isa_t *isa, const kops_conv2d_t *g)
{
    int T = g->kh * g->kw * g->c;
    return isa->dwt && T <= isa->pmax[chunk_nv(isa, g->f)] && T <= 16 &&
           g->pad_top == 0 && g->pad_left == 0 &&
           (g->oh - 1) * g->stride_h + g->kh <= g->h &&
           (g->ow - 1) * g->stride_w + g->kw <= g->w;
}

static int dw_order(const kc_conv_isa_t *isa, const kops_conv2d_t *g)
{
    if (dw_regs(isa, g))
        return DW_REGS;
    int xa0, xb0;
    range(g->ow, g->stride_w, g->pad_left, 0, g->w, &xa0, &xb0);
    int across = xb0 > xa0 && g->c < isa->pmax[isa->nvmax];
    for (int kx = 1; kx < g->kw; kx++) {
        int xa, xb;
        range(g->ow, g->stride_w, g->pad_left, kx, g->w, &xa, &xb);
        across &= xa == xa0 && xb == xb0;
    }
    if (across)
        return DW_ACROSS;
    if (g->c == isa->nvmax * isa->vw && g->f > g->c)
        return DW_SWAPPED;
    return DW_TAPS;
}

/* DW_REGS: images [i0, i1) into dW, a chunk of filters at a time. */
static void dw_regs_images(const kc_conv_isa_t *isa, const kops_conv2d_t *g,
                           const float *X, const float *dY, float *dW,
                           int i0, int i1)
{
    size_t C = (size_t)g->c, F = (size_t)g->f;
    int T = g->kh * g->kw * g->c, chunk = isa->nvmax * isa->vw;
    kc_dwt_t d = { .oh = g->oh, .ow = g->ow,
                   .xrow = (ptrdiff_t)((size_t)g->stride_h * g->w * C),
                   .xpix = (ptrdiff_t)((size_t)g->stride_w * C),
                   .dyp = (ptrdiff_t)F, .op = (ptrdiff_t)F };
    for (int ky = 0, t = 0; ky < g->kh; ky++)
        for (int kx = 0; kx < g->kw; kx++)
            for (size_t c = 0; c < C; c++, t++)
                d.off[t] = (ptrdiff_t)(((size_t)ky * g->w + (size_t)kx) * C + c);
    for (int i = i0; i < i1; i++) {
        d.fin = i == 0 ? KC_UK_STORE : KC_UK_ADD;
        const float *x = X + (size_t)i * g->h * g->w * C;
        const float *dy = dY + (size_t)i * g->oh * g->ow * F;
        for (int l0 = 0; l0 < g->f; l0 += chunk) {
            int nl = g->f - l0 < chunk ? g->f - l0 : chunk;
            int nv = (nl + isa->vw - 1) / isa->vw;
            isa->dwt(&d, T, nv, nl - (nv - 1) * isa->vw, x, dy + l0, dW + l0);
        }
    }
}

/* Images [i0, i1) into out: dW, or DW_SWAPPED's t[tap][f][c]. */
static void dw_vec(const kc_conv_isa_t *isa, const kops_conv2d_t *g,
                   int order, const float *X, const float *dY, float *out,
                   int i0, int i1)
{
    if (order == DW_REGS) {
        dw_regs_images(isa, g, X, dY, out, i0, i1);
        return;
    }
    size_t C = (size_t)g->c, F = (size_t)g->f;
    ptrdiff_t xrow = (ptrdiff_t)((size_t)g->stride_h * g->w * C);
    ptrdiff_t dyrow = (ptrdiff_t)((size_t)g->ow * F);
    ptrdiff_t xpix = (ptrdiff_t)(g->stride_w * C);
    int swapped = order == DW_SWAPPED;
    kc_uk_t u = { .nrow = 1, .bseg = swapped ? dyrow : xrow,
                  .vseg = swapped ? xrow : dyrow, .bp = 1,
                  .br = swapped ? (ptrdiff_t)F : xpix,
                  .vr = swapped ? xpix : (ptrdiff_t)F,
                  .op = (ptrdiff_t)(swapped ? C : F), .init = KC_UK_ZERO };
    int kw = order == DW_ACROSS ? 1 : g->kw;
    int px = order == DW_ACROSS ? g->kw * g->c : g->c;
    for (int i = i0; i < i1; i++) {
        u.fin = i == 0 ? KC_UK_STORE : KC_UK_ADD;
        for (int ky = 0; ky < g->kh; ky++)
            for (int kx = 0; kx < kw; kx++) {
                const float *x, *dy;
                dw_tap(g, i, ky, kx, &u, X, dY, &x, &dy);
                float *o = out + ((size_t)ky * g->kw + kx) * C * F;
                if (swapped)
                    blocks(isa, &u, g->f, g->c, dy, x, o);
                else
                    blocks(isa, &u, px, g->f, x, dy, o);
            }
    }
}

void kc__conv_blocks(const kc_conv_isa_t *isa, kc_uk_t *u, int n, int lanes,
                     const float *b, const float *v, float *out)
{
    blocks(isa, u, n, lanes, b, v, out);
}

/* ---- entries (conv.c calls them for kc_conv2d_path's direct paths) ------- */

static const kc_conv_isa_t *isa_of(int path)
{
#ifdef KC_CONV_X86
    if (path == KC_CONV_AVX512)
        return &kc_conv_avx512;
    if (path == KC_CONV_AVX2)
        return &kc_conv_avx2;
#endif
    (void)path;
    return NULL;
}

const kc_conv_isa_t *kc__direct_isa(void)
{
    int f = atomic_load(&forced);
    return isa_of(f >= 0 ? f : resolve());
}

void kc__uk_passes(const kc_conv_isa_t *isa, kc_uk_t *u, int init,
                   int pixels, int lanes, int R, int kb, const float *b,
                   const float *v, float *out)
{
    for (int r0 = 0; r0 < R || r0 == 0; r0 += kb) {
        u->R = R - r0 < kb ? R - r0 : kb;
        u->init = r0 == 0 ? init : KC_UK_LOAD;
        u->fin = KC_UK_STORE;
        blocks(isa, u, pixels, lanes, b + (ptrdiff_t)r0 * u->br,
               v + (ptrdiff_t)r0 * u->vr, out);
    }
}

void kc__conv2d_fwd_direct(int path, const kops_conv2d_t *g, const float *X,
                           const float *W, const float *b, float *Y,
                           float *col, size_t col_len)
{
    const kc_conv_isa_t *isa = isa_of(path);
    if (isa)
        fwd_vec(isa, g, X, W, b, Y, col, col_len);
    else
        fwd_scalar(g, X, W, b, Y);
}

/* Images per group of the backward: each group's dY is masked (with Y),
 * summed into db, read by dW and by dX while it is in L2 (its dY, Y, X
 * and dX within half of a 2 MiB L2), where the whole batch's passes one
 * after another each streamed it from memory: the seeds' CNN at 256, 2.5
 * to 3 % less a step (groups of 2 there; 1 or 4 about the same). */
#define KC_BWD_GROUP_BYTES ((size_t)1 << 20)

int kc__bwd_group(const kops_conv2d_t *g)
{
    size_t img = ((size_t)g->oh * g->ow * g->f * 2 +
                  (size_t)g->h * g->w * g->c * 2) * sizeof(float);
    size_t n = img ? KC_BWD_GROUP_BYTES / img : 1;
    return n < 1 ? 1 : n > (size_t)g->n ? g->n : (int)n;
}

double *kc__bwd_sums(const kops_conv2d_t *g, const float **Y, float *dY,
                     float *db)
{
    if (!db)
        return NULL;
    double *acc = calloc((size_t)g->f, sizeof *acc);
    if (!acc) {                        /* the whole batch's pass instead */
        int rows = g->n > 0 ? g->n * g->oh * g->ow : 0;
        if (*Y)
            kc_relu_bias_grad(rows, g->f, *Y, dY, db);
        else
            kc_bias_grad(rows, g->f, dY, db);
        *Y = NULL;
    }
    return acc;
}

void kc__bwd_sums_done(const kops_conv2d_t *g, double *acc, float *db)
{
    if (!acc)
        return;
    for (int j = 0; j < g->f; j++)
        db[j] = (float)acc[j];
    free(acc);
}

int kc__bwd_next(const kops_conv2d_t *g, int i0, int group, const float *Y,
                 const kc_pool_src_t *src, float *dY, double *acc)
{
    int i1 = g->n - i0 < group ? g->n : i0 + group;
    size_t plane = (size_t)g->oh * g->ow, at = (size_t)i0 * plane * g->f;
    if (src)
        kc__maxpool_bwd_rows(src, i0, i1, dY);
    if (Y || acc)
        kc__relu_bias_rows((size_t)(i1 - i0) * plane, (size_t)g->f,
                           Y ? Y + at : NULL, dY + at, acc);
    return i1;
}

void kc__conv2d_bwd_direct(int path, const kops_conv2d_t *g, const float *X,
                           const float *W, const float *Y,
                           const kc_pool_src_t *src, float *dY, float *dW,
                           float *db, float *dX, float *col, size_t col_len)
{
    const kc_conv_isa_t *isa = isa_of(path);
    size_t F = (size_t)g->f;
    int gather = dX && dx_gather(g);
    if (dX && isa)
        gather ? dx_gather_prep(g, W, col) : dx_vec_prep(g, W, col, col_len);
    int order = isa ? dw_order(isa, g) : DW_TAPS;
    float *t = NULL;
    if (order == DW_SWAPPED) {
        t = malloc((size_t)g->kh * g->kw * F * g->c * sizeof *t);
        if (!t)
            order = DW_TAPS;
    }
    double *acc = kc__bwd_sums(g, &Y, dY, db);
    int group = kc__bwd_group(g);
    for (int i0 = 0, i1; i0 < g->n; i0 = i1) {
        i1 = kc__bwd_next(g, i0, group, Y, src, dY, acc);
        if (!isa)
            dw_scalar(g, X, dY, dW, i0, i1);
        else
            dw_vec(isa, g, order, X, dY, t ? t : dW, i0, i1);
        if (!dX)
            continue;
        if (isa)
            gather ? dx_vec_gather(isa, g, dY, dX, col, i0, i1)
                   : dx_vec(isa, g, W, dY, dX, col, col_len, i0, i1);
        else if (gather)
            dx_scalar_gather(g, W, dY, dX, i0, i1);
        else {
            size_t img = (size_t)g->h * g->w * g->c;
            memset(dX + (size_t)i0 * img, 0,
                   (size_t)(i1 - i0) * img * sizeof *dX);
            dx_scalar(g, W, dY, dX, i0, i1);
        }
    }
    if (t) {
        size_t C = (size_t)g->c, taps = (size_t)g->kh * g->kw;
        for (size_t k = 0; k < taps; k++)
            for (size_t f = 0; f < F; f++)
                for (size_t c = 0; c < C; c++)
                    dW[(k * C + c) * F + f] = t[(k * F + f) * C + c];
        free(t);
    }
    kc__bwd_sums_done(g, acc, db);
}
