/* The rendezvous's socket helpers both sides use (rdzv_net.h): clocks and
 * bounded waits, peers' addresses, this machine's own. They call nothing
 * else of the rendezvous (rdzv_serve.c, rdzv_join.c and rdzv_late.c call
 * them: no circle). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4, struct ucred */
#endif
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

#include "rdzv_net.h"

double strata__rdzv_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int strata__rdzv_stopped(const strata__rdzv_opts_t *o)
{
    return o->stop && atomic_load(o->stop);
}

int strata__rdzv_slice_ms(double t)
{
    double left = (t - strata__rdzv_now()) * 1000.0;
    return left <= 0 ? 0
           : left > RDZV_SLICE_MS ? RDZV_SLICE_MS : (int)left + 1;
}

int strata__rdzv_wait_fd(int fd, short ev, double deadline,
                         const strata__rdzv_opts_t *o)
{
    for (;;) {
        if (strata__rdzv_stopped(o))
            return -1;
        if (strata__rdzv_now() >= deadline)
            return 0;
        struct pollfd p = { .fd = fd, .events = ev };
        int r = poll(&p, 1, strata__rdzv_slice_ms(deadline));
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return 1; /* let the read or write report it */
    }
}

int strata__rdzv_pause(double t, const strata__rdzv_opts_t *o)
{
    while (strata__rdzv_now() < t) {
        if (strata__rdzv_stopped(o))
            return -1;
        poll(NULL, 0, strata__rdzv_slice_ms(t));
    }
    return strata__rdzv_stopped(o) ? -1 : 0;
}


void strata__rdzv_peer_text(const struct sockaddr *sa, socklen_t len, int fd,
                            char *out, size_t n)
{
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (sa->sa_family == AF_UNIX) {
        struct ucred cr;
        socklen_t cl = sizeof cr;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0)
            snprintf(out, n, "local pid %ld uid %u", (long)cr.pid,
                     (unsigned)cr.uid);
        else
            snprintf(out, n, "a local process");
    } else if (getnameinfo(sa, len, host, sizeof host, serv, sizeof serv,
                           NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
        snprintf(out, n, sa->sa_family == AF_INET6 ? "[%s]:%s" : "%s:%s",
                 host, serv);
    } else {
        snprintf(out, n, "?");
    }
}

int strata__rdzv_peer_is_us(int fd, unsigned *uid)
{
    struct ucred cr;
    socklen_t cl = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0)
        return 0;
    *uid = (unsigned)cr.uid;
    return cr.uid == geteuid();
}

socklen_t strata__rdzv_unix_addr(const strata__rdzv_ep_t *ep,
                                 struct sockaddr_un *su)
{
    memset(su, 0, sizeof *su);
    su->sun_family = AF_UNIX;
    size_t n = strlen(ep->name);
    memcpy(su->sun_path + 1, ep->name, n); /* sun_path[0] = 0: abstract */
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

int strata__rdzv_own_address(int fam, const char *host, char *out, size_t n)
{
    struct addrinfo hints = { .ai_family = fam, .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
    struct addrinfo *ai = NULL;
    int rc = -1;
    if (getaddrinfo(host, "0", &hints, &ai) != 0)
        return -1;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (fd >= 0 && bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
        int port = ntohs(fam == AF_INET6
                             ? ((struct sockaddr_in6 *)&ss)->sin6_port
                             : ((struct sockaddr_in *)&ss)->sin_port);
        snprintf(out, n, fam == AF_INET6 ? "[%s]:%d" : "%s:%d", host, port);
        rc = 0;
    }
    if (fd >= 0)
        close(fd);
    freeaddrinfo(ai);
    return rc;
}

int strata__rdzv_local_host(int fd, int *fam, char *host, size_t n)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return -1;
    if (ss.ss_family == AF_UNIX) { /* one node: loopback */
        *fam = AF_INET;
        snprintf(host, n, "127.0.0.1");
        return 0;
    }
    *fam = ss.ss_family;
    return getnameinfo((struct sockaddr *)&ss, len, host, (socklen_t)n, NULL,
                       0, NI_NUMERICHOST) == 0 ? 0 : -1;
}
