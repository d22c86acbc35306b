/* strata -- the frozen host table and vtable of plugin ABI major 2.
 *
 * ABI 2 keeps every data struct of major 1 (strata_env_t, strata_group_t,
 * strata_var_t, strata_op_t, ... in abi/types.h, since 2.5 apart from the
 * frozen v1 tables) and changes
 * the two tables at the boundary:
 *   - init() receives, besides the host table, an opaque host context, and
 *     every host entry takes that context first (as SQLite's VFS calls take
 *     their sqlite3_vfs *): the core keeps no process globals behind a host
 *     call, so two strata_ctx_t of one process run side by side;
 *   - t_open() names no plugin: the core chooses the transport of a group
 *     from the configuration ([transport] local / world lists);
 *   - the services for strategies that drive the job (evaluate, report,
 *     boundary) are ordinary calls on the context, valid from init() to
 *     fini() of a strategy instance.
 *
 * FROZEN as major 1 is: members are appended at the END only, with a minor
 * bump in version.h (tests/abi pins every offset and every minor's sizes).
 *
 * Contracts that hold for every entry below unless it says otherwise:
 *   - Memory: what the core passes (env, group, var, op, cluster, strings) is
 *     owned by the core; env and everything it points to live until fini()
 *     returns, op and report only for the call. What a host call returns
 *     (alloc's memory, an opt, a transport) is the plugin's until it gives
 *     it back (free, opt_destroy, t_close) -- at the latest in fini().
 *   - Threads: host entries are thread-safe unless marked "main thread"
 *     (the thread that called init()). A plugin may call them from threads
 *     of its own, with the hc it was given.
 *   - Blocking: host entries return at once unless marked "blocks"; a
 *     blocking entry is bounded by the group's or the job's timeout.
 *   - Errors: 0 (STRATA_OK) or a negative STRATA_E* code; the host has
 *     logged the detail already.
 *
 * Include <strata/plugin.h>, not this file. */
#ifndef STRATA_ABI_PLUGIN_V2_H
#define STRATA_ABI_PLUGIN_V2_H

#include <stddef.h>
#include <stdint.h>

#include "strata/abi/plugin_v1.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The host context handed to init(): since 2.5 one per plugin instance
 * (its plugin name, its config section, the bytes it placed), leading to
 * the strata_ctx_t (training run) the instance belongs to; before 2.5 one
 * per run. Opaque; owned by the core; valid until fini() returns. Pass it,
 * unchanged, as the first argument of every host call. */
typedef struct strata_hctx strata_hctx_t;

typedef struct strata_host_v2 {
    uint32_t struct_size;          /* sizeof(strata_host_v2_t) the core has */
    uint16_t abi_major, abi_minor;

    /* Log one line, prefixed with `who`, to the context's log (the
     * embedding program's log callback, else stderr). Thread-safe. */
    void (*log)(strata_hctx_t *hc, int level, const char *who,
                const char *fmt, ...)
#if defined(__GNUC__)
        __attribute__((format(printf, 4, 5)))
#endif
        ;
    /* Any resolved config value of the context (file < environment <
     * --set), or NULL. The string is the core's, valid until fini(). */
    const char *(*cfg_get)(strata_hctx_t *hc, const char *section,
                           const char *key);

    /* Zeroed memory on `device`, aligned to 64 bytes; NULL when out of
     * memory. free() accepts NULL. copy() moves bytes between any two
     * devices and returns when they are there. Counted in the context's
     * placed bytes (the banner's figure). */
    void *(*alloc)(strata_hctx_t *hc, int32_t device, size_t bytes);
    void  (*free)(strata_hctx_t *hc, int32_t device, void *p);
    int   (*copy)(strata_hctx_t *hc, int32_t dst_device, void *dst,
                  int32_t src_device, const void *src, size_t bytes);

    /* float32 arithmetic on `device`, complete on return (plugins do no
     * math of their own). sum: dst = srcs[0] + ... + srcs[nsrc-1] in that
     * order (deterministic); dst may be srcs[0]. */
    int (*axpy)(strata_hctx_t *hc, int32_t device, size_t n, float a,
                const float *x, float *y);
    int (*scale)(strata_hctx_t *hc, int32_t device, size_t n, float a,
                 float *x);
    int (*sum)(strata_hctx_t *hc, int32_t device, size_t n, float *dst,
               const float *const *srcs, int nsrc);

    /* The context's optimizer ([optimizer]), with its slots for `count`
     * elements on `device`, at their start values (0; adagrad's
     * accumulator: initial_accumulator_value). step() applies one update
     * in place; one opt is used by one thread at a time. io() reads
     * (set = 0) or writes (set = 1) its slots and step count from/to host
     * buffers of count elements (checkpoints). */
    int  (*opt_create)(strata_hctx_t *hc, int32_t device, size_t count,
                       strata_opt_t **out);
    int  (*opt_step)(strata_hctx_t *hc, strata_opt_t *opt, float *param,
                     const float *grad, size_t count, float lr);
    int  (*opt_io)(strata_hctx_t *hc, strata_opt_t *opt, int set,
                   float *const *slots, int nslots, int64_t *steps);
    void (*opt_destroy)(strata_hctx_t *hc, strata_opt_t *opt);

    /* Open the transport the configuration prefers for `group`: the core
     * walks [transport] local (scope LOCAL: replica threads) or world
     * (scope WORLD: one member per process), after [transport] plugin when
     * that is set; a plugin not installed or declining the group is passed
     * over (one info line), another failure stops the walk. The group is
     * copied. Main thread; blocks like the transport's init (connecting). */
    int  (*t_open)(strata_hctx_t *hc, const strata_group_t *group,
                   strata_transport_t **out);
    /* The name of the plugin behind `t` ("zmq"); the core's string, valid
     * until t_close. */
    const char *(*t_name)(strata_hctx_t *hc, strata_transport_t *t);
    /* Forward to the transport's entry (STRATA_ENOTSUP when it lacks it);
     * they block as that entry does. t_close: main thread, once. */
    int  (*t_reduce)(strata_hctx_t *hc, strata_transport_t *t, strata_op_t *op);
    int  (*t_update)(strata_hctx_t *hc, strata_transport_t *t, strata_op_t *op);
    int  (*t_ctl)(strata_hctx_t *hc, strata_transport_t *t, int op, void *arg);
    int  (*t_send)(strata_hctx_t *hc, strata_transport_t *t, int peer,
                   const void *hdr, size_t hlen, const void *data,
                   size_t dlen, int timeout_ms);
    int  (*t_recv)(strata_hctx_t *hc, strata_transport_t *t, int *peer,
                   void *buf, size_t cap, size_t *len, int timeout_ms);
    void (*t_close)(strata_hctx_t *hc, strata_transport_t *t);

    /* ---- for strategies; main thread, between steps ---------------------- */
    /* Evaluate the test set with the variables as placed (var->value[r] of
     * every replica; the replica threads share the work). Blocks for the
     * evaluation. STRATA_ESTATE before the variables are placed. */
    int  (*evaluate)(strata_hctx_t *hc, double *loss, double *acc);
    /* Progress and metrics of a strategy that drives the job: printed (on
     * the chief) as the core's own loop prints them, written to
     * train.metrics_csv, passed to the epoch callback. */
    int  (*report)(strata_hctx_t *hc, const strata_report_t *r);
    /* Step boundaries of a job the strategy drives: a point where every step
     * before global step `step` (batch `batch` of epoch `epoch`; batch 0 of
     * the next epoch at an epoch's end) is applied and no later one.
     * boundary_due() says, before the strategy hands out batch `batch`,
     * whether the core wants to act there (a checkpoint of [checkpoint]
     * every_steps, or a stop request): 1 or 0; cheap. boundary() is called
     * at a step boundary (the strategy drains the steps in flight first):
     * the core writes the checkpoint due there, reading the state through
     * STRATA_CTL_STATE_GET, and returns STRATA_OK to go on, STRATA_ESTOPPED
     * when the job must stop, or an error. Call it at the end of every
     * epoch too. Blocks while a checkpoint is written. */
    int  (*boundary_due)(strata_hctx_t *hc, int32_t epoch, int64_t batch,
                         int64_t step);
    int  (*boundary)(strata_hctx_t *hc, int32_t epoch, int64_t batch,
                     int64_t step);

    /* ---- appended in 2.2 (check with STRATA_HAS_FIELD) -------------------- */
    /* [optimizer] clip_norm: global gradient-norm clipping after the reduce
     * (tf.clip_by_global_norm), where a strategy holds the reduced gradient
     * of every variable of a step, in one buffer or in parts (one per
     * thread). grad_sumsq() sets *sumsq to the sum of the squares of the n
     * floats of g on `device` (in index order, in double: equal bytes give
     * an equal sum on every replica) and returns 1; it returns 0 at once,
     * computing nothing, when clipping is off: there is nothing to clip.
     * grad_clip() scales g in place by clip_norm / max(norm, clip_norm),
     * norm = sqrt(sumsq) with sumsq the sum over the WHOLE gradient of the
     * step (its parts' sums added in a fixed order), so that every replica
     * given the same gradient clips it alike. Both complete on return. */
    int  (*grad_sumsq)(strata_hctx_t *hc, int32_t device, size_t n,
                       const float *g, double *sumsq);
    int  (*grad_clip)(strata_hctx_t *hc, int32_t device, size_t n, float *g,
                      double sumsq);
    /* For a strategy that drives the job: 1 when the core has ended the
     * training early (early stopping, [train] early_stopping_patience,
     * decided at the EPOCH_END report before): run no further epoch and
     * finish the job as after its last one -- it is done, not stopped on
     * request; 0 otherwise. Main thread, after the epoch's boundary(). */
    int  (*training_done)(strata_hctx_t *hc);

    /* ---- ABI 2.3: STRATA_HAS_FIELD(strata_host_v2_t, host, membership) -- */
    /* Elastic jobs: join the next generation of the job's membership and
     * return it in *out (set out->struct_size first). `committed`: the
     * steps this process has applied (-1: it holds no state yet). Blocks
     * until the job's membership service has formed the generation --
     * every live worker joined, or enough of them after a settling time --
     * bounded by `timeout_ms`. STRATA_ENOTSUP when the job has no
     * membership service (it was not started by strata launch --elastic);
     * STRATA_ETIMEDOUT, or STRATA_ECANCELED when the service gave up (fewer
     * than its min_workers for too long) or the job is over: logged. Main
     * thread. The core learns the new world from it too: a strategy
     * returns STRATA_OK from STRATA_CTL_REGROUP only with the groups of the
     * generation it joined last. */
    int  (*membership)(strata_hctx_t *hc, int64_t committed, int timeout_ms,
                       strata_membership_t *out);
    /* Where a config value came from, for a plugin's own error messages:
     * "job.ini:12", "--set", "STRATA_STRATEGY_PARTITIONER"; NULL when the
     * key is not set (its default is in use). The string is the core's,
     * valid until fini(). Any thread. Check with STRATA_HAS_FIELD
     * (strata_host_v2_t, host, cfg_origin). */
    const char *(*cfg_origin)(strata_hctx_t *hc, const char *section,
                              const char *key);

    /* ---- ABI 2.5: STRATA_HAS_FIELD(strata_host_v2_t, host, t_barrier) ---- */
    /* The transport collectives, first class. t_reduce is the all-reduce
     * and t_update the broadcast (from op->root). The host checks every
     * argument once, for every transport alike, before the transport sees
     * it: op not NULL; op->buf not NULL when op->count > 0; op->count not
     * beyond SIZE_MAX / 4; op->slot in [0, nlocal) in a LOCAL group;
     * op->reduce_op SUM or MEAN (all-reduce, reduce-scatter); op->root in
     * [0, group size) (broadcast); bounds: group size + 1 ascending offsets
     * from 0 to op->count (reduce-scatter, all-gather). A bad one is
     * STRATA_EINVAL and one error line that names the transport, the group
     * and the field. Then the transport's entry runs; one built before 2.5
     * is served through its STRATA_CTL_* op, one that has neither gives
     * STRATA_ENOTSUP.
     * t_reduce_scatter / t_all_gather: the two halves of an all-reduce over
     * shards (see STRATA_CTL_REDUCE_SCATTER in plugin.h for the contract):
     * member m owns [bounds[m], bounds[m + 1]) of op->buf; ask t_caps for
     * STRATA_CAP_SHARDS first. t_barrier: every member meets; `slot` is the
     * calling member's (op->slot: 0 in a WORLD group). */
    int  (*t_reduce_scatter)(strata_hctx_t *hc, strata_transport_t *t,
                             strata_op_t *op, const size_t *bounds);
    int  (*t_all_gather)(strata_hctx_t *hc, strata_transport_t *t,
                         strata_op_t *op, const size_t *bounds);
    int  (*t_barrier)(strata_hctx_t *hc, strata_transport_t *t, int slot);
    /* What transport instance `t` offers: its plugin's STRATA_CAP_* word
     * (derived for a plugin built before 2.5), less STRATA_CAP_SHARDS when
     * this group does not offer the halves (zmq over shared memory). No
     * collective; any thread. */
    uint32_t (*t_caps)(strata_hctx_t *hc, strata_transport_t *t);

    /* ---- ABI 2.8: STRATA_HAS_FIELD(strata_host_v2_t, host, states_set) --- */
    /* The model's layer states (batchnorm's moving mean and variance: not
     * variables, not trained, what a checkpoint holds beside them) in the
     * checkpoint's flat layout. states_get: *n = the model's count (0: it
     * has none); with buf, copies replica 0's states there when cap >= *n
     * (else STRATA_EINVAL). states_set: installs buf on every replica of
     * this process (what evaluation and the next checkpoint read); n must
     * be the model's count and every value finite, else STRATA_EINVAL and
     * nothing is installed. Both main thread, between steps; no
     * collective. A strategy that drives the job and declares
     * STRATA_CAP_LAYER_STATES carries the states its workers hand it in
     * strata_step_t.states to the task that evaluates and checkpoints. */
    int  (*states_get)(strata_hctx_t *hc, float *buf, size_t cap, size_t *n);
    int  (*states_set)(strata_hctx_t *hc, const float *buf, size_t n);

    /* ---- ABI 2.10: STRATA_HAS_FIELD(strata_host_v2_t, host, opt_step_rows) */
    /* One lazy optimizer update of the rows of a [count / row_len, row_len]
     * variable that `rows` names (nrows ids, ascending, distinct, each below
     * count / row_len; grad: nrows x row_len, rows[i]'s at i x row_len):
     * those rows of param and of the optimizer's slots are stepped as
     * opt_step steps each element, every other row and slot is left as it
     * is, and the optimizer's step count (Adam's bias correction) counts
     * this call once -- TensorFlow's sparse apply of a ps's embedding table
     * ("lazy Adam"). STRATA_EINVAL, nothing applied, on rows out of order or
     * range or a row_len that does not divide the optimizer's count. */
    int  (*opt_step_rows)(strata_hctx_t *hc, strata_opt_t *opt, float *param,
                          const int64_t *rows, size_t nrows, size_t row_len,
                          const float *grad, float lr);

    /* ---- ABI 2.11: STRATA_HAS_FIELD(strata_host_v2_t, host, batch_rows) -- */
    /* The rows of each embedding table that this process's replicas will
     * read in global batch `batch` of epoch `epoch` (0-based, as
     * strata_step_t hands them out), for a strategy that moves a table's
     * rows before the core loads the batch (ps's workers pull only those).
     * *n = the model's embedding tables (0: none); with out, one
     * strata_sparse_t per table in model order when cap >= *n (else
     * STRATA_EINVAL): var, offset, count, row_len as strata_op_t.sparse
     * gives them, nrows and rows (ascending, distinct table rows: every id
     * of every id column of the samples of every replica's slice; -1,
     * padding, names none), values NULL. The rows are the host's, valid
     * until the next call. STRATA_EINVAL for an epoch or batch out of
     * range, STRATA_ESTATE outside a run. Main thread, between steps;
     * no collective. */
    int  (*batch_rows)(strata_hctx_t *hc, int32_t epoch, int64_t batch,
                       strata_sparse_t *out, size_t cap, size_t *n);

    /* ---- ABI 2.12: STRATA_HAS_FIELD(strata_host_v2_t, host, init_values) */
    /* Elements [lo, lo + n) of var's initial values into dst (host
     * memory): what var->init holds for a strategy without
     * STRATA_CAP_LAZY_INIT, the seeded values or [model] init_from's, the
     * same on every task. For a strategy that keeps a part of a variable
     * (a ps task its shards, a ps worker no table): the core then holds
     * none of the model's initial values. Time linear in lo + n (the
     * seeded stream is drawn from its start): one call per range.
     * STRATA_EINVAL for a range outside the variable, STRATA_ESTATE
     * outside a run. Main thread, from create_var on. */
    int  (*init_values)(strata_hctx_t *hc, const strata_var_t *var,
                        size_t lo, size_t n, float *dst);
    /* Zero [ptr, ptr + bytes) of memory that alloc gave for a CPU device
     * and hand its whole pages back to the system: they read as zeros
     * and take no memory until written again (alloc's CPU memory is
     * committed only where written). A strategy that reads a variable in
     * part (a ps worker, an embedding table's rows of a batch) calls it
     * on the part it no longer needs, so that a task's memory stays at
     * what a step writes. STRATA_EINVAL for another device. Any thread,
     * on memory no other thread uses meanwhile. */
    int  (*discard)(strata_hctx_t *hc, int32_t device, void *ptr,
                    size_t bytes);

    /* ---- ABI 2.13: STRATA_HAS_FIELD(strata_host_v2_t, host, part_write) */
    /* Write this task's part of the checkpoint of step part->step into
     * [checkpoint] dir, as DIR/ckpt-<step>.part-<index>-of-<count>
     * .safetensors: every piece a tensor "NAME[ROW0:ROW1]" (a slot's
     * "optimizer/SLOT/NAME[ROW0:ROW1]"), the tag, step and index in its
     * metadata; atomically (a temp file, fsync, rename), like the core's
     * own checkpoints. The task that calls STATE_GET's host writes the
     * checkpoint's main file after every part, naming their count and
     * tag; a reader joins the parts into whole variables, whatever
     * placement wrote them. part->bytes receives the file's size.
     * STRATA_EINVAL: a piece outside its variable, an unknown slot, two
     * pieces that overlap; STRATA_ESTATE: no [checkpoint] dir; STRATA_EIO.
     * Any task of a run, main thread. */
    int  (*part_write)(strata_hctx_t *hc, strata_part_t *part);
} strata_host_v2_t;

/* The vtable a plugin exports as `strata_plugin_v2`. Every entry but init
 * has the signature, and the contract, of the member of the same name in
 * strata_plugin_v1_t (abi/plugin_v1.h); `placed` is part of 2.0. */
typedef struct strata_plugin_v2 {
    strata_plugin_header_t hdr;

    const strata_option_t *options;   /* keys of its section; NULL = none   */
    size_t                 cfg_size;  /* bytes of the struct they fill      */
    size_t                 var_state_size; /* bytes of strata_var_t.state    */

    /* Required. Once per instance, main thread, after the options are
     * parsed: a strategy once per context, a transport once per group
     * (host->t_open). Keep `host` and `hc` for the instance's life. Return
     * STRATA_EDECLINE when the plugin cannot work here (the core tries the
     * next one listed). Blocks up to the job's timeout (connecting). */
    int  (*init)(const strata_host_v2_t *host, strata_hctx_t *hc,
                 const strata_env_t *env, void **pctx);
    /* Required. Frees everything init and create_var made; main thread.
     * Accepts a ctx whose init failed half-way only if init left *pctx
     * NULL. Bounded: never waits for a peer longer than the timeout. */
    void (*fini)(void *pctx);
    /* Strategy (required): place the variable, set var->value[r] for every
     * replica. Transport (optional): make a buffer known. Main thread. */
    int  (*create_var)(void *pctx, strata_var_t *var);
    /* Strategy (required): combine the replicas' gradients in op->buf.
     * Transport (required): all-reduce op->buf in place across the group.
     * Every local member calls, concurrently; collective; blocks up to the
     * group's timeout. */
    int  (*reduce)(void *pctx, strata_op_t *op);
    /* Strategy (required): apply the optimizer, leave var->value[slot]
     * current. Transport (optional): broadcast from op->root. Collective. */
    int  (*update)(void *pctx, strata_op_t *op);
    /* Optional: STRATA_CTL_* ops; unknown ops -> STRATA_ENOTSUP. */
    int  (*ctl)(void *pctx, int op, void *arg);
    /* Optional, strategy: run this process's part of the job itself. */
    int  (*drive)(void *pctx, const strata_drive_t *d);
    /* Optional, strategy: the next step this worker runs. */
    int  (*next_step)(void *pctx, strata_step_t *st);
    /* Optional, transport: point to point (group flag STRATA_GROUP_P2P). */
    int  (*send)(void *pctx, int peer, const void *hdr, size_t hlen,
                 const void *data, size_t dlen, int timeout_ms);
    int  (*recv)(void *pctx, int *peer, void *buf, size_t cap, size_t *len,
                 int timeout_ms);
    /* Optional, strategy: every variable has been through create_var. */
    int  (*placed)(void *pctx);

    /* ---- ABI 2.4: STRATA_HAS(p, reduce_ready) ----------------------------- */
    /* Optional, strategy: overlap of the backward pass and the reduce. While
     * replica op->slot runs the backward pass of step op->step, the core
     * calls reduce_ready() on that replica's thread each time the gradients
     * [ready, op->count) of op->buf are final -- the last layer's first, so
     * `ready` decreases from call to call -- and then reduce(op) as ever.
     * The strategy may start reducing final elements at once (on a thread of
     * its own); it must not touch op->buf below `ready` before reduce(), and
     * reduce() returns when all of op->buf is reduced, as without these
     * calls. op is the one reduce() gets (same buf, count, step, flags); it
     * lives until reduce() returns. A failure returned ends the step as a
     * failed reduce() would; STRATA_ENOTSUP says the strategy has no use
     * for these calls in this run: that replica gets no more of them. */
    int  (*reduce_ready)(void *pctx, const strata_op_t *op, size_t ready);

    /* ---- ABI 2.5: STRATA_HAS(p, barrier) --------------------------------- */
    /* Optional, transport: the collectives that were ctl ops before 2.5
     * (STRATA_CTL_REDUCE_SCATTER, _ALL_GATHER, _BARRIER), each with the
     * contract of that op. The host has checked the arguments (see
     * strata_host_v2_t.t_reduce_scatter): a transport need not check them
     * again. reduce_scatter(pctx, NULL, NULL) only asks, without a
     * collective, whether this instance offers the halves: STRATA_OK or
     * STRATA_ENOTSUP. barrier: `slot` is the calling member (op->slot).
     * Declare them in hdr.caps (STRATA_CAP_SHARDS, STRATA_CAP_BARRIER). */
    int  (*reduce_scatter)(void *pctx, strata_op_t *op, const size_t *bounds);
    int  (*all_gather)(void *pctx, strata_op_t *op, const size_t *bounds);
    int  (*barrier)(void *pctx, int slot);

    /* ---- ABI 2.7: STRATA_HAS(p, strangers) ------------------------------- */
    /* Optional, transport: what this instance dropped from outside its
     * group so far, by kind (strata_strangers_t; out->struct_size is set by
     * the caller, the other members zeroed). The core sums every instance
     * of a run for its end-of-job line and TensorBoard. `last` 0: any
     * thread, while collectives may run -- read counters, touch no socket,
     * never block. `last` 1: once, on the main thread, right before fini(),
     * no collective running: the transport may first take in what it has
     * pending (zmq.so reads its monitors) so that the counts are final.
     * Return STRATA_OK; STRATA_ENOTSUP: this instance counts nothing (it
     * is then not reported). A transport without the entry is not
     * reported. */
    int  (*strangers)(void *pctx, strata_strangers_t *out, int last);
} strata_plugin_v2_t;

#ifdef __cplusplus
}
#endif
#endif /* STRATA_ABI_PLUGIN_V2_H */
