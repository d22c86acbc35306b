/* strata core -- the run's data cursor: which epoch's sample order the
 * steps read, the batches of the phase the replicas run, and where the
 * steps applied here leave the data (what a checkpoint, a regroup and a
 * joiner go on from). cursor.c is its one writer. Internal. */
#ifndef STRATA_CORE_CURSOR_H
#define STRATA_CORE_CURSOR_H

#include <stddef.h>
#include <stdint.h>

typedef struct strata__cursor {
    uint32_t *perm;       /* the sample order of epoch `ordered`          */
    size_t    n;          /* training samples                             */
    int       ordered;    /* the epoch perm holds, -1 none                */
    int       epoch;      /* of the steps being run                       */
    int64_t   b0, pos0;   /* batch b0 of this epoch starts at sample pos0 */
    int64_t   step0;      /* global step of the epoch's batch 0           */
    int64_t   first;      /* first batch run this epoch (its figures      */
                          /* count from there)                            */
    int64_t   lo, hi;     /* batches of the phase the replicas run        */
    int64_t   step;       /* a handed-out step's id (its batch: lo)       */
    int       done_epoch; /* where the steps applied here leave the data: */
    int64_t   done_batch, /* the next batch and its first sample          */
              done_pos;
} strata__cursor_t;

/* Room for the order of n samples. */
int  strata__cursor_init(strata__cursor_t *c, size_t n);
void strata__cursor_free(strata__cursor_t *c);

/* Epoch e's order ([train] seed, [data] shuffle), computed once per
 * epoch. */
void strata__cursor_order(strata__cursor_t *c, int e, uint64_t seed,
                          int shuffle);
/* Epoch e is entered at batch b0, whose first sample is pos0 (an elastic
 * job that changed its global batch: not b0 x batch). */
void strata__cursor_enter(strata__cursor_t *c, int e, int64_t b0,
                          int64_t pos0);
/* Its batches run from `first` (fresh: its figures count from there,
 * else they go on across a regroup) at global step `step`. */
void strata__cursor_begin(strata__cursor_t *c, int64_t first, int64_t step,
                          int fresh);
/* The replicas' next phase: batches [lo, hi) of the epoch. */
void strata__cursor_segment(strata__cursor_t *c, int64_t lo, int64_t hi);
/* ... or the one step a strategy handed out (next_step). */
void strata__cursor_step(strata__cursor_t *c, int epoch, int64_t batch,
                         int64_t id);
/* First sample, in the epoch's order, of batch b at global batch gbatch. */
static inline int64_t strata__cursor_sample(const strata__cursor_t *c,
                                            int64_t b, int gbatch)
{
    return c->pos0 + (b - c->b0) * (int64_t)gbatch;
}
/* Batch b of the epoch is applied here. */
void strata__cursor_applied(strata__cursor_t *c, int64_t b, int gbatch);
/* Epoch e closed: the next starts afresh. */
void strata__cursor_closed(strata__cursor_t *c, int e);
/* The job goes on at batch `batch` (first sample `sample`) of epoch e:
 * a resume, a regroup, a join. */
void strata__cursor_at(strata__cursor_t *c, int e, int64_t batch,
                       int64_t sample);

#endif
