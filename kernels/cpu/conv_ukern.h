/* Private to kernels/cpu: the direct convolution's micro-kernel (see
 * conv_direct.h), a template included once per ISA. The includer defines
 *   UK_TGT        the target attribute
 *   UK_V, UK_M    vector and lane-mask types, UK_VW floats per vector
 *   UK_PMAX1/2    pixels per block for NV = 1 / 2
 *   UK_MASK(n)    mask of the first n lanes
 *   UK_LOAD(p) UK_MLOAD(p, m) UK_STORE(p, v) UK_MSTORE(p, m, v)
 *   UK_STREAM(p, v) (a non-temporal store to an aligned p)
 *   UK_BCAST(p) UK_FMA(a, b, c) UK_ADD(a, b) UK_ZERO()
 *   UK_MAX(a, b)  a > b ? a : b lane by lane (MAXPS: b where either is a
 *                 NaN or both are zeros)
 *   UK_NAME       the kc_conv_isa_t to define
 * The accumulators are an array whose loops are all unrolled with the
 * block's constant sizes, so they live in registers. */
#define UK_CAT_(a, b) a##b
#define UK_CAT(a, b) UK_CAT_(a, b)
#define UK_FN(p, nv) UK_CAT(UK_CAT(UK_CAT(uk_, UK_NAME), _##p), _##nv)

/* out[p*op + j*VW..] = acc[p][j] (or += with KC_UK_ADD), through relu's
 * max when asked; the vector `last` under the lane mask m */
static inline __attribute__((always_inline)) UK_TGT void
uk_store(UK_V acc[14][2], const int P, const int NV, const int last,
         UK_M m, float *out, ptrdiff_t op, int fin, int relu)
{
#pragma GCC unroll 16
    for (int p = 0; p < P; p++)
#pragma GCC unroll 2
        for (int j = 0; j < NV; j++) {
            float *o = out + p * op + j * UK_VW;
            UK_V r = acc[p][j];
            if (fin == KC_UK_ADD)
                r = UK_ADD(j == last ? UK_MLOAD(o, m) : UK_LOAD(o), r);
            if (relu)
                r = UK_MAX(UK_ZERO(), r);
            if (j == last)
                UK_MSTORE(o, m, r);
            else if (fin == KC_UK_STREAM &&
                     ((uintptr_t)o & (UK_VW * sizeof(float) - 1)) == 0)
                UK_STREAM(o, r);
            else
                UK_STORE(o, r);
        }
}

static inline __attribute__((always_inline)) UK_TGT void
uk_body(const kc_uk_t *u, const int P, const int NV, const int masked,
        int tail, const float *b, const float *v, float *out)
{
    UK_V acc[14][2];
    UK_M m = UK_MASK(tail);
    /* the vector that takes the mask; none (-1) when every lane is live */
    const int last = masked ? NV - 1 : -1;
    for (int row = 0; row < u->nrow; row++, b += u->brow, out += u->orow) {
#pragma GCC unroll 16
    for (int p = 0; p < P; p++)
#pragma GCC unroll 2
        for (int j = 0; j < NV; j++) {
            const float *o = out + p * u->op + j * UK_VW;
            if (u->init == KC_UK_ZERO)
                acc[p][j] = UK_ZERO();
            else if (u->init == KC_UK_BIAS)
                acc[p][j] = j == last ? UK_MLOAD(u->bias + j * UK_VW, m)
                                      : UK_LOAD(u->bias + j * UK_VW);
            else
                acc[p][j] = j == last ? UK_MLOAD(o, m) : UK_LOAD(o);
        }
    const ptrdiff_t bp = u->bp, br = u->br, vr = u->vr;
    const ptrdiff_t bseg = u->bseg, vseg = u->vseg;
    const int nseg = u->nseg, R = u->R;
    /* The pixels in two halves, each from its own pointer: P pointers
     * would not fit the general registers. */
    const int G = (P + 1) / 2;
    for (int s = 0; s < nseg; s++) {
        const float *bb = b + s * bseg, *vv = v + s * vseg;
        const float *bh = bb + G * bp;
        for (int r = 0; r < R; r++, bb += br, bh += br, vv += vr) {
            UK_V w[2];
#pragma GCC unroll 2
            for (int j = 0; j < NV; j++)
                w[j] = j == last ? UK_MLOAD(vv + j * UK_VW, m)
                                 : UK_LOAD(vv + j * UK_VW);
#pragma GCC unroll 16
            for (int p = 0; p < P; p++) {
                UK_V x = UK_BCAST(p < G ? bb + p * bp : bh + (p - G) * bp);
#pragma GCC unroll 2
                for (int j = 0; j < NV; j++)
                    acc[p][j] = UK_FMA(x, w[j], acc[p][j]);
            }
        }
    }
    uk_store(acc, P, NV, last, m, out, u->op, u->fin, u->relu);
    }
}

/* A kernel body's variants: a function for each block size k (1..14) and
 * vector count nv, with the mask or without (every lane live), named by
 * FN(k, nv); BODY(ctx, k, nv, masked, tail, b, v, out) is the body, CTX
 * its context; UK_TABLE_ROW lists one nv's in a row of its table. */
#define UK_VARIANT(FN, BODY, CTX, k, nv)                                      \
    static UK_TGT void FN(k, nv)(const CTX *c, int K, int NV, int tail,       \
                                 const float *b, const float *v, float *out)  \
    {                                                                         \
        (void)K, (void)NV;                                                    \
        if (tail == UK_VW)                                                    \
            BODY(c, k, nv, 0, tail, b, v, out);                               \
        else                                                                  \
            BODY(c, k, nv, 1, tail, b, v, out);                               \
    }
#define UK_VARIANTS(FN, BODY, CTX, nv)                                        \
    UK_VARIANT(FN, BODY, CTX, 1, nv) UK_VARIANT(FN, BODY, CTX, 2, nv)         \
    UK_VARIANT(FN, BODY, CTX, 3, nv) UK_VARIANT(FN, BODY, CTX, 4, nv)         \
    UK_VARIANT(FN, BODY, CTX, 5, nv) UK_VARIANT(FN, BODY, CTX, 6, nv)         \
    UK_VARIANT(FN, BODY, CTX, 7, nv) UK_VARIANT(FN, BODY, CTX, 8, nv)         \
    UK_VARIANT(FN, BODY, CTX, 9, nv) UK_VARIANT(FN, BODY, CTX, 10, nv)        \
    UK_VARIANT(FN, BODY, CTX, 11, nv) UK_VARIANT(FN, BODY, CTX, 12, nv)       \
    UK_VARIANT(FN, BODY, CTX, 13, nv) UK_VARIANT(FN, BODY, CTX, 14, nv)
#define UK_TABLE_ROW(FN, nv)                                                  \
    { FN(1, nv), FN(2, nv), FN(3, nv), FN(4, nv), FN(5, nv), FN(6, nv),       \
      FN(7, nv), FN(8, nv), FN(9, nv), FN(10, nv), FN(11, nv), FN(12, nv),    \
      FN(13, nv), FN(14, nv) }

UK_VARIANTS(UK_FN, uk_body, kc_uk_t, 1)
UK_VARIANTS(UK_FN, uk_body, kc_uk_t, 2)
static kc_uk_fn *const UK_CAT(uk_tab_, UK_NAME)[2][14] = {
    UK_TABLE_ROW(UK_FN, 1), UK_TABLE_ROW(UK_FN, 2) };

static void UK_CAT(uk_run_, UK_NAME)(const kc_uk_t *u, int P, int NV,
                                     int tail, const float *b,
                                     const float *v, float *out)
{
    UK_CAT(uk_tab_, UK_NAME)[NV - 1][P - 1](u, P, NV, tail, b, v, out);
}

#ifdef UK_DWT
/* kc_dwt_fn (conv_direct.h): T taps x NV vectors of accumulators, the
 * broadcasts folded into the FMAs as in uk_body. */
#define DWT_FN(t, nv) UK_CAT(UK_CAT(UK_CAT(dwt_, UK_NAME), _##t), _##nv)
static inline __attribute__((always_inline)) UK_TGT void
dwt_body(const kc_dwt_t *d, const int T, const int NV, const int masked,
         int tail, const float *x, const float *dy, float *out)
{
    UK_V acc[14][2];
    UK_M m = UK_MASK(tail);
    const int last = masked ? NV - 1 : -1;
#pragma GCC unroll 16
    for (int t = 0; t < T; t++)
#pragma GCC unroll 2
        for (int j = 0; j < NV; j++)
            acc[t][j] = UK_ZERO();
    for (int y = 0; y < d->oh; y++) {
        const float *xr = x + y * d->xrow;
        for (int px = 0; px < d->ow; px++, xr += d->xpix, dy += d->dyp) {
            UK_V w[2];
#pragma GCC unroll 2
            for (int j = 0; j < NV; j++)
                w[j] = j == last ? UK_MLOAD(dy + j * UK_VW, m)
                                 : UK_LOAD(dy + j * UK_VW);
#pragma GCC unroll 16
            for (int t = 0; t < T; t++) {
                UK_V b = UK_BCAST(xr + d->off[t]);
#pragma GCC unroll 2
                for (int j = 0; j < NV; j++)
                    acc[t][j] = UK_FMA(b, w[j], acc[t][j]);
            }
        }
    }
    uk_store(acc, T, NV, last, m, out, d->op, d->fin, 0);
}

UK_VARIANTS(DWT_FN, dwt_body, kc_dwt_t, 1)
UK_VARIANTS(DWT_FN, dwt_body, kc_dwt_t, 2)
static kc_dwt_fn *const UK_CAT(dwt_tab_, UK_NAME)[2][14] = {
    UK_TABLE_ROW(DWT_FN, 1), UK_TABLE_ROW(DWT_FN, 2) };

static void UK_CAT(dwt_run_, UK_NAME)(const kc_dwt_t *d, int T, int NV,
                                      int tail, const float *x,
                                      const float *dy, float *out)
{
    UK_CAT(dwt_tab_, UK_NAME)[NV - 1][T - 1](d, T, NV, tail, x, dy, out);
}
#define UK_DWT_RUN UK_CAT(dwt_run_, UK_NAME)
#else
#define UK_DWT_RUN NULL
#endif

const kc_conv_isa_t UK_NAME = { UK_VW, 2, { 0, UK_PMAX1, UK_PMAX2 },
                                UK_CAT(uk_run_, UK_NAME), UK_DWT_RUN };
