/* ps.so -- a parameter server task: it owns some shards of the variables
 * and their optimizer state, answers PULL with their current values and
 * applies each PUSH as it arrives, exactly once per step: a step id it
 * has applied before is a duplicate (a re-scheduled step, a replay) and is
 * discarded. It serves until the coordinator says FINISH, and gives up when
 * the coordinator has been silent for strategy.timeout_s. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps.h"

struct ps_server {
    int            j;          /* this ps's index                          */
    int           *mine;       /* indices into p->place.shard              */
    int            nmine;
    strata_opt_t **opt;        /* per shard of mine                        */
    float         *vals;       /* staging for PARAMS                       */
    size_t         count;      /* elements this ps owns                    */
    unsigned char *applied;    /* bitmap over step ids [0, nsteps)         */
    int64_t        nsteps;
    int64_t        version;    /* steps applied here                       */
    int64_t        ndup, nstale, nrefused;
    int64_t        pushed;     /* pushes applied by this process           */
    int64_t        row_pushes; /* of those, with row blocks (wire v6)      */
    int64_t        push_bytes; /* their payloads' bytes                    */
    int64_t        pulls;      /* PULLs answered                           */
    int64_t        row_pulls;  /* of those, asking for rows (wire v7)      */
    int64_t        pull_bytes; /* the PARAMS' payloads' bytes              */
    int64_t       *ids;        /* a block's ids, made local to its shard   */
    int32_t        restores;   /* states installed by STATE_PUT            */
    uint64_t       digest;     /* XOR of ps_step_mix over applied steps   */
    int64_t        last_coord; /* when the coordinator last spoke          */
    int64_t        coord_busy; /* until when it may still be receiving the
                                  answers of its whole pull (it says
                                  nothing meanwhile)                       */
    /* checkpoints: parts of the state, slot-major, count values each     */
    float         *state;      /* (1 + state_slots) x count                */
    int            state_slots;
    unsigned       state_got;  /* STATE_PUT parts received, a bit each     */
    int            state_part; /* the part whose pieces arrive (v9), and   */
    uint32_t       state_next; /* the next word of it awaited              */
};

int ps_server_init(ps_t *p)
{
    ps_server_t *s = calloc(1, sizeof *s);
    if (!s)
        return STRATA_ENOMEM;
    p->srv = s;
    s->j = p->member_ps[p->self];
    s->count = p->place.ps_count[s->j];
    s->mine = calloc((size_t)p->place.n + 1, sizeof *s->mine);
    s->opt = calloc((size_t)p->place.n + 1, sizeof *s->opt);
    s->vals = p->host->alloc(p->hc, p->cpu, (s->count + 1) * sizeof(float));
    if (!s->mine || !s->opt || !s->vals)
        return STRATA_ENOMEM;
    /* A push with row blocks (ps_rows.c) may carry, beside the values of
     * every shard, each shard's block header and row ids. */
    size_t rows_max = 1;
    for (int i = 0; i < p->place.n; i++)
        if (p->place.shard[i].ps == s->j && p->place.shard[i].rows > 0 &&
            (size_t)p->place.shard[i].rows > rows_max)
            rows_max = (size_t)p->place.shard[i].rows;
    s->ids = malloc(rows_max * sizeof *s->ids);
    size_t rcap = PS_HDR_SIZE + 4 * (s->count + ps_rows_room(p, s->j));
    if (!s->ids)
        return STRATA_ENOMEM;
    if (rcap > p->rcap) {
        unsigned char *rb = p->host->alloc(p->hc, p->cpu, rcap);
        if (!rb)
            return STRATA_ENOMEM;
        p->host->free(p->hc, p->cpu, p->rbuf);
        p->rbuf = rb;
        p->rcap = rcap;
    }
    for (int i = 0; i < p->place.n; i++) {
        const ps_shard_t *sh = &p->place.shard[i];
        if (sh->ps != s->j)
            continue;
        int rc = p->host->opt_create(p->hc, p->cpu, sh->count,
                                     &s->opt[s->nmine]);
        if (rc != STRATA_OK)
            return rc;
        s->mine[s->nmine++] = i;
    }
    if (s->nmine == 0)
        ps_log(p, STRATA_LOG_WARN, "%s holds no variable: there are more ps "
               "tasks than shards (see strategy.partitioner)",
               ps_name(p, p->self));
    return STRATA_OK;
}

void ps_server_fini(ps_t *p)
{
    ps_server_t *s = p->srv;
    if (!s)
        return;
    ps_outbox_stop(p);
    for (int i = 0; s->opt && i < s->nmine; i++)
        p->host->opt_destroy(p->hc, s->opt[i]);
    p->host->free(p->hc, p->cpu, s->vals);
    free(s->opt);
    free(s->mine);
    free(s->applied);
    free(s->state);
    free(s->ids);
    free(s);
    p->srv = NULL;
}

static void summary(ps_t *p)
{
    ps_server_t *s = p->srv;
    ps_log(p, STRATA_LOG_INFO, "%s applied %lld steps, %lld duplicates "
           "discarded, %lld malformed messages dropped (%lld stale pushes "
           "refused)", ps_name(p, p->self), (long long)s->version,
           (long long)s->ndup, (long long)atomic_load(&p->malformed),
           (long long)s->nstale);
    if (s->pushed > 0)
        ps_log(p, STRATA_LOG_INFO, "%s: %lld pushes applied (%lld with rows), "
               "%lld gradient bytes, %.0f per push", ps_name(p, p->self),
               (long long)s->pushed, (long long)s->row_pushes,
               (long long)s->push_bytes,
               (double)s->push_bytes / (double)s->pushed);
    if (s->pulls > 0)
        ps_log(p, STRATA_LOG_INFO, "%s: %lld pulls answered (%lld with rows), "
               "%lld parameter bytes, %.0f per pull", ps_name(p, p->self),
               (long long)s->pulls, (long long)s->row_pulls,
               (long long)s->pull_bytes,
               (double)s->pull_bytes / (double)s->pulls);
}

static void refuse(ps_t *p, const ps_msg_t *m, const char *why)
{
    long long n = atomic_fetch_add(&p->malformed, 1) + 1;
    if (n <= 10 || n % 1000 == 0)
        ps_log(p, STRATA_LOG_WARN, "%s: dropped %s from %s: %s (%lld so far)",
               ps_name(p, p->self), ps_wire_type_name(m->h.type),
               ps_name(p, m->from), why, n);
}

/* Replies are short-lived: a requester that died does not hold us up. */
static int reply_ms(const ps_t *p)
{
    return p->timeout_ms < 1000 ? p->timeout_ms : 1000;
}

/* A copy for the outbox, which frees it, of n values: of vals, or (NULL)
 * of this ps's shards; NULL when there is no memory for it. */
static float *snapshot(ps_t *p, const float *vals, size_t n)
{
    float *c = malloc(n * sizeof *c + 1);
    if (c && vals)
        memcpy(c, vals, n * sizeof *c);
    else if (c && ps_gather(p, p->srv->j, p->master, p->cpu, c) != STRATA_OK) {
        free(c);
        c = NULL;
    }
    if (!c)
        ps_log(p, STRATA_LOG_ERROR, "%s: no memory for a copy of %zu values "
               "to answer with", ps_name(p, p->self), n);
    return c;
}

/* A PULL: every shard's values, or (wire v7, b > 0) the rows it asks
 * for of the table shards it names and the rest whole (ps_pull.c). The
 * whole request is checked before anything is answered. A whole answer
 * longer than a piece goes in pieces from the outbox's thread (v9). */
static int on_pull(ps_t *p, const ps_msg_t *m)
{
    ps_server_t *s = p->srv;
    uint32_t n = (uint32_t)s->count;
    int pieces = 0;
    if (m->h.b > 0) {
        const char *why = ps_pull_check(p, s->j, m->payload, m->h.count,
                                        m->h.b);
        if (why) {
            refuse(p, m, why);
            return STRATA_OK;
        }
        n = ps_pull_answer(p, s->j, m->payload, m->h.count, m->h.b,
                           p->master, s->vals);
        s->row_pulls++;
    } else if (n > ps_piece_words(p)) {
        pieces = 1;
    } else if (ps_gather(p, s->j, p->master, p->cpu, s->vals) != STRATA_OK) {
        return STRATA_OK;
    }
    ps_hdr_t r = { .type = PS_PARAMS, .req = m->h.req, .step = -1,
                   .a = s->version, .b = m->h.b };
    s->pulls++;
    s->pull_bytes += 4 * (int64_t)n;
    /* The coordinator pulls every ps whole through its one link: silent
     * until all those answers are in (ours times the ps tasks, at the
     * slowest link we plan for). */
    if (m->from == p->coord)
        s->coord_busy = ps_now_ms() + ps_on_wire_ms(4 * (int64_t)n * p->nps);
    if (pieces) {
        float *snap = snapshot(p, NULL, n);
        return snap ? ps_outbox_put(p, m->from, &r, snap, n) : STRATA_ENOMEM;
    }
    if (ps_net_send(p, m->from, &r, s->vals, n, reply_ms(p)) !=
        STRATA_EINVAL)
        return STRATA_OK;
    return ps_too_long(p, m->from, n);
}

/* The shard of mine at placement index `shard`, or -1. */
static int mine_of(const ps_server_t *s, int shard)
{
    for (int i = 0; i < s->nmine; i++)
        if (s->mine[i] == shard)
            return i;
    return -1;
}

/* A checked push: its row blocks (lazily: only their rows and the rows'
 * slots move, ABI 2.10 opt_step_rows), then the shards they do not name,
 * densely, from the rest of the payload. Every optimizer counts the step
 * once either way. */
static int apply(ps_t *p, const ps_msg_t *m, float lr)
{
    ps_server_t *s = p->srv;
    const unsigned char *pl = m->payload;
    unsigned char *given = calloc((size_t)s->nmine + 1, 1);
    if (!given)
        return STRATA_ENOMEM;
    size_t at = 0;
    int prev = -1, rc = STRATA_OK;
    for (int64_t b = 0; rc == STRATA_OK && b < m->h.b; b++) {
        ps_rows_t r;
        at = ps_rows_next(p, s->j, pl, m->h.count, at, &prev, &r);
        const ps_shard_t *sh = &p->place.shard[r.shard];
        int i = mine_of(s, r.shard);
        for (uint32_t k = 0; k < r.nrows; k++) {
            memcpy(&s->ids[k], r.ids + 8 * (size_t)k, 8);
            s->ids[k] -= sh->row0;
        }
        given[i] = 1;
        /* the payload sits 80 bytes into the 64-byte aligned buffer, and
         * the blocks are whole words: rows and dense part are float-aligned */
        rc = p->host->opt_step_rows(p->hc, s->opt[i], p->master + sh->offset,
                                    s->ids, r.nrows, r.row_len,
                                    (const float *)(const void *)r.values, lr);
    }
    const float *grad = (const float *)(const void *)(pl + at);
    for (int i = 0; rc == STRATA_OK && i < s->nmine; i++) {
        if (given[i])
            continue;
        const ps_shard_t *sh = &p->place.shard[s->mine[i]];
        rc = p->host->opt_step(p->hc, s->opt[i], p->master + sh->offset,
                               grad, sh->count, lr);
        grad += sh->count;
    }
    free(given);
    return rc;
}

static int on_push(ps_t *p, const ps_msg_t *m)
{
    ps_server_t *s = p->srv;
    const ps_hdr_t *h = &m->h;
    if (p->member_worker[m->from] < 0) {
        refuse(p, m, "only workers push");
        return STRATA_OK;
    }
    const char *why = NULL;
    if (h->b == 0 && h->count != s->count)
        why = "gradient size differs from this ps's shards";
    else if (h->b > 0 && !STRATA_HAS_FIELD(strata_host_v2_t, p->host,
                                           opt_step_rows))
        why = "rows pushed, but this core has no lazy optimizer step (ABI "
              "2.10)";
    else if (h->b > 0)
        why = ps_rows_check(p, s->j, m->payload, h->count, h->b);
    if (!why && h->step >= s->nsteps)
        why = "step id beyond the job";
    if (why) {
        refuse(p, m, why);
        return STRATA_OK;
    }
    ps_hdr_t r = { .type = PS_PUSH_ACK, .req = h->req, .step = h->step,
                   .attempt = h->attempt };
    if (p->lease_key_set &&
        h->c != ps_lease(p, h->step, h->attempt, m->from)) {
        refuse(p, m, "its lease is not the coordinator's for this step, "
               "attempt and worker (forged, or replayed with another step)");
        return STRATA_OK;
    }
    unsigned char bit = (unsigned char)(1u << (h->step & 7));
    if (!p->lease_key_set) {
        /* No PING from the coordinator yet: the push cannot be checked.
         * Stale: the coordinator hands the step out again. */
        r.status = PS_STALE;
        s->nstale++;
    } else if (s->applied[h->step >> 3] & bit) {
        r.status = PS_DUPLICATE;
        s->ndup++;
        ps_log(p, STRATA_LOG_DEBUG, "%s: step %lld (attempt %d) from %s: "
               "applied before, discarded", ps_name(p, p->self),
               (long long)h->step, h->attempt, ps_name(p, m->from));
    } else if (p->cfg.max_staleness > 0
               && s->version - h->a > p->cfg.max_staleness) {
        r.status = PS_STALE;
        s->nstale++;
    } else {
        /* The payload sits 80 bytes into the 64-byte aligned buffer. */
        int rc = apply(p, m, (float)h->f);
        if (rc != STRATA_OK) {
            ps_log(p, STRATA_LOG_ERROR, "%s: optimizer step failed: %s",
                   ps_name(p, p->self), ps_strerror(rc));
            return rc;
        }
        s->applied[h->step >> 3] |= bit;
        s->digest ^= ps_step_mix(h->step);
        s->version++;
        s->pushed++;
        s->row_pushes += h->b > 0;
        s->push_bytes += 4 * (int64_t)h->count;
    }
    r.a = s->version;
    (void)ps_net_send(p, m->from, &r, NULL, 0, reply_ms(p));
    return STRATA_OK;
}

/* ---- checkpoints (ps_wire.h: STATE_*) -------------------------------- */

/* Room for the values and `nslots` optimizer slots of this ps's shards. */
static int state_room(ps_t *p, int nslots)
{
    ps_server_t *s = p->srv;
    if (s->state && s->state_slots == nslots)
        return STRATA_OK;
    free(s->state);
    s->state_got = 0;
    s->state_next = 0;
    s->state_slots = nslots;
    s->state = calloc((size_t)(1 + nslots) * s->count + 1, sizeof(float));
    return s->state ? STRATA_OK : STRATA_ENOMEM;
}

/* Read (set = 0) or install (set = 1) every shard's optimizer slots from/to
 * the slot parts of s->state, and the optimizer's step count. */
static int state_slots_io(ps_t *p, int set, int64_t *steps)
{
    ps_server_t *s = p->srv;
    size_t at = 0;
    for (int i = 0; i < s->nmine; i++) {
        float *slots[PS_MAX_SLOTS];
        for (int k = 0; k < s->state_slots; k++)
            slots[k] = s->state + (size_t)(1 + k) * s->count + at;
        int64_t t = *steps;
        int rc = p->host->opt_io(p->hc, s->opt[i], set, slots,
                                 s->state_slots, &t);
        if (rc != STRATA_OK)
            return rc;
        if (!set && i == 0)
            *steps = t;
        at += p->place.shard[s->mine[i]].count;
    }
    return STRATA_OK;
}

/* STATE_REQ: part 0 the values, part k slot k-1 of the optimizer. */
static void on_state_req(ps_t *p, const ps_msg_t *m)
{
    ps_server_t *s = p->srv;
    int part = (int)m->h.a, nslots = (int)m->h.b;
    ps_hdr_t r = { .type = PS_STATE, .req = m->h.req, .step = -1, .a = part,
                   .b = s->version };
    const float *vals = NULL;
    int rc = state_room(p, nslots);
    if (rc == STRATA_OK)
        rc = state_slots_io(p, 0, &r.b);
    if (rc == STRATA_OK && part == 0)
        rc = ps_gather(p, s->j, p->master, p->cpu, s->state);
    if (rc == STRATA_OK)
        vals = s->state + (size_t)part * s->count;
    if (rc != STRATA_OK) {
        ps_log(p, STRATA_LOG_ERROR, "%s: cannot read part %d of its state "
               "for a checkpoint (%d optimizer slots asked): %s",
               ps_name(p, p->self), part, nslots, ps_strerror(rc));
        r.status = PS_FAILED;
        vals = NULL;
    }
    if (vals && s->count > ps_piece_words(p)) { /* in pieces (v9) */
        float *snap = snapshot(p, vals, s->count);
        if (snap)
            (void)ps_outbox_put(p, m->from, &r, snap, (uint32_t)s->count);
        return;
    }
    if (ps_net_send(p, m->from, &r, vals, vals ? (uint32_t)s->count : 0,
                    reply_ms(p)) == STRATA_EINVAL)
        (void)ps_too_long(p, m->from, s->count);
}

/* STATE_SAVE (v8, plugin ABI 2.13): this ps's shards and their optimizer
 * slots as part j of the checkpoint of `step`, written here, in parallel
 * with the other ps tasks (host part_write). */
static void on_state_save(ps_t *p, const ps_msg_t *m)
{
    ps_server_t *s = p->srv;
    int nslots = (int)m->h.b;
    ps_hdr_t r = { .type = PS_STATE_SAVED, .req = m->h.req, .step = m->h.step };
    strata_part_piece_t *pc = calloc((size_t)s->nmine * (1 + (size_t)nslots)
                                     + 1, sizeof *pc);
    int rc = pc ? state_room(p, nslots) : STRATA_ENOMEM;
    if (rc == STRATA_OK && !STRATA_HAS_FIELD(strata_host_v2_t, p->host,
                                             part_write))
        rc = STRATA_ENOTSUP;
    if (rc == STRATA_OK)
        rc = state_slots_io(p, 0, &r.a);
    if (rc == STRATA_OK)
        rc = ps_gather(p, s->j, p->master, p->cpu, s->state);
    strata_part_t part = { .struct_size = sizeof part, .index = s->j,
                           .count = (int32_t)m->h.c, .step = m->h.step,
                           .tag = (uint64_t)m->h.a, .pieces = pc };
    size_t at = 0;
    for (int i = 0; rc == STRATA_OK && i < s->nmine; i++) {
        const ps_shard_t *sh = &p->place.shard[s->mine[i]];
        for (int k = -1; sh->count && k < nslots; k++)
            pc[part.npieces++] = (strata_part_piece_t){
                .var = sh->var, .slot = k, .row0 = sh->row0,
                .rows = sh->rows, .data = s->state + (size_t)(1 + k) *
                                                      s->count + at };
        at += sh->count;
    }
    if (rc == STRATA_OK && (part.count != p->nps || part.index >= part.count))
        rc = STRATA_EPROTO;
    if (rc == STRATA_OK)
        rc = p->host->part_write(p->hc, &part);
    free(pc);
    free(s->state); /* three copies of a table are not kept between saves */
    s->state = NULL;
    s->state_got = 0;
    if (rc != STRATA_OK) {
        ps_log(p, STRATA_LOG_ERROR, "%s: cannot write its part of the "
               "checkpoint of step %lld (%d optimizer slots, %lld parts): %s",
               ps_name(p, p->self), (long long)m->h.step, nslots,
               (long long)m->h.c, ps_strerror(rc));
        r.status = PS_FAILED;
    }
    r.b = part.bytes;
    (void)ps_net_send(p, m->from, &r, NULL, 0, reply_ms(p));
}

/* Steps [0, steps) count as applied here: a restored job goes on. */
static void restored_version(ps_t *p, int64_t steps)
{
    ps_server_t *s = p->srv;
    memset(s->applied, 0, (size_t)(s->nsteps / 8 + 1));
    s->digest = 0;
    for (int64_t i = 0; i < steps && i < s->nsteps; i++) {
        s->applied[i >> 3] |= (unsigned char)(1u << (i & 7));
        s->digest ^= ps_step_mix(i);
    }
    s->version = steps;
}

/* STATE_PUT: keep the part (its pieces in order, v9); with the last
 * part, install them all. A part is acknowledged when it is whole. */
static void on_state_put(ps_t *p, const ps_msg_t *m)
{
    ps_server_t *s = p->srv;
    const ps_hdr_t *h = &m->h;
    int part = (int)h->a, nslots = (int)h->b;
    ps_hdr_t r = { .type = PS_STATE_ACK, .req = h->req, .step = -1,
                   .a = part };
    int rc = h->total == s->count ? state_room(p, nslots) : STRATA_EPROTO;
    if (rc == STRATA_OK && h->at > 0 && (part != s->state_part ||
                                         h->at != s->state_next)) {
        /* a piece lost before this one: the coordinator sends the part
         * again from its first word when no acknowledgement comes */
        refuse(p, m, "a piece of a state part out of order");
        s->state_next = 0;
        return;
    }
    if (rc == STRATA_OK) {
        memcpy(s->state + (size_t)part * s->count + h->at, m->payload,
               (size_t)h->count * sizeof(float));
        s->state_part = part;
        s->state_next = h->at + h->count;
        if (s->state_next < h->total)
            return; /* more pieces to come */
        s->state_next = 0;
        s->state_got |= 1u << part;
    }
    if (rc == STRATA_OK && part == nslots) {
        int64_t steps = h->c; /* the optimizer's */
        if (s->state_got != (1u << (nslots + 1)) - 1)
            rc = STRATA_EPROTO; /* a part is missing */
        if (rc == STRATA_OK)
            rc = ps_scatter(p, s->j, (const unsigned char *)s->state,
                            p->master, p->cpu);
        if (rc == STRATA_OK)
            rc = state_slots_io(p, 1, &steps);
        if (rc == STRATA_OK) {
            restored_version(p, h->step);
            s->restores++;
            ps_log(p, STRATA_LOG_INFO, "%s: state restored at step %lld",
                   ps_name(p, p->self), (long long)h->step);
        }
        s->state_got = 0;
    }
    if (rc != STRATA_OK) {
        ps_log(p, STRATA_LOG_ERROR, "%s: cannot restore part %d of its state "
               "(%u values for %zu, %d optimizer slots): %s",
               ps_name(p, p->self), part, h->total, s->count, nslots,
               ps_strerror(rc));
        r.status = PS_FAILED;
    }
    (void)ps_net_send(p, m->from, &r, NULL, 0, reply_ms(p));
}

static void counters(const ps_t *p, ps_hdr_t *r)
{
    r->a = p->srv->version;
    r->b = p->srv->ndup;
    r->c = atomic_load(&p->malformed);
    r->epoch = p->srv->restores;
}

/* A control message from the coordinator carries its tag (ps_wire.h): 1
 * when it does (a PING teaches the key first), else 0 after refusing it. */
static int bound(ps_t *p, const ps_msg_t *m)
{
    const ps_hdr_t *h = &m->h;
    int learnt = 0;
    if (h->type == PS_PING && !p->lease_key_set) {
        ps_lease_key_in(p, h->a, h->b);
        learnt = 1;
    }
    int64_t a, b;
    ps_lease_key_out(p, &a, &b);
    const char *why =
        !p->lease_key_set ? "no lease key yet: the coordinator's PING comes "
                            "first"
        : h->type == PS_PING && (h->a != a || h->b != b)
            ? "a lease key other than the coordinator's"
        : h->req != ps_ctl_tag(p, h, m->from, h->incarnation)
            ? "its tag is not the coordinator's (forged)"
        : h->type == PS_STATE_PUT && p->srv->pushed > 0
            ? "state replaced after training began"
            : NULL;
    if (why && learnt)
        p->lease_key_set = 0; /* not the coordinator's key after all */
    if (why)
        refuse(p, m, why);
    return why == NULL;
}

/* One message; 1 when the coordinator says FINISH, 2 when it says FINISH
 * because the job stopped on request. */
static int handle(ps_t *p, const ps_msg_t *m)
{
    int from_coord = m->from == p->coord;
    if (ps_ctl_bound(m->h.type) && from_coord && !bound(p, m))
        return 0; /* a forgery is no sign of the coordinator's life */
    if (from_coord)
        p->srv->last_coord = ps_now_ms();
    switch (m->h.type) {
    case PS_PULL:
        if (from_coord || p->member_worker[m->from] >= 0)
            return on_pull(p, m);
        refuse(p, m, "not from a worker or the coordinator");
        return 0;
    case PS_PUSH:
        return on_push(p, m);
    case PS_PING:
    case PS_FINISH: {
        if (!from_coord) {
            refuse(p, m, "not from the coordinator");
            return 0;
        }
        ps_hdr_t r = { .type = m->h.type == PS_PING ? PS_PONG : PS_FIN_ACK,
                       .req = m->h.req, .step = -1 };
        if (m->h.type == PS_FINISH) /* which steps, not only how many */
            r.step = (int64_t)p->srv->digest;
        counters(p, &r);
        (void)ps_net_send(p, m->from, &r, NULL, 0, reply_ms(p));
        return m->h.type == PS_FINISH ? 1 + (m->h.a == 1) : 0;
    }
    case PS_STATE_REQ:
    case PS_STATE_PUT:
    case PS_STATE_SAVE:
        if (!from_coord)
            refuse(p, m, "not from the coordinator");
        else if (m->h.type == PS_STATE_REQ)
            on_state_req(p, m);
        else if (m->h.type == PS_STATE_SAVE)
            on_state_save(p, m);
        else
            on_state_put(p, m);
        return 0;
    case PS_ABORT:
        if (!from_coord) {
            refuse(p, m, "not from the coordinator");
            return 0;
        }
        return ps_aborted(p, m);
    default:
        refuse(p, m, "not a request a ps serves");
        return 0;
    }
}

int ps_server_drive(ps_t *p, const strata_drive_t *d)
{
    ps_server_t *s = p->srv;
    s->nsteps = (int64_t)d->epochs * d->steps_per_epoch;
    if (d->max_steps > 0 && d->max_steps < s->nsteps)
        s->nsteps = d->max_steps;
    if (s->nsteps < 0 || s->nsteps > ((int64_t)1 << 40))
        return STRATA_EINVAL;
    s->applied = calloc((size_t)(s->nsteps / 8 + 1), 1);
    if (!s->applied)
        return STRATA_ENOMEM;
    s->last_coord = ps_now_ms();
    int rc = ps_outbox_start(p);
    if (rc != STRATA_OK)
        return rc;
    ps_log(p, STRATA_LOG_INFO, "%s serves %d shard%s (%zu values) for %d "
           "worker%s", ps_name(p, p->self), s->nmine, s->nmine == 1 ? "" : "s",
           s->count, p->nworkers, p->nworkers == 1 ? "" : "s");
    for (;;) {
        ps_msg_t m;
        int64_t since = s->last_coord > s->coord_busy ? s->last_coord
                                                      : s->coord_busy;
        rc = ps_net_recv(p, since + p->timeout_ms, &m);
        if (rc == STRATA_ETIMEDOUT) {
            ps_log(p, STRATA_LOG_ERROR, "%s: no word from the coordinator %s "
                   "(%s) for %.1f s; giving up", ps_name(p, p->self),
                   ps_name(p, p->coord), ps_addr(p, p->coord),
                   p->timeout_ms / 1000.0);
            break;
        }
        if (rc == STRATA_OK && (rc = handle(p, &m)) > 0) {
            rc = rc == 2 ? STRATA_ESTOPPED : STRATA_OK;
            break;
        }
        if (rc == STRATA_OK)
            rc = ps_outbox_failed(p);
        if (rc != STRATA_OK)
            break;
    }
    ps_outbox_stop(p);
    summary(p);
    return rc;
}
