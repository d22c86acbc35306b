/* Where a run ends (stopping.h): its last step, the epochs it touches, and
 * the monitor's decisions agreed by every task. */
#include "checkpoint/resume.h"
#include "stopping.h"

int64_t strata__run_last_step(const strata__run_t *run)
{
    const strata__train_cfg_t *t = &run->s->train;
    int64_t all = t->epochs * run->geo.steps_per_epoch;
    return t->max_steps > 0 && t->max_steps < all ? t->max_steps : all;
}

int strata__run_epochs(const strata__run_t *run)
{
    int64_t spe = run->geo.steps_per_epoch > 0 ? run->geo.steps_per_epoch : 1;
    return (int)((strata__run_last_step(run) + spe - 1) / spe);
}

int strata__checkpoint_due(const strata__run_t *run, int epoch, int64_t batch,
                           int64_t step, int stop, int end)
{
    const strata__checkpoint_cfg_t *ck = &run->s->checkpoint;
    if (!ck->dir || !ck->dir[0])
        return 0;
    if (stop || end)
        return 1;
    if (batch > 0)
        return ck->every_steps > 0 && step % ck->every_steps == 0;
    return ck->every_epochs > 0 && epoch > 0 && epoch % ck->every_epochs == 0;
}

int strata__run_monitor(strata__run_t *run, int epoch, double val_loss,
                        double val_acc, int64_t next)
{
    float v[3] = { 0.0f, 0.0f, 0.0f };
    if (run->geo.chief) {
        int best, stop;
        strata__monitor_epoch(&run->monitor, epoch, val_loss, val_acc, &best,
                              &stop);
        v[0] = (float)best;
        v[1] = (float)stop;
        if (next >= 0) {
            double sched = strata__schedule_lr(&run->sched, next);
            v[2] = (float)strata__plateau_epoch(&run->plateau, val_loss,
                                                val_acc, sched);
        }
    }
    int rc = strata__run_world_sum(run, v, 3);
    run->best_due = rc == STRATA_OK && v[0] > 0.5f;
    run->halt = rc == STRATA_OK && v[1] > 0.5f;
    if (rc == STRATA_OK && v[2] > 0.5f)
        strata__plateau_reduce(&run->plateau);
    return rc;
}

int strata__run_take_best(strata__run_t *run)
{
    int due = run->best_due;
    run->best_due = 0;
    return due;
}

void strata__run_halt_line(strata__run_t *run, int epoch)
{
    if (!run->geo.chief)
        return;
    char line[512];
    strata__monitor_stop_line(&run->monitor, epoch, line, sizeof line);
    strata__out(run->ctx, "%s\n", line);
}

void strata__run_plateau_line(strata__run_t *run, int epoch)
{
    char line[256];
    if (run->geo.chief &&
        strata__plateau_line(&run->plateau, epoch, line, sizeof line))
        strata__out(run->ctx, "%s\n", line);
}
