/* Private to kernels/cpu: direct convolution (no im2col, no GEMM).
 *
 * Every output element is ONE chain of fused multiply-adds in a fixed
 * order that depends only on the geometry -- not on the batch, the block
 * an element falls in, nor the vector width:
 *   forward   Y  = fma chain from b[f] (or +0) over the taps (ky, kx, c),
 *                  a tap in the padding reading 0 (as im2col's zeros);
 *   dX        dX = fma chain from +0 over the taps (ky, kx) that read the
 *                  input, each over f;
 *   dW        per image, a chain from +0 over the pixels (oy, ox) that the
 *                  tap reads inside the image; dW = image 0's, + image 1's...
 * So the AVX-512, AVX2 and scalar (fmaf) paths give the same bits, and an
 * image's output is the same whatever batch it is computed in.
 *
 * The vector paths share one micro-kernel shape: a block of P "pixels" x NV
 * vectors of VW floats of accumulators; each step of the reduction loads NV
 * vectors of one operand and broadcasts one float of the other per pixel.
 * conv_ukern.h holds it, compiled once per ISA (conv_avx512.c, conv_avx2.c);
 * conv_direct.c drives it. */
#ifndef STRATA_KC_CONV_DIRECT_H
#define STRATA_KC_CONV_DIRECT_H

#include <stddef.h>

#include "../kops_list.h"

enum { KC_UK_ZERO, KC_UK_BIAS, KC_UK_LOAD };   /* accumulators start from */
/* and end as out = / out += / out = through non-temporal stores where a
 * vector is aligned (an output far larger than the caches, written once:
 * no read for ownership; the caller fences) */
enum { KC_UK_STORE, KC_UK_ADD, KC_UK_STREAM };

/* A dense backward's result of more floats than this, written once (dW
 * in one pass, dX; dense.c, dense_bf16.c), goes out through non-temporal
 * stores: no read for ownership of lines far beyond L2 that the next op
 * reads from memory anyway (the seeds' CNN's 36864 x 64 layer on a Zen 5
 * with 1 MiB of L2: dW at 32 rows 55-109 -> 119-158 GFLOP/s, dX 63-79 ->
 * 97). */
#define KC_STREAM_MIN (1u << 20)

/* One block, in each of nrow rows (b += brow, out += orow from one to the
 * next): for p < P, v < NV:
 *   acc[p][v] = init (0, bias[v*VW..], or out[p*op + v*VW..])
 *   for s < nseg, r < R:  acc[p][v] = fma(b[s*bseg + p*bp + r*br],
 *                                         v[s*vseg + r*vr + v*VW..], acc)
 *   out[p*op + v*VW..] = acc (or += acc)
 * The last vector has `tail` (1..VW) live lanes: masked loads and stores. */
typedef struct kc_uk {
    int nrow;
    ptrdiff_t brow, orow;
    int nseg, R;
    ptrdiff_t bseg, vseg;    /* per segment: broadcast, vector operand */
    ptrdiff_t bp, br;        /* broadcast operand: per pixel, per step */
    ptrdiff_t vr;            /* vector operand per step                */
    ptrdiff_t vch;           /* vector operand from one chunk of lanes
                                to the next (0: the chunk's first lane) */
    ptrdiff_t op;            /* out per pixel                          */
    int init, fin;
    int relu;                /* out = acc < 0 ? 0 : acc (kc_relu_fwd's
                                bits: NaN and -0 kept) as it is stored */
    const float *bias;       /* KC_UK_BIAS: the block's first lane     */
} kc_uk_t;

typedef void kc_uk_fn(const kc_uk_t *u, int P, int NV, int tail,
                      const float *b, const float *v, float *out);

/* dW of one image where all T taps (kh kw c) fit the accumulators at
 * once, and every tap reads inside the image for every output pixel (a
 * first layer's 3 x 3 x 1 'valid'): for t < T, v < NV:
 *   acc[t][v] = +0
 *   for each output pixel (y, x) in order:
 *     acc[t][v] = fma(x[y*xrow + x*xpix + off[t]], dy[pixel*dyp + v*VW..], acc)
 *   out[t*op + v*VW..] = acc (fin KC_UK_STORE) or += acc (KC_UK_ADD)
 * -- dw_vec's chains, element by element, with T x NV independent chains
 * in flight where its rows of taps had kw x NV (a chain waits on its FMA's
 * latency, 4 cycles). */
typedef struct kc_dwt {
    int oh, ow, fin;
    ptrdiff_t xrow, xpix, dyp, op;
    ptrdiff_t off[16];
} kc_dwt_t;
typedef void kc_dwt_fn(const kc_dwt_t *d, int T, int NV, int tail,
                       const float *x, const float *dy, float *out);

typedef struct kc_conv_isa {
    int vw;                  /* floats per vector       */
    int nvmax;               /* vectors per block, <= 2 */
    int pmax[3];             /* pixels per block, by NV */
    kc_uk_fn *uk;
    kc_dwt_fn *dwt;          /* T <= pmax[NV]; NULL: none */
} kc_conv_isa_t;

/* The direct paths (path: KC_CONV_SCALAR, _AVX2, _AVX512); col as
 * kc_conv2d_fwd/bwd's workspace. dW and dX are overwritten. */
void kc__conv2d_fwd_direct(int path, const kops_conv2d_t *g, const float *X,
                           const float *W, const float *b, float *Y,
                           float *col, size_t col_len);
/* Where a backward's dY comes from: a max pooling's backward into the
 * layer's relu (kc_conv2d_bwd_pooled; pool.c makes it image by image). */
typedef struct kc_pool_src {
    const kops_pool2d_t *g;
    int                  rows;      /* images per forward call            */
    const float         *dP, *P;
    const int32_t       *argmax;
} kc_pool_src_t;
/* dY (the pooling's dX) of images [i0, i1): maxpool2d_bwd_relu's bits. */
void kc__maxpool_bwd_rows(const kc_pool_src_t *s, int i0, int i1, float *dY);

/* The backward: with src, each group's dY is first made from the pooling;
 * with Y, dY (the relu's output gradient) is first masked in place where
 * Y <= 0; db (may be NULL) is summed from it group by group of images
 * (kc__relu_bias_rows: kc_relu_bias_grad's bits, or without Y
 * kc_bias_grad's, dY then only read). */
void kc__conv2d_bwd_direct(int path, const kops_conv2d_t *g, const float *X,
                           const float *W, const float *Y,
                           const kc_pool_src_t *src, float *dY, float *dW,
                           float *db, float *dX, float *col, size_t col_len);
/* Rows [0, m) of n columns: dy masked in place where y <= 0 (relu's
 * backward; none when y is NULL), then added in double into acc[n] when
 * acc != NULL: a batch's rows in pieces, in order, make kc_relu_bias_grad's
 * sums (kc_bias_grad's without y). */
void kc__relu_bias_rows(size_t m, size_t n, const float *y, float *dy,
                        double *acc);
/* Images per group of a backward (dY, Y, X and dX of a group within half
 * of a 2 MiB L2), at least 1, at most g->n. */
int kc__bwd_group(const kops_conv2d_t *g);
/* db's double sums for a backward (db given; through relu with *Y),
 * zeroed, for kc__bwd_next to fill and kc__bwd_sums_done to round into db
 * and free; where they cannot be had, the whole batch's kc_relu_bias_grad
 * (kc_bias_grad without *Y) runs at once (the same bits) and *Y becomes
 * NULL. NULL without db. */
double *kc__bwd_sums(const kops_conv2d_t *g, const float **Y, float *dY,
                     float *db);
void kc__bwd_sums_done(const kops_conv2d_t *g, double *acc, float *db);
/* The group of images from i0 (group of them, fewer at the end): its dY
 * made from src (if given), masked with Y (if given) and summed into acc
 * (if given, kc__relu_bias_rows); returns its end. */
int kc__bwd_next(const kops_conv2d_t *g, int i0, int group, const float *Y,
                 const kc_pool_src_t *src, float *dY, double *acc);
/* One image of dX's gather form into dx[h][w][C], from its padded dY
 * (dyp, rows `row` floats apart) and the flipped weights wf (u: its
 * blocks' strides; nrow and nseg set here): in bands of rows with the same
 * taps ky', those that read only the padding's zero rows left out of the
 * chains (a row that reads none is zeros). */
void kc__gather_bands(const kc_conv_isa_t *isa, const kops_conv2d_t *g,
                      kc_uk_t *u, const float *dyp, size_t row,
                      const float *wf, float *dx);

/* dX by the gather form (a stride-1 convolution of the padded dY with the
 * flipped weights): by shape only, where most of its products are real. */
int kc__conv_dx_gather(const kops_conv2d_t *g);
/* The outputs [*lo, *hi) of an axis (out of them, stride s, padding pad)
 * whose tap k reads inside [0, n). */
void kc__conv_range(int out, int s, int pad, int k, int n, int *lo, int *hi);

/* Runs u over pixels [0, n) of a row (pixel j at b + j*u->bp, out +
 * j*u->op) and the lanes [0, lanes) (out at + lane; the vector operand at
 * + lane, or chunk q's at + q*u->vch), in chunks of nvmax vectors and
 * blocks of at most isa's pmax pixels, of near-equal size. */
void kc__conv_blocks(const kc_conv_isa_t *isa, kc_uk_t *u, int n, int lanes,
                     const float *b, const float *v, float *out);

/* out[pixels x lanes] = chains of R steps (u->br, u->vr apart; u's other
 * fields as kc__conv_blocks wants them), in passes of at most kb steps:
 * the first from init (KC_UK_ZERO or KC_UK_BIAS), the rest from the
 * partial sums stored in out (exact), so the chain is the same whatever
 * kb. The GEMMs of dense (dense.c, dense_bf16.c). */
void kc__uk_passes(const kc_conv_isa_t *isa, kc_uk_t *u, int init,
                   int pixels, int lanes, int R, int kb, const float *b,
                   const float *v, float *out);

#if defined(__x86_64__) && defined(__GNUC__)
#define KC_CONV_X86 1
extern const kc_conv_isa_t kc_conv_avx512, kc_conv_avx2;
/* The fp32 vector kernels the direct path takes now (forced or chosen:
 * kc_conv_avx512 or kc_conv_avx2); NULL on the GEMM and scalar paths. */
const kc_conv_isa_t *kc__direct_isa(void);
/* dst[j*dp + l] = src[l*sp + j] for l, j < 16 (dense.c, AVX-512F): 16
 * loads, 64 shuffles, and 16 stores of 16 floats, row j = 0..15 in order
 * (where dp < 16, each row's tail is overwritten by the next row). */
void kc__tr16(const float *src, size_t sp, float *dst, size_t dp);
/* mixed_bfloat16 (conv_avx512bf16.c): the same kernel shape over 32-bit
 * elements that are pairs of bf16 along the reduction, VDPBF16PS for the
 * FMA; and the conversion of n floats to bf16 (round to nearest even,
 * denormals to signed zero, as the instruction) into (n + 1) / 2 words of
 * dst, an odd n's last pair completed with +0. */
extern const kc_conv_isa_t kc_conv_avx512bf16;
/* The same contract on AMX tiles (conv_amx.c), blocks of 16 pixels and the
 * broadcast operand's steps side by side (u->br == 1 only; neither u->vch
 * nor u->relu, which the bf16 drivers do not set). kc__amx_ready: the OS
 * gave this process the tile state (asked once); kc__amx_release: the
 * calling thread is done with the tiles for now. */
extern const kc_conv_isa_t kc_conv_amx;
int kc__amx_ready(void);
void kc__amx_release(void);
/* The bf16 kernel calls take now: kc_conv_amx or kc_conv_avx512bf16
 * (conv_bf16.c, by kc_bf16_engine()). */
const kc_conv_isa_t *kc__bf16_isa(void);
void kc__bf16_pack(const float *src, size_t n, float *dst);
/* dst[j] = the pair (bf16 of lo[j], bf16 of hi[j]) for j < n words, NULL
 * for zeros. */
void kc__bf16_zip(const float *lo, const float *hi, size_t n, float *dst);
#endif

#endif /* STRATA_KC_CONV_DIRECT_H */
