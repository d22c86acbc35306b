/* Mirrored replicas for strategy plugins (mirrored.so, mwms.so): one slab
 * per replica holding a copy of every variable, and one optimizer state per
 * replica. Uses the public SDK only; compiled into each plugin that needs it. */
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
} replicas_t;

int  replicas_init(replicas_t *rs, const strata_host_v2_t *host,
                   strata_hctx_t *hc, const strata_env_t *env);
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

/* STRATA_CTL_STATE_GET (set = 0): replica 0's variables and optimizer
 * state into st; STRATA_CTL_STATE_SET (set = 1): st into every replica. */
int  replicas_state(replicas_t *rs, int set, strata_state_t *st);


#endif
