/* strata core -- where a run ends: [train] max_steps, early stopping, and
 * the best checkpoint on the way (stopping.c). Internal. */
#ifndef STRATA_CORE_STOPPING_H
#define STRATA_CORE_STOPPING_H

#include "run.h"

/* The global step at which the run ends when nothing stops it early: the
 * end of its last epoch, or [train] max_steps before that. */
int64_t strata__run_last_step(const strata__run_t *run);
/* How many epochs the run touches (the progress header's "Epoch 1/N"):
 * [train] epochs, or fewer when max_steps ends the run inside an earlier
 * one. */
int strata__run_epochs(const strata__run_t *run);

/* The one decision of whether a checkpoint is written at a step boundary,
 * for the core's loop and for a strategy that drives the job
 * (host->boundary): the boundary before global step `step`, batch `batch`
 * of epoch `epoch` (0-based; batch 0 of epoch e: e epochs have closed).
 * stop: the job stops here on request; end: the run ends here (its last
 * step, early stopping). Due at a stop or the end, at a multiple of
 * [checkpoint] every_steps inside an epoch, after every every_epochs-th
 * epoch; never without a [checkpoint] dir. */
int strata__checkpoint_due(const strata__run_t *run, int epoch, int64_t batch,
                           int64_t step, int stop, int end);

/* Epoch `epoch` (1-based) has its validation figures, and global step
 * `next` runs next (-1: the epoch is not whole, max_steps ends the run in
 * it, and the plateau waits for the run that completes it): the chief's
 * monitor and plateau decide (keep_best, early stopping,
 * reduce_lr_patience) and every task of the job takes the chief's
 * decision (a world sum), so that none can stop, skip a collective
 * checkpoint, or change its learning rate alone. Sets run->halt,
 * run->best_due when the best checkpoint is due, and reduces the rate of
 * the steps from `next` on. Collective. stopping.c is the one writer of
 * halt and best_due. */
int strata__run_monitor(strata__run_t *run, int epoch, double val_loss,
                        double val_acc, int64_t next);
/* Is the best checkpoint due (at this boundary)? Taken: due no more. */
int strata__run_take_best(strata__run_t *run);
/* The chief's one line that says why the training stopped after `epoch`. */
void strata__run_halt_line(strata__run_t *run, int epoch);
/* The chief's one line when the learning rate was reduced after `epoch`;
 * nothing otherwise. */
void strata__run_plateau_line(strata__run_t *run, int epoch);

#endif
