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

/* Epoch `epoch` (1-based) has its validation figures: the chief's monitor
 * decides (keep_best, early stopping) and every task of the job takes the
 * chief's decision (a world sum), so that none can stop, or skip a
 * collective checkpoint, alone. Sets run->halt, and run->best_due when
 * the best checkpoint is due. Collective. stopping.c is the one writer of
 * both. */
int strata__run_monitor(strata__run_t *run, int epoch, double val_loss,
                        double val_acc);
/* Is the best checkpoint due (at this boundary)? Taken: due no more. */
int strata__run_take_best(strata__run_t *run);
/* The chief's one line that says why the training stopped after `epoch`. */
void strata__run_halt_line(strata__run_t *run, int epoch);

#endif
