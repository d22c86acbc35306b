/* strata core -- checkpoints of a run (resume.c). Internal. */
#ifndef STRATA_CORE_RESUME_H
#define STRATA_CORE_RESUME_H

#include "run/run.h"

/* Host buffers for the model's state (every variable, every optimizer
 * slot: strata__opt_nslots), the variables zeroed, the slots at their
 * start values (strata__opt_slot_init); strata__state_free frees them (and
 * accepts a failed alloc). */
int  strata__state_alloc(const strata__run_t *run, strata_state_t *st);
void strata__state_free(strata_state_t *st);
/* The strategy's state: STRATA_CTL_STATE_GET into st, or STATE_SET from
 * it (st NULL: a GET that only asks). Collective for a multi-process
 * strategy. A strategy without STRATA_CAP_STATE: STRATA_ENOTSUP, logged. */
int  strata__run_state(strata__run_t *run, int op, strata_state_t *st);

/* Write a checkpoint of the run at a step boundary: the next step to run is
 * batch `batch` of epoch `epoch`, `step` steps are done. Collective for a
 * multi-process strategy (every worker calls it); the chief writes. */
int strata__checkpoint_save(strata__run_t *run, int epoch, int64_t batch,
                            int64_t step);

/* host part_write (plugin ABI 2.13): this task's part of the checkpoint
 * of part->step into [checkpoint] dir (checkpoint.h: parts). */
int strata__checkpoint_part_write(strata__run_t *run, strata_part_t *part);

/* [checkpoint] keep_best: the same checkpoint as DIR/best.safetensors
 * (written atomically; the rotation and the resume never see it), after
 * the monitor has found a new best. Collective as above. */
#define STRATA__BEST_CKPT "best.safetensors"
int strata__checkpoint_save_best(strata__run_t *run, int epoch,
                                 int64_t batch, int64_t step);

/* Before the first step of a run with [checkpoint] dir: read the strategy's
 * state once, so that a strategy that cannot give it fails now, naming
 * itself, rather than at its first checkpoint. */
int strata__checkpoint_probe(strata__run_t *run);

/* [checkpoint] restore = auto: resume from the newest valid checkpoint of
 * [checkpoint] dir (a corrupt one is skipped with a warning naming it);
 * refuse one of another model, optimizer or data order. Collective.
 * *at->resumed == 0: a fresh start. */
int strata__checkpoint_restore(strata__run_t *run, strata__resume_t *at);

#endif
