/* zmq.so -- failures: the one error line, the sticky state, the ABORT sent
 * both ways round the ring, and getting the caller's buffer back from zmq.
 *
 * A dead peer is seen three ways: the socket monitors report a dropped
 * connection (kill -9: at once; a stopped peer: after 3 missed ZMTP
 * heartbeats), an ABORT relayed by another member, or the collective's
 * deadline. The first failure is logged once and relayed as an ABORT to
 * both neighbours, so every survivor names the same failed peer. */
#include "strz.h"

#include <stdarg.h>
#include <stdio.h>

const char *strz_code_words(int code)
{
    switch (code) {
    case STRATA_EPEER:     return "disconnected";
    case STRATA_ETIMEDOUT: return "timed out";
    case STRATA_EPROTO:    return "malformed or unexpected message";
    case STRATA_ECANCELED: return "canceled";
    default:               return "failed";
    }
}

/* ---- failure reporting --------------------------------------------- */

static void send_abort(strz_ctx_t *c, int peer, int code)
{
    strz_hdr_t h = { .type = STRZ_ABORT, .sender = c->rank, .step = -code,
                     .seq = c->seq, .aux = peer };
    unsigned char hb[STRZ_HDR_SIZE];

    strz_wire_pack(&h, hb);
    /* Leftwards our ROUTER answers the left neighbour's DEALER. Both ways,
     * even to the peer at fault: if it is alive, it learns why. */
    if (c->rx && c->left_id_len > 0
        && zmq_send(c->rx, c->left_id, c->left_id_len,
                    ZMQ_SNDMORE | ZMQ_DONTWAIT) == (int)c->left_id_len)
        (void)zmq_send(c->rx, hb, sizeof hb, ZMQ_DONTWAIT);
    if (c->tx && c->right_up)
        (void)zmq_send(c->tx, hb, sizeof hb, ZMQ_DONTWAIT);
    /* and on the data connections, where it beats their close */
    strz_direct_abort(c, hb);
}

/* After a failure the caller's buffer must not stay referenced by zmq: give
 * a live right neighbour a moment to take the queued payloads (they precede
 * our ABORT), then drop them with the socket. */
static void release_zero_copy(strz_ctx_t *c)
{
    if (atomic_load(&c->zc_out) == 0)
        return;
    strz_zc_wait(c, strz_now_ms() + 500);
    if (atomic_load(&c->zc_out) == 0 || c->tx == NULL)
        return;
    int zero = 0;
    (void)zmq_setsockopt(c->tx, ZMQ_LINGER, &zero, sizeof zero);
    strz_close_sock(&c->tx, &c->mon_tx);
    strz_zc_wait(c, strz_now_ms() + 2000);
    if (atomic_load(&c->zc_out) > 0)
        strz_log(c, STRATA_LOG_WARN, "zmq still holds %ld send buffers",
                 (long)atomic_load(&c->zc_out));
}

static int vfail(strz_ctx_t *c, int code, int wire_code, int peer,
                 const char *fmt, va_list ap)
{
    char msg[768];

    if (c->broken)
        return c->broken;
    c->broken = code;
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (c->running)
        strz_log(c, STRATA_LOG_ERROR, "%s #%llu: %s", c->what,
                 (unsigned long long)c->seq, msg);
    else
        strz_log(c, STRATA_LOG_ERROR, "%s: %s", c->what, msg);
    if (peer < 0 || peer >= c->n)
        peer = c->rank;
    if (c->shm)
        strz_shm_publish_abort(c, peer, wire_code);
    send_abort(c, peer, wire_code);
    release_zero_copy(c);
    strz_direct_drop(c); /* a pending direct send holds the caller's buffer */
    return code;
}

int strz_fail(strz_ctx_t *c, int code, int peer, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vfail(c, code, code, peer, fmt, ap);
    va_end(ap);
    return rc;
}

/* Relay, preserving the originator's reason. */
static int fail_relay(strz_ctx_t *c, int wire_code, int peer,
                      const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail_relay(strz_ctx_t *c, int wire_code, int peer,
                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vfail(c, STRATA_EPEER, wire_code, peer, fmt, ap);
    va_end(ap);
    return rc;
}

int strz_abort_received(strz_ctx_t *c, const strz_hdr_t *h, int from)
{
    int peer = (h->aux >= 0 && h->aux < c->n) ? h->aux : from;
    int code = (h->step > 0 && h->step < -STRATA_ERRNO_LAST_) ? -h->step
                                                              : STRATA_EPEER;
    if (peer == from)
        return fail_relay(c, code, peer, "%s (%s) aborted (%s)",
                          c->name[peer], c->addr[peer], strz_code_words(code));
    if (peer == c->rank)
        return fail_relay(c, code, peer, "%s (%s) reports this member as "
                          "failed (%s)", c->name[from], c->addr[from],
                          strz_code_words(code));
    return fail_relay(c, code, peer, "peer %s (%s) failed (%s; reported by %s)",
                      c->name[peer], c->addr[peer], strz_code_words(code),
                      c->name[from]);
}


int strz_abort_shared(strz_ctx_t *c, int peer, int code)
{
    if (peer < 0 || peer >= c->n)
        peer = c->rank;
    if (code >= 0 || code <= STRATA_ERRNO_LAST_)
        code = STRATA_EPEER;
    if (peer == c->rank)
        return fail_relay(c, code, peer, "another member reports this "
                          "member as failed (%s)", strz_code_words(code));
    return fail_relay(c, code, peer, "peer %s (%s) failed (%s; reported "
                      "through shared memory)", c->name[peer], c->addr[peer],
                      strz_code_words(code));
}
