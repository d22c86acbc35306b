/* Mirrored replicas for strategy plugins (mirrored.so, mwms.so): one slab
 * per replica holding a copy of every variable, and one optimizer state per
 * replica -- or, sharded (ZeRO stage 1, shards.c), replica r's optimizer
 * state only for its shard of the flat layout. Uses the public SDK only;
 * compiled into each plugin that needs it. */
#ifndef STRATA_PLUGINS_REPLICAS_H
#define STRATA_PLUGINS_REPLICAS_H

#include <strata/plugin.h>

typedef struct replicas {
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
    double                 *sumsq;   /* sharded: each shard's, to clip      */
} replicas_t;

int  replicas_init(replicas_t *rs, const strata_host_v2_t *host,
                   strata_hctx_t *hc, const strata_env_t *env);
/* The same, with the optimizer state sharded over the replicas when
 * `sharded` (and there are several). */
int  replicas_init_sharded(replicas_t *rs, const strata_host_v2_t *host,
                           strata_hctx_t *hc, const strata_env_t *env,
                           int sharded);
/* Replicas without optimizer state (opt[r] NULL): a strategy that keeps
 * its own (mwms's worker shard). replicas_update() is not for them and
 * replicas_state() moves their variables only. */
int  replicas_init_bare(replicas_t *rs, const strata_host_v2_t *host,
                        strata_hctx_t *hc, const strata_env_t *env);
/* Shard i of n of count elements on 16-float lines: its first element. */
size_t replicas_shard_lo(size_t count, int n, int i);
void replicas_fini(replicas_t *rs);
/* Copy the variable's initial value into every replica; set value[r]. */
int  replicas_create_var(replicas_t *rs, strata_var_t *var);
/* The optimizer step of replica op->slot with the reduced gradients of
 * every variable in op->buf, clipped first ([optimizer] clip_norm). */
int  replicas_update(replicas_t *rs, const strata_op_t *op);
/* [optimizer] clip_norm: clip `grad`, the whole reduced gradient of a step
 * (n floats on device), to the global norm, through the host (a no-op
 * when clipping is off or the core predates ABI 2.2). */
int  replicas_clip(const strata_host_v2_t *host, strata_hctx_t *hc,
                   int32_t device, size_t n, float *grad);
/* The same norm (of all n floats of grad), applied to [lo, lo + len) only:
 * the bits an unsharded clip gives those elements (mwms's worker shard). */
int  replicas_clip_range(const strata_host_v2_t *host, strata_hctx_t *hc,
                         int32_t device, size_t n, float *grad, size_t lo,
                         size_t len);

/* STRATA_CTL_STATE_GET (set = 0): replica 0's variables and optimizer
 * state into st; STRATA_CTL_STATE_SET (set = 1): st into every replica
 * (the optimizer state of bare replicas is their strategy's).
 * Sharded, every shard's slots go to (come from) their range of st's
 * slots: the checkpoint has the same layout either way. */
int  replicas_state(replicas_t *rs, int set, strata_state_t *st);

/* shards.c: one step with sharded optimizer state (CPU replicas; t is the
 * replica threads' transport, used for its barrier). reduce: replica
 * op->slot sums its shard of every replica's gradients into replica 0's
 * buffer (MEAN when `mean`); update: it steps its shard and copies it into
 * every replica's variables; when it returns, all copies are whole and
 * bitwise equal. */
int  replicas_shard_reduce(replicas_t *rs, strata_transport_t *t,
                           const strata_op_t *op, int mean);
int  replicas_shard_update(replicas_t *rs, strata_transport_t *t,
                           const strata_op_t *op);

#endif
