/* The rendezvous, rank 0's side (rendezvous.h): serve at exactly the
 * rendezvous address, challenge every connection, take authenticated
 * REGISTERs from every other task, drop strangers, refuse what does not
 * fit, end at once when two tasks claim one rank, and send the table once
 * every rank is in -- or, at the deadline, tell every registered task who
 * is missing. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4, struct ucred */
#endif
#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "base/fault.h"
#include "rdzv_net.h"

#define ERR(...) strata__log(STRATA_LOG_ERROR, RDZV_WHO, __VA_ARGS__)
#define WHO RDZV_WHO

#define NOTIFY_S    1.0  /* telling registered tasks why it failed      */
#define EXTRA_CONNS 64   /* connections beyond one per task             */
#define LOG_FIRST   10   /* strangers logged one by one, then           */
#define LOG_EVERY   1000 /* one line per this many                      */
#define LINGER_S    3.0  /* after two claims of a rank: tell late tasks   */
#define RESOLVE_FIRST_S 0.2 /* rank 0's own name: first wait, doubled ...  */
#define RESOLVE_MAX_S   5.0 /* ... up to this                             */

typedef struct conn {
    int            fd;
    char           from[96];
    double         hello_by;  /* must have registered by then             */
    uint8_t        nonce[STRATA_RDZV_NONCE]; /* this connection's       */
    uint8_t        chal[STRATA_RDZV_HDR + 1 + STRATA_RDZV_NONCE];
    uint8_t       *table;     /* its own TABLE (tagged for it), malloc'd  */
    uint8_t        in[STRATA_RDZV_HDR + STRATA_RDZV_REG_MAX];
    size_t         got;
    strata__rdzv_hdr_t hdr;
    int32_t        rank;      /* -1: not registered                       */
    int32_t        peer;      /* the rank its REGISTER authenticated as:
                                 its REFUSED is tagged for it; -1 none    */
    const uint8_t *out;       /* the reply being sent                     */
    uint8_t        refusal[STRATA_RDZV_HDR + 1 + STRATA_RDZV_MAX_REASON +
                           STRATA_RDZV_TAG];
    size_t         out_len, out_at;
    int            closing;   /* refused: close once the reply is out     */
} conn_t;

typedef struct server {
    const strata__rdzv_opts_t *o;
    const strata__rdzv_ep_t *ep;
    int               lfd;
    uint32_t          world, nreg;  /* nreg counts rank 0 itself          */
    char            **addr;         /* world entries; NULL: not yet       */
    conn_t           *conns;
    int               nconns, cap;
    int               complete;     /* the table is out: keep addr as is  */
    unsigned long long strangers;
    const strata__rdzv_auth_t *auth; /* NULL: not authenticated           */
    double            deadline;     /* of the whole rendezvous            */
    char              fatal[768];   /* two claims of a rank: why          */
} server_t;

/* A connection that is not one of the job's tasks: dropped and counted,
 * never fatal. */
static void stranger(server_t *s, conn_t *k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void stranger(server_t *s, conn_t *k, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    s->strangers++;
    if (s->strangers <= LOG_FIRST || s->strangers % LOG_EVERY == 0)
        strata__log(STRATA_LOG_WARN, WHO, "at %s: dropped %s: %s (%llu so "
                    "far; the rendezvous goes on)", s->ep->text, k->from, why,
                    s->strangers);
    close(k->fd);
    k->fd = -1;
}

/* A registered task that left (or misbehaved) before the table: its rank
 * is free again (a restarted task takes it). */
static void withdraw(server_t *s, conn_t *k, const char *what)
{
    if (k->rank > 0 && !s->complete && !s->fatal[0]) {
        strata__log(STRATA_LOG_WARN, WHO, "at %s: rank %d (%s) %s before "
                    "every task had registered; its rank is free again",
                    s->ep->text, (int)k->rank, k->from, what);
        free(s->addr[k->rank]);
        s->addr[k->rank] = NULL;
        s->nreg--;
        k->rank = -1;
    }
    close(k->fd);
    k->fd = -1;
}

/* A REFUSED into k->refusal, tagged when k's peer is authenticated (a
 * task that authenticates drops an untagged one: a forger's cannot end
 * it); its length. */
static size_t refusal(const server_t *s, conn_t *k, int why,
                      const char *reason)
{
    size_t n = strata__rdzv_refused(k->refusal, why, reason);
    if (!s->auth || k->peer <= 0)
        return n;
    strata__rdzv_put_hdr(k->refusal, STRATA_RDZV_REFUSED,
                         (uint32_t)(n - STRATA_RDZV_HDR + STRATA_RDZV_TAG));
    strata__rdzv_tag(s->auth, (uint32_t)k->peer, STRATA_RDZV_REFUSED,
                     k->nonce, k->refusal + STRATA_RDZV_HDR,
                     n - STRATA_RDZV_HDR, k->refusal + n);
    return n + STRATA_RDZV_TAG;
}

/* Queue a REFUSED on k and close once it is sent. */
static void tell(const server_t *s, conn_t *k, int why, const char *reason)
{
    k->out_len = refusal(s, k, why, reason);
    k->out = k->refusal;
    k->out_at = 0;
    k->closing = 1;
}

/* Answer with REFUSED and close once it is sent; rank 0 goes on. */
static void refuse(server_t *s, conn_t *k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void refuse(server_t *s, conn_t *k, const char *fmt, ...)
{
    char why[STRATA_RDZV_MAX_REASON + 1];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    strata__log(STRATA_LOG_WARN, WHO, "at %s: refused %s: %s (the "
                "rendezvous goes on)", s->ep->text, k->from, why);
    tell(s, k, STRATA_RDZV_WHY_CONFIG, why);
}

/* A REGISTER whose tag does not verify: a stranger (counted, named, rate-
 * limited), told so in one best-effort, untagged write (a task of this job
 * with other keys cannot verify it: it names it when it times out). */
static void unauthenticated(server_t *s, conn_t *k, uint32_t rank)
{
    char why[STRATA_RDZV_MAX_REASON];
    snprintf(why, sizeof why, "its REGISTER as rank %u is not authenticated "
             "with %s (a stranger, or a node with other keys or another "
             "token)", rank, strata__rdzv_auth_name(s->auth->kind));
    size_t n = strata__rdzv_refused(k->refusal, STRATA_RDZV_WHY_AUTH, why);
    (void)send(k->fd, k->refusal, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    stranger(s, k, "%s", why);
}

/* The connection that holds `rank`, or NULL. */
static conn_t *holder(server_t *s, uint32_t rank)
{
    for (int i = 0; i < s->nconns; i++)
        if (s->conns[i].fd >= 0 && s->conns[i].rank == (int32_t)rank)
            return &s->conns[i];
    return NULL;
}

/* k's peer hung up (a task that restarts leaves before it comes back). */
static int gone(const conn_t *k)
{
    char c;
    ssize_t n = recv(k->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                      errno != EINTR);
}

/* A second authenticated claim of `rank`: not a stranger but two tasks of
 * the job with one rank. The rendezvous ends for everyone (rendezvous.h). */
static void two_claims(server_t *s, conn_t *k, uint32_t rank,
                       const char *addr)
{
    conn_t *old = holder(s, rank);
    snprintf(s->fatal, sizeof s->fatal, "rank %u is claimed twice: by %.96s "
             "(address %.100s) and by %.96s (address %.100s): two nodes given "
             "the same --node-rank, or a task started twice? The rendezvous "
             "ends here", rank, old ? old->from : "?", s->addr[rank], k->from,
             addr);
    ERR("at %s: %s", s->ep->text, s->fatal);
    tell(s, k, STRATA_RDZV_WHY_CONFIG, s->fatal);
}

static void on_register(server_t *s, conn_t *k)
{
    uint32_t world, rank;
    char addr[STRATA_RDZV_MAX_ADDR + 1], why[256];
    const uint8_t *body = k->in + STRATA_RDZV_HDR;
    size_t len = k->hdr.len;
    if (s->auth && len <= STRATA_RDZV_TAG) {
        stranger(s, k, "a REGISTER of %zu bytes, without its tag", len);
        return;
    }
    len -= s->auth ? STRATA_RDZV_TAG : 0;
    if (strata__rdzv_register_parse(body, len, &world, &rank, addr, why,
                                    sizeof why) != 0) {
        stranger(s, k, "malformed REGISTER: %s", why);
        return;
    }
    if (s->auth && rank > 0 && rank < s->world &&
        !strata__rdzv_tag_ok(s->auth, rank, STRATA_RDZV_REGISTER, k->nonce,
                             body, len, body + len)) {
        unauthenticated(s, k, rank);
        return;
    }
    if (rank > 0 && rank < s->world)
        k->peer = (int32_t)rank; /* authenticated (or nobody is) */
    if (s->fatal[0]) { /* two claims of a rank ended it: say why */
        tell(s, k, STRATA_RDZV_WHY_CONFIG, s->fatal);
        return;
    }
    if (world != s->world) {
        refuse(s, k, "it registered as rank %u of %u tasks, but this job has "
               "%u (the nodes disagree on the world size)", rank, world,
               s->world);
        return;
    }
    if (rank == 0 || rank >= world) {
        refuse(s, k, rank ? "rank %u is out of range for %u tasks"
                          : "rank %u is the task serving the rendezvous: two "
                            "tasks with rank 0? (%u tasks)", rank, world);
        return;
    }
    for (uint32_t r = 0; r < s->world; r++)
        if (s->addr[r] && strcmp(s->addr[r], addr) == 0) {
            refuse(s, k, "its address %s is already rank %u's", addr, r);
            return;
        }
    conn_t *old = s->addr[rank] ? holder(s, rank) : NULL;
    if (old && gone(old))
        withdraw(s, old, "left");
    if (s->addr[rank]) {
        two_claims(s, k, rank, addr);
        return;
    }
    assert(rank > 0 && rank < s->world && !s->addr[rank]); /* checked above */
    if (STRATA_FAULT(ALLOC) || !(s->addr[rank] = strdup(addr))) {
        stranger(s, k, "out of memory");
        return;
    }
    k->rank = (int32_t)rank;
    s->nreg++;
    strata__log(STRATA_LOG_DEBUG, WHO, "at %s: rank %u is %s (from %s), %u "
                "of %u", s->ep->text, rank, addr, k->from, s->nreg, s->world);
}

/* What came in on k: a header, then its body; anything else is hostile. */
static void on_input(server_t *s, conn_t *k)
{
    size_t need = k->got < STRATA_RDZV_HDR ? STRATA_RDZV_HDR
                                           : STRATA_RDZV_HDR + k->hdr.len;
    if (k->rank >= 0 || k->closing) {
        /* A registered (or refused) task has nothing more to say. */
        uint8_t junk[64];
        ssize_t n = read(k->fd, junk, sizeof junk);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            withdraw(s, k, "left");
        else if (n > 0 && k->rank >= 0)
            withdraw(s, k, "sent more after its REGISTER: dropped");
        return;
    }
    ssize_t n = STRATA_FAULT(IO) ? -1 : read(k->fd, k->in + k->got, need - k->got);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        if (k->got)
            stranger(s, k, "closed after %zu bytes of a message", k->got);
        else
            stranger(s, k, "closed without a word");
        return;
    }
    k->got += (size_t)n;
    if (k->got == STRATA_RDZV_HDR) {
        int rc = strata__rdzv_get_hdr(k->in, s->world, &k->hdr);
        if (rc == -1)
            stranger(s, k, "not a strata rendezvous message (it began "
                     "%02x %02x %02x %02x)", k->in[0], k->in[1], k->in[2],
                     k->in[3]);
        else if (rc == -2)
            refuse(s, k, "rendezvous protocol version %d; rank 0 speaks %d "
                   "(run the same strata on every node)", k->hdr.version,
                   STRATA_RDZV_VERSION);
        else if (rc == -3 || k->hdr.type != STRATA_RDZV_REGISTER)
            stranger(s, k, "unexpected message type %d", k->hdr.type);
        else if (rc == -4)
            stranger(s, k, "a body of %u bytes announced, at most %zu",
                     k->hdr.len, strata__rdzv_body_max(k->hdr.type, s->world));
        if (rc != 0 || k->hdr.type != STRATA_RDZV_REGISTER)
            return;
    }
    if (k->got == STRATA_RDZV_HDR + k->hdr.len && k->got > STRATA_RDZV_HDR)
        on_register(s, k);
    else if (k->got == STRATA_RDZV_HDR && k->hdr.len == 0)
        stranger(s, k, "an empty REGISTER");
}

static void on_output(server_t *s, conn_t *k)
{
    ssize_t n = write(k->fd, k->out + k->out_at, k->out_len - k->out_at);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        withdraw(s, k, "left");
        return;
    }
    k->out_at += (size_t)n;
    if (k->out_at < k->out_len)
        return;
    k->out = NULL;
    if (k->closing && k->rank < 0) {
        /* A refused peer may have sent more than we read: closing now
         * would reset the connection and lose the refusal. Half-close,
         * and let it hang up (on_input) or time out. */
        shutdown(k->fd, SHUT_WR);
        k->hello_by = strata__rdzv_now() + 1.0;
    } else if (k->closing) {
        close(k->fd);
        k->fd = -1;
    }
}

static void on_accept(server_t *s)
{
    for (int round = 0; round < EXTRA_CONNS; round++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int fd = accept4(s->lfd, (struct sockaddr *)&ss, &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        conn_t k = { .fd = fd, .rank = -1, .peer = -1,
                     .hello_by = strata__rdzv_now() + s->o->hello_s };
        strata__rdzv_peer_text((struct sockaddr *)&ss, len, fd, k.from,
                               sizeof k.from);
        unsigned uid = 0;
        if (s->nconns == s->cap) {
            stranger(s, &k, "too many connections at once (%d)", s->cap);
        } else if (s->ep->local && !strata__rdzv_peer_is_us(fd, &uid)) {
            stranger(s, &k, "uid %u is not this job's user", uid);
        } else {
            /* Every connection starts with its own challenge. */
            conn_t *c = &s->conns[s->nconns++];
            *c = k;
            randombytes_buf(c->nonce, sizeof c->nonce);
            c->out_len = strata__member_challenge_encode(
                c->chal, s->auth ? s->auth->kind : STRATA_RDZV_AUTH_NONE,
                c->nonce);
            c->out = c->chal;
        }
    }
}

/* One poll of the listener and every connection, then its consequences. */
static void serve_round(server_t *s, double until)
{
    struct pollfd *p = STRATA_FAULT(ALLOC) ? NULL
                                           : malloc(((size_t)s->nconns + 1) * sizeof *p);
    if (!p) {
        poll(NULL, 0, strata__rdzv_slice_ms(until));
        return;
    }
    int np = 0;
    if (s->lfd >= 0)
        p[np++] = (struct pollfd){ .fd = s->lfd, .events = POLLIN };
    int first = np;
    for (int i = 0; i < s->nconns; i++)
        p[np++] = (struct pollfd){ .fd = s->conns[i].fd, .events =
                                   (short)(POLLIN |
                                           (s->conns[i].out ? POLLOUT : 0)) };
    int r = poll(p, (nfds_t)np, strata__rdzv_slice_ms(until));
    for (int i = 0; r > 0 && i < s->nconns; i++) {
        conn_t *k = &s->conns[i];
        short ev = p[first + i].revents;
        if (k->fd >= 0 && (ev & POLLOUT) && k->out)
            on_output(s, k);
        if (k->fd >= 0 && (ev & (POLLIN | POLLHUP | POLLERR)))
            on_input(s, k);
    }
    if (r > 0 && first && p[0].revents)
        on_accept(s);
    free(p);
    double t = strata__rdzv_now();
    for (int i = 0; i < s->nconns; i++) {
        conn_t *k = &s->conns[i];
        if (k->fd < 0 || k->rank >= 0 || t <= k->hello_by)
            continue;
        if (k->closing) { /* refused, and told so */
            close(k->fd);
            k->fd = -1;
        } else if (k->got)
            stranger(s, k, "sent %zu byte%s of a message in %g s", k->got,
                     k->got == 1 ? "" : "s", s->o->hello_s);
        else
            stranger(s, k, "sent nothing in %g s", s->o->hello_s);
    }
    int j = 0; /* forget the closed ones */
    for (int i = 0; i < s->nconns; i++) {
        conn_t *k = &s->conns[i];
        if (k->fd < 0) {
            free(k->table);
            k->table = NULL;
            continue;
        }
        /* a reply queued from the struct itself (challenge, refusal)
         * moves with it */
        uintptr_t at = (uintptr_t)k->out, base = (uintptr_t)k;
        int inside = k->out && at >= base && at < base + sizeof *k;
        size_t in = inside ? (size_t)(at - base) : 0;
        if (j != i) {
            s->conns[j] = *k;
            if (inside)
                s->conns[j].out = (const uint8_t *)&s->conns[j] + in;
        }
        j++;
    }
    s->nconns = j;
}

/* Bind exactly the rendezvous's address: the name's addresses, never
 * every interface. *fam, host: the address bound, numeric. */
static int serve_listen(server_t *s, int *fam, char *host, size_t hn)
{
    const strata__rdzv_ep_t *ep = s->ep;
    if (ep->local) {
        struct sockaddr_un su;
        socklen_t len = strata__rdzv_unix_addr(ep, &su);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                        0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&su, len) != 0 ||
            listen(fd, 128) != 0) {
            ERR("rank 0 cannot serve the rendezvous at %s: %s%s", ep->text,
                strerror(errno), errno == EADDRINUSE
                ? " (another process holds this job's name)" : "");
            if (fd >= 0)
                close(fd);
            return STRATA_EIO;
        }
        s->lfd = fd;
        *fam = AF_INET;
        snprintf(host, hn, "127.0.0.1");
        return 0;
    }
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_NUMERICSERV };
    struct addrinfo *ai = NULL;
    /* Its own name may not resolve yet (a starting pod's DNS record, a
     * headless Service): again with a bounded back-off until the
     * rendezvous's deadline, as the other tasks retry theirs. */
    double wait = RESOLVE_FIRST_S;
    int g, said = 0;
    while ((g = getaddrinfo(ep->host, ep->port, &hints, &ai)) != 0 &&
           (g == EAI_NONAME || g == EAI_AGAIN || g == EAI_FAIL) &&
           strata__rdzv_now() < s->deadline) {
        if (!said++)
            strata__log(STRATA_LOG_WARN, WHO, "rank 0 cannot resolve its "
                        "own name '%s' yet (%s): trying again for up to %.0f "
                        "s ([cluster] rendezvous_timeout_s)", ep->host,
                        gai_strerror(g), s->deadline - strata__rdzv_now());
        /* the last try is at the deadline, not a back-off before it */
        double until = strata__rdzv_now() + wait;
        if (strata__rdzv_pause(until < s->deadline ? until : s->deadline,
                               s->o) != 0)
            return STRATA_ESTOPPED;
        wait = wait * 2 < RESOLVE_MAX_S ? wait * 2 : RESOLVE_MAX_S;
    }
    if (g != 0) {
        ERR("rank 0 cannot serve the rendezvous at %s: cannot resolve '%s'%s: "
            "%s", ep->text, ep->host, said ? " within the rendezvous timeout"
                                           : "", gai_strerror(g));
        return STRATA_ECONFIG;
    }
    int in_use = 0;
    char tried[256] = "";
    for (struct addrinfo *a = ai; a && s->lfd < 0; a = a->ai_next) {
        char num[NI_MAXHOST];
        if (getnameinfo(a->ai_addr, a->ai_addrlen, num, sizeof num, NULL, 0,
                        NI_NUMERICHOST) != 0)
            continue;
        size_t tl = strlen(tried);
        if (tl + 64 < sizeof tried)
            snprintf(tried + tl, sizeof tried - tl, "%s%.60s", tl ? ", " : "",
                     num);
        int fd = socket(a->ai_family,
                        SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int one = 1;
        if (fd < 0)
            continue;
        /* A restarted job binds again despite its last one's TIME_WAIT. */
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (a->ai_family == AF_INET6)
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 128) == 0) {
            s->lfd = fd;
            *fam = a->ai_family;
            snprintf(host, hn, "%s", num);
        } else {
            in_use |= errno == EADDRINUSE;
            close(fd);
        }
    }
    freeaddrinfo(ai);
    if (s->lfd >= 0)
        return 0;
    if (in_use)
        ERR("rank 0 cannot serve the rendezvous at %s: port %s is in use on "
            "%s: choose a free port", ep->text, ep->port, tried);
    else
        ERR("rank 0 cannot serve the rendezvous at %s: '%s' (%s) is not an "
            "address of this machine: rank 0 must run on the rendezvous "
            "host", ep->text, ep->host, tried[0] ? tried : "no address");
    return in_use ? STRATA_EIO : STRATA_ECONFIG;
}

/* "2, 5-7" of the ranks not registered; the count into *n. */
static void missing(const server_t *s, char *out, size_t cap, uint32_t *n)
{
    size_t at = 0;
    *n = 0;
    out[0] = '\0';
    for (uint32_t r = 0; r < s->world; r++) {
        if (s->addr[r])
            continue;
        uint32_t e = r;
        while (e + 1 < s->world && !s->addr[e + 1])
            e++;
        *n += e - r + 1;
        if (at + 32 < cap)
            at += (size_t)(e > r ? snprintf(out + at, cap - at, "%s%u-%u",
                                            at ? ", " : "", r, e)
                                 : snprintf(out + at, cap - at, "%s%u",
                                            at ? ", " : "", r));
        else if (at + 4 < cap && out[at - 1] != '.')
            at += (size_t)snprintf(out + at, cap - at, ", ...");
        r = e;
    }
}

/* Send what every connection has queued, until sent or t. */
static void flush_all(server_t *s, double t)
{
    for (;;) {
        int pending = 0;
        for (int i = 0; i < s->nconns; i++)
            pending |= s->conns[i].fd >= 0 && s->conns[i].out != NULL;
        if (!pending || strata__rdzv_now() >= t)
            return;
        serve_round(s, t);
    }
}

/* Tell every registered task why the rendezvous failed. */
static void notify(server_t *s, int why, const char *reason)
{
    if (s->lfd >= 0)
        close(s->lfd);
    s->lfd = -1;
    for (int i = 0; i < s->nconns; i++) {
        conn_t *k = &s->conns[i];
        if (k->rank < 0 || k->closing)
            continue;
        k->out_len = refusal(s, k, why, reason);
        k->out = k->refusal;
        k->out_at = 0;
        k->closing = 1;
    }
    flush_all(s, strata__rdzv_now() + NOTIFY_S);
}

int strata__rdzv_serve(strata__cluster_t *c, const strata__rdzv_ep_t *ep,
                       const strata__rdzv_opts_t *o)
{
    server_t s = { .o = o, .ep = ep, .lfd = -1, .auth = o->auth,
                   .world = (uint32_t)c->pub.ntasks };
    double fatal_at = 0;
    double t0 = strata__rdzv_now(), deadline = t0 + o->timeout_s;
    s.deadline = deadline;
    s.cap = c->pub.ntasks + EXTRA_CONNS;
    s.addr = STRATA_FAULT(ALLOC) ? NULL : calloc(s.world, sizeof *s.addr);
    s.conns = STRATA_FAULT(ALLOC) ? NULL : calloc((size_t)s.cap, sizeof *s.conns);
    char host[NI_MAXHOST], own[STRATA_RDZV_MAX_ADDR + 1];
    int fam = 0, rc = s.addr && s.conns ? serve_listen(&s, &fam, host,
                                                       sizeof host)
                                        : STRATA_ENOMEM;
    if (rc == STRATA_ENOMEM)
        ERR("rank 0 at %s: out of memory for %u tasks", ep->text, s.world);
    if (rc == 0 && sodium_init() < 0) {
        ERR("rank 0 at %s: libsodium cannot start", ep->text);
        rc = STRATA_EINTERNAL;
    }
    if (rc == 0 && strata__rdzv_own_address(fam, host, own, sizeof own) != 0) {
        ERR("rank 0: no free port on %s for its own transports", host);
        rc = STRATA_EIO;
    }
    if (rc == 0 && (STRATA_FAULT(ALLOC) || !(s.addr[0] = strdup(own)))) {
        ERR("rank 0 at %s: out of memory", ep->text);
        rc = STRATA_ENOMEM;
    }
    s.nreg = rc == 0;
    while (rc == 0 && (s.nreg < s.world || s.fatal[0])) {
        char list[256], reason[STRATA_RDZV_MAX_REASON];
        uint32_t n;
        if (s.fatal[0] && !fatal_at) {
            /* Two claims of a rank: every registered task hears it now,
             * those still to come for LINGER_S (on_register). */
            fatal_at = strata__rdzv_now();
            for (int i = 0; i < s.nconns; i++)
                if (s.conns[i].fd >= 0 && s.conns[i].rank > 0 &&
                    !s.conns[i].closing)
                    tell(&s, &s.conns[i], STRATA_RDZV_WHY_CONFIG, s.fatal);
        }
        if (fatal_at && strata__rdzv_now() >= fatal_at + LINGER_S) {
            notify(&s, STRATA_RDZV_WHY_CONFIG, s.fatal);
            rc = STRATA_ECONFIG;
        } else if (strata__rdzv_stopped(o)) {
            strata__log(STRATA_LOG_WARN, WHO, "at %s: stopped on request "
                        "while waiting for the tasks", ep->text);
            notify(&s, STRATA_RDZV_WHY_STOPPED, "rank 0 was stopped");
            rc = STRATA_ESTOPPED;
        } else if (strata__rdzv_now() >= deadline) {
            missing(&s, list, sizeof list, &n);
            snprintf(reason, sizeof reason, "rank%s %s (%u of %u task%s) did "
                     "not register within %g s ([cluster] "
                     "rendezvous_timeout_s)", n == 1 ? "" : "s", list, n,
                     s.world, s.world == 1 ? "" : "s", o->timeout_s);
            ERR("at %s: %s", ep->text, reason);
            notify(&s, STRATA_RDZV_WHY_TIMEOUT, reason);
            rc = STRATA_ETIMEDOUT;
        } else {
            serve_round(&s, deadline);
        }
    }
    int kept_lfd = -1; /* the listener, for the late claims (rdzv_late.c) */
    if (rc == 0) {
        /* Everyone is here: the table to every task, then done. */
        if (o->late)
            kept_lfd = s.lfd;
        else
            close(s.lfd);
        s.lfd = -1;
        s.complete = 1;
        size_t len;
        uint8_t *table = strata__rdzv_table(s.addr, s.world, &len);
        for (int i = 0; table && i < s.nconns; i++) {
            conn_t *k = &s.conns[i];
            if (k->rank <= 0)
                continue;
            k->out = table;
            k->out_len = len;
            if (s.auth && (k->table = malloc(len + STRATA_RDZV_TAG))) {
                /* its own copy, tagged for its connection */
                memcpy(k->table, table, len);
                strata__rdzv_put_hdr(k->table, STRATA_RDZV_TABLE, (uint32_t)(
                    len - STRATA_RDZV_HDR + STRATA_RDZV_TAG));
                strata__rdzv_tag(s.auth, (uint32_t)k->rank, STRATA_RDZV_TABLE,
                                 k->nonce, table + STRATA_RDZV_HDR,
                                 len - STRATA_RDZV_HDR, k->table + len);
                k->out = k->table;
                k->out_len = len + STRATA_RDZV_TAG;
            } else if (s.auth) {
                k->out = NULL; /* out of memory: it hears nothing */
            }
            k->out_at = 0;
            k->closing = !o->late; /* kept: rank 0's word after the table */
        }
        if (table)
            flush_all(&s, strata__rdzv_now() + o->timeout_s);
        for (int i = 0; i < s.nconns; i++)
            if (s.conns[i].fd >= 0 && s.conns[i].rank > 0 && s.conns[i].out)
                strata__log(STRATA_LOG_WARN, WHO, "at %s: rank %d (%s) did "
                            "not take the table", ep->text,
                            (int)s.conns[i].rank, s.conns[i].from);
        free(table);
        if (!table) {
            ERR("at %s: out of memory for the table of %u tasks", ep->text,
                s.world);
            rc = STRATA_ENOMEM;
        }
    }
    if (rc == 0 && o->late) {
        strata__rdzv_late_t *l = NULL;
        rc = strata__rdzv_late_new(&l, ep->text, s.world, 0, s.auth);
        for (int i = 0; rc == 0 && i < s.nconns; i++) {
            conn_t *k = &s.conns[i];
            if (k->fd < 0 || k->rank <= 0 || k->out)
                continue;
            rc = strata__rdzv_late_keep(l, k->fd, k->rank, k->nonce, k->from,
                                        s.addr[k->rank]);
            if (rc == 0)
                k->fd = -1; /* l's now */
        }
        if (rc == 0) {
            strata__rdzv_late_listen(l, kept_lfd);
            kept_lfd = -1;
            *o->late = l;
        } else {
            ERR("at %s: out of memory", ep->text);
            strata__rdzv_late_end(l);
        }
    }
    if (kept_lfd >= 0)
        close(kept_lfd);
    if (rc == 0) {
        for (uint32_t r = 0; r < s.world; r++) {
            free((char *)c->tasks[r].address);
            c->tasks[r].address = s.addr[r];
            s.addr[r] = NULL;
        }
        strata__log(STRATA_LOG_INFO, WHO, "at %s: %u tasks registered in "
                    "%.1f s; this one is %s", ep->text, s.world,
                    strata__rdzv_now() - t0, c->tasks[0].address);
    }
    for (int i = 0; i < s.nconns; i++) {
        if (s.conns[i].fd >= 0)
            close(s.conns[i].fd);
        free(s.conns[i].table);
    }
    if (s.lfd >= 0)
        close(s.lfd);
    for (uint32_t r = 0; s.addr && r < s.world; r++)
        free(s.addr[r]);
    free(s.addr);
    free(s.conns);
    return rc;
}

