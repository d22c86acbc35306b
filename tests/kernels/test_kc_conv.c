/* conv2d and maxpool2d kernels (NHWC): forward against a direct double
 * loop, every gradient against central finite differences, at several
 * shapes, strides, paddings and im2col group sizes; dropout's mask (a pure
 * function of seed and index, split-invariant, about `rate` dropped) and
 * tanh / sigmoid gradients; and an image's forward output is bitwise the
 * same however many images share its batch (a replica's half of a batch
 * gives what one device computes for those images). */
#include "kc_test.h"
#include "kernels_cpu.h"

#include <stdlib.h>
#include <string.h>

/* Keras's padding for one axis: returns the output size, *pad = before. */
static int axis(int n, int k, int s, int same, int *pad)
{
    if (!same) {
        *pad = 0;
        return (n - k) / s + 1;
    }
    int out = (n + s - 1) / s, total = (out - 1) * s + k - n;
    *pad = total > 0 ? total / 2 : 0;
    return out;
}

static kops_conv2d_t geom(int n, int h, int w, int c, int kh, int kw, int f,
                          int sh, int sw, int same)
{
    kops_conv2d_t g = { n, h, w, c, kh, kw, f, sh, sw, 0, 0, 0, 0, 0, 0 };
    g.oh = axis(h, kh, sh, same, &g.pad_top);
    g.ow = axis(w, kw, sw, same, &g.pad_left);
    return g;
}

static size_t xlen(const kops_conv2d_t *g)
{
    return (size_t)g->n * g->h * g->w * g->c;
}
static size_t ylen(const kops_conv2d_t *g)
{
    return (size_t)g->n * g->oh * g->ow * g->f;
}
static size_t wlen(const kops_conv2d_t *g)
{
    return (size_t)g->kh * g->kw * g->c * g->f;
}

static void ref_conv(const kops_conv2d_t *g, const float *X, const float *W,
                     const float *b, double *Y)
{
    for (int i = 0; i < g->n; i++)
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++)
                for (int f = 0; f < g->f; f++) {
                    double s = b ? b[f] : 0.0;
                    for (int ky = 0; ky < g->kh; ky++)
                        for (int kx = 0; kx < g->kw; kx++) {
                            int y = oy * g->stride_h - g->pad_top + ky;
                            int x = ox * g->stride_w - g->pad_left + kx;
                            if (y < 0 || y >= g->h || x < 0 || x >= g->w)
                                continue;
                            for (int c = 0; c < g->c; c++)
                                s += (double)X[((i * g->h + y) * g->w + x) *
                                               g->c + c] *
                                     W[((ky * g->kw + kx) * g->c + c) * g->f +
                                       f];
                        }
                    Y[((i * g->oh + oy) * g->ow + ox) * g->f + f] = s;
                }
}

struct conv_case {
    kops_conv2d_t g;
    float *X, *W, *b, *Y, *R, *col;
    size_t col_len;
};

/* sum(Y * R): its gradient w.r.t. Y is R. */
static double conv_loss(void *vc)
{
    struct conv_case *c = vc;
    kc_conv2d_fwd(&c->g, c->X, c->W, c->b, c->Y, c->col, c->col_len);
    double s = 0;
    for (size_t i = 0; i < ylen(&c->g); i++)
        s += (double)c->Y[i] * c->R[i];
    return s;
}

/* groups: images per im2col GEMM (the workspace holds that many). */
static void test_conv(kops_conv2d_t g, int groups)
{
    struct conv_case c = { .g = g };
    size_t one = kc_conv2d_col_len(&g);
    c.col_len = one * (size_t)groups;
    c.X = malloc(xlen(&g) * sizeof(float));
    c.W = malloc(wlen(&g) * sizeof(float));
    c.b = malloc((size_t)g.f * sizeof(float));
    c.Y = malloc(ylen(&g) * sizeof(float));
    c.R = malloc(ylen(&g) * sizeof(float));
    c.col = malloc(c.col_len * sizeof(float));
    float *dW = malloc(wlen(&g) * sizeof(float));
    float *db = malloc((size_t)g.f * sizeof(float));
    float *dX = malloc(xlen(&g) * sizeof(float));
    double *ref = malloc(ylen(&g) * sizeof(double));
    kc_fill(xlen(&g), c.X, -1, 1);
    kc_fill(wlen(&g), c.W, -0.5, 0.5);
    kc_fill((size_t)g.f, c.b, -1, 1);
    kc_fill(ylen(&g), c.R, -1, 1);
    char what[160];
    snprintf(what, sizeof what, "conv n%d %dx%dx%d k%dx%d f%d s%dx%d pad%d,%d "
             "out %dx%d group %d", g.n, g.h, g.w, g.c, g.kh, g.kw, g.f,
             g.stride_h, g.stride_w, g.pad_top, g.pad_left, g.oh, g.ow,
             groups);

    for (size_t i = 0; i < ylen(&g); i++)
        c.Y[i] = NAN;                   /* must be overwritten */
    kc_conv2d_fwd(&g, c.X, c.W, c.b, c.Y, c.col, c.col_len);
    ref_conv(&g, c.X, c.W, c.b, ref);
    KC_CHECK_NEAR(what, ylen(&g), c.Y, ref, 1e-4, 1e-5);
    kc_conv2d_fwd(&g, c.X, c.W, NULL, c.Y, c.col, c.col_len);
    ref_conv(&g, c.X, c.W, NULL, ref);
    KC_CHECK_NEAR(what, ylen(&g), c.Y, ref, 1e-4, 1e-5);

    for (size_t i = 0; i < wlen(&g); i++)
        dW[i] = NAN;
    for (size_t i = 0; i < xlen(&g); i++)
        dX[i] = NAN;
    kc_conv2d_bwd(&g, c.X, c.W, c.R, dW, db, dX, c.col, c.col_len);
    printf("%s\n", what);
    kc_grad_check("conv dW", wlen(&g), c.W, dW, conv_loss, &c, 1e-2);
    kc_grad_check("conv db", (size_t)g.f, c.b, db, conv_loss, &c, 1e-2);
    kc_grad_check("conv dX", xlen(&g), c.X, dX, conv_loss, &c, 1e-2);
    /* dX == NULL (a first layer) leaves dW and db the same. */
    float *dW2 = malloc(wlen(&g) * sizeof(float));
    kc_conv2d_bwd(&g, c.X, c.W, c.R, dW2, NULL, NULL, c.col, c.col_len);
    CHECK(memcmp(dW, dW2, wlen(&g) * sizeof(float)) == 0);
    /* A forward pass whose workspace held the whole batch leaves its im2col
     * there: backward told so (col_ready) gives the same bits without it. */
    if ((size_t)groups >= (size_t)g.n) {
        float *dX2 = malloc(xlen(&g) * sizeof(float));
        kc_conv2d_bwd(&g, c.X, c.W, c.R, dW, db, dX, c.col, c.col_len);
        kc_conv2d_fwd(&g, c.X, c.W, c.b, c.Y, c.col, c.col_len);
        kops_conv2d_t ready = g;
        ready.col_ready = 1;
        kc_conv2d_bwd(&ready, c.X, c.W, c.R, dW2, db, dX2, c.col, c.col_len);
        CHECK(memcmp(dW, dW2, wlen(&g) * sizeof(float)) == 0);
        CHECK(memcmp(dX, dX2, xlen(&g) * sizeof(float)) == 0);
        free(dX2);
    }
    free(dW2);
    free(c.X); free(c.W); free(c.b); free(c.Y); free(c.R); free(c.col);
    free(dW); free(db); free(dX); free(ref);
}

/* ---- max pooling ------------------------------------------------------- */

struct pool_case {
    kops_pool2d_t g;
    float *X, *Y, *R;
    int32_t *arg;
};

static size_t pin(const kops_pool2d_t *g)
{
    return (size_t)g->n * g->h * g->w * g->c;
}
static size_t pout(const kops_pool2d_t *g)
{
    return (size_t)g->n * g->oh * g->ow * g->c;
}

static double pool_loss(void *vc)
{
    struct pool_case *c = vc;
    kc_maxpool2d_fwd(&c->g, c->X, c->Y, c->arg);
    double s = 0;
    for (size_t i = 0; i < pout(&c->g); i++)
        s += (double)c->Y[i] * c->R[i];
    return s;
}

static void test_pool(int n, int h, int w, int c, int ph, int pw, int sh,
                      int sw)
{
    kops_pool2d_t g = { n, h, w, c, ph, pw, sh, sw, (h - ph) / sh + 1,
                        (w - pw) / sw + 1 };
    struct pool_case pc = { .g = g };
    pc.X = malloc(pin(&g) * sizeof(float));
    pc.Y = malloc(pout(&g) * sizeof(float));
    pc.R = malloc(pout(&g) * sizeof(float));
    pc.arg = malloc(pout(&g) * sizeof(int32_t));
    float *dX = malloc(pin(&g) * sizeof(float));
    /* Distinct values at least 0.02 apart, so the finite differences'
     * steps never change a window's maximum. */
    for (size_t i = 0; i < pin(&g); i++)
        pc.X[i] = (float)i * 0.05f;
    for (size_t i = pin(&g); i > 1; i--) {
        size_t j = (size_t)kc_unif(0, (double)i);
        float t = pc.X[i - 1];
        pc.X[i - 1] = pc.X[j];
        pc.X[j] = t;
    }
    kc_fill(pout(&g), pc.R, -1, 1);
    kc_maxpool2d_fwd(&g, pc.X, pc.Y, pc.arg);
    int ok = 1;
    for (int i = 0; i < n; i++)
        for (int oy = 0; oy < g.oh; oy++)
            for (int ox = 0; ox < g.ow; ox++)
                for (int ch = 0; ch < c; ch++) {
                    float best = -INFINITY;
                    for (int ky = 0; ky < ph; ky++)
                        for (int kx = 0; kx < pw; kx++) {
                            float v = pc.X[((i * h + oy * sh + ky) * w +
                                            ox * sw + kx) * c + ch];
                            best = v > best ? v : best;
                        }
                    size_t o = ((size_t)(i * g.oh + oy) * g.ow + ox) * c + ch;
                    ok &= pc.Y[o] == best && pc.X[pc.arg[o]] == best;
                }
    CHECKF(ok, "maxpool %dx%d stride %dx%d: wrong max or argmax", ph, pw, sh,
           sw);
    kc_maxpool2d_bwd(&g, pc.R, pc.arg, dX);
    kc_grad_check("maxpool dX", pin(&g), pc.X, dX, pool_loss, &pc, 5e-3);
    /* Ties: the first maximum in row-major window order wins. */
    for (size_t i = 0; i < pin(&g); i++)
        pc.X[i] = 1.0f;
    kc_maxpool2d_fwd(&g, pc.X, pc.Y, pc.arg);
    CHECK(pc.arg[0] == 0);
    free(pc.X); free(pc.Y); free(pc.R); free(pc.arg); free(dX);
}

/* The AVX-512 forward and backward (taken where the direct convolutions
 * run on AVX-512, 16k channels; the backward where the windows tile the
 * image) against the portable loops, bit for bit: values with ties, +0 and
 * -0, NaN as a window's first element and later, dY with -0 and NaN,
 * through windows that tile, overlap, leave gaps or leave strips
 * uncovered. And maxpool2d_bwd_relu against maxpool2d_bwd then relu_bwd
 * with X, on each path. */
static void test_pool_paths(int n, int h, int w, int c, int ph, int pw,
                            int sh, int sw)
{
    kops_pool2d_t g = { n, h, w, c, ph, pw, sh, sw, (h - ph) / sh + 1,
                        (w - pw) / sw + 1 };
    float *X = malloc(pin(&g) * sizeof(float));
    float *dY = malloc(pout(&g) * sizeof(float));
    float *Y[2], *dX[2], *dXr[2];
    int32_t *arg[2];
    for (int p = 0; p < 2; p++) {
        Y[p] = malloc(pout(&g) * sizeof(float));
        arg[p] = malloc(pout(&g) * sizeof(int32_t));
        dX[p] = malloc(pin(&g) * sizeof(float));
        dXr[p] = malloc(pin(&g) * sizeof(float));
    }
    const float few[] = { -1.0f, -0.0f, 0.0f, 0.5f, 2.0f, NAN };
    for (size_t i = 0; i < pin(&g); i++)
        X[i] = few[(size_t)kc_unif(0, 6) % 6];
    kc_fill(pout(&g), dY, -1, 1);
    dY[0] = -0.0f;
    dY[pout(&g) / 2] = NAN;
    int paths[2] = { KC_CONV_SCALAR, KC_CONV_AVX512 }, np = 2;
    if (kc_conv2d_force_path(KC_CONV_AVX512) != 0) {
        printf("# maxpool AVX-512: not on this CPU, the portable loops only\n");
        np = 1;
    }
    float *masked = malloc(pin(&g) * sizeof(float));
    char what[96];
    snprintf(what, sizeof what, "maxpool %dx%dx%d window %dx%d stride %dx%d",
             h, w, c, ph, pw, sh, sw);
    for (int p = 0; p < np; p++) {
        CHECK(kc_conv2d_force_path(paths[p]) == 0);
        for (size_t i = 0; i < pin(&g); i++)
            dX[p][i] = dXr[p][i] = 7.0f;          /* every input written */
        kc_maxpool2d_fwd(&g, X, Y[p], arg[p]);
        kc_maxpool2d_bwd(&g, dY, arg[p], dX[p]);
        kc_maxpool2d_bwd_relu(&g, dY, arg[p], Y[p], dXr[p]);
        kc_relu_bwd(pin(&g), X, dX[p], masked);
        CHECKF(memcmp(masked, dXr[p], pin(&g) * sizeof(float)) == 0,
               "%s, path %d: bwd_relu differs from bwd then relu_bwd", what,
               paths[p]);
    }
    kc_conv2d_force_path(KC_CONV_AUTO);
    if (np == 2)
        CHECKF(memcmp(Y[0], Y[1], pout(&g) * sizeof(float)) == 0 &&
                   memcmp(arg[0], arg[1], pout(&g) * sizeof(int32_t)) == 0 &&
                   memcmp(dX[0], dX[1], pin(&g) * sizeof(float)) == 0 &&
                   memcmp(dXr[0], dXr[1], pin(&g) * sizeof(float)) == 0,
               "%s: AVX-512 differs from the portable loops", what);
    free(X), free(dY), free(masked);
    for (int p = 0; p < 2; p++)
        free(Y[p]), free(arg[p]), free(dX[p]), free(dXr[p]);
}

/* ---- dropout and activations ------------------------------------------- */

static void test_dropout(void)
{
    enum { N = 100000 };
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    float *part = malloc(N * sizeof(float)), *dx = malloc(N * sizeof(float));
    kc_fill(N, x, 0.5, 1.5);
    const float rate = 0.3f;
    kc_dropout_fwd(N, x, y, rate, 1234, 77);
    size_t dropped = 0, wrong = 0;
    for (size_t i = 0; i < N; i++) {
        int keep = kc_dropout_keep(1234, 77 + i, rate);
        dropped += !keep;
        wrong += y[i] != x[i] * (keep ? 1.0f / (1.0f - rate) : 0.0f);
    }
    CHECKF(wrong == 0, "%zu elements not as the mask says", wrong);
    CHECKF(dropped > N * 0.29 && dropped < N * 0.31,
           "dropped %zu of %d at rate 0.3", dropped, N);
    /* Split at any point, each part given its first index: the same. */
    kc_dropout_fwd(333, x, part, rate, 1234, 77);
    kc_dropout_fwd(N - 333, x + 333, part + 333, rate, 1234, 77 + 333);
    CHECK(memcmp(part, y, N * sizeof(float)) == 0);
    /* Another seed, another mask; rate 0 keeps all. */
    kc_dropout_fwd(N, x, part, rate, 1235, 77);
    CHECK(memcmp(part, y, N * sizeof(float)) != 0);
    kc_dropout_fwd(N, x, part, 0.0f, 1234, 77);
    CHECK(memcmp(part, x, N * sizeof(float)) == 0);
    /* Backward routes through the same mask; in place works. */
    kc_dropout_bwd(N, x, dx, rate, 1234, 77);
    CHECK(memcmp(dx, y, N * sizeof(float)) == 0);
    memcpy(part, x, N * sizeof(float));
    kc_dropout_fwd(N, part, part, rate, 1234, 77);
    CHECK(memcmp(part, y, N * sizeof(float)) == 0);
    free(x); free(y); free(part); free(dx);
}

struct act_case {
    void (*fwd)(size_t, const float *, float *);
    size_t n;
    float *x, *y, *r;
};

static double act_loss(void *vc)
{
    struct act_case *c = vc;
    c->fwd(c->n, c->x, c->y);
    double s = 0;
    for (size_t i = 0; i < c->n; i++)
        s += (double)c->y[i] * c->r[i];
    return s;
}

static void test_act(const char *name,
                     void (*fwd)(size_t, const float *, float *),
                     void (*bwd)(size_t, const float *, const float *, float *),
                     double (*ref)(double))
{
    enum { N = 257 };
    struct act_case c = { fwd, N, malloc(N * 4), malloc(N * 4), malloc(N * 4) };
    float *dx = malloc(N * 4);
    kc_fill(N, c.x, -4, 4);
    kc_fill(N, c.r, -1, 1);
    fwd(N, c.x, c.y);
    double want[N];
    for (int i = 0; i < N; i++)
        want[i] = ref(c.x[i]);
    KC_CHECK_NEAR(name, N, c.y, want, 1e-6, 1e-7);
    bwd(N, c.y, c.r, dx);
    kc_grad_check(name, N, c.x, dx, act_loss, &c, 1e-3);
    /* In place, both ways (the check left y at a perturbed x). */
    fwd(N, c.x, c.y);
    bwd(N, c.y, c.r, dx);
    float *in = malloc(N * 4);
    memcpy(in, c.x, N * 4);
    fwd(N, in, in);
    CHECK(memcmp(in, c.y, N * 4) == 0);
    memcpy(in, c.r, N * 4);
    bwd(N, c.y, in, in);
    CHECK(memcmp(in, dx, N * 4) == 0);
    free(in); free(c.x); free(c.y); free(c.r); free(dx);
}

static double sigmoid_ref(double x) { return 1.0 / (1.0 + exp(-x)); }

/* The images [half, n) convolved alone give bitwise what they give inside
 * the whole batch: sgemm may round a row differently with the rows around
 * it (OpenBLAS's tail kernels on AMD Zen did), which broke max pooling's
 * ties differently on a replica than on one device. The Keras CNN's layer
 * shapes, a batch of 32 split in two. */
static void test_split_invariant(kops_conv2d_t g)
{
    int n = g.n, half = n / 2;
    float *X = malloc(xlen(&g) * sizeof *X), *W = malloc(wlen(&g) * sizeof *W);
    float *b = malloc((size_t)g.f * sizeof *b);
    float *Y = malloc(ylen(&g) * sizeof *Y), *Yh = malloc(ylen(&g) * sizeof *Yh);
    size_t col_len = kc_conv2d_col_len(&g) * (size_t)n;
    float *col = malloc(col_len * sizeof *col);
    CHECK(X && W && b && Y && Yh && col);
    kc_fill(xlen(&g), X, 0.0, 1.0);
    for (size_t i = 0; i < xlen(&g); i += 3)
        X[i] = 0.0f; /* some zeros, as after a ReLU */
    kc_fill(wlen(&g), W, -0.5, 0.5);
    kc_fill((size_t)g.f, b, -0.1, 0.1);
    kc_conv2d_fwd(&g, X, W, b, Y, col, col_len);
    kops_conv2d_t h = g;
    h.n = n - half;
    size_t in_img = (size_t)g.h * g.w * g.c, out_img = (size_t)g.oh * g.ow * g.f;
    kc_conv2d_fwd(&h, X + (size_t)half * in_img, W, b, Yh, col, col_len);
    CHECKF(memcmp(Y + (size_t)half * out_img, Yh,
                  (size_t)h.n * out_img * sizeof *Y) == 0,
           "conv2d %dx%dx%d -> %d: images %d..%d differ alone from in a "
           "batch of %d", g.h, g.w, g.c, g.f, half, n - 1, n);
    free(X), free(W), free(b), free(Y), free(Yh), free(col);
}

int main(void)
{
    kc_seed(11);
    /* valid and same, strides 1..3, non-square kernels and images, channels
     * 1 and several, one GEMM for the batch or one per image. */
    test_conv(geom(2, 7, 7, 1, 3, 3, 4, 1, 1, 0), 2);
    test_conv(geom(2, 7, 7, 1, 3, 3, 4, 1, 1, 0), 1);
    test_conv(geom(3, 6, 5, 3, 3, 3, 2, 1, 1, 1), 2);
    test_conv(geom(2, 9, 9, 2, 3, 3, 4, 2, 2, 1), 1);
    test_conv(geom(2, 8, 7, 2, 2, 3, 3, 2, 3, 0), 2);
    test_conv(geom(1, 5, 6, 3, 5, 2, 2, 3, 1, 1), 1);
    test_conv(geom(2, 4, 4, 2, 1, 1, 3, 1, 1, 0), 2);
    test_conv(geom(3, 10, 10, 1, 4, 4, 2, 3, 3, 1), 2);
    test_split_invariant(geom(32, 28, 28, 1, 3, 3, 32, 1, 1, 0));
    test_split_invariant(geom(32, 13, 13, 32, 3, 3, 64, 1, 1, 0));
    test_split_invariant(geom(32, 28, 28, 1, 3, 3, 32, 2, 2, 1));
    test_pool(2, 6, 6, 3, 2, 2, 2, 2);
    test_pool(1, 7, 5, 2, 3, 2, 2, 1);
    test_pool(2, 5, 5, 1, 2, 2, 1, 1);
    test_pool(2, 7, 6, 32, 2, 2, 2, 2);
    test_pool(1, 6, 7, 16, 3, 2, 2, 1);
    test_pool_paths(3, 26, 26, 32, 2, 2, 2, 2);
    test_pool_paths(2, 11, 11, 64, 2, 2, 2, 2);
    test_pool_paths(2, 9, 8, 16, 3, 3, 2, 2);
    test_pool_paths(2, 9, 9, 48, 2, 3, 3, 2);
    test_pool_paths(1, 5, 5, 16, 1, 1, 1, 1);
    test_pool_paths(2, 7, 6, 3, 3, 2, 2, 1);
    test_pool_paths(2, 8, 7, 16, 3, 3, 3, 3);    /* tiles, strips left */
    test_pool_paths(2, 9, 9, 32, 2, 3, 2, 3);
    test_dropout();
    test_act("tanh", kc_tanh_fwd, kc_tanh_bwd, tanh);
    test_act("sigmoid", kc_sigmoid_fwd, kc_sigmoid_bwd, sigmoid_ref);
    return CHECK_DONE();
}
