/* zmq.so -- messages on the ring: send (zero-copy for large payloads),
 * receive and check the sender, and wait with a deadline while watching the
 * sockets' monitors, ABORTs from the right and ctl(ABORT). */
#include "strz.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void drain_zc_pipe(strz_ctx_t *c)
{
    char b[64];
    while (read(c->zc_pipe[0], b, sizeof b) > 0) {
    }
}

/* Wait (no sockets involved) until zmq released every zero-copy payload. */
void strz_zc_wait(strz_ctx_t *c, int64_t until)
{
    while (atomic_load(&c->zc_out) > 0) {
        int64_t left = until - strz_now_ms();
        if (left <= 0)
            return;
        struct pollfd p = { .fd = c->zc_pipe[0], .events = POLLIN };
        (void)poll(&p, 1, (int)left);
        drain_zc_pipe(c);
    }
}

/* ---- receiving ------------------------------------------------------ */

void strz_close_parts(zmq_msg_t *part, int n)
{
    for (int i = 0; i < n; i++)
        zmq_msg_close(&part[i]);
}

/* One whole message (zmq delivers all its parts together) into
 * part[0..max): 0, STRATA_EAGAIN, or -errno. Parts past `max` are read,
 * dropped and counted in *extra, so the next message starts clean. */
int strz_read_parts(void *s, zmq_msg_t *part, int max, int *nparts,
                    int *extra)
{
    *nparts = 0;
    *extra = 0;
    for (;;) {
        zmq_msg_t spare;
        zmq_msg_t *m = *nparts < max ? &part[*nparts] : &spare;
        zmq_msg_init(m);
        if (zmq_msg_recv(m, s, ZMQ_DONTWAIT) < 0) {
            int e = zmq_errno();
            zmq_msg_close(m);
            strz_close_parts(part, *nparts);
            if (*nparts == 0 && *extra == 0 && e == EAGAIN)
                return STRATA_EAGAIN;
            *nparts = 0;
            return -(e == EAGAIN ? EPROTO : e); /* half a message: no */
        }
        int more = zmq_msg_more(m);
        if (m == &spare) {
            zmq_msg_close(m);
            ++*extra;
        } else {
            ++*nparts;
        }
        if (!more)
            return 0;
    }
}

char *strz_peer_address(zmq_msg_t *m, char *out, size_t len)
{
    /* Copied: the string lives in the message's metadata. */
    const char *a = zmq_msg_gets(m, "Peer-Address");
    snprintf(out, len, "%s", a ? a : "(local socket)");
    return out;
}

/* Header of part[first] with the payload in part[first + 1], if any. */
int strz_unpack_parts(zmq_msg_t *part, int nparts, int first, int extra,
                      strz_hdr_t *h, const char **why)
{
    if (nparts <= first) {
        *why = "empty message";
        return -1;
    }
    if (extra > 0 || nparts > first + 2) {
        *why = "too many frames";
        return -1;
    }
    size_t plen = nparts == first + 2 ? zmq_msg_size(&part[first + 1]) : 0;
    return strz_wire_unpack(zmq_msg_data(&part[first]),
                            zmq_msg_size(&part[first]), plen, h, why);
}

static int is_left(const strz_ctx_t *c, zmq_msg_t *id)
{
    return c->left_id_len > 0 && zmq_msg_size(id) == c->left_id_len
           && memcmp(zmq_msg_data(id), c->left_id, c->left_id_len) == 0;
}

int strz_zrecv(strz_ctx_t *c, strz_rmsg_t *m)
{
    const char *why = NULL;
    int extra, rc;

    for (;;) {
        memset(&m->h, 0, sizeof m->h);
        m->data = NULL;
        m->nparts = 0;
        if (c->broken)
            return c->broken;
        rc = strz_read_parts(c->rx, m->part, 3, &m->nparts, &extra);
        if (rc == STRATA_EAGAIN)
            return rc;
        if (rc < 0)
            return strz_fail(c, STRATA_EIO, c->rank, "receive: %s",
                             zmq_strerror(-rc));
        int bad = strz_unpack_parts(m->part, m->nparts, 1, extra, &m->h, &why);
        if (m->nparts < 2 || !is_left(c, &m->part[0])) {
            /* Only the left neighbour talks to rx once the ring runs:
             * anyone else is a stranger, dropped and counted. */
            char from[64];
            strz_peer_address(&m->part[m->nparts > 1 ? 1 : 0], from,
                              sizeof from);
            strz_rmsg_close(m);
            strz_stranger(c, STRZ_SK_MESSAGE, "a message from", from,
                          bad ? why : "not the left neighbour");
            continue;
        }
        if (bad) {
            strz_rmsg_close(m);
            return strz_fail(c, STRATA_EPROTO, c->left,
                             "malformed message from %s (%s) refused: %s",
                             c->name[c->left], c->addr[c->left], why);
        }
        if (m->h.type == STRZ_ABORT) {
            strz_hdr_t h = m->h;
            strz_rmsg_close(m);
            return strz_abort_received(c, &h, c->left);
        }
        if (m->h.type == STRZ_PROBE_ACK) { /* the left is alive: look on */
            if (m->h.seq == c->seq && m->h.offset > c->probe_acked)
                c->probe_acked = m->h.offset;
            strz_rmsg_close(m);
            continue;
        }
        if (m->nparts == 3)
            m->data = zmq_msg_data(&m->part[2]);
        return 0;
    }
}

/* Control messages that arrived on zmq while the data is direct: ABORTs
 * and PROBE_ACKs are handled by strz_zrecv; data there is refused. */
static int zmq_control(strz_ctx_t *c)
{
    strz_rmsg_t m;
    int rc = strz_zrecv(c, &m);
    if (rc == STRATA_EAGAIN)
        return 0;
    if (rc)
        return rc;
    int type = m.h.type;
    strz_rmsg_close(&m);
    return strz_fail(c, STRATA_EPROTO, c->left, "unexpected %s from %s (%s) "
                     "refused: %s", strz_wire_type_name(type),
                     c->name[c->left], c->addr[c->left],
                     c->shm ? "this group's collectives run in shared memory"
                            : "its data come on the direct connection");
}

int strz_recv(strz_ctx_t *c, strz_rmsg_t *m)
{
    return strz_recv_into(c, m, NULL, NULL);
}

int strz_recv_into(strz_ctx_t *c, strz_rmsg_t *m, const strz_hdr_t *want,
                   void *dst)
{
    if (c->broken)
        return c->broken;
    if (!strz_direct_rx(c))
        return strz_zrecv(c, m);
    return strz_direct_recv(c, m, want, dst);
}

void strz_rmsg_close(strz_rmsg_t *m)
{
    strz_close_parts(m->part, m->nparts);
    m->nparts = 0;
    m->data = NULL;
}

/* ---- sending -------------------------------------------------------- */

/* Runs on zmq's I/O thread when it no longer needs a zero-copy payload. */
static void zc_free(void *data, void *hint)
{
    strz_ctx_t *c = hint;
    (void)data;
    if (atomic_fetch_sub(&c->zc_out, 1) == 1
        && write(c->zc_pipe[1], "", 1) < 0) {
        /* pipe full: a wake-up byte is pending anyway */
    }
}

int strz_send(strz_ctx_t *c, const strz_hdr_t *h, const void *payload)
{
    unsigned char hb[STRZ_HDR_SIZE];
    int more = h->length > 0;

    if (c->broken)
        return c->broken;
    if (strz_direct_tx(c))
        return strz_direct_send(c, h, payload);
    if (c->tx == NULL)
        return STRATA_EINTERNAL;
    strz_wire_pack(h, hb);
    if (zmq_send(c->tx, hb, sizeof hb,
                 ZMQ_DONTWAIT | (more ? ZMQ_SNDMORE : 0)) < 0) {
        if (zmq_errno() == EAGAIN)
            return STRATA_EAGAIN;
        return strz_fail(c, STRATA_EIO, c->rank, "send to %s (%s): %s",
                         c->name[c->right], c->addr[c->right],
                         zmq_strerror(zmq_errno()));
    }
    if (!more)
        return 0;
    /* The second part joins the first (zmq accepts a multipart message
     * whole), so this never waits in practice; SNDTIMEO bounds it anyway. */
    int rc;
    if (h->length >= STRZ_ZC_MIN) {
        zmq_msg_t m;
        atomic_fetch_add(&c->zc_out, 1);
        if (zmq_msg_init_data(&m, (void *)payload, h->length, zc_free, c)) {
            atomic_fetch_sub(&c->zc_out, 1);
            rc = -1;
        } else if ((rc = zmq_msg_send(&m, c->tx, 0)) < 0) {
            int e = zmq_errno();
            zmq_msg_close(&m); /* calls zc_free */
            errno = e;
        }
    } else {
        rc = zmq_send(c->tx, payload, h->length, 0);
    }
    if (rc < 0)
        return strz_fail(c, STRATA_EIO, c->right, "send to %s (%s): %s",
                         c->name[c->right], c->addr[c->right],
                         zmq_strerror(zmq_errno()));
    return 0;
}

/* The right neighbour passed its deadline waiting for us: say that we are
 * alive and inside a wait (best effort; a full window means it has data
 * of ours to read anyway). */
static void answer_probe(strz_ctx_t *c, const strz_hdr_t *probe)
{
    strz_hdr_t h = { .type = STRZ_PROBE_ACK, .sender = c->rank,
                     .seq = probe->seq, .offset = probe->offset };
    unsigned char hb[STRZ_HDR_SIZE];
    strz_wire_pack(&h, hb);
    (void)zmq_send(c->tx, hb, sizeof hb, ZMQ_DONTWAIT);
}

/* Messages from the right neighbour (arriving on tx). */
static int right_rx(strz_ctx_t *c)
{
    zmq_msg_t part[2];
    int np, extra;
    const char *why = NULL;
    strz_hdr_t h;

    while (c->tx != NULL && !c->broken) {
        int rc = strz_read_parts(c->tx, part, 2, &np, &extra);
        if (rc == STRATA_EAGAIN)
            return 0;
        if (rc < 0)
            return strz_fail(c, STRATA_EIO, c->rank, "receive: %s",
                             zmq_strerror(-rc));
        int bad = strz_unpack_parts(part, np, 0, extra, &h, &why);
        /* A secured HELLO_ACK that offers a data socket carries the
         * right's key for it (32 bytes), authenticated by CURVE. */
        int has_pk = !bad && h.type == STRZ_HELLO_ACK && c->secure
                     && h.offset > 0 && h.length == sizeof c->right_dpk;
        if (has_pk)
            memcpy(c->right_dpk, zmq_msg_data(&part[1]), sizeof c->right_dpk);
        strz_close_parts(part, np);
        if (bad)
            return strz_fail(c, STRATA_EPROTO, c->right,
                             "malformed message from %s (%s) refused: %s",
                             c->name[c->right], c->addr[c->right], why);
        if (h.type == STRZ_ABORT)
            return strz_abort_received(c, &h, c->right);
        if (h.type == STRZ_PROBE && c->running) {
            answer_probe(c, &h);
            continue;
        }
        if (h.type == STRZ_HELLO_ACK && !c->right_up && h.sender == c->right
            && h.aux == c->n && h.offset < 65536) {
            c->right_up = 1;
            c->right_dport = (int)h.offset; /* a direct data socket, or 0 */
            c->right_dtoken = h.total;
            c->right_dpk_ok = has_pk;
            continue;
        }
        return strz_fail(c, STRATA_EPROTO, c->right,
                         "unexpected %s from %s (%s) refused",
                         strz_wire_type_name(h.type), c->name[c->right],
                         c->addr[c->right]);
    }
    return c->broken;
}

/* ---- waiting --------------------------------------------------------- */

static void read_monitor(strz_ctx_t *c, void *mon, int is_tx);

int strz_monitor_read(void *mon, int *id, uint32_t *value, char *where,
                      size_t wn)
{
    zmq_msg_t ev, ep;
    zmq_msg_init(&ev);
    if (zmq_msg_recv(&ev, mon, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&ev);
        return 0;
    }
    uint16_t id16 = 0;
    *value = 0;
    if (zmq_msg_size(&ev) >= 6) {
        memcpy(&id16, zmq_msg_data(&ev), 2);
        memcpy(value, (char *)zmq_msg_data(&ev) + 2, 4);
    }
    *id = id16;
    int more = zmq_msg_more(&ev);
    zmq_msg_close(&ev);
    where[0] = '\0';
    if (more) { /* the endpoint part */
        zmq_msg_init(&ep);
        if (zmq_msg_recv(&ep, mon, ZMQ_DONTWAIT) >= 0)
            snprintf(where, wn, "%.*s",
                     (int)(zmq_msg_size(&ep) < 80 ? zmq_msg_size(&ep) : 80),
                     (const char *)zmq_msg_data(&ep));
        zmq_msg_close(&ep);
    }
    return 1;
}

void strz_monitor_drain(strz_ctx_t *c)
{
    if (c->mon_rx)
        read_monitor(c, c->mon_rx, 0);
}

static void read_monitor(strz_ctx_t *c, void *mon, int is_tx)
{
    int id;
    uint32_t value;
    char where[96];
    while (strz_monitor_read(mon, &id, &value, where, sizeof where)) {
        if (!is_tx)
            strz_monitor_event(c, id, value, where);
        if (id != ZMQ_EVENT_DISCONNECTED)
            continue;
        if (is_tx && c->right_up && !c->right_gone_at)
            c->right_gone_at = strz_now_ms();
        else if (!is_tx && c->left_fd >= 0 && (int)value == c->left_fd
                 && !c->left_gone_at)
            c->left_gone_at = strz_now_ms();
    }
}

static int rx_has_input(strz_ctx_t *c)
{
    int ev = 0;
    if (strz_direct_rx(c)) /* a closed socket has nothing left to read */
        return 0;
    size_t len = sizeof ev;
    return zmq_getsockopt(c->rx, ZMQ_EVENTS, &ev, &len) == 0
           && (ev & ZMQ_POLLIN);
}

/* A dropped connection is fatal only when we still need it (data the left
 * sent before it closed is still delivered), and only after a short grace:
 * a neighbour that failed first sent an ABORT naming the peer at fault, and
 * that ABORT may still be on its way round the other side of the ring. */
static int check_gone(strz_ctx_t *c, int mask, int64_t now, int64_t *until)
{
    int64_t r = (mask & (STRZ_W_OUT | STRZ_W_SENDS)) ? c->right_gone_at : 0;
    int64_t l = (mask & STRZ_W_IN) && !rx_has_input(c) ? c->left_gone_at : 0;

    if (r && now >= r + STRZ_GONE_GRACE_MS)
        return strz_fail(c, STRATA_EPEER, c->right,
                         "lost connection to %s (%s)", c->name[c->right],
                         c->addr[c->right]);
    if (l && now >= l + STRZ_GONE_GRACE_MS)
        return strz_fail(c, STRATA_EPEER, c->left,
                         "lost connection to %s (%s)", c->name[c->left],
                         c->addr[c->left]);
    if (r && r + STRZ_GONE_GRACE_MS < *until)
        *until = r + STRZ_GONE_GRACE_MS;
    if (l && l + STRZ_GONE_GRACE_MS < *until)
        *until = l + STRZ_GONE_GRACE_MS;
    return 0;
}

static int timed_out(strz_ctx_t *c, int mask)
{
    double s = c->timeout_ms / 1000.0;

    if (!c->running) {
        char l[300] = "", r[300] = "";
        if (c->left_id_len == 0)
            snprintf(l, sizeof l, "no HELLO from %s (%s, left neighbour)",
                     c->name[c->left], c->addr[c->left]);
        if (!c->right_up)
            snprintf(r, sizeof r, "%sno answer from %s (%s, right neighbour)",
                     l[0] ? "; " : "", c->name[c->right], c->addr[c->right]);
        int peer = !c->right_up ? c->right : c->left;
        return strz_fail(c, STRATA_ETIMEDOUT, peer,
                         "timed out after %.1f s: %s%s", s, l, r);
    }
    /* A full window towards the right: the right is not reading, although
     * a member in a collective always reads while it expects data. */
    if ((mask & STRZ_W_IN) && !(mask & STRZ_W_OUT))
        return strz_fail(c, STRATA_ETIMEDOUT, c->left,
                         "timed out after %.1f s waiting for data from %s (%s)",
                         s, c->name[c->left], c->addr[c->left]);
    return strz_fail(c, STRATA_ETIMEDOUT, c->right,
                     "timed out after %.1f s: %s (%s) takes no data", s,
                     c->name[c->right], c->addr[c->right]);
}

/* How long a PROBE may go unanswered: long enough for a busy but live
 * neighbour to look at its sockets, short against the timeout. */
static int64_t probe_ms(const strz_ctx_t *c)
{
    int64_t ms = c->timeout_ms / 4;
    return ms < 100 ? 100 : ms > 1000 ? 1000 : ms;
}

/* The deadline passed. Waiting for the left does not make the left the
 * culprit: it may be waiting for its own left. So ask it (PROBE). A left
 * that answers is alive inside a wait, and whoever stalls the ring will be
 * named by the member right of it, whose ABORT comes round to us: keep
 * waiting, asking again every probe_ms. A left that does not answer in
 * probe_ms (stopped, or not in the collective at all) is the one at fault.
 * One more timeout at most. Returns 0 (wait on, *until set) or the error. */
static int past_deadline(strz_ctx_t *c, int mask, int64_t now,
                         int64_t deadline, int64_t *until)
{
    int64_t pm = probe_ms(c), cap = deadline + c->timeout_ms;

    if (!c->running || !(mask & STRZ_W_IN) || (mask & STRZ_W_OUT)
        || c->left_id_len == 0 || c->left_gone_at || now >= cap)
        return timed_out(c, mask);
    if (c->probes_sent > c->probe_acked && now >= c->probe_at + pm)
        return timed_out(c, mask); /* asked, no answer */
    if (c->probes_sent == 0 || now >= c->probe_at + pm) {
        strz_hdr_t h = { .type = STRZ_PROBE, .sender = c->rank,
                         .seq = c->seq, .offset = c->probes_sent + 1 };
        unsigned char hb[STRZ_HDR_SIZE];
        strz_wire_pack(&h, hb);
        if (zmq_send(c->rx, c->left_id, c->left_id_len,
                     ZMQ_SNDMORE | ZMQ_DONTWAIT) != (int)c->left_id_len
            || zmq_send(c->rx, hb, sizeof hb, ZMQ_DONTWAIT) != sizeof hb)
            return timed_out(c, mask);
        c->probes_sent++;
        c->probe_at = now;
    }
    *until = c->probe_at + pm < cap ? c->probe_at + pm : cap;
    return 0;
}

/* With every data link direct, the zmq sockets carry only control: look
 * at them every STRZ_CTRL_MS (and at once while a neighbour is gone)
 * instead of polling them with the data, which costs a few system calls
 * per wait. */
static int direct_only(const strz_ctx_t *c)
{
    return c->running && strz_direct_rx(c) && strz_direct_tx(c)
           && atomic_load(&c->zc_out) == 0;
}

int strz_control_look(strz_ctx_t *c, int64_t now)
{
    int rc;
    if (c->mon_tx)
        read_monitor(c, c->mon_tx, 1);
    read_monitor(c, c->mon_rx, 0);
    if ((rc = right_rx(c)) != 0 || (rc = zmq_control(c)) != 0)
        return rc;
    c->next_ctrl = now + STRZ_CTRL_MS;
    return 0;
}

/* Direct sockets: poll the wait's items without sleeping for up to
 * spin_us (a small message's reply comes within a few microseconds on a
 * fast link, and a sleep's wake-up costs as much again); never where the
 * members may outnumber this host's CPUs, whose spinning would keep the
 * very peer it waits for off a core. Returns what zmq_poll does; 0: the
 * budget went by, nothing ready. */
static int spin_poll(strz_ctx_t *c, zmq_pollitem_t *it, int k)
{
    if (c->spin_ns == 0)
        c->spin_ns = strz_may_spin(c) ? c->cfg.spin_us * 1000 : -1;
    if (c->spin_ns <= 0)
        return 0;
    int64_t until = strz_now_ns() + c->spin_ns;
    for (;;) {
        int rc = zmq_poll(it, k, 0);
        if (rc != 0 || strz_now_ns() >= until)
            return rc;
    }
}

int strz_wait(strz_ctx_t *c, int mask, int64_t deadline)
{
    zmq_pollitem_t it[8];
    int k = 0, i_mrx = -1, i_mtx = -1, i_wake, i_zc = -1, i_dr = -1, i_dl = -1;

    if (c->broken)
        return c->broken;
    if (atomic_load(&c->canceled))
        return strz_fail(c, STRATA_ECANCELED, c->rank,
                         "canceled by the caller (ctl ABORT)");
    /* A pending direct send makes progress in every wait: the right may be
     * waiting for it while we wait for the left. */
    int rc = strz_direct_pending(c) ? strz_direct_flush(c) : 0;
    if (rc < 0)
        return rc;
    rc = 0;
    int fast = direct_only(c);
    /* An ABORT that a closing right neighbour sent explains its leaving
     * better than the dropped connection does: read it first. */
    int64_t now = strz_now_ms(), until = deadline;
    int was_up = c->right_up;
    if (!fast)
        rc = right_rx(c);
    else if (now >= c->next_ctrl || c->left_gone_at || c->right_gone_at)
        rc = strz_control_look(c, now);
    if (rc == 0 && c->right_up != was_up)
        return 0; /* the HELLO_ACK the caller waits for: look again */
    if (rc == 0)
        rc = check_gone(c, mask, now, &until);
    if (rc)
        return rc;
    if (now >= deadline) {
        int64_t u = until;
        if ((rc = past_deadline(c, mask, now, deadline, &u)) != 0)
            return rc;
        if (u < until || until <= now)
            until = u;
    }
    if (fast && c->next_ctrl < until)
        until = c->next_ctrl > now ? c->next_ctrl : now + 1;

    if (mask & STRZ_W_IN) {
        if (strz_direct_rx(c)) {
            i_dl = k;
            it[k++] = (zmq_pollitem_t){ .fd = strz_direct_fd(c, 0),
                                        .events = ZMQ_POLLIN };
        } else {
            it[k++] = (zmq_pollitem_t){ .socket = c->rx, .events = ZMQ_POLLIN };
        }
    }
    if (strz_direct_tx(c) && !c->right_gone_at) {
        /* the right never writes to us: readable means closed */
        i_dr = k;
        it[k++] = (zmq_pollitem_t){ .fd = strz_direct_fd(c, 1),
                                    .events = ZMQ_POLLIN
                                    | (strz_direct_pending(c) ? ZMQ_POLLOUT
                                                              : 0) };
    }
    if (!fast && c->tx) {
        it[k++] = (zmq_pollitem_t){ .socket = c->tx, .events = ZMQ_POLLIN
                                    | ((mask & STRZ_W_OUT) && !strz_direct_tx(c)
                                       ? ZMQ_POLLOUT : 0) };
        i_mtx = k;
        it[k++] = (zmq_pollitem_t){ .socket = c->mon_tx, .events = ZMQ_POLLIN };
    }
    if (!fast) {
        if (strz_direct_rx(c)) /* then it carries control only */
            it[k++] = (zmq_pollitem_t){ .socket = c->rx, .events = ZMQ_POLLIN };
        i_mrx = k;
        it[k++] = (zmq_pollitem_t){ .socket = c->mon_rx, .events = ZMQ_POLLIN };
    }
    i_wake = k;
    it[k++] = (zmq_pollitem_t){ .fd = c->wake[0], .events = ZMQ_POLLIN };
    if (mask & STRZ_W_ZC) {
        i_zc = k;
        it[k++] = (zmq_pollitem_t){ .fd = c->zc_pipe[0], .events = ZMQ_POLLIN };
    }
    rc = fast ? spin_poll(c, it, k) : 0;
    if (rc == 0)
        rc = zmq_poll(it, k, until > now ? (long)(until - now) : 0);
    if (rc < 0) {
        if (zmq_errno() == EINTR)
            return 0;
        return strz_fail(c, STRATA_EIO, c->rank, "zmq_poll: %s",
                         zmq_strerror(zmq_errno()));
    }
    now = strz_now_ms();
    if (rc == 0)
        return 0; /* the next call looks at the deadline */
    if (it[i_wake].revents)
        return strz_fail(c, STRATA_ECANCELED, c->rank,
                         "canceled by the caller (ctl ABORT)");
    if (i_zc >= 0 && it[i_zc].revents)
        drain_zc_pipe(c);
    if (i_dr >= 0 && (it[i_dr].revents & (ZMQ_POLLIN | ZMQ_POLLERR))
        && (rc = strz_direct_back(c)) != 0)
        return rc;
    if (i_dl >= 0 && (it[i_dl].revents & ZMQ_POLLERR)
        && !(it[i_dl].revents & ZMQ_POLLIN))
        strz_direct_peek(c);
    if (fast)
        return 0;
    if (i_mtx >= 0 && it[i_mtx].revents)
        read_monitor(c, c->mon_tx, 1);
    if (i_mrx >= 0 && it[i_mrx].revents)
        read_monitor(c, c->mon_rx, 0);
    if ((rc = right_rx(c)) != 0)
        return rc;
    if (strz_direct_rx(c) && (rc = zmq_control(c)) != 0)
        return rc;
    until = deadline;
    return check_gone(c, mask, now, &until);
}

int strz_ctrl_poll(strz_ctx_t *c, int need_left, int need_right)
{
    int64_t until = INT64_MAX;
    int rc;

    if (c->broken)
        return c->broken;
    if (atomic_load(&c->canceled))
        return strz_fail(c, STRATA_ECANCELED, c->rank,
                         "canceled by the caller (ctl ABORT)");
    strz_direct_peek(c);
    if ((rc = strz_direct_back(c)) != 0
        || (rc = strz_control_look(c, strz_now_ms())) != 0)
        return rc;
    /* no data expected on the direct socket either */
    if (strz_direct_rx(c) && !c->left_gone_at) {
        strz_rmsg_t m;
        rc = strz_direct_recv(c, &m, NULL, NULL);
        if (rc == 0)
            return strz_fail(c, STRATA_EPROTO, c->left, "unexpected %s from "
                             "%s (%s) refused: this group's collectives run "
                             "in shared memory", strz_wire_type_name(m.h.type),
                             c->name[c->left], c->addr[c->left]);
        if (rc != STRATA_EAGAIN)
            return rc;
    }
    return check_gone(c, (need_left ? STRZ_W_IN : 0)
                         | (need_right ? STRZ_W_SENDS : 0),
                      strz_now_ms(), &until);
}

int strz_drain(strz_ctx_t *c, int64_t deadline)
{
    /* zc_free writes a byte whenever the count reaches 0, so a release
     * between the check and the poll still wakes the poll. A pending
     * direct send is flushed by the waits. */
    for (;;) {
        int rc = strz_direct_pending(c) ? strz_direct_flush(c) : 0;
        if (rc < 0)
            return rc;
        int pend = strz_direct_pending(c), zc = atomic_load(&c->zc_out) > 0;
        if (!pend && !zc)
            return 0;
        rc = strz_wait(c, (pend ? STRZ_W_OUT : 0) | (zc ? STRZ_W_ZC : 0),
                       deadline);
        if (rc)
            return rc;
    }
}
