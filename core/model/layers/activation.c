/* The activation layers, Keras's ReLU, LeakyReLU, Activation('gelu') (the
 * exact erf form, approximate=False), Activation('tanh'),
 * Activation('sigmoid') and Softmax:
 *   relu | leaky_relu [alpha=A] | gelu | tanh | sigmoid | softmax
 * Any input shape; the output has the input's shape. All but softmax are
 * element-wise; softmax normalises the last axis (an image's channels at
 * each position, or a flat layer's features). No variables, no scratch:
 * backward reads the layer's input (leaky_relu, gelu) or its output (relu,
 * tanh, sigmoid, softmax), both kept by the model. relu, tanh and sigmoid
 * run the kernels of dense's and conv2d's activation words. A softmax
 * layer may not be the last one: the loss applies softmax to the last
 * layer's logits (model.c says so). */
#include <float.h>
#include <stdio.h>

#include "layer.h"
#include "strata/errno.h"

static int act_infer(strata__layer_t *l, char *why, size_t len)
{
    (void)why;
    (void)len;
    l->out = l->in;
    return 0;
}

static size_t elems(const strata__layer_t *l, const strata__pass_t *p)
{
    return (size_t)p->rows * strata__shape_size(&l->in);
}

/* ---- relu, tanh, sigmoid: backward from the output ---------------------- */

#define OUTPUT_ACT(kind)                                                     \
    static int kind##_forward(const strata__layer_t *l,                      \
                              const strata__pass_t *p)                       \
    {                                                                        \
        return p->k->ops->kind##_fwd(p->k, elems(l, p), p->x, p->y);         \
    }                                                                        \
    static int kind##_backward(const strata__layer_t *l,                     \
                               const strata__pass_t *p)                      \
    {                                                                        \
        return p->k->ops->kind##_bwd(p->k, elems(l, p), p->y, p->dy, p->dx); \
    }                                                                        \
    const strata__layer_kind_t strata__layer_##kind = {                      \
        .name = #kind, .usage = #kind,                                       \
        .parse = strata__layer_no_args, .infer = act_infer,                  \
        .forward = kind##_forward, .backward = kind##_backward,              \
    };
OUTPUT_ACT(relu)
OUTPUT_ACT(tanh)
OUTPUT_ACT(sigmoid)
#undef OUTPUT_ACT

/* ---- leaky_relu [alpha=A] ------------------------------------------------ */

/* Keras 2's LeakyReLU(alpha=0.3); Keras 3 calls it negative_slope, with
 * the same default. A slope below 0 is refused, as Keras does. */
static int leaky_parse(strata__layer_t *l, char *const *w, int n, char *why,
                       size_t len)
{
    l->alpha = 0.3f;
    if (n > 1) {
        snprintf(why, len, "expected at most one word, alpha=A");
        return -1;
    }
    const char *v = n == 1 ? strata__layer_opt(w[0], "alpha") : NULL;
    double a;
    if (n == 1 && (!v || strata__layer_float(v, 0.0, FLT_MAX, &a) != 0)) {
        snprintf(why, len, "'%s': expected alpha=A, the slope below 0, a "
                 "number >= 0 (default 0.3)", w[0]);
        return -1;
    }
    if (n == 1)
        l->alpha = (float)a;
    return 0;
}

static int leaky_forward(const strata__layer_t *l, const strata__pass_t *p)
{
    return p->k->ops->leaky_relu_fwd(p->k, elems(l, p), p->x, p->y,
                                     l->alpha);
}

static int leaky_backward(const strata__layer_t *l, const strata__pass_t *p)
{
    return p->k->ops->leaky_relu_bwd(p->k, elems(l, p), p->x, p->dy, p->dx,
                                     l->alpha);
}

const strata__layer_kind_t strata__layer_leaky_relu = {
    .name = "leaky_relu", .usage = "leaky_relu [alpha=A]",
    .parse = leaky_parse, .infer = act_infer,
    .forward = leaky_forward, .backward = leaky_backward,
};

/* ---- gelu: backward from the input --------------------------------------- */

static int gelu_forward(const strata__layer_t *l, const strata__pass_t *p)
{
    return p->k->ops->gelu_fwd(p->k, elems(l, p), p->x, p->y);
}

static int gelu_backward(const strata__layer_t *l, const strata__pass_t *p)
{
    return p->k->ops->gelu_bwd(p->k, elems(l, p), p->x, p->dy, p->dx);
}

const strata__layer_kind_t strata__layer_gelu = {
    .name = "gelu", .usage = "gelu",
    .parse = strata__layer_no_args, .infer = act_infer,
    .forward = gelu_forward, .backward = gelu_backward,
};

/* ---- softmax over the last axis ------------------------------------------ */

/* The kernels count rows in an int: a batch of more rows (positions) than
 * that runs in groups. */
#define SOFTMAX_ROWS ((size_t)1 << 30)

static int softmax_run(const strata__layer_t *l, const strata__pass_t *p,
                       int backward)
{
    size_t rows = (size_t)p->rows * (size_t)l->in.h * (size_t)l->in.w;
    size_t c = (size_t)l->in.c;
    int rc = STRATA_OK;
    for (size_t r = 0; rc == STRATA_OK && r < rows; r += SOFTMAX_ROWS) {
        int m = (int)(rows - r < SOFTMAX_ROWS ? rows - r : SOFTMAX_ROWS);
        size_t at = r * c;
        rc = backward ? p->k->ops->softmax_bwd(p->k, m, (int)c, p->y + at,
                                               p->dy + at, p->dx + at)
                      : p->k->ops->softmax_fwd(p->k, m, (int)c, p->x + at,
                                               p->y + at);
    }
    return rc;
}

static int softmax_forward(const strata__layer_t *l, const strata__pass_t *p)
{
    return softmax_run(l, p, 0);
}

static int softmax_backward(const strata__layer_t *l, const strata__pass_t *p)
{
    return softmax_run(l, p, 1);
}

const strata__layer_kind_t strata__layer_softmax = {
    .name = "softmax", .usage = "softmax",
    .parse = strata__layer_no_args, .infer = act_infer,
    .forward = softmax_forward, .backward = softmax_backward,
};
