/* global_avgpool2d: Keras's GlobalAveragePooling2D: an image (h, w, c)
 * becomes c features, each the mean of its channel over the h*w positions.
 * That is average pooling with one window the size of the image, so the
 * kernels are avgpool2d's (the same bits as 'avgpool2d HxW, flatten', on
 * every device); no words, no variables, no scratch. */
#include <stdio.h>

#include "layer.h"

static int gap_parse(strata__layer_t *l, char *const *w, int n, char *why,
                     size_t len)
{
    (void)l;
    (void)w;
    if (n != 0) {
        snprintf(why, len, "takes no arguments (the window is the whole "
                 "image)");
        return -1;
    }
    return 0;
}

static int gap_infer(strata__layer_t *l, char *why, size_t len)
{
    if (!l->in.spatial) {
        snprintf(why, len, "needs an image input (h, w, c), got %d flat "
                 "features", l->in.c);
        return -1;
    }
    l->kh = l->stride_h = l->in.h;
    l->kw = l->stride_w = l->in.w;
    l->out = (strata__shape_t){ 1, 1, l->in.c, 0 };
    return 0;
}

static int gap_forward(const strata__layer_t *l, const strata__pass_t *p)
{
    kops_pool2d_t g = strata__pool2d_geom(l, p->rows);
    return p->k->ops->avgpool2d_fwd(p->k, &g, p->x, p->y);
}

static int gap_backward(const strata__layer_t *l, const strata__pass_t *p)
{
    kops_pool2d_t g = strata__pool2d_geom(l, p->rows);
    return p->k->ops->avgpool2d_bwd(p->k, &g, p->dy, p->dx);
}

const strata__layer_kind_t strata__layer_global_avgpool2d = {
    .name = "global_avgpool2d", .usage = "global_avgpool2d",
    .parse = gap_parse, .infer = gap_infer,
    .forward = gap_forward, .backward = gap_backward,
};
