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

/* ---- lr_dump.c: [debug] dump_lr ----------------------------------------- */

/* The learning rate of every step one task ran, as it went into the step
 * (strata_op_t.lr). One thread notes (replica 0's); the file is written
 * once, at the end of the run. */
typedef struct strata__lr_log {
    int64_t steps;            /* steps noted                               */
    int     keep;             /* [debug] dump_lr is set: store them        */
    int     lost;             /* out of memory once: not written           */
    size_t  n, cap;
    struct strata__lr_entry { int64_t step; float lr; } *e;
} strata__lr_log_t;

void strata__lr_log_note(strata__lr_log_t *l, int64_t step, float lr);
/* "STEP LR" lines (LR as %.9g, which reads back to the same float), by
 * step, each step once, to `path` (atomically, core/fileio.c); `task`
 * (e.g. "worker:1", or NULL for a job of one process) is appended to the
 * name as ".worker-1". */
int  strata__lr_log_write(const strata__lr_log_t *l, const char *path,
                          const char *task);
void strata__lr_log_free(strata__lr_log_t *l);

#endif
