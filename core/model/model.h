/* strata core -- the model: a graph of layers (layers/layer.h), its
 * variables in one flat float32 layout, and the forward/backward pass of
 * one replica on the replica's device, through its kernel table (kops.h):
 * the same code drives CPU and GPU replicas. Built from [model] layers (a
 * chain) or a [graph] section (named layers reading named inputs):
 * build.c. Internal; never installed. */
#ifndef STRATA_CORE_MODEL_H
#define STRATA_CORE_MODEL_H

#include <stdio.h>

#include "internal.h"
#include "data/data.h"
#include "device/kops.h"
#include "model/layers/layer.h"

/* Variables of a model: a kernel and a bias per layer at most. */
#define STRATA__MAX_VARS (2 * STRATA_MAX_LAYERS)

typedef struct strata__model {
    int             nlayers;        /* in an order where each layer reads
                                       only layers before it; the last gives
                                       the logits                            */
    int             graph;          /* 1: from [graph] (named, inputs shown) */
    strata__layer_t layers[STRATA_MAX_LAYERS];
    strata__shape_t input;          /* one sample, as the data gives it      */
    int             input_dim;      /* its floats                            */
    int             ids_k;          /* id features per sample the model
                                       reads ('ids'; 0: none read)           */
    int             ids_vocab;      /* the smallest table of the layers that
                                       read them: every id below it         */
    int             nclasses;       /* units of the last layer               */
    strata__lossfn_t loss;          /* [model] loss and metric               */
    size_t          max_width;      /* floats of the widest layer input or
                                       output, per sample                    */
    /* The backward pass's plan, made at build: the gradient of a layer's
     * output lives in one of nslots buffers of rows x max_width from its
     * first reader's backward to its own. dy_slot[i]: layer i's; dx_slot:
     * where its backward writes each input's (-1: the data, not needed);
     * dx_into: -1, or the slot that gradient is then added to (an output
     * read by several layers). A chain needs 2 slots, ping-pong. */
    int             nslots;
    int16_t         dy_slot[STRATA_MAX_LAYERS];
    int16_t         dx_slot[STRATA_MAX_LAYERS][STRATA__MAX_INPUTS];
    int16_t         dx_into[STRATA_MAX_LAYERS][STRATA__MAX_INPUTS];
    /* Layer i's relu (act relu) is applied by its only reader's backward
     * (a kind that masks_relu_in), not by its own: the same bits, one pass
     * over the layer's output and its gradient fewer. */
    uint8_t         relu_by_reader[STRATA_MAX_LAYERS];
    /* ... and that reader is layer i + 1, both kinds taking rows apart:
     * on a CPU the pair runs a few samples at a time (model.c). */
    uint8_t         pair_next[STRATA_MAX_LAYERS];
    int             nvars;          /* 2 per layer with variables            */
    size_t          count;          /* float32 elements of the flat layout
                                       (each variable 64-byte aligned)       */
    size_t          params;         /* floats trained: the variables' sizes  */
    strata_var_t    vars[STRATA__MAX_VARS];
    char            names[STRATA__MAX_VARS][48];
    /* State tensors (layer.h): not trained, not the strategy's; every
     * replica keeps a copy (strata__work_t.state) that stays the same on
     * all, laid out like the variables in state_count floats. value is
     * unused. */
    int             nstates;
    size_t          state_count;
    strata_var_t    states[STRATA__MAX_VARS];
    char            snames[STRATA__MAX_VARS][48];
    int             step_sums;      /* a layer sums statistics across the
                                       replicas during a step (batchnorm) */
} strata__model_t;

/* One line of a model's description. */
typedef struct strata__layer_line {
    const char *name;    /* its [graph] key; NULL in a chain ("dense_0")   */
    const char *text;    /* "conv2d 16 3 padding=same <- stem"              */
    const char *origin;  /* where it comes from ("job.ini:12"), or NULL    */
} strata__layer_line_t;

/* The shape of one sample of `d`: images are (rows, cols, channels), flat
 * data (1, 1, dim). */
strata__shape_t strata__data_shape(const strata__dataset_t *d);

/* Parse `spec` ("conv2d 32 3 relu, maxpool2d 2, flatten, dense 10"), a
 * chain, for samples of shape `input` and labels in [0, nclasses). `origin`
 * says where the spec comes from ("etc/cnn.ini:29"; NULL: none) for errors,
 * which name it, the layer's position and text, and what was expected. The
 * last layer must be flat with at least nclasses units and no activation
 * ('softmax' is accepted there: the loss applies it). A dense layer reading
 * the data reads images flat. Fills layers[] and vars[] (names, shapes,
 * offsets), no storage. */
int  strata__model_build(const char *spec, const char *origin,
                         const strata__shape_t *input, int nclasses,
                         strata__model_t *m);
/* The same from a graph: line i is layer `name` = "KIND ARGS [<- INPUT,
 * ...]", reading the named layers ("input": the data), by default the line
 * before. Any order; one layer that no other reads, the output. Errors name
 * the line's origin and, for an input, both layers. */
int  strata__model_build_graph(const strata__layer_line_t *lines, int n,
                               const strata__shape_t *input, int nclasses,
                               strata__model_t *m);
/* The same where the data also gives `ids_k` int32 id features per
 * sample (0: none), which a graph reads as 'ids' (an embedding only; a
 * chain never). */
int  strata__model_build_graph_ids(const strata__layer_line_t *lines, int n,
                                   const strata__shape_t *input, int ids_k,
                                   int nclasses, int loss,
                                   strata__model_t *m);
/* The same for [model] loss `loss` (0: sparse, as above; a KOPS_LOSS_*:
 * the last layer has exactly nclasses units, one per label value, and
 * binary_crossentropy also takes 'sigmoid' there, which it applies). */
int  strata__model_build_for(const char *spec, const char *origin,
                             const strata__shape_t *input, int nclasses,
                             int loss, strata__model_t *m);
int  strata__model_build_graph_for(const strata__layer_line_t *lines, int n,
                                   const strata__shape_t *input,
                                   int nclasses, int loss,
                                   strata__model_t *m);
/* The job's model: its [graph] section when it has one, else [model]
 * layers (`layers`, its resolved value), for its [model] loss and metric
 * (m->loss); nclasses: the labels' classes, or values per sample of a
 * dense loss (0: any, for images without labels); ids_k: the data's id
 * features per sample (0: none). */
int  strata__model_build_cfg(const strata__cfg_t *cfg,
                             const strata__model_cfg_t *mc,
                             const strata__shape_t *input, int ids_k,
                             int nclasses, strata__model_t *m);
/* Every id of `d` in [-1, m->ids_vocab) when the model reads ids: 0, or
 * STRATA_EDATA after one line naming the file, the sample and the
 * column; a set without the ids the model reads: STRATA_EDATA, naming
 * `what` ("the test set") and the [data] key that gives them. */
int  strata__model_check_ids(const strata__model_t *m,
                             const strata__dataset_t *d, const char *what,
                             const char *key);
/* Glorot-uniform kernels (Keras's fans), zero biases, drawn from `seed`,
 * one random stream per layer: flat[m->count]. */
void strata__model_init(const strata__model_t *m, uint64_t seed, float *flat);
/* Elements [lo, lo + n) of variable vi's values of strata__model_init, the
 * same bits, without the rest of the model (the seeded stream is drawn
 * from its start: time linear in lo + n). STRATA_EINVAL out of range. */
int  strata__model_init_range(const strata__model_t *m, uint64_t seed, int vi,
                              size_t lo, size_t n, float *dst);
/* The state tensors' initial values: state[m->state_count]. */
void strata__model_init_state(const strata__model_t *m, float *state);
/* Keras-like summary: one line per layer (name, spec, output shape,
 * parameters; a graph's also its inputs) and the total, to `f`. */
void strata__model_summary(const strata__model_t *m, FILE *f);
/* The dropout seed of global step `step` of a run seeded with `seed`. */
uint64_t strata__model_step_seed(uint64_t seed, int64_t step);

/* Per-replica scratch for a slice of up to `rows` samples. */
typedef struct strata__work {
    int      rows;
    float   *x;                     /* rows x input_dim                     */
    int32_t *ids;                   /* rows x ids_k id features, or NULL   */
    int      ids_k;
    void    *y;                     /* rows labels: int32 ids or float rows */
    float   *act[STRATA_MAX_LAYERS];/* rows x out, outputs of each layer
                                       (NULL for alias layers: flatten)     */
    void    *aux[STRATA_MAX_LAYERS];/* per-layer scratch (pool argmax,
                                       conv2d im2col)                       */
    size_t   aux_bytes[STRATA_MAX_LAYERS];
    /* the model's state tensors, this replica's copy (state_count floats,
     * on the device; NULL when the model has none) */
    float   *state;
    /* Set by the caller when the step runs on several replicas: how a
     * layer sums its statistics over them (strata__pass_t.sum_replicas). */
    int    (*sum_replicas)(void *arg, double *sums, size_t n,
                           double *count);
    void    *sum_arg;
    /* the plan's nslots gradient buffers, rows x max_width each */
    float   *delta[STRATA_MAX_LAYERS + STRATA__MAX_INPUTS];
    /* Set by the caller before each training step: dropout draws from the
     * step's seed (strata__model_step_seed) and the slice's first row in
     * the global batch, so replicas draw what one device would. */
    uint64_t noise_seed;
    size_t   row0;
    /* timed: strata__model_step notes when the forward pass and the loss
     * are done (strata__now()), for the step timeline; on a GPU, when they
     * were queued (no wait is added to measure it). */
    int      timed;
    double   t_forward;
    /* Set by the caller: during the backward pass, called each time the
     * gradients [lo, model count) are final (lo decreasing; on a GPU once
     * the stream has run them), so that their reduce may start while the
     * earlier layers' backward runs. A non-zero return ends the step. */
    int    (*on_ready)(void *arg, size_t lo);
    void    *ready_arg;
    /* where the buffers above live (strata__work_alloc: cpu:0), and what a
     * GPU replica needs besides: page-locked staging for a batch, the raw
     * pixels on the device, the loss accumulator */
    int32_t         device;
    strata__kdev_t *kd;
    size_t          dim;            /* input_dim                            */
    uint8_t        *stage_x;        /* GPU: rows x dim pixels (floats for
                                       float32 data), page-locked            */
    void           *stage_y;        /* GPU: rows labels, page-locked        */
    int32_t        *stage_ids;      /* GPU: rows x ids_k ids, page-locked   */
    uint8_t        *pixels;         /* GPU: rows x dim pixels on the device */
    int             staged;         /* GPU: copies from stage_* in flight   */
    strata__xacc_t  acc;
    /* Embedding gradients as rows (strata__work_rows_alloc, rows.c): each
     * table's backward leaves its range of the gradients 0 and its rows in
     * grad_rows[j] (model order), what the step's strata_op_t carries.
     * NULL: every gradient dense. */
    strata_sparse_t           *grad_rows;
    int                        ntables;
    struct strata__row_buf    *row_buf;
    int                        row_slot[STRATA_MAX_LAYERS]; /* layer i's
                                       table j + 1; 0: none               */
    /* The strategy leaves the tables' ranges of the gradients as it found
     * them (STRATA_CAP_ROWS_APART): zeroed once, not at every backward. */
    int                        rows_apart;
} strata__work_t;

int  strata__work_alloc(const strata__model_t *m, int rows, strata__work_t *w);
/* About the bytes of work one row (sample) needs: input, activations,
 * deltas and the layers' scratch. */
size_t strata__work_row_bytes(const strata__model_t *m);
/* The same on `device`, the replica's device (work_alloc uses cpu:0). */
/* Bytes of one sample's label for the model's loss: an int32 class id,
 * or a float per unit of the last layer. */
size_t strata__model_label_bytes(const strata__model_t *m);
int  strata__work_alloc_on(const strata__model_t *m, int32_t device, int rows,
                           strata__work_t *w);
void strata__work_free(strata__work_t *w);
/* rows.c: the buffers of every embedding table's gradient as rows, for
 * a CPU replica whose strategy takes them (STRATA_CAP_SPARSE); then each
 * step's backward gives them (strata__work_rows_* below). */
int  strata__work_rows_alloc(const strata__model_t *m, strata__work_t *w);
void strata__work_rows_free(strata__work_t *w);
/* Before a step: no rows yet. */
void strata__work_rows_reset(strata__work_t *w);
/* Layer i's pass gives rows (p->row_*) when the work has its table. */
void strata__work_rows_pass(strata__work_t *w, int i, strata__pass_t *p);
/* After layer i's backward: its rows as the op carries them. */
void strata__work_rows_done(strata__work_t *w, int i);

/* This replica's state tensors (state_count floats) to the host, or from
 * it; nothing for a model without. */
int  strata__work_state_get(const strata__model_t *m, strata__work_t *w,
                            float *host);
int  strata__work_state_set(const strata__model_t *m, strata__work_t *w,
                            const float *host);

/* Samples perm[first .. first + rows) of `d` (perm NULL: first ..) into
 * w->x / w->y, on the work's device: strata__batch_fill on a CPU; on a GPU
 * the raw pixels and labels go through page-locked staging to the device
 * and are scaled there (kops u8_to_f32). rows <= w->rows. */
int  strata__model_load_batch(strata__work_t *w, const strata__dataset_t *d,
                              const uint32_t *perm, size_t first, size_t rows);

/* Forward + backward (training: dropout on) of `rows` samples already in
 * w->x / w->y, with the variables of replica `r` (m->vars[i].value[r]);
 * gradients go to the flat buffer `grads` (m->count), scaled by `scale`
 * (1 / global batch for a mean loss). *loss = the summed loss, *metric +=
 * the summed metric (correct rows for the accuracies). On a GPU the variables, `grads` and the work must be
 * on the work's device; loss and metric come back to the host once per
 * call, the call's only wait for the GPU. */
int strata__model_step(const strata__model_t *m, int r, strata__work_t *w,
                       int rows, float *grads, float scale, double *loss,
                       double *metric);
/* Forward only (evaluation: dropout off). */
int strata__model_evaluate(const strata__model_t *m, int r, strata__work_t *w,
                           int rows, double *loss, double *metric);
/* Forward only (dropout off) of `rows` samples already in w->x: the last
 * layer's outputs, rows x m->nclasses floats, into the host buffer `out`;
 * probs: softmax over each row (in double, max subtracted), else the raw
 * logits. Done when it returns (on a GPU: waits for the stream). */
int strata__model_predict(const strata__model_t *m, int r, strata__work_t *w,
                          int rows, int probs, float *out);

#endif /* STRATA_CORE_MODEL_H */
