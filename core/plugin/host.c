/* The strata_host_v2_t table handed to plugins: logging, config, memory,
 * arithmetic, the optimizer, transports and the services of a run. Every
 * entry takes the host context first (struct strata_hctx: the strata_ctx_t
 * the plugin instance belongs to), so two contexts of one process never
 * share state behind a host call. The ABI 1 adapter is host_v1.c. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <strata/check.h>

#include "kernels_cpu.h"
#include "runtime.h"

struct strata_transport {
    strata__plugin_t *plugin;
    strata_ctx_t     *ctx;
    void             *pctx;
    strata_hctx_t    *hc;    /* the instance's host context */
    void             *cfg;
    strata_group_t    group;
    strata_env_t      env;
    const char      **keys;  /* group.public_keys when secured, or NULL */
    uint32_t          caps;  /* its plugin's, less SHARDS where this group
                              * lacks them (host t_caps) */
    strata_transport_t *next; /* ctx->open_transports, under strangers_lock */
};

static strata_ctx_t *ctx_of(strata_hctx_t *hc) { return hc ? hc->ctx : NULL; }

/* ---- host contexts, one per plugin instance (ABI 2.5) -------------------- */

strata_hctx_t *strata__hctx_new(strata_ctx_t *ctx, const char *name,
                                const char *section, strata_hctx_t *parent)
{
    strata_hctx_t *hc = calloc(1, sizeof *hc);
    if (!hc)
        return NULL;
    hc->ctx = ctx;
    hc->name = name;
    hc->section = section;
    /* The context's own hc opens nothing of its own: no parent. */
    hc->parent = parent && parent->name ? parent : NULL;
    atomic_init(&hc->placed, 0);
    return hc;
}

/* Bytes placed through `hc`: the instance's, the instances' that opened it
 * (a strategy's figure includes its transports'), the context's. */
static void count_placed(strata_hctx_t *hc, size_t bytes)
{
    if (!hc)
        return;
    if (hc->ctx)
        atomic_fetch_add(&hc->ctx->placed, bytes);
    for (int depth = 0; hc && hc->name && depth < 8; depth++) {
        atomic_fetch_add(&hc->placed, bytes);
        hc = hc->parent;
    }
}

/* A plugin that names nobody (who NULL or "") logs as its instance. */
static void host_log(strata_hctx_t *hc, int level, const char *who,
                     const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void host_log(strata_hctx_t *hc, int level, const char *who,
                     const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if ((!who || !*who) && hc && hc->name)
        who = hc->name;
    strata__vlog_ctx(ctx_of(hc), level, who ? who : "plugin", fmt, ap);
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
    void *p = strata__dev_alloc(device, bytes);
    if (p)
        count_placed(hc, bytes);
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
        count_placed(hc, count * sizeof(float) * (size_t)(*out)->nslots);
    return rc;
}

static int host_opt_step(strata_hctx_t *hc, strata_opt_t *opt, float *param,
                         const float *grad, size_t count, float lr)
{
    (void)hc;
    return strata__opt_step(opt, param, grad, count, lr);
}

static int host_opt_step_rows(strata_hctx_t *hc, strata_opt_t *opt,
                              float *param, const int64_t *rows, size_t nrows,
                              size_t row_len, const float *grad, float lr)
{
    (void)hc;
    return strata__opt_step_rows(opt, param, rows, nrows, row_len, grad, lr);
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

void strata__transport_list(const strata_ctx_t *ctx, int32_t scope,
                            char *buf, size_t cap)
{
    const strata__transport_cfg_t *t = &ctx->s.transport;
    const char *own = scope == STRATA_SCOPE_LOCAL ? t->local : t->world;
    snprintf(buf, cap, "%s%s%s", t->plugin, t->plugin[0] ? ", " : "", own);
}

int strata__transport_flat(const char *list, const char *name)
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

static int open_named(strata_ctx_t *ctx, strata_hctx_t *opener,
                      const char *name, const strata_group_t *group,
                      strata_transport_t **out);
static int offers_shards(const strata_transport_t *t);

int strata__host_open_named(strata_ctx_t *ctx, const char *name,
                      const strata_group_t *group, strata_transport_t **out)
{
    return open_named(ctx, NULL, name, group, out);
}

static int open_named(strata_ctx_t *ctx, strata_hctx_t *opener,
                      const char *name, const strata_group_t *group,
                      strata_transport_t **out)
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
    strata__transport_list(ctx, group->scope, list, sizeof list);
    if (rc == STRATA_OK)
        rc = strata__plugin_cfg(ctx, p, "transport",
                                strata__transport_flat(list, name), &t->cfg);
    if (rc == STRATA_OK) {
        t->env.struct_size = sizeof t->env;
        t->env.kind = STRATA_KIND_TRANSPORT;
        t->env.cfg = t->cfg;
        t->env.section = "transport";
        t->env.group = &t->group;
        t->env.nreplicas = group->nlocal;
        t->env.devices = group->devices;
        rc = strata__plugin_init_in(p, ctx, opener, &t->env, &t->pctx, &t->hc);
    }
    if (rc != STRATA_OK) {
        free(t->keys);
        free(t->cfg);
        free(t);
        return rc;
    }
    t->caps = p->caps;
    if (!offers_shards(t))
        t->caps &= ~STRATA_CAP_SHARDS;
    strata__ctx_opened(ctx, name);
    pthread_mutex_lock(&ctx->strangers_lock);
    t->next = ctx->open_transports;
    ctx->open_transports = t;
    pthread_mutex_unlock(&ctx->strangers_lock);
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
    strata__transport_list(ctx, group->scope, list, sizeof list);
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
        int rc = open_named(ctx, hc, name, group, out);
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

/* ---- the collectives: arguments checked once, for every transport ------- */

static void log_ctx(strata_ctx_t *ctx, int level, const char *who,
                    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void log_ctx(strata_ctx_t *ctx, int level, const char *who,
                    const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    strata__vlog_ctx(ctx, level, who, fmt, ap);
    va_end(ap);
}

/* One error line naming the transport, its group, the collective and the
 * field; STRATA_EINVAL. */
static int refuse(strata_hctx_t *hc, const strata_transport_t *t,
                  const char *what, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int refuse(strata_hctx_t *hc, const strata_transport_t *t,
                  const char *what, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    strata_ctx_t *ctx = t ? t->ctx : ctx_of(hc);
    log_ctx(ctx, STRATA_LOG_ERROR, "transport", "%s, group %s: %s: %s",
            t ? t->plugin->name : "(none)",
            t && t->group.tag ? t->group.tag : "(untagged)", what, msg);
    return STRATA_EINVAL;
}

/* strata_check_collective (<strata/check.h>): the checks every host
 * makes, in one place; refused with one line naming the transport. */
static int check_op(strata_hctx_t *hc, const strata_transport_t *t,
                    const char *what, const strata_op_t *op,
                    const size_t *bounds, int need)
{
    char why[200];
    if (!t)
        return refuse(hc, t, what, "no transport (t is NULL)");
    if (strata_check_collective(&t->group, op, bounds, need, why,
                                sizeof why) != STRATA_OK)
        return refuse(hc, t, what, "%s", why);
    return STRATA_OK;
}

static int host_t_reduce(strata_hctx_t *hc, strata_transport_t *t,
                         strata_op_t *op)
{
    int rc = check_op(hc, t, "all-reduce", op, NULL, STRATA_CHECK_REDUCE_OP);
    return rc ? rc : t->plugin->vt->reduce(t->pctx, op);
}

static int host_t_update(strata_hctx_t *hc, strata_transport_t *t,
                         strata_op_t *op)
{
    if (t && !t->plugin->vt->update)
        return STRATA_ENOTSUP;
    int rc = check_op(hc, t, "broadcast", op, NULL, STRATA_CHECK_ROOT);
    return rc ? rc : t->plugin->vt->update(t->pctx, op);
}

/* Through the entry of 2.5, else the ctl op of 2.4. */
static int shards(strata_hctx_t *hc, strata_transport_t *t, int gather,
                  strata_op_t *op, const size_t *bounds)
{
    int need = STRATA_CHECK_BOUNDS | (gather ? 0 : STRATA_CHECK_REDUCE_OP);
    int rc = check_op(hc, t, gather ? "all-gather" : "reduce-scatter", op,
                      bounds, need);
    if (rc)
        return rc;
    return strata_transport_shards(t->plugin->vt, t->pctx, gather, op, bounds);
}

static int host_t_reduce_scatter(strata_hctx_t *hc, strata_transport_t *t,
                                 strata_op_t *op, const size_t *bounds)
{
    return shards(hc, t, 0, op, bounds);
}

static int host_t_all_gather(strata_hctx_t *hc, strata_transport_t *t,
                             strata_op_t *op, const size_t *bounds)
{
    return shards(hc, t, 1, op, bounds);
}

static int host_t_barrier(strata_hctx_t *hc, strata_transport_t *t, int slot)
{
    if (!t)
        return refuse(hc, t, "barrier", "no transport (t is NULL)");
    char why[128];
    if (strata_check_barrier(&t->group, slot, why, sizeof why) != STRATA_OK)
        return refuse(hc, t, "barrier", "%s", why);
    return strata_transport_barrier(t->plugin->vt, t->pctx, slot);
}

/* Does this instance offer the halves? Asked once, at open: no collective. */
static int offers_shards(const strata_transport_t *t)
{
    const strata_plugin_v2_t *vt = t->plugin->vt;
    if (!(t->plugin->caps & STRATA_CAP_SHARDS))
        return 0;
    if (STRATA_HAS(vt, reduce_scatter))
        return vt->reduce_scatter(t->pctx, NULL, NULL) == STRATA_OK;
    strata_shards_t ask = { .struct_size = sizeof ask };
    return vt->ctl && vt->ctl(t->pctx, STRATA_CTL_REDUCE_SCATTER, &ask) ==
                          STRATA_OK;
}

static uint32_t host_t_caps(strata_hctx_t *hc, strata_transport_t *t)
{
    (void)hc;
    return t ? t->caps : 0;
}

/* The frozen ctl ops of the collectives (a strategy built before 2.5) take
 * the same road as the entries: the same checks, the transport's entry. */
static int host_t_ctl(strata_hctx_t *hc, strata_transport_t *t, int op,
                      void *arg)
{
    if (t && op == STRATA_CTL_BARRIER)
        return host_t_barrier(hc, t, arg ? *(int *)arg : 0);
    if (t && (op == STRATA_CTL_REDUCE_SCATTER || op == STRATA_CTL_ALL_GATHER)) {
        strata_shards_t *sh = arg;
        if (!sh || sh->struct_size < sizeof *sh)
            return refuse(hc, t, "shards", "arg is not a strata_shards_t");
        if (!sh->op) /* 2.4's question: does this group offer them? */
            return t->caps & STRATA_CAP_SHARDS ? STRATA_OK : STRATA_ENOTSUP;
        return shards(hc, t, op == STRATA_CTL_ALL_GATHER, sh->op, sh->bounds);
    }
    return t && t->plugin->vt->ctl ? t->plugin->vt->ctl(t->pctx, op, arg)
                                   : STRATA_ENOTSUP;
}

/* ---- strangers (ABI 2.7) ------------------------------------------------ */

/* t's counts into *sum: 1 when it reported them, 0 when it has no
 * `strangers` entry or declined. */
static int strangers_of(strata_transport_t *t, int last,
                        strata_strangers_t *sum)
{
    const strata_plugin_v2_t *vt = t->plugin->vt;
    if (!STRATA_HAS(vt, strangers))
        return 0;
    strata_strangers_t s = { .struct_size = sizeof s };
    if (vt->strangers(t->pctx, &s, last) != STRATA_OK)
        return 0;
    sum->refused_key += s.refused_key;
    sum->closed_early += s.closed_early;
    sum->not_protocol += s.not_protocol;
    sum->bad_message += s.bad_message;
    return 1;
}

int strata__ctx_strangers(strata_ctx_t *ctx, strata_strangers_t *out)
{
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    pthread_mutex_lock(&ctx->strangers_lock);
    *out = ctx->strangers_closed;
    out->struct_size = sizeof *out;
    int any = ctx->strangers_reported;
    for (strata_transport_t *t = ctx->open_transports; t; t = t->next)
        any |= strangers_of(t, 0, out);
    pthread_mutex_unlock(&ctx->strangers_lock);
    return any;
}

void strata__ctx_strangers_reset(strata_ctx_t *ctx)
{
    pthread_mutex_lock(&ctx->strangers_lock);
    memset(&ctx->strangers_closed, 0, sizeof ctx->strangers_closed);
    ctx->strangers_reported = 0;
    pthread_mutex_unlock(&ctx->strangers_lock);
}

void strata__ctx_strangers_line(strata_ctx_t *ctx)
{
    strata_strangers_t s;
    if (!strata__ctx_strangers(ctx, &s) ||
        s.refused_key + s.closed_early + s.not_protocol + s.bad_message == 0)
        return;
    strata__out(ctx, "strangers: %llu refused by key, %llu closed before a "
                "handshake, %llu not the transport's protocol, %llu bad messages\n",
                (unsigned long long)s.refused_key,
                (unsigned long long)s.closed_early,
                (unsigned long long)s.not_protocol,
                (unsigned long long)s.bad_message);
}

/* Unlink t from the open transports, its last counts kept. The entry's
 * last call runs on the main thread with no collective in flight (t_close
 * is main thread, once), outside the lock: it may read sockets. */
static void strangers_close(strata_transport_t *t)
{
    strata_strangers_t last = { .struct_size = sizeof last };
    strata_ctx_t *ctx = t->ctx;
    int reported = strangers_of(t, 1, &last);
    pthread_mutex_lock(&ctx->strangers_lock);
    for (strata_transport_t **p = &ctx->open_transports; *p; p = &(*p)->next)
        if (*p == t) {
            *p = t->next;
            break;
        }
    if (reported) {
        strata_strangers_t *c = &ctx->strangers_closed;
        c->refused_key += last.refused_key;
        c->closed_early += last.closed_early;
        c->not_protocol += last.not_protocol;
        c->bad_message += last.bad_message;
        ctx->strangers_reported = 1;
    }
    pthread_mutex_unlock(&ctx->strangers_lock);
}

static void host_t_close(strata_hctx_t *hc, strata_transport_t *t)
{
    (void)hc;
    if (!t)
        return;
    strangers_close(t);
    strata__plugin_fini(t->plugin, t->pctx, t->hc);
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

/* The run strata_train() is running on hc's context, or NULL outside
 * one (the run's services then answer STRATA_ESTATE, or "no"). */
static strata_ctx_t *run_ctx(strata_hctx_t *hc)
{
    strata_ctx_t *ctx = ctx_of(hc);
    return ctx && ctx->run && ctx->run_svc ? ctx : NULL;
}

static int host_evaluate(strata_hctx_t *hc, double *loss, double *acc)
{
    strata_ctx_t *ctx = run_ctx(hc);
    return ctx ? ctx->run_svc->evaluate(ctx->run, loss, acc) : STRATA_ESTATE;
}

static int host_report(strata_hctx_t *hc, const strata_report_t *r)
{
    strata_ctx_t *ctx = run_ctx(hc);
    return ctx ? ctx->run_svc->report(ctx->run, r) : STRATA_ESTATE;
}

static int host_boundary_due(strata_hctx_t *hc, int32_t epoch, int64_t batch,
                             int64_t step)
{
    strata_ctx_t *ctx = run_ctx(hc);
    return ctx ? ctx->run_svc->boundary_due(ctx->run, epoch, batch, step) : 0;
}

static int host_boundary(strata_hctx_t *hc, int32_t epoch, int64_t batch,
                         int64_t step)
{
    strata_ctx_t *ctx = run_ctx(hc);
    return ctx ? ctx->run_svc->boundary(ctx->run, epoch, batch, step)
               : STRATA_ESTATE;
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
    strata_ctx_t *ctx = run_ctx(hc);
    return ctx ? ctx->run_svc->training_done(ctx->run) : 0;
}

static int host_membership(strata_hctx_t *hc, int64_t committed,
                           int timeout_ms, strata_membership_t *out)
{
    strata_ctx_t *ctx = run_ctx(hc);
    return ctx ? ctx->run_svc->membership(ctx->run, committed, timeout_ms, out)
               : STRATA_EINVAL;
}

/* ABI 2.8: the model's layer states, for a strategy that carries them
 * from its workers to the task that evaluates and checkpoints. */
static int host_states_get(strata_hctx_t *hc, float *buf, size_t cap,
                           size_t *n)
{
    strata_ctx_t *ctx = run_ctx(hc);
    if (!n)
        return STRATA_EINVAL;
    *n = 0;
    return ctx ? ctx->run_svc->states_get(ctx->run, buf, cap, n)
               : STRATA_ESTATE;
}

static int host_states_set(strata_hctx_t *hc, const float *buf, size_t n)
{
    strata_ctx_t *ctx = run_ctx(hc);
    return ctx ? ctx->run_svc->states_set(ctx->run, buf, n) : STRATA_ESTATE;
}

/* ABI 2.11: the rows of each embedding table a batch reads. */
static int host_batch_rows(strata_hctx_t *hc, int32_t epoch, int64_t batch,
                           strata_sparse_t *out, size_t cap, size_t *n)
{
    strata_ctx_t *ctx = run_ctx(hc);
    if (!n)
        return STRATA_EINVAL;
    *n = 0;
    return ctx && ctx->run_svc->batch_rows
               ? ctx->run_svc->batch_rows(ctx->run, epoch, batch, out, cap, n)
               : STRATA_ESTATE;
}

/* ABI 2.12: a variable's initial values in part, for a strategy that
 * keeps part of the model (STRATA_CAP_LAZY_INIT). */
static int host_init_values(strata_hctx_t *hc, const strata_var_t *var,
                            size_t lo, size_t n, float *dst)
{
    strata_ctx_t *ctx = run_ctx(hc);
    if (!var || (n && !dst))
        return STRATA_EINVAL;
    return ctx && ctx->run_svc->init_values
               ? ctx->run_svc->init_values(ctx->run, var, lo, n, dst)
               : STRATA_ESTATE;
}

/* ABI 2.12: a range of alloc's CPU memory back to the system. */
static int host_discard(strata_hctx_t *hc, int32_t device, void *ptr,
                        size_t bytes)
{
    (void)hc;
    if (STRATA_DEVICE_TYPE(device) != STRATA_DEV_CPU || (bytes && !ptr))
        return STRATA_EINVAL;
    if (bytes)
        strata__host_discard(ptr, bytes);
    return STRATA_OK;
}

/* ABI 2.13: this task's part of a checkpoint. */
static int host_part_write(strata_hctx_t *hc, strata_part_t *part)
{
    strata_ctx_t *ctx = run_ctx(hc);
    if (!part)
        return STRATA_EINVAL;
    return ctx && ctx->run_svc->part_write
               ? ctx->run_svc->part_write(ctx->run, part)
               : STRATA_ESTATE;
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
    .t_reduce_scatter = host_t_reduce_scatter,
    .t_all_gather = host_t_all_gather,
    .t_barrier = host_t_barrier,
    .t_caps = host_t_caps,
    .states_get = host_states_get,
    .states_set = host_states_set,
    .opt_step_rows = host_opt_step_rows,
    .batch_rows = host_batch_rows,
    .init_values = host_init_values,
    .discard = host_discard,
    .part_write = host_part_write,
};

/* ---- strata_plugin_caps: the word of a plugin on the search path -------- */

struct find {
    const char *name;
    int found, status;
    uint32_t kind;
    char dir[4096];
};

static void find_cb(void *user, const char *name, const char *kind,
                    int abi_major, int abi_minor, const char *version,
                    const char *description, const char *path, int status)
{
    (void)abi_major, (void)abi_minor, (void)version, (void)description;
    struct find *f = user;
    if (f->found || strcmp(name, f->name) != 0)
        return;
    f->found = 1;
    f->status = status;
    f->kind = !strcmp(kind, "strategy") ? STRATA_KIND_STRATEGY
                                        : STRATA_KIND_TRANSPORT;
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 1;
    snprintf(f->dir, sizeof f->dir, "%.*s", (int)n, slash ? path : ".");
}

int strata_plugin_caps(strata_ctx_t *ctx, const char *name, uint32_t *caps,
                       char *text, size_t cap)
{
    if (!ctx || !name || !caps)
        return STRATA_EINVAL;
    *caps = 0;
    if (text && cap)
        text[0] = '\0';
    /* The listing finds it as `strata plugins` does (search path, trust
     * check); then the loader opens that very file. */
    struct find f = { .name = name };
    int rc = strata_plugins_list(ctx, find_cb, &f);
    if (rc == STRATA_OK && !f.found) {
        log_ctx(ctx, STRATA_LOG_ERROR, "loader", "no plugin '%s' on the "
                "search path (`strata plugins` lists those installed)", name);
        rc = STRATA_ENOPLUGIN;
    }
    if (rc == STRATA_OK)
        rc = f.status;
    strata__plugin_t *p = NULL;
    if (rc == STRATA_OK)
        rc = strata__plugin_open_as(name, f.kind, f.dir, STRATA_LOG_ERROR,
                                    STRATA__PLUGIN_TRUST_PATH, &p);
    if (rc == STRATA_OK) {
        *caps = p->caps;
        if (text && cap)
            strata__caps_str(p->caps, text, cap);
        strata__plugin_close(p);
    }
    return rc;
}

