/* zmq.so -- transport plugin: ring collectives between processes (and
 * machines) over ZeroMQ. This file: the vtable, the option table, init,
 * fini, ctl and the argument checks. README.md lists the options. */
#include "p2p.h"
#include "aead.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STRZ_MAX_MEMBERS 65536
#define STRZ_MAX_ADDR    1024

/* An instance: the ring's state, plus the point-to-point side when the
 * group is a "p2p:" one (p2p.h). `c` comes first, so pctx is either. */
typedef struct zmqt {
    strz_ctx_t  c;
    strz_p2p_t *p2p;
} zmqt_t;
#define P2P_OF(ctx) (((zmqt_t *)(ctx))->p2p)

static const strata_option_t k_options[] = {
    { "chunk_bytes", STRATA_OPT_SIZE, 0, "256K",
      offsetof(strz_cfg_t, chunk_bytes), 4096, 64.0 * 1024 * 1024, NULL,
      "pipeline segment: bytes per message of a ring step" },
    { "timeout_s", STRATA_OPT_FLOAT, 0, "60",
      offsetof(strz_cfg_t, timeout_s), 0.01, 86400, NULL,
      "bound on one collective and on start-up (the group's timeout wins)" },
    { "heartbeat_ms", STRATA_OPT_INT, 0, "1000",
      offsetof(strz_cfg_t, heartbeat_ms), 10, 600000, NULL,
      "ZMTP heartbeat interval; a peer silent for 3 intervals is dead" },
    { "linger_ms", STRATA_OPT_INT, 0, "1000",
      offsetof(strz_cfg_t, linger_ms), 0, 60000, NULL,
      "at close, how long queued messages may still be delivered" },
    { "window_bytes", STRATA_OPT_SIZE, 0, "16M",
      offsetof(strz_cfg_t, window_bytes), 65536, 1024.0 * 1024 * 1024, NULL,
      "bytes queued per link before a sender waits (high-water mark)" },
    { "io_threads", STRATA_OPT_INT, 0, "1",
      offsetof(strz_cfg_t, io_threads), 1, 16, NULL,
      "ZeroMQ I/O threads" },
    { "small_bytes", STRATA_OPT_SIZE, 0, "64K",
      offsetof(strz_cfg_t, small_bytes), 0, 64.0 * 1024 * 1024, NULL,
      "all-reduces up to this size gather whole buffers (n-1 steps, not "
      "2(n-1)); 0: always the ring" },
    { "shm", STRATA_OPT_ENUM, 0, "auto", offsetof(strz_cfg_t, shm), 0, 0,
      "auto|off",
      "auto: all-reduce through shared memory when every member is on "
      "this host" },
    { "direct", STRATA_OPT_ENUM, 0, "auto", offsetof(strz_cfg_t, direct), 0,
      0, "auto|off",
      "auto: on tcp, the collectives' data take plain TCP connections "
      "beside zmq (one ephemeral port per member)" },
    { "compression", STRATA_OPT_ENUM, 0, "none",
      offsetof(strz_cfg_t, compression), 0, 0, "none|fp16|bf16",
      "gradients on the wire: fp16 or bf16 send 16 bits per value and sum "
      "in float32 (fp16 overflows to inf past 65504); other data stays "
      "exact" },
    { "spin_us", STRATA_OPT_INT, 0, "50",
      offsetof(strz_cfg_t, spin_us), 0, 1000, NULL,
      "on the direct sockets, a wait polls without sleeping for up to this "
      "long before it sleeps (a small message's reply comes sooner than a "
      "wake-up); only where this host has a CPU for every member. 0: "
      "never" },
    { "bulk_cipher", STRATA_OPT_ENUM, 0, "aes256gcm",
      offsetof(strz_cfg_t, bulk_cipher), 0, 0, "aes256gcm|curve",
      "secured jobs: aes256gcm carries the collectives' data as AES-256-GCM "
      "records on the direct sockets (keys agreed over the CURVE links; "
      "needs AES-NI, else curve); curve keeps them on the CURVE links" },
    { NULL, 0, 0, NULL, 0, 0, 0, NULL, NULL }
};

static void free_strv(char **v, int n)
{
    if (v == NULL)
        return;
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void zmqt_fini(void *pctx)
{
    strz_ctx_t *c = pctx;
    if (c == NULL)
        return;
    strz_monitor_drain(c);
    uint64_t p2p_dropped = strz_p2p_dropped(P2P_OF(c));
    strz_p2p_close(P2P_OF(c));
    strz_link_close(c);
    strz_strangers_summary(c, p2p_dropped);
    strz_curve_forget(c);
    if (c->stage)
        c->host->free(c->hc, STRATA_DEVICE(STRATA_DEV_CPU, 0), c->stage);
    free_strv(c->ep, c->n);
    free_strv(c->addr, c->n);
    free_strv(c->name, c->n);
    free(c);
}

/* "host:port" -> "tcp://host:port"; "tcp://..." and "ipc://..." as given. */
static char *endpoint_of(const char *addr)
{
    size_t n = strlen(addr);
    char *ep;

    if (strncmp(addr, "tcp://", 6) == 0 || strncmp(addr, "ipc://", 6) == 0)
        return n > 6 ? strdup(addr) : NULL;
    if (strstr(addr, "://") != NULL || strrchr(addr, ':') == NULL
        || strrchr(addr, ':') == addr || strrchr(addr, ':')[1] == '\0')
        return NULL;
    if ((ep = malloc(n + 7)) != NULL)
        snprintf(ep, n + 7, "tcp://%s", addr);
    return ep;
}

static int check_cfg(const strata_host_v2_t *host, strata_hctx_t *hc,
                     const strz_cfg_t *cfg)
{
    const char *bad = NULL;
    if (cfg->chunk_bytes < 4096 || cfg->chunk_bytes > 64 * 1024 * 1024)
        bad = "chunk_bytes (4K..64M)";
    else if (!(cfg->timeout_s >= 0.01 && cfg->timeout_s <= 86400))
        bad = "timeout_s (0.01..86400)";
    else if (cfg->heartbeat_ms < 10 || cfg->heartbeat_ms > 600000)
        bad = "heartbeat_ms (10..600000)";
    else if (cfg->linger_ms < 0 || cfg->linger_ms > 60000)
        bad = "linger_ms (0..60000)";
    else if (cfg->window_bytes < 65536
             || cfg->window_bytes > 1024LL * 1024 * 1024)
        bad = "window_bytes (64K..1G)";
    else if (cfg->io_threads < 1 || cfg->io_threads > 16)
        bad = "io_threads (1..16)";
    else if (cfg->small_bytes < 0 || cfg->small_bytes > 64 * 1024 * 1024)
        bad = "small_bytes (0..64M)";
    else if (cfg->shm != STRZ_SHM_AUTO && cfg->shm != STRZ_SHM_OFF)
        bad = "shm (auto|off)";
    else if (cfg->direct != STRZ_DIRECT_AUTO && cfg->direct != STRZ_DIRECT_OFF)
        bad = "direct (auto|off)";
    else if (cfg->compression < STRZ_COMP_NONE
             || cfg->compression > STRZ_COMP_BF16)
        bad = "compression (none|fp16|bf16)";
    else if (cfg->spin_us < 0 || cfg->spin_us > 1000)
        bad = "spin_us (0..1000)";
    if (bad == NULL)
        return 0;
    host->log(hc, STRATA_LOG_ERROR, "zmq", "[transport] %s out of range",
              bad);
    return STRATA_ECONFIG;
}

/* Copy and check the group; logs what is wrong. */
static int take_group(strz_ctx_t *c, const strata_group_t *g)
{
    const strata_host_v2_t *h = c->host;

    if (g->size < 1 || g->size > STRZ_MAX_MEMBERS || g->rank < 0
        || g->rank >= g->size || g->nlocal > 1) {
        h->log(c->hc, STRATA_LOG_ERROR, "zmq", "bad group: size %d, rank "
               "%d, nlocal %d (one member per process)", (int)g->size,
               (int)g->rank, (int)g->nlocal);
        return STRATA_EINVAL;
    }
    if (g->tag && strlen(g->tag) > STRZ_MAX_TAG) {
        h->log(c->hc, STRATA_LOG_ERROR, "zmq", "group tag longer than %d "
               "bytes", STRZ_MAX_TAG);
        return STRATA_EINVAL;
    }
    c->n = g->size;
    c->rank = g->rank;
    c->left = (c->rank + c->n - 1) % c->n;
    c->right = (c->rank + 1) % c->n;
    snprintf(c->tag, sizeof c->tag, "%s", g->tag ? g->tag : "");
    c->ep = calloc((size_t)c->n, sizeof *c->ep);
    c->addr = calloc((size_t)c->n, sizeof *c->addr);
    c->name = calloc((size_t)c->n, sizeof *c->name);
    if (!c->ep || !c->addr || !c->name)
        return STRATA_ENOMEM;
    for (int i = 0; i < c->n; i++) {
        char dflt[32];
        const char *a = g->addrs ? g->addrs[i] : NULL;
        const char *nm = g->names && g->names[i] ? g->names[i] : NULL;
        snprintf(dflt, sizeof dflt, "rank:%d", i);
        c->name[i] = strdup(nm ? nm : dflt);
        c->addr[i] = strdup(a ? a : "(none)");
        if (!c->name[i] || !c->addr[i])
            return STRATA_ENOMEM;
        if (c->n == 1)
            continue;
        if (a == NULL || strlen(a) > STRZ_MAX_ADDR
            || (c->ep[i] = endpoint_of(a)) == NULL) {
            h->log(c->hc, STRATA_LOG_ERROR, "zmq", "address of %s: '%s' is "
                   "not host:port, tcp://host:port or ipc://path",
                   c->name[i], a ? a : "(null)");
            return STRATA_EINVAL;
        }
    }
    return 0;
}

static int zmqt_init(const strata_host_v2_t *host, strata_hctx_t *hc,
                     const strata_env_t *env, void **pctx)
{
    strz_ctx_t *c;
    int rc;

    if (pctx == NULL)
        return STRATA_EINVAL;
    *pctx = NULL;
    if (host == NULL || host->log == NULL || env == NULL)
        return STRATA_EINVAL;
    const strata_group_t *g = env->group;
    if (g == NULL || g->scope != STRATA_SCOPE_WORLD) {
        host->log(hc, STRATA_LOG_INFO, "zmq", "declined: connects "
                  "processes (WORLD scope groups) only");
        return STRATA_EDECLINE;
    }
    if (env->cfg == NULL) {
        host->log(hc, STRATA_LOG_ERROR, "zmq",
                  "no parsed [transport] options");
        return STRATA_EINVAL;
    }
    if ((rc = check_cfg(host, hc, env->cfg)) != 0)
        return rc;
    if ((c = calloc(1, sizeof(zmqt_t))) == NULL)
        return STRATA_ENOMEM;
    c->host = host;
    c->hc = hc;
    c->what = "start-up";
    c->cfg = *(const strz_cfg_t *)env->cfg;
    c->wake[0] = c->wake[1] = c->zc_pipe[0] = c->zc_pipe[1] = -1;
    c->left_fd = -1;
    atomic_init(&c->zc_out, 0);
    atomic_init(&c->canceled, 0);
    c->seg = (size_t)c->cfg.chunk_bytes / sizeof(float);
    c->timeout_ms = g->timeout_ms > 0 ? g->timeout_ms
                                      : (int32_t)(c->cfg.timeout_s * 1000.0);
    if (c->timeout_ms < 1)
        c->timeout_ms = 1;
    atomic_init(&c->strangers, 0);
    for (int k = 0; k < STRZ_SK_N; k++)
        atomic_init(&c->sk[k], 0);
    atomic_init(&c->accepted, 0);
    atomic_init(&c->handshaken, 0);
    atomic_init(&c->auth_failed, 0);
    if ((rc = take_group(c, g)) != 0 || (rc = strz_curve_take(c, g)) != 0)
        goto fail;
    if (c->secure && c->cfg.bulk_cipher == STRZ_BULK_AES256GCM
        && !strz_p2p_group(g)) {
        c->aead = strz_aead_available();
        if (!c->aead)
            strz_log(c, STRATA_LOG_INFO, "this CPU has no AES-NI and "
                     "PCLMULQDQ: the collectives' data stay on CurveZMQ "
                     "(as with bulk_cipher = curve)");
    }
    if (strz_p2p_group(g)) {
        /* Point to point only: no ring, nobody to wait for. */
        if ((rc = strz_p2p_open(c, &P2P_OF(c))) != 0)
            goto fail;
    } else if (c->n > 1) {
        /* Rendezvous with both neighbours, then once around the ring; the
         * ring gets a little longer so that a missing member is named by
         * the ABORT of its neighbour rather than as a plain timeout. */
        int64_t t0 = strz_now_ms();
        if ((rc = strz_link_open(c, t0 + c->timeout_ms)) != 0
            || (rc = strz_barrier(c, t0 + c->timeout_ms + 1000)) != 0)
            goto fail;
    }
    c->running = 1;
    if (c->aead && strz_direct_tx(c) && c->rank == 0)
        strz_log(c, STRATA_LOG_INFO, "collective data travel as AES-256-GCM "
                 "records (%s), keys agreed over the CURVE links",
                 strz_aead_engine());
    if (c->cfg.compression != STRZ_COMP_NONE && c->rank == 0 && !P2P_OF(c))
        strz_log(c, STRATA_LOG_INFO, "gradient all-reduces travel as %s, "
                 "summed in float32", strz_comp_name(c->cfg.compression));
    *pctx = c;
    return 0;
fail:
    zmqt_fini(c);
    return rc;
}

/* A buffer on another device travels through host memory. */
static float *host_view(strz_ctx_t *c, strata_op_t *op, size_t bytes)
{
    int32_t cpu = STRATA_DEVICE(STRATA_DEV_CPU, 0);

    if (STRATA_DEVICE_TYPE(op->device) == STRATA_DEV_CPU)
        return op->buf;
    if (c->stage_bytes < bytes) {
        if (c->stage)
            c->host->free(c->hc, cpu, c->stage);
        c->stage_bytes = 0;
        if ((c->stage = c->host->alloc(c->hc, cpu, bytes)) == NULL)
            return NULL;
        c->stage_bytes = bytes;
    }
    if (c->host->copy(c->hc, cpu, c->stage, op->device, op->buf,
                      bytes) != 0)
        return NULL;
    return c->stage;
}

static int host_done(strz_ctx_t *c, strata_op_t *op, const float *view,
                     size_t bytes, int rc)
{
    if (rc == 0 && view != op->buf
        && c->host->copy(c->hc, op->device, op->buf,
                         STRATA_DEVICE(STRATA_DEV_CPU, 0), view, bytes) != 0)
        rc = STRATA_EDEVICE;
    return rc;
}

/* The host has checked op, buf, count, reduce_op, root and bounds (ABI
 * 2.5); what is left is this group's own. */
static int check_op(strz_ctx_t *c, const strata_op_t *op, const char *what)
{
    (void)op;
    if (P2P_OF(c)) {
        strz_log(c, STRATA_LOG_ERROR, "%s: group '%s' is point-to-point "
                 "only (no ring)", what, c->tag);
        return STRATA_ENOTSUP;
    }
    return c->broken;
}

/* Only gradients may lose bits on the way; sums of metrics, counts and
 * state stay exact (they come without the flag). */
static int comp_of(const strz_ctx_t *c, const strata_op_t *op)
{
    int grad = STRATA_HAS_FIELD(strata_op_t, op, flags)
               && (op->flags & STRATA_OP_GRADIENT);
    return grad ? (int)c->cfg.compression : STRZ_COMP_NONE;
}

/* op->buf on the host (host_view), or NULL with the group failed
 * (c->broken says why). */
static float *staged(strz_ctx_t *c, strata_op_t *op, const char *what)
{
    c->what = what;
    float *v = host_view(c, op, op->count * sizeof(float));
    if (v == NULL) /* the peers must not wait for us: fail the group */
        strz_fail(c, STRATA_ENOMEM, c->rank,
                  "no host staging buffer (%zu bytes)",
                  op->count * sizeof(float));
    return v;
}

static int zmqt_reduce(void *pctx, strata_op_t *op)
{
    strz_ctx_t *c = pctx;
    int rc = check_op(c, op, "allreduce");

    if (rc || op->count == 0)
        return rc;
    float *v = staged(c, op, "allreduce");
    if (v == NULL)
        return c->broken;
    rc = strz_allreduce(c, v, op->count, op->reduce_op, comp_of(c, op));
    return host_done(c, op, v, op->count * sizeof(float), rc);
}

static int zmqt_update(void *pctx, strata_op_t *op)
{
    strz_ctx_t *c = pctx;
    int rc = check_op(c, op, "broadcast");

    if (rc || op->count == 0)
        return rc;
    float *v = staged(c, op, "broadcast");
    if (v == NULL)
        return c->broken;
    rc = strz_broadcast(c, v, op->count, op->root);
    return host_done(c, op, v, op->count * sizeof(float), rc);
}

/* reduce_scatter / all_gather (plugin_v2.h, ABI 2.5); op NULL only asks. */
static int zmqt_shards(strz_ctx_t *c, int gather, strata_op_t *op,
                       const size_t *bounds)
{
    const char *what = gather ? "all-gather" : "reduce-scatter";
    if (P2P_OF(c) || !strz_shards_offered(c))
        return STRATA_ENOTSUP; /* shared memory: the caller reduces */
    if (op == NULL)
        return STRATA_OK; /* only asked */
    int rc = check_op(c, op, what);
    if (rc || op->count == 0)
        return rc;
    float *v = staged(c, op, what);
    if (v == NULL)
        return c->broken;
    rc = gather ? strz_all_gather(c, v, op->count, bounds)
                : strz_reduce_scatter(c, v, op->count, bounds,
                                      op->reduce_op, comp_of(c, op));
    return host_done(c, op, v, op->count * sizeof(float), rc);
}

static int zmqt_reduce_scatter(void *pctx, strata_op_t *op,
                               const size_t *bounds)
{
    return zmqt_shards(pctx, 0, op, bounds);
}

static int zmqt_all_gather(void *pctx, strata_op_t *op, const size_t *bounds)
{
    return zmqt_shards(pctx, 1, op, bounds);
}

static int zmqt_barrier(void *pctx, int slot)
{
    strz_ctx_t *c = pctx;
    (void)slot; /* one member per process */
    return P2P_OF(c) ? STRATA_ENOTSUP : strz_barrier(c, 0);
}

/* The frozen ctl ops of 2.4, for callers of the vtable without a host
 * (the host itself routes them to the entries, checked): they check the
 * shards themselves. */
static int ctl_shards(strz_ctx_t *c, int gather, const strata_shards_t *sh)
{
    if (sh == NULL || sh->struct_size < sizeof *sh)
        return STRATA_EINVAL;
    const strata_op_t *op = sh->op;
    int bad = op && (sh->bounds == NULL || sh->bounds[0] != 0 ||
                     sh->bounds[c->n] != op->count ||
                     (op->buf == NULL && op->count > 0) ||
                     (!gather && op->reduce_op != STRATA_REDUCE_SUM &&
                      op->reduce_op != STRATA_REDUCE_MEAN));
    for (int m = 0; !bad && op && m < c->n; m++)
        bad = sh->bounds[m] > sh->bounds[m + 1];
    if (bad) {
        strz_log(c, STRATA_LOG_ERROR, "%s: bad op or shard bounds (not "
                 "ascending from 0 to the count)",
                 gather ? "all-gather" : "reduce-scatter");
        return STRATA_EINVAL;
    }
    return zmqt_shards(c, gather, sh->op, sh->bounds);
}

static int zmqt_ctl(void *pctx, int op, void *arg)
{
    strz_ctx_t *c = pctx;
    switch (op) {
    case STRATA_CTL_REDUCE_SCATTER:
    case STRATA_CTL_ALL_GATHER:
        return ctl_shards(c, op == STRATA_CTL_ALL_GATHER, arg);
    case STRATA_CTL_BARRIER:
        return zmqt_barrier(c, 0);
    case STRATA_CTL_ABORT:
        /* Any thread: flag, then wake a waiter (write is thread-safe). */
        atomic_store(&c->canceled, 1);
        strz_p2p_cancel(P2P_OF(c));
        if (c->wake[1] >= 0 && write(c->wake[1], "", 1) < 0) {
            /* already has a byte pending */
        }
        return 0;
    default:
        return STRATA_ENOTSUP;
    }
}

/* What this instance dropped from outside the job, by kind (ABI 2.7).
 * The last call (main thread, no collective running) takes in the
 * monitors' pending events first, as fini does. */
static int zmqt_strangers(void *pctx, strata_strangers_t *out, int last)
{
    strz_ctx_t *c = pctx;
    if (!c || !out)
        return STRATA_EINVAL;
    if (last) {
        strz_monitor_drain(c);
        strz_p2p_drain(P2P_OF(c));
    }
    unsigned long long k[STRZ_SK_N];
    strz_strangers_count(c, strz_p2p_dropped(P2P_OF(c)), k);
    const uint64_t v[4] = { k[STRZ_SK_KEY], k[STRZ_SK_EARLY],
                            k[STRZ_SK_GARBAGE], k[STRZ_SK_MESSAGE] };
    const size_t at[4] = { offsetof(strata_strangers_t, refused_key),
                           offsetof(strata_strangers_t, closed_early),
                           offsetof(strata_strangers_t, not_protocol),
                           offsetof(strata_strangers_t, bad_message) };
    /* a caller built for a later minor passes more; an earlier one less */
    for (int i = 0; i < 4; i++)
        if (out->struct_size >= at[i] + sizeof(uint64_t))
            memcpy((char *)out + at[i], &v[i], sizeof v[i]);
    return STRATA_OK;
}

/* send/recv: point to point on "p2p:" groups only (p2p.h). */
static int p2p_only(strz_ctx_t *c)
{
    strz_log(c, STRATA_LOG_ERROR, "send/recv: group '%s' is a ring; "
             "point to point needs a group tagged '%s...'", c->tag,
             STRZ_P2P_PREFIX);
    return STRATA_ENOTSUP;
}

static int zmqt_send(void *pctx, int peer, const void *hdr, size_t hlen,
                     const void *data, size_t dlen, int timeout_ms)
{
    strz_ctx_t *c = pctx;
    return P2P_OF(c) ? strz_p2p_send(P2P_OF(c), peer, hdr, hlen, data, dlen,
                                     timeout_ms)
                     : p2p_only(c);
}

static int zmqt_recv(void *pctx, int *peer, void *buf, size_t cap,
                     size_t *len, int timeout_ms)
{
    strz_ctx_t *c = pctx;
    return P2P_OF(c) ? strz_p2p_recv(P2P_OF(c), peer, buf, cap, len,
                                     timeout_ms)
                     : p2p_only(c);
}

STRATA_EXPORT const strata_plugin_v2_t strata_plugin_v2 = {
    STRATA_PLUGIN_HEADER_CAPS(STRATA_KIND_TRANSPORT, "zmq", "0.1.0",
                              "ring all-reduce and broadcast between "
                              "processes over ZeroMQ (tcp, ipc)",
                              STRATA_CAP_P2P | STRATA_CAP_SHARDS |
                                  STRATA_CAP_BARRIER),
    .options  = k_options,
    .cfg_size = sizeof(strz_cfg_t),
    .init     = zmqt_init,
    .fini     = zmqt_fini,
    .reduce   = zmqt_reduce,
    .update   = zmqt_update,
    .ctl      = zmqt_ctl,
    .send     = zmqt_send,
    .recv     = zmqt_recv,
    .reduce_scatter = zmqt_reduce_scatter,
    .all_gather     = zmqt_all_gather,
    .barrier        = zmqt_barrier,
    .strangers      = zmqt_strangers,
};
