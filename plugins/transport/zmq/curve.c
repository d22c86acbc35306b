/* zmq.so -- CURVE: every connection of a secured group (the core handed
 * the group its members' public keys) is authenticated and encrypted by
 * libzmq's CurveZMQ. Each member's ROUTER is a CURVE server; its DEALERs are
 * clients that know the public key of the server they dial. Who may connect
 * is decided by a ZAP handler (ZeroMQ RFC 27) on the member's zmq context:
 * a client whose public key is one of the group's is admitted with its
 * task name as User-Id, which every received message carries
 * (zmq_msg_gets "User-Id") -- a message's sender is that identity, never a
 * field of the message. Any other key is refused during the handshake,
 * counted and logged (rate-limited, with its address): it never reaches
 * the plugin.
 *
 * The handler runs in a thread of its own that polls with a short timeout,
 * so that stopping it is bounded. It must run before a server socket
 * accepts anything: libzmq admits every client of a CURVE server when no
 * handler is bound. */
#include "strz.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define ZAP_POLL_MS  100
#define LOG_FIRST    10   /* refusals logged one by one, then           */
#define LOG_EVERY    1000 /* one line per this many                     */

struct strz_zap {
    strz_ctx_t *c;
    void       *sock;      /* REP bound to ZAP_ENDPOINT                  */
    pthread_t   thread;
    atomic_int  stop;
    int         started;
};

int strz_curve_take(strz_ctx_t *c, const strata_group_t *g)
{
    if (!STRATA_HAS_FIELD(strata_group_t, g, public_keys) || !g->public_keys)
        return 0;
    if (!g->secret_key || strlen(g->secret_key) != 40 || !zmq_has("curve")) {
        strz_log(c, STRATA_LOG_ERROR, "%s", g->secret_key
                 ? "this libzmq has no CURVE (build it with libsodium)"
                 : "a secured group without this member's secret key");
        return STRATA_EINVAL;
    }
    c->pub = calloc((size_t)c->n, sizeof *c->pub);
    if (!c->pub)
        return STRATA_ENOMEM;
    for (int i = 0; i < c->n; i++) {
        if (!g->public_keys[i] || strlen(g->public_keys[i]) != 40) {
            strz_log(c, STRATA_LOG_ERROR, "public key of %s is not 40 "
                     "characters of Z85", c->name[i]);
            return STRATA_EINVAL;
        }
        memcpy(c->pub[i], g->public_keys[i], 41);
    }
    memcpy(c->sec, g->secret_key, 41);
    c->secure = 1;
    return 0;
}

void strz_curve_forget(strz_ctx_t *c)
{
    memset(c->sec, 0, sizeof c->sec);
    free(c->pub);
    c->pub = NULL;
}

static int setopt(strz_ctx_t *c, void *s, int name, const void *v,
                  size_t len, const char *what)
{
    if (zmq_setsockopt(s, name, v, len) == 0)
        return 0;
    strz_log(c, STRATA_LOG_ERROR, "zmq_setsockopt(%s): %s", what,
             zmq_strerror(zmq_errno()));
    return STRATA_EINTERNAL;
}

int strz_curve_server(strz_ctx_t *c, void *s)
{
    int one = 1;
    if (!c->secure)
        return 0;
    return setopt(c, s, ZMQ_CURVE_SERVER, &one, sizeof one, "CURVE_SERVER")
           || setopt(c, s, ZMQ_CURVE_SECRETKEY, c->sec, 41, "CURVE_SECRETKEY")
           || setopt(c, s, ZMQ_ZAP_DOMAIN, "strata", 6, "ZAP_DOMAIN")
               ? STRATA_EINTERNAL : 0;
}

int strz_curve_client(strz_ctx_t *c, void *s, int peer)
{
    if (!c->secure)
        return 0;
    return setopt(c, s, ZMQ_CURVE_SERVERKEY, c->pub[peer], 41,
                  "CURVE_SERVERKEY")
           || setopt(c, s, ZMQ_CURVE_PUBLICKEY, c->pub[c->rank], 41,
                     "CURVE_PUBLICKEY")
           || setopt(c, s, ZMQ_CURVE_SECRETKEY, c->sec, 41, "CURVE_SECRETKEY")
               ? STRATA_EINTERNAL : 0;
}

int strz_curve_member(const strz_ctx_t *c, zmq_msg_t *m)
{
    const char *who = c->secure ? zmq_msg_gets(m, "User-Id") : NULL;
    for (int i = 0; who && i < c->n; i++)
        if (strcmp(c->name[i], who) == 0)
            return i;
    return -1;
}

unsigned long long strz_stranger_count(strz_ctx_t *c, int kind)
{
    atomic_fetch_add(&c->sk[kind], 1);
    return atomic_fetch_add(&c->strangers, 1) + 1;
}

/* The rate-limited warning of the one counted n-th: the first LOG_FIRST,
 * then every LOG_EVERY-th. */
static void stranger_log(strz_ctx_t *c, unsigned long long n,
                         const char *what, const char *from, const char *why)
{
    if (n <= LOG_FIRST || n % LOG_EVERY == 0)
        strz_log(c, STRATA_LOG_WARN, "dropped %s %s: %s (%llu so far; the job "
                 "goes on)", what, from ? from : "?", why, n);
}

void strz_stranger_warn(strz_ctx_t *c, unsigned long long n,
                        const char *what, const char *from, const char *why)
{
    stranger_log(c, n, what, from, why);
}

void strz_stranger(strz_ctx_t *c, int kind, const char *what,
                   const char *from, const char *why)
{
    stranger_log(c, strz_stranger_count(c, kind), what, from, why);
}

/* "ip:port" of fd's peer, or "" (closed already, or not a socket). */
static void peer_name(int fd, char *out, size_t n)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char host[INET6_ADDRSTRLEN] = "";
    out[0] = '\0';
    if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0)
        return;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        if (inet_ntop(AF_INET, &a->sin_addr, host, sizeof host))
            snprintf(out, n, "%s:%u", host, (unsigned)ntohs(a->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        if (inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host))
            snprintf(out, n, "[%s]:%u", host, (unsigned)ntohs(a->sin6_port));
    }
}

static const char *k_failed_why[STRZ_SK_N] = {
    [STRZ_SK_EARLY] = "closed before its handshake",
};

/* The warning of a handshake failure that waited for its DISCONNECTED:
 * from the peer `from` when known, else to the listening endpoint. */
static void pending_warn(strz_ctx_t *c, const char *from)
{
    strz_peers_t *pe = &c->peers;
    int kind = pe->pending - 1;
    pe->pending = 0;
    const char *why = kind == STRZ_SK_GARBAGE
                          ? (c->secure ? "its handshake failed (not a CURVE "
                                         "client of this job, or not ZeroMQ "
                                         "at all)"
                                       : "its handshake failed (not ZeroMQ)")
                          : k_failed_why[kind];
    char to[160];
    snprintf(to, sizeof to, "%s (the peer was gone before its address "
             "was read)", pe->pending_where);
    strz_stranger_warn(c, pe->pending_n, from && from[0] ? "a connection from"
                                                : "a connection to",
                       from && from[0] ? from : to, why);
}

/* A handshake's result (no fd): the waiting connection's when it is the
 * only one, else every waiting one's fate is unknown. */
static void handshake_result(strz_peers_t *pe)
{
    int waiting = 0, at = -1;
    for (int i = 0; i < STRZ_PEERS; i++)
        if (pe->hs[i] == STRZ_HS_WAITING)
            waiting++, at = i;
    for (int i = 0; waiting > 1 && i < STRZ_PEERS; i++)
        if (pe->hs[i] == STRZ_HS_WAITING)
            pe->hs[i] = STRZ_HS_UNKNOWN;
    if (waiting == 1)
        pe->hs[at] = STRZ_HS_NONE;
}

void strz_monitor_event(strz_ctx_t *c, int id, uint32_t value,
                        const char *where)
{
    strz_peers_t *pe = &c->peers;
    int slot = (int)(value % STRZ_PEERS);
    if (pe->pending && id != ZMQ_EVENT_DISCONNECTED)
        pending_warn(c, NULL); /* its DISCONNECTED did not come next */
    if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED ||
        id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH ||
        id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL ||
        id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
        handshake_result(pe);
    if (id == ZMQ_EVENT_ACCEPTED) {
        atomic_fetch_add(&c->accepted, 1);
        pe->fd1[slot] = (int)value + 1;
        pe->hs[slot] = STRZ_HS_WAITING;
        peer_name((int)value, pe->addr[slot], sizeof pe->addr[slot]);
    } else if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
        atomic_fetch_add(&c->handshaken, 1);
    } else if (id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
        atomic_fetch_add(&c->auth_failed, 1); /* ZAP counted it */
    } else if (id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL ||
               id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) { /* the ring's */
        /* Counted now; named when libzmq's DISCONNECTED, which follows
         * at once, tells the fd. */
        int kind = id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL
                       ? STRZ_SK_EARLY : STRZ_SK_GARBAGE;
        pe->pending_n = strz_stranger_count(c, kind);
        pe->pending = kind + 1;
        snprintf(pe->pending_where, sizeof pe->pending_where, "%s",
                 where ? where : "?");
    } else if (id == ZMQ_EVENT_DISCONNECTED) {
        int known = pe->fd1[slot] == (int)value + 1;
        if (pe->pending)
            pending_warn(c, known ? pe->addr[slot] : NULL);
        else if (known && pe->hs[slot] == STRZ_HS_WAITING) {
            /* it ended without any handshake result: garbage, or a
             * ZeroMQ peer of another mechanism (counted as the summary
             * would count it) */
            char to[160];
            snprintf(to, sizeof to, "%s (the peer was gone before its "
                     "address was read)", where ? where : "?");
            strz_stranger(c, STRZ_SK_GARBAGE, pe->addr[slot][0]
                              ? "a connection from" : "a connection to",
                          pe->addr[slot][0] ? pe->addr[slot] : to,
                          c->secure ? "no handshake (not ZeroMQ, or not "
                                      "CURVE)"
                                    : "no handshake (not ZeroMQ, or "
                                      "another mechanism)");
        }
        if (known) {
            pe->fd1[slot] = 0;
            pe->hs[slot] = STRZ_HS_NONE;
        }
    }
}

void strz_strangers_count(strz_ctx_t *c, uint64_t p2p_dropped,
                          unsigned long long out[STRZ_SK_N])
{
    for (int k = 0; k < STRZ_SK_N; k++)
        out[k] = atomic_load(&c->sk[k]);
    /* Connections that neither completed a handshake nor were refused by
     * ZAP or closed before one: garbage (an HTTP request), another
     * mechanism (strz.h says why they are not told apart). */
    unsigned long long acc = atomic_load(&c->accepted),
                       known = atomic_load(&c->handshaken) +
                               atomic_load(&c->auth_failed) +
                               out[STRZ_SK_EARLY] + out[STRZ_SK_GARBAGE];
    if (acc > known)
        out[STRZ_SK_GARBAGE] += acc - known;
    out[STRZ_SK_MESSAGE] += p2p_dropped;
}

void strz_strangers_summary(strz_ctx_t *c, uint64_t p2p_dropped)
{
    if (c->peers.pending)
        pending_warn(c, NULL);
    unsigned long long k[STRZ_SK_N], n = 0;
    strz_strangers_count(c, p2p_dropped, k);
    for (int i = 0; i < STRZ_SK_N; i++)
        n += k[i];
    if (n == 0)
        return;
    strz_log(c, STRATA_LOG_WARN, "%llu message%s or connection%s from outside "
             "the job %s dropped: %llu refused by their key, %llu closed "
             "before a handshake, %llu not ZeroMQ or of another mechanism, "
             "%llu messages", n, n == 1 ? "" : "s",
             n == 1 ? "" : "s", n == 1 ? "was" : "were", k[STRZ_SK_KEY],
             k[STRZ_SK_EARLY], k[STRZ_SK_GARBAGE], k[STRZ_SK_MESSAGE]);
}

/* ---- the ZAP handler --------------------------------------------------- */

/* One request (frames: version, request id, domain, address, identity,
 * mechanism, credentials...) answered with 200 and the member's name, or
 * 400. */
static void zap_answer(struct strz_zap *z)
{
    zmq_msg_t f[8];
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t spare, *m = n < 8 ? &f[n] : &spare;
        zmq_msg_init(m);
        if (zmq_msg_recv(m, z->sock, 0) < 0) {
            zmq_msg_close(m);
            for (int i = 0; i < n; i++)
                zmq_msg_close(&f[i]);
            return;
        }
        more = zmq_msg_more(m);
        if (m == &spare)
            zmq_msg_close(m);
        else
            n++;
    }
    strz_ctx_t *c = z->c;
    const char *status = "400", *text = "unknown key", *user = "";
    char key[41] = "", addr[64] = "?";
    if (n >= 3) {
        size_t al = zmq_msg_size(&f[3 < n ? 3 : 0]);
        snprintf(addr, sizeof addr, "%.*s", (int)(al < 63 ? al : 63),
                 (const char *)zmq_msg_data(&f[3 < n ? 3 : 0]));
    }
    int curve = n >= 7 && zmq_msg_size(&f[5]) == 5 &&
                memcmp(zmq_msg_data(&f[5]), "CURVE", 5) == 0 &&
                zmq_msg_size(&f[6]) == 32;
    if (curve && zmq_z85_encode(key, zmq_msg_data(&f[6]), 32)) {
        for (int i = 0; i < c->n; i++)
            if (strcmp(key, c->pub[i]) == 0) {
                status = "200";
                text = "OK";
                user = c->name[i];
                break;
            }
    } else {
        text = "not a CURVE client";
    }
    if (status[0] != '2')
        strz_stranger(c, STRZ_SK_KEY, "a connection from", addr, curve ? "its CURVE key is not one of this "
                      "job's (refused by ZAP)" : "not a CURVE client "
                      "(refused by ZAP)");
    /* Reply: version, request id, status code, status text, user id,
     * metadata. */
    const char *frames[6] = { "1.0", NULL, status, text, user, "" };
    for (int i = 0; i < 6; i++) {
        const void *d = frames[i];
        size_t len = d ? strlen(frames[i]) : 0;
        if (i == 1) {
            d = n > 1 ? zmq_msg_data(&f[1]) : "";
            len = n > 1 ? zmq_msg_size(&f[1]) : 0;
        }
        if (zmq_send(z->sock, d, len, i < 5 ? ZMQ_SNDMORE : 0) < 0)
            break;
    }
    for (int i = 0; i < n; i++)
        zmq_msg_close(&f[i]);
}

static void *zap_main(void *arg)
{
    struct strz_zap *z = arg;
    while (!atomic_load(&z->stop)) {
        zmq_pollitem_t it = { .socket = z->sock, .events = ZMQ_POLLIN };
        int r = zmq_poll(&it, 1, ZAP_POLL_MS);
        if (r < 0 && zmq_errno() == ETERM)
            break;
        if (r > 0)
            zap_answer(z);
    }
    zmq_close(z->sock);
    return NULL;
}

int strz_zap_start(strz_ctx_t *c, void *zctx, struct strz_zap **out)
{
    *out = NULL;
    if (!c->secure)
        return 0;
    struct strz_zap *z = calloc(1, sizeof *z);
    if (!z)
        return STRATA_ENOMEM;
    z->c = c;
    atomic_init(&z->stop, 0);
    int linger = 0;
    z->sock = zmq_socket(zctx, ZMQ_REP);
    if (!z->sock || zmq_setsockopt(z->sock, ZMQ_LINGER, &linger, sizeof linger)
        || zmq_bind(z->sock, ZAP_ENDPOINT) != 0) {
        strz_log(c, STRATA_LOG_ERROR, "ZAP handler: %s",
                 zmq_strerror(zmq_errno()));
        if (z->sock)
            zmq_close(z->sock);
        free(z);
        return STRATA_EINTERNAL;
    }
    if (pthread_create(&z->thread, NULL, zap_main, z) != 0) {
        strz_log(c, STRATA_LOG_ERROR, "ZAP handler: cannot start its thread");
        zmq_close(z->sock);
        free(z);
        return STRATA_EINTERNAL;
    }
    z->started = 1;
    *out = z;
    return 0;
}

void strz_zap_stop(struct strz_zap *z)
{
    if (!z)
        return;
    atomic_store(&z->stop, 1);
    if (z->started)
        pthread_join(z->thread, NULL);
    free(z);
}
