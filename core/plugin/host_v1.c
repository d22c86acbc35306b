/* The ABI 1 adapter: plugins built for major 1 (symbol strata_plugin_v1)
 * get a strata_host_v1_t whose entries carry no context. Each forwards to
 * the ABI 2 entry of the same name with the context that owns the process's
 * ABI 1 instances: one context at a time may hold them (a second one is
 * refused with a line saying so), which is the whole price of ABI 1 -- the
 * rest of the core keeps no process globals behind a host call. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "runtime.h"

/* The minor of ABI 1 this adapter serves: every member of 1.4. */
#define V1_MINOR 4

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static strata_ctx_t *_Atomic g_owner;  /* the context of the live v1 instances */

/* The host context of the first live v1 instance (ABI 2.5: its bytes are
 * counted to it), else the owner's own. */
static strata_hctx_t *_Atomic g_v1_hc;

static strata_hctx_t *hc1(void)
{
    strata_hctx_t *hc = atomic_load(&g_v1_hc);
    if (hc)
        return hc;
    strata_ctx_t *ctx = atomic_load(&g_owner);
    return ctx ? &ctx->hc : NULL;
}

/* The one place a v1 host call may find its context; refuses a second
 * context while the first holds ABI 1 instances. */
static int acquire(strata_ctx_t *ctx, const strata__plugin_t *p)
{
    pthread_mutex_lock(&g_lock);
    strata_ctx_t *owner = atomic_load(&g_owner);
    int ok = owner == NULL || owner == ctx;
    if (ok) {
        atomic_store(&g_owner, ctx);
        ctx->v1_refs++;
    }
    pthread_mutex_unlock(&g_lock);
    if (!ok)
        strata__log(STRATA_LOG_ERROR, "loader", "%s plugin '%s' (%s) is built "
                    "for plugin ABI 1, whose host calls carry no context, and "
                    "another strata context of this process is using ABI 1 "
                    "plugins; rebuild it against this strata's "
                    "<strata/plugin.h> (ABI %d) to run contexts side by side",
                    strata__kind_name(p->vt->hdr.kind), p->name, p->path,
                    STRATA_ABI_MAJOR);
    return ok ? STRATA_OK : STRATA_EAGAIN;
}

static void release(strata_ctx_t *ctx)
{
    pthread_mutex_lock(&g_lock);
    if (--ctx->v1_refs == 0)
        atomic_store(&g_owner, NULL);
    pthread_mutex_unlock(&g_lock);
}

/* ---- the v1 entries --------------------------------------------------- */

static void v1_log(int level, const char *who, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void v1_log(int level, const char *who, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    strata__vlog_ctx(atomic_load(&g_owner), level, who, fmt, ap);
    va_end(ap);
}

#define H strata__host_v2

static const char *v1_cfg_get(const char *section, const char *key)
{ return H.cfg_get(hc1(), section, key); }
static void *v1_alloc(int32_t device, size_t bytes)
{ return H.alloc(hc1(), device, bytes); }
static void v1_free(int32_t device, void *p) { H.free(hc1(), device, p); }
static int v1_copy(int32_t dd, void *dst, int32_t sd, const void *src,
                   size_t bytes)
{ return H.copy(hc1(), dd, dst, sd, src, bytes); }
static int v1_axpy(int32_t device, size_t n, float a, const float *x, float *y)
{ return H.axpy(hc1(), device, n, a, x, y); }
static int v1_scale(int32_t device, size_t n, float a, float *x)
{ return H.scale(hc1(), device, n, a, x); }
static int v1_sum(int32_t device, size_t n, float *dst,
                  const float *const *srcs, int nsrc)
{ return H.sum(hc1(), device, n, dst, srcs, nsrc); }
static int v1_opt_create(int32_t device, size_t count, strata_opt_t **out)
{ return H.opt_create(hc1(), device, count, out); }
static int v1_opt_step(strata_opt_t *opt, float *param, const float *grad,
                       size_t count, float lr)
{ return H.opt_step(hc1(), opt, param, grad, count, lr); }
static void v1_opt_destroy(strata_opt_t *opt) { H.opt_destroy(hc1(), opt); }
static int v1_opt_io(strata_opt_t *opt, int set, float *const *slots,
                     int nslots, int64_t *steps)
{ return H.opt_io(hc1(), opt, set, slots, nslots, steps); }
static int v1_t_open(const char *name, const strata_group_t *group,
                     strata_transport_t **out)
{
    strata_ctx_t *ctx = atomic_load(&g_owner);
    *out = NULL;
    return ctx && name && group ? strata__host_open_named(ctx, name, group, out)
                                : STRATA_EINVAL;
}
static int v1_t_reduce(strata_transport_t *t, strata_op_t *op)
{ return H.t_reduce(hc1(), t, op); }
static int v1_t_update(strata_transport_t *t, strata_op_t *op)
{ return H.t_update(hc1(), t, op); }
static int v1_t_ctl(strata_transport_t *t, int op, void *arg)
{ return H.t_ctl(hc1(), t, op, arg); }
static void v1_t_close(strata_transport_t *t) { H.t_close(hc1(), t); }
static int v1_t_send(strata_transport_t *t, int peer, const void *hdr,
                     size_t hlen, const void *data, size_t dlen, int timeout_ms)
{ return H.t_send(hc1(), t, peer, hdr, hlen, data, dlen, timeout_ms); }
static int v1_t_recv(strata_transport_t *t, int *peer, void *buf, size_t cap,
                     size_t *len, int timeout_ms)
{ return H.t_recv(hc1(), t, peer, buf, cap, len, timeout_ms); }
static int v1_evaluate(double *loss, double *acc)
{ return H.evaluate(hc1(), loss, acc); }
static int v1_report(const strata_report_t *r) { return H.report(hc1(), r); }
static int v1_boundary_due(int32_t epoch, int64_t batch, int64_t step)
{ return H.boundary_due(hc1(), epoch, batch, step); }
static int v1_boundary(int32_t epoch, int64_t batch, int64_t step)
{ return H.boundary(hc1(), epoch, batch, step); }
static int v1_t_open_group(const strata_group_t *group, strata_transport_t **out)
{ return H.t_open(hc1(), group, out); }
static const char *v1_t_name(strata_transport_t *t)
{ return H.t_name(hc1(), t); }

#undef H

static const strata_host_v1_t k_host_v1 = {
    .struct_size = sizeof(strata_host_v1_t),
    .abi_major = 1,
    .abi_minor = V1_MINOR,
    .log = v1_log,
    .cfg_get = v1_cfg_get,
    .alloc = v1_alloc,
    .free = v1_free,
    .copy = v1_copy,
    .axpy = v1_axpy,
    .scale = v1_scale,
    .sum = v1_sum,
    .opt_create = v1_opt_create,
    .opt_step = v1_opt_step,
    .opt_destroy = v1_opt_destroy,
    .t_open = v1_t_open,
    .t_reduce = v1_t_reduce,
    .t_update = v1_t_update,
    .t_ctl = v1_t_ctl,
    .t_close = v1_t_close,
    .t_send = v1_t_send,
    .t_recv = v1_t_recv,
    .evaluate = v1_evaluate,
    .report = v1_report,
    .opt_io = v1_opt_io,
    .boundary_due = v1_boundary_due,
    .boundary = v1_boundary,
    .t_open_group = v1_t_open_group,
    .t_name = v1_t_name,
};

/* ---- init / fini of any plugin ---------------------------------------- */

int strata__plugin_init(strata__plugin_t *p, strata_ctx_t *ctx,
                        const strata_env_t *env, void **pctx,
                        strata_hctx_t **hc)
{
    return strata__plugin_init_in(p, ctx, NULL, env, pctx, hc);
}

/* Each instance gets a host context of its own (ABI 2.5): its name, its
 * section and the bytes it places, leading to ctx. */
int strata__plugin_init_in(strata__plugin_t *p, strata_ctx_t *ctx,
                           strata_hctx_t *opener, const strata_env_t *env,
                           void **pctx, strata_hctx_t **out)
{
    *pctx = NULL;
    *out = NULL;
    strata_hctx_t *hc = strata__hctx_new(ctx, p->name, env->section, opener);
    if (!hc)
        return STRATA_ENOMEM;
    int rc;
    if (!p->v1) {
        rc = p->vt->init(&strata__host_v2, hc, env, pctx);
    } else if ((rc = acquire(ctx, p)) == STRATA_OK) {
        strata_hctx_t *none = NULL;
        atomic_compare_exchange_strong(&g_v1_hc, &none, hc);
        rc = p->v1->init(&k_host_v1, env, pctx);
        if (rc != STRATA_OK) {
            strata_hctx_t *mine = hc;
            atomic_compare_exchange_strong(&g_v1_hc, &mine, NULL);
            release(ctx);
        }
    }
    if (rc != STRATA_OK) {
        free(hc);
        return rc;
    }
    hc->pctx = *pctx;
    *out = hc;
    return STRATA_OK;
}

void strata__plugin_fini(strata__plugin_t *p, void *pctx, strata_hctx_t *hc)
{
    p->vt->fini(pctx);
    if (p->v1) {
        strata_hctx_t *mine = hc;
        atomic_compare_exchange_strong(&g_v1_hc, &mine, NULL);
        release(hc->ctx);
    }
    free(hc);
}
