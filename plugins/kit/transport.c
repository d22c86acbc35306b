/* The kit's transports: t_open runs the transport vtable the test handed
 * in (strata_kit_config_t.transport) on the group, and the collectives
 * are checked as core/plugin/host.c checks them -- the same STRATA_EINVAL, the
 * same line -- before the transport sees them. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata/check.h>

#include "kit_impl.h"

struct strata_transport {
    const strata_plugin_v2_t *vt;
    void           *pctx;
    void           *cfg;     /* ours when the test gave none */
    strata_group_t  group;
    strata_env_t    env;
    uint32_t        caps;
};

/* The core's word for a plugin built before 2.5 (loader.c): P2P from its
 * entries, the barrier (and from 2.4 the shards) when it has ctl. */
static uint32_t plugin_caps(const strata_plugin_v2_t *vt)
{
    if (vt->hdr.abi_major == 2 && vt->hdr.abi_minor >= 5)
        return vt->hdr.caps;
    uint32_t c = STRATA_HAS(vt, send) && STRATA_HAS(vt, recv)
                     ? STRATA_CAP_P2P : 0;
    if (vt->ctl)
        c |= STRATA_CAP_BARRIER |
             (vt->hdr.abi_minor >= 4 ? STRATA_CAP_SHARDS : 0);
    return c;
}

static int offers_shards(const strata_transport_t *t)
{
    const strata_plugin_v2_t *vt = t->vt;
    if (!(plugin_caps(vt) & STRATA_CAP_SHARDS))
        return 0;
    if (STRATA_HAS(vt, reduce_scatter))
        return vt->reduce_scatter(t->pctx, NULL, NULL) == STRATA_OK;
    strata_shards_t ask = { .struct_size = sizeof ask };
    return vt->ctl && vt->ctl(t->pctx, STRATA_CTL_REDUCE_SCATTER, &ask) ==
                          STRATA_OK;
}

static int k_t_open(strata_hctx_t *hc, const strata_group_t *group,
                    strata_transport_t **out)
{
    strata_kit_t *kit = kit_of(hc);
    *out = NULL;
    if (!group)
        return STRATA_EINVAL;
    const strata_plugin_v2_t *vt = kit->cfg.transport;
    if (!vt || !vt->init) {
        strata__kit_log(kit, STRATA_LOG_ERROR, "transport", "t_open: the kit "
                        "was given no transport (strata_kit_config_t."
                        "transport)");
        return STRATA_ENOTSUP;
    }
    strata_transport_t *t = calloc(1, sizeof *t);
    if (!t)
        return STRATA_ENOMEM;
    t->vt = vt;
    /* An opener of an older minor passes a shorter struct: the newer
     * members stay 0. A core of 2.0 hands transports no keys. */
    size_t have = group->struct_size < sizeof t->group ? group->struct_size
                                                        : sizeof t->group;
    memcpy(&t->group, group, have);
    t->group.struct_size = kit->host.abi_minor >= 1
                               ? sizeof t->group
                               : offsetof(strata_group_t, public_keys);
    int rc = STRATA_OK;
    const void *cfg = kit->cfg.transport_cfg;
    if (!cfg && vt->cfg_size) {
        rc = strata_kit_cfg(vt, NULL, 0, &t->cfg);
        cfg = t->cfg;
    }
    if (rc == STRATA_OK) {
        t->env.struct_size = sizeof t->env;
        t->env.kind = STRATA_KIND_TRANSPORT;
        t->env.cfg = cfg;
        t->env.section = "transport";
        t->env.group = &t->group;
        t->env.nreplicas = group->nlocal;
        t->env.devices = group->devices;
        rc = vt->init(&kit->host, hc, &t->env, &t->pctx);
    }
    if (rc != STRATA_OK) {
        free(t->cfg);
        free(t);
        return rc;
    }
    t->caps = plugin_caps(vt);
    if (!offers_shards(t))
        t->caps &= ~STRATA_CAP_SHARDS;
    *out = t;
    return STRATA_OK;
}

static const char *k_t_name(strata_hctx_t *hc, strata_transport_t *t)
{
    (void)hc;
    return t ? t->vt->hdr.name : NULL;
}

static void k_t_close(strata_hctx_t *hc, strata_transport_t *t)
{
    (void)hc;
    if (!t)
        return;
    t->vt->fini(t->pctx);
    free(t->cfg);
    free(t);
}

/* ---- the checks: every host's (<strata/check.h>) ------------------------- */

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
    strata__kit_log(kit_of(hc), STRATA_LOG_ERROR, "transport",
                    "%s, group %s: %s: %s", t ? t->vt->hdr.name : "(none)",
                    t && t->group.tag ? t->group.tag : "(untagged)", what,
                    msg);
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

static int k_t_reduce(strata_hctx_t *hc, strata_transport_t *t,
                      strata_op_t *op)
{
    int rc = check_op(hc, t, "all-reduce", op, NULL, STRATA_CHECK_REDUCE_OP);
    return rc ? rc : t->vt->reduce(t->pctx, op);
}

static int k_t_update(strata_hctx_t *hc, strata_transport_t *t,
                      strata_op_t *op)
{
    if (t && !t->vt->update)
        return STRATA_ENOTSUP;
    int rc = check_op(hc, t, "broadcast", op, NULL, STRATA_CHECK_ROOT);
    return rc ? rc : t->vt->update(t->pctx, op);
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
    return strata_transport_shards(t->vt, t->pctx, gather, op, bounds);
}

static int k_t_reduce_scatter(strata_hctx_t *hc, strata_transport_t *t,
                              strata_op_t *op, const size_t *bounds)
{
    return shards(hc, t, 0, op, bounds);
}

static int k_t_all_gather(strata_hctx_t *hc, strata_transport_t *t,
                          strata_op_t *op, const size_t *bounds)
{
    return shards(hc, t, 1, op, bounds);
}

static int k_t_barrier(strata_hctx_t *hc, strata_transport_t *t, int slot)
{
    if (!t)
        return refuse(hc, t, "barrier", "no transport (t is NULL)");
    char why[128];
    if (strata_check_barrier(&t->group, slot, why, sizeof why) != STRATA_OK)
        return refuse(hc, t, "barrier", "%s", why);
    return strata_transport_barrier(t->vt, t->pctx, slot);
}

static uint32_t k_t_caps(strata_hctx_t *hc, strata_transport_t *t)
{
    (void)hc;
    return t ? t->caps : 0;
}

/* The frozen ctl ops of the collectives take the road of the entries. */
static int k_t_ctl(strata_hctx_t *hc, strata_transport_t *t, int op,
                   void *arg)
{
    if (t && op == STRATA_CTL_BARRIER)
        return k_t_barrier(hc, t, arg ? *(int *)arg : 0);
    if (t && (op == STRATA_CTL_REDUCE_SCATTER || op == STRATA_CTL_ALL_GATHER)) {
        strata_shards_t *sh = arg;
        if (!sh || sh->struct_size < sizeof *sh)
            return refuse(hc, t, "shards", "arg is not a strata_shards_t");
        if (!sh->op)
            return t->caps & STRATA_CAP_SHARDS ? STRATA_OK : STRATA_ENOTSUP;
        return shards(hc, t, op == STRATA_CTL_ALL_GATHER, sh->op, sh->bounds);
    }
    return t && t->vt->ctl ? t->vt->ctl(t->pctx, op, arg) : STRATA_ENOTSUP;
}

static int k_t_send(strata_hctx_t *hc, strata_transport_t *t, int peer,
                    const void *hdr, size_t hlen, const void *data,
                    size_t dlen, int timeout_ms)
{
    (void)hc;
    return t && t->vt->send ? t->vt->send(t->pctx, peer, hdr, hlen, data,
                                          dlen, timeout_ms)
                            : STRATA_ENOTSUP;
}

static int k_t_recv(strata_hctx_t *hc, strata_transport_t *t, int *peer,
                    void *buf, size_t cap, size_t *len, int timeout_ms)
{
    (void)hc;
    return t && t->vt->recv ? t->vt->recv(t->pctx, peer, buf, cap, len,
                                          timeout_ms)
                            : STRATA_ENOTSUP;
}

void strata__kit_transport_entries(strata_host_v2_t *h)
{
    h->t_open = k_t_open;
    h->t_name = k_t_name;
    h->t_reduce = k_t_reduce;
    h->t_update = k_t_update;
    h->t_ctl = k_t_ctl;
    h->t_send = k_t_send;
    h->t_recv = k_t_recv;
    h->t_close = k_t_close;
    h->t_reduce_scatter = k_t_reduce_scatter;
    h->t_all_gather = k_t_all_gather;
    h->t_barrier = k_t_barrier;
    h->t_caps = k_t_caps;
}
