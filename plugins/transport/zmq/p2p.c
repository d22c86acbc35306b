/* zmq.so -- point to point: send()/recv() between any two members of a
 * "p2p:" group. Design and frame format: p2p.h. */
#include "p2p.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define P2P_LOG_FIRST 10   /* malformed messages logged one by one, then  */
#define P2P_LOG_EVERY 1000 /* one line per this many                        */

typedef struct p2p_peer {
    pthread_mutex_t lock;
    void           *tx;      /* DEALER to the peer's ROUTER, or NULL     */
    int             reached; /* a send went through once                 */
    int             warned;  /* its loss was logged (until a send works) */
} p2p_peer_t;

struct strz_p2p {
    strz_ctx_t     *c;     /* names, addresses, options, rank */
    void           *zctx;
    struct strz_zap *zap;  /* who may connect, in a secured group */
    void           *rx;    /* ROUTER bound on our address */
    void           *mon;   /* PAIR: rx's monitor events (strangers) */
    char           *self_ep;
    pthread_mutex_t rx_lock;
    p2p_peer_t     *peer;  /* c->n entries */
    int             wake[2];
    atomic_int      canceled;
    atomic_ullong   seq, dropped;
    uint32_t        tag_hash;
    uint64_t        nonce;
    int64_t         maxmsg;
};

static void p2p_monitor(strz_p2p_t *p);

int strz_p2p_group(const strata_group_t *g)
{
    if (!g || g->scope != STRATA_SCOPE_WORLD)
        return 0;
    if (STRATA_HAS_FIELD(strata_group_t, g, flags) && (g->flags & STRATA_GROUP_P2P))
        return 1;
    /* ABI 1.2 openers asked by the tag's prefix. */
    return g->tag && strncmp(g->tag, STRZ_P2P_PREFIX,
                             strlen(STRZ_P2P_PREFIX)) == 0;
}

/* FNV-1a of the tag, 31 bits: the aux field is a signed int32. */
static uint32_t tag_hash(const char *tag)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *s = (const unsigned char *)tag; *s; s++)
        h = (h ^ *s) * 16777619u;
    return h & 0x7fffffffu;
}

static uint64_t make_nonce(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30)
                 ^ ((uint64_t)getpid() << 17);
    x ^= x >> 33; /* splitmix-style finish */
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x ? x : 1;
}

static int sockopt(strz_p2p_t *p, void *s, int name, int v, const char *what)
{
    if (zmq_setsockopt(s, name, &v, sizeof v) == 0)
        return 0;
    strz_log(p->c, STRATA_LOG_ERROR, "p2p: zmq_setsockopt(%s): %s", what,
             zmq_strerror(zmq_errno()));
    return STRATA_EINTERNAL;
}

static int common_opts(strz_p2p_t *p, void *s)
{
    const strz_cfg_t *cfg = &p->c->cfg;
    int hb = (int)cfg->heartbeat_ms, rc = 0;
    rc |= sockopt(p, s, ZMQ_LINGER, (int)cfg->linger_ms, "LINGER");
    rc |= sockopt(p, s, ZMQ_HEARTBEAT_IVL, hb, "HEARTBEAT_IVL");
    rc |= sockopt(p, s, ZMQ_HEARTBEAT_TIMEOUT, 3 * hb, "HEARTBEAT_TIMEOUT");
    rc |= sockopt(p, s, ZMQ_HEARTBEAT_TTL, 3 * hb > 6553599 ? 6553599 : 3 * hb,
                  "HEARTBEAT_TTL");
    if (zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &p->maxmsg, sizeof p->maxmsg) != 0) {
        strz_log(p->c, STRATA_LOG_ERROR, "p2p: zmq_setsockopt(MAXMSGSIZE): %s",
                 zmq_strerror(zmq_errno()));
        rc = STRATA_EINTERNAL;
    }
    if (p->c->ipv6)
        rc |= sockopt(p, s, ZMQ_IPV6, 1, "IPV6");
    rc |= sockopt(p, s, ZMQ_HANDSHAKE_IVL, STRZ_HANDSHAKE_MS, "HANDSHAKE_IVL");
    return rc ? STRATA_EINTERNAL : 0;
}

/* Bind the ROUTER on this member's address, and only there; an ipc://
 * socket file is made private (0600). */
static int bind_rx(strz_p2p_t *p)
{
    if (zmq_bind(p->rx, p->self_ep) != 0) {
        strz_log(p->c, STRATA_LOG_ERROR, "p2p: cannot listen on %s (%s): %s",
                 p->self_ep, p->c->name[p->c->rank], zmq_strerror(zmq_errno()));
        return STRATA_EIO;
    }
    if (strncmp(p->self_ep, "ipc://", 6) == 0 && chmod(p->self_ep + 6, 0600)) {
        strz_log(p->c, STRATA_LOG_ERROR, "p2p: cannot make %s private "
                 "(chmod 600): %s", p->self_ep + 6, strerror(errno));
        return STRATA_EIO;
    }
    return 0;
}

int strz_p2p_open(strz_ctx_t *c, strz_p2p_t **out)
{
    *out = NULL;
    strz_p2p_t *p = calloc(1, sizeof *p);
    if (!p)
        return STRATA_ENOMEM;
    p->c = c;
    p->wake[0] = p->wake[1] = -1;
    atomic_init(&p->canceled, 0);
    atomic_init(&p->seq, 0);
    atomic_init(&p->dropped, 0);
    p->tag_hash = tag_hash(c->tag);
    p->nonce = make_nonce();
    p->maxmsg = c->cfg.window_bytes;
    pthread_mutex_init(&p->rx_lock, NULL);
    int rc = 0;
    if ((p->peer = calloc((size_t)c->n, sizeof *p->peer)) == NULL)
        rc = STRATA_ENOMEM;
    for (int i = 0; rc == 0 && i < c->n; i++)
        pthread_mutex_init(&p->peer[i].lock, NULL);
    for (int i = 0; rc == 0 && i < c->n; i++)
        if (c->ep[i] && strchr(c->ep[i], '['))
            c->ipv6 = 1;
    if (rc == 0) {
        char ep[64];
        snprintf(ep, sizeof ep, "inproc://strz-p2p-%p", (void *)p);
        /* A group of one has no address: talk to ourselves in process. */
        p->self_ep = strdup(c->ep[c->rank] ? c->ep[c->rank] : ep);
        if (!p->self_ep)
            rc = STRATA_ENOMEM;
        else if (!c->ep[c->rank] && !(c->ep[c->rank] = strdup(ep)))
            rc = STRATA_ENOMEM;
    }
    if (rc == 0 && pipe2(p->wake, O_NONBLOCK | O_CLOEXEC) != 0) {
        strz_log(c, STRATA_LOG_ERROR, "p2p: pipe: %s", strerror(errno));
        rc = STRATA_EIO;
    }
    if (rc == 0
        && ((p->zctx = zmq_ctx_new()) == NULL
            || zmq_ctx_set(p->zctx, ZMQ_IO_THREADS, (int)c->cfg.io_threads)
            || strz_zap_start(c, p->zctx, &p->zap) != 0
            || (p->rx = zmq_socket(p->zctx, ZMQ_ROUTER)) == NULL)) {
        strz_log(c, STRATA_LOG_ERROR, "p2p: zmq context/socket: %s",
                 zmq_strerror(zmq_errno()));
        rc = STRATA_EINTERNAL;
    }
    if (rc == 0)
        rc = common_opts(p, p->rx);
    if (rc == 0)
        rc = strz_curve_server(c, p->rx);
    if (rc == 0 && c->ep[c->rank] && strncmp(p->self_ep, "inproc:", 7)) {
        /* Strangers at our port are counted by kind (strz.h); the
         * monitor before the bind, so that every connection accepted is
         * seen accepted (a member's handshake without its ACCEPTED made
         * one stranger less) */
        char mep[64];
        int hwm = 0; /* every event kept until read */
        snprintf(mep, sizeof mep, "inproc://strz-p2p-mon-%p", (void *)p);
        if (zmq_socket_monitor(p->rx, mep, STRZ_MONITOR_EVENTS) != 0
            || (p->mon = zmq_socket(p->zctx, ZMQ_PAIR)) == NULL
            || sockopt(p, p->mon, ZMQ_LINGER, 0, "LINGER")
            || zmq_setsockopt(p->mon, ZMQ_RCVHWM, &hwm, sizeof hwm)
            || zmq_connect(p->mon, mep) != 0) {
            strz_log(c, STRATA_LOG_ERROR, "p2p: socket monitor: %s",
                     zmq_strerror(zmq_errno()));
            rc = STRATA_EINTERNAL;
        }
    }
    if (rc == 0)
        rc = bind_rx(p);
    if (rc != 0) {
        strz_p2p_close(p);
        return rc;
    }
    *out = p;
    return 0;
}

void strz_p2p_close(strz_p2p_t *p)
{
    if (!p)
        return;
    for (int i = 0; p->peer && i < p->c->n; i++) {
        if (p->peer[i].tx)
            zmq_close(p->peer[i].tx);
        pthread_mutex_destroy(&p->peer[i].lock);
    }
    pthread_mutex_lock(&p->rx_lock);
    p2p_monitor(p); /* the last events, for the summary */
    pthread_mutex_unlock(&p->rx_lock);
    if (p->rx)
        (void)zmq_socket_monitor(p->rx, NULL, 0);
    if (p->mon)
        zmq_close(p->mon);
    if (p->rx)
        zmq_close(p->rx);
    strz_zap_stop(p->zap);
    if (p->zctx)
        while (zmq_ctx_term(p->zctx) != 0 && zmq_errno() == EINTR) {
        }
    for (int i = 0; i < 2; i++)
        if (p->wake[i] >= 0)
            close(p->wake[i]);
    pthread_mutex_destroy(&p->rx_lock);
    free(p->peer);
    free(p->self_ep);
    free(p);
}

void strz_p2p_cancel(strz_p2p_t *p)
{
    if (!p)
        return;
    atomic_store(&p->canceled, 1);
    /* The byte stays in the pipe: every later poll wakes too. */
    if (p->wake[1] >= 0 && write(p->wake[1], "", 1) < 0) {
        /* full: a byte is pending anyway */
    }
}

void strz_p2p_drain(strz_p2p_t *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->rx_lock);
    p2p_monitor(p);
    pthread_mutex_unlock(&p->rx_lock);
}

uint64_t strz_p2p_dropped(const strz_p2p_t *p)
{
    return p ? atomic_load(&p->dropped) : 0;
}

static int deadline_of(const strz_p2p_t *p, int timeout_ms)
{
    return timeout_ms > 0 ? timeout_ms : (int)p->c->timeout_ms;
}

/* rx's monitor: connections that are not the job's (strz.h), counted.
 * With rx_lock held (a PAIR is one thread's at a time). */
static void p2p_monitor(strz_p2p_t *p)
{
    int id;
    uint32_t value;
    char where[96];
    while (p->mon && strz_monitor_read(p->mon, &id, &value, where,
                                       sizeof where))
        strz_monitor_event(p->c, id, value, where);
}

/* Wait for `events` on socket s (or the wake pipe; rx's monitor too when s
 * is rx, whose lock is held) until `until`. Returns 0 (look again),
 * STRATA_ETIMEDOUT or STRATA_ECANCELED. */
static int wait_sock(strz_p2p_t *p, void *s, short events, int64_t until)
{
    if (atomic_load(&p->canceled))
        return STRATA_ECANCELED;
    int64_t left = until - strz_now_ms();
    if (left <= 0)
        return STRATA_ETIMEDOUT;
    int mon = s == p->rx && p->mon;
    zmq_pollitem_t it[3] = {
        { .socket = s, .events = events },
        { .fd = p->wake[0], .events = ZMQ_POLLIN },
        { .socket = mon ? p->mon : NULL, .events = ZMQ_POLLIN },
    };
    if (zmq_poll(it, mon ? 3 : 2, (long)left) < 0 && zmq_errno() != EINTR)
        return STRATA_EIO;
    if (mon && (it[2].revents & ZMQ_POLLIN))
        p2p_monitor(p);
    return atomic_load(&p->canceled) ? STRATA_ECANCELED : 0;
}

/* The DEALER to `peer`, created and connected on first use (lock held). */
static void *peer_socket(strz_p2p_t *p, int peer)
{
    p2p_peer_t *pp = &p->peer[peer];
    if (pp->tx)
        return pp->tx;
    void *s = zmq_socket(p->zctx, ZMQ_DEALER);
    if (!s || common_opts(p, s) || strz_curve_client(p->c, s, peer)
        || sockopt(p, s, ZMQ_IMMEDIATE, 1, "IMMEDIATE")
        || sockopt(p, s, ZMQ_RECONNECT_IVL, 100, "RECONNECT_IVL")
        || zmq_connect(s, p->c->ep[peer]) != 0) {
        strz_log(p->c, STRATA_LOG_ERROR, "p2p: cannot connect to %s (%s): %s",
                 p->c->name[peer], p->c->ep[peer], zmq_strerror(zmq_errno()));
        if (s)
            zmq_close(s);
        return NULL;
    }
    pp->tx = s;
    return s;
}

/* Send one part; a signal while it waits does not cut the message. */
static int send_part(void *s, const void *buf, size_t len, int flags)
{
    int r;
    while ((r = zmq_send(s, buf, len, flags)) < 0 && zmq_errno() == EINTR) {
    }
    return r;
}

static int send_frames(void *s, const unsigned char *hb, const void *hdr,
                       size_t hlen, const void *data, size_t dlen)
{
    if (zmq_send(s, hb, STRZ_HDR_SIZE, ZMQ_DONTWAIT | ZMQ_SNDMORE) < 0)
        return zmq_errno() == EAGAIN ? STRATA_EAGAIN : STRATA_EIO;
    /* The first part went in: the others join it (zmq takes a message
     * whole), so these do not wait. The data in frames of at most
     * STRZ_P2P_CHUNK (p2p.h says why); no data: one empty frame. */
    if (send_part(s, hlen ? hdr : "", hlen, ZMQ_SNDMORE) < 0)
        return STRATA_EIO;
    const char *d = dlen ? data : "";
    size_t off = 0;
    do {
        size_t n = dlen - off < STRZ_P2P_CHUNK ? dlen - off : STRZ_P2P_CHUNK;
        if (send_part(s, d + off, n, off + n < dlen ? ZMQ_SNDMORE : 0) < 0)
            return STRATA_EIO;
        off += n;
    } while (off < dlen);
    return 0;
}

int strz_p2p_send(strz_p2p_t *p, int peer, const void *hdr, size_t hlen,
                  const void *data, size_t dlen, int timeout_ms)
{
    if (!p)
        return STRATA_ENOTSUP;
    strz_ctx_t *c = p->c;
    if (atomic_load(&p->canceled))
        return STRATA_ECANCELED;
    if (peer < 0 || peer >= c->n || (hlen && !hdr) || (dlen && !data)) {
        strz_log(c, STRATA_LOG_ERROR, "p2p: send to member %d of %d (or a "
                 "NULL buffer)", peer, (int)c->n);
        return STRATA_EINVAL;
    }
    if (hlen > UINT32_MAX || dlen > UINT32_MAX - hlen
        || (int64_t)(hlen + dlen) > p->maxmsg - STRZ_HDR_SIZE) {
        strz_log(c, STRATA_LOG_ERROR, "p2p: a message of %zu bytes to %s is "
                 "longer than window_bytes (%lld) allows", hlen + dlen,
                 c->name[peer], (long long)p->maxmsg);
        return STRATA_EINVAL;
    }
    strz_hdr_t h = {
        .type = STRZ_DATA, .flags = STRZ_P2P_FLAG, .sender = c->rank,
        .seq = atomic_fetch_add(&p->seq, 1) + 1, .offset = hlen,
        .length = (uint32_t)(hlen + dlen), .aux = (int32_t)p->tag_hash,
        .total = p->nonce,
    };
    unsigned char hb[STRZ_HDR_SIZE];
    strz_wire_pack(&h, hb);
    int ms = deadline_of(p, timeout_ms);
    int64_t until = strz_now_ms() + ms;
    pthread_mutex_lock(&p->peer[peer].lock);
    void *s = peer_socket(p, peer);
    int rc = s ? STRATA_EAGAIN : STRATA_EIO;
    while (rc == STRATA_EAGAIN) {
        rc = send_frames(s, hb, hdr, hlen, data, dlen);
        if (rc == STRATA_EAGAIN && (rc = wait_sock(p, s, ZMQ_POLLOUT, until)) == 0)
            rc = STRATA_EAGAIN;
    }
    /* One warning when a peer we reached goes away, not one per send; a
     * peer not up yet (start-up) is only worth a debug line. */
    p2p_peer_t *pp = &p->peer[peer];
    int level = pp->reached && !pp->warned ? STRATA_LOG_WARN : STRATA_LOG_DEBUG;
    if (rc == 0) {
        pp->reached = 1;
        pp->warned = 0;
    } else if (rc == STRATA_ETIMEDOUT && level == STRATA_LOG_WARN) {
        pp->warned = 1;
    }
    pthread_mutex_unlock(&p->peer[peer].lock);
    if (rc == STRATA_ETIMEDOUT)
        strz_log(c, level, "p2p: %s (%s) not reachable within %.1f s (not "
                 "running, or not taking messages)", c->name[peer],
                 c->addr[peer], ms / 1000.0);
    else if (rc == STRATA_EIO)
        strz_log(c, STRATA_LOG_ERROR, "p2p: send to %s (%s): %s",
                 c->name[peer], c->addr[peer], zmq_strerror(zmq_errno()));
    return rc;
}

/* ---- receiving ------------------------------------------------------ */

/* Frames of a message before its data: routing id (the ROUTER's),
 * zmq.so header, user header. */
#define P2P_HEAD 3

/* Read one part of the message under way. 0, STRATA_EAGAIN (none) or
 * STRATA_EIO; *more: another part follows. */
static int read_part(void *s, zmq_msg_t *m, int *more)
{
    zmq_msg_init(m);
    if (zmq_msg_recv(m, s, ZMQ_DONTWAIT) < 0) {
        int e = zmq_errno();
        zmq_msg_close(m);
        return e == EAGAIN ? STRATA_EAGAIN : STRATA_EIO;
    }
    *more = zmq_msg_more(m);
    return 0;
}

/* The first parts of the next message (up to P2P_HEAD) into part[];
 * *more: parts follow the last one read. 0 (*np parts to close),
 * STRATA_EAGAIN (no message), or STRATA_EIO (nothing to close; the rest
 * of the message, if any, is left). */
static int read_head(void *s, zmq_msg_t part[P2P_HEAD], int *np, int *more)
{
    *np = 0;
    *more = 1;
    while (*np < P2P_HEAD && *more) {
        int rc = read_part(s, &part[*np], more);
        if (rc != 0) {
            for (int i = 0; i < *np; i++)
                zmq_msg_close(&part[i]);
            rc = *np == 0 ? rc : STRATA_EIO;
            *np = 0;
            return rc;
        }
        ++*np;
    }
    return 0;
}

/* Why the head of a message (read_head) is not ours, or NULL when it is
 * well-formed; then h is its zmq.so header. */
static const char *check(const strz_p2p_t *p, zmq_msg_t part[P2P_HEAD],
                         int np, int more, strz_hdr_t *h)
{
    const char *why = NULL;
    if (np < P2P_HEAD || !more)
        return "fewer than 3 frames";
    size_t hl = zmq_msg_size(&part[2]), hsz = zmq_msg_size(&part[1]);
    /* The length field as sent (wire.h: offset 32, little-endian): the
     * data frames are counted against it as they are read. */
    const unsigned char *raw = zmq_msg_data(&part[1]);
    uint32_t len = hsz == STRZ_HDR_SIZE
                       ? (uint32_t)raw[32] | (uint32_t)raw[33] << 8
                             | (uint32_t)raw[34] << 16 | (uint32_t)raw[35] << 24
                       : 0;
    if (strz_wire_unpack(raw, hsz, len, h, &why) != 0)
        return why;
    if (h->type != STRZ_DATA || h->flags != STRZ_P2P_FLAG)
        return "not a point-to-point message";
    if ((uint32_t)h->aux != p->tag_hash)
        return "from another job (group tag differs)";
    if (h->sender < 0 || h->sender >= p->c->n)
        return "sender is not a member";
    if (h->offset != hl)
        return "header length field does not match its frame";
    if (h->length < hl)
        return "length field shorter than the user header";
    if ((int64_t)h->length > p->maxmsg - STRZ_HDR_SIZE)
        return "longer than window_bytes";
    /* Secured: the sender is whom the connection authenticated, and the
     * header must agree (a member cannot speak for another). */
    if (p->c->secure && strz_curve_member(p->c, &part[1]) != h->sender)
        return "sender field differs from the connection's authenticated "
               "member";
    return NULL;
}

/* The data frames of a message, after its head: each one copied to
 * dst + its offset (dst NULL: only checked), `dl` bytes in all. Every
 * frame of the message is read and closed, whatever they hold. NULL, or
 * why they do not make the data the header announced. */
static const char *read_data(void *s, char *dst, size_t dl)
{
    /* ceil(dl / chunk) frames, and one (empty) for no data */
    size_t most = dl ? (dl - 1) / STRZ_P2P_CHUNK + 1 : 1, frames = 0, got = 0;
    const char *why = NULL;
    int more = 1;
    while (more) {
        zmq_msg_t m;
        if (read_part(s, &m, &more) != 0)
            return why ? why : "incomplete message";
        size_t n = zmq_msg_size(&m);
        if (!why)
            why = ++frames > most ? "more data frames than its length needs"
                  : n > STRZ_P2P_CHUNK ? "a data frame longer than "
                                         "STRZ_P2P_CHUNK"
                  : n > dl - got ? "data frames longer than the length "
                                   "field says"
                  : NULL;
        if (!why && dst && n)
            memcpy(dst + got, zmq_msg_data(&m), n);
        got += why ? 0 : n;
        zmq_msg_close(&m);
    }
    if (!why && got != dl)
        why = "data frames shorter than the length field says";
    return why;
}

static void dropped(strz_p2p_t *p, zmq_msg_t *any, const char *why)
{
    unsigned long long n = atomic_fetch_add(&p->dropped, 1) + 1;
    if (n <= P2P_LOG_FIRST || n % P2P_LOG_EVERY == 0) {
        const char *a = any ? zmq_msg_gets(any, "Peer-Address") : NULL;
        strz_log(p->c, STRATA_LOG_WARN, "p2p: dropped a malformed message "
                 "from %s: %s (%llu so far)", a ? a : "(local)", why, n);
    }
}

int strz_p2p_recv(strz_p2p_t *p, int *peer, void *buf, size_t cap,
                  size_t *len, int timeout_ms)
{
    if (!p)
        return STRATA_ENOTSUP;
    if (!peer || !len || (cap && !buf))
        return STRATA_EINVAL;
    *peer = -1;
    *len = 0;
    int64_t until = strz_now_ms() + deadline_of(p, timeout_ms);
    int rc = STRATA_EAGAIN;
    pthread_mutex_lock(&p->rx_lock);
    while (rc == STRATA_EAGAIN) {
        zmq_msg_t part[P2P_HEAD];
        int np, more;
        if (atomic_load(&p->canceled)) {
            rc = STRATA_ECANCELED;
            break;
        }
        rc = read_head(p->rx, part, &np, &more);
        if (rc == STRATA_EAGAIN) {
            p2p_monitor(p);
            if ((rc = wait_sock(p, p->rx, ZMQ_POLLIN, until)) == 0)
                rc = STRATA_EAGAIN;
            continue;
        }
        if (rc != 0) {
            dropped(p, NULL, "incomplete message");
            rc = STRATA_EAGAIN;
            continue;
        }
        strz_hdr_t h;
        const char *why = check(p, part, np, more, &h);
        if (!why) {
            /* the user header, then the data frames at their offsets;
             * into buf only when it all fits */
            size_t hl = zmq_msg_size(&part[2]);
            int fits = h.length <= cap && buf; /* cap 0: buf may be NULL */
            if (fits && hl)
                memcpy(buf, zmq_msg_data(&part[2]), hl);
            why = read_data(p->rx, fits ? (char *)buf + hl : NULL,
                            h.length - hl);
            more = 0;
        }
        if (why) {
            dropped(p, np > 1 ? &part[1] : &part[0], why);
            rc = STRATA_EAGAIN;
        } else if (h.length > cap) {
            *peer = h.sender;
            dropped(p, &part[1], "longer than the receiver's buffer");
            rc = STRATA_EPROTO;
        } else {
            *peer = h.sender;
            *len = h.length;
            rc = 0;
        }
        if (more)
            (void)read_data(p->rx, NULL, 0); /* a bad head's other frames */
        for (int i = 0; i < np; i++)
            zmq_msg_close(&part[i]);
    }
    pthread_mutex_unlock(&p->rx_lock);
    return rc;
}
