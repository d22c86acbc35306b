/* The membership client of an elastic job (elastic.h): one TCP connection
 * to the service strata launch --elastic hosts, joins, resize notices. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "elastic.h"
#include "fault.h"

#define WHO       "elastic"
#define LINE_MAX_ 512               /* bytes of one protocol line          */
#define MAX_MEMBERS 1024            /* members of one generation           */
#define CONNECT_MS 10000            /* reaching the service                */
#define SLACK_MS   10000            /* past the rendezvous timeout: the    */
                                    /* service answers before that         */

struct strata__elastic {
    char     service[300];          /* host:port of the service            */
    char     token[80];
    char     self[64];
    char     host[272];
    int      fd;                    /* -1: not connected                    */
    char     in[LINE_MAX_ * 4];
    size_t   len;
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

int strata__elastic_open(const char *self, const char *host,
                         strata__elastic_t **out)
{
    *out = NULL;
    const char *svc = getenv("STRATA_ELASTIC");
    if (!svc || !svc[0])
        return STRATA_OK;
    const char *tok = getenv("STRATA_ELASTIC_TOKEN");
    char h[272], p[16];
    if (strlen(svc) >= sizeof ((strata__elastic_t *)0)->service ||
        split_addr(svc, h, sizeof h, p, sizeof p) != 0 || !tok ||
        strlen(tok) < 16 || strlen(tok) >= sizeof ((strata__elastic_t *)0)->token ||
        strcspn(tok, " \t\r\n") != strlen(tok)) {
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
    snprintf(e->token, sizeof e->token, "%s", tok);
    snprintf(e->self, sizeof e->self, "%s", self);
    snprintf(e->host, sizeof e->host, "%s", host && host[0] ? host
                                                            : "127.0.0.1");
    e->fd = -1;
    e->joined_with = -1;
    *out = e;
    return STRATA_OK;
}

/* A generation's member table: n names, addresses, committed steps. */
struct table {
    int      n;
    char   **addrs, **names;
    int64_t *committed;
};

static void table_free(struct table *t)
{
    for (int i = 0; i < t->n; i++) {
        free(t->addrs ? t->addrs[i] : NULL);
        free(t->names ? t->names[i] : NULL);
    }
    free(t->addrs);
    free(t->names);
    free(t->committed);
    *t = (struct table){ 0 };
}

static void forget_generation(strata__elastic_t *e)
{
    struct table t = { e->n, e->addrs, e->names, e->committed };
    table_free(&t);
    e->addrs = e->names = NULL;
    e->committed = NULL;
    e->n = 0;
}

void strata__elastic_close(strata__elastic_t *e)
{
    if (!e)
        return;
    if (e->fd >= 0)
        close(e->fd);
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
    e->len = 0;
    return STRATA_OK;
}

static int send_line(strata__elastic_t *e, const char *line, int64_t deadline)
{
    size_t len = strlen(line), at = 0;
    while (at < len) {
        ssize_t n = STRATA_FAULT(IO) ? -1
                    : send(e->fd, line + at, len - at, MSG_NOSIGNAL);
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

/* Read what arrived without waiting. 0, or STRATA_EPEER once the service
 * closed the connection. */
static int fill(strata__elastic_t *e)
{
    while (e->len < sizeof e->in) {
        ssize_t n = STRATA_FAULT(IO) ? -1
                    : recv(e->fd, e->in + e->len, sizeof e->in - e->len,
                           MSG_DONTWAIT);
        if (n > 0) {
            e->len += (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        return STRATA_EPEER;
    }
    return 0;
}

/* The next whole line (without its '\n') into buf: 1; 0: none yet;
 * STRATA_EPROTO: a line longer than the protocol allows. */
static int take_line(strata__elastic_t *e, char *buf, size_t cap)
{
    char *nl = memchr(e->in, '\n', e->len);
    if (!nl)
        return e->len >= LINE_MAX_ ? STRATA_EPROTO : 0;
    size_t n = (size_t)(nl - e->in);
    if (n >= cap || n >= LINE_MAX_)
        return STRATA_EPROTO;
    memcpy(buf, e->in, n);
    buf[n] = '\0';
    memmove(e->in, nl + 1, e->len - n - 1);
    e->len -= n + 1;
    return 1;
}

/* The next line within the deadline: 1, or an error (logged). */
static int next_line(strata__elastic_t *e, char *buf, size_t cap,
                     int64_t deadline)
{
    int gone = 0;
    for (;;) {
        int rc = take_line(e, buf, cap);
        if (rc == 1)
            return 1;
        if (rc < 0) {
            strata__log(STRATA_LOG_ERROR, WHO, "membership service %s sent "
                        "a line longer than %d bytes", e->service, LINE_MAX_);
            return rc;
        }
        /* The lines that came before the end are taken first. */
        if (gone) {
            strata__log(STRATA_LOG_ERROR, WHO, "the membership service %s "
                        "closed the connection (strata launch gone?)",
                        e->service);
            return STRATA_EPEER;
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
        gone = fill(e) != 0;
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

static int bad_table(strata__elastic_t *e, const char *line, const char *why)
{
    strata__log(STRATA_LOG_ERROR, WHO, "membership service %s: '%.80s': %s",
                e->service, line, why);
    return STRATA_EPROTO;
}

static int field_ok(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n < 300;
}

static int no_memory(strata__elastic_t *e, const char *what)
{
    strata__log(STRATA_LOG_ERROR, WHO, "membership service %s: out of memory "
                "for %s", e->service, what);
    return STRATA_ENOMEM;
}

/* The member lines of a generation of `size` into t. */
static int read_members(strata__elastic_t *e, struct table *t, int size,
                        int64_t deadline)
{
    t->addrs = STRATA_FAULT(ALLOC) ? NULL : calloc((size_t)size, sizeof *t->addrs);
    t->names = STRATA_FAULT(ALLOC) ? NULL : calloc((size_t)size, sizeof *t->names);
    t->committed = STRATA_FAULT(ALLOC) ? NULL
                                       : calloc((size_t)size, sizeof *t->committed);
    if (!t->addrs || !t->names || !t->committed)
        return no_memory(e, "the member table");
    t->n = size;
    char line[LINE_MAX_], name[LINE_MAX_], addr[LINE_MAX_], tail;
    for (int i = 0; i < size; i++) {
        int rc = next_line(e, line, sizeof line, deadline);
        if (rc != 1)
            return rc;
        long long c;
        if (sscanf(line, "M %511s %511s %lld %c", name, addr, &c, &tail) != 3 ||
            !field_ok(name) || !field_ok(addr) || c < -1)
            return bad_table(e, line, "not a member line");
        t->names[i] = STRATA_FAULT(ALLOC) ? NULL : strdup(name);
        t->addrs[i] = STRATA_FAULT(ALLOC) ? NULL : strdup(addr);
        t->committed[i] = c;
        if (!t->names[i] || !t->addrs[i])
            return no_memory(e, "a member line");
    }
    return STRATA_OK;
}

/* GEN and its member lines into the client's table; a failure leaves the
 * generation joined last as it was. */
static int read_table(strata__elastic_t *e, const char *gen_line,
                      int64_t deadline)
{
    int g, size, rank;
    long long resume;
    char tail;
    if (sscanf(gen_line, "GEN %d %d %d %lld %c", &g, &size, &rank, &resume,
               &tail) != 4 || g < 0 || (e->have && g <= e->m.generation) ||
        size < 1 || size > MAX_MEMBERS || rank < 0 || rank >= size ||
        resume < -1)
        return bad_table(e, gen_line, "not a generation after the last one");
    struct table t = { 0 };
    int rc = read_members(e, &t, size, deadline);
    if (rc == STRATA_OK) {
        assert(t.n == size && rank < t.n);
        if (strcmp(t.names[rank], e->self) != 0)
            rc = bad_table(e, gen_line, "this task's rank names another task");
        else if (resume >= 0 && t.committed[0] != resume)
            rc = bad_table(e, gen_line, "rank 0 does not hold the state of "
                           "the step to resume from");
    }
    if (rc != STRATA_OK) {
        table_free(&t);
        return rc;
    }
    forget_generation(e);
    e->n = t.n;
    e->addrs = t.addrs;
    e->names = t.names;
    e->committed = t.committed;
    e->m = (strata_membership_t){
        .struct_size = sizeof e->m, .generation = g, .size = size,
        .rank = rank, .addrs = (const char *const *)e->addrs,
        .names = (const char *const *)e->names, .committed = e->committed,
        .resume_step = resume,
    };
    e->have = 1;
    return STRATA_OK;
}

int strata__elastic_join(strata__elastic_t *e, int64_t committed,
                         int timeout_ms, strata_membership_t *out)
{
    if (e->error)
        return e->error;
    int rc = e->fd < 0 ? connect_service(e) : STRATA_OK;
    char addr[320], line[LINE_MAX_];
    if (rc == STRATA_OK)
        rc = fresh_addr(e, addr, sizeof addr);
    int64_t deadline = now_ms() + (int64_t)timeout_ms + SLACK_MS;
    if (rc == STRATA_OK) {
        snprintf(line, sizeof line, "JOIN %s %s %s %" PRId64 " %d\n",
                 e->token, e->self, addr, committed < -1 ? -1 : committed,
                 timeout_ms);
        rc = send_line(e, line, deadline);
    }
    e->pending = 0;
    while (rc == STRATA_OK) {
        rc = next_line(e, line, sizeof line, deadline);
        if (rc != 1)
            break;
        rc = STRATA_OK;
        if (!strncmp(line, "GEN ", 4)) {
            rc = read_table(e, line, deadline);
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
        } else if (!strncmp(line, "RESIZE ", 7)) {
            continue; /* announced before we joined: this join answers it */
        } else if (!strcmp(line, "END")) {
            e->over = 1;
            strata__log(STRATA_LOG_INFO, WHO, "the job finished before %s "
                        "could join it", e->self);
            rc = STRATA_ECANCELED;
        } else if (!strncmp(line, "STOP ", 5)) {
            strata__log(STRATA_LOG_ERROR, WHO, "the membership service "
                        "stopped the job: %.400s", line + 5);
            rc = STRATA_ECANCELED;
        } else {
            rc = bad_table(e, line, "unexpected line");
        }
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
    if (fill(e) != 0)
        return e->pending = 1; /* the service is gone: the join says so */
    char line[LINE_MAX_];
    int rc, g;
    while ((rc = take_line(e, line, sizeof line)) == 1) {
        if (sscanf(line, "RESIZE %d", &g) == 1 && g > e->m.generation)
            e->pending = 1;
        else if (!strcmp(line, "END") || !strncmp(line, "STOP ", 5)) {
            /* kept for the join, which reports it */
            size_t n = strlen(line);
            memmove(e->in + n + 1, e->in, e->len);
            memcpy(e->in, line, n);
            e->in[n] = '\n';
            e->len += n + 1;
            e->pending = 1;
            break;
        }
    }
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
    char line[64];
    snprintf(line, sizeof line, "DONE %" PRId64 "\n", step);
    (void)send_line(e, line, now_ms() + 2000);
    close(e->fd);
    e->fd = -1;
}
