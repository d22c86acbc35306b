/* The rendezvous, every other task's side (rendezvous.h): reach rank 0
 * (again and again until the deadline), take its challenge, register a
 * free port of the interface that routes to it (tagged), and take the
 * table (its tag checked) -- or rank 0's verdict. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4, struct ucred */
#endif
#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/fault.h"
#include "rdzv_net.h"

#define ERR(...) strata__log(STRATA_LOG_ERROR, RDZV_WHO, __VA_ARGS__)
#define WHO RDZV_WHO

#define RETRY_S        0.2  /* between two attempts to reach rank 0        */
#define DIAL_S         2.0  /* one connection attempt                      */
#define CLIENT_GRACE_S 5.0  /* a task waits longer than rank 0, so that
                               rank 0's verdict (who is missing) reaches it */

/* One attempt to reach rank 0; the connected fd, or -1 with why. */
static int dial(const strata__rdzv_ep_t *ep, const strata__rdzv_opts_t *o,
                double deadline, char *why, size_t n)
{
    double until = strata__rdzv_now() + DIAL_S;
    if (until > deadline)
        until = deadline;
    if (ep->local) {
        struct sockaddr_un su;
        socklen_t len = strata__rdzv_unix_addr(ep, &su);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                        0);
        unsigned uid = 0;
        int up = fd >= 0 && connect(fd, (struct sockaddr *)&su, len) == 0;
        if (up && strata__rdzv_peer_is_us(fd, &uid))
            return fd;
        if (up)
            snprintf(why, n, "the socket is held by uid %u, not this job's "
                     "user", uid);
        else
            snprintf(why, n, "%s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_NUMERICSERV };
    struct addrinfo *ai = NULL;
    int g = getaddrinfo(ep->host, ep->port, &hints, &ai);
    if (g != 0) {
        snprintf(why, n, "cannot resolve '%.64s': %s", ep->host,
                 gai_strerror(g));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    0);
        if (fd < 0)
            continue;
        int err = connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
        if (err == EINPROGRESS &&
            strata__rdzv_wait_fd(fd, POLLOUT, until, o) == 1) {
            socklen_t el = sizeof err;
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
                err = errno;
        } else if (err == EINPROGRESS) {
            err = ETIMEDOUT;
        }
        if (err) {
            snprintf(why, n, "%s", strerror(err));
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    return fd;
}

/* n bytes in or out before the deadline: 0, -1 connection gone, -2 the
 * deadline, -3 stop requested. */
static int xfer(int fd, void *buf, size_t n, int out, double deadline,
                const strata__rdzv_opts_t *o)
{
    size_t at = 0;
    while (at < n) {
        int w = strata__rdzv_wait_fd(fd, out ? POLLOUT : POLLIN, deadline, o);
        if (w <= 0)
            return w < 0 ? -3 : -2;
        ssize_t k = STRATA_FAULT(IO) ? -1
                    : out ? send(fd, (char *)buf + at, n - at, MSG_NOSIGNAL)
                          : read(fd, (char *)buf + at, n - at);
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (k <= 0)
            return -1;
        at += (size_t)k;
    }
    return 0;
}

/* rank 0's REFUSED: its reason, printable, as the task's error. When the
 * rendezvous authenticates, only a REFUSED tagged for this connection's
 * `nonce` (NULL: before the challenge, none can be) is rank 0's: another
 * is dropped, counted in *forged and named, and the task tries again (1,
 * why says so) -- a forged REFUSED cannot end it. */
static int refused(const strata__rdzv_ep_t *ep, int fd, uint32_t rank,
                   const uint8_t *b, size_t len, const uint8_t *nonce,
                   const strata__rdzv_opts_t *o,
                   strata__rdzv_forged_t *forged, char *wy, size_t wn)
{
    char reason[STRATA_RDZV_MAX_REASON + 1], bad[128];
    int why = 0, tagged = o->auth && nonce && len > STRATA_RDZV_TAG &&
        strata__rdzv_tag_ok(o->auth, 0, STRATA_RDZV_REFUSED, nonce, b,
                            len - STRATA_RDZV_TAG, b + len - STRATA_RDZV_TAG);
    if (tagged)
        len -= STRATA_RDZV_TAG;
    /* the header's limit held the length: the decode cannot refuse it */
    if (strata__rdzv_refused_parse(b, len, &why, reason, bad,
                                   sizeof bad) != 0)
        snprintf(reason, sizeof reason, "%s", bad);
    if (o->auth && !tagged) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        char from[96] = "?";
        if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
            strata__rdzv_peer_text((struct sockaddr *)&ss, sl, fd, from,
                                   sizeof from);
        snprintf(forged->last, sizeof forged->last, "%.150s", reason);
        if (++forged->n <= 10 || forged->n % 1000 == 0) /* rate-limited */
            strata__log(STRATA_LOG_WARN, WHO, "at %s: dropped a REFUSED from %s "
                    "that is not authenticated with %s (%u so far; not rank "
                    "0's, or rank 0 does not know this task's key): \"%.200s"
                    "\"; trying again", ep->text, from,
                    strata__rdzv_auth_name(o->auth->kind), forged->n,
                    reason[0] ? reason : "(no reason given)");
        snprintf(wy, wn, "rank 0's answer was not authenticated");
        return 1;
    }
    ERR("at %s: rank 0 refused rank %u: %s", ep->text, rank,
        reason[0] ? reason : "(no reason given)");
    return why == STRATA_RDZV_WHY_TIMEOUT ? STRATA_ETIMEDOUT
           : why == STRATA_RDZV_WHY_AUTH  ? STRATA_ECONFIG
           : why == STRATA_RDZV_WHY_STOPPED ? STRATA_EPEER
                                            : STRATA_ECONFIG;
}

/* A header from rank 0: 0, 1 (gone or late: why says so, naming `what`
 * was awaited, or saying `late`), or the error (logged). */
static int read_hdr(const strata__rdzv_ep_t *ep, int fd, uint32_t world,
                    double deadline, const strata__rdzv_opts_t *o,
                    strata__rdzv_hdr_t *hdr, char *why, size_t wn,
                    const char *what, const char *late)
{
    uint8_t h[STRATA_RDZV_HDR];
    int x = xfer(fd, h, sizeof h, 0, deadline, o);
    if (x == -1)
        snprintf(why, wn, "rank 0 closed the connection before sending %s",
                 what);
    else if (x != 0)
        snprintf(why, wn, "%s", late);
    if (x != 0)
        return 1;
    int rc = strata__rdzv_get_hdr(h, world, hdr);
    if (rc == -1) {
        ERR("at %s: this is not a strata rendezvous (it answered %02x %02x "
            "%02x %02x)", ep->text, h[0], h[1], h[2], h[3]);
        return STRATA_EPROTO;
    }
    if (rc == -2) {
        ERR("at %s: rank 0 speaks rendezvous protocol version %d, this task "
            "%d: run the same strata on every node", ep->text, hdr->version,
            STRATA_RDZV_VERSION);
        return STRATA_ECONFIG;
    }
    if (rc != 0 || hdr->type == STRATA_RDZV_REGISTER) {
        ERR("at %s: rank 0 sent %s (type %d, %u bytes)", ep->text,
            rc == -4 ? "an oversized message" : "an unexpected message",
            hdr->type, hdr->len);
        return STRATA_EPROTO;
    }
    return 0;
}

/* rank 0's CHALLENGE: 0 with the nonce, 1 to try again, else the error. */
static int challenge(const strata__rdzv_ep_t *ep, int fd, uint32_t world,
                     uint32_t rank, double deadline, const strata__rdzv_opts_t *o,
                     uint8_t nonce[STRATA_RDZV_NONCE],
                     strata__rdzv_forged_t *forged, char *why, size_t wn)
{
    strata__rdzv_hdr_t hdr;
    int rc = read_hdr(ep, fd, world, deadline, o, &hdr, why, wn,
                      "its challenge", "rank 0 sent no challenge");
    if (rc != 0)
        return rc;
    uint8_t body[1 + STRATA_RDZV_NONCE + STRATA_RDZV_MAX_REASON +
                 STRATA_RDZV_TAG];
    if (hdr.len > sizeof body ||
        xfer(fd, body, hdr.len, 0, deadline, o) != 0) {
        snprintf(why, wn, "rank 0's challenge stopped after its header");
        return 1;
    }
    if (hdr.type == STRATA_RDZV_REFUSED) /* no nonce yet: never tagged */
        return refused(ep, fd, rank, body, hdr.len, NULL, o, forged, why,
                       wn);
    int auth, mine = o->auth ? o->auth->kind : STRATA_RDZV_AUTH_NONE;
    char bad[160];
    if (hdr.type != STRATA_RDZV_CHALLENGE ||
        strata__member_challenge_decode(body, hdr.len, &auth, nonce, bad,
                                        sizeof bad) != 0) {
        ERR("at %s: rank 0 opened with %s", ep->text,
            hdr.type != STRATA_RDZV_CHALLENGE ? "another message than its "
                                                "challenge" : bad);
        return STRATA_EPROTO;
    }
    if (auth != mine) {
        ERR("at %s: rank 0 authenticates the rendezvous with %s, this task "
            "with %s: give every node the same [security] mode, keys and "
            "token", ep->text, strata__rdzv_auth_name(auth),
            strata__rdzv_auth_name(mine));
        return STRATA_ECONFIG;
    }
    return 0;
}

int strata__rdzv_answer(strata__cluster_t *c, const strata__rdzv_ep_t *ep,
                        int fd, const char *mine, const uint8_t *nonce,
                        double deadline, const strata__rdzv_opts_t *o,
                        strata__rdzv_forged_t *forged, char *why, size_t wn)
{
    uint32_t world = (uint32_t)c->pub.ntasks, rank = (uint32_t)c->pub.self;
    strata__rdzv_hdr_t hdr;
    char gone[160];
    snprintf(gone, sizeof gone, "rank %u registered as %s, but no table "
             "came", rank, mine);
    int rc = read_hdr(ep, fd, world, deadline, o, &hdr, why, wn, "the table",
                      gone);
    if (rc != 0)
        return rc;
    uint8_t *body = STRATA_FAULT(ALLOC) ? NULL : malloc(hdr.len + 1);
    if (!body) {
        ERR("at %s: out of memory for rank 0's answer (%u bytes)", ep->text,
            hdr.len);
        return STRATA_ENOMEM;
    }
    if (xfer(fd, body, hdr.len, 0, deadline, o) != 0) {
        free(body);
        snprintf(why, wn, "rank 0's answer stopped after its header");
        return 1;
    }
    if (hdr.type == STRATA_RDZV_REFUSED) {
        rc = refused(ep, fd, rank, body, hdr.len, nonce, o, forged, why, wn);
        free(body);
        return rc;
    }
    size_t len = hdr.len;
    if (o->auth && (len < STRATA_RDZV_TAG || !nonce ||
                    !strata__rdzv_tag_ok(o->auth, 0, STRATA_RDZV_TABLE, nonce,
                                         body, len - STRATA_RDZV_TAG,
                                         body + len - STRATA_RDZV_TAG))) {
        ERR("at %s: the table is not authenticated with %s: not rank 0's, "
            "refused", ep->text, strata__rdzv_auth_name(o->auth->kind));
        free(body);
        return STRATA_EPROTO;
    }
    len -= o->auth ? STRATA_RDZV_TAG : 0;
    char **addrs = STRATA_FAULT(ALLOC) ? NULL : calloc(world, sizeof *addrs);
    char bad[256] = "out of memory for the table";
    rc = addrs ? strata__rdzv_table_parse(body, len, world, addrs, bad,
                                          sizeof bad)
               : STRATA_ENOMEM;
    free(body);
    assert(rank < world);   /* the cluster resolved self within ntasks */
    if (rc == -1)
        ERR("at %s: rank 0 sent a malformed table: %s", ep->text, bad);
    else if (rc == STRATA_ENOMEM)
        ERR("at %s: rank 0's table: %s", ep->text, bad);
    else if (rc == 0 && strcmp(addrs[rank], mine) != 0)
        ERR("at %s: the table gives rank %u the address %s, but it "
            "registered %s: refused", ep->text, rank, addrs[rank], mine);
    if (rc == 0 && strcmp(addrs[rank], mine) == 0) {
        for (uint32_t r = 0; r < world; r++) {
            free((char *)c->tasks[r].address);
            c->tasks[r].address = addrs[r];
        }
        free(addrs);
        return 0;
    }
    for (uint32_t r = 0; addrs && rc == 0 && r < world; r++)
        free(addrs[r]);
    free(addrs);
    return rc == STRATA_ENOMEM ? rc : STRATA_EPROTO;
}

int strata__rdzv_join(strata__cluster_t *c, const strata__rdzv_ep_t *ep,
                      const strata__rdzv_opts_t *o)
{
    uint32_t world = (uint32_t)c->pub.ntasks, rank = (uint32_t)c->pub.self;
    double t0 = strata__rdzv_now();
    double deadline = t0 + o->timeout_s + CLIENT_GRACE_S;
    char why[320] = "no attempt", mine[STRATA_RDZV_MAX_ADDR + 1];
    strata__rdzv_forged_t forged = { 0 }; /* REFUSEDs dropped */
    while (!strata__rdzv_stopped(o)) {
        if (strata__rdzv_now() >= deadline) {
            char fw[300] = "";
            if (forged.n)
                snprintf(fw, sizeof fw, "; %u REFUSED not authenticated with "
                         "%s were dropped (the last: \"%s\")", forged.n,
                         strata__rdzv_auth_name(o->auth->kind), forged.last);
            ERR("at %s: no table within %g s ([cluster] rendezvous_timeout_s "
                "+ %g): %s%s", ep->text, o->timeout_s, CLIENT_GRACE_S, why,
                fw);
            return STRATA_ETIMEDOUT;
        }
        char what[256];
        int fd = dial(ep, o, deadline, what, sizeof what);
        if (fd < 0) {
            snprintf(why, sizeof why, "rank 0 did not answer: %s", what);
            if (strata__rdzv_pause(strata__rdzv_now() + RETRY_S, o) != 0)
                break;
            continue;
        }
        char host[NI_MAXHOST] = "?";
        uint8_t msg[STRATA_RDZV_HDR + STRATA_RDZV_REG_MAX];
        uint8_t nonce[STRATA_RDZV_NONCE];
        size_t len = 0;
        int fam, rc = challenge(ep, fd, world, rank, deadline, o, nonce,
                                &forged, why, sizeof why);
        if (rc != 0) {
            close(fd);
            if (rc != 1)
                return rc;
            if (strata__rdzv_pause(strata__rdzv_now() + RETRY_S, o) != 0)
                break;
            continue;
        }
        rc = 1;
        if (strata__rdzv_local_host(fd, &fam, host, sizeof host) != 0 ||
            strata__rdzv_own_address(fam, host, mine, sizeof mine) != 0 ||
            !(len = strata__rdzv_register(msg, world, rank, mine))) {
            ERR("at %s: no free port for this task's transports on %s",
                ep->text, host);
            close(fd);
            return STRATA_EIO;
        }
        if (o->auth) { /* the tag after the body, in the length */
            strata__rdzv_put_hdr(msg, STRATA_RDZV_REGISTER, (uint32_t)(
                len - STRATA_RDZV_HDR + STRATA_RDZV_TAG));
            strata__rdzv_tag(o->auth, 0, STRATA_RDZV_REGISTER, nonce,
                             msg + STRATA_RDZV_HDR, len - STRATA_RDZV_HDR,
                             msg + len);
            len += STRATA_RDZV_TAG;
        }
        if (xfer(fd, msg, len, 1, deadline, o) == 0)
            rc = strata__rdzv_answer(c, ep, fd, mine, nonce, deadline, o,
                                     &forged, why, sizeof why);
        else
            snprintf(why, sizeof why, "rank 0 took no REGISTER");
        if (rc == 0 && o->late) { /* kept: rank 0's word after the table */
            strata__rdzv_late_t *l = NULL;
            rc = strata__rdzv_late_new(&l, ep->text, world, rank, o->auth);
            if (rc == 0)
                rc = strata__rdzv_late_keep(l, fd, 0, nonce, ep->text, NULL);
            if (rc == 0) {
                *o->late = l;
                fd = -1;
            } else {
                ERR("at %s: out of memory", ep->text);
                strata__rdzv_late_end(l);
            }
        }
        if (fd >= 0)
            close(fd);
        if (rc == 0)
            strata__log(STRATA_LOG_DEBUG, WHO, "at %s: rank %u of %u is %s "
                        "(%.1f s)", ep->text, rank, world, mine,
                        strata__rdzv_now() - t0);
        if (rc != 1)
            return rc;
        if (strata__rdzv_pause(strata__rdzv_now() + RETRY_S, o) != 0)
            break;
    }
    strata__log(STRATA_LOG_WARN, WHO, "at %s: stopped on request while "
                "waiting for the table", ep->text);
    return STRATA_ESTOPPED;
}

