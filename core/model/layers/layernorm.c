/* layernorm [epsilon=E]: Keras's LayerNormalization with its default
 * axis=-1: each position is normalised over its last axis (an image's
 * channels at each pixel, a flat layer's features) with its own mean and
 * biased variance, then scaled by gamma (1) and shifted by beta (0), both
 * of c. Each sample on its own: no batch statistics, no state, training
 * and evaluation alike. */
#include <stdio.h>
#include <string.h>

#include "layer.h"

static int ln_parse(strata__layer_t *l, char *const *w, int n, char *why,
                    size_t len)
{
    double eps = 1e-3;
    for (int i = 0; i < n; i++) {
        const char *v = strata__layer_opt(w[i], "epsilon");
        if (!v) {
            snprintf(why, len, "'%s': expected epsilon=E", w[i]);
            return -1;
        }
        if (strata__layer_float(v, 1e-12, 1.0, &eps) != 0) {
            snprintf(why, len, "epsilon '%s': expected a number in "
                     "[1e-12, 1]", v);
            return -1;
        }
    }
    l->epsilon = (float)eps;
    return 0;
}

static int ln_infer(strata__layer_t *l, char *why, size_t len)
{
    (void)why;
    (void)len;
    l->out = l->in;
    return 0;
}

static int ln_shape(const strata__layer_t *l, int64_t *dims, size_t *bias,
                    double *fan_in, double *fan_out)
{
    dims[0] = l->in.c;
    *bias = (size_t)l->in.c;
    *fan_in = *fan_out = (double)l->in.c;
    return 1;
}

static void ln_init(const strata__layer_t *l, float *gamma, size_t ng,
                    float *beta, size_t nb)
{
    (void)l;
    for (size_t i = 0; i < ng; i++)
        gamma[i] = 1.0f;
    memset(beta, 0, nb * sizeof *beta);
}

/* Positions normalised one by one: the rows times an image's pixels. */
static size_t positions(const strata__layer_t *l, int rows)
{
    return (size_t)rows * (size_t)l->in.h * (size_t)l->in.w;
}

/* The scratch: each position's mean, then its 1/std, for the backward. */
static size_t ln_aux_bytes(const strata__layer_t *l, int rows)
{
    return 2 * positions(l, rows) * sizeof(float);
}

static int ln_forward(const strata__layer_t *l, const strata__pass_t *p)
{
    size_t rows = positions(l, p->rows);
    float *mean = p->aux, *invstd = mean + rows;
    return p->k->ops->ln_fwd(p->k, rows, l->in.c, p->x, p->W, p->b,
                             l->epsilon, p->y, mean, invstd);
}

static int ln_backward(const strata__layer_t *l, const strata__pass_t *p)
{
    size_t rows = positions(l, p->rows);
    float *mean = p->aux, *invstd = mean + rows;
    return p->k->ops->ln_bwd(p->k, rows, l->in.c, p->x, p->dy, mean, invstd,
                             p->W, p->dx, p->dW, p->db);
}

const strata__layer_kind_t strata__layer_layernorm = {
    .name = "layernorm",
    .usage = "layernorm [epsilon=E]",
    .nvars = 2, .var_names = { "gamma", "beta" },
    .parse = ln_parse, .infer = ln_infer, .kernel_shape = ln_shape,
    .init = ln_init, .aux_bytes = ln_aux_bytes,
    .forward = ln_forward, .backward = ln_backward,
};
