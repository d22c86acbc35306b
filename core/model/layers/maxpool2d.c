/* maxpool2d POOL [stride=S]: Keras's MaxPooling2D, 'valid' padding, stride
 * = pool unless given. The forward pass keeps each output's argmax for the
 * backward pass. Its words, shapes and geometry serve every pooling kind
 * (strata__pool2d_* in layer.h). */
#include <stdio.h>

#include "layer.h"
#include "strata/errno.h"

int strata__pool2d_parse(strata__layer_t *l, char *const *w, int n,
                         char *why, size_t len)
{
    if (n < 1 || n > 2 || strata__layer_pair(w[0], 1, 64, &l->kh, &l->kw)) {
        snprintf(why, len, "expected POOL (P or PHxPW, integers in [1, 64]) "
                 "and an optional stride=S");
        return -1;
    }
    l->stride_h = l->kh;
    l->stride_w = l->kw;
    const char *v = n == 2 ? strata__layer_opt(w[1], "stride") : NULL;
    if (n == 2 && (!v || strata__layer_pair(v, 1, 64, &l->stride_h,
                                            &l->stride_w))) {
        snprintf(why, len, "'%s': expected stride=S or stride=SHxSW, "
                 "integers in [1, 64]", w[1]);
        return -1;
    }
    return 0;
}

int strata__pool2d_infer(strata__layer_t *l, char *why, size_t len)
{
    if (!l->in.spatial) {
        snprintf(why, len, "needs an image input (h, w, c), got %d flat "
                 "features", l->in.c);
        return -1;
    }
    if (l->in.h < l->kh || l->in.w < l->kw) {
        snprintf(why, len, "pool %dx%d does not fit the input (%d, %d, %d)",
                 l->kh, l->kw, l->in.h, l->in.w, l->in.c);
        return -1;
    }
    l->out = (strata__shape_t){ (l->in.h - l->kh) / l->stride_h + 1,
                                (l->in.w - l->kw) / l->stride_w + 1,
                                l->in.c, 1 };
    return 0;
}

kops_pool2d_t strata__pool2d_geom(const strata__layer_t *l, int rows)
{
    return (kops_pool2d_t){
        .n = rows, .h = l->in.h, .w = l->in.w, .c = l->in.c,
        .ph = l->kh, .pw = l->kw, .stride_h = l->stride_h,
        .stride_w = l->stride_w, .oh = l->out.h, .ow = l->out.w,
    };
}

static size_t pool_aux_bytes(const strata__layer_t *l, int rows)
{
    return (size_t)rows * strata__shape_size(&l->out) * sizeof(int32_t);
}

static int pool_forward(const strata__layer_t *l, const strata__pass_t *p)
{
    kops_pool2d_t g = strata__pool2d_geom(l, p->rows);
    return p->k->ops->maxpool2d_fwd(p->k, &g, p->x, p->y, p->aux);
}

/* With p->dx_relu (the input layer's relu left to this backward), dx is
 * masked as the relu's backward would mask it: by the argmax's value, which
 * is this layer's output. */
static int pool_backward(const strata__layer_t *l, const strata__pass_t *p)
{
    kops_pool2d_t g = strata__pool2d_geom(l, p->rows);
    if (p->dx_relu)
        return p->k->ops->maxpool2d_bwd_relu(p->k, &g, p->dy, p->aux, p->y,
                                             p->dx);
    return p->k->ops->maxpool2d_bwd(p->k, &g, p->dy, p->aux, p->dx);
}

const strata__layer_kind_t strata__layer_maxpool2d = {
    .name = "maxpool2d", .usage = "maxpool2d POOL [stride=S]",
    .parse = strata__pool2d_parse, .infer = strata__pool2d_infer,
    .aux_bytes = pool_aux_bytes, .masks_relu_in = 1, .rows_apart = 1,
    .forward = pool_forward, .backward = pool_backward,
};
