/* The bf16 micro-kernel on AMX tiles (mixed_bfloat16 where the CPU has
 * AMX-BF16: Sapphire Rapids and later Xeons). conv_direct.h's kc_uk_t
 * contract, as conv_avx512bf16.c's, on the same packed operands -- 32-bit
 * words that are pairs of bf16 along the reduction -- but a block's
 * product is TDPBF16PS on tiles instead of VDPBF16PS on vectors:
 *   C (P pixels x 16 lanes, fp32) += A (P pixels x 16 words) . B (16 words
 *   x 16 lanes, the "VNNI" layout our vector operand already has),
 * 32 bf16 products per element and instruction, 16x the work of a vector
 * step. On the CPU this was written for, VDPBF16PS runs at half the fp32
 * FMA rate (123 against 246 GFLOP/s a core, contrib/bench/peak) and the
 * tile unit at 3.8 TFLOP/s: the vector kernel made mixed_bfloat16 slower
 * than float32 there.
 *
 * A tile row must be contiguous, so the broadcast operand's steps are
 * words side by side (u->br == 1): the drivers pack dW's operands that way
 * on this path (conv_bf16.c, dense_bf16.c). Each output element is still
 * one fixed chain that depends only on the geometry: from init over the
 * segments, each over its words in steps of 16 (the last step the rest),
 * one TDPBF16PS a step; the pixels of a block are rows of the tiles and
 * never mix. The instruction's own order of its 32 products is the
 * hardware's: the same on every AMX CPU, not VDPBF16PS's, so an AMX
 * replica and a vector one differ in the last bits (the strategies then
 * average gradients that agree to bf16's precision; a job keeps one set of
 * variables whatever its CPUs).
 *
 * Tiles: 0, 1 the accumulators (lanes [0, 16), [16, 32)), 2 a full step of
 * A, 3, 4 a full step of B per accumulator, 5-7 the same for the last,
 * shorter step. The configuration depends on (P, NV, tail, R mod 16); a
 * thread keeps its last and loads another only when it differs. */
#include "conv_direct.h"

#ifdef KC_CONV_X86
#include <immintrin.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

int kc__amx_ready(void)
{
    /* Linux hands the tile registers' 8 KiB of state to a process only
     * when it asks (arch_prctl, since 5.16); once for the whole process. */
    static _Atomic int known = -1;
    int k = atomic_load(&known);
    if (k < 0) {
        k = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM,
                    XFEATURE_XTILEDATA) == 0;
        atomic_store(&known, k);
    }
    return k;
}

typedef struct tilecfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg_t;

static _Thread_local tilecfg_t loaded;
static _Thread_local int have_loaded;

#define AMX_TGT __attribute__((target("amx-tile,amx-bf16,avx512f")))

AMX_TGT void kc__amx_release(void)
{
    if (have_loaded)
        _tile_release();
    have_loaded = 0;
}

static AMX_TGT void configure(int P, int NV, int tail, int rt)
{
    tilecfg_t c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    int w0 = NV == 1 ? tail : 16;
    c.rows[0] = (uint8_t)P, c.colsb[0] = (uint16_t)(4 * w0);
    c.rows[2] = (uint8_t)P, c.colsb[2] = 64;
    c.rows[3] = 16, c.colsb[3] = (uint16_t)(4 * w0);
    if (NV == 2) {
        c.rows[1] = (uint8_t)P, c.colsb[1] = (uint16_t)(4 * tail);
        c.rows[4] = 16, c.colsb[4] = (uint16_t)(4 * tail);
    }
    if (rt) {
        c.rows[5] = (uint8_t)P, c.colsb[5] = (uint16_t)(4 * rt);
        c.rows[6] = (uint8_t)rt, c.colsb[6] = (uint16_t)(4 * w0);
        if (NV == 2)
            c.rows[7] = (uint8_t)rt, c.colsb[7] = (uint16_t)(4 * tail);
    }
    if (have_loaded && !memcmp(&c, &loaded, sizeof c))
        return;
    _tile_loadconfig(&c);
    loaded = c, have_loaded = 1;
}

/* out[p][0 .. w) += t[p][0 .. w) for p < P: KC_UK_ADD's sum, as the
 * vector kernels do it (acc first, then out + acc). */
static AMX_TGT void add_rows(float *out, ptrdiff_t op, const float *t, int P,
                             int w)
{
    __mmask16 m = (__mmask16)(w == 16 ? 0xffffu : (1u << w) - 1u);
    for (int p = 0; p < P; p++) {
        float *o = out + p * op;
        __m512 r = _mm512_add_ps(_mm512_maskz_loadu_ps(m, o),
                                 _mm512_maskz_loadu_ps(m, t + 16 * p));
        _mm512_mask_storeu_ps(o, m, r);
    }
}

static AMX_TGT void uk_amx(const kc_uk_t *u, int P, int NV, int tail,
                           const float *b, const float *v, float *out)
{
    const int R = u->R, rt = R % 16, rfull = R - rt;
    configure(P, NV, tail, rt);
    const long sa = (long)(u->bp * 4), sb = (long)(u->vr * 4);
    const long so = (long)(u->op * 4);
    float tmp[16 * 16];
    for (int row = 0; row < u->nrow; row++, b += u->brow, out += u->orow) {
        if (u->init == KC_UK_ZERO) {
            _tile_zero(0);
            if (NV == 2)
                _tile_zero(1);
        } else if (u->init == KC_UK_BIAS) {
            _tile_loadd(0, u->bias, 0);        /* every row the bias */
            if (NV == 2)
                _tile_loadd(1, u->bias + 16, 0);
        } else {
            _tile_loadd(0, out, so);
            if (NV == 2)
                _tile_loadd(1, out + 16, so);
        }
        for (int s = 0; s < u->nseg; s++) {
            const float *bb = b + s * u->bseg, *vv = v + s * u->vseg;
            /* one step at word r: A into tile TA, B's lanes into TB0 (and
             * TB1), into the accumulators 0 (and 1); tile numbers are
             * immediates, hence a macro */
#define AMX_STEP(TA, TB0, TB1)                                                \
    do {                                                                      \
        _tile_loadd(TA, bb + r, sa);                                          \
        _tile_loadd(TB0, vv + r * u->vr, sb);                                 \
        _tile_dpbf16ps(0, TA, TB0);                                           \
        if (NV == 2) {                                                        \
            _tile_loadd(TB1, vv + r * u->vr + 16, sb);                        \
            _tile_dpbf16ps(1, TA, TB1);                                       \
        }                                                                     \
    } while (0)
            int r = 0;
            for (; r < rfull; r += 16)
                AMX_STEP(2, 3, 4);
            if (rt)
                AMX_STEP(5, 6, 7);                 /* the shorter last step */
#undef AMX_STEP
        }
        if (u->fin == KC_UK_STORE) {
            _tile_stored(0, out, so);
            if (NV == 2)
                _tile_stored(1, out + 16, so);
        } else {
            _tile_stored(0, tmp, 64);
            add_rows(out, u->op, tmp, P, NV == 1 ? tail : 16);
            if (NV == 2) {
                _tile_stored(1, tmp, 64);
                add_rows(out + 16, u->op, tmp, P, tail);
            }
        }
    }
}

/* 16 pixels (the tile's rows) by 2 x 16 lanes a block. */
const kc_conv_isa_t kc_conv_amx = { 16, 2, { 0, 16, 16 }, uk_amx, NULL };
#endif
