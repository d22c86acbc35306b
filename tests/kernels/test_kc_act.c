/* ReLU forward/backward: values, aliasing, gradient by finite differences. */
#include "kc_test.h"
#include "kernels_cpu.h"

#include <string.h>

enum { N = 1000 };

struct relu_case {
    size_t n;
    float *x, *y, *r;
};

static double relu_loss(void *vctx)
{
    struct relu_case *c = vctx;
    kc_relu_fwd(c->n, c->x, c->y);
    double s = 0;
    for (size_t i = 0; i < c->n; i++)
        s += (double)c->y[i] * c->r[i];
    return s;
}

static void test_values(size_t n)
{
    static float x[N], y[N], z[N], dy[N], dx[N];
    kc_fill(n, x, -1, 1);
    if (n > 2) {
        x[0] = 0.0f;
        x[1] = -0.0f;
        x[2] = NAN;
    }
    kc_relu_fwd(n, x, y);
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        if (x[i] != x[i])
            ok &= y[i] != y[i];           /* NaN propagates */
        else
            ok &= y[i] == (x[i] > 0 ? x[i] : 0.0f);
    }
    CHECKF(ok, "relu fwd n=%zu", n);

    memcpy(z, x, n * sizeof *z);           /* in place gives the same bits */
    kc_relu_fwd(n, z, z);
    CHECK(memcmp(z, y, n * sizeof *z) == 0);

    kc_fill(n, dy, -1, 1);
    kc_relu_bwd(n, y, dy, dx);
    ok = 1;
    for (size_t i = 0; i < n; i++)
        ok &= dx[i] == (y[i] > 0 ? dy[i] : 0.0f);
    CHECKF(ok, "relu bwd n=%zu", n);
    kc_relu_bwd(n, y, dy, dy);             /* dx == dy */
    CHECK(memcmp(dx, dy, n * sizeof *dx) == 0);
}

static void test_grad(void)
{
    enum { M = 257 };
    float x[M], y[M], r[M], dx[M];
    /* Keep inputs away from the kink at 0 so the step never crosses it. */
    for (size_t i = 0; i < M; i++) {
        double v = kc_unif(0.01, 1);
        x[i] = (float)(kc_unif(0, 1) < 0.5 ? -v : v);
    }
    kc_fill(M, r, -1, 1);
    struct relu_case c = { M, x, y, r };
    kc_relu_fwd(M, x, y);
    kc_relu_bwd(M, y, r, dx);
    kc_grad_check("relu dx", M, x, dx, relu_loss, &c, 1e-3);
}

int main(void)
{
    kc_seed(2);
    test_values(1);
    test_values(7);
    test_values(1000);
    test_grad();
    return CHECK_DONE();
}
