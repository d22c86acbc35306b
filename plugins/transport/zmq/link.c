/* zmq.so -- the links of the ring: sockets, options (deadlines,
 * heartbeats, limits), monitors and the HELLO rendezvous.
 *
 * Each rank binds a ROUTER (rx) on its own address and connects a DEALER
 * (tx) to its right neighbour's ROUTER. Data flows rightwards: tx -> right's
 * rx. HELLO_ACK and leftward ABORTs come back over the same connection
 * (right's rx -> our tx). A stranger can reach rx too: in a secured group
 * (curve.c) its handshake fails unless its key is the job's; in plaintext,
 * what it sends is dropped and counted (strz_stranger), never fatal. Each
 * member binds the address it was given, and only that one.
 *
 * With `direct = auto` on tcp the collectives' data take plain TCP sockets
 * instead (direct.c), set up inside the same HELLO exchange.
 *
 * Every socket carries ZMTP heartbeats (a silent peer is dropped after 3
 * intervals, which the monitors report), a bounded LINGER and SNDTIMEO, a
 * MAXMSGSIZE of one segment and a send high-water mark of window_bytes
 * (common_opts says why there is no receive one). */
#include "strz.h"
#include "aead.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int64_t strz_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t strz_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A number no other process picks (getrandom; else the clock, the pid and
 * salt's address, mixed), never 0. */
uint64_t strz_nonce(const void *salt)
{
    uint64_t x = 0;
    if (getrandom(&x, sizeof x, GRND_NONBLOCK) != (ssize_t)sizeof x) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30)
            ^ ((uint64_t)getpid() << 17) ^ (uint64_t)(uintptr_t)salt;
    }
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x ? x : 1;
}

int strz_may_spin(const strz_ctx_t *c)
{
    return sysconf(_SC_NPROCESSORS_ONLN) >= c->n;
}

void strz_close_sock(void **s, void **mon)
{
    if (*s != NULL)
        (void)zmq_socket_monitor(*s, NULL, 0);
    if (*mon != NULL)
        zmq_close(*mon);
    if (*s != NULL)
        zmq_close(*s);
    *s = NULL;
    *mon = NULL;
}

/* ---- rendezvous ------------------------------------------------------ */

/* A HELLO (or anything else) arriving at rx before the left neighbour said
 * hello. Returns 0 (nothing / accepted), or a reported error. */
static int hello_rx(strz_ctx_t *c)
{
    zmq_msg_t part[3];
    int np, extra;
    const char *why = NULL;
    strz_hdr_t h;
    char w[320];
    int comp_differs = 0;

    int rc = strz_read_parts(c->rx, part, 3, &np, &extra);
    if (rc == STRATA_EAGAIN)
        return 0;
    if (rc < 0)
        return strz_fail(c, STRATA_EIO, c->rank, "receive: %s",
                         zmq_strerror(-rc));
    char from[64];
    strz_peer_address(&part[np > 1 ? 1 : 0], from, sizeof from);
    w[0] = '\0';
    int framed = strz_unpack_parts(part, np, 1, extra, &h, &why) == 0;
    /* A secured HELLO that asks for a direct data socket ends with the
     * left's key for it (after the tag): CURVE authenticated it. */
    size_t pk_len = framed && c->secure && (h.flags & STRZ_HELLO_DIRECT)
                    ? STRZ_KX_PK : 0;
    size_t tag_len = framed && h.length >= pk_len ? h.length - pk_len
                                                  : (size_t)-1;
    int our_tag = framed && tag_len == strlen(c->tag) /* payload - key */
                  && (tag_len == 0
                      || memcmp(zmq_msg_data(&part[2]), c->tag, tag_len) == 0);
    unsigned char left_pk[STRZ_KX_PK], pk[STRZ_KX_PK];
    if (our_tag && pk_len)
        memcpy(left_pk, (const char *)zmq_msg_data(&part[2]) + tag_len,
               pk_len);
    /* Whose message is it? In a secured group only members get this far
     * (ZAP): a member that breaks the protocol is a configuration error
     * of the job. In plaintext, only a HELLO with this job's tag is the
     * job's; anything else is a stranger's, dropped. */
    int ours = c->secure ? strz_curve_member(c, &part[1]) >= 0
                         : our_tag && h.type == STRZ_HELLO;
    if (!framed)
        snprintf(w, sizeof w, "%s", why);
    else if (h.type != STRZ_HELLO)
        snprintf(w, sizeof w, "%s before HELLO", strz_wire_type_name(h.type));
    else if (h.sender != c->left)
        snprintf(w, sizeof w, "HELLO from rank %d, expected the left "
                 "neighbour %d (addresses in a different order?)",
                 (int)h.sender, (int)c->left);
    else if (h.aux != c->n)
        snprintf(w, sizeof w, "HELLO for a group of %d, this one has %d",
                 (int)h.aux, (int)c->n);
    else if (!our_tag)
        snprintf(w, sizeof w, "HELLO from another job (tag differs from "
                 "'%.96s')", c->tag);
    else if ((comp_differs = ((h.flags >> STRZ_HELLO_COMP_SHIFT)
                              & STRZ_COMP_MASK)
                             != (unsigned)c->cfg.compression))
        snprintf(w, sizeof w, "%s (%s) sends gradients with compression = "
                 "%s, this member with %s: [transport.zmq] compression must "
                 "be the same on every member", c->name[c->left],
                 c->addr[c->left],
                 strz_comp_name((h.flags >> STRZ_HELLO_COMP_SHIFT)
                                & STRZ_COMP_MASK),
                 strz_comp_name(c->cfg.compression));
    else if (c->secure && strz_curve_member(c, &part[1]) != c->left)
        snprintf(w, sizeof w, "HELLO of rank %d from a connection "
                 "authenticated as another member", (int)h.sender);
    if (w[0] && !ours) {
        strz_close_parts(part, np);
        strz_stranger(c, STRZ_SK_MESSAGE, "a message from", from, w);
        return 0;
    }
    size_t idlen = zmq_msg_size(&part[0]);
    if (w[0] && !comp_differs) {
        strz_close_parts(part, np);
        return strz_fail(c, STRATA_EPROTO, c->rank,
                         "message from %s refused: %s", from, w);
    }
    if (idlen == 0 || idlen > sizeof c->left_id) {
        strz_close_parts(part, np);
        return strz_fail(c, STRATA_EPROTO, c->rank, "bad routing id from %s",
                         from);
    }
    memcpy(c->left_id, zmq_msg_data(&part[0]), idlen);
    c->left_id_len = idlen;
    c->left_fd = zmq_msg_get(&part[1], ZMQ_SRCFD);
    strz_close_parts(part, np);
    if (comp_differs) /* the left is the job's: its ABORT tells it at once */
        return strz_fail(c, STRATA_EPROTO, c->rank,
                         "message from %s refused: %s", from, w);

    /* The left wants a direct data socket: offer one if we want it too. */
    int port = 0;
    uint64_t token = 0;
    if ((h.flags & STRZ_HELLO_DIRECT) && strz_direct_wanted(c)
        && (!c->secure || pk_len))
        (void)strz_direct_listen(c, &port, &token, left_pk, pk);
    /* Secured, an offer carries our key for the link. */
    size_t ack_pk = c->secure && port > 0 ? sizeof pk : 0;
    strz_hdr_t ack = { .type = STRZ_HELLO_ACK, .sender = c->rank,
                       .aux = c->n, .offset = (uint64_t)port,
                       .total = token, .length = (uint32_t)ack_pk };
    unsigned char hb[STRZ_HDR_SIZE];
    strz_wire_pack(&ack, hb);
    if (zmq_send(c->rx, c->left_id, idlen, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0
        || zmq_send(c->rx, hb, sizeof hb,
                    (ack_pk ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0
        || (ack_pk && zmq_send(c->rx, pk, ack_pk, ZMQ_DONTWAIT) < 0))
        return strz_fail(c, STRATA_EPEER, c->left,
                         "cannot answer HELLO of %s (%s): %s",
                         c->name[c->left], c->addr[c->left],
                         zmq_strerror(zmq_errno()));
    return 0;
}

/* ---- opening and closing -------------------------------------------- */

static int opt(strz_ctx_t *c, void *s, int name, const void *v, size_t len,
               const char *what)
{
    if (zmq_setsockopt(s, name, v, len) == 0)
        return 0;
    strz_log(c, STRATA_LOG_ERROR, "zmq_setsockopt(%s): %s", what,
             zmq_strerror(zmq_errno()));
    return STRATA_EINTERNAL;
}

static int opt_int(strz_ctx_t *c, void *s, int name, int v, const char *what)
{
    return opt(c, s, name, &v, sizeof v, what);
}

static int common_opts(strz_ctx_t *c, void *s)
{
    int hb = (int)c->cfg.heartbeat_ms;
    int64_t seg_bytes = (int64_t)(c->seg * sizeof(float));
    /* CURVE frames carry their nonce and MAC on top of the payload. */
    int64_t maxmsg = (seg_bytes > 4096 ? seg_bytes : 4096) + STRZ_CURVE_SLACK;
    int hwm = (int)(c->cfg.window_bytes / seg_bytes);
    int rc = 0;

    if (hwm < 4)
        hwm = 4;
    rc |= opt_int(c, s, ZMQ_LINGER, (int)c->cfg.linger_ms, "LINGER");
    rc |= opt(c, s, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg, "MAXMSGSIZE");
    rc |= opt_int(c, s, ZMQ_HEARTBEAT_IVL, hb, "HEARTBEAT_IVL");
    rc |= opt_int(c, s, ZMQ_HEARTBEAT_TIMEOUT, 3 * hb, "HEARTBEAT_TIMEOUT");
    rc |= opt_int(c, s, ZMQ_HEARTBEAT_TTL, 3 * hb > 6553599 ? 6553599 : 3 * hb,
                  "HEARTBEAT_TTL");
    rc |= opt_int(c, s, ZMQ_SNDHWM, hwm, "SNDHWM");
    /* No receive limit: libzmq 4.3.4 stops reading a connection whose
     * receive queue is full, so the ZMTP PINGs behind the data go
     * unanswered -- the sender declared a member that computes for 3
     * heartbeats dead -- and if that connection then closes, libzmq aborts
     * the process at its next heartbeat (libzmq issue #4841). What a
     * receiver holds is bounded by the collective in progress instead: the
     * ring's members run about a step's chunk ahead of what they have
     * received, a broadcast's root streams its whole buffer. */
    rc |= opt_int(c, s, ZMQ_RCVHWM, 0, "RCVHWM");
    rc |= opt_int(c, s, ZMQ_SNDTIMEO, (int)c->timeout_ms, "SNDTIMEO");
    /* A connection that does not finish its handshake in time is dropped:
     * a flood of idle connections cannot pile up. */
    rc |= opt_int(c, s, ZMQ_HANDSHAKE_IVL, STRZ_HANDSHAKE_MS, "HANDSHAKE_IVL");
    if (c->ipv6)
        rc |= opt_int(c, s, ZMQ_IPV6, 1, "IPV6");
    return rc ? STRATA_EINTERNAL : 0;
}

/* A "tcp://name:port" that is not an interface or literal address: bind the
 * address the name resolves to -- never every interface. */
static int bind_resolved(strz_ctx_t *c, const char *ep)
{
    char host[256], ep2[320], num[NI_MAXHOST];
    const char *colon = strrchr(ep, ':');
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;

    if (strncmp(ep, "tcp://", 6) != 0 || colon == NULL
        || (size_t)(colon - ep - 6) >= sizeof host)
        return -1;
    memcpy(host, ep + 6, (size_t)(colon - ep - 6));
    host[colon - ep - 6] = '\0';
    if (getaddrinfo(host, NULL, &hints, &ai) == 0) {
        for (struct addrinfo *a = ai; a; a = a->ai_next) {
            if (getnameinfo(a->ai_addr, a->ai_addrlen, num, sizeof num, NULL,
                            0, NI_NUMERICHOST) != 0)
                continue;
            snprintf(ep2, sizeof ep2, a->ai_family == AF_INET6
                     ? "tcp://[%s]%s" : "tcp://%s%s", num, colon);
            if (zmq_bind(c->rx, ep2) == 0) {
                freeaddrinfo(ai);
                return 0;
            }
        }
        freeaddrinfo(ai);
    }
    return -1;
}

/* An ipc:// socket file is reachable by whoever may write it: ours only. */
static int private_ipc(strz_ctx_t *c, const char *ep)
{
    if (strncmp(ep, "ipc://", 6) != 0 || chmod(ep + 6, 0600) == 0)
        return 0;
    strz_log(c, STRATA_LOG_ERROR, "cannot make %s private (chmod 600): %s",
             ep + 6, strerror(errno));
    return STRATA_EIO;
}

static int monitor(strz_ctx_t *c, void *s, const char *which, void **mon)
{
    char ep[96];
    snprintf(ep, sizeof ep, "inproc://strz-%p-%s", (void *)c, which);
    /* rx also reports connections that fail their handshake: strangers
     * (those refused by ZAP are counted by the handler itself), each named
     * as it comes -- HANDSHAKE_FAILED_PROTOCOL too on the ring, where it
     * names a task started with another job's keys (strz.h says why ps's
     * point-to-point port does without it). */
    int events = ZMQ_EVENT_DISCONNECTED;
    if (s == c->rx)
        events |= STRZ_MONITOR_EVENTS | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL;
    if (zmq_socket_monitor(s, ep, events) != 0
        || (*mon = zmq_socket(c->zctx, ZMQ_PAIR)) == NULL
        || opt_int(c, *mon, ZMQ_LINGER, 0, "LINGER") != 0
        /* every event kept until read (the default 1000 dropped the rest
         * of a flood of strangers uncounted) */
        || opt_int(c, *mon, ZMQ_RCVHWM, 0, "RCVHWM") != 0
        || zmq_connect(*mon, ep) != 0) {
        strz_log(c, STRATA_LOG_ERROR, "socket monitor: %s",
                 zmq_strerror(zmq_errno()));
        return STRATA_EINTERNAL;
    }
    return 0;
}

static int make_pipe(strz_ctx_t *c, int fd[2])
{
    if (pipe2(fd, O_NONBLOCK | O_CLOEXEC) == 0)
        return 0;
    strz_log(c, STRATA_LOG_ERROR, "pipe: %s", strerror(errno));
    return STRATA_EIO;
}

static int open_sockets(strz_ctx_t *c)
{
    const char *self = c->ep[c->rank];
    char id[64];

    for (int i = 0; i < c->n; i++)
        if (strchr(c->ep[i], '[') != NULL)
            c->ipv6 = 1;
    if (make_pipe(c, c->wake) || make_pipe(c, c->zc_pipe))
        return STRATA_EIO;
    if ((c->zctx = zmq_ctx_new()) == NULL
        || zmq_ctx_set(c->zctx, ZMQ_IO_THREADS, (int)c->cfg.io_threads) != 0) {
        strz_log(c, STRATA_LOG_ERROR, "zmq context: %s",
                 zmq_strerror(zmq_errno()));
        return STRATA_EINTERNAL;
    }
    if (strz_zap_start(c, c->zctx, &c->zap) != 0)
        return STRATA_EINTERNAL;
    c->rx = zmq_socket(c->zctx, ZMQ_ROUTER);
    c->tx = zmq_socket(c->zctx, ZMQ_DEALER);
    if (c->rx == NULL || c->tx == NULL) {
        strz_log(c, STRATA_LOG_ERROR, "zmq_socket: %s",
                 zmq_strerror(zmq_errno()));
        return STRATA_EINTERNAL;
    }
    /* The rank and a nonce: a ROUTER ignores a second connection with a
     * routing id it has, so with "strz:RANK" alone a process of another
     * job, still reconnecting to a port this member now has, took the
     * left's id first and the left's HELLO was never read (a test run's
     * rendezvous timed out so, "DATA before HELLO" from 127.0.0.1). */
    snprintf(id, sizeof id, "strz:%d.%016llx", (int)c->rank,
             (unsigned long long)strz_nonce(c));
    if (common_opts(c, c->rx) || common_opts(c, c->tx)
        || strz_curve_server(c, c->rx)
        || strz_curve_client(c, c->tx, c->right)
        || opt_int(c, c->rx, ZMQ_ROUTER_MANDATORY, 1, "ROUTER_MANDATORY")
        || opt(c, c->tx, ZMQ_ROUTING_ID, id, strlen(id), "ROUTING_ID")
        || opt_int(c, c->tx, ZMQ_IMMEDIATE, 1, "IMMEDIATE"))
        return STRATA_EINTERNAL;
    /* The monitors before the bind: every connection accepted is seen
     * accepted (strangers are what is accepted and not accounted for). */
    if (monitor(c, c->rx, "rx", &c->mon_rx) || monitor(c, c->tx, "tx", &c->mon_tx))
        return STRATA_EINTERNAL;
    if (zmq_bind(c->rx, self) != 0) {
        int e = zmq_errno();
        if ((e != ENODEV && e != EINVAL) || bind_resolved(c, self) != 0) {
            strz_log(c, STRATA_LOG_ERROR, "cannot listen on %s (%s, %s): %s",
                     self, c->name[c->rank], c->addr[c->rank],
                     zmq_strerror(e));
            return STRATA_EIO;
        }
    }
    if (private_ipc(c, self) != 0)
        return STRATA_EIO;
    if (zmq_connect(c->tx, c->ep[c->right]) != 0) {
        strz_log(c, STRATA_LOG_ERROR, "cannot connect to %s (%s): %s",
                 c->name[c->right], c->ep[c->right], zmq_strerror(zmq_errno()));
        return STRATA_EIO;
    }
    return 0;
}

int strz_link_open(strz_ctx_t *c, int64_t deadline)
{
    int rc, sent = 0;

    c->what = "rendezvous";
    c->left_fd = -1;
    if ((rc = open_sockets(c)) != 0)
        return rc;
    /* The HELLO's payload: the job tag, and (secured, direct wanted) our
     * key for the data connection to the right. */
    unsigned char hello[STRZ_MAX_TAG + STRZ_KX_PK];
    size_t tl = strlen(c->tag), hl = tl;
    memcpy(hello, c->tag, tl);
    if (c->secure && strz_direct_wanted(c)) {
        if ((rc = strz_direct_hello_key(c, hello + tl)) != 0)
            return rc;
        hl += STRZ_KX_PK;
    }
    strz_hdr_t h = { .type = STRZ_HELLO, .sender = c->rank, .aux = c->n,
                     .length = (uint32_t)hl,
                     .flags = (uint8_t)((strz_direct_wanted(c)
                                         ? STRZ_HELLO_DIRECT : 0)
                                        | c->cfg.compression
                                          << STRZ_HELLO_COMP_SHIFT) };
    for (;;) {
        if (!sent) {
            rc = strz_send(c, &h, hello);
            if (rc == 0)
                sent = 1;
            else if (rc != STRATA_EAGAIN)
                return rc;
        }
        /* Stop reading rx once the left said hello: what follows belongs
         * to the first collective. */
        if (c->left_id_len == 0 && (rc = hello_rx(c)) != 0)
            return rc;
        if (sent && c->right_up && c->left_id_len > 0)
            break;
        rc = strz_wait(c, (c->left_id_len == 0 ? STRZ_W_IN : 0)
                          | (sent ? 0 : STRZ_W_OUT), deadline);
        if (rc)
            return rc;
    }
    if ((rc = strz_direct_open(c, c->right_dport, c->right_dtoken,
                               c->right_dpk_ok ? c->right_dpk : NULL,
                               deadline)) != 0)
        return rc;
    c->running = 1;
    return strz_shm_setup(c, deadline);
}

void strz_link_close(strz_ctx_t *c)
{
    /* zmq first: zmq_ctx_term() waits (up to linger_ms) until what is
     * queued, an ABORT above all, went out. Only then may the direct
     * sockets close: their EOF is what the neighbours notice first, and
     * the ABORT must be there before it. zmq also lets go of any buffer
     * (gather landing) it still referenced. */
    strz_close_sock(&c->tx, &c->mon_tx);
    strz_close_sock(&c->rx, &c->mon_rx);
    strz_zap_stop(c->zap); /* its socket too must close before the term */
    c->zap = NULL;
    if (c->zctx) {
        while (zmq_ctx_term(c->zctx) != 0 && zmq_errno() == EINTR) {
        }
        c->zctx = NULL;
    }
    strz_direct_close(c);
    strz_shm_close(c);
    strz_ring_free(c);
    for (int i = 0; i < 2; i++) {
        if (c->wake[i] >= 0)
            close(c->wake[i]);
        if (c->zc_pipe[i] >= 0)
            close(c->zc_pipe[i]);
        c->wake[i] = c->zc_pipe[i] = -1;
    }
}
