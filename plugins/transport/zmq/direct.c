/* zmq.so -- direct data sockets: the collectives' bytes on plain TCP
 * connections beside the zmq links, which keep the control plane (HELLO,
 * heartbeats, ABORT, PROBE).
 *
 * Why. Every zmq message crosses two I/O-thread hand-offs on each side; a
 * plain socket written and read by the calling thread costs one system
 * call each way and no thread switch, which halves small-message latency
 * and lets the all-gather read straight into the caller's buffer.
 *
 * Set-up, inside the HELLO rendezvous: a member that wants it (tcp
 * address, `direct = auto`) says so in its HELLO (flags bit
 * STRZ_HELLO_DIRECT). The right neighbour, if it wants it too, listens on
 * an ephemeral port of the address it bound and puts the port and a random
 * token in its HELLO_ACK (offset, total). The left connects to that port
 * and presents "STRZDATA", the token and its rank; the right accepts only
 * that (anything else is closed) and closes the listener. Both within the
 * start-up deadline; a link where either side does not want it uses zmq,
 * and both ends know which.
 *
 * Messages are the same header + payload as on zmq (wire.h), written with
 * writev() and read with recv() by the calling thread, never blocking: a
 * send that does not fit stays pending (the payload is the caller's buffer,
 * as with zmq's zero-copy sends: collectives wait for it before they
 * return); a receive goes header first, checked against what the caller
 * expects before one payload byte is stored, then the payload straight to
 * where the caller wants it. A closed connection marks the neighbour gone,
 * and the usual grace lets its ABORT (on zmq) explain why.
 *
 * Sealed (a secured group, bulk_cipher = aes256gcm): every byte on these
 * connections is an AES-256-GCM record (aead.h) under keys that the HELLO
 * exchange, authenticated by CurveZMQ, agreed for this link and
 * direction. The left's intro is one record (20 bytes sealed, 36 on the
 * wire); a message is its header in clear with a tag over it (64 bytes),
 * checked before any field is used, then its payload encrypted with a
 * tag of its own (length + 16 bytes), decrypted in place once complete;
 * an ABORT either way is a header record. A record that fails its tag is
 * a stranger's (counted, STRZ_SK_MESSAGE) and fails the collective with
 * STRATA_EPROTO: the stream cannot be trusted after it, and nothing of it
 * was applied. */
#include "strz.h"
#include "aead.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

#define INTRO_SIZE 20 /* "STRZDATA", token (8), rank (4), little-endian */
#define SMALL_MAX  256 /* payloads received without a destination */
#define TAG        STRZ_AEAD_TAG

struct strz_direct {
    int      listen_fd;       /* for the left's connection, or -1          */
    int      port;            /* its port                                  */
    uint64_t token;           /* what the left must present                */
    int      dl, dr;          /* from the left (read), to the right (write) */

    unsigned char tx_hdr[STRZ_HDR_SIZE + TAG]; /* sealed: + its tag      */
    unsigned char tx_ptag[TAG];   /* sealed: the payload's tag             */
    struct iovec tx_seg[3];       /* header, payload, payload tag          */
    int      tx_nseg;
    size_t   tx_len, tx_done; /* bytes of all segments, and sent           */

    unsigned char rx_raw[STRZ_HDR_SIZE + TAG];
    size_t   rx_hgot;         /* header bytes read                         */
    int      rx_have;         /* header complete and accepted              */
    strz_hdr_t rx_h;
    unsigned char *rx_dst;    /* where the payload goes                    */
    size_t   rx_pgot;         /* payload bytes read (sealed: + tag bytes)  */
    unsigned char rx_ptag[TAG];
    unsigned char small[SMALL_MAX];

    unsigned char back[STRZ_HDR_SIZE + TAG]; /* an ABORT back from the right */
    size_t   back_got;

    /* Sealed links (aead.h): our key pairs, the keys of both connections'
     * two directions, and the ciphertext of the payload being sent. */
    strz_kx_t    kx_right, kx_left;
    strz_aead_t *to_right, *back_from_right; /* on dr                      */
    strz_aead_t *from_left, *back_to_left;   /* on dl                      */
    unsigned char *tx_buf;
    size_t   tx_cap;
};

/* A secured group's data connections carry AEAD records. */
static int sealed(const strz_ctx_t *c)
{
    return c->secure;
}

static size_t hdr_bytes(const strz_ctx_t *c)
{
    return STRZ_HDR_SIZE + (sealed(c) ? TAG : 0);
}

/* ---- helpers ---------------------------------------------------------- */

static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* "tcp://host:port" -> host (brackets of an IPv6 literal removed). */
static int ep_host(const char *ep, char *host, size_t len)
{
    const char *colon = strrchr(ep, ':');
    if (strncmp(ep, "tcp://", 6) != 0 || colon == NULL || colon < ep + 6)
        return -1;
    const char *h = ep + 6;
    size_t n = (size_t)(colon - h);
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']')
        h++, n -= 2;
    if (n == 0 || n >= len)
        return -1;
    memcpy(host, h, n);
    host[n] = '\0';
    return 0;
}

int strz_direct_wanted(const strz_ctx_t *c)
{
    /* The direct sockets are plain TCP: a secured group uses them only
     * with AEAD records (c->aead), else its data stay on the CURVE links. */
    return c->cfg.direct == STRZ_DIRECT_AUTO && (!c->secure || c->aead)
           && strncmp(c->ep[c->rank], "tcp://", 6) == 0;
}

/* ---- set-up -------------------------------------------------------------- */

static struct strz_direct *direct_new(strz_ctx_t *c)
{
    if (c->direct == NULL && (c->direct = calloc(1, sizeof *c->direct))) {
        c->direct->listen_fd = c->direct->dl = c->direct->dr = -1;
    }
    return c->direct;
}

static void direct_free(struct strz_direct *d)
{
    strz_aead_free(d->to_right);
    strz_aead_free(d->back_from_right);
    strz_aead_free(d->from_left);
    strz_aead_free(d->back_to_left);
    strz_kx_wipe(&d->kx_right);
    strz_kx_wipe(&d->kx_left);
    free(d->tx_buf);
    free(d);
}

int strz_direct_hello_key(strz_ctx_t *c, unsigned char pk[STRZ_KX_PK])
{
    struct strz_direct *d = direct_new(c);
    if (d == NULL)
        return STRATA_ENOMEM;
    if (strz_kx_new(&d->kx_right) != 0) {
        strz_log(c, STRATA_LOG_ERROR, "cannot make a key pair for the data "
                 "connection to %s", c->name[c->right]);
        return STRATA_EINTERNAL;
    }
    memcpy(pk, d->kx_right.pk, STRZ_KX_PK);
    return 0;
}

int strz_direct_listen(strz_ctx_t *c, int *port, uint64_t *token,
                       const unsigned char *left_pk, unsigned char *pk)
{
    char host[256];
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_PASSIVE }, *ai = NULL;
    struct strz_direct *d = direct_new(c);
    int fd = -1;

    *port = 0;
    *token = 0;
    if (d == NULL || ep_host(c->ep[c->rank], host, sizeof host) != 0)
        return 0;
    if (sealed(c)) {
        /* The keys of the link from the left, before anything listens. */
        int rc = strz_kx_new(&d->kx_left);
        if (rc == 0)
            rc = strz_aead_link(&d->kx_left, left_pk, 0, c->tag, c->rank,
                                c->left, &d->back_to_left, &d->from_left);
        if (rc != 0) {
            strz_log(c, STRATA_LOG_INFO, "no sealed data connection from %s "
                     "(no keys, error %d): its data use zmq",
                     c->name[c->left], rc);
            return 0;
        }
        memcpy(pk, d->kx_left.pk, STRZ_KX_PK);
    }
    /* The address we bound for zmq, else every interface. */
    if (getaddrinfo(host, "0", &hints, &ai) != 0)
        ai = NULL;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && (bind(fd, a->ai_addr, a->ai_addrlen) != 0
                        || listen(fd, 4) != 0)) {
            close(fd);
            fd = -1;
        }
    }
    if (ai)
        freeaddrinfo(ai);
    if (fd < 0) {
        struct sockaddr_in6 any = { .sin6_family = AF_INET6 };
        fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && (bind(fd, (struct sockaddr *)&any, sizeof any) != 0
                        || listen(fd, 4) != 0)) {
            close(fd);
            fd = -1;
        }
    }
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    if (fd < 0 || set_nonblock(fd) != 0
        || getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        if (fd >= 0)
            close(fd);
        strz_log(c, STRATA_LOG_INFO, "no direct data socket (%s): the link "
                 "from %s uses zmq", strerror(errno), c->name[c->left]);
        return 0;
    }
    d->listen_fd = fd;
    d->port = ntohs(sa.ss_family == AF_INET6
                    ? ((struct sockaddr_in6 *)&sa)->sin6_port
                    : ((struct sockaddr_in *)&sa)->sin_port);
    d->token = strz_nonce(d) | 1;
    *port = d->port;
    *token = d->token;
    return 0;
}

/* A non-blocking connect, bounded by the deadline: 0 or errno. */
static int connect_by(int fd, const struct sockaddr *sa, socklen_t len,
                      int64_t deadline)
{
    if (set_nonblock(fd) != 0)
        return errno;
    if (connect(fd, sa, len) == 0)
        return 0;
    if (errno != EINPROGRESS)
        return errno;
    for (;;) {
        int64_t left = deadline - strz_now_ms();
        if (left <= 0)
            return ETIMEDOUT;
        struct pollfd p = { .fd = fd, .events = POLLOUT };
        int r = poll(&p, 1, left > 100 ? 100 : (int)left);
        if (r < 0 && errno != EINTR)
            return errno;
        if (r > 0) {
            int err = 0;
            socklen_t el = sizeof err;
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
                return errno;
            return err;
        }
    }
}

/* Connect to the right neighbour's data port and introduce ourselves. */
static int connect_right(strz_ctx_t *c, int port, uint64_t token,
                         const unsigned char *right_pk, int64_t deadline)
{
    char host[256], ps[16];
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;
    struct strz_direct *d = direct_new(c);
    int fd = -1, e = 0;

    if (d == NULL)
        return strz_fail(c, STRATA_ENOMEM, c->rank, "out of memory");
    if (sealed(c) && (e = strz_aead_link(&d->kx_right, right_pk, 1, c->tag,
                                         c->rank, c->right, &d->to_right,
                                         &d->back_from_right)) != 0)
        return strz_fail(c, e, c->right, "no keys for the data connection "
                         "to %s (%s): %s", c->name[c->right],
                         c->addr[c->right], e == STRATA_EPROTO
                         ? "its key in HELLO_ACK is not a valid X25519 key"
                         : "out of memory or a library failure");
    snprintf(ps, sizeof ps, "%d", port);
    if (ep_host(c->ep[c->right], host, sizeof host) != 0
        || (e = getaddrinfo(host, ps, &hints, &ai)) != 0)
        return strz_fail(c, STRATA_EIO, c->right, "cannot resolve %s (%s) "
                         "for its data connection: %s", c->name[c->right],
                         c->addr[c->right], e ? gai_strerror(e) : "?");
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && (e = connect_by(fd, a->ai_addr, a->ai_addrlen,
                                       deadline)) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0)
        return strz_fail(c, e == ETIMEDOUT ? STRATA_ETIMEDOUT : STRATA_EIO,
                         c->right, "cannot open the data connection to %s "
                         "(%s, port %d): %s (a firewall? [transport] direct "
                         "= off keeps all on zmq)", c->name[c->right],
                         c->addr[c->right], port, strerror(e));
    int one = 1;
    unsigned char intro[INTRO_SIZE + TAG];
    size_t ilen = INTRO_SIZE + (sealed(c) ? TAG : 0);
    memcpy(intro, "STRZDATA", 8);
    put_le(intro + 8, token, 8);
    put_le(intro + 16, (uint32_t)c->rank, 4);
    if (sealed(c) && strz_aead_seal(d->to_right, STRZ_REC_INTRO, NULL, intro,
                                    INTRO_SIZE, intro, intro + INTRO_SIZE)) {
        close(fd);
        return strz_fail(c, STRATA_EINTERNAL, c->rank, "cannot seal");
    }
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* 20 (36) bytes into the empty buffer of a new connection: sent at once */
    if (send(fd, intro, ilen, MSG_NOSIGNAL) != (ssize_t)ilen) {
        e = errno;
        close(fd);
        return strz_fail(c, STRATA_EIO, c->right, "data connection to %s "
                         "(%s): %s", c->name[c->right], c->addr[c->right],
                         strerror(e));
    }
    d->dr = fd;
    return 0;
}

/* Accept connections until the left one presented the token. */
static int accept_left(strz_ctx_t *c, int64_t deadline)
{
    struct strz_direct *d = c->direct;

    while (d->dl < 0) {
        int fd = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                return strz_fail(c, STRATA_EIO, c->rank, "accept: %s",
                                 strerror(errno));
            int64_t left = deadline - strz_now_ms();
            if (left <= 0)
                return strz_fail(c, STRATA_ETIMEDOUT, c->left, "timed out "
                                 "after %.1f s: no data connection from %s "
                                 "(%s)", c->timeout_ms / 1000.0,
                                 c->name[c->left], c->addr[c->left]);
            struct pollfd p = { .fd = d->listen_fd, .events = POLLIN };
            (void)poll(&p, 1, left > 100 ? 100 : (int)left);
            if (atomic_load(&c->canceled))
                return strz_fail(c, STRATA_ECANCELED, c->rank,
                                 "canceled by the caller (ctl ABORT)");
            continue;
        }
        /* The intro was sent right after connect: wait for it briefly
         * (a stranger that sends less is dropped after a second). */
        unsigned char intro[INTRO_SIZE + TAG];
        size_t ilen = INTRO_SIZE + (sealed(c) ? TAG : 0);
        struct timeval tv = { .tv_sec = 1 };
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int ok = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0
                 && poll(&p, 1, 1000) == 1
                 && recv(fd, intro, ilen, MSG_WAITALL) == (ssize_t)ilen;
        if (ok && sealed(c)
            && strz_aead_open(d->from_left, STRZ_REC_INTRO, NULL, intro,
                              INTRO_SIZE, intro, intro + INTRO_SIZE) != 0) {
            /* Not sealed with the key the left's HELLO agreed: whoever
             * it is, it did not pass the CURVE handshake as the left. */
            char from[64] = "?";
            struct sockaddr_storage sa;
            socklen_t sl = sizeof sa;
            if (getpeername(fd, (struct sockaddr *)&sa, &sl) == 0)
                (void)getnameinfo((struct sockaddr *)&sa, sl, from,
                                  sizeof from, NULL, 0, NI_NUMERICHOST);
            strz_stranger(c, STRZ_SK_MESSAGE, "a data connection from", from,
                          "its first record failed authentication");
            ok = 0;
        }
        ok = ok && memcmp(intro, "STRZDATA", 8) == 0
                 && get_le(intro + 8, 8) == d->token
                 && (int)get_le(intro + 16, 4) == c->left;
        int one = 1;
        if (!ok || set_nonblock(fd) != 0) {
            close(fd); /* a stranger, or garbage */
            continue;
        }
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            d->dl = fd;
    }
    close(d->listen_fd);
    d->listen_fd = -1;
    return 0;
}

int strz_direct_open(strz_ctx_t *c, int right_port, uint64_t right_token,
                     const unsigned char *right_pk, int64_t deadline)
{
    int rc;
    if (right_port > 0 && (!sealed(c) || right_pk)
        && (rc = connect_right(c, right_port, right_token, right_pk,
                               deadline)) != 0)
        return rc;
    if (c->direct && c->direct->listen_fd >= 0
        && (rc = accept_left(c, deadline)) != 0)
        return rc;
    if (c->direct && c->direct->dl < 0 && c->direct->dr < 0) {
        direct_free(c->direct);
        c->direct = NULL;
    }
    if (c->direct && sealed(c)) {
        /* The key pairs did their job: only the link keys remain. */
        strz_kx_wipe(&c->direct->kx_right);
        strz_kx_wipe(&c->direct->kx_left);
    }
    return 0;
}

void strz_direct_close(strz_ctx_t *c)
{
    struct strz_direct *d = c->direct;
    if (d == NULL)
        return;
    if (d->listen_fd >= 0)
        close(d->listen_fd);
    if (d->dl >= 0)
        close(d->dl);
    if (d->dr >= 0)
        close(d->dr);
    direct_free(d);
    c->direct = NULL;
}

int strz_direct_tx(const strz_ctx_t *c)
{
    return c->direct && c->direct->dr >= 0;
}

int strz_direct_rx(const strz_ctx_t *c)
{
    return c->direct && c->direct->dl >= 0;
}

/* ---- sending ----------------------------------------------------------- */

static void right_closed(strz_ctx_t *c)
{
    if (!c->right_gone_at)
        c->right_gone_at = strz_now_ms();
}

static void left_closed(strz_ctx_t *c)
{
    if (!c->left_gone_at)
        c->left_gone_at = strz_now_ms();
}

/* Push pending bytes: 0 all sent, 1 some pending, or a reported error. */
int strz_direct_flush(strz_ctx_t *c)
{
    struct strz_direct *d = c->direct;

    while (d->tx_done < d->tx_len) {
        struct iovec iov[3];
        int k = 0;
        size_t skip = d->tx_done;
        for (int i = 0; i < d->tx_nseg; i++) {
            size_t l = d->tx_seg[i].iov_len;
            if (skip >= l) {
                skip -= l;
                continue;
            }
            iov[k++] = (struct iovec){ (char *)d->tx_seg[i].iov_base + skip,
                                       l - skip };
            skip = 0;
        }
        struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)k };
        ssize_t w = sendmsg(d->dr, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0) {
            d->tx_done += (size_t)w;
            continue;
        }
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 1;
        if (w < 0 && errno == EINTR)
            continue;
        /* EPIPE, ECONNRESET: the right is gone. Nothing more can go out;
         * report it after the grace, like a dropped zmq connection. */
        right_closed(c);
        return 1;
    }
    return 0;
}

int strz_direct_pending(const strz_ctx_t *c)
{
    return c->direct && c->direct->tx_done < c->direct->tx_len;
}

/* The header (packed in tx_hdr) gets its tag; the payload is encrypted
 * into tx_buf with a tag of its own: segments 0..2 of the send. */
static int seal_message(strz_ctx_t *c, uint32_t len, const void *payload)
{
    struct strz_direct *d = c->direct;
    if (strz_aead_seal(d->to_right, STRZ_REC_HDR, d->tx_hdr, NULL, 0, NULL,
                       d->tx_hdr + STRZ_HDR_SIZE) != 0)
        return STRATA_EINTERNAL;
    if (len == 0)
        return 0;
    if (d->tx_cap < len) {
        free(d->tx_buf);
        d->tx_cap = 0;
        if ((d->tx_buf = malloc(len)) == NULL)
            return STRATA_ENOMEM;
        d->tx_cap = len;
    }
    if (strz_aead_seal(d->to_right, STRZ_REC_PAYLOAD, d->tx_hdr, payload, len,
                       d->tx_buf, d->tx_ptag) != 0)
        return STRATA_EINTERNAL;
    d->tx_seg[1] = (struct iovec){ d->tx_buf, len };
    d->tx_seg[2] = (struct iovec){ d->tx_ptag, TAG };
    d->tx_nseg = 3;
    return 0;
}

int strz_direct_send(strz_ctx_t *c, const strz_hdr_t *h, const void *payload)
{
    struct strz_direct *d = c->direct;
    int rc;

    if (d->tx_done < d->tx_len && (rc = strz_direct_flush(c)) != 0)
        return rc < 0 ? rc : STRATA_EAGAIN;
    strz_wire_pack(h, d->tx_hdr);
    d->tx_seg[0] = (struct iovec){ d->tx_hdr, hdr_bytes(c) };
    d->tx_nseg = 1;
    if (sealed(c) && (rc = seal_message(c, h->length, payload)) != 0)
        return strz_fail(c, rc, c->rank, "cannot seal a message to %s",
                         c->name[c->right]);
    if (!sealed(c) && h->length > 0)
        d->tx_seg[d->tx_nseg++] = (struct iovec){ (void *)payload, h->length };
    d->tx_len = 0;
    for (int i = 0; i < d->tx_nseg; i++)
        d->tx_len += d->tx_seg[i].iov_len;
    d->tx_done = 0;
    rc = strz_direct_flush(c);
    return rc < 0 ? rc : 0; /* accepted, maybe still pending */
}

/* Forget a pending send: after a failure the caller's buffer must not be
 * referenced any more. */
void strz_direct_drop(strz_ctx_t *c)
{
    if (c->direct)
        c->direct->tx_len = c->direct->tx_done = 0;
}

/* ---- receiving --------------------------------------------------------- */

/* Read up to len bytes: bytes read, 0 when none yet, -1 when closed. */
static ssize_t rd(strz_ctx_t *c, void *buf, size_t len)
{
    for (;;) {
        ssize_t r = recv(c->direct->dl, buf, len, MSG_DONTWAIT);
        if (r > 0)
            return r;
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        left_closed(c);
        return -1;
    }
}

/* A record from `peer` failed its tag: a stranger's (or a replay, a
 * reordering, a cut): counted, and the collective fails. */
static int tampered(strz_ctx_t *c, int peer, const char *what)
{
    unsigned long long n = strz_stranger_count(c, STRZ_SK_MESSAGE);
    return strz_fail(c, STRATA_EPROTO, peer, "a record on the data "
                     "connection from %s (%s) failed authentication (%s): "
                     "forged, replayed, reordered or cut short; dropped, "
                     "nothing of it used (%llu dropped so far)",
                     c->name[peer], c->addr[peer], what, n);
}

int strz_direct_recv(strz_ctx_t *c, strz_rmsg_t *m, const strz_hdr_t *want,
                     void *dst)
{
    struct strz_direct *d = c->direct;
    const char *why = NULL;
    size_t hb = hdr_bytes(c);

    memset(m, 0, sizeof *m);
    while (!d->rx_have) {
        ssize_t r = rd(c, d->rx_raw + d->rx_hgot, hb - d->rx_hgot);
        if (r <= 0)
            return STRATA_EAGAIN; /* a close is reported by the waits */
        d->rx_hgot += (size_t)r;
        if (d->rx_hgot < hb)
            continue;
        if (sealed(c) && strz_aead_open(d->from_left, STRZ_REC_HDR, d->rx_raw,
                                        NULL, 0, NULL,
                                        d->rx_raw + STRZ_HDR_SIZE) != 0) {
            d->rx_hgot = 0;
            return tampered(c, c->left, "a header's tag");
        }
        /* payload size as the header says; checked against want below */
        uint32_t plen = (uint32_t)get_le(d->rx_raw + 32, 4);
        if (strz_wire_unpack(d->rx_raw, STRZ_HDR_SIZE, plen, &d->rx_h, &why))
            return strz_fail(c, STRATA_EPROTO, c->left, "malformed message "
                             "from %s (%s) refused: %s", c->name[c->left],
                             c->addr[c->left], why);
        if (d->rx_h.type == STRZ_ABORT && d->rx_h.sender == c->left) {
            d->rx_hgot = 0;
            return strz_abort_received(c, &d->rx_h, c->left);
        }
        if (d->rx_h.sender != c->left || d->rx_h.type == STRZ_HELLO
            || d->rx_h.type == STRZ_HELLO_ACK || d->rx_h.type == STRZ_ABORT
            || d->rx_h.type == STRZ_PROBE || d->rx_h.type == STRZ_PROBE_ACK)
            return strz_fail(c, STRATA_EPROTO, c->left, "unexpected %s from "
                             "rank %d on the data connection of %s (%s) "
                             "refused", strz_wire_type_name(d->rx_h.type),
                             (int)d->rx_h.sender, c->name[c->left],
                             c->addr[c->left]);
        if (want ? !strz_hdr_same(want, &d->rx_h)
                 : d->rx_h.length > SMALL_MAX) {
            /* Not what the caller expects: hand the header over without
             * storing a byte of the payload; the caller refuses it. */
            m->h = d->rx_h;
            d->rx_hgot = 0;
            return want ? 0 : strz_fail(c, STRATA_EPROTO, c->left,
                                        "unexpected %s of %u bytes from %s "
                                        "(%s) refused",
                                        strz_wire_type_name(d->rx_h.type),
                                        d->rx_h.length, c->name[c->left],
                                        c->addr[c->left]);
        }
        d->rx_have = 1;
        d->rx_dst = want ? dst : d->small;
        d->rx_pgot = 0;
    }
    while (d->rx_pgot < d->rx_h.length) {
        ssize_t r = rd(c, d->rx_dst + d->rx_pgot, d->rx_h.length - d->rx_pgot);
        if (r <= 0)
            return STRATA_EAGAIN;
        d->rx_pgot += (size_t)r;
    }
    if (sealed(c) && d->rx_h.length > 0) {
        size_t tl = (size_t)d->rx_h.length + TAG;
        while (d->rx_pgot < tl) {
            size_t got = d->rx_pgot - d->rx_h.length;
            ssize_t r = rd(c, d->rx_ptag + got, TAG - got);
            if (r <= 0)
                return STRATA_EAGAIN;
            d->rx_pgot += (size_t)r;
        }
        d->rx_have = 0;
        d->rx_hgot = 0;
        if (strz_aead_open(d->from_left, STRZ_REC_PAYLOAD, d->rx_raw,
                           d->rx_dst, d->rx_h.length, d->rx_dst,
                           d->rx_ptag) != 0)
            return tampered(c, c->left, "a payload's tag");
    }
    m->h = d->rx_h;
    m->data = d->rx_h.length ? d->rx_dst : NULL;
    d->rx_have = 0;
    d->rx_hgot = 0;
    return 0;
}

/* ---- ABORT and closed connections ------------------------------------- */

/* The ABORT goes on the data connections too: the neighbours notice a
 * closed data connection first, and on the same stream the ABORT comes
 * before the close, so it always wins. Leftwards it goes back on the
 * left's connection (nothing else ever flows that way); rightwards only
 * between messages, so that it is not taken for payload. */
void strz_direct_abort(strz_ctx_t *c, const unsigned char hdr[STRZ_HDR_SIZE])
{
    struct strz_direct *d = c->direct;
    unsigned char rec[STRZ_HDR_SIZE + TAG];
    if (d == NULL)
        return;
    memcpy(rec, hdr, STRZ_HDR_SIZE);
    if (d->dl >= 0 && (!sealed(c)
                       || strz_aead_seal(d->back_to_left, STRZ_REC_HDR, rec,
                                         NULL, 0, NULL,
                                         rec + STRZ_HDR_SIZE) == 0))
        (void)send(d->dl, rec, hdr_bytes(c), MSG_DONTWAIT | MSG_NOSIGNAL);
    /* Sealed, a send not started has used its record numbers already:
     * the ABORT goes only where nothing is pending (zmq carries it too). */
    if (d->dr >= 0 && (d->tx_done == d->tx_len
                       || (d->tx_done == 0 && !sealed(c)))
        && (!sealed(c)
            || strz_aead_seal(d->to_right, STRZ_REC_HDR, rec, NULL, 0, NULL,
                              rec + STRZ_HDR_SIZE) == 0))
        (void)send(d->dr, rec, hdr_bytes(c), MSG_DONTWAIT | MSG_NOSIGNAL);
    d->tx_len = d->tx_done = 0;
}

/* The right's connection is readable: an ABORT coming back, or closed. */
int strz_direct_back(strz_ctx_t *c)
{
    struct strz_direct *d = c->direct;
    const char *why = NULL;
    strz_hdr_t h;

    if (d == NULL || d->dr < 0 || c->right_gone_at)
        return 0;
    for (;;) {
        ssize_t r = recv(d->dr, d->back + d->back_got,
                         hdr_bytes(c) - d->back_got, MSG_DONTWAIT);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (r <= 0) {
            right_closed(c);
            return 0;
        }
        d->back_got += (size_t)r;
        if (d->back_got < hdr_bytes(c))
            continue;
        d->back_got = 0;
        if (sealed(c) && strz_aead_open(d->back_from_right, STRZ_REC_HDR,
                                        d->back, NULL, 0, NULL,
                                        d->back + STRZ_HDR_SIZE) != 0)
            return tampered(c, c->right, "a header's tag");
        if (strz_wire_unpack(d->back, STRZ_HDR_SIZE, 0, &h, &why) == 0
            && h.type == STRZ_ABORT && h.sender == c->right)
            return strz_abort_received(c, &h, c->right);
        return strz_fail(c, STRATA_EPROTO, c->right, "unexpected bytes from "
                         "%s (%s) on its data connection refused",
                         c->name[c->right], c->addr[c->right]);
    }
}

void strz_direct_peek(strz_ctx_t *c)
{
    struct strz_direct *d = c->direct;
    unsigned char b;
    if (d == NULL)
        return;
    if (d->dl >= 0 && !c->left_gone_at && !d->rx_have && d->rx_hgot == 0) {
        ssize_t r = recv(d->dl, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK
                       && errno != EINTR))
            left_closed(c);
    }
}

int strz_direct_fd(const strz_ctx_t *c, int right)
{
    return c->direct ? (right ? c->direct->dr : c->direct->dl) : -1;
}
