/* conv2d FILTERS KERNEL [stride=S] [padding=valid|same] [ACT]: Keras's
 * Conv2D on NHWC images, kernel W[kh][kw][c][filters], lowered to GEMM by
 * the kernels (im2col), or convolved directly (the CPU's direct paths;
 * mixed_bfloat16: the bf16 ones, l->bf16). */
#include <stdio.h>
#include <string.h>

#include "layer.h"
#include "strata/errno.h"

/* A layer's im2col workspace holds at most this many floats (32 MiB), but
 * always one image: the kernels then run one GEMM per group of images. */
#define CONV_COL_BUDGET ((size_t)8 << 20)

static int conv_parse(strata__layer_t *l, char *const *w, int n, char *why,
                      size_t len)
{
    if (n < 2) {
        snprintf(why, len, "expected FILTERS and KERNEL");
        return -1;
    }
    if (strata__layer_int(w[0], 1, 65536, &l->units) != 0) {
        snprintf(why, len, "filters '%s': expected an integer in [1, 65536]",
                 w[0]);
        return -1;
    }
    if (strata__layer_pair(w[1], 1, 64, &l->kh, &l->kw) != 0) {
        snprintf(why, len, "kernel '%s': expected K or KHxKW, integers in "
                 "[1, 64]", w[1]);
        return -1;
    }
    l->stride_h = l->stride_w = 1;
    for (int i = 2; i < n; i++) {
        const char *v;
        if ((v = strata__layer_opt(w[i], "stride"))) {
            if (strata__layer_pair(v, 1, 64, &l->stride_h, &l->stride_w)) {
                snprintf(why, len, "stride '%s': expected S or SHxSW, "
                         "integers in [1, 64]", v);
                return -1;
            }
        } else if ((v = strata__layer_opt(w[i], "padding"))) {
            if (strcmp(v, "valid") && strcmp(v, "same")) {
                snprintf(why, len, "padding '%s': expected valid or same", v);
                return -1;
            }
            l->same = !strcmp(v, "same");
        } else {
            snprintf(why, len, "'%s': expected stride=S, padding=valid|same "
                     "or an activation", w[i]);
            return -1;
        }
    }
    return 0;
}

/* Keras: 'valid' keeps whole windows only; 'same' gives ceil(n / stride)
 * outputs, the padding split with the extra one after. */
static int conv_axis(int n, int k, int stride, int same, int *out, int *pad)
{
    if (same) {
        *out = (n + stride - 1) / stride;
        int total = (*out - 1) * stride + k - n;
        *pad = total > 0 ? total / 2 : 0;
        return 0;
    }
    *pad = 0;
    if (n < k)
        return -1;
    *out = (n - k) / stride + 1;
    return 0;
}

static int conv_infer(strata__layer_t *l, char *why, size_t len)
{
    if (!l->in.spatial) {
        snprintf(why, len, "needs an image input (h, w, c), got %d flat "
                 "features", l->in.c);
        return -1;
    }
    int oh, ow;
    if (conv_axis(l->in.h, l->kh, l->stride_h, l->same, &oh, &l->pad_top) ||
        conv_axis(l->in.w, l->kw, l->stride_w, l->same, &ow, &l->pad_left)) {
        snprintf(why, len, "kernel %dx%d does not fit the input (%d, %d, %d) "
                 "with padding=valid", l->kh, l->kw, l->in.h, l->in.w,
                 l->in.c);
        return -1;
    }
    l->out = (strata__shape_t){ oh, ow, l->units, 1 };
    return 0;
}

static kops_conv2d_t conv_geom(const strata__layer_t *l, int rows)
{
    return (kops_conv2d_t){
        .n = rows, .h = l->in.h, .w = l->in.w, .c = l->in.c,
        .kh = l->kh, .kw = l->kw, .f = l->units,
        .stride_h = l->stride_h, .stride_w = l->stride_w,
        .pad_top = l->pad_top, .pad_left = l->pad_left,
        .oh = l->out.h, .ow = l->out.w,
    };
}

static int conv_kernel_shape(const strata__layer_t *l, int64_t *dims,
                             size_t *bias, double *fan_in, double *fan_out)
{
    dims[0] = l->kh;
    dims[1] = l->kw;
    dims[2] = l->in.c;
    dims[3] = l->units;
    *bias = (size_t)l->units;
    double area = (double)l->kh * (double)l->kw;
    *fan_in = area * (double)l->in.c;
    *fan_out = area * (double)l->units;
    return 4;
}

/* Floats of im2col for one image. */
static size_t conv_col_one(const strata__layer_t *l)
{
    return (size_t)l->out.h * (size_t)l->out.w * (size_t)l->kh *
           (size_t)l->kw * (size_t)l->in.c;
}

/* The layer's own im2col workspace: the whole batch when it fits the
 * budget, else as many images as do (the kernels then run one GEMM per
 * group), at least one. */
static size_t conv_aux_bytes(const strata__layer_t *l, int rows)
{
    size_t one = conv_col_one(l);
    size_t group = one ? CONV_COL_BUDGET / one : 1;
    if (group < 1)
        group = 1;
    if (group > (size_t)rows)
        group = (size_t)(rows > 0 ? rows : 1);
    /* mixed_bfloat16: the bf16 kernels' workspace, on a GPU for the same
     * group of images */
    kops_conv2d_t g = conv_geom(l, 1);
    if (l->bf16 == STRATA__BF16_CPU)
        return kops_conv2d_bf16_len(&g) * sizeof(float);
    if (l->bf16 == STRATA__BF16_GPU)
        return kops_conv2d_bf16_gpu_len(&g, group) * sizeof(float);
    return one * group * sizeof(float);
}

static int conv_forward(const strata__layer_t *l, const strata__pass_t *p)
{
    kops_conv2d_t g = conv_geom(l, p->rows);
    g.relu = l->act == STRATA__ACT_RELU;          /* fuses_relu below */
    if (l->bf16)
        return p->k->ops->conv2d_fwd_bf16(p->k, &g, p->x, p->W, p->b, p->y,
                                          p->aux,
                                          p->aux_bytes / sizeof(float));
    return p->k->ops->conv2d_fwd(p->k, &g, p->x, p->W, p->b, p->y, p->aux,
                                 p->aux_bytes / sizeof(float));
}

/* The workspace is the layer's own: when it held the whole batch, the
 * forward pass's im2col is still there and the backward pass reuses it.
 * With the layer's relu, its mask and the bias gradient go with the
 * backward (conv2d_bwd_relu, conv2d_bwd_bf16 with y: a few images at a
 * time on the CPU, while each one's dy is in cache), masking dy in
 * place: the model's own gradient slot, which its relu pass would have
 * masked in place too (model.c). Where the reader's backward applied the
 * relu (p->dy_relu_done: a maxpool2d after it), dy is only read. */
static int conv_backward(const strata__layer_t *l, const strata__pass_t *p)
{
    kops_conv2d_t g = conv_geom(l, p->rows);
    size_t col_len = p->aux_bytes / sizeof(float);
    float *db = p->db;
    int relu = l->act == STRATA__ACT_RELU && !p->dy_relu_done;
    if (l->bf16)
        return p->k->ops->conv2d_bwd_bf16(p->k, &g, p->x, p->W,
                                          relu ? p->y : NULL, (float *)p->dy,
                                          p->dW, db, p->dx, p->aux, col_len);
    g.col_ready = !p->fwd_grouped &&
                  col_len >= conv_col_one(l) * (size_t)p->rows;
    if (p->pair) {           /* the max pooling's backward, image by image */
        kops_pool2d_t pg = strata__pool2d_geom(p->pair, p->rows);
        return p->k->ops->conv2d_bwd_pooled(
            p->k, &g, &pg, p->pair_rows, p->pair_dy, p->pair_aux, p->pair_y,
            p->x, p->W, (float *)p->dy, p->dW, db, p->dx, p->aux, col_len);
    }
    if (relu)
        return p->k->ops->conv2d_bwd_relu(p->k, &g, p->x, p->W, p->y,
                                          (float *)p->dy, p->dW, db, p->dx,
                                          p->aux, col_len);
    return p->k->ops->conv2d_bwd(p->k, &g, p->x, p->W, p->dy, p->dW, db,
                                 p->dx, p->aux, col_len);
}

/* A max pooling after it (the model's pair_next) leaves it its backward:
 * float32 only (the bf16 kernels take no pooling). */
static int conv_takes_pair(const strata__layer_t *l,
                           const strata__layer_t *next)
{
    return !l->bf16 && next->kind == &strata__layer_maxpool2d;
}

const strata__layer_kind_t strata__layer_conv2d = {
    .name = "conv2d",
    .usage = "conv2d FILTERS KERNEL [stride=S] [padding=valid|same] [ACT]",
    .nvars = 2, .has_act = 1, .fuses_relu = 1, .rows_apart = 1,
    .takes_pair = conv_takes_pair,
    .parse = conv_parse, .infer = conv_infer,
    .kernel_shape = conv_kernel_shape, .aux_bytes = conv_aux_bytes,
    .forward = conv_forward, .backward = conv_backward,
};
