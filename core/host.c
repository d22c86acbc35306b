/* The strata_host_v2_t table handed to plugins: logging, config, memory,
 * arithmetic, the optimizer, transports and the services of a run. Every
 * entry takes the host context first (struct strata_hctx: the strata_ctx_t
 * the plugin instance belongs to), so two contexts of one process never
 * share state behind a host call. The ABI 1 adapter is host_v1.c. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_cpu.h"
#include "runtime.h"

struct strata_transport {
    strata__plugin_t *plugin;
    strata_ctx_t     *ctx;
    void             *pctx;
    void             *cfg;
    strata_group_t    group;
    strata_env_t      env;
    const char      **keys;  /* group.public_keys when secured, or NULL */
};

static strata_ctx_t *ctx_of(strata_hctx_t *hc) { return hc ? hc->ctx : NULL; }

static void host_log(strata_hctx_t *hc, int level, const char *who,
                     const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void host_log(strata_hctx_t *hc, int level, const char *who,
                     const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    strata__vlog_ctx(ctx_of(hc), level, who, fmt, ap);
    va_end(ap);
}

static const char *host_cfg_get(strata_hctx_t *hc, const char *section,
                                const char *key)
{
    strata_ctx_t *ctx = ctx_of(hc);
    return ctx && section && key ? strata__cfg_get(ctx->cfg, section, key) : NULL;
}

static const char *host_cfg_origin(strata_hctx_t *hc, const char *section,
                                   const char *key)
{
    strata_ctx_t *ctx = ctx_of(hc);
    return ctx && section && key ? strata__cfg_origin(ctx->cfg, section, key)
                                 : NULL;
}

/* *k = NULL on a CPU (the kernels are called right here); another device's
 * kernel table otherwise, whose work is complete when the host call
 * returns: plugins know nothing of streams. */
static int on_device(int32_t device, strata__kdev_t **k)
{
    *k = NULL;
    return STRATA_DEVICE_TYPE(device) == STRATA_DEV_CPU
               ? STRATA_OK : strata__kdev_get(device, k);
}

static int host_axpy(strata_hctx_t *hc, int32_t device, size_t n, float a,
                     const float *x, float *y)
{
    (void)hc;
    strata__kdev_t *k;
    int rc = on_device(device, &k);
    if (rc == STRATA_OK && !k)
        kc_axpy(n, a, x, y);
    else if (rc == STRATA_OK && (rc = k->ops->axpy(k, n, a, x, y)) == STRATA_OK)
        rc = k->ops->sync(k);
    return rc;
}

static int host_scale(strata_hctx_t *hc, int32_t device, size_t n, float a,
                      float *x)
{
    (void)hc;
    strata__kdev_t *k;
    int rc = on_device(device, &k);
    if (rc == STRATA_OK && !k)
        kc_scale(n, a, x);
    else if (rc == STRATA_OK && (rc = k->ops->scale(k, n, a, x)) == STRATA_OK)
        rc = k->ops->sync(k);
    return rc;
}

static int host_sum(strata_hctx_t *hc, int32_t device, size_t n, float *dst,
                    const float *const *srcs, int nsrc)
{
    (void)hc;
    strata__kdev_t *k = NULL;
    int rc = nsrc < 1 ? STRATA_EINVAL : on_device(device, &k);
    if (rc == STRATA_OK && !k)
        kc_sum(n, dst, srcs, nsrc);
    else if (rc == STRATA_OK &&
             (rc = k->ops->sum(k, n, dst, srcs, nsrc)) == STRATA_OK)
        rc = k->ops->sync(k);
    return rc;
}

static void *host_alloc(strata_hctx_t *hc, int32_t device, size_t bytes)
{
    strata_ctx_t *ctx = ctx_of(hc);
    void *p = strata__dev_alloc(device, bytes);
    if (p && ctx)
        atomic_fetch_add(&ctx->placed, bytes);
    return p;
}

static void host_free(strata_hctx_t *hc, int32_t device, void *p)
{
    (void)hc;
    strata__dev_free(device, p);
}

static int host_copy(strata_hctx_t *hc, int32_t dst_device, void *dst,
                     int32_t src_device, const void *src, size_t bytes)
{
    (void)hc;
    return strata__dev_copy(dst_device, dst, src_device, src, bytes);
}

static int host_opt_create(strata_hctx_t *hc, int32_t device, size_t count,
                           strata_opt_t **out)
{
    strata_ctx_t *ctx = ctx_of(hc);
    if (!ctx) {
        *out = NULL;
        return STRATA_EINVAL;
    }
    int rc = strata__opt_create(&ctx->s.optimizer, device, count, out);
    if (rc == STRATA_OK)
        atomic_fetch_add(&ctx->placed,
                         count * sizeof(float) *
                             ((size_t)((*out)->m != NULL) +
                              (size_t)((*out)->v != NULL)));
    return rc;
}

static int host_opt_step(strata_hctx_t *hc, strata_opt_t *opt, float *param,
                         const float *grad, size_t count, float lr)
{
    (void)hc;
    return strata__opt_step(opt, param, grad, count, lr);
}

static int host_opt_io(strata_hctx_t *hc, strata_opt_t *opt, int set,
                       float *const *slots, int nslots, int64_t *steps)
{
    (void)hc;
    return strata__opt_io(opt, set, slots, nslots, steps);
}

static void host_opt_destroy(strata_hctx_t *hc, strata_opt_t *opt)
{
    (void)hc;
    strata__opt_destroy(opt);
}

/* The list the core walks for a group of `scope`: [transport] plugin when
 * set, then the scope's own list. */
static void scope_list(const strata_ctx_t *ctx, int32_t scope, char *buf,
                       size_t cap)
{
    const strata__transport_cfg_t *t = &ctx->s.transport;
    const char *own = scope == STRATA_SCOPE_LOCAL ? t->local : t->world;
    snprintf(buf, cap, "%s%s%s", t->plugin, t->plugin[0] ? ", " : "", own);
}

/* How the shared [transport] section's keys apply to transport `name`:
 * not at all when the list ("local, nccl, zmq") does not name it, strictly
 * when it names only it, else the keys it knows. */
static int flat_mode(const char *list, const char *name)
{
    size_t n = strlen(name);
    int found = 0, count = 0;
    for (const char *p = list; p && *p;) {
        p += strspn(p, " ,");
        size_t len = strcspn(p, " ,");
        if (len == 0)
            break;
        count++;
        found |= len == n && strncmp(p, name, n) == 0;
        p += len;
    }
    return !found ? STRATA__CFG_FLAT_NONE
           : count == 1 ? STRATA__CFG_FLAT_STRICT : STRATA__CFG_FLAT_KNOWN;
}

/* A secured job: every WORLD group gets its members' public keys and this
 * task's secret key (the transport admits nobody else), and only a
 * transport built to take them (ABI >= 2.1) may serve it. */
static int give_keys(strata_ctx_t *ctx, const strata__plugin_t *p,
                     strata_transport_t *t)
{
    strata_group_t *g = &t->group;
    g->public_keys = NULL;    /* the core's to set, never an opener's */
    g->secret_key = NULL;
    if (!ctx->keys || g->scope != STRATA_SCOPE_WORLD)
        return STRATA_OK;
    const strata_plugin_header_t *h = &p->vt->hdr;
    if (h->abi_major < 2 || (h->abi_major == 2 && h->abi_minor < 1)) {
        strata__log(STRATA_LOG_INFO, "transport", "%s is built for plugin "
                    "ABI %u.%u, which cannot be handed keys: passed over for "
                    "a secured group", p->name, h->abi_major, h->abi_minor);
        return STRATA_EDECLINE;
    }
    if (!g->names || g->size < 1)
        return STRATA_EINVAL;
    t->keys = calloc((size_t)g->size, sizeof *t->keys);
    if (!t->keys)
        return STRATA_ENOMEM;
    for (int i = 0; i < g->size; i++) {
        t->keys[i] = g->names[i] ? strata__keys_public(ctx->keys, g->names[i])
                                 : NULL;
        if (!t->keys[i]) {
            strata__log(STRATA_LOG_ERROR, "security", "no public key for %s "
                        "in [security] keys = '%s' (strata keygen DIR %s "
                        "adds one)", g->names[i] ? g->names[i] : "(unnamed)",
                        ctx->s.security.keys, g->names[i] ? g->names[i] : "");
            return STRATA_ECONFIG;
        }
    }
    g->public_keys = t->keys;
    g->secret_key = ctx->keys->secret;
    return STRATA_OK;
}

int strata__host_open_named(strata_ctx_t *ctx, const char *name,
                      const strata_group_t *group, strata_transport_t **out)
{
    *out = NULL;
    strata__plugin_t *p;
    /* Not installed: the strategy tries the next of its list (and says so);
     * the loader's line with the directories is there at debug level. */
    int rc = strata__ctx_plugin(ctx, name, STRATA_KIND_TRANSPORT,
                                STRATA_LOG_DEBUG, &p);
    if (rc != STRATA_OK)
        return rc;
    strata_transport_t *t = calloc(1, sizeof *t);
    if (!t)
        return STRATA_ENOMEM;
    t->plugin = p;
    t->ctx = ctx;
    /* An opener built against an older minor passes a shorter struct: copy
     * what it has, the newer members stay 0. */
    size_t have = group->struct_size < sizeof t->group ? group->struct_size
                                                        : sizeof t->group;
    memcpy(&t->group, group, have);
    t->group.struct_size = sizeof t->group;
    rc = give_keys(ctx, p, t);
    /* [transport.NAME] is the transport's own; the shared [transport] keys
     * (deprecated) belong to the transports the group's list names. */
    char list[512];
    scope_list(ctx, group->scope, list, sizeof list);
    if (rc == STRATA_OK)
        rc = strata__plugin_cfg(ctx, p, "transport", flat_mode(list, name),
                                &t->cfg);
    if (rc == STRATA_OK) {
        t->env.struct_size = sizeof t->env;
        t->env.kind = STRATA_KIND_TRANSPORT;
        t->env.cfg = t->cfg;
        t->env.section = "transport";
        t->env.group = &t->group;
        t->env.nreplicas = group->nlocal;
        t->env.devices = group->devices;
        rc = strata__plugin_init(p, ctx, &t->env, &t->pctx);
    }
    if (rc != STRATA_OK) {
        free(t->keys);
        free(t->cfg);
        free(t);
        return rc;
    }
    strata__ctx_opened(ctx, name);
    *out = t;
    return STRATA_OK;
}

/* Is `name` among the first `len` bytes of the comma list `list`? */
static int seen(const char *list, size_t len, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p < list + len;) {
        p += strspn(p, " ,");
        size_t l = strcspn(p, " ,");
        if (p + l > list + len)
            break;
        if (l == n && strncmp(p, name, n) == 0)
            return 1;
        p += l;
    }
    return 0;
}

static int host_t_open(strata_hctx_t *hc, const strata_group_t *group,
                       strata_transport_t **out)
{
    *out = NULL;
    strata_ctx_t *ctx = ctx_of(hc);
    if (!ctx || !group)
        return STRATA_EINVAL;
    const char *scope = group->scope == STRATA_SCOPE_LOCAL ? "local"
                                                           : "world";
    const char *members = group->scope == STRATA_SCOPE_LOCAL
                              ? "local replicas" : "processes";
    char list[512], why[320] = "", name[64];
    scope_list(ctx, group->scope, list, sizeof list);
    size_t used = 0;
    for (const char *p = list; *p;) {
        p += strspn(p, " ,");
        size_t len = strcspn(p, " ,");
        if (len == 0)
            break;
        snprintf(name, sizeof name, "%.*s", (int)len, p);
        int again = seen(list, (size_t)(p - list), name);
        p += len;
        if (again)   /* [transport] plugin named it already */
            continue;
        /* Declined (cannot serve this group) and not installed both give
         * the next one its turn; anything else stops with its reason. */
        int rc = strata__host_open_named(ctx, name, group, out);
        if (rc != STRATA_EDECLINE && rc != STRATA_ENOPLUGIN)
            return rc;
        const char *what = rc == STRATA_EDECLINE ? "declined" : "not installed";
        strata__log(STRATA_LOG_INFO, "transport", "a group of %d %s: %s %s; "
                    "trying the next", group->size, members, name, what);
        if (used < sizeof why)
            used += (size_t)snprintf(why + used, sizeof why - used, "%s%s %s",
                                     used ? ", " : "", name, what);
    }
    strata__log(STRATA_LOG_ERROR, "transport", "no transport of [transport] "
                "%s = '%s' accepts a group of %d %s (%s; `strata plugins` "
                "lists those installed)", scope, list, group->size, members,
                why);
    return STRATA_EDECLINE;
}

static const char *host_t_name(strata_hctx_t *hc, strata_transport_t *t)
{
    (void)hc;
    return t ? t->plugin->name : NULL;
}

static int host_t_reduce(strata_hctx_t *hc, strata_transport_t *t,
                         strata_op_t *op)
{
    (void)hc;
    return t ? t->plugin->vt->reduce(t->pctx, op) : STRATA_EINVAL;
}

static int host_t_update(strata_hctx_t *hc, strata_transport_t *t,
                         strata_op_t *op)
{
    (void)hc;
    return t && t->plugin->vt->update ? t->plugin->vt->update(t->pctx, op)
                                      : STRATA_ENOTSUP;
}

static int host_t_ctl(strata_hctx_t *hc, strata_transport_t *t, int op,
                      void *arg)
{
    (void)hc;
    return t && t->plugin->vt->ctl ? t->plugin->vt->ctl(t->pctx, op, arg)
                                   : STRATA_ENOTSUP;
}

static void host_t_close(strata_hctx_t *hc, strata_transport_t *t)
{
    (void)hc;
    if (!t)
        return;
    strata__plugin_fini(t->plugin, t->ctx, t->pctx);
    free(t->keys);
    free(t->cfg);
    free(t);
}

static int host_t_send(strata_hctx_t *hc, strata_transport_t *t, int peer,
                       const void *hdr, size_t hlen, const void *data,
                       size_t dlen, int timeout_ms)
{
    (void)hc;
    return t && t->plugin->vt->send
               ? t->plugin->vt->send(t->pctx, peer, hdr, hlen, data, dlen,
                                     timeout_ms)
               : STRATA_ENOTSUP;
}

static int host_t_recv(strata_hctx_t *hc, strata_transport_t *t, int *peer,
                       void *buf, size_t cap, size_t *len, int timeout_ms)
{
    (void)hc;
    return t && t->plugin->vt->recv
               ? t->plugin->vt->recv(t->pctx, peer, buf, cap, len, timeout_ms)
               : STRATA_ENOTSUP;
}

static int host_evaluate(strata_hctx_t *hc, double *loss, double *acc)
{
    return strata__host_evaluate(ctx_of(hc), loss, acc);
}

static int host_report(strata_hctx_t *hc, const strata_report_t *r)
{
    return strata__host_report(ctx_of(hc), r);
}

static int host_boundary_due(strata_hctx_t *hc, int32_t epoch, int64_t batch,
                             int64_t step)
{
    return strata__host_boundary_due(ctx_of(hc), epoch, batch, step);
}

static int host_boundary(strata_hctx_t *hc, int32_t epoch, int64_t batch,
                         int64_t step)
{
    return strata__host_boundary(ctx_of(hc), epoch, batch, step);
}

static int host_grad_sumsq(strata_hctx_t *hc, int32_t device, size_t n,
                           const float *g, double *sumsq)
{
    strata_ctx_t *ctx = ctx_of(hc);
    if (!ctx || !sumsq)
        return STRATA_EINVAL;
    int rc = strata__grad_sumsq(&ctx->s.optimizer, device, n, g, sumsq);
    if (rc == 1)
        atomic_fetch_add(&ctx->clip_calls, 1);
    return rc;
}

static int host_grad_clip(strata_hctx_t *hc, int32_t device, size_t n,
                          float *g, double sumsq)
{
    strata_ctx_t *ctx = ctx_of(hc);
    return ctx ? strata__grad_clip(&ctx->s.optimizer, device, n, g, sumsq)
               : STRATA_EINVAL;
}

static int host_training_done(strata_hctx_t *hc)
{
    return strata__host_training_done(ctx_of(hc));
}

static int host_membership(strata_hctx_t *hc, int64_t committed,
                           int timeout_ms, strata_membership_t *out)
{
    return strata__host_membership(ctx_of(hc), committed, timeout_ms, out);
}

const strata_host_v2_t strata__host_v2 = {
    .struct_size = sizeof(strata_host_v2_t),
    .abi_major = STRATA_ABI_MAJOR,
    .abi_minor = STRATA_ABI_MINOR,
    .log = host_log,
    .cfg_get = host_cfg_get,
    .alloc = host_alloc,
    .free = host_free,
    .copy = host_copy,
    .axpy = host_axpy,
    .scale = host_scale,
    .sum = host_sum,
    .opt_create = host_opt_create,
    .opt_step = host_opt_step,
    .opt_io = host_opt_io,
    .opt_destroy = host_opt_destroy,
    .t_open = host_t_open,
    .t_name = host_t_name,
    .t_reduce = host_t_reduce,
    .t_update = host_t_update,
    .t_ctl = host_t_ctl,
    .t_send = host_t_send,
    .t_recv = host_t_recv,
    .t_close = host_t_close,
    .evaluate = host_evaluate,
    .report = host_report,
    .boundary_due = host_boundary_due,
    .boundary = host_boundary,
    .grad_sumsq = host_grad_sumsq,
    .grad_clip = host_grad_clip,
    .training_done = host_training_done,
    .membership = host_membership,
    .cfg_origin = host_cfg_origin,
};
