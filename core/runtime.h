/* strata core -- the run: context, model, host services, training loop.
 * Internal; never installed. */
#ifndef STRATA_CORE_RUNTIME_H
#define STRATA_CORE_RUNTIME_H

#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"
#include "data/data.h"
#include "kops.h"

/* ---- model.c: a Sequential stack of dense layers ----------------------- */

typedef struct strata__layer {
    int in, out;
    int relu;                       /* ReLU after the affine map           */
} strata__layer_t;

typedef struct strata__model {
    int             nlayers;
    strata__layer_t layers[STRATA_MAX_LAYERS];
    int             input_dim, nclasses, max_width;
    int             nvars;          /* 2 per layer: kernel, bias           */
    size_t          count;          /* float32 elements in the flat layout */
    strata_var_t    vars[2 * STRATA_MAX_LAYERS];
    char            names[2 * STRATA_MAX_LAYERS][32];
} strata__model_t;

/* Parse "dense 128 relu, dense 10" for inputs of `input_dim` features and
 * labels in [0, nclasses); the last layer needs at least nclasses units and
 * no ReLU
 * ("softmax" is accepted there: the loss applies it). Fills vars[]
 * descriptors (name, shape, count, offset) but no storage. */
int  strata__model_build(const char *spec, int input_dim, int nclasses,
                         strata__model_t *m);
/* Glorot-uniform kernels, zero biases, drawn from `seed`: flat[m->count]. */
void strata__model_init(const strata__model_t *m, uint64_t seed, float *flat);

/* Per-replica scratch for a slice of up to `rows` samples. */
typedef struct strata__work {
    int      rows;
    float   *x;                     /* rows x input_dim                     */
    int32_t *y;                     /* rows                                 */
    float   *act[STRATA_MAX_LAYERS];/* rows x out, outputs of each layer    */
    float   *delta[2];              /* rows x max_width, ping-pong          */
    /* where the buffers above live (strata__work_alloc: cpu:0), and what a
     * GPU replica needs besides: page-locked staging for a batch, the raw
     * pixels on the device, the loss accumulator */
    int32_t         device;
    strata__kdev_t *kd;
    size_t          dim;            /* input_dim                            */
    uint8_t        *stage_x;        /* GPU: rows x dim pixels, page-locked  */
    int32_t        *stage_y;        /* GPU: rows labels, page-locked        */
    uint8_t        *pixels;         /* GPU: rows x dim pixels on the device */
    int             staged;         /* GPU: copies from stage_* in flight   */
    strata__xacc_t  acc;
} strata__work_t;

int  strata__work_alloc(const strata__model_t *m, int rows, strata__work_t *w);
/* The same on `device`, the replica's device (work_alloc uses cpu:0). */
int  strata__work_alloc_on(const strata__model_t *m, int32_t device, int rows,
                           strata__work_t *w);
void strata__work_free(strata__work_t *w);

/* Samples perm[first .. first + rows) of `d` (perm NULL: first ..) into
 * w->x / w->y, on the work's device: strata__batch_fill on a CPU; on a GPU
 * the raw pixels and labels go through page-locked staging to the device
 * and are scaled there (kops u8_to_f32). rows <= w->rows. */
int  strata__model_load_batch(strata__work_t *w, const strata__dataset_t *d,
                              const uint32_t *perm, size_t first, size_t rows);

/* Forward + backward of `rows` samples already in w->x / w->y, with the
 * variables of replica `r` (m->vars[i].value[r]); gradients go to the flat
 * buffer `grads` (m->count), scaled by `scale` (1 / global batch for a mean
 * loss). Returns the summed loss; adds correct predictions to *correct. */
double strata__model_train_step(const strata__model_t *m, int r,
                                strata__work_t *w, int rows, float *grads,
                                float scale, int64_t *correct);
/* Forward only (evaluation): summed loss, correct predictions. */
double strata__model_eval(const strata__model_t *m, int r, strata__work_t *w,
                          int rows, int64_t *correct);
/* The two above with an error code (a GPU can fail): *loss = summed loss,
 * *correct += correct predictions. On a GPU the variables, `grads` and the
 * work must be on the work's device; loss and correct come back to the
 * host once per call, the call's only wait for the GPU. */
int strata__model_step(const strata__model_t *m, int r, strata__work_t *w,
                       int rows, float *grads, float scale, double *loss,
                       int64_t *correct);
int strata__model_evaluate(const strata__model_t *m, int r, strata__work_t *w,
                           int rows, double *loss, int64_t *correct);

/* ---- optimizer.c: the [optimizer] section as host opt_* services ------- */

struct strata_opt {
    int     kind;                   /* STRATA__OPT_*                        */
    int32_t device;
    size_t  count;
    int64_t t;                      /* updates applied                       */
    float   momentum, beta1, beta2, epsilon;
    float  *m, *v;                  /* slots (NULL when the kind has none)  */
    strata__kdev_t *kd;             /* the kernels of `device`               */
};

int  strata__opt_create(const strata__optimizer_cfg_t *cfg, int32_t device,
                        size_t count, strata_opt_t **out);
int  strata__opt_step(strata_opt_t *opt, float *param, const float *grad,
                      size_t count, float lr);
void strata__opt_destroy(strata_opt_t *opt);
/* host->opt_io: slots and step count to (set = 0) or from host buffers. */
int  strata__opt_io(strata_opt_t *opt, int set, float *const *slots,
                    int nslots, int64_t *steps);

/* ---- fpenv.c: flush denormals to zero in the calling thread ------------ */
void strata__fpenv_fast(void);

/* ---- device.c ------------------------------------------------------------ */

/* Parse "cpu:0, cpu:1" (empty: one CPU replica per online core). */
int  strata__devices_parse(const char *spec, int32_t *out, int max, int *n);
const char *strata__device_str(int32_t dev, char *buf, size_t len);
void *strata__dev_alloc(int32_t device, size_t bytes);
void  strata__dev_free(int32_t device, void *p);
int   strata__dev_copy(int32_t dst_dev, void *dst, int32_t src_dev,
                       const void *src, size_t bytes);
/* 1 when the bytes at a (on dev_a) and b (on dev_b) are equal, 0 when not,
 * or a negative STRATA_E* code (debug.check_sync on any device). */
int   strata__dev_equal(int32_t dev_a, const void *a, int32_t dev_b,
                        const void *b, size_t bytes);

/* ---- ctx.c / host.c ---------------------------------------------------- */

typedef struct strata__loaded {
    strata__plugin_t *plugin;
} strata__loaded_t;

struct strata_ctx {
    strata__cfg_t      *cfg;
    strata__settings_t  s;
    char               *config_path;   /* NULL: defaults only               */
    char               *search_path;   /* plugin search path                */
    char               *task;          /* --task TYPE:INDEX, or NULL        */
    atomic_int          stop;          /* strata_request_stop() was called  */
    strata__plugin_t   *plugins[STRATA_MAX_PLUGINS];
    int                 nplugins;
    int                 settings_ok;
};

/* Make `ctx` the run that host services act on (one per process at a time)
 * and return the host table handed to its plugins. */
const strata_host_v1_t *strata__host(strata_ctx_t *ctx);
/* Bytes that plugins placed through host alloc and opt_create (variables
 * and optimizer slots), counted since the process started. */
size_t strata__host_placed_bytes(void);
/* Load (once per ctx) plugin `name` of `kind`. */
int strata__ctx_plugin(strata_ctx_t *ctx, const char *name, uint32_t kind,
                       strata__plugin_t **out);
/* Resolve settings (core sections) after every override is in. */
int strata__ctx_resolve(strata_ctx_t *ctx);
/* Parse `section`'s keys for plugin `p` into a new cfg struct (calloc'd,
 * p->vt->cfg_size bytes, at least 1). `lenient` tolerates keys the plugin
 * does not know (they belong to another plugin of the same section). */
int strata__plugin_cfg(strata_ctx_t *ctx, const strata__plugin_t *p,
                       const char *section, int lenient, void **out);

/* ---- train.c ------------------------------------------------------------- */

int strata__train(strata_ctx_t *ctx);
/* host->evaluate and host->report, for the run whose drive() is running. */
int strata__host_evaluate(double *loss, double *acc);
int strata__host_report(const strata_report_t *r);
/* host->boundary_due and host->boundary (ABI 1.2). */
int strata__host_boundary_due(int32_t epoch, int64_t batch, int64_t step);
int strata__host_boundary(int32_t epoch, int64_t batch, int64_t step);

#endif /* STRATA_CORE_RUNTIME_H */

/* ---- progress.c: the Keras-like progress line ---------------------------- */

enum { STRATA__PROGRESS_AUTO = 0, STRATA__PROGRESS_BAR = 1,
       STRATA__PROGRESS_LINE = 2, STRATA__PROGRESS_NONE = 3 };

typedef struct strata__progress {
    int     mode;            /* BAR / LINE / NONE after resolving AUTO      */
    int     epoch, epochs;
    int64_t total;           /* steps in this epoch                         */
    double  t0, last;        /* epoch start, last redraw (seconds)          */
} strata__progress_t;

double strata__now(void);    /* monotonic seconds */
void strata__progress_init(strata__progress_t *p, int mode, int epochs);
void strata__progress_begin(strata__progress_t *p, int epoch, int64_t total);
/* Redraws at most every 100 ms (BAR mode only). */
void strata__progress_step(strata__progress_t *p, int64_t done, double loss,
                           double acc);
/* The epoch's closing line (`secs` of training); val_* when has_val. */
void strata__progress_end(strata__progress_t *p, int64_t done, double secs,
                          double loss, double acc, int has_val,
                          double val_loss, double val_acc);
