/* dense UNITS [ACT]: y[rows x units] = x[rows x in] W[in x units] + b. */
#include <stdio.h>

#include "layer.h"
#include "strata/errno.h"

static int dense_parse(strata__layer_t *l, char *const *w, int n, char *why,
                       size_t len)
{
    if (n != 1) {
        snprintf(why, len, "expected one number of units");
        return -1;
    }
    if (strata__layer_int(w[0], 1, 65536, &l->units) != 0) {
        snprintf(why, len, "units '%s': expected an integer in [1, 65536]",
                 w[0]);
        return -1;
    }
    return 0;
}

static int dense_infer(strata__layer_t *l, char *why, size_t len)
{
    /* The data's images are read flat by a dense first layer (the seeds'
     * reshape(-1, 784)); after an image layer, flatten says so. */
    if (l->in.spatial && l->index > 0) {
        snprintf(why, len, "needs a flat input, got (%d, %d, %d): put "
                 "'flatten' before it", l->in.h, l->in.w, l->in.c);
        return -1;
    }
    l->out = (strata__shape_t){ 1, 1, l->units, 0 };
    return 0;
}

static int dense_kernel_shape(const strata__layer_t *l, int64_t *dims,
                              size_t *bias, double *fan_in, double *fan_out)
{
    dims[0] = (int64_t)strata__shape_size(&l->in);
    dims[1] = l->units;
    *bias = (size_t)l->units;
    *fan_in = (double)dims[0];
    *fan_out = (double)l->units;
    return 2;
}

/* mixed_bfloat16: the bf16 kernels' workspace (none in float32). */
static size_t dense_aux_bytes(const strata__layer_t *l, int rows)
{
    int in = (int)strata__shape_size(&l->in);
    if (l->bf16 == STRATA__BF16_CPU)
        return kops_dense_bf16_len(rows, in, l->units) * sizeof(float);
    if (l->bf16 == STRATA__BF16_GPU)
        return kops_dense_bf16_gpu_len(rows, in, l->units) * sizeof(float);
    return 0;
}

static int dense_forward(const strata__layer_t *l, const strata__pass_t *p)
{
    if (l->bf16)
        return p->k->ops->dense_fwd_bf16(p->k, p->rows,
                                         (int)strata__shape_size(&l->in),
                                         l->units, p->x, p->W, p->b, p->y,
                                         p->aux, p->aux_bytes / sizeof(float));
    return p->k->ops->dense_fwd(p->k, p->rows, (int)strata__shape_size(&l->in),
                                l->units, p->x, p->W, p->b, p->y);
}

static int dense_backward(const strata__layer_t *l, const strata__pass_t *p)
{
    if (l->bf16)
        return p->k->ops->dense_bwd_bf16(p->k, p->rows,
                                         (int)strata__shape_size(&l->in),
                                         l->units, p->x, p->W, p->dy, p->dW,
                                         p->db, p->dx, p->aux,
                                         p->aux_bytes / sizeof(float));
    return p->k->ops->dense_bwd(p->k, p->rows, (int)strata__shape_size(&l->in),
                                l->units, p->x, p->W, p->dy, p->dW, p->db,
                                p->dx);
}

const strata__layer_kind_t strata__layer_dense = {
    .name = "dense", .usage = "dense UNITS [ACT]", .nvars = 2, .has_act = 1,
    .parse = dense_parse, .infer = dense_infer,
    .kernel_shape = dense_kernel_shape, .aux_bytes = dense_aux_bytes,
    .forward = dense_forward, .backward = dense_backward,
};
