/* avgpool2d kernels (NHWC, 'valid' windows): forward against a naive
 * double loop and, bit for bit, against a naive float loop that adds the
 * taps in row-major window order and divides once (the order the CUDA twin
 * follows, so CPU and GPU agree to the bit); backward against a naive
 * scatter and against central finite differences; every input overwritten
 * (0 where no window reaches); an image's output the same bits whatever
 * batch it is in; empty batches touch nothing. */
#include "kc_test.h"
#include "kernels_cpu.h"

#include <stdlib.h>
#include <string.h>

typedef struct pool_case {
    kops_pool2d_t g;
    float *X, *Y, *R;
} pool_case_t;

static size_t pin(const kops_pool2d_t *g)
{
    return (size_t)g->n * g->h * g->w * g->c;
}
static size_t pout(const kops_pool2d_t *g)
{
    return (size_t)g->n * g->oh * g->ow * g->c;
}
static size_t at_x(const kops_pool2d_t *g, int i, int y, int x, int ch)
{
    return (((size_t)i * g->h + y) * g->w + x) * g->c + ch;
}
static size_t at_y(const kops_pool2d_t *g, int i, int oy, int ox, int ch)
{
    return (((size_t)i * g->oh + oy) * g->ow + ox) * g->c + ch;
}

/* sum(R * avgpool(X)): linear in X, so central differences are exact up
 * to rounding. */
static double pool_loss(void *vc)
{
    pool_case_t *c = vc;
    kc_avgpool2d_fwd(&c->g, c->X, c->Y);
    double s = 0;
    for (size_t i = 0; i < pout(&c->g); i++)
        s += (double)c->Y[i] * c->R[i];
    return s;
}

static void test_avgpool(int n, int h, int w, int c, int ph, int pw, int sh,
                         int sw)
{
    kops_pool2d_t g = { n, h, w, c, ph, pw, sh, sw, (h - ph) / sh + 1,
                        (w - pw) / sw + 1 };
    pool_case_t pc = { .g = g };
    size_t nx = pin(&g), ny = pout(&g);
    pc.X = malloc(nx * sizeof(float));
    pc.Y = malloc(ny * sizeof(float));
    pc.R = malloc(ny * sizeof(float));
    float *dX = malloc(nx * sizeof(float));
    double *ref = calloc(nx > ny ? nx : ny, sizeof(double));
    kc_fill(nx, pc.X, -1, 1);
    kc_fill(ny, pc.R, -1, 1);
    kc_avgpool2d_fwd(&g, pc.X, pc.Y);

    float count = (float)ph * (float)pw;
    int near = 1, bits = 1;
    for (int i = 0; i < n; i++)
        for (int oy = 0; oy < g.oh; oy++)
            for (int ox = 0; ox < g.ow; ox++)
                for (int ch = 0; ch < c; ch++) {
                    double sum = 0;
                    float fsum = 0;
                    for (int ky = 0; ky < ph; ky++)
                        for (int kx = 0; kx < pw; kx++) {
                            float v = pc.X[at_x(&g, i, oy * sh + ky,
                                                ox * sw + kx, ch)];
                            sum += v;
                            fsum = ky || kx ? fsum + v : v;
                        }
                    float y = pc.Y[at_y(&g, i, oy, ox, ch)];
                    near &= kc_close(y, sum / (ph * pw), 1e-5, 1e-6);
                    float want = fsum / count;
                    bits &= memcmp(&y, &want, sizeof y) == 0;
                }
    CHECKF(near, "avgpool n%d %dx%dx%d p%dx%d s%dx%d: forward off the "
           "double reference", n, h, w, c, ph, pw, sh, sw);
    CHECKF(bits, "avgpool n%d %dx%dx%d p%dx%d s%dx%d: forward not the bits "
           "of the row-major sum / count", n, h, w, c, ph, pw, sh, sw);

    /* Backward: dX is overwritten (NaN before), every input's share. */
    for (size_t i = 0; i < nx; i++)
        dX[i] = NAN;
    kc_avgpool2d_bwd(&g, pc.R, dX);
    memset(ref, 0, nx * sizeof *ref);
    for (int i = 0; i < n; i++)
        for (int oy = 0; oy < g.oh; oy++)
            for (int ox = 0; ox < g.ow; ox++)
                for (int ch = 0; ch < c; ch++)
                    for (int ky = 0; ky < ph; ky++)
                        for (int kx = 0; kx < pw; kx++)
                            ref[at_x(&g, i, oy * sh + ky, ox * sw + kx, ch)] +=
                                pc.R[at_y(&g, i, oy, ox, ch)] / (ph * pw);
    /* NaN left anywhere, or a gap's input not 0, fails here too. */
    int ok = 1;
    for (size_t i = 0; i < nx; i++)
        ok &= kc_close(dX[i], ref[i], 1e-5, 1e-6);
    CHECKF(ok, "avgpool n%d %dx%dx%d p%dx%d s%dx%d: backward off the naive "
           "scatter", n, h, w, c, ph, pw, sh, sw);
    kc_grad_check("avgpool dX", nx, pc.X, dX, pool_loss, &pc, 1e-2);

    /* The last image alone gives the bits it had in the batch. */
    if (n > 1) {
        kops_pool2d_t one = g;
        one.n = 1;
        size_t img_x = nx / (size_t)n, img_y = ny / (size_t)n;
        float *Y1 = malloc(img_y * sizeof(float));
        kc_avgpool2d_fwd(&g, pc.X, pc.Y); /* the grad check left it moved */
        kc_avgpool2d_fwd(&one, pc.X + (size_t)(n - 1) * img_x, Y1);
        CHECKF(memcmp(Y1, pc.Y + (size_t)(n - 1) * img_y,
                      img_y * sizeof(float)) == 0,
               "avgpool: an image alone differs from the batch");
        free(Y1);
    }
    free(pc.X); free(pc.Y); free(pc.R); free(dX); free(ref);
}

/* n = 0: nothing read or written. */
static void test_empty(void)
{
    kops_pool2d_t g = { 0, 4, 4, 3, 2, 2, 2, 2, 2, 2 };
    float guard = 7.0f;
    kc_avgpool2d_fwd(&g, NULL, &guard);
    kc_avgpool2d_bwd(&g, NULL, &guard);
    CHECK(guard == 7.0f);
}

int main(void)
{
    /* n, h, w, c, ph, pw, stride_h, stride_w */
    static const int cases[][8] = {
        { 1, 1, 1, 1, 1, 1, 1, 1 },
        { 2, 6, 6, 3, 2, 2, 2, 2 },     /* Keras's default: stride = pool */
        { 2, 7, 5, 2, 3, 2, 2, 1 },     /* overlapping, odd edges left   */
        { 2, 5, 5, 1, 2, 2, 1, 1 },
        { 1, 9, 8, 3, 2, 3, 3, 4 },     /* gaps: stride > pool           */
        { 3, 6, 6, 1, 6, 6, 1, 1 },     /* global average                */
        { 2, 7, 5, 8, 7, 5, 7, 5 },     /* global_avgpool2d's geometry   */
        { 2, 4, 4, 37, 2, 2, 2, 2 },    /* vector blocks and a tail      */
        { 4, 8, 8, 16, 3, 3, 2, 2 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const int *v = cases[i];
        test_avgpool(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
    }
    test_empty();
    return CHECK_DONE();
}
