/* strata -- the public API for applications that embed a training run.
 *
 * Objects are opaque; create leaves *out NULL on failure and destroy accepts
 * NULL. Every function returns 0 or a negative STRATA_E* code; the detail
 * (file:line, key, peer) has already been logged where it was known. */
#ifndef STRATA_H
#define STRATA_H

#include <stddef.h>
#include <stdint.h>

#include "strata/errno.h"
#include "strata/version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define STRATA_API __attribute__((visibility("default")))
#else
#define STRATA_API
#endif

typedef struct strata_ctx strata_ctx_t;

/* Text of an error code ("out of memory") and its name ("STRATA_ENOMEM"). */
STRATA_API const char *strata_strerror(int err);
STRATA_API const char *strata_err_name(int err);
STRATA_API const char *strata_version(void);

/* The CPU kernels GEMM runs on, for a banner, into buf[cap]: the BLAS, its
 * kernels and their instruction set ("OpenBLAS 0.3.21 Haswell (AVX2)"),
 * and what is wrong when they do not fit this CPU. Returns 0, or
 * STRATA_EINVAL for a NULL or empty buffer. */
STRATA_API int strata_gemm_kernels(char *buf, size_t cap);
/* The kernels CPU convolutions run on by default, in words: "direct
 * (AVX-512)", "direct (AVX2)" (the same bits as each other and as the
 * portable path), or "im2col + GEMM" on CPUs without AVX2 and FMA. A
 * static string. */
STRATA_API const char *strata_conv_kernels(void);
/* OpenBLAS picks its kernels from the CPU's model number, once, while the
 * library loads; a CPU newer than the library gets its oldest kernels
 * (SSE3), several times slower. This returns the OPENBLAS_CORETYPE value
 * that gives this CPU's best kernels when the running ones are weaker and
 * the variable is unset, else NULL. It takes effect only in a process that
 * starts with it in its environment: the strata command re-executes itself
 * once with it; an embedder sets it before loading libstrata (a run that
 * starts without it logs one warning naming the value). */
STRATA_API const char *strata_blas_coretype_hint(void);

/* A run described by `ini_path` (NULL: compiled-in defaults only), with
 * STRATA_<SECTION>_<KEY> environment overrides applied. */
STRATA_API int  strata_ctx_create(const char *ini_path, strata_ctx_t **out);
STRATA_API void strata_ctx_destroy(strata_ctx_t *ctx);

/* Override one key, "section.key=value" (as the CLI's --set). */
STRATA_API int strata_ctx_set(strata_ctx_t *ctx, const char *assignment);

/* Which task of the cluster this process is, "TYPE:INDEX" (as the CLI's
 * --task): overrides the task named by [cluster], TF_CONFIG, SLURM or
 * torchrun variables; checked when the run starts. */
STRATA_API int strata_ctx_set_task(strata_ctx_t *ctx, const char *task);

/* Value of a resolved key, or NULL. Valid until the ctx is destroyed. */
STRATA_API const char *strata_ctx_get(strata_ctx_t *ctx, const char *section,
                                      const char *key);

/* Keras's name of the job's metric ([model] metric, auto resolved by
 * [model] loss): "accuracy", "mae", "sparse_top_k_categorical_accuracy",
 * ... The `accuracy` and `val_accuracy` figures of the reports and events
 * below are this metric's values. NULL when the job's settings are
 * invalid (the error was logged). Valid until the ctx is destroyed.
 * (Appended with plugin ABI 2.6.) */
STRATA_API const char *strata_metric_name(strata_ctx_t *ctx);

/* What a run reports reaches the application through callbacks set on its
 * context: libstrata writes nothing to stdout itself, and a context with no
 * callbacks trains silently (the `strata` command sets callbacks that print
 * as Keras does). Log lines (errors, warnings, info) go to the log callback
 * when set, else to stderr, one line each. Contexts are independent: two of
 * them may train at once in two threads of one process, each with its own
 * callbacks and [log] level. text and epoch are called on the thread that
 * called strata_train() or strata_eval(); log on any thread of the run;
 * never two at once for one context. */
typedef struct strata_epoch_report {
    int32_t epoch;          /* 0-based                                       */
    int32_t epochs;         /* the run touches: [train] epochs, or fewer     */
                            /* when max_steps ends it in an earlier one      */
    int64_t steps;          /* steps run in this epoch                       */
    double  loss, accuracy; /* training, over the epoch's steps; accuracy: */
                            /* the job's metric (strata_metric_name)         */
    int32_t has_val;        /* 1: val_* hold the test-set evaluation         */
    double  val_loss, val_accuracy;
    double  seconds;        /* of training steps                             */
    double  samples_per_s;
} strata_epoch_report_t;

/* One event of a run, for an application that watches it as strata's own
 * outputs do (progress, metrics CSV, TensorBoard, trace are observers of
 * the same events). Fields a kind does not name are 0. (Appended in 0.3.) */
enum {
    STRATA_EVENT_EPOCH_BEGIN = 1, /* epoch; steps: it will run             */
    STRATA_EVENT_STEP        = 2, /* one per step this process trained, in */
                                  /* order, delivered after each group of  */
                                  /* at most 32 steps: epoch, step (global,*/
                                  /* 0-based), loss and accuracy over this */
                                  /* process's samples of it, its learning */
                                  /* rate, seconds (its wall time here)    */
    STRATA_EVENT_EVAL        = 3, /* the test set was evaluated: step (the */
                                  /* steps done), loss, accuracy, seconds; */
                                  /* strata_eval*() deliver one too: loss, */
                                  /* accuracy, steps (the samples scored)  */
    STRATA_EVENT_CHECKPOINT  = 4, /* a checkpoint was written: step (the   */
                                  /* steps it holds), seconds              */
    STRATA_EVENT_EPOCH_END   = 5, /* as strata_epoch_report_t, on every    */
                                  /* task; comm_share too                  */
    STRATA_EVENT_RUN_END     = 6, /* the replicas have stopped: result     */
};

typedef struct strata_event {
    uint32_t struct_size;     /* sizeof(strata_event_t) of the library      */
    int32_t  kind;            /* STRATA_EVENT_*                              */
    int32_t  epoch;           /* 0-based                                     */
    int32_t  has_val;         /* EPOCH_END: val_* hold the evaluation        */
    int64_t  step;
    int64_t  steps;
    double   loss, accuracy;
    double   learning_rate;   /* STEP; EPOCH_END: of its last step           */
    double   seconds;
    double   val_loss, val_accuracy;
    double   samples_per_s;   /* EPOCH_END                                   */
    double   comm_share;      /* EPOCH_END: the share of the replicas' step  */
                              /* time spent waiting and reducing; -1: none   */
                              /* measured                                    */
    int32_t  result;          /* RUN_END: 0, or the run's error so far       */
} strata_event_t;

typedef struct strata_callbacks {
    uint32_t struct_size;   /* sizeof(strata_callbacks_t)                    */
    void    *user;          /* passed back to every callback                 */
    /* Text as a terminal would show it: the start banner and model summary,
     * progress (on a terminal "\r"-redrawn bars), "resumed from", "done:",
     * strata_eval()'s result. NULL: none. */
    void (*text)(void *user, const char *text);
    /* Once per epoch of training, on the chief only. NULL: none. */
    void (*epoch)(void *user, const strata_epoch_report_t *report);
    /* Each log line of this context that its [log] level lets through:
     * "strata: WHO: [error: |warning: ]message", no newline; `level` is
     * 0 error, 1 warning, 2 info, 3 debug. NULL: the lines go to stderr.
     * (Appended in 0.2: set struct_size to include it.) */
    void (*log)(void *user, int level, const char *line);
    /* Every event of the run on this process (strata_event_t), on the
     * thread that called strata_train(). NULL: none. (Appended in 0.3.) */
    void (*event)(void *user, const strata_event_t *event);
} strata_callbacks_t;

/* Set (a copy of *cb) or clear (cb NULL) the context's callbacks. */
STRATA_API int strata_ctx_set_callbacks(strata_ctx_t *ctx,
                                        const strata_callbacks_t *cb);

/* Train as configured; blocks until done. 0 on success. */
STRATA_API int strata_train(strata_ctx_t *ctx);

/* Ask a running strata_train() to stop at the next step boundary (every
 * worker of the job agrees on which), write a last checkpoint when
 * [checkpoint] dir is set, and return STRATA_ESTOPPED. Async-signal-safe:
 * call it from a SIGTERM/SIGINT handler. The request ends with the
 * strata_train() it was made during (or before): a later strata_train()
 * of the context runs afresh. */
STRATA_API void strata_request_stop(strata_ctx_t *ctx);

/* Evaluate the checkpoint at `path` on the configured test set; the loss
 * and accuracy go to the text callback. */
STRATA_API int strata_eval(strata_ctx_t *ctx, const char *path);

/* Print a checkpoint's tensors, shapes and metadata to stdout. */
STRATA_API int strata_inspect(const char *path);

/* Called once per plugin found along the search path. */
typedef void (*strata_plugin_cb)(void *user, const char *name, const char *kind,
                                 int abi_major, int abi_minor,
                                 const char *version, const char *description,
                                 const char *path, int status);
STRATA_API int strata_plugins_list(strata_ctx_t *ctx, strata_plugin_cb cb,
                                   void *user);
/* What plugin `name` of the search path can do (plugin ABI 2.5): its
 * STRATA_CAP_* word (<strata/plugin.h>; derived for a plugin built before
 * 2.5) in *caps and, when text is not NULL, the bits' names ("state,clip",
 * "-" for none). STRATA_ENOPLUGIN when no plugin of that name is on the
 * path; a broken one: the error that `strata plugins` lists. */
STRATA_API int strata_plugin_caps(strata_ctx_t *ctx, const char *name,
                                  uint32_t *caps, char *text, size_t cap);

/* strata_eval on the samples of an images file and its labels file
 * instead of the configured test set: read as [data] test_images and
 * test_labels are (IDX or .npy by extension; uint8 pixels scaled by 1/255,
 * float32 used as they are; integer labels), every sample, the paths as
 * given. images and labels NULL: strata_eval. The same line goes to the
 * text callback. */
STRATA_API int strata_eval_data(strata_ctx_t *ctx, const char *path,
                                const char *images, const char *labels);
/* The same for a model that reads id features ('ids' in [graph], an
 * embedding's): `ids` is their file, one row per sample of `images` (read
 * and checked as [data] test_ids is); NULL: none, strata_eval_data.
 * (Appended with the embeddings.) */
STRATA_API int strata_eval_data_ids(strata_ctx_t *ctx, const char *path,
                                    const char *images, const char *labels,
                                    const char *ids);

/* strata_predict's flags. */
#define STRATA_PREDICT_LOGITS 1u /* the last layer's raw outputs (logits) */

/* Keras' model.predict: the outputs of the configured model ([model]
 * layers or [graph]) with the variables of checkpoint `path` for every
 * sample of the images file `data` (as strata_eval_data reads images; its
 * features must be those the checkpoint's model was trained on), computed
 * `batch_size` samples at a time (0: [train] batch_size; dropout off),
 * written to `out` as a float32 .npy of shape (samples, units of the last
 * layer): softmax probabilities, or with STRATA_PREDICT_LOGITS the logits.
 * `out` is replaced atomically (temp file beside it, fsync, rename); a
 * symbolic link or a directory there is refused, and so is the checkpoint
 * or the data file itself; a FIFO, character device or socket is written
 * in place. On any error nothing is written. */
STRATA_API int strata_predict(strata_ctx_t *ctx, const char *path,
                              const char *data, const char *out,
                              int batch_size, unsigned flags);
/* The same for a model that reads id features ('ids' in [graph], an
 * embedding's): `ids` is their file (.npy or "mem:NAME", int32 or int64,
 * (n,) or (n, k), one row per sample of `data`, -1 padding), checked as
 * [data] train_ids is, every id within the tables; NULL: none, which is
 * strata_predict. Keras' model.predict([x, ids]). (Appended with the
 * embeddings.) */
STRATA_API int strata_predict_ids(strata_ctx_t *ctx, const char *path,
                                  const char *data, const char *ids,
                                  const char *out, int batch_size,
                                  unsigned flags);

/* Every key of the job with its effective value (the text the option
 * parser reads) and the source that won: "job.ini:4", "env
 * STRATA_TRAIN_EPOCHS", "--set", or "default" for a key nobody set. The
 * keys: the core sections' ("train.epochs"); the selected strategy's and
 * those of each installed transport that [transport]'s lists name
 * ("strategy.mirrored.shard_optimizer"); the [graph] section's layer
 * lines ("graph.LAYER"). First the checks strata_train() makes of those
 * values: an invalid one is its error, logged with file:line. `keys`
 * (NULL-terminated "SECTION.KEY" names, or NULL for every key) picks which
 * are reported, in their order; an unknown one is STRATA_ECONFIG after an
 * error naming the nearest valid key. The `config` command. */
typedef void (*strata_config_cb)(void *user, const char *key,
                                 const char *value, const char *origin);
STRATA_API int strata_config_list(strata_ctx_t *ctx, const char *const *keys,
                                  strata_config_cb cb, void *user);

/* In-memory data (appended in 0.4): arrays in place of data files.
 * Element types of strata_ctx_set_array, as NumPy's dtypes. */
enum {
    STRATA_DTYPE_UINT8 = 1, STRATA_DTYPE_INT8 = 2,  STRATA_DTYPE_INT16 = 3,
    STRATA_DTYPE_UINT16 = 4, STRATA_DTYPE_INT32 = 5, STRATA_DTYPE_UINT32 = 6,
    STRATA_DTYPE_INT64 = 7, STRATA_DTYPE_UINT64 = 8, STRATA_DTYPE_FLOAT32 = 9
};

/* Register the C-order array `data` of `dtype` and shape dims[0..ndim)
 * (1 to 4 dimensions, each > 0; native byte order, i.e. little-endian on
 * the hosts strata builds for) under `name` (1 to 63 of A-Z a-z 0-9 _ - .)
 * on ctx. Wherever a data file is named -- [data] train_images,
 * train_labels, test_*, validation_*, strata_eval_data()'s images and
 * labels, strata_predict()'s data -- "mem:NAME" reads this array exactly
 * as a .npy file of the same dtype and shape is read: the same checks
 * (images uint8 or float32 of 2 to 4 dimensions, finite; labels integers
 * of shape (n,); as many labels as images), the same messages naming
 * "mem:NAME", the same training to the bit. A "mem:" path is never joined
 * to [data] dir.
 * Borrowed, not copied: `data` must stay valid and unchanged until the
 * name is registered again or cleared, or ctx destroyed. A run copies what
 * it uses when it loads its data (at the start of strata_train(),
 * strata_eval*(), strata_predict()), as it reads a file, and never writes
 * to it. Not while a run of ctx is in progress. data NULL: clear the name
 * (none: no error). Returns 0, STRATA_EINVAL (a bad name, dtype, rank or
 * dimension, or over 1 GiB; one line logged) or STRATA_ENOMEM. An unknown
 * name is found when a run reads it: STRATA_ENOENT, logged. */
STRATA_API int strata_ctx_set_array(strata_ctx_t *ctx, const char *name,
                                    const void *data, int dtype, int ndim,
                                    const int64_t *dims);

/* Collectives for any framework (appended in 0.5): a communicator over the
 * training processes of the job (its chief and workers, in rank order),
 * joined as strata_train() joins them -- the cluster from [cluster],
 * TF_CONFIG, strata launch, torchrun, Open MPI or SLURM (the rendezvous
 * where addresses are not known), the transports of [transport] world
 * (zmq, nccl; [transport.NAME] keys), and, for a job of several processes,
 * the job's CURVE keys: every connection authenticated and encrypted, a
 * stranger's bytes dropped ([security] as for a run). A collective blocks
 * until every member has called it, bounded by the transport's timeout
 * ([transport.zmq] timeout_s): STRATA_ETIMEDOUT or STRATA_EPEER, logged,
 * naming the member that failed. Every member calls the same collectives
 * in the same order with the same counts. Buffers are host float32 arrays
 * owned by the caller; the calls are in place. A comm may be used from
 * any thread, one collective at a time (calls from several threads are
 * serialised). In a job of one process every collective returns at once:
 * the buffer already holds the result. */
typedef struct strata_comm strata_comm_t;

/* Reduction of strata_comm_allreduce / strata_comm_reduce_scatter, with
 * STRATA_COMM_GRADIENT or'ed in when buf holds gradients: the transport
 * may then carry them in 16 bits per value, summed in float32, as the
 * job's [transport.zmq] compression = fp16 | bf16 says (Horovod's
 * Compression.fp16); without the flag, or without compression, exact. */
#define STRATA_COMM_SUM      0
#define STRATA_COMM_MEAN     1
#define STRATA_COMM_GRADIENT 0x100

/* Join the job's world described by ctx's configuration and environment
 * (strata_ctx_set_task picks the task, as for a run). Blocks while the
 * members connect (up to the transport's timeout). The task's own address
 * is bound: not while a run of ctx (or another comm of the task) is open.
 * A task that does not train (ps, evaluator) is refused (STRATA_ECONFIG).
 * ctx must outlive the comm. */
STRATA_API int  strata_comm_open(strata_ctx_t *ctx, strata_comm_t **out);
/* Leave the world (bounded); accepts NULL. */
STRATA_API void strata_comm_close(strata_comm_t *comm);
/* This process's rank, 0 .. size - 1, and the members; STRATA_EINVAL for a
 * NULL comm. */
STRATA_API int strata_comm_rank(const strata_comm_t *comm);
STRATA_API int strata_comm_size(const strata_comm_t *comm);
/* How many hosts the members are on (by their addresses): 1 when they
 * share this machine's cores, where overlapping collectives with compute
 * slows both down. STRATA_EINVAL for a NULL comm. */
STRATA_API int strata_comm_hosts(const strata_comm_t *comm);
/* The transport plugin the comm runs over ("zmq"; "none" alone). */
STRATA_API const char *strata_comm_transport(const strata_comm_t *comm);

/* buf[0..count): the sum (or mean) of every member's, bitwise equal on
 * every member. */
STRATA_API int strata_comm_allreduce(strata_comm_t *comm, float *buf,
                                     size_t count, int op);
/* buf[0..count) of member `root` on every member. */
STRATA_API int strata_comm_broadcast(strata_comm_t *comm, float *buf,
                                     size_t count, int root);
/* buf holds size * count floats, member m's block at m * count: each
 * member fills its own block; on return every block holds its owner's. */
STRATA_API int strata_comm_allgather(strata_comm_t *comm, float *buf,
                                     size_t count);
/* buf holds size * count floats on every member; on return this member's
 * block (at rank * count) holds the sum (or mean) of every member's values
 * of that block; the other blocks are scratch. */
STRATA_API int strata_comm_reduce_scatter(strata_comm_t *comm, float *buf,
                                          size_t count, int op);
/* Every member meets. */
STRATA_API int strata_comm_barrier(strata_comm_t *comm);

/* An elastic job (strata launch --elastic MIN:MAX COMMAND): the world is
 * the generation of workers the job's membership service formed, as for
 * an elastic mwms run. A member that dies fails the others' collective
 * (STRATA_EPEER or STRATA_ETIMEDOUT); each of them then calls
 * strata_comm_regroup with the steps it has applied, and goes on in the
 * next generation (new rank and size), where rank 0 holds the newest
 * state: *resume_step (-1: no member holds one) is the step every member
 * goes on from, after taking rank 0's state (a broadcast). A worker that
 * launch restarts, or that joins, opens its comm into a generation whose
 * strata_comm_resume_step() is >= 0 when the job is under way (it takes
 * the state from rank 0 too); the members learn of it through
 * strata_comm_resize_due() (1: a later generation is due; never blocks),
 * agree on it at a step boundary (an all-reduce of the flag) and regroup
 * there. strata_comm_finish(comm, steps) tells the service training is
 * over (workers still to join are told so), before strata_comm_close.
 * Outside an elastic job regroup is STRATA_ENOTSUP (logged), resize_due 0,
 * finish nothing. Blocks while the generation forms, bounded by [cluster]
 * rendezvous_timeout_s. */
STRATA_API int strata_comm_regroup(strata_comm_t *comm, int64_t committed,
                                   int64_t *resume_step);
STRATA_API int64_t strata_comm_resume_step(const strata_comm_t *comm);
STRATA_API int strata_comm_resize_due(strata_comm_t *comm);
STRATA_API void strata_comm_finish(strata_comm_t *comm, int64_t steps);

#ifdef __cplusplus
}
#endif
#endif /* STRATA_H */
