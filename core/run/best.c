/* [train] restore_best_weights: the strategy's state at the best epoch
 * (by [train] monitor, strictly better as keep_best counts it), kept in
 * memory, and installed when the run ends, so that what the run ends
 * with -- the test score, debug.dump_vars, the variables an embedder
 * reads -- is the best epoch's. Keras restores them only when early
 * stopping ends the run; strata also when the last epoch does. The one
 * writer of run->best. */
#include <stdlib.h>

#include "checkpoint/resume.h"
#include "run.h"

int strata__best_check(const strata__run_t *run)
{
    if (!run->s->train.restore_best)
        return STRATA_OK;
    const char *why = run->elastic
        ? "an elastic job: a member that joins after the best epoch holds "
          "no copy of it"
        : run->strategy->caps & (STRATA_CAP_DRIVES | STRATA_CAP_NEXT_STEP)
        ? "its strategy drives the job (the core's loop does not run)"
        : !(run->strategy->caps & STRATA_CAP_STATE)
        ? "its strategy cannot give its state (STRATA_CAP_STATE)"
        : NULL;
    if (!why)
        return STRATA_OK;
    strata__log(STRATA_LOG_ERROR, "train", "[train] restore_best_weights = "
                "true is not for this job: %s (strategy %s); [checkpoint] "
                "keep_best keeps the best epoch in best.safetensors",
                why, run->strategy->name);
    return STRATA_ECONFIG;
}

int strata__best_keep(strata__run_t *run, int epoch)
{
    if (!run->s->train.restore_best)
        return STRATA_OK;
    if (!run->best.vars) {
        int rc = strata__state_alloc(run, &run->best);
        if (rc != STRATA_OK)
            return rc;
        run->best_states = malloc(run->model.state_count *
                                  sizeof *run->best_states + 1);
        if (!run->best_states)
            return STRATA_ENOMEM;
    }
    int rc = strata__run_state(run, STRATA_CTL_STATE_GET, &run->best);
    if (rc == STRATA_OK) /* the same on every replica and worker */
        rc = strata__work_state_get(&run->model, &run->reps[0].work,
                                    run->best_states);
    run->best_epoch = rc == STRATA_OK ? epoch : 0;
    return rc;
}

int strata__best_restore(strata__run_t *run)
{
    /* Every task decides alike: best_epoch was set on all of them (the
     * monitor itself is the chief's). */
    const strata__monitor_t *m = &run->monitor;
    if (!run->s->train.restore_best)
        return STRATA_OK;
    if (!run->best_epoch) {
        if (run->geo.chief && m->has_kept)
            strata__log(STRATA_LOG_WARN, "train", "[train] "
                        "restore_best_weights: the best epoch (%d, %s %.4f) "
                        "was before this run resumed; its variables were not "
                        "kept: the run ends with the last epoch's", m->kept_epoch,
                        strata__monitor_name(m), m->kept);
        return STRATA_OK;
    }
    if (run->best_epoch == run->stats.last.epoch)
        return STRATA_OK; /* it ends on its best epoch already */
    int rc = strata__run_state(run, STRATA_CTL_STATE_SET, &run->best);
    if (rc == STRATA_OK)
        rc = strata__run_states_set(run, run->best_states, 0);
    run->restored = rc == STRATA_OK;
    if (rc == STRATA_OK && run->geo.chief)
        strata__out(run->ctx, "restored the variables of epoch %d, the best "
                    "(%s %.4f)\n", run->best_epoch, strata__monitor_name(m),
                    m->kept);
    return rc;
}

void strata__best_free(strata__run_t *run)
{
    strata__state_free(&run->best);
    free(run->best_states);
    run->best_states = NULL;
    run->best_epoch = 0;
}
