/* The ncclUniqueId of a group of processes travels over ZeroMQ: rank 0
 * (the chief) makes it and binds a REP socket at port + 1 of its own
 * address (addrs[0] "host:port" or "tcp://host:port"; for "ipc:///path",
 * "ipc:///path.nccl-id"); every other rank connects a REQ socket there and
 * asks once:
 *
 *   request: "strata-nccl 1 <tag> <rank> <size>"
 *   reply:   "OK" + the NCCL_UNIQUE_ID_BYTES of the id, or "ERR <why>"
 *
 * Both sides give up at the group's timeout, naming who never came. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "nccl_int.h"

#define NC_HELLO "strata-nccl 1"

/* addrs[0] -> the endpoint of the id server; -1 when it has no port. */
static int id_endpoint(const char *addr, char *ep, size_t len)
{
    if (strncmp(addr, "ipc://", 6) == 0)
        return snprintf(ep, len, "%s.nccl-id", addr) < (int)len ? 0 : -1;
    const char *host = strncmp(addr, "tcp://", 6) == 0 ? addr + 6 : addr;
    const char *colon = strrchr(host, ':');
    char *end;
    long port = colon ? strtol(colon + 1, &end, 10) : 0;
    if (!colon || !colon[1] || *end || port < 1 || port >= 65535)
        return -1;
    return snprintf(ep, len, "tcp://%.*s:%ld", (int)(colon - host), host,
                    port + 1) < (int)len ? 0 : -1;
}

static int ms_left(double deadline)
{
    double left = (deadline - nc_now()) * 1000.0;
    return left <= 0 ? 0 : left > 1e9 ? 1000000000 : (int)left + 1;
}

static const char *member(const strata_group_t *g, int r, char *buf, size_t len)
{
    snprintf(buf, len, "%s (%s)", g->names && g->names[r] ? g->names[r] : "?",
             g->addrs && g->addrs[r] ? g->addrs[r] : "?");
    return buf;
}

/* Rank 0: answer every other rank once. */
static int serve(nc_ctx_t *c, const strata_group_t *g, void *z, const char *ep,
                 const ncclUniqueId *id)
{
    void *s = zmq_socket(z, ZMQ_REP);
    int linger = 1000; /* let the last replies out at close */
    if (!s || zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger) != 0)
        goto zerr;
    if (zmq_bind(s, ep) != 0) {
        /* A host name that is no local interface: listen on every one. */
        const char *colon = strrchr(ep, ':');
        char any[64];
        int e = zmq_errno();
        if (strncmp(ep, "tcp://", 6) != 0 || !colon ||
            (e != ENODEV && e != EINVAL))
            goto zerr;
        snprintf(any, sizeof any, "tcp://*%s", colon);
        if (zmq_bind(s, any) != 0)
            goto zerr;
    }
    char *served = calloc((size_t)g->size, 1);
    if (!served) {
        zmq_close(s);
        return STRATA_ENOMEM;
    }
    const double deadline = nc_now() + c->timeout_s;
    int left = g->size - 1, rc = STRATA_OK;
    while (left > 0 && rc == STRATA_OK) {
        zmq_pollitem_t it = { s, 0, ZMQ_POLLIN, 0 };
        int n = zmq_poll(&it, 1, ms_left(deadline));
        if (n < 0 && zmq_errno() == EINTR)
            continue;
        if (n <= 0) {
            char missing[1024] = "", one[300];
            size_t used = 0;
            for (int r = 1; r < g->size && used < sizeof missing - 1; r++)
                if (!served[r])
                    used += (size_t)snprintf(missing + used,
                                             sizeof missing - used, "%s%s",
                                             used ? ", " : "",
                                             member(g, r, one, sizeof one));
            c->host->log(c->hc, STRATA_LOG_ERROR, "nccl", "group %s: %d of %d "
                         "ranks did not ask %s for the NCCL id within %g s: "
                         "%s", c->tag, left, g->size - 1, ep, c->timeout_s,
                         missing);
            rc = n < 0 ? STRATA_EIO : STRATA_ETIMEDOUT;
            break;
        }
        char req[256], tag[128];
        int got = zmq_recv(s, req, sizeof req - 1, 0);
        if (got < 0)
            continue;
        req[got < (int)sizeof req - 1 ? got : (int)sizeof req - 1] = '\0';
        int rank = -1, size = -1;
        char reply[2 + NCCL_UNIQUE_ID_BYTES], why[320] = "";
        if (strncmp(req, NC_HELLO " ", sizeof NC_HELLO) != 0 ||
            sscanf(req + sizeof NC_HELLO, "%127s %d %d", tag, &rank,
                   &size) != 3)
            snprintf(why, sizeof why, "not a strata nccl request");
        else if (strcmp(tag, c->tag) != 0 || size != g->size)
            snprintf(why, sizeof why, "rank %d asks for group %.63s of %d;"
                     " this is group %.63s of %d", rank, tag, size, c->tag,
                     g->size);
        else if (rank < 1 || rank >= g->size)
            snprintf(why, sizeof why, "rank %d is out of range", rank);
        if (why[0]) {
            c->host->log(c->hc, STRATA_LOG_WARN, "nccl", "%s: refused a "
                         "request: %s", ep, why);
            char err[340];
            int len = snprintf(err, sizeof err, "ERR %s", why);
            zmq_send(s, err, (size_t)len, 0);
            continue;
        }
        memcpy(reply, "OK", 2);
        memcpy(reply + 2, id->internal, NCCL_UNIQUE_ID_BYTES);
        if (zmq_send(s, reply, sizeof reply, 0) < 0)
            continue;
        if (!served[rank]) {
            served[rank] = 1;
            left--;
        }
    }
    free(served);
    zmq_close(s);
    return rc;
zerr:
    c->host->log(c->hc, STRATA_LOG_ERROR, "nccl", "group %s: cannot serve the "
                 "NCCL id at %s: %s", c->tag, ep, zmq_strerror(zmq_errno()));
    if (s)
        zmq_close(s);
    return STRATA_EIO;
}

/* Any other rank: ask rank 0 once. */
static int ask(nc_ctx_t *c, const strata_group_t *g, void *z, const char *ep,
               ncclUniqueId *id)
{
    char req[256], one[300];
    int len = snprintf(req, sizeof req, NC_HELLO " %s %d %d", c->tag, g->rank,
                       g->size);
    void *s = zmq_socket(z, ZMQ_REQ);
    int linger = 0;
    if (!s || zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        zmq_connect(s, ep) != 0 || zmq_send(s, req, (size_t)len, 0) < 0) {
        c->host->log(c->hc, STRATA_LOG_ERROR, "nccl", "group %s: cannot ask "
                     "%s for the NCCL id: %s", c->tag, ep,
                     zmq_strerror(zmq_errno()));
        if (s)
            zmq_close(s);
        return STRATA_EIO;
    }
    const double deadline = nc_now() + c->timeout_s;
    char reply[2 + NCCL_UNIQUE_ID_BYTES + 1];
    int got = -1, rc = STRATA_OK;
    for (;;) {
        zmq_pollitem_t it = { s, 0, ZMQ_POLLIN, 0 };
        int n = zmq_poll(&it, 1, ms_left(deadline));
        if (n < 0 && zmq_errno() == EINTR)
            continue;
        if (n > 0)
            got = zmq_recv(s, reply, sizeof reply - 1, 0);
        break;
    }
    if (got < 0) {
        c->host->log(c->hc, STRATA_LOG_ERROR, "nccl", "group %s: rank 0, %s, "
                     "did not hand out the NCCL id at %s within %g s", c->tag,
                     member(g, 0, one, sizeof one), ep, c->timeout_s);
        rc = STRATA_ETIMEDOUT;
    } else if (got == 2 + NCCL_UNIQUE_ID_BYTES && memcmp(reply, "OK", 2) == 0) {
        memcpy(id->internal, reply + 2, NCCL_UNIQUE_ID_BYTES);
    } else {
        reply[got < (int)sizeof reply - 1 ? got : (int)sizeof reply - 1] = '\0';
        c->host->log(c->hc, STRATA_LOG_ERROR, "nccl", "group %s: rank 0, %s, "
                     "refused this rank: %s", c->tag,
                     member(g, 0, one, sizeof one),
                     strncmp(reply, "ERR ", 4) == 0 ? reply + 4
                                                    : "malformed reply");
        rc = STRATA_EPROTO;
    }
    zmq_close(s);
    return rc;
}

int nc_id_share(nc_ctx_t *c, const strata_group_t *g, ncclUniqueId *id)
{
    char ep[300];
    if (g->size < 2)
        return STRATA_OK;
    if (!g->addrs || !g->addrs[0] || id_endpoint(g->addrs[0], ep, sizeof ep)) {
        c->host->log(c->hc, STRATA_LOG_ERROR, "nccl", "group %s: rank 0's "
                     "address '%s' is not host:port, tcp://host:port or "
                     "ipc://path", c->tag,
                     g->addrs && g->addrs[0] ? g->addrs[0] : "");
        return STRATA_ECONFIG;
    }
    void *z = zmq_ctx_new();
    if (!z)
        return STRATA_ENOMEM;
    int rc = g->rank == 0 ? serve(c, g, z, ep, id) : ask(c, g, z, ep, id);
    zmq_ctx_term(z);
    return rc;
}
