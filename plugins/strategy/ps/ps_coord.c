/* ps.so -- the coordinator (TensorFlow's ClusterCoordinator with
 * schedule/join): hands batches to the workers that ask, collects their
 * results, joins at the end of every epoch, evaluates its own pulled copy
 * of the variables and reports progress. Heartbeats say which workers are
 * alive: a lost (or restarted) worker's running step goes back to the
 * queue with the next attempt. The ps tasks are pinged: one that stops
 * answering for strategy.timeout_s stops the job. At the end every worker
 * is told DONE, every ps FINISH, and each ps's count of applied steps must
 * equal the steps scheduled: exactly once. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps.h"
#include "ps_sched.h"

typedef struct co_worker {
    int      seen, lost, told_done;
    uint64_t inc;          /* incarnation of the process we know        */
    int64_t  last_seen;    /* ps_now_ms of its last message             */
    int64_t  batch;        /* running in epoch s.epoch, or -1           */
    int64_t  steps, restarts;
    int      states_sent;  /* this incarnation got our layer states    */
} co_worker_t;

struct ps_coord {
    ps_sched_t   s;
    co_worker_t *w;
    int64_t     *ps_last;     /* when ps j last spoke                    */
    int64_t      pulling;     /* until when the answers of our whole pull
                                 may still be arriving (the ps tasks'
                                 other replies wait behind them)         */
    int64_t      spe;         /* step id = epoch * spe + batch           */
    int64_t      next_tick, next_ping;
    int64_t      lost_ms;     /* silence after which a worker is lost    */
    int64_t      last_worker; /* when a worker was last alive            */
    int64_t      last_enough; /* when min_workers were last alive        */
    int          finishing;
    int32_t      restored;    /* times each ps's state was put (0, 1)   */
    int64_t      total_done;
    int64_t      rescheduled, stale;
    int32_t      batch;       /* global batch, for the figures           */
    int          stopped;     /* the job stopped on request (SIGTERM)    */
    int          parts_off;   /* a ps could not write its part: gather  */
    /* a restored checkpoint, for the ps tasks before the first step     */
    float       *rs;          /* (1 + rs_slots) x model_count, or NULL   */
    int          rs_slots;
    int64_t      rs_opt_steps;
    /* the model's layer states (batchnorm's moving statistics, ABI 2.8):
     * those of the newest step applied, for evaluation and checkpoints */
    float       *st;          /* nst floats, or NULL: the model has none */
    size_t       nst;
    int64_t      st_step;     /* the step they are from; -1: none yet   */
    int          st_dirty;    /* newer than what our replicas hold      */
};

#define WAIT_MS 20 /* a worker that finds no step asks again after this */

int ps_coord_init(ps_t *p)
{
    ps_coord_t *co = calloc(1, sizeof *co);
    if (!co)
        return STRATA_ENOMEM;
    p->co = co;
    co->w = calloc((size_t)p->nworkers, sizeof *co->w);
    co->ps_last = calloc((size_t)p->nps, sizeof *co->ps_last);
    if (!co->w || !co->ps_last)
        return STRATA_ENOMEM;
    for (int i = 0; i < p->nworkers; i++)
        co->w[i].batch = -1;
    co->lost_ms = 6 * p->cfg.heartbeat_ms;
    return ps_lease_new_key(p);
}

void ps_coord_fini(ps_t *p)
{
    ps_coord_t *co = p->co;
    if (!co)
        return;
    ps_sched_free(&co->s);
    free(co->rs);
    free(co->st);
    free(co->w);
    free(co->ps_last);
    free(co);
    p->co = NULL;
}

static int reply_ms(const ps_t *p)
{
    return p->timeout_ms < 1000 ? p->timeout_ms : 1000;
}

/* Put worker wi's running step back in the queue, saying why (a stale
 * push is routine under max_staleness: counted, logged at debug level). */
static void reschedule_at(ps_t *p, int wi, int level, const char *why)
{
    ps_coord_t *co = p->co;
    co_worker_t *w = &co->w[wi];
    int64_t b = w->batch;
    w->batch = -1;
    if (b < 0 || co->s.owner[b] != wi || !ps_sched_requeue(&co->s, b))
        return;
    co->rescheduled++;
    ps_log(p, level, "step %lld (epoch %d, batch %lld, attempt %d) "
           "of %s re-scheduled: %s", (long long)(co->s.epoch * co->spe + b),
           co->s.epoch + 1, (long long)b, co->s.attempt[b],
           ps_name(p, p->worker_member[wi]), why);
}

static void reschedule(ps_t *p, int wi, const char *why)
{
    reschedule_at(p, wi, STRATA_LOG_WARN, why);
}

/* Any message from worker wi: alive; a new incarnation is a restart. */
static void seen(ps_t *p, int wi, uint64_t inc)
{
    co_worker_t *w = &p->co->w[wi];
    const char *name = ps_name(p, p->worker_member[wi]);
    if (!w->seen) {
        ps_log(p, STRATA_LOG_INFO, "%s registered", name);
    } else if (w->inc != inc) {
        w->restarts++;
        ps_log(p, STRATA_LOG_WARN, "%s rejoined after a restart (%lld so "
               "far); it pulls the current parameters and gets work", name,
               (long long)w->restarts);
        reschedule(p, wi, "its worker restarted");
        w->states_sent = 0; /* a new process: its statistics start anew */
    } else if (w->lost) {
        ps_log(p, STRATA_LOG_WARN, "%s is back after %.1f s of silence", name,
               (ps_now_ms() - w->last_seen) / 1000.0);
    }
    w->seen = 1;
    w->lost = 0;
    w->inc = inc;
    w->last_seen = p->co->last_worker = ps_now_ms();
}

/* The running figures to the core; its answer (a non-finite loss under
 * [train] on_nan = stop: STRATA_EDIVERGED) ends the job. */
static int progress(ps_t *p)
{
    const ps_sched_t *s = &p->co->s;
    double n = s->samples > 0 ? (double)s->samples : 1.0;
    strata_report_t r = {
        .struct_size = sizeof r, .kind = STRATA_REPORT_STEP,
        .epoch = s->epoch, .steps = s->ndone, .loss = s->loss / n,
        .acc = s->metric / n,
    };
    return p->host->report(p->hc, &r);
}

/* The layer states a step's result carried: kept when the step is the
 * newest applied (the highest step id). */
static void keep_states(ps_t *p, const ps_msg_t *m)
{
    ps_coord_t *co = p->co;
    if (!co->st || m->h.count != co->nst || m->h.step <= co->st_step)
        return;
    memcpy(co->st, m->payload, co->nst * sizeof *co->st);
    co->st_step = m->h.step;
    co->st_dirty = 1;
}

/* Our replicas take the newest layer states: before an evaluation, a
 * step boundary (its checkpoint) and the job's end (the final test). */
static int install_states(ps_t *p)
{
    ps_coord_t *co = p->co;
    if (!co->st_dirty)
        return STRATA_OK;
    co->st_dirty = 0;
    return p->host->states_set(p->hc, co->st, co->nst);
}

/* The result of worker wi's previous step (STEP_REQ with has_result: 2,
 * its loss was not finite). */
static int result(ps_t *p, int wi, const ps_msg_t *m)
{
    const ps_hdr_t *h = &m->h;
    ps_coord_t *co = p->co;
    co_worker_t *w = &co->w[wi];
    int64_t epoch = h->step / co->spe, b = h->step % co->spe;
    if (w->batch == b && epoch == co->s.epoch)
        w->batch = -1;
    if (epoch != co->s.epoch || b >= co->s.n)
        return STRATA_OK; /* an epoch that is over: a late duplicate */
    if (h->status == PS_OK) {
        if (ps_sched_done(&co->s, b, h->c == 2 ? NAN : h->f,
                          ps_wire_metric(h), h->a) == 1) {
            keep_states(p, m);
            co->total_done++;
            w->steps++;
            return progress(p);
        }
        return STRATA_OK;
    }
    if (co->s.state[b] == PS_B_RUNNING && co->s.owner[b] == wi) {
        w->batch = b;
        if (h->status == PS_STALE)
            co->stale++;
        reschedule_at(p, wi, h->status == PS_STALE ? STRATA_LOG_DEBUG
                                                   : STRATA_LOG_WARN,
                      h->status == PS_STALE ? "a ps refused its push as stale "
                      "(strategy.max_staleness)" : "the worker failed it");
    }
    return STRATA_OK;
}

/* Before the next fresh batch goes out: does the core want a boundary
 * there? Then no batch from it on is handed out until it is reached. */
static void plan_boundary(ps_t *p)
{
    ps_sched_t *s = &p->co->s;
    if (s->limit < s->n || s->issued >= s->n)
        return;
    if (p->host->boundary_due(p->hc, s->epoch, s->issued,
                              s->epoch * p->co->spe + s->issued) == 1)
        s->limit = s->issued;
}

/* Answer a STEP_REQ: a step, WAIT (the epoch is joining, or a step
 * boundary is being drained), or DONE. */
static void assign(ps_t *p, int wi, const ps_msg_t *m)
{
    ps_coord_t *co = p->co;
    co_worker_t *w = &co->w[wi];
    ps_hdr_t r = { .type = PS_WAIT, .req = m->h.req, .step = -1,
                   .a = WAIT_MS };
    /* the worker's own key, for our ABORTs' tags (ps_lease.c) */
    if (p->lease_key_set)
        r.b = ps_worker_key(p, m->from);
    int64_t b = -1;
    int32_t attempt = 0;
    if (!co->finishing)
        plan_boundary(p);
    if (co->finishing) {
        r.type = PS_DONE;
        r.a = co->stopped;
    } else if (w->batch < 0 && ps_sched_next(&co->s, wi, &b, &attempt)) {
        r.type = PS_STEP;
        r.step = co->s.epoch * co->spe + b;
        r.attempt = attempt;
        r.epoch = co->s.epoch;
        r.a = b;
        r.c = ps_lease(p, r.step, attempt, m->from);
        w->batch = b;
    }
    /* A worker process's first step starts from our layer states (a
     * restored checkpoint's, or the newest step's after a restart). */
    const float *states = NULL;
    if (r.type == PS_STEP && co->st && !w->states_sent) {
        states = co->st;
        r.count = (uint32_t)co->nst;
    }
    int rc = ps_net_send(p, m->from, &r, states, r.count, reply_ms(p));
    if (rc == STRATA_OK && states)
        w->states_sent = 1;
    if (rc == STRATA_OK && r.type == PS_DONE)
        w->told_done = 1;
    if (rc != STRATA_OK && b >= 0)
        reschedule(p, wi, "could not hand it over");
}

static void refuse(ps_t *p, const ps_msg_t *m, const char *why)
{
    long long n = atomic_fetch_add(&p->malformed, 1) + 1;
    if (n <= 10 || n % 1000 == 0)
        ps_log(p, STRATA_LOG_WARN, "coordinator: dropped %s from %s: %s",
               ps_wire_type_name(m->h.type), ps_name(p, m->from), why);
}

/* Every message that is not a reply the caller awaits. */
static int handle(ps_t *p, const ps_msg_t *m)
{
    ps_coord_t *co = p->co;
    int wi = p->member_worker[m->from], j = p->member_ps[m->from];
    if (j >= 0) {
        co->ps_last[j] = ps_now_ms();
        if (m->h.type != PS_PONG && m->h.type != PS_PARAMS
            && m->h.type != PS_FIN_ACK)
            refuse(p, m, "not a reply of a ps");
        return STRATA_OK; /* PONG, or a late reply */
    }
    if (wi < 0) {
        refuse(p, m, "not from a worker or a ps");
        return STRATA_OK;
    }
    if (m->h.type != PS_HEARTBEAT && m->h.type != PS_STEP_REQ) {
        refuse(p, m, "not a worker's request");
        return STRATA_OK;
    }
    /* layer states: none, or exactly the model's (finite: unpacked) */
    if (m->h.type == PS_STEP_REQ && m->h.count != 0 &&
        m->h.count != co->nst) {
        char why[96];
        snprintf(why, sizeof why, "%u layer states, the model has %zu",
                 m->h.count, co->nst);
        refuse(p, m, why);
        return STRATA_OK;
    }
    seen(p, wi, m->h.incarnation);
    int rc = STRATA_OK;
    if (m->h.type == PS_STEP_REQ) {
        if (m->h.c >= 1)
            rc = result(p, wi, m);
        else if (co->w[wi].batch >= 0) /* our STEP never reached it */
            reschedule(p, wi, "the worker asks again without its result");
        if (rc == STRATA_OK)
            assign(p, wi, m);
    }
    return rc;
}

/* Pings, and who is gone: a silent worker is lost (its step goes back),
 * a silent ps ends the job. Called with the queue drained. */
static int tick(ps_t *p)
{
    ps_coord_t *co = p->co;
    int64_t now = ps_now_ms();
    if (now >= co->next_ping) {
        co->next_ping = now + p->cfg.heartbeat_ms;
        for (int j = 0; j < p->nps; j++) {
            ps_hdr_t h = { .type = PS_PING, .step = -1 };
            ps_lease_key_out(p, &h.a, &h.b);
            h.req = ps_ctl_req(p, &h);
            (void)ps_net_send(p, p->ps_member[j], &h, NULL, 0, 50);
        }
        now = ps_now_ms();
    }
    for (int j = 0; j < p->nps; j++)
        if (now - (co->ps_last[j] > co->pulling ? co->ps_last[j]
                                                : co->pulling)
            > p->timeout_ms) {
            ps_log(p, STRATA_LOG_ERROR, "%s (%s) stopped answering: no reply "
                   "for %.1f s (strategy.timeout_s); stopping the job",
                   ps_name(p, p->ps_member[j]), ps_addr(p, p->ps_member[j]),
                   (now - co->ps_last[j]) / 1000.0);
            return STRATA_EPEER;
        }
    int alive = 0;
    for (int wi = 0; wi < p->nworkers; wi++) {
        co_worker_t *w = &co->w[wi];
        /* finishing: the workers were told DONE, and go */
        if (!co->finishing && w->seen && !w->lost
            && now - w->last_seen > co->lost_ms) {
            w->lost = 1;
            ps_log(p, STRATA_LOG_WARN, "%s (%s) lost: no heartbeat for %.1f s",
                   ps_name(p, p->worker_member[wi]),
                   ps_addr(p, p->worker_member[wi]),
                   (now - w->last_seen) / 1000.0);
            reschedule(p, wi, "its worker was lost");
        }
        alive += w->seen && !w->lost;
    }
    /* Workers come and go (launch restarts them); below min_workers for
     * longer than the timeout, the job cannot go on. EPEER, not ETIMEDOUT:
     * the callers read ETIMEDOUT as "the pump's own deadline passed". */
    if (alive >= p->cfg.min_workers || co->finishing)
        co->last_enough = now;
    if (alive < p->cfg.min_workers && now - co->last_enough > p->timeout_ms) {
        if (alive == 0)
            ps_log(p, STRATA_LOG_ERROR, "no worker alive for %.1f s "
                   "(strategy.timeout_s); stopping the job",
                   (now - co->last_enough) / 1000.0);
        else
            ps_log(p, STRATA_LOG_ERROR, "only %d of %d workers alive for "
                   "%.1f s, fewer than [strategy.ps] min_workers = %lld; "
                   "stopping the job", alive, p->nworkers,
                   (now - co->last_enough) / 1000.0,
                   (long long)p->cfg.min_workers);
        return STRATA_EPEER;
    }
    return STRATA_OK;
}

/* Handle messages, with ticks in between, until `until`: STRATA_ETIMEDOUT.
 * With `want`, until a message that matches it (type, sender member,
 * request id; from -1: any sender and request), returned in *got;
 * without, after each message handled. */
typedef struct co_want {
    int      type, from;
    uint64_t req;
} co_want_t;

static int wanted(const co_want_t *want, const ps_msg_t *m)
{
    return want && m->h.type == want->type
           && (want->from < 0 || (m->from == want->from
                                  && m->h.req == want->req));
}

static int pump(ps_t *p, int64_t until, const co_want_t *want, ps_msg_t *got)
{
    ps_coord_t *co = p->co;
    for (;;) {
        int64_t now = ps_now_ms();
        if (now >= co->next_tick) {
            /* Drain first: queued heartbeats count before judging. */
            ps_msg_t m;
            int rc, n = 0;
            while (n++ < 100000
                   && (rc = ps_net_recv(p, ps_now_ms() + 1, &m)) == STRATA_OK) {
                if (wanted(want, &m)) {
                    *got = m;
                    return STRATA_OK;
                }
                if ((rc = handle(p, &m)) != STRATA_OK)
                    return rc;
            }
            if (rc != STRATA_OK && rc != STRATA_ETIMEDOUT)
                return rc;
            if ((rc = tick(p)) != STRATA_OK)
                return rc;
            co->next_tick = ps_now_ms() + (p->cfg.heartbeat_ms + 1) / 2;
            now = ps_now_ms();
        }
        if (now >= until)
            return STRATA_ETIMEDOUT;
        ps_msg_t m;
        int rc = ps_net_recv(p, until < co->next_tick ? until : co->next_tick,
                             &m);
        if (rc == STRATA_ETIMEDOUT)
            continue;
        if (rc != STRATA_OK)
            return rc;
        if (wanted(want, &m)) {
            *got = m;
            return STRATA_OK;
        }
        if ((rc = handle(p, &m)) != STRATA_OK || !want)
            return rc;
    }
}

/* Send request h to `member` and wait for its reply of type `type`
 * (the other messages handled meanwhile) until `deadline`. */
static int request(ps_t *p, int member, ps_hdr_t *h, const float *payload,
                   uint32_t count, int type, int64_t deadline, ps_msg_t *m)
{
    ps_hdr_count(h, count); /* as ps_net_send will: the tag covers it */
    h->req = ps_ctl_req(p, h);
    co_want_t want = { type, member, h->req };
    int rc = ps_net_send(p, member, h, payload, count, reply_ms(p));
    while (rc == STRATA_OK) {
        rc = pump(p, deadline, &want, m);
        if (rc != STRATA_ETIMEDOUT || ps_now_ms() >= deadline)
            break;
        rc = STRATA_OK;
    }
    return rc;
}

/* Every ps learns the lease key (a PING carries it) before a step is
 * handed out: its PONG says it has it, so that no push of the job meets a
 * ps that cannot check it. */
static int hand_lease_key(ps_t *p)
{
    for (int j = 0; j < p->nps; j++) {
        int member = p->ps_member[j];
        ps_hdr_t h = { .type = PS_PING, .step = -1 };
        ps_lease_key_out(p, &h.a, &h.b);
        ps_msg_t m;
        int64_t deadline = ps_now_ms() + p->timeout_ms;
        int rc;
        /* A ps still starting (a loaded machine) may not take the PING
         * within one send's wait: ask again until the deadline. A PING
         * twice is harmless (the same key; the first PONG ends it). */
        while ((rc = request(p, member, &h, NULL, 0, PS_PONG, deadline,
                             &m)) != STRATA_OK && ps_now_ms() < deadline &&
               rc != STRATA_ESTOPPED && rc != STRATA_ECANCELED) {
            struct timespec nap = { 0, 50 * 1000000L };
            nanosleep(&nap, NULL);
        }
        if (rc != STRATA_OK) {
            ps_log(p, STRATA_LOG_ERROR, "%s (%s) did not answer the "
                   "coordinator within %.1f s (strategy.timeout_s): %s",
                   ps_name(p, member), ps_addr(p, member),
                   p->timeout_ms / 1000.0, ps_strerror(rc));
            return rc;
        }
    }
    return STRATA_OK;
}

/* The same optimizer step count on every ps: a step boundary. */
static int same_opt_steps(ps_t *p, int j, int64_t steps, strata_state_t *st)
{
    if (j == 0)
        st->opt_steps = steps;
    else if (steps != st->opt_steps) {
        ps_log(p, STRATA_LOG_ERROR, "checkpoint: %s applied %lld optimizer "
               "steps, ps:0 %lld: not a step boundary",
               ps_name(p, p->ps_member[j]), (long long)steps,
               (long long)st->opt_steps);
        return STRATA_EINTERNAL;
    }
    return STRATA_OK;
}

/* STRATA_CTL_STATE_GET for a checkpoint in parts (plugin ABI 2.13): every
 * ps writes its own, all at once (STATE_SAVE); nothing comes here. A ps
 * has timeout_s to answer, and as long again per 100 MB it writes. */
static int save_parts(ps_t *p, strata_state_t *st)
{
    uint64_t *req = calloc((size_t)p->nps, sizeof *req);
    int rc = req ? STRATA_OK : STRATA_ENOMEM;
    for (int j = 0; rc == STRATA_OK && j < p->nps; j++) {
        ps_hdr_t h = { .type = PS_STATE_SAVE, .step = st->part_step,
                       .a = (int64_t)st->part_tag, .b = st->nslots,
                       .c = p->nps };
        h.req = ps_ctl_req(p, &h);
        req[j] = h.req;
        rc = ps_net_send(p, p->ps_member[j], &h, NULL, 0, reply_ms(p));
        if (rc != STRATA_OK)
            ps_log(p, STRATA_LOG_ERROR, "checkpoint: cannot ask %s (%s) to "
                   "write its part: %s", ps_name(p, p->ps_member[j]),
                   ps_addr(p, p->ps_member[j]), ps_strerror(rc));
    }
    /* The answers come in any order, until the largest part's deadline. */
    double most = 0;
    for (int j = 0; j < p->nps; j++)
        if ((double)p->place.ps_count[j] > most)
            most = (double)p->place.ps_count[j];
    int64_t deadline = ps_now_ms() + (int64_t)((1.0 + most * 4.0 *
                                                (1 + st->nslots) / 1e8) *
                                               p->timeout_ms);
    int64_t bytes = 0, steps = 0;
    int left = p->nps, failed = -1;
    while (rc == STRATA_OK && left > 0) {
        co_want_t want = { PS_STATE_SAVED, -1, 0 };
        ps_msg_t m;
        rc = pump(p, deadline, &want, &m);
        int j = rc == STRATA_OK && m.from >= 0 && m.from < p->nmembers
                    ? p->member_ps[m.from] : -1;
        if (rc != STRATA_OK || j < 0 || req[j] != m.h.req)
            continue; /* a stale or stray answer: pump counted nothing */
        req[j] = 0;
        left--;
        if (m.h.status != PS_OK)
            failed = j;
        else if (left == p->nps - 1)
            steps = m.h.a;
        else if (m.h.a != steps)
            rc = STRATA_EINTERNAL;
        bytes += m.h.b;
    }
    if (rc == STRATA_EINTERNAL)
        ps_log(p, STRATA_LOG_ERROR, "checkpoint of step %lld: the ps tasks "
               "applied different optimizer step counts: not a step boundary",
               (long long)st->part_step);
    for (int j = 0; j < p->nps; j++)
        if (j == failed || (req[j] && rc != STRATA_OK && rc != STRATA_EINTERNAL))
            ps_log(p, STRATA_LOG_ERROR, "checkpoint: %s (%s) did not write "
                   "its part of step %lld: %s", ps_name(p, p->ps_member[j]),
                   ps_addr(p, p->ps_member[j]), (long long)st->part_step,
                   j == failed ? "it failed (its log says why)"
                               : ps_strerror(rc));
    if (rc == STRATA_OK && failed >= 0)
        rc = STRATA_EPEER;
    st->opt_steps = steps;
    free(req);
    if (rc == STRATA_OK) {
        st->nparts = p->nps;
        ps_log(p, STRATA_LOG_INFO, "checkpoint of step %lld: %d ps tasks "
               "wrote their parts (%.1f MiB)", (long long)st->part_step,
               p->nps, (double)bytes / 1048576.0);
    }
    return rc;
}

/* Every ps's shards, whole (to evaluate, or the final values): the
 * answers share our link, so no ps counts as silent before they may all
 * have arrived at 100 Mbit/s (ps_on_wire_ms). */
static int pull_whole(ps_t *p, int64_t *versions)
{
    int64_t bytes = 4 * (int64_t)p->model_count;
    p->co->pulling = ps_now_ms() + ps_on_wire_ms(bytes);
    int rc = ps_pull_all(p, versions, handle, NULL);
    p->co->pulling = 0;
    for (int j = 0; rc == STRATA_OK && j < p->nps; j++)
        p->co->ps_last[j] = ps_now_ms(); /* each answered: alive now */
    return rc;
}

/* STRATA_CTL_STATE_GET at a step boundary: every part of every ps's state
 * (ps_wire.h: STATE_*) into the flat host buffers of st, or (ABI 2.13,
 * [strategy.ps] checkpoint_parts) into part files the ps tasks write. */
static int gather_state(ps_t *p, strata_state_t *st)
{
    if (st->nslots < 0 || st->nslots > PS_MAX_SLOTS)
        return STRATA_EINVAL;
    if (STRATA_HAS_FIELD(strata_state_t, st, nparts) && st->part_step >= 0
        && p->cfg.checkpoint_parts && !p->co->parts_off) {
        int rc = save_parts(p, st);
        if (rc != STRATA_EPEER)
            return rc;
        /* A ps could not write (no such directory on its machine, no
         * room): the whole state comes here, now and from then on. */
        ps_log(p, STRATA_LOG_WARN, "checkpoint of step %lld: the coordinator "
               "gathers the state and writes it alone, for this checkpoint "
               "and the rest of the job (strategy.ps.checkpoint_parts needs a "
               "[checkpoint] dir every ps task can write)",
               (long long)st->part_step);
        p->co->parts_off = 1;
        st->nparts = 0;
    }
    for (int j = 0; j < p->nps; j++) {
        int member = p->ps_member[j];
        for (int part = 0; part <= st->nslots; part++) {
            ps_hdr_t h = { .type = PS_STATE_REQ, .step = -1, .a = part,
                           .b = st->nslots };
            ps_msg_t m;
            uint32_t n = (uint32_t)p->place.ps_count[j], got = 0;
            int64_t deadline = ps_now_ms() + p->timeout_ms
                               + ps_on_wire_ms(4 * (int64_t)n);
            int rc = request(p, member, &h, NULL, 0, PS_STATE, deadline, &m);
            /* the answer's pieces (v9), in order, each into place */
            while (rc == STRATA_OK) {
                if (m.h.status != PS_OK || m.h.a != part || m.h.total != n
                    || m.h.at != got)
                    rc = STRATA_EPROTO;
                if (rc == STRATA_OK)
                    rc = ps_scatter_at(p, j, m.h.at, m.payload, m.h.count,
                                       part ? st->slots[part - 1] : st->vars,
                                       p->cpu);
                got += m.h.count;
                if (rc != STRATA_OK || got == n)
                    break;
                rc = pump(p, deadline, &(co_want_t){ PS_STATE, member, h.req },
                          &m);
            }
            if (rc != STRATA_OK) {
                ps_log(p, STRATA_LOG_ERROR, "checkpoint: %s (%s) did not "
                       "give part %d of its state: %s", ps_name(p, member),
                       ps_addr(p, member), part, ps_strerror(rc));
                return rc;
            }
            if ((rc = same_opt_steps(p, j, m.h.b, st)) != STRATA_OK)
                return rc;
        }
    }
    return STRATA_OK;
}

/* Part `part` of ps j's state (`vals`, every word of it) in pieces (v9),
 * the last one awaiting the ps's acknowledgement until `until`. */
static int put_part(ps_t *p, int j, int part, int64_t step,
                    const float *vals, int64_t until, ps_msg_t *m)
{
    ps_coord_t *co = p->co;
    int member = p->ps_member[j];
    uint32_t n = (uint32_t)p->place.ps_count[j], piece = ps_piece_words(p);
    for (uint32_t at = 0;; at += piece) {
        uint32_t k = n - at < piece ? n - at : piece;
        ps_hdr_t h = { .type = PS_STATE_PUT, .step = step, .a = part,
                       .b = co->rs_slots, .c = co->rs_opt_steps, .at = at,
                       .total = n };
        if (at + k == n)
            return request(p, member, &h, vals + at, k, PS_STATE_ACK, until,
                           m);
        ps_hdr_count(&h, k); /* the tag covers the piece's place */
        h.req = ps_ctl_req(p, &h);
        int rc = ps_net_send(p, member, &h, vals + at, k, 0);
        if (rc != STRATA_OK)
            return rc;
    }
}

/* A restored state goes to every ps before the first step: each part of
 * its shards, retried until the ps is up and takes it (tasks start in any
 * order) or strategy.timeout_s passes. */
static int push_state(ps_t *p, int64_t step)
{
    ps_coord_t *co = p->co;
    size_t most = 1;
    for (int j = 0; j < p->nps; j++)
        if (p->place.ps_count[j] > most)
            most = p->place.ps_count[j];
    float *buf = malloc(most * sizeof *buf);
    int rc = buf ? STRATA_OK : STRATA_ENOMEM;
    /* timeout_s, and the time the whole state takes at 100 Mbit/s */
    int64_t deadline = ps_now_ms() + p->timeout_ms + ps_on_wire_ms(
                           4 * (int64_t)p->model_count * (1 + co->rs_slots));
    for (int j = 0; rc == STRATA_OK && j < p->nps; j++) {
        int member = p->ps_member[j];
        for (int part = 0; rc == STRATA_OK && part <= co->rs_slots; part++) {
            rc = ps_gather(p, j, co->rs + (size_t)part * p->model_count,
                           p->cpu, buf);
            ps_msg_t m;
            do {
                int64_t until = ps_now_ms() + 1000 + ps_on_wire_ms(
                                    4 * (int64_t)p->place.ps_count[j]);
                if (rc == STRATA_OK)
                    rc = put_part(p, j, part, step, buf,
                                  until < deadline ? until : deadline, &m);
                if (rc != STRATA_OK && rc != STRATA_ENOMEM
                    && ps_now_ms() < deadline) {
                    if (rc != STRATA_ETIMEDOUT) /* the send failed */
                        (void)pump(p, ps_now_ms() + 50, &(co_want_t){ 0 },
                                   &m);
                    rc = STRATA_EAGAIN; /* not up yet: again */
                }
            } while (rc == STRATA_EAGAIN);
            if (rc == STRATA_OK && m.h.status != PS_OK)
                rc = STRATA_EPEER;
            if (rc != STRATA_OK)
                ps_log(p, STRATA_LOG_ERROR, "restore: %s (%s) did not take "
                       "part %d of its state within %.1f s: %s",
                       ps_name(p, member), ps_addr(p, member), part,
                       p->timeout_ms / 1000.0, ps_strerror(rc));
        }
    }
    free(buf);
    free(co->rs);
    co->rs = NULL;
    if (rc == STRATA_OK)
        ps_log(p, STRATA_LOG_INFO, "restore: the %d ps tasks hold the state "
               "of step %lld", p->nps, (long long)step);
    return rc;
}

int ps_coord_state(ps_t *p, int set, strata_state_t *st)
{
    ps_coord_t *co = p->co;
    if (!st || st->nslots < 0 || st->nslots > PS_MAX_SLOTS)
        return STRATA_EINVAL;
    if (!set)
        return gather_state(p, st);
    /* Kept until drive() pushes it: the ps tasks may not be up yet. */
    size_t n = p->model_count;
    free(co->rs);
    co->rs = malloc((size_t)(1 + st->nslots) * n * sizeof(float) + 1);
    if (!co->rs)
        return STRATA_ENOMEM;
    memcpy(co->rs, st->vars, n * sizeof(float));
    for (int k = 0; k < st->nslots; k++)
        memcpy(co->rs + (size_t)(1 + k) * n, st->slots[k], n * sizeof(float));
    co->rs_slots = st->nslots;
    co->rs_opt_steps = st->opt_steps;
    return STRATA_OK;
}

/* The job stands at a step boundary: the core checkpoints if one is due
 * and says whether to stop (STRATA_ESTOPPED). */
static int boundary(ps_t *p, int32_t epoch, int64_t batch)
{
    int rc = install_states(p);
    if (rc == STRATA_OK)
        rc = p->host->boundary(p->hc, epoch, batch,
                               epoch * p->co->spe + batch);
    if (rc == STRATA_ESTOPPED)
        p->co->stopped = 1;
    return rc;
}

static int run_epoch(ps_t *p, const strata_drive_t *d, int epoch,
                     int64_t first, int64_t n)
{
    ps_coord_t *co = p->co;
    ps_sched_begin(&co->s, epoch, n, first);
    for (int wi = 0; wi < p->nworkers; wi++)
        co->w[wi].batch = -1; /* every step of the last epoch is done */
    strata_report_t r = { .struct_size = sizeof r,
                          .kind = STRATA_REPORT_EPOCH_BEGIN, .epoch = epoch,
                          .steps = n - first };
    (void)p->host->report(p->hc, &r);
    int64_t t0 = ps_now_ms();
    while (!ps_sched_complete(&co->s)) {
        int rc = pump(p, co->next_tick, NULL, NULL);
        if (rc != STRATA_OK && rc != STRATA_ETIMEDOUT)
            return rc;
        if (co->s.limit < co->s.n && ps_sched_drained(&co->s)) {
            if ((rc = boundary(p, epoch, co->s.limit)) != STRATA_OK)
                return rc;
            co->s.limit = co->s.n;
        }
    }
    r.seconds = (ps_now_ms() - t0) / 1000.0;
    /* join: every step of the epoch is done; evaluate the pulled copy */
    int64_t *versions = calloc((size_t)p->nps, sizeof *versions);
    int rc = versions ? STRATA_OK : STRATA_ENOMEM;
    if (rc == STRATA_OK && d->eval) {
        rc = pull_whole(p, versions);
        if (rc == STRATA_OK)
            rc = install_states(p);
        if (rc == STRATA_OK)
            rc = p->host->evaluate(p->hc, &r.val_loss, &r.val_acc);
        r.has_val = 1;
    }
    free(versions);
    if (rc != STRATA_OK)
        return rc;
    double samples = co->s.samples > 0 ? (double)co->s.samples : 1.0;
    r.kind = STRATA_REPORT_EPOCH_END;
    r.loss = co->s.loss / samples;
    r.acc = co->s.metric / samples;
    rc = p->host->report(p->hc, &r);
    /* Every epoch ends at a boundary (every_epochs, the run's end, the best
     * checkpoint); an epoch cut short by max_steps ends the run there. */
    if (rc == STRATA_OK)
        rc = n == d->steps_per_epoch ? boundary(p, epoch + 1, 0)
                                     : boundary(p, epoch, n);
    return rc;
}

/* The core ended the training early (early stopping): the job is done. */
static int training_done(const ps_t *p)
{
    return STRATA_HAS_FIELD(strata_host_v2_t, p->host, training_done) &&
           p->host->training_done(p->hc) == 1;
}

/* Every worker alive is told DONE (they ask); bounded by the timeout. */
static int release_workers(ps_t *p)
{
    ps_coord_t *co = p->co;
    int64_t deadline = ps_now_ms() + p->timeout_ms;
    for (;;) {
        int waiting = 0;
        for (int wi = 0; wi < p->nworkers; wi++)
            waiting += co->w[wi].seen && !co->w[wi].lost
                       && !co->w[wi].told_done;
        if (!waiting)
            return STRATA_OK;
        if (ps_now_ms() >= deadline) {
            ps_log(p, STRATA_LOG_WARN, "%d worker%s did not come for DONE "
                   "within %.1f s", waiting, waiting == 1 ? "" : "s",
                   p->timeout_ms / 1000.0);
            return STRATA_OK;
        }
        int rc = pump(p, co->next_tick, NULL, NULL);
        if (rc != STRATA_OK && rc != STRATA_ETIMEDOUT)
            return rc;
    }
}

/* FINISH every ps; check its count of applied steps: exactly once. */
static int finish_ps(ps_t *p)
{
    ps_coord_t *co = p->co;
    int rc = STRATA_OK, bad = 0;
    int64_t dups = 0;
    uint64_t want = 0; /* the digest of the steps scheduled */
    for (int64_t s = 0; s < co->total_done; s++)
        want ^= ps_step_mix(s);
    for (int j = 0; j < p->nps && rc == STRATA_OK; j++) {
        int member = p->ps_member[j];
        ps_hdr_t h = { .type = PS_FINISH, .step = -1, .a = co->stopped };
        ps_msg_t m;
        rc = request(p, member, &h, NULL, 0, PS_FIN_ACK,
                     ps_now_ms() + p->timeout_ms, &m);
        if (rc == STRATA_ETIMEDOUT)
            ps_log(p, STRATA_LOG_ERROR, "%s (%s) did not answer FINISH within "
                   "%.1f s", ps_name(p, member), ps_addr(p, member),
                   p->timeout_ms / 1000.0);
        if (rc != STRATA_OK)
            break;
        dups += m.h.b;
        if (m.h.epoch != co->restored) {
            /* the ledger counts steps; state put there from outside it
             * (a STATE_PUT the coordinator did not send) voids the claim */
            bad++;
            ps_log(p, STRATA_LOG_ERROR, "exactly once cannot be claimed: "
                   "%s's state was replaced %d time%s, the coordinator "
                   "restored it %d: state came from outside the ledger",
                   ps_name(p, member), m.h.epoch, m.h.epoch == 1 ? "" : "s",
                   co->restored);
        } else if (m.h.a == co->total_done && (uint64_t)m.h.step != want) {
            bad++;
            ps_log(p, STRATA_LOG_ERROR, "exactly once: %s applied %lld steps, "
                   "as many as were scheduled, but not the same ones (digest "
                   "%016llx, scheduled %016llx)", ps_name(p, member),
                   (long long)m.h.a, (unsigned long long)m.h.step,
                   (unsigned long long)want);
        } else if (m.h.a != co->total_done) {
            bad++;
            ps_log(p, STRATA_LOG_ERROR, "exactly once: %s applied %lld steps, "
                   "but %lld were scheduled", ps_name(p, member),
                   (long long)m.h.a, (long long)co->total_done);
        } else {
            ps_log(p, STRATA_LOG_INFO, "%s applied %lld steps, %lld duplicates "
                   "discarded, %lld malformed messages dropped",
                   ps_name(p, member), (long long)m.h.a, (long long)m.h.b,
                   (long long)m.h.c);
        }
    }
    if (rc == STRATA_OK && !bad)
        ps_log(p, STRATA_LOG_INFO, "exactly once: each of the %d ps tasks "
               "applied every one of the %lld scheduled steps once, those "
               "and no others (%lld "
               "re-scheduled, %lld of them after a stale push; %lld duplicate "
               "pushes discarded)", p->nps, (long long)co->total_done,
               (long long)co->rescheduled, (long long)co->stale,
               (long long)dups);
    return rc != STRATA_OK ? rc : bad ? STRATA_EINTERNAL : STRATA_OK;
}

/* Best effort: every other task learns that the job failed. */
static void abort_all(ps_t *p, int code)
{
    for (int i = 0; i < p->nmembers; i++) {
        if (i == p->self || (p->member_ps[i] < 0 && p->member_worker[i] < 0))
            continue;
        ps_hdr_t h = { .type = PS_ABORT, .step = -1, .a = code };
        /* a worker checks it under its own key, a ps under the lease key */
        h.req = p->member_worker[i] >= 0 && p->lease_key_set
                    ? ps_worker_tag(ps_worker_key(p, i), &h, p->self,
                                    p->incarnation)
                    : ps_ctl_req(p, &h);
        (void)ps_net_send(p, i, &h, NULL, 0, 100);
    }
}

/* Our replicas' layer states (a restored checkpoint's, or the initial
 * ones) are those the job starts from, as of step step0 - 1. */
static int states_init(ps_t *p, int64_t step0)
{
    ps_coord_t *co = p->co;
    size_t n = 0;
    if (!STRATA_HAS_FIELD(strata_host_v2_t, p->host, states_set))
        return STRATA_OK;
    int rc = p->host->states_get(p->hc, NULL, 0, &n);
    if (rc != STRATA_OK || n == 0)
        return rc;
    if (n > UINT32_MAX / 4) {
        ps_log(p, STRATA_LOG_ERROR, "coordinator: %zu layer states do not fit "
               "a message", n);
        return STRATA_EINVAL;
    }
    co->st = malloc(n * sizeof *co->st);
    if (!co->st)
        return STRATA_ENOMEM;
    co->nst = n;
    co->st_step = step0 - 1;
    return p->host->states_get(p->hc, co->st, n, &n);
}

int ps_coord_drive(ps_t *p, const strata_drive_t *d)
{
    ps_coord_t *co = p->co;
    co->spe = d->steps_per_epoch > 0 ? d->steps_per_epoch : 1;
    co->batch = d->batch;
    if (ps_sched_init(&co->s, co->spe) != 0)
        return STRATA_ENOMEM;
    int64_t now = ps_now_ms();
    for (int j = 0; j < p->nps; j++)
        co->ps_last[j] = now;
    co->last_worker = co->last_enough = now;
    ps_log(p, STRATA_LOG_INFO, "coordinator %s: %d ps, %d workers, %d epochs "
           "of %lld steps", ps_name(p, p->self), p->nps, p->nworkers,
           d->epochs, (long long)d->steps_per_epoch);
    /* Where to start: a restored checkpoint's position (ABI 1.2). */
    int first_epoch = 0;
    int64_t first_batch = 0;
    if (STRATA_HAS_FIELD(strata_drive_t, d, first_batch)) {
        first_epoch = d->first_epoch;
        first_batch = d->first_batch;
    }
    int64_t step0 = first_epoch * co->spe + first_batch;
    co->total_done = step0;
    int rc = hand_lease_key(p);
    if (rc == STRATA_OK)
        rc = states_init(p, step0);
    if (rc == STRATA_OK && co->rs) {
        rc = push_state(p, step0); /* (frees co->rs) */
        co->restored = rc == STRATA_OK; /* each ps once */
    }
    int64_t left = d->max_steps > 0 ? d->max_steps - step0 : INT64_MAX;
    for (int e = first_epoch; rc == STRATA_OK && e < d->epochs && left > 0;
         e++) {
        int64_t first = e == first_epoch ? first_batch : 0;
        int64_t n = d->steps_per_epoch - first < left ? d->steps_per_epoch
                                                      : first + left;
        rc = run_epoch(p, d, e, first, n);
        left -= n - first;
        if (rc == STRATA_OK && training_done(p))
            break;
    }
    co->finishing = 1;
    int64_t *versions = calloc((size_t)p->nps, sizeof *versions);
    if (rc == STRATA_OK && !d->eval) /* the final values, for the core */
        rc = versions ? pull_whole(p, versions) : STRATA_ENOMEM;
    free(versions);
    if (rc == STRATA_OK) /* and the final statistics */
        rc = install_states(p);
    if (rc == STRATA_ESTOPPED) /* a clean stop: every task goes too */
        rc = STRATA_OK;
    if (rc == STRATA_OK)
        rc = release_workers(p);
    if (rc == STRATA_OK)
        rc = finish_ps(p);
    if (rc == STRATA_OK && co->stopped)
        rc = STRATA_ESTOPPED;
    for (int wi = 0; wi < p->nworkers; wi++)
        if (co->w[wi].seen)
            ps_log(p, STRATA_LOG_INFO, "%s ran %lld steps%s",
                   ps_name(p, p->worker_member[wi]),
                   (long long)co->w[wi].steps,
                   co->w[wi].restarts ? " (restarted)" : "");
    if (rc != STRATA_OK && rc != STRATA_ESTOPPED)
        abort_all(p, rc);
    return rc;
}
