/* ps.so -- the coordinator's steps of one epoch (ps_sched.h). */
#include "ps_sched.h"

#include <stdlib.h>
#include <string.h>

int ps_sched_init(ps_sched_t *s, int64_t max_n)
{
    memset(s, 0, sizeof *s);
    size_t n = (size_t)(max_n > 0 ? max_n : 1);
    s->cap = (int64_t)n;
    s->state = calloc(n, sizeof *s->state);
    s->attempt = calloc(n, sizeof *s->attempt);
    s->owner = calloc(n, sizeof *s->owner);
    s->queue = calloc(n, sizeof *s->queue);
    return s->state && s->attempt && s->owner && s->queue ? 0 : -1;
}

void ps_sched_free(ps_sched_t *s)
{
    free(s->state);
    free(s->attempt);
    free(s->owner);
    free(s->queue);
    memset(s, 0, sizeof *s);
}

void ps_sched_begin(ps_sched_t *s, int32_t epoch, int64_t n, int64_t first)
{
    if (n > s->cap)
        n = s->cap;
    if (first < 0)
        first = 0;
    if (first > n)
        first = n;
    s->epoch = epoch;
    s->n = n;
    s->first = s->issued = first;
    s->limit = n;
    s->head = 0;
    s->len = n - first;
    s->ndone = first;
    s->loss = 0.0;
    s->metric = 0.0;
    s->samples = 0;
    for (int64_t b = 0; b < n; b++) {
        s->state[b] = b < first ? PS_B_DONE : PS_B_PENDING;
        s->attempt[b] = 0;
        s->owner[b] = -1;
        if (b >= first)
            s->queue[b - first] = b;
    }
}

int ps_sched_next(ps_sched_t *s, int32_t worker, int64_t *batch,
                  int32_t *attempt)
{
    while (s->len > 0) {
        int64_t b = s->queue[s->head];
        if (b >= s->limit && s->state[b] == PS_B_PENDING)
            return 0; /* fresh batches come in order: none before limit */
        s->head = (s->head + 1) % s->cap;
        s->len--;
        if (s->state[b] != PS_B_PENDING)
            continue; /* reported done while it waited for a retry */
        s->state[b] = PS_B_RUNNING;
        s->owner[b] = worker;
        *batch = b;
        *attempt = ++s->attempt[b];
        if (b >= s->issued)
            s->issued = b + 1;
        return 1;
    }
    return 0;
}

int ps_sched_requeue(ps_sched_t *s, int64_t batch)
{
    if (batch < 0 || batch >= s->n || s->state[batch] != PS_B_RUNNING)
        return 0;
    s->state[batch] = PS_B_PENDING;
    s->owner[batch] = -1;
    /* A pending batch is queued once, so the ring never overflows. */
    s->head = (s->head + s->cap - 1) % s->cap;
    s->queue[s->head] = batch;
    s->len++;
    return 1;
}

int ps_sched_done(ps_sched_t *s, int64_t batch, double loss, double metric,
                  int64_t samples)
{
    if (batch < 0 || batch >= s->n)
        return -1;
    if (s->state[batch] == PS_B_DONE)
        return 0;
    s->state[batch] = PS_B_DONE;
    s->owner[batch] = -1;
    s->ndone++;
    s->loss += loss;
    s->metric += metric;
    s->samples += samples;
    return 1;
}

int ps_sched_complete(const ps_sched_t *s)
{
    return s->ndone >= s->n;
}

int ps_sched_drained(const ps_sched_t *s)
{
    return s->issued <= s->limit && s->ndone >= s->limit;
}
