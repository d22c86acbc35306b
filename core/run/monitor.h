/* strata core -- the monitored validation metric, for Keras' callbacks as
 * keys: early stopping ([train] early_stopping_patience, _min_delta,
 * monitor) and the best checkpoint ([checkpoint] keep_best). Internal.
 *
 * Pure bookkeeping: the training loop feeds it each epoch's validation
 * figures and acts on what it answers. In a job of several processes only
 * the chief's answer counts (the loop hands it to every task), so tasks
 * cannot disagree on when to stop or what to keep. */
#ifndef STRATA_CORE_MONITOR_H
#define STRATA_CORE_MONITOR_H

#include "internal.h"

typedef struct strata__monitor {
    int     metric;      /* STRATA__MONITOR_*                               */
    int64_t patience;    /* early stopping; 0: off                          */
    double  min_delta;
    int     keep_best;   /* track the best: keep_best, restore_best_weights */
    /* early stopping (Keras EarlyStopping: mode auto, no baseline) */
    int     has_best;
    double  best;
    int     best_epoch;  /* 1-based                                         */
    int64_t wait;        /* epochs since the last improvement               */
    /* keep_best (Keras ModelCheckpoint, save_best_only): strictly better */
    int     has_kept;
    double  kept;
    int     kept_epoch;
} strata__monitor_t;

/* [train] early_stopping_patience, reduce_lr_patience, restore_best_weights
 * and [checkpoint] keep_best need the validation ([train] eval = true), and
 * keep_best a [checkpoint] dir: one error line naming file:line and the
 * key; STRATA_ECONFIG. */
int  strata__monitor_check(const strata__cfg_t *c, const strata__settings_t *s);
void strata__monitor_init(strata__monitor_t *m, const strata__settings_t *s);
/* "val_loss" | "val_accuracy" | "val_mae" ...: of the monitor, of a
 * STRATA__MONITOR_VAL_LOSS or STRATA__METRIC_*; higher: 1 when more is
 * better (the accuracies) */
const char *strata__monitor_name(const strata__monitor_t *m);
const char *strata__monitor_metric(int metric);
int         strata__monitor_higher(int metric);

/* Epoch `epoch` (1-based) ended with these validation figures. *save_best:
 * keep_best is on and the metric is the best so far; *stop: early stopping
 * ends the training after this epoch (Keras: `patience` epochs in a row
 * without improving the best by more than min_delta). */
void strata__monitor_epoch(strata__monitor_t *m, int epoch, double val_loss,
                           double val_acc, int *save_best, int *stop);

/* The line that says why the training stopped early, after `epoch`. */
void strata__monitor_stop_line(const strata__monitor_t *m, int epoch,
                               char *buf, size_t len);

/* The state as checkpoint metadata (so that a resumed run counts on):
 * up to STRATA__MONITOR_NMETA pairs, keys static, values in vals. */
#define STRATA__MONITOR_NMETA 6
int  strata__monitor_to_meta(const strata__monitor_t *m,
                             const char *keys[STRATA__MONITOR_NMETA],
                             char vals[STRATA__MONITOR_NMETA][32]);
/* A number of a checkpoint's metadata (get(ctx, key): its value or NULL):
 * 1 and *out, or 0 when absent or not a number. */
int  strata__meta_num(const char *(*get)(const void *ctx, const char *key),
                      const void *ctx, const char *key, double *out);
/* The same for a count (epochs, waits): 1 and *out when a whole number in
 * [0, INT32_MAX], else 0 (never converted out of range). */
int  strata__meta_count(const char *(*get)(const void *ctx, const char *key),
                        const void *ctx, const char *key, int64_t *out);
/* The state back from a checkpoint's metadata (get(ctx, key): its value or
 * NULL); ignored when it was written for another metric. */
void strata__monitor_from_meta(strata__monitor_t *m,
                               const char *(*get)(const void *ctx,
                                                  const char *key),
                               const void *ctx);

#endif
