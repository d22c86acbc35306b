/* strata core -- [train] reduce_lr_patience: Keras' ReduceLROnPlateau on
 * [train] monitor. Internal.
 *
 * The chief's bookkeeping decides after each validated epoch whether the
 * learning rate is reduced; every task of the job takes that decision
 * (stopping.c sums it across the job, as early stopping's) and counts the
 * reductions, so that every replica and worker computes the same rate.
 * From the next step on, a step's rate is the schedule's times
 * factor ^ reductions, never below min_lr (nor, for that floor, above the
 * schedule's own rate). */
#ifndef STRATA_CORE_PLATEAU_H
#define STRATA_CORE_PLATEAU_H

#include "internal.h"

typedef struct strata__plateau {
    int     metric;       /* STRATA__MONITOR_*                             */
    int64_t patience;     /* 0: off                                        */
    double  factor, min_delta, min_lr;
    int64_t cooldown;
    /* the chief's (Keras: best, wait, cooldown_counter) */
    int     has_best;
    double  best;
    int64_t wait, cooling;
    /* the chief's last reduction, for its line: cut set until printed */
    int     cut;
    int64_t cut_wait;
    double  cut_from, cut_to;
    /* every task's */
    int64_t reductions;
    double  scale;        /* factor ^ reductions                           */
} strata__plateau_t;

void strata__plateau_init(strata__plateau_t *p, const strata__settings_t *s);

/* reduce_lr_patience > 0 in a job it cannot serve: an elastic job (a
 * member that joins holds neither the reductions nor the chief's count),
 * a strategy that drives the job or hands out its steps (ps: a worker
 * computes each step's rate from the step alone and pushes it with its
 * gradient, while the chief's monitor decides an epoch after its steps of
 * the next epoch are already out). One error line; STRATA_ECONFIG. */
int strata__plateau_check(const strata__settings_t *s, const char *strategy,
                          int drives, int elastic);

/* The rate of a step whose schedule gives `lr`. */
double strata__plateau_lr(const strata__plateau_t *p, double lr);

/* The chief: an epoch ended with these validation figures, and the
 * schedule gives the next step `sched_next`. 1: reduce from the next step
 * on (Keras: `patience` epochs without improving the best by more than
 * min_delta, outside the cooldown, and the next step's rate above
 * min_lr); then the cooldown starts and the line is due. */
int strata__plateau_epoch(strata__plateau_t *p, double val_loss,
                          double val_acc, double sched_next);
/* Every task: the rates from now on are reduced once more. */
void strata__plateau_reduce(strata__plateau_t *p);
/* Every task: `n` reductions (a resumed run). */
void strata__plateau_set(strata__plateau_t *p, int64_t n);

/* "epoch 7: val_loss did not improve for 3 epochs; learning rate 0.001 ->
 * 0.0001": the chief's line of its last reduction; 0 when none is due
 * (the line is taken). */
int strata__plateau_line(strata__plateau_t *p, int epoch, char *buf,
                         size_t len);

/* The state as checkpoint metadata (as strata__monitor_to_meta). */
#define STRATA__PLATEAU_NMETA 4
int  strata__plateau_to_meta(const strata__plateau_t *p,
                             const char *keys[STRATA__PLATEAU_NMETA],
                             char vals[STRATA__PLATEAU_NMETA][32]);
/* The chief's bookkeeping back from a checkpoint's metadata (ignored when
 * it was written for another metric); the reductions:
 * strata__plateau_meta_reductions, which every task is then told. */
void strata__plateau_from_meta(strata__plateau_t *p,
                               const char *(*get)(const void *ctx,
                                                  const char *key),
                               const void *ctx);
int64_t strata__plateau_meta_reductions(const char *(*get)(const void *ctx,
                                                           const char *key),
                                        const void *ctx);

#endif
