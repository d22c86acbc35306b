/* [train] reduce_lr_patience (plateau.h): Keras' ReduceLROnPlateau, its
 * bookkeeping, the rate it gives and its part of a checkpoint. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "monitor.h"
#include "plateau.h"

void strata__plateau_init(strata__plateau_t *p, const strata__settings_t *s)
{
    const strata__train_cfg_t *t = &s->train;
    memset(p, 0, sizeof *p);
    p->metric = t->monitor;
    p->patience = t->rlr_patience;
    p->factor = t->rlr_factor;
    p->min_delta = t->rlr_min_delta;
    p->min_lr = t->rlr_min_lr;
    p->cooldown = t->rlr_cooldown;
    p->scale = 1.0;
}

int strata__plateau_check(const strata__settings_t *s, const char *strategy,
                          int drives, int elastic)
{
    if (s->train.rlr_patience <= 0 || !(drives || elastic))
        return STRATA_OK;
    strata__log(STRATA_LOG_ERROR, "train", "[train] reduce_lr_patience = %lld "
                "is not for this job: %s (strategy %s); a schedule "
                "([optimizer] schedule) changes the rate alike everywhere",
                (long long)s->train.rlr_patience, elastic
                ? "an elastic job: a member that joins holds neither the "
                  "reduced rate nor the count of epochs without improvement"
                : "its strategy drives the job: a worker takes each step's "
                  "rate from the step alone, and the next epoch's steps are "
                  "out before an epoch's validation decides", strategy);
    return STRATA_ECONFIG;
}

double strata__plateau_lr(const strata__plateau_t *p, double lr)
{
    if (p->reductions == 0)
        return lr;
    double r = lr * p->scale;
    if (r >= p->min_lr)
        return r;
    return lr < p->min_lr ? lr : p->min_lr;
}

/* Keras' monitor_op: lower by more than min_delta (loss), higher
 * (accuracy); anything beats no best, NaN nothing. */
static int improved(const strata__plateau_t *p, double v)
{
    if (strata__monitor_higher(p->metric))
        return v > (p->has_best ? p->best : -INFINITY) + p->min_delta;
    return v < (p->has_best ? p->best : INFINITY) - p->min_delta;
}

int strata__plateau_epoch(strata__plateau_t *p, double val_loss,
                          double val_acc, double sched_next)
{
    double v = p->metric != STRATA__MONITOR_VAL_LOSS ? val_acc : val_loss;
    if (p->patience <= 0)
        return 0;
    if (p->cooling > 0) {
        p->cooling--;
        p->wait = 0;
    }
    if (improved(p, v)) {
        p->has_best = 1;
        p->best = v;
        p->wait = 0;
        return 0;
    }
    if (p->cooling > 0 || ++p->wait < p->patience)
        return 0;
    /* The rates compared and printed are the float32 ones steps use. */
    float from = (float)strata__plateau_lr(p, sched_next);
    if (!(from > (float)p->min_lr))
        return 0;
    strata__plateau_t next = *p;
    strata__plateau_reduce(&next);
    p->cut = 1;
    p->cut_wait = p->wait;
    p->cut_from = from;
    p->cut_to = (float)strata__plateau_lr(&next, sched_next);
    p->cooling = p->cooldown;
    p->wait = 0;
    return 1;
}

void strata__plateau_set(strata__plateau_t *p, int64_t n)
{
    p->reductions = n;
    p->scale = 1.0;
    for (int64_t i = 0; i < n; i++)
        p->scale *= p->factor;
}

void strata__plateau_reduce(strata__plateau_t *p)
{
    strata__plateau_set(p, p->reductions + 1);
}

int strata__plateau_line(strata__plateau_t *p, int epoch, char *buf,
                         size_t len)
{
    if (!p->cut)
        return 0;
    p->cut = 0;
    snprintf(buf, len, "epoch %d: %s did not improve for %lld epoch%s; "
             "learning rate %g -> %g", epoch,
             strata__monitor_metric(p->metric), (long long)p->cut_wait,
             p->cut_wait == 1 ? "" : "s", p->cut_from, p->cut_to);
    return 1;
}

int strata__plateau_to_meta(const strata__plateau_t *p,
                            const char *keys[STRATA__PLATEAU_NMETA],
                            char vals[STRATA__PLATEAU_NMETA][32])
{
    int n = 0;
    if (p->patience <= 0 && p->reductions == 0)
        return 0;
    keys[n] = "strata.lr_reductions";
    snprintf(vals[n++], 32, "%lld", (long long)p->reductions);
    keys[n] = "strata.lr_wait";
    snprintf(vals[n++], 32, "%lld", (long long)p->wait);
    keys[n] = "strata.lr_cooldown";
    snprintf(vals[n++], 32, "%lld", (long long)p->cooling);
    if (p->has_best) {
        keys[n] = "strata.lr_best";
        snprintf(vals[n++], 32, "%.17g", p->best);
    }
    return n;
}

void strata__plateau_from_meta(strata__plateau_t *p,
                               const char *(*get)(const void *ctx,
                                                  const char *key),
                               const void *ctx)
{
    const char *name = get(ctx, "strata.monitor");
    if (!name || strcmp(name, strata__monitor_metric(p->metric)) != 0)
        return;
    double best;
    int64_t wait, cooling;
    if (strata__meta_count(get, ctx, "strata.lr_wait", &wait))
        p->wait = wait;
    if (strata__meta_count(get, ctx, "strata.lr_cooldown", &cooling))
        p->cooling = cooling;
    if (strata__meta_num(get, ctx, "strata.lr_best", &best)) {
        p->has_best = 1;
        p->best = best;
    }
}

int64_t strata__plateau_meta_reductions(const char *(*get)(const void *ctx,
                                                           const char *key),
                                        const void *ctx)
{
    int64_t n;
    return strata__meta_count(get, ctx, "strata.lr_reductions", &n) &&
           n < 1000000 ? n : 0;
}
