/* strata core -- one kind of layer, described once. Internal; never
 * installed.
 *
 * A model (model.c) is a graph of layers in an order where each reads only
 * layers before it (a Sequential chain is the graph where each reads the
 * one before). Everything that differs
 * between kinds lives in one strata__layer_kind_t per kind, in one file of
 * this folder: how its INI words parse, the output shape it infers from its
 * input shape, its variables and their initialisation, and its forward and
 * backward pass through the device's kernel table (kops.h). model.c only
 * chains them: buffers, activations, the loss. Adding a kind is one file
 * here, its ops in kernels/kops_list.h with their kernels (kernels/cpu,
 * kernels/cuda), its line in model.c's table and its extern below. The
 * activation layers (relu, leaky_relu, gelu, tanh, sigmoid, softmax)
 * differ only in their ops and share one file, activation.c.
 *
 * Tensors are NHWC everywhere (Keras's channels_last): a batch of images is
 * x[rows][h][w][c], and a flat tensor of d features is the shape (1, 1, d)
 * with spatial = 0. Flattening NHWC is free: the bytes do not move. */
#ifndef STRATA_CORE_LAYER_H
#define STRATA_CORE_LAYER_H

#include <stddef.h>
#include <stdint.h>

#include "device/kops.h"

/* The shape of one sample. */
typedef struct strata__shape {
    int h, w, c;
    int spatial;       /* 1: an image (h, w, c); 0: flat, h = w = 1 */
} strata__shape_t;

static inline size_t strata__shape_size(const strata__shape_t *s)
{
    return (size_t)s->h * (size_t)s->w * (size_t)s->c;
}

/* How a merge kind's inputs must agree: the same shape (add), or the same
 * image size with any channels (concat, on the last axis). */
enum { STRATA__MERGE_NONE = 0, STRATA__MERGE_SAME, STRATA__MERGE_CHANNELS };

enum { STRATA__ACT_NONE = 0, STRATA__ACT_RELU, STRATA__ACT_TANH,
       STRATA__ACT_SIGMOID };

typedef struct strata__layer_kind strata__layer_kind_t;

/* The inputs one layer may read (add, concat). */
#define STRATA__MAX_INPUTS 8

/* What a layer's input index names besides a layer (>= 0): the dense
 * features ('input'), or the id features ('ids', [data] train_ids ...),
 * which only an embedding reads. */
enum { STRATA__IN_DATA = -1, STRATA__IN_IDS = -2 };

/* embedding: the largest table, in rows (ids are int32). */
#define STRATA__EMB_MAX_VOCAB (1 << 30)

/* One layer of a model. The members a kind does not use stay 0. */
typedef struct strata__layer {
    const strata__layer_kind_t *kind;
    int             index;          /* position in the model, 0-based     */
    char            text[96];       /* its INI text, for messages         */
    char            name[32];       /* "conv2d_0" or its [graph] key: the
                                       prefix of its variables            */
    int             nin;            /* inputs, >= 1                       */
    int             inputs[STRATA__MAX_INPUTS]; /* the layers it reads, by
                                       index (all < index), or
                                       STRATA__IN_DATA / STRATA__IN_IDS    */
    strata__shape_t ins[STRATA__MAX_INPUTS];    /* their output shapes    */
    strata__shape_t in, out;        /* in = ins[0]                        */
    int             act;            /* STRATA__ACT_*, after the layer      */
    int             var0;           /* its first variable in m->vars       */
    /* dense: units; conv2d: filters, kernel, strides, padding; pooling */
    int             units;
    int             kh, kw, stride_h, stride_w, same;
    int             pad_top, pad_left;
    float           rate;           /* dropout                             */
    float           alpha;          /* leaky_relu: the slope below 0       */
    float           momentum;       /* batchnorm: of the moving statistics */
    float           epsilon;        /* batchnorm, layernorm: added to var  */
    int             sync;           /* batchnorm: statistics of the global
                                       batch, across replicas and workers  */
    int             state0;         /* its first state tensor in m->states */
    /* embedding: rows of the table (its dim is `units`), KOPS_EMB_* */
    int             vocab, combiner;
    int             bf16;           /* conv2d, dense: mixed_bfloat16, through
                                       the table's *_bf16 ops, STRATA__BF16_*:
                                       the workspace is the device kind's  */
} strata__layer_t;

/* strata__layer_t.bf16: float32, or mixed_bfloat16 on CPU or GPU replicas
 * (their kernels want workspaces of different sizes: kops_list.h). */
enum { STRATA__BF16_OFF, STRATA__BF16_CPU, STRATA__BF16_GPU };

/* What a forward or backward call works on: pointers on the replica's
 * device. */
typedef struct strata__pass {
    strata__kdev_t *k;
    int             rows;
    const float    *x;              /* input, rows x in (xs[0])             */
    const int32_t  *ids;            /* a layer reading the id features:
                                       rows x in.c ids (xs[0] is NULL)      */
    const float    *xs[STRATA__MAX_INPUTS]; /* every input, l->nin of them  */
    float          *y;              /* output, rows x out                   */
    const float    *W, *b;          /* the replica's variables (or NULL)    */
    float          *dW, *db;        /* backward: their gradients            */
    const float    *dy;             /* backward: d loss / d y               */
    float          *dx;             /* backward: d loss / d x; NULL for the
                                       first layer (dxs[0])                 */
    float          *dxs[STRATA__MAX_INPUTS]; /* backward: every input's; NULL
                                       for one that is the data             */
    void           *aux;            /* the layer's own scratch (pool argmax,
                                       conv2d im2col), aux_bytes long      */
    float          *state[2];       /* its state tensors (batchnorm's moving
                                       statistics), on the device; NULL for
                                       a kind without                       */
    /* Sum `n` doubles in place over every replica of the step (and every
     * worker), and *count, the rows they sum, too: batchnorm's statistics.
     * `sums` is on the device; the core moves it. NULL: one replica,
     * nothing to add. Every replica calls it at the same point of the
     * step, whatever its rows. */
    int           (*sum_replicas)(void *arg, double *sums, size_t n,
                                  double *count);
    void           *sum_arg;
    size_t          aux_bytes;
    int             training;       /* 0 at evaluation                      */
    uint64_t        seed;           /* dropout: this step and layer         */
    uint64_t        first;          /* dropout: index of x[0] in the global
                                       batch's elements                     */
    /* embedding backward, gradients as rows (core/model/rows.c): dW all
     * zeros and the rows here (distinct ids ascending, their rows, how
     * many); NULL: the dense dW */
    int32_t        *row_uniq;
    float          *row_vals;
    int32_t        *row_n;
    int             row_dW_zero;    /* dW holds zeros already (the strategy
                                       never writes it: rows_apart)        */
    int             dy_relu_done;   /* backward, a kind that fuses_relu: dy
                                       is through the layer's relu already
                                       (its reader's dx_relu)               */
    int             fwd_grouped;    /* backward: the forward ran the batch
                                       in groups (its scratch holds the last
                                       group's, not the batch's)            */
    int             dx_relu;        /* backward, a kind that masks_relu_in:
                                       dx goes through the input layer's
                                       relu too (model.h's relu_by_reader) */
    /* backward, a kind whose takes_pair says yes, first of a pair: the
     * second layer (pair; NULL: none) and its output, gradient and scratch
     * as its forward left them, pair_rows samples a call: this backward
     * makes dy from them (the second's backward), then its own */
    const strata__layer_t *pair;
    int             pair_rows;
    const float    *pair_dy, *pair_y;
    const void     *pair_aux;
} strata__pass_t;

struct strata__layer_kind {
    const char *name;               /* the INI word: "conv2d"               */
    const char *usage;              /* for errors: "conv2d FILTERS KERNEL
                                       [stride=S] [padding=valid|same] [ACT]" */
    int         nvars;              /* 0; 1: a kernel only (embedding's
                                       table); 2: kernel and bias           */
    int         has_act;            /* takes an activation word             */
    int         fuses_relu;         /* its forward and backward apply its
                                       relu themselves (conv2d: in cache,
                                       with the bias gradient): the model
                                       then does not                         */
    int         rows_apart;         /* its forward and backward compute each
                                       row (sample) from that row alone, in
                                       the same bits whatever the batch: a
                                       batch may go through in groups       */
    /* First of a pair (model.h's pair_next): whether its backward takes
     * the second layer's too (p->pair), in cache (NULL: never). */
    int       (*takes_pair)(const strata__layer_t *l,
                            const strata__layer_t *next);
    int         masks_relu_in;      /* its backward can apply its input
                                       layer's relu (p->dx_relu; maxpool2d:
                                       an argmax's own value is its output,
                                       so the relu's mask costs no pass)   */
    int         alias;              /* output = input, nothing computed
                                       (flatten): no buffer, no pass        */
    int         max_in;             /* inputs it takes: 0 = exactly one;
                                       else 2 .. max_in (merge kinds)       */
    int         merge;              /* STRATA__MERGE_*: how the inputs'
                                       shapes must agree (model.c checks)   */
    int         reads_ids;          /* reads the id features ('ids'), and
                                       only them; no other kind may        */
    /* Parse the words after the name (activation words already removed
     * when has_act). On error, a reason in why. */
    int    (*parse)(strata__layer_t *l, char *const *w, int n, char *why,
                    size_t len);
    /* l->out (and padding) from l->in; on error, a reason in why. */
    int    (*infer)(strata__layer_t *l, char *why, size_t len);
    /* nvars >= 1: the kernel's shape (ndim, dims), the bias's length, and
     * Glorot's fan_in / fan_out. */
    int    (*kernel_shape)(const strata__layer_t *l, int64_t *dims,
                           size_t *bias, double *fan_in, double *fan_out);
    /* The variables' names (NULL: "kernel" and "bias": Keras's). */
    const char *var_names[2];
    /* Their initial values (NULL: Glorot-uniform kernel, zero bias; the
     * model draws the kernel; bias NULL when nvars == 1). */
    void   (*init)(const strata__layer_t *l, float *kernel, size_t nk,
                   float *bias, size_t nb);
    /* > 0: the model draws the kernel uniform in [-init_uniform,
     * init_uniform] in place of Glorot's limit (embedding: Keras's 0.05). */
    double      init_uniform;
    /* State tensors: values the layer keeps apart from its variables, not
     * trained (batchnorm's moving mean and variance), each of the bias's
     * length, named and first filled as below. */
    int         nstate;
    const char *state_names[2];
    float       state_fill[2];
    /* Bytes of the layer's own scratch for `rows` samples (NULL: none). */
    size_t (*aux_bytes)(const strata__layer_t *l, int rows);
    int    (*forward)(const strata__layer_t *l, const strata__pass_t *p);
    int    (*backward)(const strata__layer_t *l, const strata__pass_t *p);
};

extern const strata__layer_kind_t strata__layer_dense;
extern const strata__layer_kind_t strata__layer_conv2d;
extern const strata__layer_kind_t strata__layer_maxpool2d;
extern const strata__layer_kind_t strata__layer_flatten;
extern const strata__layer_kind_t strata__layer_dropout;
extern const strata__layer_kind_t strata__layer_avgpool2d;
extern const strata__layer_kind_t strata__layer_global_avgpool2d;
/* merge.c */
extern const strata__layer_kind_t strata__layer_add;
extern const strata__layer_kind_t strata__layer_concat;
extern const strata__layer_kind_t strata__layer_batchnorm;
extern const strata__layer_kind_t strata__layer_layernorm;
extern const strata__layer_kind_t strata__layer_embedding;
/* activation.c */
extern const strata__layer_kind_t strata__layer_relu;
extern const strata__layer_kind_t strata__layer_leaky_relu;
extern const strata__layer_kind_t strata__layer_gelu;
extern const strata__layer_kind_t strata__layer_tanh;
extern const strata__layer_kind_t strata__layer_sigmoid;
extern const strata__layer_kind_t strata__layer_softmax;

/* The pooling kinds' common part (maxpool2d.c): POOL [stride=S], the
 * 'valid' output shape, and the kernels' geometry for `rows` samples. */
int strata__pool2d_parse(strata__layer_t *l, char *const *w, int n,
                         char *why, size_t len);
int strata__pool2d_infer(strata__layer_t *l, char *why, size_t len);
kops_pool2d_t strata__pool2d_geom(const strata__layer_t *l, int rows);

/* Helpers for the kinds' parsers: an integer in [lo, hi] ("3"), a pair
 * "3" or "3x5" (both in [lo, hi]), a float. Return 0 or -1. */
int strata__layer_int(const char *s, int lo, int hi, int *out);
int strata__layer_pair(const char *s, int lo, int hi, int *a, int *b);
int strata__layer_float(const char *s, double lo, double hi, double *out);
/* "key=value" options: *value = the text after "key=" when w starts with
 * it, else NULL. */
const char *strata__layer_opt(const char *w, const char *key);
/* The parse of a kind that takes no words (flatten, the activations). */
int strata__layer_no_args(strata__layer_t *l, char *const *w, int n,
                          char *why, size_t len);

#endif /* STRATA_CORE_LAYER_H */
