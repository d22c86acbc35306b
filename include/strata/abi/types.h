/* strata -- the data structs that plugins and the core exchange, of every
 * ABI version: what init() is handed (env, group, cluster), what every call
 * carries (var, op, shards, step, drive, report, state, membership).
 *
 * These are the structs that GROW: a new member is appended at the END of
 * a struct only, with a minor bump in version.h and its rows in
 * tests/abi/abi_history.txt; readers guard it with STRATA_HAS_FIELD. The
 * frozen tables (host and plugin vtables) are in plugin_v1.h (major 1) and
 * plugin_v2.h (major 2). tests/abi/ checks every offset against a golden
 * file.
 *
 * Include <strata/plugin.h>, not this file. */
#ifndef STRATA_ABI_TYPES_H
#define STRATA_ABI_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
/* ---- devices --------------------------------------------------------- */

/* A device id is one int32: STRATA_DEVICE(type, index). */
#define STRATA_DEV_CPU 0
#define STRATA_DEV_GPU 1
#define STRATA_DEVICE(type, index) ((int32_t)(((type) << 16) | ((index) & 0xffff)))
#define STRATA_DEVICE_TYPE(dev)    ((int32_t)(dev) >> 16)
#define STRATA_DEVICE_INDEX(dev)   ((int32_t)(dev) & 0xffff)

/* ---- configuration options (rule 12) --------------------------------- */

enum strata_opt_type {
    STRATA_OPT_INT    = 1, /* int64_t at offset                         */
    STRATA_OPT_FLOAT  = 2, /* double at offset                          */
    STRATA_OPT_BOOL   = 3, /* int (0/1) at offset; true/false/yes/no/1/0 */
    STRATA_OPT_STRING = 4, /* const char * at offset, owned by the core */
    STRATA_OPT_ENUM   = 5, /* int at offset: index into `choices`       */
    STRATA_OPT_SIZE   = 6  /* int64_t bytes at offset; suffixes K/M/G   */
};

/* One key of a plugin's (or the core's) config section. A table ends with a
 * member whose key is NULL. The core parses, validates and stores every key
 * into a zeroed struct of the plugin's cfg_size before init(), so a plugin
 * never parses text. Errors name file:line, section, key and expectation. */
typedef struct strata_option {
    const char *key;     /* "reduce_op"                                      */
    uint32_t    type;    /* enum strata_opt_type                             */
    uint32_t    flags;   /* reserved, 0                                      */
    const char *def;     /* default as text; NULL = the key is required      */
    size_t      offset;  /* offsetof(your_cfg, member)                       */
    double      min;     /* INT/FLOAT/SIZE bounds, inclusive; no bounds when */
    double      max;     /*   min > max or both are 0                        */
    const char *choices; /* ENUM: "mean|sum"                                 */
    const char *help;    /* one line for etc/strata.ini and `strata plugins` */
} strata_option_t;

/* ---- what a plugin is handed ----------------------------------------- */

/* Where tasks of the job live (resolved by the core from the CLI, the INI
 * [cluster] section, TF_CONFIG, SLURM or torchrun variables). */
typedef struct strata_task {
    const char *type;    /* "chief" | "worker" | "ps" | "evaluator"          */
    int32_t     index;   /* index within its type                            */
    int32_t     rank;    /* rank among the tasks that train (chief+workers)  */
    const char *address; /* "host:port"; NULL for a job on one process       */
} strata_task_t;

typedef struct strata_cluster {
    uint32_t             struct_size;
    int32_t              ntasks;
    const strata_task_t *tasks;     /* ntasks entries                         */
    int32_t              self;      /* index of this process in `tasks`       */
    int32_t              nworkers;  /* tasks that train: chief + workers      */
    const char          *rendezvous;/* "host:port" where tasks whose address  */
                                    /* is NULL announce themselves (torchrun's */
                                    /* MASTER_ADDR:PORT); NULL when all known  */
    const char          *source;    /* where the spec came from, for messages: */
                                    /* "TF_CONFIG", "SLURM", "[cluster]", ...  */
} strata_cluster_t;

/* Scope of a transport group. */
#define STRATA_SCOPE_LOCAL 1 /* members are replica threads of one process */
#define STRATA_SCOPE_WORLD 2 /* one member per process (task)              */

/* A communicator: the members a transport instance connects. */
typedef struct strata_group {
    uint32_t       struct_size;
    int32_t        scope;        /* STRATA_SCOPE_*                                  */
    int32_t        size;         /* members in the whole group                     */
    int32_t        rank;         /* WORLD: this process's member; LOCAL: 0          */
    int32_t        nlocal;       /* members that call from this process            */
    int32_t        timeout_ms;   /* bound on every wait; 0: the transport's own    */
    const int32_t *devices;      /* nlocal entries: device of each local member    */
    const char *const *addrs;    /* WORLD: `size` "host:port" (rank order); else NULL */
    const char *const *names;    /* WORLD: `size` task names for errors, e.g. "worker:1" */
    const char    *tag;          /* unique name of this group within the job        */
    /* ---- ABI 1.3 (STRATA_HAS_FIELD(strata_group_t, g, flags)) ---- */
    uint32_t       flags;        /* STRATA_GROUP_*: what the opener asks of it      */
    /* ---- ABI 2.1 (STRATA_HAS_FIELD(strata_group_t, g, public_keys)) ---- */
    /* Security, filled in by the core (never by a strategy) when the job
     * runs with [security] on: WORLD groups only. NULL: plaintext. */
    const char *const *public_keys; /* `size` CURVE public keys, Z85 text of
                                     * 40 characters, in rank order: the only
                                     * peers this member may accept          */
    const char    *secret_key;   /* this member's CURVE secret key, Z85 (40);
                                  * owned by the core, valid until fini      */
} strata_group_t;

/* strata_group_t.flags */
#define STRATA_GROUP_P2P 0x1u /* point to point: members send()/recv() to one
                               * another; a transport that cannot declines */
/* A group with public_keys set must be authenticated and encrypted: every
 * connection admits only the listed keys, and a message's sender is the
 * member whose key authenticated the connection, never a field of the
 * message. A transport that cannot do that declines the group (the core
 * never hands such a group to a transport built for ABI 2.0). */

struct strata_host_v1;

/* Everything init() learns about the run. Owned by the core, valid until
 * fini() returns. */
typedef struct strata_env {
    uint32_t                struct_size;
    int32_t                 kind;        /* the kind the core loaded it as        */
    const void             *cfg;         /* cfg_size bytes filled from `options`  */
    const char             *section;     /* its config section: "strategy", ...  */
    const strata_group_t   *group;       /* transport: the members to connect;   */
                                         /* strategy: NULL                       */
    const strata_cluster_t *cluster;     /* the whole job                        */
    int32_t                 nreplicas;   /* replica threads in this process       */
    int32_t                 nvars;       /* variables create_var will be given   */
    const int32_t          *devices;     /* nreplicas entries                    */
    size_t                  model_count; /* float32 elements in the flat layout  */
    const char             *transport;   /* strategy: [transport] plugin (may be
                                          * ""); ABI 1.4 strategies open through
                                          * host->t_open_group instead        */
} strata_env_t;

/* Optimizer state owned by the core, created through the host table. */
typedef struct strata_opt strata_opt_t;
/* A transport instance opened by a strategy through the host table. */
typedef struct strata_transport strata_transport_t;

/* A variable of the model. The core fills the descriptor members, then calls
 * the strategy's create_var(), which must set value[r] for every replica r.
 * All variables are laid out, in model order, in one flat float32 layout of
 * env->model_count elements: a variable is [offset, offset + count). Each
 * replica's gradients live in one flat buffer of that layout, so a reduce of
 * a whole step is one fused call. */
typedef struct strata_var {
    uint32_t     struct_size;
    uint32_t     index;        /* 0-based, model order                          */
    const char  *name;         /* "dense_0/kernel"                              */
    uint32_t     dtype;        /* STRATA_DTYPE_F32                              */
    uint32_t     ndim;
    int64_t      shape[4];
    size_t       count;        /* elements                                      */
    size_t       offset;       /* first element in the flat layout              */
    const float *init;         /* initial value on the host, identical on every */
                               /* task (seeded): copy it, do not keep it; NULL  */
                               /* for STRATA_CAP_LAZY_INIT (host init_values)   */
    void       **value;        /* nreplicas slots: where replica r reads the    */
                               /* variable (device memory of replica r)         */
    void        *state;        /* var_state_size zeroed bytes for the plugin    */
} strata_var_t;

/* One variable's gradient given as rows (ABI 2.9): an embedding table's,
 * whose step touches only the rows its ids name. An element of the array
 * strata_op_t.sparse, hence without struct_size (an array's stride cannot
 * grow; like strata_task_t, a change needs a new major). A [V x D] table
 * has rows of row_len = D floats; row i of the array is table row
 * rows[i]. An op's array is in model order (ascending offset). */
typedef struct strata_sparse {
    uint32_t       var;      /* strata_var_t.index of the table              */
    uint32_t       reserved; /* 0                                            */
    size_t         offset;   /* its first element in the flat layout         */
    size_t         count;    /* its elements (strata_var_t.count)            */
    size_t         row_len;  /* floats per row: count / row_len table rows   */
    size_t         nrows;    /* rows given; 0: this replica touched none     */
    const int64_t *rows;     /* nrows table rows, ascending, distinct        */
    const float   *values;   /* nrows * row_len floats, rows[i]'s gradient   */
                             /* at values + i * row_len, on op->device; the  */
                             /* dense gradient's rows bit for bit            */
} strata_sparse_t;

/* Arguments of reduce() and update(). Owned by the caller for the call. */
typedef struct strata_op {
    uint32_t struct_size;
    int32_t  slot;       /* strategy: replica index; transport: local member  */
    void    *buf;        /* flat float32 buffer (gradients, or values)        */
    size_t   count;      /* elements of buf                                   */
    int32_t  device;     /* where buf lives                                   */
    int32_t  reduce_op;  /* STRATA_REDUCE_SUM | STRATA_REDUCE_MEAN            */
    int32_t  root;       /* transport update(): broadcast root member         */
    float    lr;         /* strategy update(): learning rate of this step     */
    int64_t  step;       /* 0-based global step this call belongs to          */
    /* ---- ABI 2.2 (STRATA_HAS_FIELD(strata_op_t, op, flags)) ---- */
    uint32_t flags;      /* STRATA_OP_*: what buf holds                       */
    /* ---- ABI 2.9 (STRATA_HAS_FIELD(strata_op_t, op, nsparse)) ---- */
    /* A strategy's reduce() with STRATA_CAP_SPARSE: these variables'
     * gradients are given as rows, and their ranges of buf hold zeros;
     * when reduce() returns, the range must hold the combined gradient (as
     * a dense reduce leaves it) unless the strategy's update() takes the
     * rows itself. The arrays are the core's, valid until update()
     * returns. NULL and 0 otherwise: every gradient is dense in buf
     * (always for a strategy without the bit, or built before 2.9). */
    const strata_sparse_t *sparse;
    size_t   nsparse;
} strata_op_t;

/* strata_op_t.flags */
#define STRATA_OP_GRADIENT 0x1u /* reduce(): buf holds a step's gradients (the
                                 * core's train step sets it; a strategy passes
                                 * it on in the ops it derives). A transport may
                                 * then carry them in lower precision
                                 * ([transport.zmq] compression); any other
                                 * reduce (metrics, counts, state) stays exact */

/* ---- strategies that drive the job (ABI 1.1) -------------------------- */

/* A step handed to a worker by its strategy's next_step() (ps: by the
 * coordinator), and the results of the worker's previous step. */
typedef struct strata_step {
    uint32_t struct_size;
    int32_t  done;        /* out: 1 = no more work; the worker finishes     */
    int64_t  id;          /* out: job-wide step id, 0-based                 */
    int32_t  epoch;       /* out: 0-based                                   */
    int32_t  attempt;     /* out: 1, or more when the step was re-scheduled */
    int64_t  batch;       /* out: index of the global batch in the epoch    */
    int32_t  has_result;  /* in: the fields below describe the last step    */
    int32_t  samples;     /* in: samples of the last step (this worker)     */
    double   loss_sum;    /* in: summed loss of those samples               */
    int64_t  correct;     /* in: correct predictions among them (the        */
                          /* metric_sum rounded)                            */
    /* ---- ABI 2.6 ---- */
    double   metric_sum;  /* in: the job's metric ([model] metric) summed   */
                          /* over those samples: correct rows for the       */
                          /* accuracies, or a sum of per-sample means (mae) */
    /* ---- ABI 2.8 ---- */
    const float *states;  /* in: the model's layer states (batchnorm's      */
                          /* moving statistics) after the last step, replica */
                          /* 0's, in the checkpoint's flat layout; NULL when */
                          /* the model has none. The core's memory, valid   */
                          /* for the call (copy it out)                     */
    uint64_t     nstates; /* in: floats at states (0 with NULL)             */
} strata_step_t;

/* What drive() is told about the job. */
typedef struct strata_drive {
    uint32_t struct_size;
    int32_t  epochs;
    int64_t  steps_per_epoch;
    int64_t  max_steps;       /* 0: whole epochs                            */
    int32_t  batch;           /* global batch                               */
    int32_t  eval;            /* evaluate on the test set after each epoch  */
    int64_t  train_samples;
    /* ---- ABI 1.2 ---- */
    int32_t  first_epoch;     /* where to start: 0 and 0, or the position   */
    int64_t  first_batch;     /* a restored checkpoint resumes from         */
} strata_drive_t;

/* Progress and metrics that a driving strategy hands to the core, which
 * prints them like its own loop does and writes train.metrics_csv. */
#define STRATA_REPORT_EPOCH_BEGIN 1 /* epoch, steps (in the epoch)          */
#define STRATA_REPORT_STEP        2 /* steps done, running loss and acc     */
#define STRATA_REPORT_EPOCH_END   3 /* everything below                     */
typedef struct strata_report {
    uint32_t struct_size;
    int32_t  kind;
    int32_t  epoch;           /* 0-based                                    */
    int32_t  has_val;
    int64_t  steps;
    double   loss, acc;       /* training loss and accuracy                 */
    double   val_loss, val_acc;
    double   seconds;         /* EPOCH_END: training time of the epoch      */
} strata_report_t;

/* The training state of the model in the flat layout, on the host: what a
 * checkpoint holds. Argument of STRATA_CTL_STATE_GET / STRATA_CTL_STATE_SET. */
typedef struct strata_state {
    uint32_t struct_size;
    int32_t  nslots;     /* optimizer slots per element (adam 2, momentum 1,
                            adagrad 1, rmsprop 1 or 2 with momentum)     */
    float   *vars;       /* model_count elements                             */
    float   *slots[4];   /* nslots buffers of model_count elements           */
    int64_t  opt_steps;  /* updates the optimizer has applied (Adam's t)     */
    /* ---- ABI 2.13: STRATA_HAS_FIELD(strata_state_t, st, nparts) ---- */
    /* STATE_GET for a checkpoint, to a strategy with
     * STRATA_CAP_STATE_PARTS: the tasks that hold the model may write it
     * into part files of the checkpoint of step part_step, each task its
     * own (host part_write, part_tag), instead of gathering it into vars
     * and slots. part_step -1: gather (an in-memory copy, best.safetensors,
     * a strategy or job that cannot). */
    int64_t  part_step;
    uint64_t part_tag;   /* the checkpoint's random id, for part_write       */
    int32_t  nparts;     /* strategy: 0 (vars and slots hold the state) or
                            the part files written, which together hold
                            every variable and every slot (vars and slots
                            are then left as they were)                     */
    int32_t  pad_;
} strata_state_t;

/* A task's part of a checkpoint (ABI 2.13, host part_write): rows of
 * variables and of their optimizer slots, as that task holds them. */
typedef struct strata_part_piece {
    int32_t      var;    /* the model's variable index                      */
    int32_t      slot;   /* -1: its values; 0 .. nslots - 1: optimizer slot */
    int64_t      row0;   /* rows [row0, row0 + rows) along dimension 0      */
    int64_t      rows;   /* (a variable of rank 0: row0 0, rows 1)          */
    const float *data;   /* rows x the variable's elements per row          */
} strata_part_piece_t;

typedef struct strata_part {
    uint32_t struct_size;
    int32_t  index;      /* this part: 0 .. count - 1 (the ps task index)   */
    int32_t  count;      /* parts of the checkpoint (strata_state_t.nparts) */
    int32_t  npieces;
    int64_t  step;       /* strata_state_t.part_step                        */
    uint64_t tag;        /* strata_state_t.part_tag                         */
    const strata_part_piece_t *pieces;
    int64_t  bytes;      /* out: the size of the file written               */
} strata_part_t;

/* One generation of an elastic job's membership (ABI 2.3): the workers
 * that train together now, what host->membership() returns. Owned by the
 * core: the arrays stay valid until the next membership() call or fini(). */
typedef struct strata_membership {
    uint32_t struct_size;
    int32_t  generation;         /* 0, 1, ...: one per re-formed world      */
    int32_t  size;               /* members                                 */
    int32_t  rank;               /* this process's, 0 .. size-1             */
    const char *const *addrs;    /* `size` "host:port", fresh ports for this */
                                 /* generation, in rank order               */
    const char *const *names;    /* `size` task names ("worker:2")          */
    const int64_t *committed;    /* `size`: the steps each member had applied */
                                 /* when it joined; -1: none (a new member) */
    int64_t  resume_step;        /* -1: no member holds a state (a fresh    */
                                 /* start); else every member goes on from  */
                                 /* this step, and rank 0 holds its state   */
} strata_membership_t;

/* Argument of STRATA_CTL_REDUCE_SCATTER and STRATA_CTL_ALL_GATHER (ABI
 * 2.4): the buffer (op: buf, count, device, reduce_op, flags) and who owns
 * which part of it. Owned by the caller for the call. */
typedef struct strata_shards {
    uint32_t       struct_size;
    strata_op_t   *op;       /* NULL: only ask whether the group offers it  */
    const size_t  *bounds;   /* group size + 1 offsets: member m owns        */
                             /* [bounds[m], bounds[m + 1]) of op->buf        */
} strata_shards_t;

/* What a transport dropped from outside its group, by kind (ABI 2.7,
 * strata_plugin_v2_t.strangers): connections and messages it counted and
 * dropped since its init. Filled by the transport; the caller sets
 * struct_size (the transport writes no member beyond it) and zeroes the
 * rest. Counts never decrease within an instance's life. */
typedef struct strata_strangers {
    uint32_t struct_size;
    uint32_t reserved;       /* 0                                            */
    uint64_t refused_key;    /* authentication refused: a key that is not   */
                             /* one of the job's (CURVE/ZAP), or no key     */
    uint64_t closed_early;   /* connections closed before their handshake   */
                             /* (a port scan, an idle connection timed out) */
    uint64_t not_protocol;   /* connections that were not the transport's   */
                             /* protocol (an HTTP request), or asked for    */
                             /* another security mechanism                  */
    uint64_t bad_message;    /* messages dropped after a handshake: from    */
                             /* outside the group, malformed, forged        */
} strata_strangers_t;

#ifdef __cplusplus
}
#endif
#endif /* STRATA_ABI_TYPES_H */
