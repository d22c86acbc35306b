/* The membership client of an elastic job (elastic.h): one TCP connection
 * to the service strata launch --elastic hosts, joins, resize notices. */
#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "elastic.h"
#include "base/fault.h"
#include "wire.h"

#define WHO       "elastic"
#define CONNECT_MS 10000            /* reaching the service                */
#define SLACK_MS   10000            /* past the rendezvous timeout: the    */
                                    /* service answers before that         */

struct strata__elastic {
    char     service[300];          /* host:port of the service            */
    /* what this worker shares with the service (member_auth.c) */
    int      auth;                  /* 1 the job's keys, 2 the token       */
    unsigned char key[STRATA_MEMBER_KEY];
    uint8_t  nonce[STRATA_MEMBER_NONCE]; /* the connection's CHALLENGE's  */
    int      challenged;            /* the CHALLENGE is in                  */
    uint64_t seq_in, seq_out;       /* frames each way on the connection   */
    unsigned long forged;           /* frames dropped: tag did not verify  */
    char     self[STRATA_MEMBER_MAX_NAME + 1];
    char     host[272];
    int      fd;                    /* -1: not connected                    */
    /* the frame being read: its header, then its body; a whole one stays
     * until taken (frame_done), so that a look ahead can leave it */
    uint8_t  hb[STRATA_MEMBER_HDR];
    strata__member_hdr_t h;
    uint8_t *body;
    size_t   got;                   /* bytes of header and body so far     */
    int      pending;               /* a later generation was announced    */
    int      over;
    int      error;                 /* of a failed join: sticky            */
    int64_t  joined_with;
    /* the generation joined last */
    int      have;
    strata_membership_t m;
    int      n;
    char   **addrs, **names;
    int64_t *committed;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* "host:port" or "[v6]:port" into its parts. */
static int split_addr(const char *a, char *host, size_t hcap, char *port,
                      size_t pcap)
{
    const char *colon = strrchr(a, ':');
    if (!colon || colon == a || !colon[1] || strlen(colon + 1) >= pcap)
        return -1;
    const char *h = a;
    size_t hl = (size_t)(colon - a);
    if (*a == '[') {
        if (hl < 3 || a[hl - 1] != ']')
            return -1;
        h = a + 1;
        hl -= 2;
    }
    if (hl >= hcap)
        return -1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    snprintf(port, pcap, "%s", colon + 1);
    return 0;
}

static const char *auth_name(int auth)
{
    return auth == 1 ? "the job's keys" : auth == 2 ? "the job's token"
                                                    : "no authentication";
}

int strata__elastic_open(const char *self, const char *host,
                         const char *secret, strata__elastic_t **out)
{
    *out = NULL;
    const char *svc = getenv("STRATA_ELASTIC");
    if (!svc || !svc[0])
        return STRATA_OK;
    const char *tok = getenv("STRATA_ELASTIC_TOKEN");
    char h[272], p[16];
    if (strlen(svc) >= sizeof ((strata__elastic_t *)0)->service ||
        split_addr(svc, h, sizeof h, p, sizeof p) != 0 ||
        (!secret && (!tok || strlen(tok) < STRATA_MEMBER_MIN_TOKEN ||
                     strlen(tok) > STRATA_MEMBER_MAX_TOKEN ||
                     strcspn(tok, " \t\r\n") != strlen(tok)))) {
        strata__log(STRATA_LOG_ERROR, WHO, "STRATA_ELASTIC = '%.64s' (with "
                    "STRATA_ELASTIC_TOKEN) does not name a membership service "
                    "host:port and its token; strata launch --elastic sets "
                    "them", svc);
        return STRATA_ECONFIG;
    }
    strata__elastic_t *e = STRATA_FAULT(ALLOC) ? NULL : calloc(1, sizeof *e);
    if (!e) {
        strata__log(STRATA_LOG_ERROR, WHO, "membership client of %s: out of "
                    "memory", svc);
        return STRATA_ENOMEM;
    }
    snprintf(e->service, sizeof e->service, "%s", svc);
    /* with the job's keys the worker's secret key authenticates it, in
     * plaintext mode the token (member_auth.c) */
    unsigned char sk[32];
    int bad = secret ? strata__member_z85_32(secret, sk) != 0 ||
                       strata__member_key_secret(sk, e->key) != 0
                     : strata__member_key_token(tok, e->key) != 0;
    sodium_memzero(sk, sizeof sk);
    e->auth = secret ? 1 : 2;
    if (bad) {
        strata__log(STRATA_LOG_ERROR, WHO, "membership client of %s: no key "
                    "from %s", svc, auth_name(e->auth));
        free(e);
        return STRATA_ECONFIG;
    }
    snprintf(e->self, sizeof e->self, "%s", self);
    snprintf(e->host, sizeof e->host, "%s", host && host[0] ? host
                                                            : "127.0.0.1");
    e->fd = -1;
    e->joined_with = -1;
    *out = e;
    return STRATA_OK;
}

static void forget_generation(strata__elastic_t *e)
{
    strata__member_gen_t g = { .size = e->n, .names = e->names,
                               .addrs = e->addrs, .committed = e->committed };
    strata__member_gen_free(&g);
    e->addrs = e->names = NULL;
    e->committed = NULL;
    e->n = 0;
}

static void frame_done(strata__elastic_t *e)
{
    free(e->body);
    e->body = NULL;
    e->got = 0;
}

void strata__elastic_close(strata__elastic_t *e)
{
    if (!e)
        return;
    if (e->fd >= 0)
        close(e->fd);
    frame_done(e);
    forget_generation(e);
    free(e);
}

/* ---- the connection ----------------------------------------------------- */

static int connect_service(strata__elastic_t *e)
{
    char host[272], port[16];
    split_addr(e->service, host, sizeof host, port, sizeof port);
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;
    int g = getaddrinfo(host, port, &hints, &ai);
    if (g != 0) {
        strata__log(STRATA_LOG_ERROR, WHO, "membership service %s: %s",
                    e->service, gai_strerror(g));
        return STRATA_ECONFIG;
    }
    int fd = -1, err = 0;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = STRATA_FAULT(IO) ? -1
             : socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                      a->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        if ((STRATA_FAULT(IO) || connect(fd, a->ai_addr, a->ai_addrlen) != 0) &&
            errno != EINPROGRESS) {
            err = errno;
            close(fd);
            fd = -1;
            continue;
        }
        struct pollfd p = { .fd = fd, .events = POLLOUT };
        socklen_t len = sizeof err;
        err = 0;
        if (poll(&p, 1, CONNECT_MS) != 1 ||
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err) {
            if (!err)
                err = ETIMEDOUT;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0) {
        strata__log(STRATA_LOG_ERROR, WHO, "cannot reach the membership "
                    "service at %s: %s", e->service, strerror(err));
        return STRATA_EPEER;
    }
    e->fd = fd;
    e->challenged = 0;
    e->seq_in = e->seq_out = 0;
    frame_done(e);
    return STRATA_OK;
}

static int send_all(strata__elastic_t *e, const uint8_t *msg, size_t len,
                    int64_t deadline)
{
    size_t at = 0;
    while (at < len) {
        ssize_t n = STRATA_FAULT(IO) ? -1
                    : send(e->fd, msg + at, len - at, MSG_NOSIGNAL);
        if (n > 0) {
            at += (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            break;
        struct pollfd p = { .fd = e->fd, .events = POLLOUT };
        int64_t left = deadline - now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) < 0)
            break;
    }
    if (at == len)
        return STRATA_OK;
    strata__log(STRATA_LOG_ERROR, WHO, "cannot write to the membership "
                "service at %s", e->service);
    return STRATA_EPEER;
}

/* Read what arrived toward the next frame, without waiting: 1 a whole
 * frame is in e->h / e->body (until frame_done), 0 not yet; STRATA_EPEER
 * the service closed the connection (what it sent before is taken
 * first), STRATA_EPROTO a header that is not the service's (why; the same
 * again at every call), STRATA_ENOMEM. */
static int take_frame(strata__elastic_t *e, char *why, size_t wn)
{
    for (;;) {
        if (e->got == STRATA_MEMBER_HDR && !e->body) {
            int rc = strata__member_get_hdr(e->hb, 0, &e->h, why, wn);
            int k = e->h.kind;
            if (rc == 0 && (e->challenged ? k != STRATA_MEMBER_GEN &&
                                                k != STRATA_MEMBER_RESIZE &&
                                                k != STRATA_MEMBER_STOP &&
                                                k != STRATA_MEMBER_END
                                          : k != STRATA_MEMBER_CHALLENGE)) {
                snprintf(why, wn, "a %s message, which the service does "
                         "not send", strata__member_kind_name(e->h.kind));
                rc = STRATA_EPROTO;
            }
            if (rc != 0)
                return rc;
            e->body = STRATA_FAULT(ALLOC) ? NULL : malloc(e->h.len + 1);
            if (!e->body) {
                snprintf(why, wn, "out of memory for a %s of %u bytes",
                         strata__member_kind_name(e->h.kind), e->h.len);
                return STRATA_ENOMEM;
            }
        }
        size_t want = e->got < STRATA_MEMBER_HDR
                          ? STRATA_MEMBER_HDR - e->got
                          : STRATA_MEMBER_HDR + e->h.len - e->got;
        if (e->body && want == 0 && e->h.kind != STRATA_MEMBER_CHALLENGE) {
            size_t len = e->h.len;
            if (strata__member_unseal(e->key, STRATA_MEMBER_DOWN, e->seq_in,
                                      e->nonce, e->h.kind, e->body, &len)) {
                e->seq_in++;
                e->h.len = (uint32_t)len; /* the body without its tag */
                return 1;
            }
            /* not the service's: someone on the path; the stream's
             * framing holds, so the connection goes on */
            if (++e->forged <= 10 || e->forged % 1000 == 0)
                strata__log(STRATA_LOG_WARN, WHO, "dropped a %s of %u bytes "
                            "on the connection to the membership service %s: "
                            "not authenticated with %s (%lu so far)",
                            strata__member_kind_name(e->h.kind), e->h.len,
                            e->service, auth_name(e->auth), e->forged);
            frame_done(e);
            continue;
        }
        if (e->body && want == 0)
            return 1;
        uint8_t *to = e->got < STRATA_MEMBER_HDR
                          ? e->hb + e->got
                          : e->body + (e->got - STRATA_MEMBER_HDR);
        ssize_t n = STRATA_FAULT(IO) ? -1
                    : recv(e->fd, to, want, MSG_DONTWAIT);
        if (n > 0) {
            e->got += (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        snprintf(why, wn, "the membership service %s closed the "
                 "connection (strata launch gone?)", e->service);
        return STRATA_EPEER;
    }
}

/* The next whole frame within the deadline: 1, or an error (logged). */
static int next_frame(strata__elastic_t *e, int64_t deadline)
{
    char why[400];
    for (;;) {
        int rc = take_frame(e, why, sizeof why);
        if (rc == 1)
            return 1;
        if (rc == STRATA_EPEER) {
            strata__log(STRATA_LOG_ERROR, WHO, "%s", why);
            return rc;
        }
        if (rc < 0) {
            strata__log(STRATA_LOG_ERROR, WHO, "membership service %s: %s",
                        e->service, why);
            return rc;
        }
        struct pollfd p = { .fd = e->fd, .events = POLLIN };
        int64_t left = deadline - now_ms();
        if (left <= 0) {
            strata__log(STRATA_LOG_ERROR, WHO, "no answer from the "
                        "membership service %s in time", e->service);
            return STRATA_ETIMEDOUT;
        }
        if (poll(&p, 1, (int)(left < 1000 ? left : 1000)) < 0 &&
            errno != EINTR) {
            strata__log(STRATA_LOG_ERROR, WHO, "waiting for the membership "
                        "service %s: %s", e->service, strerror(errno));
            return STRATA_EIO;
        }
    }
}

/* A fresh port on our host, for this generation's transport: the kernel's
 * choice, released at once (the transport binds it moments later). */
static int fresh_addr(strata__elastic_t *e, char *out, size_t cap)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_NUMERICSERV }, *ai = NULL;
    if (getaddrinfo(e->host, "0", &hints, &ai) != 0 || !ai) {
        strata__log(STRATA_LOG_ERROR, WHO, "cannot resolve this task's host "
                    "'%s'", e->host);
        return STRATA_ECONFIG;
    }
    int port = -1;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (fd >= 0 && bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
        port = ss.ss_family == AF_INET6
                   ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                   : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    int v6 = ai->ai_family == AF_INET6;
    if (fd >= 0)
        close(fd);
    freeaddrinfo(ai);
    if (port <= 0) {
        strata__log(STRATA_LOG_ERROR, WHO, "no free port on %s: %s", e->host,
                    strerror(errno));
        return STRATA_EIO;
    }
    snprintf(out, cap, v6 ? "[%s]:%d" : "%s:%d", e->host, port);
    return STRATA_OK;
}

/* ---- joining ------------------------------------------------------------ */

static int bad_table(strata__elastic_t *e, const char *why)
{
    strata__log(STRATA_LOG_ERROR, WHO, "membership service %s sent a GEN: "
                "%s", e->service, why);
    return STRATA_EPROTO;
}

/* The GEN frame in e->body into the client's table; a failure leaves the
 * generation joined last as it was. */
static int read_table(strata__elastic_t *e)
{
    strata__member_gen_t g;
    char why[400];
    int rc = strata__member_gen_decode(e->body, e->h.len, &g, why,
                                       sizeof why);
    if (rc == STRATA_ENOMEM) {
        strata__log(STRATA_LOG_ERROR, WHO, "membership service %s: %s",
                    e->service, why);
        return rc;
    }
    if (rc != 0)
        return bad_table(e, why);
    if (e->have && g.generation <= e->m.generation)
        rc = bad_table(e, "not a generation after the last one");
    else if (strcmp(g.names[g.rank], e->self) != 0)
        rc = bad_table(e, "this task's rank names another task");
    else if (g.resume_step >= 0 && g.committed[0] != g.resume_step)
        rc = bad_table(e, "rank 0 does not hold the state of the step to "
                       "resume from");
    if (rc != STRATA_OK) {
        strata__member_gen_free(&g);
        return rc;
    }
    forget_generation(e);
    e->n = g.size;
    e->addrs = g.addrs;
    e->names = g.names;
    e->committed = g.committed;
    e->m = (strata_membership_t){
        .struct_size = sizeof e->m, .generation = g.generation,
        .size = g.size, .rank = g.rank,
        .addrs = (const char *const *)e->addrs,
        .names = (const char *const *)e->names, .committed = e->committed,
        .resume_step = g.resume_step,
    };
    e->have = 1;
    return STRATA_OK;
}

/* The service's CHALLENGE, first on the connection: 0, else the error
 * (logged). */
static int take_challenge(strata__elastic_t *e, int64_t deadline)
{
    int rc = next_frame(e, deadline);
    if (rc != 1)
        return rc;
    int auth = 0;
    char why[200];
    rc = strata__member_challenge_decode(e->body, e->h.len, &auth, e->nonce,
                                         why, sizeof why);
    frame_done(e);
    if (rc != 0) {
        strata__log(STRATA_LOG_ERROR, WHO, "membership service %s: %s",
                    e->service, why);
        return STRATA_EPROTO;
    }
    if (auth != e->auth) {
        strata__log(STRATA_LOG_ERROR, WHO, "the membership service %s "
                    "authenticates with %s, this task with %s: give every "
                    "task and launch the same [security] mode and keys",
                    e->service, auth_name(auth), auth_name(e->auth));
        return STRATA_ECONFIG;
    }
    e->challenged = 1;
    return STRATA_OK;
}

int strata__elastic_join(strata__elastic_t *e, int64_t committed,
                         int timeout_ms, strata_membership_t *out)
{
    if (e->error)
        return e->error;
    int64_t deadline = now_ms() + (int64_t)timeout_ms + SLACK_MS;
    int rc = e->fd < 0 ? connect_service(e) : STRATA_OK;
    if (rc == STRATA_OK && !e->challenged)
        rc = take_challenge(e, now_ms() + CONNECT_MS);
    strata__member_join_t j = {
        .committed = committed < -1 ? -1 : committed,
        .timeout_ms = timeout_ms < 1 ? 1u : (uint32_t)timeout_ms,
    };
    if (rc == STRATA_OK)
        rc = fresh_addr(e, j.addr, sizeof j.addr);
    if (rc == STRATA_OK) {
        uint8_t msg[STRATA_MEMBER_CLIENT_MAX + STRATA_MEMBER_TAG];
        snprintf(j.name, sizeof j.name, "%s", e->self);
        size_t n = strata__member_join_encode(msg, &j);
        if (n > 0)
            n = strata__member_seal(e->key, STRATA_MEMBER_UP, e->seq_out++,
                                    e->nonce, msg, n);
        if (n == 0) {
            strata__log(STRATA_LOG_ERROR, WHO, "this task's JOIN (name '%s', "
                        "address %s) does not fit the membership wire",
                        e->self, j.addr);
            rc = STRATA_ECONFIG;
        } else {
            rc = send_all(e, msg, n, deadline);
        }
    }
    e->pending = 0;
    while (rc == STRATA_OK) {
        rc = next_frame(e, deadline);
        if (rc != 1)
            break;
        rc = STRATA_OK;
        char why[400], reason[STRATA_MEMBER_MAX_REASON + 1];
        int32_t g;
        switch (e->h.kind) {
        case STRATA_MEMBER_GEN:
            rc = read_table(e);
            frame_done(e);
            if (rc != STRATA_OK)
                break;
            e->joined_with = committed;
            out->generation = e->m.generation;
            out->size = e->m.size;
            out->rank = e->m.rank;
            out->addrs = e->m.addrs;
            out->names = e->m.names;
            out->committed = e->m.committed;
            out->resume_step = e->m.resume_step;
            return STRATA_OK;
        case STRATA_MEMBER_RESIZE:
            /* announced before we joined: this join answers it */
            rc = strata__member_resize_decode(e->body, e->h.len, &g, why,
                                              sizeof why);
            break;
        case STRATA_MEMBER_END:
            rc = strata__member_end_decode(e->body, e->h.len, why,
                                           sizeof why);
            if (rc == 0) {
                e->over = 1;
                strata__log(STRATA_LOG_INFO, WHO, "the job finished before "
                            "%s could join it", e->self);
                rc = STRATA_ECANCELED;
            }
            break;
        default: /* STOP: take_frame lets no other kind through */
            assert(e->h.kind == STRATA_MEMBER_STOP);
            rc = strata__member_stop_decode(e->body, e->h.len, reason, why,
                                            sizeof why);
            if (rc == 0) {
                strata__log(STRATA_LOG_ERROR, WHO, "the membership service "
                            "stopped the job: %.400s", reason);
                rc = STRATA_ECANCELED;
            }
            break;
        }
        if (rc == STRATA_EPROTO)
            strata__log(STRATA_LOG_ERROR, WHO, "membership service %s: %s",
                        e->service, why);
        if (e->body)
            frame_done(e);
    }
    /* A failed join leaves the service nothing to wait for from us, and
     * nothing to join later. */
    e->error = rc;
    if (e->fd >= 0) {
        close(e->fd);
        e->fd = -1;
    }
    return rc;
}

const strata_membership_t *strata__elastic_current(const strata__elastic_t *e)
{
    return e && e->have ? &e->m : NULL;
}

int64_t strata__elastic_joined_with(const strata__elastic_t *e)
{
    return e ? e->joined_with : -1;
}

int strata__elastic_pending(strata__elastic_t *e)
{
    if (!e || e->fd < 0)
        return e != NULL;
    char why[400];
    int rc;
    while ((rc = take_frame(e, why, sizeof why)) == 1) {
        int32_t g;
        if (e->h.kind != STRATA_MEMBER_RESIZE) {
            /* END, STOP or a GEN: left for the join, which reports it */
            e->pending = 1;
            break;
        }
        if (strata__member_resize_decode(e->body, e->h.len, &g, why,
                                         sizeof why) == 0 &&
            g > e->m.generation)
            e->pending = 1;
        frame_done(e);
    }
    /* the service gone, or a frame that is not the service's: the join
     * meets it again and says so */
    if (rc < 0)
        e->pending = 1;
    return e->pending;
}

int strata__elastic_over(const strata__elastic_t *e)
{
    return e && e->over;
}

int strata__elastic_failed(const strata__elastic_t *e)
{
    return e && e->error;
}

void strata__elastic_done(strata__elastic_t *e, int64_t step)
{
    if (!e || e->fd < 0)
        return;
    uint8_t msg[STRATA_MEMBER_HDR + 8 + STRATA_MEMBER_TAG];
    size_t n = strata__member_done_encode(msg, step < -1 ? -1 : step);
    if (e->challenged)
        n = strata__member_seal(e->key, STRATA_MEMBER_UP, e->seq_out++,
                                e->nonce, msg, n);
    (void)send_all(e, msg, n, now_ms() + 2000);
    close(e->fd);
    e->fd = -1;
}
