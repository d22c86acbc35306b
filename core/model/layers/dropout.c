/* dropout RATE: Keras's inverted dropout. Training zeroes each element with
 * probability RATE and scales the rest by 1 / (1 - RATE); evaluation passes
 * the input through. The mask is a function of (seed, element index in the
 * global batch), so replicas that split a batch draw what one device would,
 * and backward recomputes it instead of storing it. */
#include <stdio.h>

#include "layer.h"
#include "strata/errno.h"

static int dropout_parse(strata__layer_t *l, char *const *w, int n,
                         char *why, size_t len)
{
    double rate;
    if (n != 1 || strata__layer_float(w[0], 0.0, 1.0, &rate) || rate >= 1.0) {
        snprintf(why, len, "expected one RATE in [0, 1)");
        return -1;
    }
    l->rate = (float)rate;
    return 0;
}

static int dropout_infer(strata__layer_t *l, char *why, size_t len)
{
    (void)why;
    (void)len;
    l->out = l->in;
    return 0;
}

static int dropout_forward(const strata__layer_t *l, const strata__pass_t *p)
{
    size_t n = (size_t)p->rows * strata__shape_size(&l->in);
    if (!p->training)
        return p->k->ops->copy(p->k, STRATA__D2D, p->y, p->x,
                               n * sizeof(float));
    return p->k->ops->dropout_fwd(p->k, n, p->x, p->y, l->rate, p->seed,
                                  p->first);
}

static int dropout_backward(const strata__layer_t *l, const strata__pass_t *p)
{
    size_t n = (size_t)p->rows * strata__shape_size(&l->in);
    return p->k->ops->dropout_bwd(p->k, n, p->dy, p->dx, l->rate, p->seed,
                                  p->first);
}

const strata__layer_kind_t strata__layer_dropout = {
    .name = "dropout", .usage = "dropout RATE",
    .parse = dropout_parse, .infer = dropout_infer,
    .forward = dropout_forward, .backward = dropout_backward,
};
