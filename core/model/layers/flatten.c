/* flatten: an image (h, w, c) becomes h*w*c features. In NHWC the bytes
 * are already in Keras's Flatten order, so nothing is computed. */
#include <stdio.h>

#include "layer.h"

static int flatten_infer(strata__layer_t *l, char *why, size_t len)
{
    (void)why;
    (void)len;
    l->out = (strata__shape_t){ 1, 1, (int)strata__shape_size(&l->in), 0 };
    return 0;
}

const strata__layer_kind_t strata__layer_flatten = {
    .name = "flatten", .usage = "flatten", .alias = 1,
    .parse = strata__layer_no_args, .infer = flatten_infer,
};
