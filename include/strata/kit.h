/* strata -- the plugin kit: what a plugin author links in tests, and the
 * strategies' shared helpers (libstrata_kit.a, installed with the SDK).
 *
 * The kit knows nothing of the core: it includes <strata/plugin.h> only,
 * so a plugin and its tests build against the installed headers alone.
 *
 *   1. strata_kit_host(): a host table and host context that pose as any
 *      released minor of ABI major 2 (2.0 .. STRATA_ABI_MINOR): the table's
 *      struct_size and abi_minor are that minor's, and the entries of later
 *      minors are absent (STRATA_HAS_FIELD is false for them). Its entries
 *      are real on the CPU: 64-byte aligned zeroed memory counted in the
 *      placed bytes, axpy/scale/sum, plain SGD, log, cfg_get from a small
 *      key=value table, t_open over a transport vtable the caller hands in,
 *      and the collectives checked as the core checks them (the same
 *      STRATA_EINVAL, the same error line). The services of a run
 *      (evaluate, report, boundary, membership, ...) are STRATA_ENOTSUP
 *      unless the caller sets hooks for them. part_write (2.13) checks a
 *      part against the variables the caller names and keeps a copy in
 *      memory (strata_kit_parts_written).
 *   2. strata_kit_cfg(): a plugin's option struct, filled from its own
 *      table's defaults and key=value overrides (what the core does).
 *   3. strata_kit_replicas_*: mirrored replicas (one slab and one optimizer
 *      per replica, optionally sharded, ZeRO stage 1) for strategies: the
 *      helpers of the shipped mirrored, mwms and ps strategies.
 *   4. strata_kit_sparse_*: embedding gradients given as rows (ABI 2.9)
 *      combined over a group as rows (all-gathered) or dense, for
 *      strategies that declare STRATA_CAP_SPARSE (mirrored, mwms).
 *
 * Link: $(pkg-config --variable=kitlibs strata), or CMake strata::kit. */
#ifndef STRATA_KIT_H
#define STRATA_KIT_H

#include <stddef.h>
#include <stdint.h>

#include "strata/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- 1. the fake host ---------------------------------------------------- */

typedef struct strata_kit strata_kit_t;

/* One formatted log line (no newline); called from any thread. */
typedef void (*strata_kit_log_fn)(void *user, int level, const char *who,
                                  const char *line);

/* The services of a run, for a strategy under test; a NULL entry makes the
 * host entry return STRATA_ENOTSUP (training_done: 0). `user` is passed
 * to each. */
typedef struct strata_kit_hooks {
    void *user;
    int (*evaluate)(void *user, double *loss, double *acc);
    int (*report)(void *user, const strata_report_t *r);
    int (*boundary_due)(void *user, int32_t epoch, int64_t batch,
                        int64_t step);
    int (*boundary)(void *user, int32_t epoch, int64_t batch, int64_t step);
    int (*training_done)(void *user);
    int (*membership)(void *user, int64_t committed, int timeout_ms,
                      strata_membership_t *out);
    /* ABI 2.11's batch_rows: the test's answer (*n set first to 0) */
    int (*batch_rows)(void *user, int32_t epoch, int64_t batch,
                      strata_sparse_t *out, size_t cap, size_t *n);
} strata_kit_hooks_t;

/* Memory and arithmetic on devices other than the CPU (a GPU transport's
 * test brings its own kernels); a NULL entry: STRATA_EDEVICE (alloc NULL),
 * logged. `user` is passed to each. */
typedef struct strata_kit_device {
    void *user;
    void *(*alloc)(void *user, int32_t device, size_t bytes);
    void  (*free)(void *user, int32_t device, void *p);
    int   (*copy)(void *user, int32_t dst_device, void *dst,
                  int32_t src_device, const void *src, size_t bytes);
    int   (*axpy)(void *user, int32_t device, size_t n, float a,
                  const float *x, float *y);
    int   (*scale)(void *user, int32_t device, size_t n, float a, float *x);
    int   (*sum)(void *user, int32_t device, size_t n, float *dst,
                 const float *const *srcs, int nsrc);
} strata_kit_device_t;

typedef struct strata_kit_config {
    int         abi_minor;  /* the minor of major 2 to pose as, 0 ..
                             * STRATA_ABI_MINOR                           */
    const char *name;       /* `who` of lines logged without one ("kit")  */
    /* Log lines go to `log` when set, else to stderr up to log_level
     * (STRATA_LOG_ERROR .. STRATA_LOG_DEBUG). */
    strata_kit_log_fn log;
    void       *log_user;
    int         log_level;
    /* cfg_get's table: "section.key=value" strings, NULL-terminated (the
     * caller's, kept until strata_kit_free); cfg_origin names an entry as
     * "kit cfg[INDEX]". */
    const char *const *cfg;
    /* [optimizer] clip_norm for grad_sumsq / grad_clip; 0: off. */
    double      clip_norm;
    /* What t_open opens: a transport's vtable (dlsym'ed, or linked in)
     * and its option struct (NULL: its table's defaults). */
    const strata_plugin_v2_t *transport;
    const void *transport_cfg;
    const strata_kit_hooks_t  *hooks;   /* NULL: none                     */
    const strata_kit_device_t *device;  /* NULL: CPU only                 */
    /* The model, for ABI 2.13's part_write (the caller's, kept until
     * strata_kit_free): vars[i] is variable i (its ndim, shape and count
     * are read: rows along shape[0], a rank-0 variable 1 row). A piece is
     * checked against its variable and copied as rows x (count /
     * shape[0]) floats; without vars (nvars 0) the kit cannot size a
     * piece and part_write refuses every part (STRATA_EINVAL, logged). */
    const strata_var_t *vars;
    int         nvars;
} strata_kit_config_t;

/* The defaults: pose as this SDK's minor, warnings and errors to stderr. */
#define STRATA_KIT_CONFIG_INIT                                               \
    { .abi_minor = STRATA_ABI_MINOR, .log_level = STRATA_LOG_WARN }

/* A host posing as minor cfg->abi_minor. STRATA_EINVAL (logged to stderr)
 * for a minor not released, STRATA_ENOMEM. */
int  strata_kit_host(const strata_kit_config_t *cfg, strata_kit_t **out);
/* After every plugin instance that uses it has been finished. */
void strata_kit_free(strata_kit_t *kit);
/* What init() is handed: the table and the host context. */
const strata_host_v2_t *strata_kit_table(const strata_kit_t *kit);
strata_hctx_t *strata_kit_hctx(strata_kit_t *kit);
/* Bytes placed through alloc and opt_create so far (the banner's figure). */
size_t strata_kit_placed(const strata_kit_t *kit);
/* sizeof(strata_host_v2_t) of minor `abi_minor` of major 2; 0 for a minor
 * not released. */
size_t strata_kit_host_size(int abi_minor);
/* ABI 2.13: the parts host part_write recorded, in the order first
 * written (a later part of the same step, index and count replaces one,
 * as its file would be): their number. With out set, *out = part i (0 ..
 * that number - 1; else NULL): a copy whose pieces and their data are the
 * kit's, valid until the next part_write or strata_kit_free. The kit
 * writes no file: a part's `bytes` is that of the values it holds
 * (rows x elements per row x 4), without a file's header. */
int  strata_kit_parts_written(strata_kit_t *kit, int i,
                              const strata_part_t **out);

/* ---- 2. a plugin's options ---------------------------------------------- */

/* A zeroed struct of vt->cfg_size filled from vt->options: every key's
 * default, then the "key=value" strings of `over` (nover of them; a key
 * the table lacks is an error). STRING values point into `over` or the
 * table. STRATA_ECONFIG (logged to stderr, naming the key) for a bad or
 * missing value. Free *out with free(). */
int strata_kit_cfg(const strata_plugin_v2_t *vt, const char *const *over,
                   int nover, void **out);

/* ---- 3. mirrored replicas, for strategies ------------------------------- */

typedef struct strata_kit_replicas {
    const strata_host_v2_t *host;
    strata_hctx_t          *hc;      /* first argument of every host call    */
    int                     n;
    const int32_t          *devices;
    size_t                  count;   /* elements of the flat layout          */
    float                 **slab;    /* per replica: all of its variables    */
    strata_opt_t          **opt;     /* per replica: its optimizer state     */
    /* Sharded: n + 1 boundaries (16-float lines); opt[r] holds the state
     * of elements [shard[r], shard[r + 1]) only. NULL: opt[r] covers all. */
    size_t                 *shard;
    float                 **grads;   /* sharded: the gradients of the step  */
} strata_kit_replicas_t;

/* One slab and one optimizer per replica of env (init() of a strategy). */
int  strata_kit_replicas_init(strata_kit_replicas_t *rs,
                              const strata_host_v2_t *host, strata_hctx_t *hc,
                              const strata_env_t *env);
/* The same, with the optimizer state sharded over the replicas when
 * `sharded` (and there are several). */
int  strata_kit_replicas_init_sharded(strata_kit_replicas_t *rs,
                                      const strata_host_v2_t *host,
                                      strata_hctx_t *hc,
                                      const strata_env_t *env, int sharded);
/* Replicas without optimizer state (opt[r] NULL): a strategy that keeps
 * its own. replicas_update() is not for them and replicas_state() moves
 * their variables only. */
int  strata_kit_replicas_init_bare(strata_kit_replicas_t *rs,
                                   const strata_host_v2_t *host,
                                   strata_hctx_t *hc, const strata_env_t *env);
/* Shard i of n of count elements on 16-float lines: its first element. */
size_t strata_kit_replicas_shard_lo(size_t count, int n, int i);
void strata_kit_replicas_fini(strata_kit_replicas_t *rs);
/* Copy the variable's initial value into every replica; set value[r]. */
int  strata_kit_replicas_create_var(strata_kit_replicas_t *rs,
                                    strata_var_t *var);
/* The optimizer step of replica op->slot with the reduced gradients of
 * every variable in op->buf, clipped first ([optimizer] clip_norm). */
int  strata_kit_replicas_update(strata_kit_replicas_t *rs,
                                const strata_op_t *op);
/* [optimizer] clip_norm: clip `grad`, the whole reduced gradient of a step
 * (n floats on device), to the global norm, through the host (a no-op
 * when clipping is off or the core predates ABI 2.2). */
int  strata_kit_replicas_clip(const strata_host_v2_t *host, strata_hctx_t *hc,
                              int32_t device, size_t n, float *grad);
/* The same norm (of all n floats of grad), applied to [lo, lo + len) only:
 * the bits an unsharded clip gives those elements. */
int  strata_kit_replicas_clip_range(const strata_host_v2_t *host,
                                    strata_hctx_t *hc, int32_t device,
                                    size_t n, float *grad, size_t lo,
                                    size_t len);
/* STRATA_CTL_STATE_GET (set = 0): replica 0's variables and optimizer
 * state into st; STRATA_CTL_STATE_SET (set = 1): st into every replica.
 * Sharded, every shard's slots go to (come from) their range of st's
 * slots: the checkpoint has the same layout either way. */
int  strata_kit_replicas_state(strata_kit_replicas_t *rs, int set,
                               strata_state_t *st);
/* One step with sharded optimizer state (CPU replicas; t is the replica
 * threads' transport, used for its barrier). reduce: replica op->slot sums
 * its shard of every replica's gradients into replica 0's buffer (MEAN
 * when `mean`); update: it steps its shard and copies it into every
 * replica's variables; when it returns, all copies are whole and bitwise
 * equal. */
int  strata_kit_replicas_shard_reduce(strata_kit_replicas_t *rs,
                                      strata_transport_t *t,
                                      const strata_op_t *op, int mean);
int  strata_kit_replicas_shard_update(strata_kit_replicas_t *rs,
                                      strata_transport_t *t,
                                      const strata_op_t *op);
/* The reduce with embedding tables given as rows (ABI 2.9): as
 * strata_kit_sparse_reduce_local, every replica publishes op in `pub` (one
 * array of n pointers shared by all; op must stay valid until update()
 * returns, as the core's op does, for the others read it), and
 * per table all decide alike, by `pol`, rows or dense; a dense table is
 * densified and summed with the rest of the shard, a table that goes as
 * rows has its part in the shard made from every replica's rows, read in
 * place, added in replica order then row order (`s`: this replica's
 * scratch). The bits of the unsharded reduce either way; two barriers
 * where the reduce without rows has one. */
struct strata_kit_sparse;
struct strata_kit_sparse_policy;
int  strata_kit_replicas_shard_reduce_rows(
    strata_kit_replicas_t *rs, strata_transport_t *t,
    const struct strata_kit_sparse_policy *pol, struct strata_kit_sparse *s,
    const strata_op_t **pub, const strata_op_t *op, int mean);

/* ---- 4. sparse gradients (ABI 2.9), for strategies ---------------------- */

/* What a strategy's section says: sparse_as_dense (always the dense
 * all-reduce) and the density threshold: a table goes as rows while the
 * rows all members give (duplicates across members counted) are at most
 * threshold * its rows, else dense. */
typedef struct strata_kit_sparse_policy {
    int    as_dense;
    double threshold;
} strata_kit_sparse_policy_t;

/* One member's scratch (zero it first; one per calling thread) and its
 * counts: table-steps exchanged as rows, and densified. */
typedef struct strata_kit_sparse {
    float  *gather;        /* the all-gathered rows, host memory          */
    size_t  gather_cap;    /* floats                                      */
    float  *counts;        /* members x tables row counts                 */
    size_t  counts_cap;
    size_t *bounds;        /* members + 1                                 */
    int     nbounds;
    unsigned char *mark;   /* MEAN: a byte per table row, 0 between calls */
    size_t  mark_cap;
    int64_t as_rows, as_dense;
} strata_kit_sparse_t;

/* The caller's dense reduce of a whole op (its all-reduce, its buckets). */
typedef int (*strata_kit_dense_fn)(void *arg, strata_op_t *op);

/* Copy op's rows into their ranges of op->buf (zeros), which then hold
 * the dense gradient bit for bit; copying twice does no harm. */
int  strata_kit_sparse_densify(const strata_host_v2_t *host,
                               strata_hctx_t *hc, const strata_op_t *op);
/* Combine op->buf, whose op->nsparse tables are given as rows, over the
 * members of t (the caller is `member` of `nmembers`; every member calls,
 * as for t_reduce; op->slot and op->reduce_op as for t_reduce). The
 * members first all-reduce their row counts; from the totals each decides
 * alike, per table, rows or dense. Dense tables are densified and, when
 * no table goes as rows, `dense` reduces the whole op (the caller's own
 * path: the bits of a run without rows). Else the ranges between the
 * tables that go as rows are all-reduced, each member's rows are
 * all-gathered (t_all_gather where t offers STRATA_CAP_SHARDS, else one
 * broadcast per member) and every member adds them onto its zeros in one
 * order -- member order, then row order -- then scales them for MEAN
 * (1/nmembers, as the transports do): the members end bitwise equal, and
 * with 2 members bitwise equal to the dense all-reduce. Host memory
 * (CPU replicas) only. */
int  strata_kit_sparse_reduce(const strata_host_v2_t *host, strata_hctx_t *hc,
                              strata_transport_t *t, int member,
                              int nmembers,
                              const strata_kit_sparse_policy_t *pol,
                              strata_kit_sparse_t *s, strata_op_t *op,
                              strata_kit_dense_fn dense, void *arg);
/* The same for the replica threads of one process (CPU), which read each
 * other's rows in place instead of gathering copies: `pub` is one array
 * of nmembers pointers shared by all of them (zeroed once); t's barrier
 * (STRATA_CAP_BARRIER) orders the reads. Two barriers and the
 * all-reduce of the ranges between the tables per step; the same sums in
 * the same order as strata_kit_sparse_reduce, hence the same bits. */
int  strata_kit_sparse_reduce_local(const strata_host_v2_t *host,
                                    strata_hctx_t *hc, strata_transport_t *t,
                                    int member, int nmembers,
                                    const strata_kit_sparse_policy_t *pol,
                                    strata_kit_sparse_t *s,
                                    const strata_op_t **pub, strata_op_t *op,
                                    strata_kit_dense_fn dense, void *arg);
void strata_kit_sparse_fini(const strata_host_v2_t *host, strata_hctx_t *hc,
                            strata_kit_sparse_t *s);
/* op carries rows (a core of 2.9 or later, a strategy with the bit). */
#define STRATA_KIT_HAS_ROWS(op)                                              \
    (STRATA_HAS_FIELD(strata_op_t, (op), nsparse) && (op)->nsparse > 0 &&    \
     (op)->sparse != NULL)

#ifdef __cplusplus
}
#endif
#endif /* STRATA_KIT_H */
