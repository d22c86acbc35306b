/* ps.so -- a worker: asks the coordinator for a step (reporting the
 * previous one), pulls the current parameters from every ps, lets the
 * core run forward and backward on the batch, reduces its local replicas
 * in process and pushes the gradients: one fused message per ps, acked
 * each; it never waits for other workers. A heartbeat thread tells the
 * coordinator it is alive while it computes.
 *
 * A PUSH or PULL lost with its connection (a reset; a replayed or dropped
 * frame, after which CurveZMQ drops the link and zmq reconnects) is sent
 * again, the same request, until timeout_s: a pull is a read, and a ps
 * applies a step once and acks a copy as a duplicate (ps-lite's
 * resender). A request is not lost while it or its answer may still be
 * on the wire: the first resend comes after resend_ms plus the time the
 * round's requests and answers take at 100 Mbit/s (they share this
 * task's link; whole shards of hundreds of MB: seconds), the next ones
 * after twice as long each time, up to 8 x that; the deadline grows by
 * the same allowance.
 * Each resend has the ps send its answer again. A STEP_REQ is not
 * resent: it reports a result. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ps.h"

struct ps_worker {
    int             w;          /* worker index                          */
    int64_t        *version;    /* per ps: version of our parameters     */
    float         **stage;      /* per ps: host buffer of its gradients  */
    uint32_t       *nstage;     /* per ps: words of stage[j] pushed      */
    int64_t         push_bytes; /* payload bytes of the pushes sent      */
    uint64_t       *req;        /* per ps: the request awaited           */
    /* pulls of a batch's rows (p->pull_rows): the tables' rows the host
     * gave (batch_rows, ABI 2.11) and the requests made of them */
    strata_sparse_t *tabs;
    size_t          ntabs_cap;
    ps_want_t       want;
    /* the step handed out last */
    int             have_step;
    int64_t         step;
    int32_t         attempt;
    int64_t         lease;      /* the coordinator's, for the pushes     */
    atomic_llong    abort_key;  /* ours from the coordinator's replies
                                 * (ps_worker_key); 0: none yet          */
    int             status;     /* PS_OK, PS_STALE                       */
    int64_t         steps_run, stale;
    /* heartbeats */
    pthread_t       hb;
    int             hb_on;
    pthread_mutex_t hb_lock;
    pthread_cond_t  hb_cond;
    int             hb_stop;
};

int ps_worker_init(ps_t *p)
{
    ps_worker_t *k = calloc(1, sizeof *k);
    if (!k)
        return STRATA_ENOMEM;
    p->wk = k;
    k->w = p->member_worker[p->self];
    pthread_mutex_init(&k->hb_lock, NULL);
    pthread_cond_init(&k->hb_cond, NULL);
    k->version = calloc((size_t)p->nps, sizeof *k->version);
    k->stage = calloc((size_t)p->nps, sizeof *k->stage);
    k->req = calloc((size_t)p->nps, sizeof *k->req);
    k->nstage = calloc((size_t)p->nps, sizeof *k->nstage);
    if (!k->version || !k->stage || !k->req || !k->nstage)
        return STRATA_ENOMEM;
    if (p->pull_rows) {
        ps_want_t *w = &k->want;
        w->words = calloc((size_t)p->nps, sizeof *w->words);
        w->count = calloc((size_t)p->nps, sizeof *w->count);
        w->nblocks = calloc((size_t)p->nps, sizeof *w->nblocks);
        w->reply = calloc((size_t)p->nps, sizeof *w->reply);
        if (!w->words || !w->count || !w->nblocks || !w->reply)
            return STRATA_ENOMEM;
        for (int j = 0; j < p->nps; j++)
            if (!(w->words[j] = malloc((ps_rows_room(p, j) + 1)
                                       * sizeof(float))))
                return STRATA_ENOMEM;
    }
    /* room for a push with row blocks too (ps_rows.c) */
    for (int j = 0; j < p->nps; j++)
        if (!(k->stage[j] = p->host->alloc(
                  p->hc, p->cpu,
                  (p->place.ps_count[j] + 1
                   + (p->rows_ok ? ps_rows_room(p, j) : 0)) * sizeof(float))))
            return STRATA_ENOMEM;
    return STRATA_OK;
}

static void stop_heartbeats(ps_worker_t *k)
{
    if (!k->hb_on)
        return;
    pthread_mutex_lock(&k->hb_lock);
    k->hb_stop = 1;
    pthread_cond_signal(&k->hb_cond);
    pthread_mutex_unlock(&k->hb_lock);
    pthread_join(k->hb, NULL);
    k->hb_on = 0;
}

void ps_worker_fini(ps_t *p)
{
    ps_worker_t *k = p->wk;
    if (!k)
        return;
    stop_heartbeats(k);
    if (k->steps_run > 0 || k->have_step)
        ps_log(p, STRATA_LOG_INFO, "%s ran %lld steps (%lld pushes refused "
               "as stale, %lld requests sent again, %lld gradient bytes "
               "pushed, %s), %lld parameter bytes pulled (%lld pulls with "
               "rows)", ps_name(p, p->self),
               (long long)k->steps_run, (long long)k->stale,
               (long long)p->resent, (long long)k->push_bytes,
               p->rows_ok ? "embedding tables as rows" : "dense",
               (long long)p->pull_bytes, (long long)p->row_pulls);
    for (int j = 0; k->stage && j < p->nps; j++)
        p->host->free(p->hc, p->cpu, k->stage[j]);
    free(k->stage);
    free(k->nstage);
    for (int j = 0; k->want.words && j < p->nps; j++)
        free(k->want.words[j]);
    free(k->want.words);
    free(k->want.count);
    free(k->want.nblocks);
    free(k->want.reply);
    free(k->tabs);
    free(k->version);
    free(k->req);
    pthread_cond_destroy(&k->hb_cond);
    pthread_mutex_destroy(&k->hb_lock);
    free(k);
    p->wk = NULL;
}

static void *heartbeat_main(void *arg)
{
    ps_t *p = arg;
    ps_worker_t *k = p->wk;
    pthread_mutex_lock(&k->hb_lock);
    while (!k->hb_stop) {
        pthread_mutex_unlock(&k->hb_lock);
        ps_hdr_t h = { .type = PS_HEARTBEAT, .step = -1 };
        (void)ps_net_send(p, p->coord, &h, NULL, 0, (int)p->cfg.heartbeat_ms);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t ns = ts.tv_nsec + p->cfg.heartbeat_ms * 1000000;
        ts.tv_sec += (time_t)(ns / 1000000000);
        ts.tv_nsec = (long)(ns % 1000000000);
        pthread_mutex_lock(&k->hb_lock);
        if (!k->hb_stop)
            pthread_cond_timedwait(&k->hb_cond, &k->hb_lock, &ts);
    }
    pthread_mutex_unlock(&k->hb_lock);
    return NULL;
}

/* A message that is not the reply awaited: an ABORT from the coordinator
 * ends the job here; anything else is a late reply (dropped) or does not
 * belong to a worker (counted as malformed). */
static int other(ps_t *p, const ps_msg_t *m)
{
    /* An ABORT is the coordinator's when its tag is ours (ps_lease.c): one
     * forged in its name is dropped, counted and named (in plaintext the
     * sender is what the message says). Before the first reply taught the
     * key there is nothing to check it against. */
    int64_t key = atomic_load(&p->wk->abort_key);
    if (m->from == p->coord && m->h.type == PS_ABORT && key != 0 &&
        m->h.req != ps_worker_tag(key, &m->h, m->from, m->h.incarnation)) {
        long long n = atomic_fetch_add(&p->malformed, 1) + 1;
        if (n <= 10 || n % 1000 == 0)
            ps_log(p, STRATA_LOG_WARN, "%s: dropped ABORT from %s: its tag is "
                   "not the coordinator's (forged) (%lld so far)",
                   ps_name(p, p->self), ps_name(p, m->from), n);
        return STRATA_OK;
    }
    if (m->from == p->coord && m->h.type == PS_ABORT)
        return ps_aborted(p, m);
    int late = (m->from == p->coord && (m->h.type == PS_STEP
                || m->h.type == PS_WAIT || m->h.type == PS_DONE))
               || (p->member_ps[m->from] >= 0 && (m->h.type == PS_PARAMS
                   || m->h.type == PS_PUSH_ACK));
    if (late) {
        ps_log(p, STRATA_LOG_DEBUG, "%s: late %s from %s dropped",
               ps_name(p, p->self), ps_wire_type_name(m->h.type),
               ps_name(p, m->from));
    } else {
        atomic_fetch_add(&p->malformed, 1);
        ps_log(p, STRATA_LOG_WARN, "%s: unexpected %s from %s dropped",
               ps_name(p, p->self), ps_wire_type_name(m->h.type),
               ps_name(p, m->from));
    }
    return STRATA_OK;
}

/* The ps a reply to one of our per-ps requests comes from, or -1. */
static int ps_reply(const ps_t *p, const ps_msg_t *m, int type,
                    const uint64_t *req, const int *pending)
{
    int j = p->member_ps[m->from];
    if (j < 0 || m->h.type != type || !pending[j] || m->h.req != req[j])
        return -1;
    return j;
}

static int missing(ps_t *p, const int *pending, const char *what)
{
    for (int j = 0; j < p->nps; j++)
        if (pending[j]) {
            ps_log(p, STRATA_LOG_ERROR, "%s: %s (%s) did not answer %s "
                   "within %.1f s", ps_name(p, p->self),
                   ps_name(p, p->ps_member[j]), ps_addr(p, p->ps_member[j]),
                   what, p->timeout_ms / 1000.0);
            break;
        }
    return STRATA_ETIMEDOUT;
}

/* When the requests still pending go again: at `at`, then `gap` later,
 * the gap doubling up to `most`. */
typedef struct resend {
    int64_t at, gap, most;
} resend_t;

static resend_t resend_first(const ps_t *p, int64_t bytes)
{
    int64_t gap = p->cfg.resend_ms + ps_on_wire_ms(bytes);
    return (resend_t){ ps_now_ms() + gap, gap, 8 * gap };
}

/* The next answer by `deadline`; when rs->at passes without one, what is
 * still pending goes again (h[j], with nstage[j] values of stage[j] when
 * stage). STRATA_ETIMEDOUT at the deadline, naming who did not answer. */
static int recv_resending(ps_t *p, int64_t deadline, resend_t *rs,
                          const int *pending, ps_hdr_t *h,
                          float *const *stage, const uint32_t *nstage,
                          const char *what, ps_msg_t *m)
{
    for (;;) {
        int64_t until = rs->at < deadline ? rs->at : deadline;
        int rc = ps_net_recv(p, until, m);
        if (rc != STRATA_ETIMEDOUT)
            return rc;
        if (ps_now_ms() >= deadline)
            return missing(p, pending, what);
        for (int j = 0; j < p->nps; j++) {
            if (!pending[j])
                continue;
            ps_log(p, STRATA_LOG_INFO, "%s: no answer from %s (%s) to %s "
                   "%llu in %lld ms: sent again", ps_name(p, p->self),
                   ps_name(p, p->ps_member[j]), ps_addr(p, p->ps_member[j]),
                   what, (unsigned long long)h[j].req, (long long)rs->gap);
            p->resent++;
            rc = ps_net_send(p, p->ps_member[j], &h[j],
                             stage ? stage[j] : NULL,
                             stage ? nstage[j] : 0, 0);
            if (rc != STRATA_OK)
                return rc;
        }
        rs->gap = rs->gap * 2 < rs->most ? rs->gap * 2 : rs->most;
        rs->at = ps_now_ms() + rs->gap;
    }
}

/* A PARAMS for ps j's pending request: 0 when taken (*done: the answer
 * is whole), else why it is dropped. A whole answer comes in pieces (v9)
 * in order, each copied into place as it comes; a piece out of order (one
 * lost before it) voids the answer until the resent request's, from 0. */
static const char *take_params(ps_t *p, int j, const ps_hdr_t *sent,
                               const ps_want_t *want, const ps_msg_t *m,
                               uint32_t *got, int64_t *versions, int *done,
                               int *rc)
{
    /* what this request must bring back: its rows and the rest whole */
    size_t expect = sent->b > 0 ? want->reply[j] : p->place.ps_count[j];
    if (m->h.total != expect || m->h.b != sent->b)
        return "not the size the request asks for";
    if (sent->b > 0 && m->h.count != m->h.total)
        return "rows in pieces";
    if (m->h.at != 0 && (m->h.at != *got || m->h.a != versions[j])) {
        *got = 0;
        return NULL; /* a piece lost before it: wait for the resent one */
    }
    /* into every replica's copy: a copy of replica 0's whole slab would
     * write every table whole */
    for (int r = 0; *rc == STRATA_OK && r < p->nrep; r++)
        *rc = sent->b > 0
                  ? ps_pull_scatter(p, j, want, m->payload, p->slab[r],
                                    p->devices[r])
                  : ps_scatter_at(p, j, m->h.at, m->payload, m->h.count,
                                  p->slab[r], p->devices[r]);
    p->pull_bytes += 4 * (int64_t)m->h.count;
    versions[j] = m->h.a;
    *got = m->h.at + m->h.count;
    *done = *got == m->h.total;
    return NULL;
}

int ps_pull_all(ps_t *p, int64_t *versions, ps_other_fn other_fn,
                const ps_want_t *want)
{
    int *pending = calloc((size_t)p->nps, sizeof *pending);
    uint64_t *req = calloc((size_t)p->nps, sizeof *req);
    ps_hdr_t *sent = calloc((size_t)p->nps, sizeof *sent);
    uint32_t *got = calloc((size_t)p->nps, sizeof *got);
    int rc = pending && req && sent && got ? STRATA_OK : STRATA_ENOMEM,
        left = 0, rows = 0;
    for (int j = 0; rc == STRATA_OK && j < p->nps; j++) {
        ps_hdr_t h = { .type = PS_PULL, .step = -1, .req = ps_net_req(p) };
        if (want && want->nblocks[j] > 0) { /* rows of a batch (wire v7) */
            h.b = want->nblocks[j];
            h.count = want->count[j];
            rows = 1;
        }
        req[j] = h.req;
        sent[j] = h;
        rc = ps_net_send(p, p->ps_member[j], &h, want ? want->words[j] : NULL,
                         h.count, 0);
        pending[j] = 1;
        left++;
    }
    p->row_pulls += rows;
    int64_t bytes = 0; /* this round's requests and answers */
    for (int j = 0; j < p->nps; j++)
        bytes += 4 * ((int64_t)sent[j].count + (sent[j].b > 0
                                               ? want->reply[j]
                                               : p->place.ps_count[j]));
    int64_t deadline = ps_now_ms() + p->timeout_ms + ps_on_wire_ms(bytes);
    resend_t rs = resend_first(p, bytes);
    while (rc == STRATA_OK && left > 0) {
        ps_msg_t m;
        rc = recv_resending(p, deadline, &rs, pending, sent,
                            want ? want->words : NULL,
                            want ? want->count : NULL, "PULL", &m);
        if (rc != STRATA_OK)
            break;
        int j = ps_reply(p, &m, PS_PARAMS, req, pending), done = 0;
        const char *why = j < 0 ? NULL
                                : take_params(p, j, &sent[j], want, &m,
                                              &got[j], versions, &done, &rc);
        if (why) {
            atomic_fetch_add(&p->malformed, 1);
            ps_log(p, STRATA_LOG_WARN, "%s: PARAMS of %u values (%lld row "
                   "blocks) from %s: %s: dropped", ps_name(p, p->self),
                   m.h.total, (long long)m.h.b, ps_name(p, m.from), why);
        } else if (j >= 0 && done) {
            pending[j] = 0;
            left--;
        } else if (j < 0) {
            rc = other_fn(p, &m);
        }
    }
    free(pending);
    free(req);
    free(sent);
    free(got);
    return rc;
}

/* The requests for the rows of batch `batch` of epoch `epoch` that each
 * table is read at (host batch_rows, ABI 2.11). */
static int want_rows(ps_t *p, int32_t epoch, int64_t batch)
{
    ps_worker_t *k = p->wk;
    size_t n = 0;
    int rc = p->host->batch_rows(p->hc, epoch, batch, NULL, 0, &n);
    if (rc == STRATA_OK && n > k->ntabs_cap) {
        strata_sparse_t *t = realloc(k->tabs, n * sizeof *t);
        if (!t)
            return STRATA_ENOMEM;
        k->tabs = t;
        k->ntabs_cap = n;
    }
    if (rc == STRATA_OK && n > 0)
        rc = p->host->batch_rows(p->hc, epoch, batch, k->tabs, k->ntabs_cap,
                                 &n);
    /* The last batch's rows go: a worker holds one batch's rows of a
     * table, not the table (host discard, ABI 2.12: whole pages back to
     * the system, zeros until the pull writes this batch's rows). */
    for (size_t t = 0; rc == STRATA_OK && t < n; t++)
        for (int r = 0; r < p->nrep &&
                        STRATA_HAS_FIELD(strata_host_v2_t, p->host, discard);
             r++)
            (void)p->host->discard(p->hc, p->devices[r],
                                   p->slab[r] + k->tabs[t].offset,
                                   k->tabs[t].count * sizeof(float));
    for (int j = 0; rc == STRATA_OK && j < p->nps; j++)
        rc = ps_pull_pack(p, j, k->tabs, n, &k->want);
    if (rc != STRATA_OK)
        ps_log(p, STRATA_LOG_ERROR, "%s: the rows of batch %lld of epoch %d: "
               "%s", ps_name(p, p->self), (long long)batch, epoch,
               ps_strerror(rc));
    return rc;
}

/* One STEP_REQ (with `states`, q->count of them) and its reply. */
static int ask(ps_t *p, ps_hdr_t *q, const float *states, ps_msg_t *m)
{
    q->req = ps_net_req(p);
    int rc = ps_net_send(p, p->coord, q, states, q->count, 0);
    int64_t deadline = ps_now_ms() + p->timeout_ms;
    while (rc == STRATA_OK) {
        rc = ps_net_recv(p, deadline, m);
        if (rc == STRATA_ETIMEDOUT)
            ps_log(p, STRATA_LOG_ERROR, "%s: no answer from the coordinator "
                   "%s (%s) within %.1f s", ps_name(p, p->self),
                   ps_name(p, p->coord), ps_addr(p, p->coord),
                   p->timeout_ms / 1000.0);
        if (rc != STRATA_OK)
            break;
        if (m->from == p->coord && m->h.req == q->req
            && (m->h.type == PS_STEP || m->h.type == PS_WAIT
                || m->h.type == PS_DONE)) {
            /* the reply to our request: its key is the coordinator's (a
             * restarted coordinator's new one replaces the old) */
            if (m->h.b != 0)
                atomic_store(&p->wk->abort_key, m->h.b);
            return STRATA_OK;
        }
        rc = other(p, m);
    }
    return rc;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 };
    nanosleep(&ts, NULL);
}

/* The coordinator's layer states with our first STEP (a restored
 * checkpoint's, or the newest step's after a restart): installed on our
 * replicas before the step, so that the moving statistics go on from
 * there. A count that is not the model's is dropped and counted. */
static int take_states(ps_t *p, const ps_msg_t *m)
{
    size_t n = 0;
    if (!STRATA_HAS_FIELD(strata_host_v2_t, p->host, states_set) ||
        p->host->states_get(p->hc, NULL, 0, &n) != STRATA_OK ||
        n != m->h.count) {
        atomic_fetch_add(&p->malformed, 1);
        ps_log(p, STRATA_LOG_WARN, "%s: STEP with %u layer states, the model "
               "has %zu: not installed", ps_name(p, p->self), m->h.count, n);
        return STRATA_OK;
    }
    float *buf = malloc(n * sizeof *buf);
    if (!buf)
        return STRATA_ENOMEM;
    memcpy(buf, m->payload, n * sizeof *buf);
    int rc = p->host->states_set(p->hc, buf, n);
    free(buf);
    if (rc == STRATA_OK)
        ps_log(p, STRATA_LOG_INFO, "%s: layer states (%zu) taken from the "
               "coordinator before step %lld", ps_name(p, p->self), n,
               (long long)m->h.step);
    return rc;
}

int ps_worker_next_step(ps_t *p, strata_step_t *st)
{
    ps_worker_t *k = p->wk;
    if (!k->hb_on) {
        if (pthread_create(&k->hb, NULL, heartbeat_main, p) != 0)
            return STRATA_ENOMEM;
        k->hb_on = 1;
    }
    ps_hdr_t q = { .type = PS_STEP_REQ, .step = -1 };
    const float *states = NULL;
    if (k->have_step && st->has_result) {
        /* The wire carries finite floats only: a loss that is not says
         * so in has_result (the coordinator's core decides, [train]
         * on_nan). */
        int finite = isfinite(st->loss_sum);
        q.c = finite ? 1 : 2;
        q.step = k->step;
        q.attempt = k->attempt;
        q.status = (uint8_t)k->status;
        q.a = st->samples;
        ps_wire_set_metric(&q, !finite ? 0.0
                               : st->struct_size > offsetof(strata_step_t,
                                                            metric_sum)
                                   ? st->metric_sum : (double)st->correct);
        q.f = finite ? st->loss_sum : 0.0;
        /* the layer states after it (ABI 2.8), with a finite result */
        if (finite && STRATA_HAS_FIELD(strata_step_t, st, nstates) &&
            st->states && st->nstates > 0 && st->nstates <= UINT32_MAX) {
            states = st->states;
            q.count = (uint32_t)st->nstates;
            for (uint64_t i = 0; i < st->nstates; i++)
                if (!isfinite(states[i])) { /* not for the wire */
                    states = NULL;
                    q.count = 0;
                    break;
                }
        }
        if (k->status == PS_OK)
            k->steps_run++;
    }
    for (;;) {
        ps_msg_t m;
        int rc = ask(p, &q, states, &m);
        if (rc != STRATA_OK)
            return rc;
        states = NULL;
        q.count = 0;
        q.c = 0; /* the result went with the first request */
        q.step = -1;
        q.attempt = 0;
        q.status = PS_OK;
        q.a = q.b = 0;
        q.f = 0;
        if (m.h.type == PS_DONE) {
            st->done = 1;
            k->have_step = 0;
            stop_heartbeats(k);
            /* Stopped on request: exit to be restarted, as the others do. */
            return m.h.a == 1 ? STRATA_ESTOPPED : STRATA_OK;
        }
        if (m.h.type == PS_WAIT) {
            sleep_ms(m.h.a);
            continue;
        }
        st->done = 0;
        st->id = m.h.step;
        st->epoch = m.h.epoch;
        st->attempt = m.h.attempt;
        st->batch = m.h.a;
        k->have_step = 1;
        k->step = m.h.step;
        k->attempt = m.h.attempt;
        k->lease = m.h.c;
        k->status = PS_OK;
        if (m.h.count > 0) {
            rc = take_states(p, &m);
            if (rc != STRATA_OK)
                return rc;
        }
        /* Parameters current as of now: the stale-synchronous bound is
         * then counted from here to the push. Only the rows of the tables
         * this batch reads, when the worker may: the local copy's other
         * rows are stale, and this step reads none of them. */
        if (p->pull_rows && (rc = want_rows(p, st->epoch, st->batch))
                                != STRATA_OK)
            return rc;
        return ps_pull_all(p, k->version, other,
                           p->pull_rows ? &k->want : NULL);
    }
}

int ps_worker_push(ps_t *p, const strata_op_t *op)
{
    ps_worker_t *k = p->wk;
    if (!k->have_step || op->step != k->step || op->count != p->model_count) {
        ps_log(p, STRATA_LOG_ERROR, "%s: gradients of step %lld, but step "
               "%lld was handed out", ps_name(p, p->self),
               (long long)op->step, (long long)k->step);
        return STRATA_ESTATE;
    }
    int *pending = calloc((size_t)p->nps, sizeof *pending);
    ps_hdr_t *sent = calloc((size_t)p->nps, sizeof *sent);
    int rc = pending && sent ? STRATA_OK : STRATA_ENOMEM, left = 0;
    /* rows only where ps_reduce left them (ps.c: rows_ok) */
    int rows = STRATA_HAS_FIELD(strata_op_t, op, nsparse) && op->nsparse > 0
               && op->sparse;
    for (int j = 0; rc == STRATA_OK && j < p->nps; j++) {
        ps_hdr_t h = { .type = PS_PUSH, .step = k->step, .attempt = k->attempt,
                       .req = ps_net_req(p), .a = k->version[j], .f = op->lr,
                       .c = k->lease };
        k->nstage[j] = (uint32_t)p->place.ps_count[j];
        if (rows)
            rc = ps_rows_pack(p, j, op, k->stage[j], &k->nstage[j], &h.b);
        else
            rc = ps_gather(p, j, op->buf, op->device, k->stage[j]);
        k->req[j] = h.req;
        sent[j] = h;
        if (rc == STRATA_OK)
            rc = ps_net_send(p, p->ps_member[j], &h, k->stage[j],
                             k->nstage[j], 0);
        k->push_bytes += 4 * (int64_t)k->nstage[j];
        pending[j] = 1;
        left++;
    }
    int64_t bytes = 0; /* this round's pushes */
    for (int j = 0; j < p->nps; j++)
        bytes += 4 * (int64_t)k->nstage[j];
    int64_t deadline = ps_now_ms() + p->timeout_ms + ps_on_wire_ms(bytes);
    resend_t rs = resend_first(p, bytes);
    while (rc == STRATA_OK && left > 0) {
        ps_msg_t m;
        rc = recv_resending(p, deadline, &rs, pending, sent, k->stage,
                            k->nstage, "PUSH", &m);
        if (rc != STRATA_OK)
            break;
        int j = ps_reply(p, &m, PS_PUSH_ACK, k->req, pending);
        if (j < 0 || m.h.step != k->step) {
            rc = other(p, &m);
            continue;
        }
        if (m.h.status == PS_STALE) {
            k->status = PS_STALE;
            k->stale++;
            ps_log(p, STRATA_LOG_DEBUG, "%s: step %lld: %s refused the push as "
                   "stale (parameters of version %lld, the ps is at %lld, "
                   "max_staleness %lld)", ps_name(p, p->self),
                   (long long)k->step, ps_name(p, m.from),
                   (long long)k->version[j], (long long)m.h.a,
                   (long long)p->cfg.max_staleness);
        }
        pending[j] = 0;
        left--;
    }
    free(pending);
    free(sent);
    return rc;
}
