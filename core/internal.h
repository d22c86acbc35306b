/* strata core -- internal declarations (strata__*). Never installed.
 *
 * Every function returns 0 or a negative STRATA_E* code unless it says
 * otherwise, and logs the detail (file:line, key, peer) once, where it is
 * known, through strata__log. */
#ifndef STRATA_CORE_INTERNAL_H
#define STRATA_CORE_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "strata/plugin.h"
#include "strata/strata.h"

#define STRATA_INTERNAL __attribute__((visibility("hidden")))

#ifndef STRATA_MAX_PLUGINS
#define STRATA_MAX_PLUGINS 16 /* loaded per process */
#endif
#ifndef STRATA_MAX_REPLICAS
#define STRATA_MAX_REPLICAS 256
#endif
#ifndef STRATA_EVAL_WORK_BYTES
#define STRATA_EVAL_WORK_BYTES ((size_t)16 << 20) /* per replica, about */
#endif
#ifndef STRATA_MAX_LAYERS
#define STRATA_MAX_LAYERS 256
#endif

/* ---- log.c ------------------------------------------------------------ */

/* One line, "strata: <who>: <message>" (errors also say "error:"), to the
 * log of the context the calling thread works for (strata__log_bind): its
 * log callback, else stderr. Thread-safe; lines are never interleaved. */
void strata__log(int level, const char *who, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void strata__vlog(int level, const char *who, const char *fmt, va_list ap);
/* The same for the context `ctx` named explicitly (a host call's hc). */
void strata__vlog_ctx(strata_ctx_t *ctx, int level, const char *who,
                      const char *fmt, va_list ap);
/* The calling thread now works for `ctx` (NULL: none); returns the context
 * it worked for, to restore on the way out. */
strata_ctx_t *strata__log_bind(strata_ctx_t *ctx);
/* The context the calling thread works for, or NULL (the data layer finds
 * its in-memory arrays there). */
strata_ctx_t *strata__log_ctx(void);
/* Level of the lines of threads bound to no context (default: info). */
void strata__log_set_level(int level);
/* Parse "error|warn|info|debug"; -1 when unknown. */
int  strata__log_level_parse(const char *s);

/* ---- rng.c: xoshiro256** seeded through splitmix64 -------------------- */

typedef struct strata__rng { uint64_t s[4]; } strata__rng_t;
/* Independent streams from one seed: (seed, stream) -> state. */
void     strata__rng_seed(strata__rng_t *r, uint64_t seed, uint64_t stream);
uint64_t strata__rng_next(strata__rng_t *r);
double   strata__rng_uniform(strata__rng_t *r);            /* [0, 1)          */
uint64_t strata__rng_below(strata__rng_t *r, uint64_t n);  /* [0, n), unbiased */

/* ---- config.c: inih glue, typed options, overrides --------------------- */

/* Precedence of a value's origin: a value replaces one of lower or equal
 * precedence (so the CLI wins over the environment, which wins over the file,
 * which wins over compiled-in defaults). */
enum { STRATA__CFG_DEFAULT = 0, STRATA__CFG_FILE = 1, STRATA__CFG_ENV = 2,
       STRATA__CFG_CLI = 3 };

typedef struct strata__cfg strata__cfg_t;

int  strata__cfg_new(strata__cfg_t **out);
void strata__cfg_free(strata__cfg_t *c);
/* Parse an INI file; syntax errors name file:line. Records each value with
 * its origin "FILE:LINE" for later messages. Missing file -> STRATA_ENOENT. */
int  strata__cfg_load_file(strata__cfg_t *c, const char *path);
/* Every STRATA_<SECTION>_<KEY>=value in envp whose SECTION is a known core
 * section ("STRATA_TRAIN_EPOCHS=3" -> train.epochs). Other STRATA_* names
 * (STRATA_PLUGIN_PATH, ...) are not config and are ignored. */
int  strata__cfg_load_env(strata__cfg_t *c, char *const *envp);
/* The same for the sections of a table (config.c: the store knows no
 * schema; strata__cfg_load_env passes settings.c's). */
struct strata__section;
int  strata__cfg_load_env_in(strata__cfg_t *c, char *const *envp,
                             const struct strata__section *sections);
/* "section.key=value"; origin names where it came from ("--set"). */
int  strata__cfg_set(strata__cfg_t *c, const char *assignment, int prec,
                     const char *origin);
/* Resolved raw value or NULL. The pointer stays valid until cfg_free. */
const char *strata__cfg_get(const strata__cfg_t *c, const char *section,
                            const char *key);
/* Origin of a resolved value: "etc/x.ini:14", "--set", "env STRATA_X_Y",
 * "default"; NULL when the key is not set. key NULL: origin of the
 * section's first value. */
const char *strata__cfg_origin(const strata__cfg_t *c, const char *section,
                               const char *key);
/* The i-th value of `section` in the order it was set (a file's values in
 * file order): 1 and its key, value and origin, or 0 past the last. */
int  strata__cfg_entry(const strata__cfg_t *c, const char *section, size_t i,
                       const char **key, const char **value,
                       const char **origin);
/* Fill `dst` from `opts`: defaults first, then every value of `section`.
 * Unknown keys of the section are an error with the nearest valid key
 * ("etc/x.ini:14: [strategy] unknown key 'reduce_opp'; did you mean
 * 'reduce_op'?"); `also_valid` (NULL-terminated, may be NULL) lists keys
 * that are valid but handled elsewhere (e.g. "plugin"); an entry "*" accepts
 * every key without an option (plugin-owned sections). Bad values say
 * what was expected. Returns STRATA_ECONFIG on the first error. */
int  strata__cfg_apply(const strata__cfg_t *c, const char *section,
                       const strata_option_t *opts, void *dst,
                       const char *const *also_valid);
/* One warning per key of `section` not in `keep` (NULL-terminated): its
 * place is now `where`. */
void strata__cfg_deprecated(const strata__cfg_t *c, const char *section,
                            const char *const *keep, const char *where);
/* A section name: "train", or "transport.zmq" (a plugin's own section). */
int  strata__cfg_section_name(const char *s);
/* Only the section's keys over what dst holds (no defaults, no required
 * check); strict: an unknown key is the error above, else it is skipped. */
int  strata__cfg_apply_keys(const strata__cfg_t *c, const char *section,
                            const strata_option_t *opts, void *dst,
                            const char *const *also_valid, int strict);
/* The keys of `section` whose value has a higher precedence than the same
 * key's in `other` (a --set of [strategy] over the file's
 * [strategy.NAME]), over what dst holds. */
int  strata__cfg_apply_outranking(const strata__cfg_t *c, const char *section,
                                  const char *other,
                                  const strata_option_t *opts, void *dst);
/* 1 when section.key and other.key are both set and section's value
 * comes from a source of higher precedence (the rule of apply_outranking). */
int  strata__cfg_outranks(const strata__cfg_t *c, const char *section,
                          const char *other, const char *key);
/* Every section name that holds a value (NULL-terminated, owned by c). */
const char *const *strata__cfg_sections(const strata__cfg_t *c);
/* Levenshtein distance, for suggestions. */
int  strata__edit_distance(const char *a, const char *b);
/* Parse a typed option value (used by apply; exposed for tests). dst is the
 * member itself (struct + o->offset); STRING stores the text itself. */
int  strata__opt_parse(const strata_option_t *o, const char *text, void *dst,
                       char *why, size_t whylen);

/* ---- settings.c: the core's own sections and their option tables ------- */

typedef struct strata__train_cfg {
    int64_t     epochs;
    int64_t     batch_size;     /* global batch, split across all replicas */
    int64_t     seed;
    int         lr_scaling;     /* 0 none, 1 linear                         */
    double      warmup_epochs;
    int64_t     max_steps;      /* 0: no limit (whole epochs)               */
    const char *devices;        /* "cpu:0, cpu:1"; "" = one CPU per core     */
    const char *metrics_csv;    /* "" = none                                */
    int         progress;       /* 0 auto, 1 bar, 2 line, 3 none            */
    int         eval;           /* evaluate on the test set every epoch     */
    int64_t     es_patience;    /* early_stopping_patience; 0: off          */
    double      es_min_delta;   /* early_stopping_min_delta                 */
    int         monitor;        /* STRATA__MONITOR_*                        */
    int         restore_best;   /* restore_best_weights: end on the best    */
    int64_t     rlr_patience;   /* reduce_lr_patience; 0: off               */
    double      rlr_factor;     /* reduce_lr_factor, in (0, 1)              */
    double      rlr_min_delta;  /* reduce_lr_min_delta                      */
    int64_t     rlr_cooldown;   /* reduce_lr_cooldown                       */
    double      rlr_min_lr;     /* reduce_lr_min_lr                         */
    int         on_nan;         /* STRATA__ON_NAN_*                         */
    int         elastic_batch;  /* STRATA__BATCH_*: an elastic job resized  */
    const char *tensorboard;    /* event files under this dir; "" = none    */
    int64_t     log_every_steps; /* per-step TensorBoard scalars; 0 = none  */
    const char *trace;          /* Chrome trace JSON file; "" = none         */
    int64_t     trace_steps;    /* steps the trace covers                   */
    int         precision;      /* STRATA__PREC_*                           */
} strata__train_cfg_t;
/* [train] precision: Keras's policy names. mixed_bfloat16: conv2d and dense
 * multiply bf16 inputs into fp32 sums; variables, gradients, optimizer
 * slots and checkpoints stay fp32. */
enum { STRATA__PREC_FLOAT32 = 0, STRATA__PREC_MIXED_BFLOAT16 = 1 };
/* [train] monitor: val_loss, or val_ + the job's metric (the order of the
 * option's list, [model] metric's after "auto"). */
enum { STRATA__MONITOR_VAL_LOSS = 0, STRATA__MONITOR_VAL_ACCURACY = 1 };
/* [model] loss: kernels/kops_list.h's KOPS_LOSS_* (0: sparse). */
enum { STRATA__METRIC_AUTO = 0, STRATA__METRIC_ACCURACY = 1,
       STRATA__METRIC_SPARSE_TOPK = 2, STRATA__METRIC_TOPK = 3,
       STRATA__METRIC_MAE = 4, STRATA__METRIC_MSE = 5,
       STRATA__METRIC_AUC = 6 };
enum { STRATA__BATCH_GLOBAL = 0, STRATA__BATCH_PER_WORKER = 1 };

typedef struct strata__model_cfg {
    const char *layers;         /* "dense 128 relu, dense 10"              */
    const char *init_from;      /* safetensors file to start from; "" none */
    int         loss;           /* 0 sparse CE, else KOPS_LOSS_*            */
    int         metric;         /* STRATA__METRIC_* (AUTO resolved at check)*/
    int         top_k;          /* of the top-k accuracies                  */
} strata__model_cfg_t;

enum { STRATA__ON_NAN_STOP = 0, STRATA__ON_NAN_IGNORE = 1 };

typedef struct strata__data_cfg {
    const char *dir;
    const char *train_images, *train_labels, *test_images, *test_labels;
    int64_t     limit_train;    /* 0: all samples                          */
    int64_t     limit_test;
    int         shuffle;
    /* The validation set: a fraction of the training set (the option's
     * text, "" none; parsed by the settings' check into the double, 0
     * none) or files ("": none); neither: the test set validates. */
    const char *validation_split_text;
    double      validation_split;
    const char *validation_images, *validation_labels;
    /* id features beside each set's images ("": none): .npy of int32 or
     * int64, (n,) or (n, k), read by an embedding as 'ids' */
    const char *train_ids, *test_ids, *validation_ids;
    int         labels_as;      /* STRATA__LABELS_*: of [model] loss (set
                                   by the settings' check)                 */
    int         augment_flip;   /* random horizontal flips (training only)  */
    int64_t     augment_crop_padding; /* pad, then a random crop; 0: off    */
} strata__data_cfg_t;

/* The [optimizer] name's order (optimizer.c names them). */
enum { STRATA__OPT_SGD = 0, STRATA__OPT_MOMENTUM = 1, STRATA__OPT_ADAM = 2,
       STRATA__OPT_RMSPROP = 3, STRATA__OPT_ADAGRAD = 4, STRATA__OPT_COUNT };
enum { STRATA__SCHED_CONSTANT = 0, STRATA__SCHED_STEP = 1,
       STRATA__SCHED_EXPONENTIAL = 2, STRATA__SCHED_COSINE = 3 };
typedef struct strata__optimizer_cfg {
    int    name;                /* STRATA__OPT_*                            */
    double lr, momentum, beta1, beta2, epsilon;
    double rho;                 /* rmsprop: decay of the squared gradient   */
    double rmsprop_momentum;    /* rmsprop: momentum; 0: none (no slot)     */
    double initial_accumulator_value; /* adagrad: the accumulator's start   */
    int         schedule;       /* STRATA__SCHED_* (schedule.h)             */
    int64_t     decay_steps;    /* exponential, cosine                      */
    double      decay_rate;     /* exponential                              */
    int         staircase;      /* exponential: whole decay periods only    */
    const char *boundaries;     /* step: "1000, 2000"                       */
    const char *values;         /* step: one lr per piece; "" = factor      */
    double      factor;         /* step: lr x factor at each boundary       */
    double      alpha;          /* cosine: final lr = alpha x lr            */
    double      weight_decay;   /* decoupled (AdamW / SGDW); 0: none        */
    double      clip_norm;      /* global gradient norm bound; 0: none      */
} strata__optimizer_cfg_t;

typedef struct strata__plugins_cfg {
    const char *path;           /* extra search dirs, ':'-separated          */
    int         trust_path;     /* skip the owner/mode checks of plugins    */
} strata__plugins_cfg_t;

enum { STRATA__SEC_AUTO = 0, STRATA__SEC_CURVE = 1, STRATA__SEC_OFF = 2 };
typedef struct strata__security_cfg {
    int         mode;           /* STRATA__SEC_*                            */
    const char *keys;           /* key directory; "" = none                 */
    const char *token;          /* mode off: the shared secret; "" = none   */
} strata__security_cfg_t;

typedef struct strata__log_cfg {
    int level;                  /* STRATA_LOG_*                             */
} strata__log_cfg_t;

typedef struct strata__debug_cfg {
    int         check_sync;     /* compare replicas bitwise after each step  */
    const char *dump_vars;      /* write final variables (raw f32 LE) here  */
    int         hash_vars;      /* every worker prints a hash of them       */
    int64_t     step_delay_ms;  /* a straggler: sleep in every step         */
    const char *delay_task;     /* ... on this task only ("" = all)         */
    const char *dump_lr;        /* write each step's learning rate here     */
    const char *step_log;       /* append each step's samples and times     */
} strata__debug_cfg_t;

typedef struct strata__eval_cfg {  /* [evaluator]: the sidecar evaluator  */
    int64_t     timeout_s;      /* no newer checkpoint this long: error     */
    int64_t     poll_ms;        /* between two looks at [checkpoint] dir    */
    const char *metrics_csv;    /* one row per checkpoint scored; "" = none */
} strata__eval_cfg_t;

enum { STRATA__RESTORE_AUTO = 0, STRATA__RESTORE_NEVER = 1,
       STRATA__RESTORE_FRESH = 2 };
typedef struct strata__checkpoint_cfg {
    const char *dir;            /* "" = no checkpoints                      */
    int64_t     every_steps, every_epochs, keep;
    int         restore;        /* STRATA__RESTORE_*                        */
    int         keep_best;      /* DIR/best.safetensors: best monitored     */
} strata__checkpoint_cfg_t;

/* [transport]: which transport the core opens for a group. A list per
 * scope, in order of preference; `plugin` (the form before per-scope
 * lists) is tried first for both scopes when set. */
typedef struct strata__transport_cfg {
    const char *plugin;   /* "" unless set                                 */
    const char *local;    /* replica threads of one process                */
    const char *world;    /* one member per process                        */
} strata__transport_cfg_t;

/* The core's own keys of [strategy] and [transport] (NULL-terminated); the
 * others there belong to a plugin. */
extern const char *const strata__strategy_core_keys[];
extern const char *const strata__transport_core_keys[];

typedef struct strata__settings {
    strata__train_cfg_t     train;
    strata__model_cfg_t     model;
    strata__data_cfg_t      data;
    strata__optimizer_cfg_t optimizer;
    strata__plugins_cfg_t   plugins;
    strata__security_cfg_t  security;
    strata__log_cfg_t       log;
    strata__debug_cfg_t     debug;
    strata__checkpoint_cfg_t checkpoint;
    strata__eval_cfg_t      evaluator;
    const char             *strategy;   /* [strategy] plugin               */
    strata__transport_cfg_t transport;
} strata__settings_t;

/* The core's sections in order, each with its option table; terminated by a
 * NULL name. opts == NULL: a reserved section (cluster) applied
 * by its own module. [strategy] and [transport] list only "plugin": the rest of their
 * keys belong to the plugin and are checked against its table after load. */
typedef struct strata__section {
    const char            *name;
    const strata_option_t *opts;
    size_t                 offset;  /* of its struct in strata__settings_t */
} strata__section_t;
extern const strata__section_t strata__sections[] STRATA_INTERNAL;

/* Apply every core section of `c` to `s` (defaults + values). */
int strata__settings_load(const strata__cfg_t *c, strata__settings_t *s);

/* ---- loader.c: find, dlopen and check plugins -------------------------- */

typedef struct strata__plugin {
    /* The entries the core calls, at the ABI 2 layout whatever the major
     * the plugin was built for: &table. */
    const strata_plugin_v2_t *vt;
    strata_plugin_v2_t table; /* its entries; those it lacks are NULL, and
                               * table.hdr.struct_size is the full size    */
    const strata_plugin_v1_t *v1; /* an ABI 1 plugin's own table (its init
                               * goes through the core's v1 adapter); NULL */
    int   major;              /* the ABI major it was built for           */
    uint32_t caps;            /* STRATA_CAP_*: declared (minor >= 5) or
                               * derived (strata__plugin_caps)             */
    void *dl;                 /* dlopen handle                            */
    char *path;               /* the file it came from                    */
    char  name[64];
} strata__plugin_t;

/* The plugin search path, ':'-separated, in order: `ini_path` ([plugins]
 * path), $STRATA_PLUGIN_PATH, <dir of libstrata.so>/strata/plugins, <dir
 * of the running binary>/../lib/strata/plugins, the install dir. Returned string is malloc'd. */
char *strata__plugin_search_path(const char *ini_path);
/* Open <name>.so of `kind` along `search_path`: its strata_plugin_v2
 * symbol, else strata_plugin_v1 (served through the v1 adapter). Refuses,
 * with one log line each: file not found (listing every dir looked in),
 * before dlopen a file that others could have written (the file, its
 * directory or its link target's directory group- or world-writable, or
 * owned by another user than root or the effective uid), dlopen failure,
 * no symbol of a major this core speaks, a major that does not match its
 * symbol, struct_size too small, other build signature, wrong kind, header
 * name != file stem, missing init/fini.
 * Not found: STRATA_ENOPLUGIN; refused: STRATA_EABI; bad name or kind:
 * STRATA_EINVAL. On failure *out == NULL. */
int  strata__plugin_open(const char *name, uint32_t kind,
                         const char *search_path, strata__plugin_t **out);
/* flags of open_as and scan: [plugins] trust_path, no owner/mode check. */
#define STRATA__PLUGIN_TRUST_PATH 1u
/* The same, with the not-found line at `missing_level` (a transport missing
 * from a preference list is the next one's turn, not an error) and
 * STRATA__PLUGIN_* `flags` (open: none). */
int  strata__plugin_open_as(const char *name, uint32_t kind,
                            const char *search_path, int missing_level,
                            unsigned flags, strata__plugin_t **out);
void strata__plugin_close(strata__plugin_t *p);
/* Calls cb for every *.so along the search path (first occurrence of a name
 * wins, as for loading); status is 0 or the code open would return. */
int  strata__plugin_scan(const char *search_path, unsigned flags,
                         strata_plugin_cb cb, void *user);
const char *strata__kind_name(uint32_t kind);   /* "strategy" | "transport" */
/* The STRATA_CAP_* word of a plugin's table: hdr.caps from a plugin built
 * for ABI >= 2.5; for an older one derived from what the core asked before
 * 2.5 (its entries; ctl for the ctl ops it may answer). The one place that
 * looks at a plugin's entries to learn what it can do. */
uint32_t strata__plugin_caps(const strata_plugin_v2_t *vt, int major);
/* "elastic,state,..." for `strata plugins`; "-" for none. */
void strata__caps_str(uint32_t caps, char *buf, size_t cap);

/* ---- host.c / host_v1.c: one host context per plugin instance (2.5) ----- */

/* A new hc of instance `name` in `section` of ctx, opened by `parent` (a
 * strategy opening a transport) or NULL; counted up the chain. */
strata_hctx_t *strata__hctx_new(strata_ctx_t *ctx, const char *name,
                                const char *section, strata_hctx_t *parent);
/* strata__plugin_init (runtime.h) for an instance opened by `opener`. */
int strata__plugin_init_in(strata__plugin_t *p, strata_ctx_t *ctx,
                           strata_hctx_t *opener, const strata_env_t *env,
                           void **pctx, strata_hctx_t **hc);

/* ---- fileio.c: files the user names (dump_vars, metrics_csv) ---------- */

/* Write `len` bytes to `path`. Nothing or a regular file there: replaced
 * atomically (temp file in the same directory, fsync, rename, fsync of the
 * directory; on failure the old file stays). A FIFO, character device or
 * socket: written in place, never replaced (a FIFO needs a reader already).
 * A symbolic link, directory or anything else: refused. Every failure is
 * one error line naming the path; returns 0 or STRATA_EIO. */
int  strata__write_atomic(const char *path, const void *data, size_t len);
/* All `len` bytes to the open `fd` (short writes and EINTR retried,
 * SIGPIPE taken as EPIPE): 0 or an errno value. For files that are
 * appended to (TensorBoard's event files). */
int  strata__write_fd(int fd, const void *data, size_t len);

/* ---- error.c ------------------------------------------------------------ */
/* strata_strerror / strata_err_name are public (strata.h). */

#endif /* STRATA_CORE_INTERNAL_H */
