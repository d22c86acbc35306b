/* A whole tiny MLP (dense -> relu -> dense -> softmax-xent) chained through
 * the kernels the way the model runs them (dlogits in place over logits,
 * relu_bwd in place, dX skipped for the input layer), every parameter's
 * gradient checked against central finite differences of the mean loss. */
#include "kc_test.h"
#include "kernels_cpu.h"

#include <string.h>

enum { M = 4, K = 6, H = 5, C = 3 };

struct mlp {
    float X[M * K], W1[K * H], b1[H], W2[H * C], b2[C];
    float A[M * H], Z[M * C];         /* activations, logits */
    int32_t y[M];
};

static double mlp_fwd(struct mlp *n)
{
    kc_dense_fwd(M, K, H, n->X, n->W1, n->b1, n->A);
    kc_relu_fwd((size_t)M * H, n->A, n->A);
    kc_dense_fwd(M, H, C, n->A, n->W2, n->b2, n->Z);
    return kc_softmax_xent(M, C, n->Z, n->y, NULL, 0, NULL) / M;
}

static double mlp_loss(void *ctx) { return mlp_fwd(ctx); }

/* Smallest |pre-activation| of the hidden layer: the finite-difference
 * steps must not cross ReLU's kink. */
static double min_margin(const struct mlp *n)
{
    float pre[M * H];
    kc_dense_fwd(M, K, H, n->X, n->W1, n->b1, pre);
    double mn = 1e30;
    for (int i = 0; i < M * H; i++)
        mn = fabs(pre[i]) < mn ? fabs(pre[i]) : mn;
    return mn;
}

int main(void)
{
    static struct mlp n;
    kc_seed(6);
    kc_fill(M * K, n.X, -1, 1);
    kc_fill(K * H, n.W1, -1, 1);
    kc_fill(H * C, n.W2, -1, 1);
    kc_fill(C, n.b2, -0.5, 0.5);
    for (int i = 0; i < M; i++)
        n.y[i] = i % C;
    int tries = 0;
    do
        kc_fill(H, n.b1, -0.5, 0.5);
    while (min_margin(&n) < 0.05 && ++tries < 1000);
    CHECK(tries < 1000);

    float dZ[M * C], dA[M * H], dW1[K * H], db1[H], dW2[H * C], db2[C], dX[M * K];
    double loss = mlp_fwd(&n);
    CHECK(isfinite(loss) && loss > 0);

    /* Backward; Z is turned into dlogits in place. */
    memcpy(dZ, n.Z, sizeof dZ);
    double l2 = kc_softmax_xent(M, C, dZ, n.y, dZ, 1.0f / M, NULL) / M;
    CHECK(l2 == loss);
    kc_dense_bwd(M, H, C, n.A, n.W2, dZ, dW2, db2, dA);
    kc_relu_bwd((size_t)M * H, n.A, dA, dA);
    kc_dense_bwd(M, K, H, n.X, n.W1, dA, dW1, db1, NULL);
    float dW1b[K * H], db1b[H];
    kc_dense_bwd(M, K, H, n.X, n.W1, dA, dW1b, db1b, dX);
    CHECK(memcmp(dW1, dW1b, sizeof dW1) == 0 && memcmp(db1, db1b, sizeof db1) == 0);

    kc_grad_check("mlp dW2", H * C, n.W2, dW2, mlp_loss, &n, 1e-3);
    kc_grad_check("mlp db2", C, n.b2, db2, mlp_loss, &n, 1e-3);
    kc_grad_check("mlp dW1", K * H, n.W1, dW1, mlp_loss, &n, 1e-3);
    kc_grad_check("mlp db1", H, n.b1, db1, mlp_loss, &n, 1e-3);
    kc_grad_check("mlp dX", M * K, n.X, dX, mlp_loss, &n, 1e-3);

    /* Sanity on what the check can see: a few SGD steps lower the loss. */
    for (int s = 0; s < 20; s++) {
        mlp_fwd(&n);
        memcpy(dZ, n.Z, sizeof dZ);
        kc_softmax_xent(M, C, dZ, n.y, dZ, 1.0f / M, NULL);
        kc_dense_bwd(M, H, C, n.A, n.W2, dZ, dW2, db2, dA);
        kc_relu_bwd((size_t)M * H, n.A, dA, dA);
        kc_dense_bwd(M, K, H, n.X, n.W1, dA, dW1, db1, NULL);
        kc_sgd(K * H, n.W1, dW1, 0.1f, 0.0f);
        kc_sgd(H, n.b1, db1, 0.1f, 0.0f);
        kc_sgd(H * C, n.W2, dW2, 0.1f, 0.0f);
        kc_sgd(C, n.b2, db2, 0.1f, 0.0f);
    }
    double after = mlp_fwd(&n);
    CHECKF(after < loss, "loss %g -> %g after 20 SGD steps", loss, after);
    return CHECK_DONE();
}
