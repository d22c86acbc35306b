/* strata core -- the replicas of a step add up a layer's statistics
 * (batchnorm): strata__work_t.sum_replicas. Every replica's thread hands
 * in its sums; the last one to arrive adds them in replica order (the
 * same bits whatever the order of arrival) and, in a job of several
 * processes, has the strategy add the processes' totals in rank order
 * (STRATA_CTL_STEP_SUM); every replica then takes the total. A replica
 * waits while the run has not failed: a failure anywhere wakes it with
 * STRATA_ECANCELED. Internal. */
#ifndef STRATA_CORE_STEPSUM_H
#define STRATA_CORE_STEPSUM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct strata__run strata__run_t;

typedef struct strata__stepsum {
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    int             nrep;
    int             arrived;
    uint64_t        gen;      /* rounds completed                          */
    int             rc;       /* of the last round                         */
    size_t          cap;      /* doubles a round may sum, the count after */
    double         *part;     /* nrep x (cap + 1)                          */
    double         *total;    /* cap + 1                                   */
    size_t          n;        /* this round's                              */
} strata__stepsum_t;

/* For `nrep` replicas and sums of up to `cap` doubles. */
int  strata__stepsum_init(strata__stepsum_t *s, int nrep, size_t cap);
void strata__stepsum_free(strata__stepsum_t *s);
/* Forget a round that a failure interrupted: the main thread, before the
 * replicas start a phase. */
void strata__stepsum_reset(strata__stepsum_t *s);
/* Install the state tensors `state` (host, model.state_count floats) on
 * every replica; with `from_chief` in a job of several processes, the
 * chief's (rank 0) on every process (through STRATA_CTL_STEP_SUM: the
 * others add zeros). Main thread, between steps; collective then. */
int  strata__run_states_set(strata__run_t *run, float *state,
                            int from_chief);
/* The hook: arg is the strata__replica_t. */
int  strata__stepsum(void *arg, double *sums, size_t n, double *count);

#endif
