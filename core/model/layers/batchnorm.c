/* batchnorm [momentum=M] [epsilon=E] [sync=true|false]: Keras's
 * BatchNormalization on the last axis (an image's channels, a flat layer's
 * features). Training normalises with the batch's mean and variance --
 * this replica's batch, or with sync = true the global batch across the
 * replicas and workers (SyncBatchNorm) -- and moves the moving statistics
 * towards the global batch's; inference normalises with the moving ones.
 * Variables gamma (1) and beta (0); state moving_mean (0) and
 * moving_variance (1). */
#include <stdio.h>
#include <string.h>

#include "layer.h"
#include "strata/errno.h"

static int bn_parse(strata__layer_t *l, char *const *w, int n, char *why,
                    size_t len)
{
    double momentum = 0.99, eps = 1e-3;
    l->sync = 0;
    for (int i = 0; i < n; i++) {
        const char *v;
        if ((v = strata__layer_opt(w[i], "momentum"))) {
            if (strata__layer_float(v, 0.0, 1.0, &momentum) != 0 ||
                momentum >= 1.0) {
                snprintf(why, len, "momentum '%s': expected a number in "
                         "[0, 1)", v);
                return -1;
            }
        } else if ((v = strata__layer_opt(w[i], "epsilon"))) {
            if (strata__layer_float(v, 1e-12, 1.0, &eps) != 0) {
                snprintf(why, len, "epsilon '%s': expected a number in "
                         "[1e-12, 1]", v);
                return -1;
            }
        } else if ((v = strata__layer_opt(w[i], "sync"))) {
            if (strcmp(v, "true") && strcmp(v, "false")) {
                snprintf(why, len, "sync '%s': expected true or false", v);
                return -1;
            }
            l->sync = !strcmp(v, "true");
        } else {
            snprintf(why, len, "'%s': expected momentum=M, epsilon=E or "
                     "sync=true|false", w[i]);
            return -1;
        }
    }
    l->momentum = (float)momentum;
    l->epsilon = (float)eps;
    return 0;
}

static int bn_infer(strata__layer_t *l, char *why, size_t len)
{
    (void)why;
    (void)len;
    l->out = l->in;
    return 0;
}

static int bn_shape(const strata__layer_t *l, int64_t *dims, size_t *bias,
                    double *fan_in, double *fan_out)
{
    dims[0] = l->in.c;
    *bias = (size_t)l->in.c;
    *fan_in = *fan_out = (double)l->in.c;
    return 1;
}

static void bn_init(const strata__layer_t *l, float *gamma, size_t ng,
                    float *beta, size_t nb)
{
    (void)l;
    for (size_t i = 0; i < ng; i++)
        gamma[i] = 1.0f;
    memset(beta, 0, nb * sizeof *beta);
}

/* The scratch: this replica's sums, the global sums, the backward sums
 * (2c doubles each), then the mean and 1/std the pass normalised with. */
typedef struct bn_aux {
    double *local, *global, *back;
    float  *mean, *invstd;
} bn_aux_t;

static bn_aux_t aux_of(const strata__layer_t *l, void *aux)
{
    size_t c = (size_t)l->in.c;
    double *d = aux;
    float *f = (float *)(d + 6 * c);
    return (bn_aux_t){ d, d + 2 * c, d + 4 * c, f, f + c };
}

static size_t bn_aux_bytes(const strata__layer_t *l, int rows)
{
    (void)rows;
    return 6 * (size_t)l->in.c * sizeof(double) +
           2 * (size_t)l->in.c * sizeof(float);
}

/* Positions normalised together: the rows times an image's pixels. */
static size_t positions(const strata__layer_t *l, const strata__pass_t *p)
{
    return (size_t)p->rows * (size_t)l->in.h * (size_t)l->in.w;
}

static int bn_forward(const strata__layer_t *l, const strata__pass_t *p)
{
    strata__kdev_t *k = p->k;
    const strata__kops_t *o = k->ops;
    int c = l->in.c;
    size_t rows = positions(l, p);
    bn_aux_t a = aux_of(l, p->aux);
    float *mov_mean = p->state[0], *mov_var = p->state[1];
    const float *gamma = p->W, *beta = p->b;
    int rc = STRATA_OK;
    if (!p->training) {
        rc = o->bn_stats(k, c, NULL, 0.0, l->epsilon, l->momentum, a.mean,
                         a.invstd, mov_mean, mov_var);
        return rc == STRATA_OK ? o->bn_norm(k, rows, c, p->x, a.mean,
                                            a.invstd, gamma, beta, p->y)
                               : rc;
    }
    double local = (double)rows, global = local;
    rc = o->bn_sums(k, rows, c, p->x, a.local);
    /* The moving statistics follow the global batch on every replica (the
     * same bits on all); sync normalises with it too. */
    if (rc == STRATA_OK && p->sum_replicas) {
        rc = o->copy(k, STRATA__D2D, a.global, a.local,
                     2 * (size_t)c * sizeof(double));
        if (rc == STRATA_OK)
            rc = p->sum_replicas(p->sum_arg, a.global, 2 * (size_t)c,
                                 &global);
    }
    const double *sums = p->sum_replicas ? a.global : a.local;
    if (rc == STRATA_OK)
        rc = o->bn_stats(k, c, sums, global, l->epsilon, l->momentum, a.mean,
                         a.invstd, mov_mean, mov_var);
    if (rc == STRATA_OK && p->sum_replicas && !l->sync)
        rc = o->bn_stats(k, c, a.local, local, l->epsilon, l->momentum,
                         a.mean, a.invstd, NULL, NULL);
    if (rc == STRATA_OK)
        rc = o->bn_norm(k, rows, c, p->x, a.mean, a.invstd, gamma, beta,
                        p->y);
    return rc;
}

static int bn_backward(const strata__layer_t *l, const strata__pass_t *p)
{
    strata__kdev_t *k = p->k;
    const strata__kops_t *o = k->ops;
    int c = l->in.c;
    size_t rows = positions(l, p);
    bn_aux_t a = aux_of(l, p->aux);
    double count = (double)rows;
    int rc = o->bn_bwd_sums(k, rows, c, p->x, p->dy, a.mean, a.invstd,
                            a.back, p->dW, p->db);
    /* Synchronised, the gradient flows through the global statistics: the
     * sums of every replica's rows. */
    if (rc == STRATA_OK && l->sync && p->sum_replicas)
        rc = p->sum_replicas(p->sum_arg, a.back, 2 * (size_t)c, &count);
    if (rc == STRATA_OK && p->dx)
        rc = o->bn_bwd_dx(k, rows, c, p->x, p->dy, a.mean, a.invstd, p->W,
                          a.back, count, p->dx);
    return rc;
}

const strata__layer_kind_t strata__layer_batchnorm = {
    .name = "batchnorm",
    .usage = "batchnorm [momentum=M] [epsilon=E] [sync=true|false]",
    .nvars = 2, .var_names = { "gamma", "beta" },
    .nstate = 2, .state_names = { "moving_mean", "moving_variance" },
    .state_fill = { 0.0f, 1.0f },
    .parse = bn_parse, .infer = bn_infer, .kernel_shape = bn_shape,
    .init = bn_init, .aux_bytes = bn_aux_bytes,
    .forward = bn_forward, .backward = bn_backward,
};
