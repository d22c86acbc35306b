/* avgpool2d POOL [stride=S]: Keras's AveragePooling2D, 'valid' padding,
 * stride = pool unless given: each output is its window's mean. The words
 * and shapes are maxpool2d's; no scratch, no variables. */
#include "layer.h"

static int avg_forward(const strata__layer_t *l, const strata__pass_t *p)
{
    kops_pool2d_t g = strata__pool2d_geom(l, p->rows);
    return p->k->ops->avgpool2d_fwd(p->k, &g, p->x, p->y);
}

static int avg_backward(const strata__layer_t *l, const strata__pass_t *p)
{
    kops_pool2d_t g = strata__pool2d_geom(l, p->rows);
    return p->k->ops->avgpool2d_bwd(p->k, &g, p->dy, p->dx);
}

const strata__layer_kind_t strata__layer_avgpool2d = {
    .name = "avgpool2d", .usage = "avgpool2d POOL [stride=S]",
    .parse = strata__pool2d_parse, .infer = strata__pool2d_infer,
    .forward = avg_forward, .backward = avg_backward,
};
