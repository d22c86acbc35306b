/* The rendezvous after the table (rendezvous.h): rank 0 keeps serving its
 * address and keeps each task's connection, every task keeps its
 * connection to rank 0, for the run's life. A task that claims a rank
 * after the table went out (a node given a --node-rank already taken,
 * started late) is not a stranger: rank 0 ends the job with one error
 * naming both addresses, tells the claimant and every task (a REFUSED
 * tagged for each connection), and each ends its run with that line. A
 * stranger is dropped, counted and named, as before the table. One thread
 * per task; every wait is a poll() of at most RDZV_SLICE_MS. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4 */
#endif
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sodium.h>

#include "rdzv_net.h"

#define ERR(...) strata__log(STRATA_LOG_ERROR, RDZV_WHO, __VA_ARGS__)
#define WHO RDZV_WHO

#define LATE_HELLO_S 2.0  /* a late connection registers within this     */
#define LATE_TELL_S  1.0  /* telling every task the job ends             */
#define VERDICT_S    1.0  /* a stopped task waits this long for rank 0's  */
#define LOG_FIRST    10
#define LOG_EVERY    1000

typedef struct late_peer {
    int     fd;
    int32_t rank;
    uint8_t nonce[STRATA_RDZV_NONCE];
    char    from[96];
} late_peer_t;

struct strata__rdzv_late {
    int                 rank0, lfd;    /* rank 0: its listener           */
    int                 local;         /* an abstract Unix socket         */
    late_peer_t        *peer;          /* rank 0: the tasks; else rank 0 */
    int                 npeers;
    uint32_t            world, self;
    char              **addr;          /* rank 0: the table              */
    strata__rdzv_auth_t auth;          /* a copy; kind 0: none            */
    char                ep[300];
    unsigned long long  strangers;
    atomic_int         *stop;
    atomic_int          quit, fatal, watching;
    pthread_t           th;
    int                 started;
};

int strata__rdzv_late_new(strata__rdzv_late_t **out, const char *ep,
                          uint32_t world, uint32_t self,
                          const strata__rdzv_auth_t *auth)
{
    strata__rdzv_late_t *l = calloc(1, sizeof *l);
    if (!l)
        return STRATA_ENOMEM;
    l->lfd = -1;
    l->world = world;
    l->self = self;
    l->rank0 = self == 0;
    snprintf(l->ep, sizeof l->ep, "%s", ep);
    l->local = !strncmp(ep, STRATA_RDZV_UNIX, strlen(STRATA_RDZV_UNIX));
    l->peer = calloc(world ? world : 1, sizeof *l->peer);
    l->addr = l->rank0 ? calloc(world, sizeof *l->addr) : NULL;
    if (auth && auth->key && (l->auth.key = malloc((size_t)world * 32))) {
        memcpy(l->auth.key, auth->key, (size_t)world * 32);
        l->auth.kind = auth->kind;
        l->auth.world = world;
    }
    if (!l->peer || (l->rank0 && !l->addr) || (auth && !l->auth.key)) {
        strata__rdzv_late_end(l);
        return STRATA_ENOMEM;
    }
    *out = l;
    return 0;
}

int strata__rdzv_late_keep(strata__rdzv_late_t *l, int fd, int32_t rank,
                           const uint8_t *nonce, const char *from,
                           const char *addr)
{
    if (l->npeers >= (int)l->world)
        return STRATA_EINTERNAL;
    late_peer_t *p = &l->peer[l->npeers++];
    p->fd = fd;
    p->rank = rank;
    memcpy(p->nonce, nonce, sizeof p->nonce);
    snprintf(p->from, sizeof p->from, "%s", from);
    if (l->rank0 && rank > 0 && (uint32_t)rank < l->world && addr &&
        !(l->addr[rank] = strdup(addr)))
        return STRATA_ENOMEM;
    return 0;
}

void strata__rdzv_late_listen(strata__rdzv_late_t *l, int lfd)
{
    l->lfd = lfd;
}

/* n bytes in or out of a non-blocking fd before t: 0, else -1. */
static int io_until(int fd, void *buf, size_t n, int out, double t)
{
    size_t at = 0;
    if (fd < 0)
        return -1;
    while (at < n) {
        struct pollfd p = { .fd = fd, .events = out ? POLLOUT : POLLIN };
        int ms = strata__rdzv_slice_ms(t);
        if (ms <= 0 && strata__rdzv_now() >= t)
            return -1;
        if (poll(&p, 1, ms) <= 0)
            continue;
        ssize_t k = out ? send(fd, (char *)buf + at, n - at,
                               MSG_NOSIGNAL | MSG_DONTWAIT)
                        : recv(fd, (char *)buf + at, n - at, MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (k <= 0)
            return -1;
        at += (size_t)k;
    }
    return 0;
}

/* A REFUSED for rank `rank` on the connection of `nonce`, tagged when the
 * rendezvous authenticates; into out[HDR + 1 + MAX_REASON + TAG]. */
static size_t late_refusal(const strata__rdzv_late_t *l, uint8_t *out,
                           int32_t rank, const uint8_t *nonce, int why,
                           const char *reason)
{
    size_t n = strata__rdzv_refused(out, why, reason);
    if (!l->auth.kind || rank <= 0)
        return n;
    strata__rdzv_put_hdr(out, STRATA_RDZV_REFUSED,
                         (uint32_t)(n - STRATA_RDZV_HDR + STRATA_RDZV_TAG));
    strata__rdzv_tag(&l->auth, (uint32_t)rank, STRATA_RDZV_REFUSED, nonce,
                     out + STRATA_RDZV_HDR, n - STRATA_RDZV_HDR, out + n);
    return n + STRATA_RDZV_TAG;
}

static void stranger(strata__rdzv_late_t *l, const char *from,
                     const char *why)
{
    l->strangers++;
    if (l->strangers <= LOG_FIRST || l->strangers % LOG_EVERY == 0)
        strata__log(STRATA_LOG_WARN, WHO, "at %s: dropped %s after the "
                    "table: %s (%llu so far; the job goes on)", l->ep, from,
                    why, l->strangers);
}

/* The holder of `rank` has hung up (its task ended). */
static int holder_gone(const late_peer_t *p)
{
    char c;
    ssize_t n = recv(p->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                      errno != EINTR);
}

/* Two claims of `rank`: one error, every task told, the run stopped. */
static void two_claims(strata__rdzv_late_t *l, int fd, const char *from,
                       const uint8_t *nonce, uint32_t rank, const char *addr)
{
    const late_peer_t *h = NULL;
    for (int i = 0; i < l->npeers; i++)
        if (l->peer[i].rank == (int32_t)rank)
            h = &l->peer[i];
    char fatal[STRATA_RDZV_MAX_REASON + 128]; /* the wire cuts it at MAX */
    snprintf(fatal, sizeof fatal, "rank %u is claimed twice: by %.96s "
             "(address %.100s) and by %.96s (address %.100s), after the job "
             "had formed: two nodes given the same --node-rank, or a task "
             "started twice? The job ends here", rank, h ? h->from : "?",
             l->addr[rank] ? l->addr[rank] : "?", from, addr);
    ERR("at %s: %s", l->ep, fatal);
    uint8_t m[STRATA_RDZV_HDR + 1 + STRATA_RDZV_MAX_REASON + STRATA_RDZV_TAG];
    double t = strata__rdzv_now() + LATE_TELL_S;
    size_t n = late_refusal(l, m, (int32_t)rank, nonce,
                            STRATA_RDZV_WHY_CONFIG, fatal);
    (void)io_until(fd, m, n, 1, t);
    for (int i = 0; i < l->npeers; i++) {
        if (l->peer[i].fd < 0) /* that task has ended */
            continue;
        n = late_refusal(l, m, l->peer[i].rank, l->peer[i].nonce,
                         STRATA_RDZV_WHY_CONFIG, fatal);
        (void)io_until(l->peer[i].fd, m, n, 1, t);
    }
    atomic_store(&l->fatal, 1);
    if (l->stop)
        atomic_store(l->stop, 1);
}

/* One connection to rank 0 after the table: challenge, REGISTER, verdict. */
static void late_conn(strata__rdzv_late_t *l, int fd, const char *from)
{
    uint8_t nonce[STRATA_RDZV_NONCE];
    uint8_t m[STRATA_RDZV_HDR + STRATA_RDZV_REG_MAX];
    randombytes_buf(nonce, sizeof nonce);
    double t = strata__rdzv_now() + LATE_HELLO_S;
    size_t n = strata__member_challenge_encode(m, l->auth.kind, nonce);
    strata__rdzv_hdr_t h;
    if (io_until(fd, m, n, 1, t) != 0 ||
        io_until(fd, m, STRATA_RDZV_HDR, 0, t) != 0) {
        stranger(l, from, "no REGISTER");
        return;
    }
    if (strata__rdzv_get_hdr(m, l->world, &h) != 0 ||
        h.type != STRATA_RDZV_REGISTER || h.len == 0 ||
        io_until(fd, m + STRATA_RDZV_HDR, h.len, 0, t) != 0) {
        stranger(l, from, "not a whole REGISTER of this protocol");
        return;
    }
    const uint8_t *body = m + STRATA_RDZV_HDR;
    size_t len = h.len;
    uint32_t world, rank;
    char addr[STRATA_RDZV_MAX_ADDR + 1], why[256];
    if (l->auth.kind && len <= STRATA_RDZV_TAG) {
        stranger(l, from, "a REGISTER without its tag");
        return;
    }
    len -= l->auth.kind ? STRATA_RDZV_TAG : 0;
    if (strata__rdzv_register_parse(body, len, &world, &rank, addr, why,
                                    sizeof why) != 0) {
        stranger(l, from, why);
        return;
    }
    int in_range = world == l->world && rank > 0 && rank < l->world;
    if (l->auth.kind && (!in_range ||
                         !strata__rdzv_tag_ok(&l->auth, rank,
                                              STRATA_RDZV_REGISTER, nonce,
                                              body, len, body + len))) {
        snprintf(why, sizeof why, "its REGISTER as rank %u is not "
                 "authenticated with %s", rank,
                 strata__rdzv_auth_name(l->auth.kind));
        stranger(l, from, why);
        return;
    }
    const late_peer_t *holder = NULL;
    for (int i = 0; in_range && i < l->npeers; i++)
        if (l->peer[i].rank == (int32_t)rank)
            holder = &l->peer[i];
    if (!in_range || (holder && holder_gone(holder))) {
        char reason[STRATA_RDZV_MAX_REASON];
        snprintf(reason, sizeof reason, in_range
                 ? "rank %u registered after the job had formed, and its "
                   "first task has ended: a job formed by the rendezvous "
                   "takes no task back (start the job again)"
                 : "rank %u of %u tasks does not fit this job of %u, which "
                   "has formed", rank, world, l->world);
        strata__log(STRATA_LOG_WARN, WHO, "at %s: refused %s: %s", l->ep,
                    from, reason);
        n = late_refusal(l, m, in_range ? (int32_t)rank : -1, nonce,
                         STRATA_RDZV_WHY_CONFIG, reason);
        (void)io_until(fd, m, n, 1, strata__rdzv_now() + LATE_TELL_S);
        return;
    }
    two_claims(l, fd, from, nonce, rank, addr);
}

/* rank 0's answer on this task's connection after the table. */
static void late_answer(strata__rdzv_late_t *l, late_peer_t *p)
{
    uint8_t m[STRATA_RDZV_HDR + 1 + STRATA_RDZV_MAX_REASON + STRATA_RDZV_TAG];
    strata__rdzv_hdr_t h;
    double t = strata__rdzv_now() + LATE_HELLO_S;
    int ok = io_until(p->fd, m, STRATA_RDZV_HDR, 0, t) == 0;
    if (!ok) { /* rank 0 ended: the transports say what that means */
        close(p->fd);
        p->fd = -1;
        return;
    }
    size_t len = 0;
    char reason[STRATA_RDZV_MAX_REASON + 1] = "", bad[128];
    int why = 0;
    ok = strata__rdzv_get_hdr(m, l->world, &h) == 0 &&
         h.type == STRATA_RDZV_REFUSED &&
         io_until(p->fd, m + STRATA_RDZV_HDR, h.len, 0, t) == 0;
    len = ok ? h.len : 0;
    if (ok && l->auth.kind) {
        ok = len > STRATA_RDZV_TAG &&
             strata__rdzv_tag_ok(&l->auth, 0, STRATA_RDZV_REFUSED, p->nonce,
                                 m + STRATA_RDZV_HDR, len - STRATA_RDZV_TAG,
                                 m + STRATA_RDZV_HDR + len - STRATA_RDZV_TAG);
        len -= ok ? STRATA_RDZV_TAG : 0;
    }
    if (ok)
        ok = strata__rdzv_refused_parse(m + STRATA_RDZV_HDR, len, &why,
                                        reason, bad, sizeof bad) == 0;
    if (!ok) {
        strata__log(STRATA_LOG_WARN, WHO, "at %s: dropped a message on this "
                    "task's rendezvous connection after the table: not a "
                    "REFUSED authenticated with %s (not rank 0's); no "
                    "longer listening there", l->ep,
                    strata__rdzv_auth_name(l->auth.kind));
        close(p->fd);
        p->fd = -1;
        return;
    }
    ERR("at %s: rank 0 refused rank %u: %s", l->ep, l->self,
        reason[0] ? reason : "(no reason given)");
    atomic_store(&l->fatal, 1);
    if (l->stop)
        atomic_store(l->stop, 1);
}

static void *late_main(void *arg)
{
    strata__rdzv_late_t *l = arg;
    struct pollfd p[1 + 1024];
    while (!atomic_load(&l->quit) && !atomic_load(&l->fatal)) {
        int np = 0, first;
        if (l->lfd >= 0)
            p[np++] = (struct pollfd){ .fd = l->lfd, .events = POLLIN };
        first = np;
        for (int i = 0; i < l->npeers && np < (int)(sizeof p / sizeof *p);
             i++)
            p[np++] = (struct pollfd){ .fd = l->peer[i].fd, .events = POLLIN };
        if (np == 0)
            break;
        if (poll(p, (nfds_t)np, RDZV_SLICE_MS) <= 0)
            continue;
        for (int i = 0; i < l->npeers && first + i < np; i++) {
            late_peer_t *k = &l->peer[i];
            if (k->fd < 0 || !(p[first + i].revents &
                               (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (!l->rank0) {
                late_answer(l, k);
            } else if (holder_gone(k)) { /* the task ended */
                close(k->fd);
                k->fd = -1;
            }
        }
        if (first && (p[0].revents & POLLIN)) {
            struct sockaddr_storage ss;
            socklen_t sl = sizeof ss;
            int fd = accept4(l->lfd, (struct sockaddr *)&ss, &sl,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd >= 0) {
                char from[96];
                strata__rdzv_peer_text((struct sockaddr *)&ss, sl, fd, from,
                                       sizeof from);
                unsigned uid = 0;
                if (l->local && !strata__rdzv_peer_is_us(fd, &uid))
                    stranger(l, from, "not this job's user");
                else
                    late_conn(l, fd, from);
                close(fd);
            }
        }
        int j = 0; /* forget the closed ones */
        for (int i = 0; i < l->npeers; i++)
            if (l->peer[i].fd >= 0 || l->rank0)
                l->peer[j++] = l->peer[i];
        l->npeers = j;
    }
    atomic_store(&l->watching, 0);
    return NULL;
}

int strata__rdzv_late_start(strata__rdzv_late_t *l, atomic_int *stop)
{
    if (!l)
        return 0;
    l->stop = stop;
    atomic_store(&l->watching, 1);
    if (pthread_create(&l->th, NULL, late_main, l) != 0) {
        atomic_store(&l->watching, 0);
        strata__log(STRATA_LOG_WARN, WHO, "at %s: cannot watch the "
                    "rendezvous after the table (no thread): a late claim "
                    "of a rank goes unanswered", l->ep);
        return 0;
    }
    l->started = 1;
    return 0;
}

int strata__rdzv_late_failed(strata__rdzv_late_t *l, int stopping)
{
    if (!l)
        return 0;
    /* a run stopped by the others may end before rank 0's word reaches
     * this task's watcher: wait for it a moment */
    double t = strata__rdzv_now() + VERDICT_S;
    while (stopping && !atomic_load(&l->fatal) && atomic_load(&l->watching)
           && !l->rank0 && strata__rdzv_now() < t)
        poll(NULL, 0, 10);
    return atomic_load(&l->fatal);
}

void strata__rdzv_late_end(strata__rdzv_late_t *l)
{
    if (!l)
        return;
    atomic_store(&l->quit, 1);
    if (l->started)
        pthread_join(l->th, NULL);
    if (l->lfd >= 0)
        close(l->lfd);
    for (int i = 0; i < l->npeers; i++)
        if (l->peer[i].fd >= 0)
            close(l->peer[i].fd);
    for (uint32_t r = 0; l->addr && r < l->world; r++)
        free(l->addr[r]);
    free(l->addr);
    free(l->peer);
    strata__rdzv_auth_free(&l->auth);
    free(l);
}
