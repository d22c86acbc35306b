/* The merge layers of a graph, which read several layers: add (their sum,
 * a residual connection) and concat (their channels side by side, on the
 * last axis). model.c checks that the inputs' shapes agree (layer.h's
 * STRATA__MERGE_*) before infer. */
#include <stdio.h>

#include "layer.h"
#include "strata/errno.h"

static int merge_infer(strata__layer_t *l, char *why, size_t len)
{
    (void)why;
    (void)len;
    l->out = l->in;
    if (l->kind->merge == STRATA__MERGE_CHANNELS)
        for (int k = 1; k < l->nin; k++)
            l->out.c += l->ins[k].c;
    return 0;
}

/* y = x0 + x1 + ..., added left to right (the same bits on every device). */
static int add_forward(const strata__layer_t *l, const strata__pass_t *p)
{
    size_t n = (size_t)p->rows * strata__shape_size(&l->out);
    return p->k->ops->sum(p->k, n, p->y, p->xs, l->nin);
}

/* d loss / d x_k = dy for every input. */
static int add_backward(const strata__layer_t *l, const strata__pass_t *p)
{
    size_t n = (size_t)p->rows * strata__shape_size(&l->out);
    int rc = STRATA_OK;
    for (int k = 0; rc == STRATA_OK && k < l->nin; k++)
        if (p->dxs[k])
            rc = p->k->ops->copy(p->k, STRATA__D2D, p->dxs[k], p->dy,
                                 n * sizeof(float));
    return rc;
}

/* The positions of a batch: rows of channels. */
static size_t positions(const strata__layer_t *l, const strata__pass_t *p)
{
    return (size_t)p->rows * (size_t)l->out.h * (size_t)l->out.w;
}

static int concat_forward(const strata__layer_t *l, const strata__pass_t *p)
{
    int rc = STRATA_OK, off = 0;
    for (int k = 0; rc == STRATA_OK && k < l->nin; k++) {
        int c = l->ins[k].c;
        rc = p->k->ops->channel_copy(p->k, positions(l, p), c, p->xs[k], c,
                                     0, p->y, l->out.c, off);
        off += c;
    }
    return rc;
}

static int concat_backward(const strata__layer_t *l, const strata__pass_t *p)
{
    int rc = STRATA_OK, off = 0;
    for (int k = 0; rc == STRATA_OK && k < l->nin; k++) {
        int c = l->ins[k].c;
        if (p->dxs[k])
            rc = p->k->ops->channel_copy(p->k, positions(l, p), c, p->dy,
                                         l->out.c, off, p->dxs[k], c, 0);
        off += c;
    }
    return rc;
}

const strata__layer_kind_t strata__layer_add = {
    .name = "add", .usage = "add <- LAYER, LAYER[, ...]",
    .max_in = STRATA__MAX_INPUTS, .merge = STRATA__MERGE_SAME,
    .parse = strata__layer_no_args, .infer = merge_infer,
    .forward = add_forward, .backward = add_backward,
};

const strata__layer_kind_t strata__layer_concat = {
    .name = "concat", .usage = "concat <- LAYER, LAYER[, ...]",
    .max_in = STRATA__MAX_INPUTS, .merge = STRATA__MERGE_CHANNELS,
    .parse = strata__layer_no_args, .infer = merge_infer,
    .forward = concat_forward, .backward = concat_backward,
};
