/* strata launch --elastic: the membership service of an elastic job.
 *
 * Each training process keeps one TCP connection (loopback; across
 * machines, --nnodes, node 0's launch serves at the --rendezvous address
 * and the other launches' workers connect there) and speaks the
 * membership frames of core/member/wire.h, the rendezvous's wire; what a
 * member sends is at most 512 bytes (core/member/elastic.h has its side):
 *   -> JOIN token, name, host:port, committed, timeout_ms
 *   <- GEN generation, size, rank, resume_step, then the members (name,
 *      host:port, committed), in rank order
 *   <- RESIZE generation     a later generation is due: join at your next
 *                            step boundary (the members agree on which)
 *   <- STOP why              the service gave up on the job
 *   <- END                   training is over (another member finished)
 *   -> DONE step             this member finished training
 *
 * Generations. The service forms generation g+1 when a member asks for it
 * (a JOIN: it lost a peer, or it reached the boundary of a resize), when a
 * worker that is not a member joins (a restarted or new worker), or when a
 * member's connection closes (it died). It then waits until every worker
 * it expects -- those launch has running, less those whose connection
 * closed -- has joined, and forms the generation at once if at least min
 * workers did; after the rendezvous timeout it forms it with those that
 * joined if they are at least min, else it stops the job (STOP to all, one
 * error line, launch exits 1). The step to resume from is the highest that
 * a joining member has applied; the member holding it (the lowest worker
 * index among them) is rank 0, the others follow in worker order, so the
 * state always moves from rank 0. Every member gets the same table.
 *
 * Workers of other machines: their own launch runs and restarts them, so
 * the service expects them until their connection closes and again once
 * they join (esvc_remote).
 *
 * Hostile peers: the service opens every connection with a CHALLENGE (a
 * fresh nonce), and every frame after it, both ways, carries a tag under
 * the key the service shares with that worker (core/member/member_auth.c):
 * with the job's CURVE keys one derived from the worker's secret key
 * (launch made the keys, or reads [security] keys), so that only the
 * holder of worker:K's secret key joins as worker:K; in plaintext mode
 * ([security] mode = off) one derived from the job's token, which then
 * never travels. The first message of a connection must be a JOIN whose
 * tag verifies, within 2 s; anything else -- garbage, a long message, a
 * tag that does not verify, a name that is not one of the job's workers --
 * drops the connection and counts it, naming the peer (logged: the first
 * 10, then every 1000th), never failing the job. At most 64
 * connections at a time; every write is non-blocking and a member that
 * cannot take its table is dropped like a dead one. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include <strata/plugin.h>
#include <strata/strata.h>

#include "cli.h"
#include "launch_elastic.h"
#include "member/wire.h"

#define MAXW       64        /* workers (launch's MAX_TASKS)              */
#define MAXC       (ESVC_MAX_FDS - 1)
#define MSG_MAX    STRATA_MEMBER_CLIENT_MAX
#define HELLO_S    2.0       /* a new connection's JOIN must come by then */
#define DEF_TIMEOUT_MS 60000 /* until the first JOIN names the job's      */

typedef struct conn {
    int    fd;               /* -1: free slot                             */
    uint8_t in[MSG_MAX];     /* the message being read: header, body      */
    size_t got;
    strata__member_hdr_t h;
    double t0;
    int    worker;           /* -1 until a valid JOIN                     */
    uint8_t  nonce[STRATA_MEMBER_NONCE]; /* its CHALLENGE's               */
    uint64_t seq_in, seq_out; /* tagged frames each way                   */
    char   from[64];         /* the peer's address, for messages          */
} conn_t;

typedef struct wk {
    int       proc;          /* launch has its process running            */
    int       gone;          /* that process's connection closed          */
    int       conn;          /* slot in conns, -1                         */
    int       joined;        /* asked for the generation being formed     */
    int       member;        /* of the current generation                 */
    char      addr[STRATA_MEMBER_MAX_ADDR + 1];
    long long committed;
} wk_t;

_Static_assert(MAXW <= STRATA_MEMBER_MAX_MEMBERS, "a generation fits a GEN");

struct esvc {
    int    lfd;
    char   addr[64];
    char   token[STRATA_MEMBER_MAX_TOKEN + 1];
    int    min, max;
    int    timeout_ms, policy_set;
    conn_t c[MAXC];
    wk_t   w[MAXW];
    int    gen;              /* current generation, -1 before the first   */
    int    forming;
    double form_t0;
    int    over, failed;
    long   strangers;
    /* each worker's key (member_auth.c): 1 the job's keys, 2 the token */
    int    auth;
    unsigned char key[MAXW][STRATA_MEMBER_KEY];
    unsigned char have_key[MAXW];
};

static const char *auth_name(int auth)
{
    return auth == 1 ? "the job's keys" : "the job's token";
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[launch] elastic: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    fflush(stderr);
    va_end(ap);
}

/* The listening socket: 127.0.0.1 on a free port, or exactly host:port. */
static int listen_at(esvc_t *s, const char *host, int port)
{
    char ps[16];
    snprintf(ps, sizeof ps, "%d", host ? port : 0);
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_NUMERICSERV }, *ai = NULL;
    int g = getaddrinfo(host ? host : "127.0.0.1", ps, &hints, &ai);
    if (g != 0 || !ai) {
        fprintf(stderr, "strata: launch: elastic: cannot resolve '%s': %s\n",
                host, gai_strerror(g));
        return -1;
    }
    s->lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    0);
    int one = 1;
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int ok = s->lfd >= 0 &&
             setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
             bind(s->lfd, ai->ai_addr, ai->ai_addrlen) == 0 &&
             listen(s->lfd, 64) == 0 &&
             getsockname(s->lfd, (struct sockaddr *)&ss, &len) == 0;
    int v6 = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);
    if (!ok) {
        fprintf(stderr, "strata: launch: elastic: cannot listen on %s:%s: "
                "%s\n", host ? host : "127.0.0.1", ps, strerror(errno));
        return -1;
    }
    int got = v6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                 : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    snprintf(s->addr, sizeof s->addr, v6 ? "[%s]:%d" : "%s:%d",
             host ? host : "127.0.0.1", got);
    return 0;
}

esvc_t *esvc_open(int min, int max, const char *host, int port,
                  const char *token)
{
    esvc_t *s = calloc(1, sizeof *s);
    unsigned char r[16];
    if (!s || (!token && getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)) {
        fprintf(stderr, "strata: launch: elastic: no memory or randomness\n");
        free(s);
        return NULL;
    }
    if (token)
        snprintf(s->token, sizeof s->token, "%s", token);
    else
        for (int i = 0; i < 16; i++)
            snprintf(s->token + 2 * i, 3, "%02x", r[i]);
    if (strata__member_key_token(s->token, s->key[0]) != 0) {
        fprintf(stderr, "strata: launch: elastic: libsodium cannot start\n");
        free(s);
        return NULL;
    }
    s->auth = 2; /* until esvc_secure: the token's key for every worker */
    for (int i = 0; i < MAXW; i++) {
        memcpy(s->key[i], s->key[0], sizeof s->key[0]);
        s->have_key[i] = 1;
    }
    s->min = min;
    s->max = max;
    s->gen = -1;
    s->timeout_ms = DEF_TIMEOUT_MS;
    s->lfd = -1;
    for (int i = 0; i < MAXC; i++)
        s->c[i].fd = -1;
    for (int i = 0; i < MAXW; i++)
        s->w[i].conn = -1;
    if (listen_at(s, host, port) != 0 ||
        setenv("STRATA_ELASTIC", s->addr, 1) != 0 ||
        setenv("STRATA_ELASTIC_TOKEN", s->token, 1) != 0) {
        esvc_close(s);
        return NULL;
    }
    say("membership service on %s (min %d, max %d workers)", s->addr, min,
        max);
    return s;
}

void esvc_close(esvc_t *s)
{
    if (!s)
        return;
    for (int i = 0; i < MAXC; i++)
        if (s->c[i].fd >= 0)
            close(s->c[i].fd);
    if (s->lfd >= 0)
        close(s->lfd);
    if (s->strangers > 0)
        say("%ld stranger%s dropped at the membership service",
            s->strangers, s->strangers == 1 ? "" : "s");
    unsetenv("STRATA_ELASTIC");
    unsetenv("STRATA_ELASTIC_TOKEN");
    sodium_memzero(s->key, sizeof s->key);
    free(s);
}

void esvc_secure(esvc_t *s)
{
    s->auth = 1;
    sodium_memzero(s->key, sizeof s->key);
    memset(s->have_key, 0, sizeof s->have_key);
}

int esvc_worker_cert(esvc_t *s, int index, const char *cert)
{
    const char *k = strstr(cert, "secret-key = \"");
    char z[41];
    unsigned char sk[32];
    int ok = index >= 0 && index < MAXW && k && strlen(k) >= 14 + 40;
    if (ok) {
        memcpy(z, k + 14, 40);
        z[40] = '\0';
        ok = strata__member_z85_32(z, sk) == 0 &&
             strata__member_key_secret(sk, s->key[index]) == 0;
        sodium_memzero(sk, sizeof sk);
        sodium_memzero(z, sizeof z);
    }
    if (ok)
        s->have_key[index] = 1;
    return ok ? 0 : -1;
}

long esvc_strangers(const esvc_t *s) { return s->strangers; }

/* ---- connections ---------------------------------------------------- */

static void drop(esvc_t *s, int ci)
{
    conn_t *c = &s->c[ci];
    if (c->fd < 0)
        return;
    close(c->fd);
    c->fd = -1;
    c->got = 0;
    if (c->worker >= 0) {
        wk_t *w = &s->w[c->worker];
        w->conn = -1;
        w->gone = 1;
        w->joined = 0;
    }
    c->worker = -1;
}

static void stranger(esvc_t *s, int ci, const char *why)
{
    s->strangers++;
    if (s->strangers <= 10 || s->strangers % 1000 == 0)
        say("dropped a connection from %s to the membership service: %s "
            "(%ld so far; the job goes on)", s->c[ci].from, why,
            s->strangers);
    drop(s, ci);
}

/* Tagged for its worker (every put goes to one that joined), and
 * non-blocking: a member that cannot take a message is as good as dead. */
static int put(esvc_t *s, int ci, const uint8_t *msg, size_t n)
{
    if (ci < 0 || s->c[ci].fd < 0 || !msg)
        return -1;
    conn_t *c = &s->c[ci];
    uint8_t *m = c->worker >= 0 ? malloc(n + STRATA_MEMBER_TAG) : NULL;
    if (m) {
        memcpy(m, msg, n);
        n = strata__member_seal(s->key[c->worker], STRATA_MEMBER_DOWN,
                                c->seq_out++, c->nonce, m, n);
        if (send(c->fd, m, n, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)n) {
            free(m);
            return 0;
        }
    }
    free(m);
    drop(s, ci);
    return -1;
}

/* ---- generations ---------------------------------------------------- */

/* Members that have not asked yet learn that a generation is due. */
static void start_forming(esvc_t *s)
{
    if (s->forming || s->over || s->failed)
        return;
    s->forming = 1;
    s->form_t0 = now_s();
    uint8_t msg[STRATA_MEMBER_HDR + 4];
    size_t n = strata__member_resize_encode(msg, s->gen + 1);
    for (int k = 0; k < MAXW; k++)
        if (s->w[k].member && !s->w[k].joined && s->w[k].conn >= 0)
            put(s, s->w[k].conn, msg, n);
}

static void form(esvc_t *s)
{
    int order[MAXW], n = 0, holder = -1;
    long long resume = -1;
    for (int k = 0; k < MAXW; k++)
        if (s->w[k].joined && s->w[k].committed > resume)
            resume = s->w[k].committed;
    for (int k = 0; k < MAXW; k++)
        if (s->w[k].joined && resume >= 0 && s->w[k].committed == resume) {
            holder = k;
            break;
        }
    if (holder >= 0)
        order[n++] = holder;
    for (int k = 0; k < MAXW; k++)
        if (s->w[k].joined && k != holder)
            order[n++] = k;
    s->gen++;
    s->forming = 0;
    char names[MAXW * 12] = "";
    size_t at = 0;
    for (int r = 0; r < n; r++)
        at += (size_t)snprintf(names + at, sizeof names - at, "%sworker:%d",
                               r ? ", " : "", order[r]);
    for (int k = 0; k < MAXW; k++)
        s->w[k].member = 0;
    /* Every member gets the same table; only the rank differs. */
    char wname[MAXW][16], *mnames[MAXW], *maddrs[MAXW];
    int64_t mcommitted[MAXW];
    for (int r = 0; r < n; r++) {
        snprintf(wname[r], sizeof wname[r], "worker:%d", order[r]);
        mnames[r] = wname[r];
        maddrs[r] = s->w[order[r]].addr;
        mcommitted[r] = s->w[order[r]].committed;
    }
    strata__member_gen_t g = { .generation = s->gen, .size = n,
                               .resume_step = resume, .names = mnames,
                               .addrs = maddrs, .committed = mcommitted };
    for (int r = 0; r < n; r++) {
        wk_t *w = &s->w[order[r]];
        w->joined = 0;
        w->member = 1;
        size_t len = 0;
        g.rank = r;
        uint8_t *msg = strata__member_gen_encode(&g, &len);
        if (!msg && w->conn >= 0) /* out of memory: as if it could not */
            drop(s, w->conn);     /* take its table                      */
        else
            put(s, w->conn, msg, len);
        free(msg);
    }
    if (resume >= 0)
        say("generation %d: %d worker%s (%s), going on from step %lld",
            s->gen, n, n == 1 ? "" : "s", names, resume);
    else
        say("generation %d: %d worker%s (%s), a fresh start", s->gen, n,
            n == 1 ? "" : "s", names);
}

static void give_up(esvc_t *s, int joined)
{
    char why[200];
    snprintf(why, sizeof why, "%d of min_workers = %d workers for %.0f s",
             joined, s->min, s->timeout_ms / 1000.0);
    s->failed = 1;
    s->forming = 0;
    uint8_t msg[STRATA_MEMBER_HDR + STRATA_MEMBER_MAX_REASON];
    size_t n = strata__member_stop_encode(msg, why);
    for (int ci = 0; ci < MAXC; ci++)
        if (s->c[ci].fd >= 0 && s->c[ci].worker >= 0)
            put(s, ci, msg, n);
    say("below min_workers: %s; stopping the job", why);
}

/* Form the generation being formed if it can be, or give up. */
static void settle(esvc_t *s)
{
    if (!s->forming || s->over || s->failed)
        return;
    int joined = 0, waiting = 0;
    for (int k = 0; k < MAXW; k++) {
        wk_t *w = &s->w[k];
        joined += w->joined;
        waiting += !w->joined && !w->gone && (w->proc || w->conn >= 0);
    }
    int late = now_s() - s->form_t0 >= s->timeout_ms / 1000.0;
    if (joined >= s->min && (!waiting || late))
        form(s);
    else if (late)
        give_up(s, joined);
}

/* "worker:K", K a worker of this job. */
static int worker_index(const esvc_t *s, const char *name)
{
    if (strncmp(name, "worker:", 7) != 0 || !name[7])
        return -1;
    char *end;
    long k = strtol(name + 7, &end, 10);
    if (*end || k < 0 || k >= s->max || name[7] == '-' || name[7] == '+' ||
        (name[7] == '0' && name[8]))
        return -1;
    return (int)k;
}

/* A host:port without blanks, of a sane length. */
static int addr_ok(const char *a)
{
    const char *colon = strrchr(a, ':');
    size_t n = strlen(a);
    if (n < 3 || n >= sizeof ((wk_t *)0)->addr || !colon || colon == a)
        return 0;
    for (const char *p = a; *p; p++)
        if (*p <= ' ' || *p > '~')
            return 0;
    long port = strtol(colon + 1, NULL, 10);
    return port > 0 && port < 65536;
}

static void join(esvc_t *s, int ci, const uint8_t *body, size_t len)
{
    strata__member_join_t j;
    char why[200], msg[240];
    conn_t *c = &s->c[ci];
    if (len < STRATA_MEMBER_TAG) {
        stranger(s, ci, "a JOIN without its tag");
        return;
    }
    if (strata__member_join_decode(body, len - STRATA_MEMBER_TAG, &j, why,
                                   sizeof why) != 0) {
        snprintf(msg, sizeof msg, "not a JOIN: %s", why);
        stranger(s, ci, msg);
        return;
    }
    int k = worker_index(s, j.name);
    if (k < 0 || !addr_ok(j.addr) || j.timeout_ms > INT32_MAX ||
        (c->worker >= 0 && c->worker != k)) {
        stranger(s, ci, "a JOIN of no worker of this job");
        return;
    }
    if (!s->have_key[k] ||
        !strata__member_unseal(s->key[k], STRATA_MEMBER_UP, c->seq_in,
                               c->nonce, STRATA_MEMBER_JOIN, body, &len)) {
        snprintf(msg, sizeof msg, "its JOIN as worker:%d is not "
                 "authenticated with %s", k, auth_name(s->auth));
        stranger(s, ci, msg);
        return;
    }
    c->seq_in++;
    if (!s->policy_set) { /* the job's configuration names it */
        s->timeout_ms = (int)j.timeout_ms;
        s->policy_set = 1;
    }
    wk_t *w = &s->w[k];
    if (w->conn >= 0 && w->conn != ci) /* a restarted worker: the old one */
        drop(s, w->conn);                /* is gone                        */
    c->worker = k;
    w->conn = ci;
    w->gone = 0;
    w->joined = 1;
    memcpy(w->addr, j.addr, sizeof w->addr); /* the same bound */
    w->committed = j.committed;
    uint8_t out[STRATA_MEMBER_HDR + STRATA_MEMBER_MAX_REASON];
    if (s->over) {
        put(s, ci, out, strata__member_end_encode(out));
        return;
    }
    if (s->failed) {
        put(s, ci, out, strata__member_stop_encode(out, "the job was "
                                                   "stopped"));
        return;
    }
    start_forming(s);
}

static void done(esvc_t *s, int ci, const uint8_t *body, size_t len)
{
    conn_t *c = &s->c[ci];
    int64_t step;
    char why[200], msg[240];
    if (strata__member_done_decode(body, len, &step, why, sizeof why) != 0) {
        snprintf(msg, sizeof msg, "not a DONE: %s", why);
        stranger(s, ci, msg);
        return;
    }
    if (!s->over)
        say("worker:%d finished training (step %lld): the job is over",
            c->worker, (long long)step);
    s->over = 1;
    s->forming = 0;
    s->w[c->worker].member = 0;
    uint8_t end[STRATA_MEMBER_HDR];
    size_t n = strata__member_end_encode(end);
    for (int k = 0; k < MAXW; k++)
        if (s->w[k].joined && s->w[k].conn >= 0) {
            s->w[k].joined = 0;
            put(s, s->w[k].conn, end, n);
        }
    drop(s, ci);
}

/* A whole message of c: a JOIN, or a member's DONE. */
static void message_in(esvc_t *s, int ci)
{
    conn_t *c = &s->c[ci];
    const uint8_t *body = c->in + STRATA_MEMBER_HDR;
    int kind = c->h.kind;
    size_t len = c->h.len;
    c->got = 0;
    if (kind == STRATA_MEMBER_JOIN)
        join(s, ci, body, len);
    else if (kind == STRATA_MEMBER_DONE && c->worker >= 0 &&
             !strata__member_unseal(s->key[c->worker], STRATA_MEMBER_UP,
                                    c->seq_in, c->nonce, kind, body, &len))
        stranger(s, ci, "a DONE not authenticated with its worker's key");
    else if (kind == STRATA_MEMBER_DONE && c->worker >= 0)
        c->seq_in++, done(s, ci, body, len);
    else
        stranger(s, ci, c->worker >= 0 ? "a message the protocol does not "
                                         "have" : "not a JOIN");
}

/* A header, then its body; anything else is a stranger. */
static void readable(esvc_t *s, int ci)
{
    conn_t *c = &s->c[ci];
    size_t need = c->got < STRATA_MEMBER_HDR ? STRATA_MEMBER_HDR
                                             : STRATA_MEMBER_HDR + c->h.len;
    ssize_t n = recv(c->fd, c->in + c->got, need - c->got, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        int k = c->worker;
        drop(s, ci);
        if (k >= 0 && s->w[k].member && !s->over)
            start_forming(s); /* a member died: the others re-form */
        return;
    }
    if (n < 0)
        return;
    c->got += (size_t)n;
    if (c->got == STRATA_MEMBER_HDR) {
        char why[200];
        if (strata__member_get_hdr(c->in, 0, &c->h, why, sizeof why) != 0) {
            stranger(s, ci, why);
            return;
        }
        if (c->h.kind != STRATA_MEMBER_JOIN &&
            c->h.kind != STRATA_MEMBER_DONE) {
            stranger(s, ci, c->worker >= 0 ? "a message the protocol does "
                                             "not have" : "not a JOIN");
            return;
        }
    }
    /* the header's limit keeps the body within c->in */
    if (c->got >= STRATA_MEMBER_HDR && c->got == STRATA_MEMBER_HDR + c->h.len)
        message_in(s, ci);
}

static void accept_all(esvc_t *s)
{
    for (int i = 0; i < 16; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(s->lfd, (struct sockaddr *)&ss, &sl,
                         SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;
        int ci = 0;
        while (ci < MAXC && s->c[ci].fd >= 0)
            ci++;
        if (ci == MAXC) {
            close(fd);
            s->strangers++;
            continue;
        }
        conn_t *c = &s->c[ci];
        *c = (conn_t){ .fd = fd, .t0 = now_s(), .worker = -1 };
        char host[48] = "?", port[8] = "?";
        getnameinfo((struct sockaddr *)&ss, sl, host, sizeof host, port,
                    sizeof port, NI_NUMERICHOST | NI_NUMERICSERV);
        snprintf(c->from, sizeof c->from, strchr(host, ':') ? "[%s]:%s"
                                                            : "%s:%s",
                 host, port);
        /* its challenge first: a fresh socket's buffer takes it (one
         * that cannot is gone, and what it sent says what it was) */
        uint8_t m[STRATA_MEMBER_HDR + 1 + STRATA_MEMBER_NONCE];
        randombytes_buf(c->nonce, sizeof c->nonce);
        size_t n = strata__member_challenge_encode(m, s->auth, c->nonce);
        (void)send(fd, m, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
}

/* ---- launch's side --------------------------------------------------- */

void esvc_alive(esvc_t *s, int index, int alive)
{
    if (index < 0 || index >= MAXW)
        return;
    s->w[index].proc = alive;
    if (alive)
        s->w[index].gone = 0;
}

void esvc_remote(esvc_t *s, int index)
{
    if (index >= 0 && index < MAXW)
        s->w[index].proc = 1; /* its launch runs it; `gone` says the rest */
}

int esvc_pollfds(esvc_t *s, struct pollfd *pfd, int cap)
{
    int n = 0;
    if (cap > 0)
        pfd[n++] = (struct pollfd){ .fd = s->lfd, .events = POLLIN };
    for (int ci = 0; ci < MAXC && n < cap; ci++)
        pfd[n++] = (struct pollfd){ .fd = s->c[ci].fd, .events = POLLIN };
    return n;
}

int esvc_serve(esvc_t *s, const struct pollfd *pfd, int n)
{
    for (int i = 1; i < n; i++)
        if (pfd[i].fd >= 0 && pfd[i].fd == s->c[i - 1].fd && pfd[i].revents)
            readable(s, i - 1);
    if (n > 0 && pfd[0].revents)
        accept_all(s);
    double t = now_s();
    for (int ci = 0; ci < MAXC; ci++)
        if (s->c[ci].fd >= 0 && s->c[ci].worker < 0 &&
            t - s->c[ci].t0 > HELLO_S)
            stranger(s, ci, "no JOIN within 2 s");
    int was = s->failed;
    settle(s);
    return s->failed && !was;
}

/* ---- launch's command line ------------------------------------------- */

int esvc_parse(const char *v, int max_tasks, int *min, int *max)
{
    char *end = NULL;
    long lo = v ? strtol(v, &end, 10) : -1, hi = -1;
    if (v && end != v && *end == ':' && end[1] >= '0' && end[1] <= '9')
        hi = strtol(end + 1, &end, 10);
    if (!v || *end || lo < 1 || hi < lo || hi > max_tasks) {
        fprintf(stderr, "strata: launch: --elastic needs MIN:MAX workers, "
                "1 <= MIN <= MAX <= %d (got '%s')\n", max_tasks,
                v ? v : "");
        return -1;
    }
    *min = (int)lo;
    *max = (int)hi;
    return 0;
}

int esvc_job_args(char **targv, int *nt, int min, int max)
{
    strata_ctx_t *ctx = NULL;
    int rc = cli_job_ctx(targv, *nt, &ctx) == 0 ? STRATA_OK : STRATA_ECONFIG;
    const char *strategy = rc == STRATA_OK
                               ? strata_ctx_get(ctx, "strategy", "plugin")
                               : NULL;
    /* The strategy's capability word (plugin ABI 2.5), not its name: an
     * elastic one answers STRATA_CTL_REGROUP and takes the keys elastic,
     * min_workers and max_workers in its section. */
    static char name[64];
    snprintf(name, sizeof name, "%s", strategy ? strategy : "mirrored");
    uint32_t caps = 0;
    char capstr[160] = "";
    if (rc == STRATA_OK)
        rc = strata_plugin_caps(ctx, name, &caps, capstr, sizeof capstr);
    int elastic = rc == STRATA_OK && (caps & STRATA_CAP_ELASTIC);
    if (rc == STRATA_OK && !elastic)
        fprintf(stderr, "strata: launch: --elastic runs mwms jobs only; this "
                "job's [strategy] plugin is '%s': its capabilities (%s) lack "
                "'elastic' (any strategy that has it runs too)\n", name,
                capstr);
    strata_ctx_destroy(ctx);
    if (rc != STRATA_OK || !elastic)
        return -1;
    static char sets[3][160];
    snprintf(sets[0], sizeof sets[0], "strategy.%s.elastic=true", name);
    snprintf(sets[1], sizeof sets[1], "strategy.%s.min_workers=%d", name, min);
    snprintf(sets[2], sizeof sets[2], "strategy.%s.max_workers=%d", name, max);
    for (int i = 0; i < 3; i++) {
        targv[(*nt)++] = "--set";
        targv[(*nt)++] = sets[i];
    }
    return 0;
}
