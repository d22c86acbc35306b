/* strata -- the frozen tables of plugin ABI major 1: its host table, the
 * plugin header (shared by every major) and its vtable. The data structs
 * that both majors exchange, and that grow, are in types.h.
 *
 * FROZEN: never reorder, resize or remove a member of a struct in this file.
 * New members are appended at the END of a struct only, with a minor bump in
 * version.h; readers guard them with STRATA_HAS / STRATA_HAS_FIELD (see
 * plugin.h). tests/abi/ prints the offset of every member and compares it
 * with a golden file, so an accidental change fails the build.
 *
 * Include <strata/plugin.h>, not this file. */
#ifndef STRATA_ABI_PLUGIN_V1_H
#define STRATA_ABI_PLUGIN_V1_H

#include <stddef.h>
#include <stdint.h>

#include "strata/abi/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the services the core gives every plugin (rule 5) ---------------- */

typedef struct strata_host_v1 {
    uint32_t struct_size;
    uint16_t abi_major, abi_minor;

    /* Log one line, prefixed with `who`. Thread-safe. */
    void (*log)(int level, const char *who, const char *fmt, ...)
#if defined(__GNUC__)
        __attribute__((format(printf, 3, 4)))
#endif
        ;
    /* Any resolved config value (file < environment < --set), or NULL. */
    const char *(*cfg_get)(const char *section, const char *key);

    /* Zeroed memory on `device`, aligned to 64 bytes; NULL when out of memory.
     * free() accepts NULL. copy() moves bytes between any two devices. */
    void *(*alloc)(int32_t device, size_t bytes);
    void  (*free)(int32_t device, void *p);
    int   (*copy)(int32_t dst_device, void *dst, int32_t src_device,
                  const void *src, size_t bytes);

    /* float32 arithmetic on `device` (rule: plugins do no math of their own). */
    int (*axpy)(int32_t device, size_t n, float a, const float *x, float *y);
    int (*scale)(int32_t device, size_t n, float a, float *x);
    /* dst = sum of srcs[0..nsrc) in that order (deterministic); dst may be srcs[0]. */
    int (*sum)(int32_t device, size_t n, float *dst, const float *const *srcs, int nsrc);

    /* The configured optimizer ([optimizer] section), with its slots for
     * `count` elements on `device`. step() applies one update in place. */
    int  (*opt_create)(int32_t device, size_t count, strata_opt_t **out);
    int  (*opt_step)(strata_opt_t *opt, float *param, const float *grad,
                     size_t count, float lr);
    void (*opt_destroy)(strata_opt_t *opt);

    /* Open a transport plugin by name for `group` (the core loads it, parses
     * its [transport] keys and calls its init). The t_* calls forward to it
     * and return STRATA_ENOTSUP for an entry the transport lacks. */
    int  (*t_open)(const char *name, const strata_group_t *group,
                   strata_transport_t **out);
    int  (*t_reduce)(strata_transport_t *t, strata_op_t *op);
    int  (*t_update)(strata_transport_t *t, strata_op_t *op);
    int  (*t_ctl)(strata_transport_t *t, int op, void *arg);
    void (*t_close)(strata_transport_t *t);

    /* ---- ABI 1.1 ---- */
    /* Point to point through a transport (see the transport's send/recv). */
    int  (*t_send)(strata_transport_t *t, int peer, const void *hdr,
                   size_t hlen, const void *data, size_t dlen, int timeout_ms);
    int  (*t_recv)(strata_transport_t *t, int *peer, void *buf, size_t cap,
                   size_t *len, int timeout_ms);
    /* For drive(): evaluate the test set with the variables as placed
     * (var->value[r] of every replica; the replica threads share the work).
     * Main thread only. */
    int  (*evaluate)(double *loss, double *acc);
    /* For drive(): progress line, metrics CSV (only the chief prints). */
    int  (*report)(const strata_report_t *r);
    /* Read (set = 0) or write (set = 1) an optimizer's slots and step count
     * from/to host buffers of opt's count elements (checkpoints). */
    int  (*opt_io)(strata_opt_t *opt, int set, float *const *slots,
                   int nslots, int64_t *steps);

    /* ---- ABI 1.2: guard with STRATA_HAS_FIELD(strata_host_v1_t, ...) ---- */
    /* For drive(): step boundaries of a job the strategy drives. A step
     * boundary is a point where every step before global step `step`
     * (batch `batch` of epoch `epoch`; batch 0 of the next epoch at an
     * epoch's end) is applied and no later one. boundary_due() says, before
     * the strategy hands out batch `batch`, whether the core wants to act
     * there (a checkpoint of [checkpoint] every_steps, or a stop request):
     * 1 or 0; cheap. boundary() is called at a step boundary (the strategy
     * drains the steps in flight first): the core writes the checkpoint due
     * there, if any, reading the state through STRATA_CTL_STATE_GET, and
     * returns STRATA_OK to go on, STRATA_ESTOPPED when the job must stop
     * (a stop was requested), or an error. Call it at the end of every
     * epoch too (every_epochs). Main thread only. */
    int  (*boundary_due)(int32_t epoch, int64_t batch, int64_t step);
    int  (*boundary)(int32_t epoch, int64_t batch, int64_t step);

    /* ---- ABI 1.4: guard with STRATA_HAS_FIELD(strata_host_v1_t, ...) ---- */
    /* Open the transport the configuration prefers for `group`: the core
     * walks [transport] local (a scope-LOCAL group: replica threads) or
     * world (scope WORLD: one member per process), after [transport] plugin
     * when that is set; a plugin not installed or declining the group is
     * passed over (one info line), another failure stops the walk. A
     * strategy names no transport. Blocks like the transport's init. */
    int  (*t_open_group)(const strata_group_t *group, strata_transport_t **out);
    /* The name of the plugin behind `t` ("zmq"); owned by the core. */
    const char *(*t_name)(strata_transport_t *t);
} strata_host_v1_t;

/* ---- the plugin vtable ----------------------------------------------- */

typedef struct strata_plugin_header {
    uint16_t    abi_major;   /* == STRATA_ABI_MAJOR or the core refuses      */
    uint16_t    abi_minor;   /* the plugin's minor; the core may be newer    */
    uint32_t    struct_size; /* sizeof(strata_plugin_v1_t) the plugin saw   */
    uint32_t    kind;        /* STRATA_KIND_STRATEGY | STRATA_KIND_TRANSPORT */
    /* reserved (0) before 2.5; since 2.5 the plugin's STRATA_CAP_* bits
     * (plugin.h). The core reads it only from a plugin of minor >= 5. */
    uint32_t    caps;
    const char *name;        /* must equal the file stem and the INI name    */
    const char *version;     /* the plugin's own version, for logs           */
    const char *description; /* one line, for `strata plugins`               */
    const char *build_sig;   /* STRATA_BUILD_SIG as the plugin was built     */
} strata_plugin_header_t;

typedef struct strata_plugin_v1 {
    strata_plugin_header_t hdr;

    const strata_option_t *options;   /* keys of its section; NULL = none   */
    size_t                 cfg_size;  /* bytes of the struct they fill      */
    size_t                 var_state_size; /* bytes of strata_var_t.state    */

    /* Required. Called once per instance from the main thread, after the
     * options are parsed. A strategy is instantiated once per process; a
     * transport once per group (host->t_open). Return STRATA_EDECLINE when
     * the plugin cannot work here (the core tries the next one listed). */
    int  (*init)(const struct strata_host_v1 *host, const strata_env_t *env,
                 void **pctx);
    /* Required. Frees everything init and create_var made. Accepts a ctx
     * whose init failed half-way only if init left *pctx NULL. */
    void (*fini)(void *pctx);

    /* Strategy: place the variable, set var->value[r] for every replica.
     * Transport: make a buffer known (register/announce); may be NULL.
     * Main thread, once per variable in model order, after init. */
    int  (*create_var)(void *pctx, strata_var_t *var);

    /* Strategy: combine the replicas' gradients in op->buf (replica op->slot).
     * Transport: all-reduce op->buf in place across the group.
     * Called by every local member concurrently (one call per member per
     * step); it is collective and may block up to the group's timeout. */
    int  (*reduce)(void *pctx, strata_op_t *op);

    /* Strategy: apply the optimizer where the variable lives and leave
     * replica op->slot's view (var->value[slot]) current.
     * Transport: broadcast op->buf from member op->root. Collective. */
    int  (*update)(void *pctx, strata_op_t *op);

    /* Optional escape hatch: STRATA_CTL_* ops; unknown ops -> STRATA_ENOTSUP. */
    int  (*ctl)(void *pctx, int op, void *arg);

    /* ---- ABI 1.1: guard with STRATA_HAS ---- */

    /* Optional. Strategy: run this process's part of the job when the
     * strategy drives it itself (ps: a parameter server, the coordinator).
     * Main thread, once, after every create_var, instead of the core's
     * training loop; return STRATA_ENOTSUP to let the core train here (ps:
     * the workers). May block for the whole job. */
    int  (*drive)(void *pctx, const strata_drive_t *d);

    /* Optional. Strategy: the next step this worker runs, given the results
     * of its previous one; NULL: the core runs every batch of every epoch in
     * order. Main thread; may block up to the job's timeout. */
    int  (*next_step)(void *pctx, strata_step_t *st);

    /* Optional. Transport: send one message (hdr then data, either may be
     * empty) to member `peer`, and receive one from any member into buf
     * (a message longer than cap is dropped: STRATA_EPROTO). Thread-safe
     * per instance; each wait bounded by timeout_ms (<= 0: the transport's
     * timeout). */
    int  (*send)(void *pctx, int peer, const void *hdr, size_t hlen,
                 const void *data, size_t dlen, int timeout_ms);
    int  (*recv)(void *pctx, int *peer, void *buf, size_t cap, size_t *len,
                 int timeout_ms);

    /* ---- ABI 1.3: guard with STRATA_HAS ---- */

    /* Optional. Strategy: every variable of the run has been through
     * create_var (var->index 0 .. env->nvars - 1); called once, on the main
     * thread, before any reduce, update or drive. What a strategy sets up
     * from the whole placement happens here (ps: the shards' owners). May
     * block up to the job's timeout. */
    int  (*placed)(void *pctx);
} strata_plugin_v1_t;

#ifdef __cplusplus
}
#endif
#endif /* STRATA_ABI_PLUGIN_V1_H */
