/* The sidecar evaluator (TensorFlow's `evaluator` task): a task of type
 * evaluator trains nothing. It watches [checkpoint] dir, scores the newest
 * checkpoint each time a newer one appears (one it falls behind on is
 * skipped, as tf.keras.utils.SidecarEvaluator does), reports it (stdout,
 * [evaluator] metrics_csv, the epoch callback) and exits once it has scored
 * the checkpoint of training's last step. With [train] tensorboard, its
 * scores go to DIR/evaluation (epoch_loss, epoch_accuracy at the step). Waiting is bounded: no newer
 * checkpoint for [evaluator] timeout_s is an error, and a stop request
 * (SIGTERM) ends it at once. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/loss.h"
#include "eval.h"
#include "run.h"
#include "observe/observe.h"

#define WHO "evaluator"

typedef struct scored {
    int64_t step;
    int     epoch;
    double  loss, acc;
} scored_t;

typedef struct sidecar {
    strata__run_t            *run;
    const strata__eval_cfg_t *cfg;
    strata__scorer_t          scorer;
    scored_t                 *rows;
    int                       nrows;
    strata__tboard_t          tb;       /* [train] tensorboard: evaluation */
    int                       tb_on;
} sidecar_t;

static int meta_i64(const strata__ckpt_t *ck, const char *key, int64_t *v)
{
    const char *s = strata__ckpt_meta(ck, key);
    char *end;
    if (!s || !*s)
        return -1;
    long long x = strtoll(s, &end, 10);
    if (*end || x < 0)
        return -1;
    *v = x;
    return 0;
}

/* The step after which training is over, from the checkpoint's own record
 * of the data and batch (the evaluator loads no training set) and the
 * config's epochs and max_steps. */
static int64_t last_step(const sidecar_t *sc, const strata__ckpt_t *ck)
{
    int64_t samples, batch;
    if (meta_i64(ck, "strata.train_samples", &samples) != 0 ||
        meta_i64(ck, "strata.batch_size", &batch) != 0 || batch <= 0)
        return -1;
    const strata__train_cfg_t *t = &sc->run->s->train;
    int64_t total = (samples / batch) * t->epochs;
    return t->max_steps > 0 && t->max_steps < total ? t->max_steps : total;
}

static int write_csv(const sidecar_t *sc)
{
    const char *path = sc->cfg->metrics_csv;
    if (!path || !path[0])
        return STRATA_OK;
    size_t cap = 64 + (size_t)sc->nrows * 96, len = 0;
    char *buf = malloc(cap);
    if (!buf)
        return STRATA_ENOMEM;
    len += (size_t)snprintf(buf, cap, "step,epoch,test_loss,test_acc\n");
    for (int i = 0; i < sc->nrows; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%" PRId64 ",%d,%.6f,"
                                "%.6f\n", sc->rows[i].step, sc->rows[i].epoch,
                                sc->rows[i].loss, sc->rows[i].acc);
    int rc = strata__write_atomic(path, buf, len);
    free(buf);
    return rc;
}

static int report(sidecar_t *sc, const char *path, const scored_t *row)
{
    scored_t *r = realloc(sc->rows, (size_t)(sc->nrows + 1) * sizeof *r);
    if (!r)
        return STRATA_ENOMEM;
    sc->rows = r;
    r[sc->nrows++] = *row;
    const char *set = strata__datasets_has_val(&sc->run->s->data)
                          ? "validation" : "test";
    strata__out(sc->run->ctx, "evaluator: %s (epoch %d, step %" PRId64 "): "
                "%s loss %.4f, %s %s %.4f\n", path, row->epoch,
                row->step, set, row->loss, set,
                strata__metric_name(sc->run->s->model.metric), row->acc);
    const strata_callbacks_t *cb = &sc->run->ctx->cb;
    if (cb->epoch) {
        strata_epoch_report_t e = {
            .epoch = row->epoch - 1, .epochs = (int32_t)sc->run->s->train.epochs,
            .has_val = 1, .val_loss = row->loss, .val_accuracy = row->acc,
        };
        cb->epoch(cb->user, &e);
    }
    int rc = STRATA_OK;
    if (sc->tb_on) { /* as Keras' SidecarEvaluator: at the training step */
        char metric_tag[64];
        snprintf(metric_tag, sizeof metric_tag, "epoch_%s",
                 strata__metric_name(sc->run->s->model.metric));
        const char *const tags[] = { "epoch_loss", metric_tag };
        const float v[] = { (float)row->loss, (float)row->acc };
        strata__tboard_scalars(&sc->tb, STRATA__TB_EVALUATION, row->step, tags,
                               v, 2);
        rc = strata__tboard_flush(&sc->tb);
    }
    return rc == STRATA_OK ? write_csv(sc) : rc;
}

static void nap(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* One look at the directory: score the newest checkpoint if it is newer
 * than the last one scored (its name is read first, so an unchanged
 * directory costs a listing). *done once it is training's last step. */
static int look(sidecar_t *sc, int64_t *named, int64_t *seen, int *fresh,
                int *done)
{
    const char *dir = sc->run->s->checkpoint.dir;
    int64_t newest;
    *fresh = *done = 0;
    int rc = strata__ckpt_newest_step(dir, &newest);
    if (rc == STRATA_ENOENT || (rc == STRATA_OK && newest <= *named))
        return STRATA_OK;
    if (rc != STRATA_OK)
        return rc;
    *named = newest; /* a newest file that does not validate: warned once */
    strata__ckpt_t *ck = NULL;
    char path[4096];
    rc = strata__ckpt_latest(dir, &ck, path, sizeof path);
    if (rc == STRATA_ENOENT || rc == STRATA_EDATA) /* gone, or none good */
        return STRATA_OK;
    int64_t step, epoch;
    if (rc == STRATA_OK && (meta_i64(ck, "strata.step", &step) != 0 ||
                            meta_i64(ck, "strata.epoch", &epoch) != 0)) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: no strata.step/strata.epoch "
                    "metadata: not a training checkpoint", path);
        rc = STRATA_EDATA;
    }
    if (rc == STRATA_OK && step > *seen) {
        scored_t row = { .step = step, .epoch = (int)epoch };
        rc = strata__scorer_run(&sc->scorer, ck, path, &row.loss, &row.acc);
        if (rc == STRATA_OK)
            rc = report(sc, path, &row);
        *seen = step;
        *fresh = 1;
        int64_t last = last_step(sc, ck);
        /* strata.final: training ended there before its last step (early
         * stopping) */
        const char *fin = strata__ckpt_meta(ck, "strata.final");
        *done = (last >= 0 && step >= last) || (fin && !strcmp(fin, "1"));
    }
    strata__ckpt_free(ck);
    return rc;
}

int strata__sidecar_run(strata__run_t *run)
{
    const char *dir = run->s->checkpoint.dir;
    if (!dir || !dir[0]) {
        strata__log(STRATA_LOG_ERROR, WHO, "an evaluator task scores the "
                    "checkpoints of [checkpoint] dir, which is not set");
        return STRATA_ECONFIG;
    }
    sidecar_t sc = { .run = run, .cfg = &run->s->evaluator };
    const char *tb = run->s->train.tensorboard;
    /* It scores the validation set where [data] names one: the training
     * job's early stopping and keep_best watch the same figures. */
    int rc = strata__scorer_open(run->ctx,
                                 strata__datasets_has_val(&run->s->data)
                                     ? STRATA__SET_VAL : STRATA__SET_TEST,
                                 &sc.scorer);
    if (rc == STRATA_OK && tb && tb[0]) {
        rc = strata__tboard_open(&sc.tb, tb, 1u << STRATA__TB_EVALUATION);
        sc.tb_on = rc == STRATA_OK;
    }
    if (rc != STRATA_OK) {
        strata__scorer_close(&sc.scorer);
        return rc;
    }
    strata__log(STRATA_LOG_INFO, WHO, "watching %s (a new checkpoint within "
                "%" PRId64 " s, or an error)", dir, sc.cfg->timeout_s);
    int64_t named = -1, seen = -1;
    double quiet_since = strata__now();
    int done = 0;
    while (rc == STRATA_OK && !done) {
        if (atomic_load(&run->ctx->stop)) {
            strata__log(STRATA_LOG_WARN, WHO, "stopped on request after %d "
                        "evaluation%s", sc.nrows, sc.nrows == 1 ? "" : "s");
            rc = STRATA_ESTOPPED;
            break;
        }
        int fresh;
        rc = look(&sc, &named, &seen, &fresh, &done);
        double now = strata__now();
        if (fresh)
            quiet_since = now;
        else if (rc == STRATA_OK && now - quiet_since > (double)sc.cfg->timeout_s) {
            strata__log(STRATA_LOG_ERROR, WHO, "no new checkpoint in %s for "
                        "%" PRId64 " s ([evaluator] timeout_s); %s", dir,
                        sc.cfg->timeout_s, seen < 0 ? "none seen at all"
                                                    : "training has not "
                                                      "reached its last step");
            rc = STRATA_ETIMEDOUT;
        } else if (rc == STRATA_OK && !done)
            nap((long)sc.cfg->poll_ms);
    }
    if (rc == STRATA_OK)
        strata__out(run->ctx, "evaluator: done, %d checkpoint%s scored\n",
                    sc.nrows, sc.nrows == 1 ? "" : "s");
    int tbrc = sc.tb_on ? strata__tboard_close(&sc.tb) : STRATA_OK;
    free(sc.rows);
    strata__scorer_close(&sc.scorer);
    return rc == STRATA_OK ? tbrc : rc;
}
