/* conv2d's paths (kernels_cpu.h): the direct ones -- scalar fmaf, AVX2,
 * AVX-512, those this CPU has -- give bitwise the same Y, dW and dX, and
 * within a tight tolerance what the im2col + GEMM path gives, over strides
 * 1..3, valid and same padding, 1x1 to 5x5 and non-square kernels, channel
 * and filter counts off the vector widths, odd sizes, batches 1..5; an
 * image's output is the same bits in a batch of 1 as in a batch of 5; the
 * workspace's size (dX's weight transposes in col or on the stack) changes
 * no bit. */
#include "kc_test.h"
#include "kernels_cpu.h"

#include <stdlib.h>
#include <string.h>

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
                          int s, int same)
{
    kops_conv2d_t g = { n, h, w, c, kh, kw, f, s, s, 0, 0, 0, 0, 0, 0 };
    g.oh = axis(h, kh, s, same, &g.pad_top);
    g.ow = axis(w, kw, s, same, &g.pad_left);
    return g;
}

struct run {
    float *Y, *dW, *db, *dX;
};

static size_t nx(const kops_conv2d_t *g) { return (size_t)g->n * g->h * g->w * g->c; }
static size_t ny(const kops_conv2d_t *g) { return (size_t)g->n * g->oh * g->ow * g->f; }
static size_t nw(const kops_conv2d_t *g) { return (size_t)g->kh * g->kw * g->c * g->f; }

static void run(const kops_conv2d_t *g, const float *X, const float *W,
                const float *b, const float *dY, size_t col_len, struct run *r)
{
    float *col = malloc(col_len * sizeof *col);
    r->Y = malloc(ny(g) * sizeof(float));
    r->dW = malloc(nw(g) * sizeof(float));
    r->db = malloc((size_t)g->f * sizeof(float));
    r->dX = malloc(nx(g) * sizeof(float));
    CHECK(col && r->Y && r->dW && r->db && r->dX);
    for (size_t i = 0; i < ny(g); i++)
        r->Y[i] = NAN;
    for (size_t i = 0; i < nx(g); i++)
        r->dX[i] = NAN;
    kc_conv2d_fwd(g, X, W, b, r->Y, col, col_len);
    kc_conv2d_bwd(g, X, W, dY, r->dW, r->db, r->dX, col, col_len);
    free(col);
}

static void done(struct run *r)
{
    free(r->Y), free(r->dW), free(r->db), free(r->dX);
}

static const char *const names[] = { "auto", "gemm", "scalar", "avx2",
                                     "avx512" };

static int same(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof *a) == 0;
}

static void test_shape(kops_conv2d_t g, int bias)
{
    char what[160];
    snprintf(what, sizeof what, "n%d %dx%dx%d k%dx%d f%d s%d pad%d,%d -> %dx%d",
             g.n, g.h, g.w, g.c, g.kh, g.kw, g.f, g.stride_h, g.pad_top,
             g.pad_left, g.oh, g.ow);
    float *X = malloc(nx(&g) * sizeof *X), *W = malloc(nw(&g) * sizeof *W);
    float *b = malloc((size_t)g.f * sizeof *b), *dY = malloc(ny(&g) * sizeof *dY);
    CHECK(X && W && b && dY);
    kc_fill(nx(&g), X, -1, 1);
    for (size_t i = 0; i < nx(&g); i += 3)
        X[i] = 0.0f;                          /* as after a ReLU */
    kc_fill(nw(&g), W, -0.5, 0.5);
    kc_fill((size_t)g.f, b, -1, 1);
    kc_fill(ny(&g), dY, -1, 1);
    const float *bp = bias ? b : NULL;
    size_t one = kc_conv2d_col_len(&g), big = one * (size_t)g.n;

    CHECK(kc_conv2d_force_path(KC_CONV_GEMM) == 0);
    struct run ref;
    run(&g, X, W, bp, dY, big, &ref);

    struct run first = { 0 };
    int have = 0;
    for (int p = KC_CONV_SCALAR; p <= KC_CONV_AVX512; p++) {
        if (kc_conv2d_force_path(p) != 0) {
            printf("  %s: not on this CPU\n", names[p]);
            continue;
        }
        if (kc_conv2d_path(&g) == KC_CONV_GEMM)
            break;                            /* a shape for GEMM only */
        struct run r, small;
        run(&g, X, W, bp, dY, big, &r);
        run(&g, X, W, bp, dY, one, &small);   /* dX's transposes on the stack */
        CHECKF(same(r.Y, small.Y, ny(&g)) && same(r.dW, small.dW, nw(&g)) &&
               same(r.dX, small.dX, nx(&g)) && same(r.db, small.db, (size_t)g.f),
               "%s %s: the workspace's size changed bits", names[p], what);
        done(&small);
        KC_CHECK_NEAR(what, ny(&g), r.Y, ref.Y, 1e-4, 1e-5);
        KC_CHECK_NEAR(what, nw(&g), r.dW, ref.dW, 1e-4, 1e-4);
        KC_CHECK_NEAR(what, nx(&g), r.dX, ref.dX, 1e-4, 1e-5);
        CHECK(same(r.db, ref.db, (size_t)g.f));
        /* An image alone: the same bits as in the batch (the last one). */
        kops_conv2d_t g1 = g;
        g1.n = 1;
        size_t in1 = nx(&g1), out1 = ny(&g1);
        float *col = malloc(one * sizeof *col), *y1 = malloc(out1 * sizeof *y1);
        CHECK(col && y1);
        kc_conv2d_fwd(&g1, X + (size_t)(g.n - 1) * in1, W, bp, y1, col, one);
        CHECKF(same(y1, r.Y + (size_t)(g.n - 1) * out1, out1),
               "%s %s: an image alone differs from in its batch", names[p], what);
        free(col), free(y1);
        if (!have) {
            first = r;
            have = 1;
            printf("  %s %s: matches gemm\n", names[p], what);
            continue;
        }
        CHECKF(same(r.Y, first.Y, ny(&g)), "%s %s: Y differs from scalar",
               names[p], what);
        CHECKF(same(r.dW, first.dW, nw(&g)), "%s %s: dW differs from scalar",
               names[p], what);
        CHECKF(same(r.dX, first.dX, nx(&g)), "%s %s: dX differs from scalar",
               names[p], what);
        printf("  %s: bitwise as scalar\n", names[p]);
        done(&r);
    }
    if (have)
        done(&first);
    done(&ref);
    kc_conv2d_force_path(KC_CONV_AUTO);
    free(X), free(W), free(b), free(dY);
}

/* g.relu: on every path the forward's output is the unfused output through
 * kc_relu_fwd, bit for bit (negatives, zeros and a NaN input included). */
static void test_relu(kops_conv2d_t g)
{
    float *X = malloc(nx(&g) * sizeof *X), *W = malloc(nw(&g) * sizeof *W);
    float *b = malloc((size_t)g.f * sizeof *b);
    float *Y = malloc(ny(&g) * sizeof *Y), *Yr = malloc(ny(&g) * sizeof *Yr);
    size_t len = kc_conv2d_col_len(&g) * (size_t)g.n;
    float *col = malloc(len * sizeof *col);
    CHECK(X && W && b && Y && Yr && col);
    kc_fill(nx(&g), X, -1, 1);
    kc_fill(nw(&g), W, -0.5, 0.5);
    kc_fill((size_t)g.f, b, -1, 1);
    X[nx(&g) / 2] = NAN;                  /* relu keeps NaN (x < 0 ? 0 : x) */
    for (int p = KC_CONV_GEMM; p <= KC_CONV_AVX512; p++) {
        if (kc_conv2d_force_path(p) != 0)
            continue;
        kops_conv2d_t gr = g;
        gr.relu = 1;
        kc_conv2d_fwd(&g, X, W, b, Y, col, len);
        kc_relu_fwd(ny(&g), Y, Y);
        kc_conv2d_fwd(&gr, X, W, b, Yr, col, len);
        int neg = 0;
        for (size_t i = 0; i < ny(&g); i++)
            neg |= Yr[i] < 0;
        CHECKF(same(Y, Yr, ny(&g)) && !neg, "%s: fused relu differs",
               names[p]);
    }
    kc_conv2d_force_path(KC_CONV_AUTO);
    free(X), free(W), free(b), free(Y), free(Yr), free(col);
}

/* kc_conv2d_bwd_relu on every path: the same bits as kc_relu_bias_grad
 * then kc_conv2d_bwd on that path (dY masked in place, db, dW, dX), with
 * and without db and dX. The seeds' conv2 with 5 images runs in groups of
 * 2, 2, 1 (KC_BWD_GROUP_BYTES): db's sums and dW's chains cross them. */
static void test_bwd_relu(kops_conv2d_t g)
{
    size_t len = kc_conv2d_col_len(&g) * (size_t)(g.n > 0 ? g.n : 1);
    size_t F = (size_t)g.f;
    float *X = malloc(nx(&g) * sizeof *X), *W = malloc(nw(&g) * sizeof *W);
    float *Y = malloc(ny(&g) * sizeof *Y), *dY = malloc(ny(&g) * sizeof *dY);
    float *d1 = malloc(ny(&g) * sizeof *d1), *d2 = malloc(ny(&g) * sizeof *d2);
    float *dW1 = malloc(nw(&g) * sizeof *dW1), *dW2 = malloc(nw(&g) * sizeof *dW2);
    float *dX1 = malloc(nx(&g) * sizeof *dX1), *dX2 = malloc(nx(&g) * sizeof *dX2);
    float *db1 = malloc(F * sizeof *db1), *db2 = malloc(F * sizeof *db2);
    float *col = malloc(len * sizeof *col);
    CHECK(X && W && Y && dY && d1 && d2 && dW1 && dW2 && dX1 && dX2 && db1 &&
          db2 && col);
    kc_fill(nx(&g), X, -1, 1);
    kc_fill(nw(&g), W, -0.5, 0.5);
    kc_fill(ny(&g), Y, -1, 1);
    kc_relu_fwd(ny(&g), Y, Y);               /* a relu's output: half zero */
    kc_fill(ny(&g), dY, -1, 1);
    for (int p = KC_CONV_GEMM; p <= KC_CONV_AVX512; p++) {
        if (kc_conv2d_force_path(p) != 0)
            continue;
        for (int v = 0; v < 3; v++) {        /* all; db NULL; dX NULL */
            float *b1 = v == 1 ? NULL : db1, *b2 = v == 1 ? NULL : db2;
            float *x1 = v == 2 ? NULL : dX1, *x2 = v == 2 ? NULL : dX2;
            memcpy(d1, dY, ny(&g) * sizeof *d1);
            memcpy(d2, dY, ny(&g) * sizeof *d2);
            for (size_t i = 0; i < F; i++)
                db1[i] = db2[i] = NAN;
            kc_relu_bias_grad(g.n * g.oh * g.ow, g.f, Y, d1, b1);
            kc_conv2d_bwd(&g, X, W, d1, dW1, NULL, x1, col, len);
            kc_conv2d_bwd_relu(&g, X, W, Y, d2, dW2, b2, x2, col, len);
            CHECKF(same(d1, d2, ny(&g)) && same(db1, db2, F) &&
                   same(dW1, dW2, nw(&g)) && (v == 2 || same(dX1, dX2, nx(&g))),
                   "%s n%d %dx%dx%d f%d s%d (variant %d): bwd_relu differs "
                   "from relu_bias_grad + bwd", names[p], g.n, g.h, g.w, g.c,
                   g.f, g.stride_h, v);
        }
    }
    kc_conv2d_force_path(KC_CONV_AUTO);
    free(X), free(W), free(Y), free(dY), free(d1), free(d2), free(dW1);
    free(dW2), free(dX1), free(dX2), free(db1), free(db2), free(col);
}

/* kc_conv2d_bwd_pooled on every path: the same bits as
 * maxpool2d_bwd_relu (per forward call of `rows` images) then conv2d_bwd,
 * dY included, with and without dX; the pooling's forward ran `rows`
 * images a call, as the model's pairs do (argmax counts from each call's
 * first image). */
static void test_bwd_pooled(kops_conv2d_t g, int p, int stride, int rows)
{
    kops_pool2d_t pg = { g.n, g.oh, g.ow, g.f, p, p, stride, stride,
                         (g.oh - p) / stride + 1, (g.ow - p) / stride + 1 };
    size_t len = kc_conv2d_col_len(&g) * (size_t)(g.n > 0 ? g.n : 1);
    size_t F = (size_t)g.f, pimg = (size_t)pg.oh * pg.ow * pg.c;
    size_t yimg = (size_t)g.oh * g.ow * F, np = pimg * (size_t)g.n;
    float *X = malloc(nx(&g) * sizeof *X), *W = malloc(nw(&g) * sizeof *W);
    float *b = malloc(F * sizeof *b), *Y = malloc(ny(&g) * sizeof *Y);
    float *P = malloc(np * sizeof *P), *dP = malloc(np * sizeof *dP);
    int32_t *arg = malloc(np * sizeof *arg);
    float *d1 = malloc(ny(&g) * sizeof *d1), *d2 = malloc(ny(&g) * sizeof *d2);
    float *dW1 = malloc(nw(&g) * sizeof *dW1), *dW2 = malloc(nw(&g) * sizeof *dW2);
    float *dX1 = malloc(nx(&g) * sizeof *dX1), *dX2 = malloc(nx(&g) * sizeof *dX2);
    float *db1 = malloc(F * sizeof *db1), *db2 = malloc(F * sizeof *db2);
    float *col = malloc(len * sizeof *col);
    CHECK(X && W && b && Y && P && dP && arg && d1 && d2 && dW1 && dW2 &&
          dX1 && dX2 && db1 && db2 && col);
    kc_fill(nx(&g), X, -1, 1);
    kc_fill(nw(&g), W, -0.5, 0.5);
    kc_fill(F, b, -0.2, 0.2);
    kc_fill(np, dP, -1, 1);
    kops_conv2d_t gr = g;
    gr.relu = 1;
    kc_conv2d_fwd(&gr, X, W, b, Y, col, len);          /* a relu's output */
    for (int r0 = 0; r0 < g.n; r0 += rows) {
        kops_pool2d_t part = pg;
        part.n = g.n - r0 < rows ? g.n - r0 : rows;
        kc_maxpool2d_fwd(&part, Y + (size_t)r0 * yimg, P + (size_t)r0 * pimg,
                         arg + (size_t)r0 * pimg);
    }
    for (int path = KC_CONV_GEMM; path <= KC_CONV_AVX512; path++) {
        if (kc_conv2d_force_path(path) != 0)
            continue;
        for (int v = 0; v < 2; v++) {                 /* with dX; without */
            float *x1 = v ? NULL : dX1, *x2 = v ? NULL : dX2;
            for (int r0 = 0; r0 < g.n; r0 += rows) {
                kops_pool2d_t part = pg;
                part.n = g.n - r0 < rows ? g.n - r0 : rows;
                kc_maxpool2d_bwd_relu(&part, dP + (size_t)r0 * pimg,
                                      arg + (size_t)r0 * pimg,
                                      P + (size_t)r0 * pimg,
                                      d1 + (size_t)r0 * yimg);
            }
            kc_conv2d_bwd(&g, X, W, d1, dW1, db1, x1, col, len);
            for (size_t i = 0; i < ny(&g); i++)
                d2[i] = NAN;
            kc_conv2d_bwd_pooled(&g, &pg, rows, dP, arg, P, X, W, d2, dW2,
                                 db2, x2, col, len);
            CHECKF(same(d1, d2, ny(&g)) && same(db1, db2, F) &&
                   same(dW1, dW2, nw(&g)) && (v || same(dX1, dX2, nx(&g))),
                   "%s n%d %dx%dx%d f%d pool %d/%d, %d a call (variant %d): "
                   "bwd_pooled differs from the pooling's then conv2d's",
                   names[path], g.n, g.h, g.w, g.c, g.f, p, stride, rows, v);
        }
    }
    kc_conv2d_force_path(KC_CONV_AUTO);
    free(X), free(W), free(b), free(Y), free(P), free(dP), free(arg);
    free(d1), free(d2), free(dW1), free(dW2), free(dX1), free(dX2);
    free(db1), free(db2), free(col);
}

int main(void)
{
    kc_seed(27);
    test_bwd_pooled(geom(5, 28, 28, 1, 3, 3, 32, 1, 0), 2, 2, 2);  /* Keras */
    test_bwd_pooled(geom(7, 13, 13, 32, 3, 3, 64, 1, 0), 2, 2, 3);
    test_bwd_pooled(geom(4, 12, 11, 5, 3, 2, 9, 1, 1), 3, 2, 4);   /* overlap */
    test_bwd_pooled(geom(0, 8, 8, 4, 3, 3, 8, 1, 0), 2, 2, 1);     /* none */
    test_relu(geom(3, 14, 14, 16, 3, 3, 32, 1, 0));
    test_relu(geom(2, 9, 11, 3, 5, 5, 7, 2, 1));
    test_bwd_relu(geom(5, 26, 26, 32, 3, 3, 64, 1, 0));   /* groups 2, 2, 1 */
    test_bwd_relu(geom(3, 28, 28, 1, 3, 3, 32, 1, 0));    /* conv1: across */
    test_bwd_relu(geom(4, 14, 14, 16, 3, 3, 32, 1, 1));   /* gather */
    test_bwd_relu(geom(3, 13, 10, 17, 3, 3, 33, 2, 0));   /* scatter dX */
    test_bwd_relu(geom(0, 8, 8, 4, 3, 3, 8, 1, 0));       /* no images */
    /* n h w c kh kw f stride same */
    test_shape(geom(1, 7, 7, 1, 3, 3, 16, 1, 1), 1);
    test_shape(geom(2, 28, 28, 1, 3, 3, 32, 1, 0), 1);
    test_shape(geom(5, 14, 14, 16, 3, 3, 16, 1, 1), 1);
    test_shape(geom(3, 14, 14, 16, 3, 3, 32, 2, 1), 1);
    test_shape(geom(2, 14, 14, 16, 1, 1, 32, 2, 1), 1);
    test_shape(geom(2, 7, 7, 64, 3, 3, 64, 1, 1), 0);
    test_shape(geom(4, 9, 11, 3, 5, 5, 7, 1, 1), 1);
    test_shape(geom(3, 13, 10, 17, 3, 3, 33, 2, 0), 1);
    test_shape(geom(2, 12, 9, 20, 5, 3, 50, 3, 1), 1);
    test_shape(geom(5, 6, 5, 5, 2, 3, 9, 3, 0), 0);
    test_shape(geom(1, 5, 5, 40, 1, 1, 24, 1, 0), 1);
    test_shape(geom(2, 8, 8, 9, 4, 4, 70, 2, 1), 1);
    test_shape(geom(1, 9, 9, 3, 3, 3, 300, 1, 1), 1);   /* GEMM (f > 256) */
    test_shape(geom(2, 16, 16, 2, 1, 1, 5, 2, 0), 1);
    /* dW with X's channels as the lanes (conv_direct.c's dw_vec_swapped:
     * AVX-512 where C is 32, AVX2 where it is 16; the 14x14x16 ones above)
     * -- the seeds' conv2 (5 images: the backward's groups of 2, 2, 1),
     * and stride 2 with padding */
    test_shape(geom(5, 26, 26, 32, 3, 3, 64, 1, 0), 1);
    test_shape(geom(3, 15, 13, 32, 3, 3, 48, 2, 1), 0);
    return CHECK_DONE();
}
