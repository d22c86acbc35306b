/* strata core -- learning-rate schedules: [optimizer] schedule and its keys,
 * times the warm-up ([train] warmup_epochs) and the linear scaling rule
 * ([train] lr_scaling). Internal; never installed.
 *
 * The learning rate is a pure function of the global step (0-based, one per
 * global batch, counted over the whole job): every replica, worker and
 * strategy computes the same value for the same step, and a resumed run,
 * whose step is restored, continues the schedule exactly. */
#ifndef STRATA_CORE_SCHEDULE_H
#define STRATA_CORE_SCHEDULE_H

#include "internal.h"

#ifndef STRATA__MAX_BOUNDARIES
#define STRATA__MAX_BOUNDARIES 64
#endif

typedef struct strata__schedule {
    int     kind;          /* STRATA__SCHED_*                                */
    double  lr;            /* [optimizer] lr x scale                         */
    double  scale;         /* the linear scaling rule's factor, else 1       */
    int64_t warmup;        /* steps of the linear warm-up; 0: none           */
    int64_t decay_steps;   /* exponential, cosine                            */
    double  decay_rate;    /* exponential                                    */
    int     staircase;     /* exponential                                    */
    double  alpha;         /* cosine                                         */
    int     nb;            /* step: boundaries                               */
    int64_t boundary[STRATA__MAX_BOUNDARIES];
    double  piece[STRATA__MAX_BOUNDARIES + 1]; /* step: lr of each piece,
                                                  scaled                     */
} strata__schedule_t;

/* The schedule keys of [optimizer] make sense together: a known schedule
 * with what it needs (decay_steps > 0 for exponential and cosine;
 * boundaries for step, strictly increasing non-negative integers, at most
 * STRATA__MAX_BOUNDARIES, and checked as such for any schedule; values,
 * when given, positive numbers, one more than boundaries). One error line naming file:line and the key;
 * STRATA_ECONFIG. */
int strata__schedule_check(const strata__cfg_t *c,
                           const strata__optimizer_cfg_t *o);

/* The schedule of a run: `o` (checked), the linear scaling factor `scale`
 * (1 without [train] lr_scaling) and `warmup_steps`. */
int strata__schedule_init(strata__schedule_t *s,
                          const strata__optimizer_cfg_t *o, double scale,
                          int64_t warmup_steps);

/* The learning rate of global step `step` (Keras semantics):
 *   constant     lr
 *   step         values[i] (or lr x factor^i), i = boundaries < step
 *   exponential  lr x decay_rate ^ (step / decay_steps), the exponent
 *                rounded down with staircase
 *   cosine       lr x ((1 - alpha) (1 + cos(pi min(step, decay_steps) /
 *                decay_steps)) / 2 + alpha)
 * times the scaling factor, and times (step + 1) / warmup during the
 * warm-up's steps. */
double strata__schedule_lr(const strata__schedule_t *s, int64_t step);

/* The rate the schedule starts from (scaled, before the warm-up): lr, or
 * the first of a step schedule's values. */
double strata__schedule_initial(const strata__schedule_t *s);

/* ", then cosine decay to 0.0001 over 5000 steps" (empty for constant):
 * what the banner says after the learning rate. */
void strata__schedule_describe(const strata__schedule_t *s, char *buf,
                               size_t len);

#endif
