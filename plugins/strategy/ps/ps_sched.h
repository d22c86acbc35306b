/* ps.so -- the coordinator's steps of one epoch: which batches wait, which
 * run (on whom, which attempt) and which are done, in the spirit of
 * ClusterCoordinator.schedule/join: a batch handed out is running until
 * its worker reports it; a batch whose worker is lost (or whose push came
 * back stale) goes back to the FRONT of the queue with the next attempt;
 * the first report of a batch counts, later ones are late duplicates. */
#ifndef PS_SCHED_H
#define PS_SCHED_H

#include <stdint.h>

enum { PS_B_PENDING = 0, PS_B_RUNNING = 1, PS_B_DONE = 2 };

typedef struct ps_sched {
    int32_t  epoch;
    int64_t  n;            /* batches this epoch                      */
    int64_t  first;        /* batches before it were done before      */
    int64_t  issued;       /* the next batch never handed out         */
    int64_t  limit;        /* no batch from here on is handed out     */
    int8_t  *state;        /* per batch                               */
    int32_t *attempt;      /* per batch: the last attempt handed out  */
    int32_t *owner;        /* per batch: worker running it, or -1     */
    int64_t *queue;        /* circular: pending batches, in order     */
    int64_t  head, len, cap;
    int64_t  ndone;
    double   loss;         /* sums over the done batches              */
    double   metric;      /* summed over the batches done */
    int64_t  samples;
} ps_sched_t;

/* Room for epochs of up to `max_n` batches. 0 or -1 (out of memory). */
int  ps_sched_init(ps_sched_t *s, int64_t max_n);
void ps_sched_free(ps_sched_t *s);
/* A new epoch of n (<= max_n) batches: [0, first) count as done (a
 * resumed epoch: they were applied before), the rest pending, in order. */
void ps_sched_begin(ps_sched_t *s, int32_t epoch, int64_t n, int64_t first);
/* Hand the next pending batch to `worker`: 1 with *batch and *attempt,
 * 0 when none is pending (or the next one is at or past s->limit: a step
 * boundary is being drained). */
int  ps_sched_next(ps_sched_t *s, int32_t worker, int64_t *batch,
                   int32_t *attempt);
/* Put a running batch back at the front of the queue: 1 if it was
 * running, 0 otherwise (done already, or pending). */
int  ps_sched_requeue(ps_sched_t *s, int64_t batch);
/* Batch reported done: 1 the first time (its figures are added), 0 for a
 * late duplicate, -1 when batch is out of range. */
int  ps_sched_done(ps_sched_t *s, int64_t batch, double loss, double metric,
                   int64_t samples);
/* Every batch of the epoch is done. */
int  ps_sched_complete(const ps_sched_t *s);
/* Every batch before s->limit is done, and none after was handed out: the
 * job stands at a step boundary. */
int  ps_sched_drained(const ps_sched_t *s);

#endif /* PS_SCHED_H */
