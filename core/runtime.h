/* strata core -- the run: context, model, host services, training loop.
 * Internal; never installed. */
#ifndef STRATA_CORE_RUNTIME_H
#define STRATA_CORE_RUNTIME_H

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "internal.h"
#include "data/data.h"
#include "device/kops.h"

#include "model/model.h"

/* ---- optimizer.c: the [optimizer] section as host opt_* services ------- */

struct strata_opt {
    int     kind;                   /* STRATA__OPT_*                        */
    int32_t device;
    size_t  count;
    int64_t t;                      /* updates applied                       */
    float   momentum, beta1, beta2, epsilon, rho, rms_momentum;
    float   weight_decay;           /* decoupled, with each step's lr       */
    int     nslots;                 /* strata__opt_nslots(cfg)              */
    float  *slot[2];                /* in strata__opt_slot_name order       */
    strata__kdev_t *kd;             /* the kernels of `device`               */
};

/* The [optimizer] name of kind (STRATA__OPT_*): "adam", ... */
const char *strata__opt_name(int kind);
/* Optimizer slots per element of the [optimizer] section: sgd 0,
 * momentum 1 ("velocity"), adam 2 ("m", "v"), rmsprop 1 ("rms") or 2 with
 * rmsprop_momentum > 0 ("rms", "momentum"), adagrad 1 ("accumulator"). */
int  strata__opt_nslots(const strata__optimizer_cfg_t *cfg);
/* Slot i's name in checkpoints (optimizer/NAME/VARIABLE). */
const char *strata__opt_slot_name(int kind, int i);
/* The value slot i starts at: 0 but for adagrad's accumulator
 * ([optimizer] initial_accumulator_value). */
float strata__opt_slot_init(const strata__optimizer_cfg_t *cfg, int i);

/* A fresh state: every slot at its start value (strata__opt_slot_init),
 * ready for any stream when it returns. */
int  strata__opt_create(const strata__optimizer_cfg_t *cfg, int32_t device,
                        size_t count, strata_opt_t **out);
int  strata__opt_step(strata_opt_t *opt, float *param, const float *grad,
                      size_t count, float lr);
void strata__opt_destroy(strata_opt_t *opt);
/* host->opt_step_rows (ABI 2.10): a lazy update of the rows named. */
int  strata__opt_step_rows(strata_opt_t *opt, float *param,
                           const int64_t *rows, size_t nrows, size_t row_len,
                           const float *grad, float lr);
/* host->opt_io: slots and step count to (set = 0) or from host buffers. */
int  strata__opt_io(strata_opt_t *opt, int set, float *const *slots,
                    int nslots, int64_t *steps);
/* host->grad_sumsq and grad_clip ([optimizer] clip_norm, plugin_v2.h):
 * sumsq returns 1 with the sum of squares of g, or 0 when clipping is off;
 * clip scales g by clip_norm / max(sqrt(sumsq), clip_norm). Both done when
 * they return. */
int  strata__grad_sumsq(const strata__optimizer_cfg_t *cfg, int32_t device,
                        size_t n, const float *g, double *sumsq);
int  strata__grad_clip(const strata__optimizer_cfg_t *cfg, int32_t device,
                       size_t n, float *g, double sumsq);

/* ---- fpenv.c: flush denormals to zero in the calling thread ------------ */
void strata__fpenv_fast(void);

/* ---- gemm_kernels.c: the BLAS's kernels against the CPU ---------------- */
/* Before a run's first GEMM: STRATA_EINVAL (one error line) when the
 * kernels need instructions the CPU lacks; one warning per process when
 * they are weaker than it allows. */
int  strata__gemm_check(void);

/* ---- device.c ------------------------------------------------------------ */

/* Parse "cpu:0, cpu:1" (empty: one CPU replica per online core). */
int  strata__devices_parse(const char *spec, int32_t *out, int max, int *n);
const char *strata__device_str(int32_t dev, char *buf, size_t len);
void *strata__dev_alloc(int32_t device, size_t bytes);
/* CPU memory (device/hostmem.c): what dev_alloc gives a CPU device. */
void *strata__host_alloc(size_t bytes);
void  strata__host_free(void *p);
void  strata__host_discard(void *p, size_t bytes);
void  strata__dev_free(int32_t device, void *p);
int   strata__dev_copy(int32_t dst_dev, void *dst, int32_t src_dev,
                       const void *src, size_t bytes);
/* 1 when the bytes at a (on dev_a) and b (on dev_b) are equal, 0 when not,
 * or a negative STRATA_E* code (debug.check_sync on any device). */
int   strata__dev_equal(int32_t dev_a, const void *a, int32_t dev_b,
                        const void *b, size_t bytes);

/* ---- keys.c: the job's CURVE keys ([security] keys) --------------------- */

#define STRATA__MAX_KEYS 1024
typedef struct strata__key {
    char name[64];            /* task, "worker:1"                          */
    char pub[41];             /* Z85                                       */
} strata__key_t;
typedef struct strata__keys {
    int           n;
    strata__key_t key[STRATA__MAX_KEYS];
    char          secret[41]; /* this task's, Z85                          */
} strata__keys_t;

/* Every public key of `dir` and the secret key of task `self`, checked
 * (owner, mode, format); one error line for what is wrong. */
int strata__keys_load(const char *dir, const char *self, strata__keys_t *k);
/* The same from the memfd strata launch hands task `self`
 * (base/keybundle.h): every public key and its secret one. */
int strata__keys_load_fd(int fd, const char *self, strata__keys_t *k);
/* The public key of task `name`, or NULL. */
const char *strata__keys_public(const strata__keys_t *k, const char *name);
/* security.c: the keys of a job of several processes ([security] keys,
 * else strata launch's memfd) into *out, the task's own secret included;
 * *out NULL when the job has no connections to secure or [security] mode
 * = off (a warning). One error line for what is missing or wrong. */
int strata__job_keys(const strata__security_cfg_t *sec,
                     const strata_cluster_t *c, strata__keys_t **out);

/* ---- ctx.c / host.c ---------------------------------------------------- */

typedef struct strata__loaded {
    strata__plugin_t *plugin;
} strata__loaded_t;

/* What a plugin's hc points to: the context its host calls act on and,
 * since ABI 2.5, the plugin instance it was handed to (host.c: name and
 * section for the log prefix, the bytes it placed). ctx->hc itself is the
 * context's own (no instance: name NULL). */
struct strata_hctx {
    strata_ctx_t       *ctx;
    const char         *name;     /* plugin name; NULL: the context's own  */
    const char         *section;  /* its INI section: "strategy", ...      */
    struct strata_hctx *parent;   /* the instance that opened it, or NULL  */
    atomic_size_t       placed;   /* bytes placed through it and its       */
                                  /* children (host alloc, opt_create)     */
    void               *pctx;     /* the instance, once init returned      */
};

struct strata__run;

/* ---- the run, as the plugin host sees it -------------------------------- */

/* What the host's evaluate, report, boundary_due, boundary,
 * training_done and membership ask of the run strata_train() is running
 * on a context. The run (train.c) installs them with ctx->run; the host
 * calls through them and names no file of the run, which stays above. */
typedef struct strata__run_services {
    int (*evaluate)(struct strata__run *run, double *loss, double *acc);
    int (*report)(struct strata__run *run, const strata_report_t *r);
    int (*boundary_due)(struct strata__run *run, int32_t epoch,
                        int64_t batch, int64_t step);
    int (*boundary)(struct strata__run *run, int32_t epoch, int64_t batch,
                    int64_t step);
    /* 1 when early stopping ended the training */
    int (*training_done)(struct strata__run *run);
    int (*membership)(struct strata__run *run, int64_t committed,
                      int timeout_ms, strata_membership_t *out);
    /* the layer states (plugin ABI 2.8: host states_get / states_set) */
    int (*states_get)(struct strata__run *run, float *buf, size_t cap,
                      size_t *n);
    int (*states_set)(struct strata__run *run, const float *buf, size_t n);
    /* the rows a batch reads (plugin ABI 2.11: host batch_rows) */
    int (*batch_rows)(struct strata__run *run, int32_t epoch, int64_t batch,
                      strata_sparse_t *out, size_t cap, size_t *n);
    /* a variable's initial values in part (plugin ABI 2.12) */
    int (*init_values)(struct strata__run *run, const strata_var_t *var,
                       size_t lo, size_t n, float *dst);
    /* this task's part of a checkpoint (plugin ABI 2.13) */
    int (*part_write)(struct strata__run *run, strata_part_t *part);
} strata__run_services_t;

struct strata_ctx {
    strata__cfg_t      *cfg;
    strata__settings_t  s;
    char               *config_path;   /* NULL: defaults only               */
    char               *search_path;   /* plugin search path                */
    char               *task;          /* --task TYPE:INDEX, or NULL        */
    atomic_int          stop;          /* strata_request_stop() was called  */
    strata__plugin_t   *plugins[STRATA_MAX_PLUGINS];
    int                 nplugins;
    char                opened[128];   /* transports opened: "local, zmq"   */
    strata_callbacks_t  cb;            /* what the run reports, to whom     */
    int                 settings_ok;
    atomic_int          log_level;     /* [log] level: STRATA_LOG_*         */
    pthread_mutex_t     log_lock;      /* one cb.log line at a time         */
    struct strata_hctx  hc;            /* handed to its plugins' init       */
    /* Bytes its plugins placed through host alloc and opt_create
     * (variables and optimizer slots; never decremented). */
    atomic_size_t       placed;
    /* Gradients its plugins measured for [optimizer] clip_norm (a run
     * that clips none warns: its strategy does not clip). */
    atomic_long         clip_calls;
    /* The run strata_train() is running, from setup to teardown: what
     * host evaluate/report/boundary act on. Main thread only. */
    struct strata__run *run;
    const strata__run_services_t *run_svc; /* how the host reaches it   */
    int                 v1_refs;       /* ABI 1 instances it holds (host_v1.c) */
    /* The job's keys while a run of several processes is secured: the
     * core hands them to every WORLD group it opens. NULL: plaintext. */
    strata__keys_t     *keys;
    /* Arrays in place of data files (strata_ctx_set_array, memory.c). */
    struct strata__mem *arrays;
    /* Strangers (plugin ABI 2.7, host.c): the transports open now, whose
     * `strangers` entry is asked for their counts so far, and what the
     * closed ones of this run reported last. Under strangers_lock. */
    pthread_mutex_t     strangers_lock;
    strata_transport_t *open_transports;
    strata_strangers_t  strangers_closed;
    int                 strangers_reported; /* some transport reported */
};

/* The host table of ABI 2, handed with &ctx->hc to every plugin. */
extern const strata_host_v2_t strata__host_v2;
/* init() of plugin `p` for `ctx`, through the v1 adapter for an ABI 1
 * plugin: the instance *pctx and its own host context *hc, which the
 * caller keeps beside it (hc->placed: the bytes it placed) and hands back
 * to fini(). */
int  strata__plugin_init(strata__plugin_t *p, strata_ctx_t *ctx,
                         const strata_env_t *env, void **pctx,
                         strata_hctx_t **hc);
void strata__plugin_fini(strata__plugin_t *p, void *pctx, strata_hctx_t *hc);
/* Open transport plugin `name` for `group` (ABI 1's t_open by name). */
int  strata__host_open_named(strata_ctx_t *ctx, const char *name,
                             const strata_group_t *group,
                             strata_transport_t **out);
/* The list the core walks for a group of `scope` (STRATA_SCOPE_*):
 * [transport] plugin when set, then the scope's own list, into buf[cap]. */
void strata__transport_list(const strata_ctx_t *ctx, int32_t scope,
                            char *buf, size_t cap);
/* How the shared [transport] section's keys apply to transport `name`
 * (STRATA__CFG_FLAT_*, below): not at all when the list ("local, nccl,
 * zmq") does not name it, strictly when it names only it, else the keys it
 * knows. */
int  strata__transport_flat(const char *list, const char *name);
/* Load (once per ctx) plugin `name` of `kind`; not found is logged at
 * `missing_level`. */
int strata__ctx_plugin(strata_ctx_t *ctx, const char *name, uint32_t kind,
                       int missing_level, strata__plugin_t **out);
/* Text for the context's text callback, printf-style (nothing without
 * one). */
void strata__out(strata_ctx_t *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* What the run's transports dropped from outside the job so far, by kind
 * (plugin ABI 2.7): the closed ones' last counts plus the open ones'.
 * Returns 1 when some transport of the run reports strangers (a count
 * of 0 included), 0 when none does (*out zeroed). Any thread. */
int  strata__ctx_strangers(strata_ctx_t *ctx, strata_strangers_t *out);
/* Forget the counts of closed transports (a run's start). */
void strata__ctx_strangers_reset(strata_ctx_t *ctx);
/* The end-of-run line "strangers: ..." on the context's text callback,
 * when some transport reported a count that is not 0. */
void strata__ctx_strangers_line(strata_ctx_t *ctx);
/* Note that transport `name` was opened (once per name, in order). */
void strata__ctx_opened(strata_ctx_t *ctx, const char *name);
/* Resolve settings (core sections) after every override is in. */
int strata__ctx_resolve(strata_ctx_t *ctx);
/* Plugin `p`'s configuration, a new cfg struct (calloc'd,
 * p->vt->cfg_size bytes, at least 1): its defaults, then the keys of the
 * shared `section` ([transport]: deprecated) as `flat` says, then its own
 * section [section.NAME], where a key it does not know is an error.
 * flat: NONE, the shared section is not for it (a transport a strategy
 * opens on its own); KNOWN, it takes the keys it knows, the others being
 * for the other plugins of the list; STRICT, it is the only plugin there. */
enum { STRATA__CFG_FLAT_NONE = 0, STRATA__CFG_FLAT_KNOWN = 1,
       STRATA__CFG_FLAT_STRICT = 2 };
int strata__plugin_cfg(strata_ctx_t *ctx, const strata__plugin_t *p,
                       const char *section, int flat, void **out);

/* Monotonic seconds. Inline: the step timeline reads it in every phase
 * of a timed step, and model.c (built alone by some tests) needs it. */
static inline double strata__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
#endif /* STRATA_CORE_RUNTIME_H */
