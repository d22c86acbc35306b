/* The monitored validation metric (monitor.h): early stopping and the best
 * checkpoint's bookkeeping, and their configuration checks. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "monitor.h"

static const char *origin(const strata__cfg_t *c, const char *section,
                          const char *key)
{
    const char *o = strata__cfg_origin(c, section, key);
    return o ? o : "default";
}

int strata__monitor_check(const strata__cfg_t *c, const strata__settings_t *s)
{
    const strata__train_cfg_t *t = &s->train;
    const char *metric = strata__monitor_metric(t->monitor);
    /* what watches the monitored metric: the first one set */
    const char *sec = t->es_patience > 0 ? "train"
                      : s->checkpoint.keep_best ? "checkpoint"
                      : t->restore_best || t->rlr_patience > 0 ? "train"
                      : NULL;
    const char *key = t->es_patience > 0 ? "early_stopping_patience"
                      : s->checkpoint.keep_best ? "keep_best"
                      : t->restore_best ? "restore_best_weights"
                      : "reduce_lr_patience";
    int job = s->model.metric;
    if (t->monitor != STRATA__MONITOR_VAL_LOSS && t->monitor != job) {
        strata__log(STRATA_LOG_ERROR, "config", "%s: [train] monitor = %s, "
                    "but the job's metric is %s ([model] metric, %s): "
                    "monitor val_loss or %s", origin(c, "train", "monitor"),
                    strata__monitor_metric(t->monitor),
                    strata__monitor_metric(job) + 4,
                    origin(c, "model", "metric"),
                    strata__monitor_metric(job));
        return STRATA_ECONFIG;
    }
    if (!t->eval && sec) {
        strata__log(STRATA_LOG_ERROR, "config", "%s: [%s] %s watches [train] "
                    "monitor = %s, a validation metric: it needs [train] eval "
                    "= true (%s sets it false)", origin(c, sec, key), sec, key,
                    metric, origin(c, "train", "eval"));
        return STRATA_ECONFIG;
    }
    if (s->checkpoint.keep_best &&
        !(s->checkpoint.dir && s->checkpoint.dir[0])) {
        strata__log(STRATA_LOG_ERROR, "config", "%s: [checkpoint] keep_best = "
                    "true needs [checkpoint] dir, where best.safetensors goes",
                    origin(c, "checkpoint", "keep_best"));
        return STRATA_ECONFIG;
    }
    return STRATA_OK;
}

void strata__monitor_init(strata__monitor_t *m, const strata__settings_t *s)
{
    memset(m, 0, sizeof *m);
    m->metric = s->train.monitor;
    m->patience = s->train.es_patience;
    m->min_delta = s->train.es_min_delta;
    m->keep_best = s->checkpoint.keep_best || s->train.restore_best;
}

const char *strata__monitor_metric(int metric)
{
    static const char *const names[] = {
        "val_loss", "val_accuracy", "val_sparse_top_k_categorical_accuracy",
        "val_top_k_categorical_accuracy", "val_mae", "val_mse", "val_auc",
    };
    return metric >= 0 && metric < 7 ? names[metric] : "val_loss";
}

int strata__monitor_higher(int metric)
{
    return (metric >= STRATA__METRIC_ACCURACY &&
            metric <= STRATA__METRIC_TOPK) || metric == STRATA__METRIC_AUC;
}

const char *strata__monitor_name(const strata__monitor_t *m)
{
    return strata__monitor_metric(m->metric);
}

/* Is `v` better than `ref` by more than `delta`? Loss: lower; accuracy:
 * higher (Keras' mode auto). */
static int better(const strata__monitor_t *m, double v, double ref,
                  double delta)
{
    return strata__monitor_higher(m->metric) ? v - delta > ref
                                             : v + delta < ref;
}

void strata__monitor_epoch(strata__monitor_t *m, int epoch, double val_loss,
                           double val_acc, int *save_best, int *stop)
{
    double v = m->metric != STRATA__MONITOR_VAL_LOSS ? val_acc : val_loss;
    *save_best = 0;
    *stop = 0;
    if (isnan(v))
        v = strata__monitor_higher(m->metric) ? -INFINITY : INFINITY;
    if (m->keep_best && (!m->has_kept || better(m, v, m->kept, 0.0))) {
        m->has_kept = 1;
        m->kept = v;
        m->kept_epoch = epoch;
        *save_best = 1;
    }
    if (m->patience <= 0)
        return;
    m->wait++;
    if (!m->has_best || better(m, v, m->best, m->min_delta)) {
        m->has_best = 1;
        m->best = v;
        m->best_epoch = epoch;
        m->wait = 0;
        return;
    }
    *stop = m->wait >= m->patience;
}

void strata__monitor_stop_line(const strata__monitor_t *m, int epoch,
                               char *buf, size_t len)
{
    char delta[64] = "";
    if (m->min_delta > 0)
        snprintf(delta, sizeof delta, " by more than %g", m->min_delta);
    snprintf(buf, len, "early stopping after epoch %d: %s has not improved%s "
             "for %lld epoch%s (best %.4f, epoch %d; "
             "[train] early_stopping_patience = %lld)", epoch,
             strata__monitor_name(m), delta, (long long)m->wait,
             m->wait == 1 ? "" : "s", m->best, m->best_epoch,
             (long long)m->patience);
}

int strata__monitor_to_meta(const strata__monitor_t *m,
                            const char *keys[STRATA__MONITOR_NMETA],
                            char vals[STRATA__MONITOR_NMETA][32])
{
    int n = 0;
    keys[n] = "strata.monitor";
    snprintf(vals[n++], 32, "%s", strata__monitor_name(m));
    keys[n] = "strata.es_wait";
    snprintf(vals[n++], 32, "%lld", (long long)m->wait);
    if (m->has_best) {
        keys[n] = "strata.es_best";
        snprintf(vals[n++], 32, "%.17g", m->best);
        keys[n] = "strata.es_best_epoch";
        snprintf(vals[n++], 32, "%d", m->best_epoch);
    }
    if (m->has_kept) {
        keys[n] = "strata.best";
        snprintf(vals[n++], 32, "%.17g", m->kept);
        keys[n] = "strata.best_epoch";
        snprintf(vals[n++], 32, "%d", m->kept_epoch);
    }
    return n;
}

int strata__meta_num(const char *(*get)(const void *, const char *),
                     const void *ctx, const char *key, double *out)
{
    const char *v = get(ctx, key);
    char *end = NULL;
    errno = 0;
    double x = v && *v ? strtod(v, &end) : 0.0;
    if (!v || !*v || *end || errno || !isfinite(x))
        return 0;
    *out = x;
    return 1;
}

int strata__meta_count(const char *(*get)(const void *, const char *),
                       const void *ctx, const char *key, int64_t *out)
{
    double x;
    /* checked before the conversion: 1e300 would be undefined there */
    if (!strata__meta_num(get, ctx, key, &x) || !(x >= 0 && x <= INT32_MAX) ||
        x != trunc(x))
        return 0;
    *out = (int64_t)x;
    return 1;
}

void strata__monitor_from_meta(strata__monitor_t *m,
                               const char *(*get)(const void *ctx,
                                                  const char *key),
                               const void *ctx)
{
    const char *name = get(ctx, "strata.monitor");
    if (!name || strcmp(name, strata__monitor_name(m)) != 0)
        return;
    double best, kept;
    int64_t wait, best_epoch, kept_epoch;
    if (strata__meta_count(get, ctx, "strata.es_wait", &wait))
        m->wait = wait;
    if (strata__meta_num(get, ctx, "strata.es_best", &best) &&
        strata__meta_count(get, ctx, "strata.es_best_epoch", &best_epoch)) {
        m->has_best = 1;
        m->best = best;
        m->best_epoch = (int)best_epoch;
    }
    if (strata__meta_num(get, ctx, "strata.best", &kept) &&
        strata__meta_count(get, ctx, "strata.best_epoch", &kept_epoch)) {
        m->has_kept = 1;
        m->kept = kept;
        m->kept_epoch = (int)kept_epoch;
    }
}
