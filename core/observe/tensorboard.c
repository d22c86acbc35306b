/* [train] tensorboard: Keras' TensorBoard callback's scalars, from the
 * chief: batch_* every log_every_steps steps, epoch_* at each epoch's end
 * (the training run's and, with an evaluation, the validation run's),
 * where the replicas' time went, and the strangers dropped so far. */
#include <stdlib.h>

#include "model/loss.h"
#include "run/run.h"

typedef struct tensorboard {
    const strata__run_t *run;
    strata__tboard_t     tb;
    double               span_sum;   /* step times since the last point */
    int64_t              span_n;
} tensorboard_t;

/* Slot i of every replica: one step. Steps are numbered as TensorFlow's
 * global_step: the steps done. */
static void step_point(tensorboard_t *t, const strata__event_t *ev, int i)
{
    const strata__step_rec_t *r0 = &ev->rec[0][i];
    double start = r0->t0, end = r0->upd, loss = 0.0, samples = 0.0;
    double metric = 0.0;
    for (int r = 0; r < ev->nreps; r++) {
        const strata__step_rec_t *x = &ev->rec[r][i];
        start = x->t0 < start ? x->t0 : start;
        end = x->upd > end ? x->upd : end;
        loss += x->loss;
        metric += x->metric;
        samples += (double)x->samples;
    }
    t->span_sum += end - start;
    t->span_n++;
    int64_t every = t->run->s->train.log_every_steps;
    if (every <= 0 || (r0->step + 1) % every != 0 || samples <= 0)
        return;
    char metric_tag[64];
    snprintf(metric_tag, sizeof metric_tag, "batch_%s",
             strata__metric_name(t->run->s->model.metric));
    const char *const tags[] = {
        "batch_loss", metric_tag, "batch_learning_rate",
        "batch_step_time_ms",
    };
    const float v[] = {
        (float)(loss / samples), (float)(metric / samples), r0->lr,
        (float)(t->span_sum / (double)t->span_n * 1e3),
    };
    strata__tboard_scalars(&t->tb, STRATA__TB_TRAIN, r0->step + 1, tags, v, 4);
    t->span_sum = 0.0;
    t->span_n = 0;
}

/* What this task's transports dropped from outside the job so far, by
 * kind (plugin ABI 2.7), when one of them counts strangers. */
static void strangers_points(tensorboard_t *t, int64_t e)
{
    strata_strangers_t s;
    if (!t->run->ctx || !strata__ctx_strangers(t->run->ctx, &s))
        return;
    static const char *const tags[] = {
        "strangers/refused_key", "strangers/closed_early",
        "strangers/not_protocol", "strangers/bad_message",
    };
    const float v[] = { (float)s.refused_key, (float)s.closed_early,
                        (float)s.not_protocol, (float)s.bad_message };
    strata__tboard_scalars(&t->tb, STRATA__TB_TRAIN, e, tags, v, 4);
}

/* The phase times are seconds per replica (a replica's epoch is compute +
 * wait + reduce). */
static int epoch_points(tensorboard_t *t, const strata__epoch_stats_t *st)
{
    char metric_tag[64];
    snprintf(metric_tag, sizeof metric_tag, "epoch_%s",
             strata__metric_name(t->run->s->model.metric));
    const char *tags[] = {
        "epoch_loss", metric_tag, "epoch_samples_per_second",
        "epoch_learning_rate", "epoch_compute_seconds",
        "epoch_wait_seconds", "epoch_reduce_seconds", "epoch_comm_share",
    };
    float v[] = {
        (float)st->train_loss, (float)st->train_acc,
        (float)st->samples_per_s, st->lr, (float)st->compute,
        (float)st->wait, (float)st->reduce, (float)st->comm,
    };
    int64_t e = st->epoch - 1;
    strata__tboard_scalars(&t->tb, STRATA__TB_TRAIN, e, tags, v,
                           st->comm >= 0.0 ? 8 : 3);
    if (st->has_test) {
        v[0] = (float)st->test_loss;
        v[1] = (float)st->test_acc;
        strata__tboard_scalars(&t->tb, STRATA__TB_VALIDATION, e, tags, v, 2);
    }
    strangers_points(t, e);
    return strata__tboard_flush(&t->tb);
}

static int on_event(void *self, const strata__event_t *ev)
{
    tensorboard_t *t = self;
    switch (ev->kind) {
    case STRATA__EV_STEPS:
        for (int i = 0; i < ev->nrec; i++)
            step_point(t, ev, i);
        return STRATA_OK;
    case STRATA__EV_EPOCH_END:
        return epoch_points(t, ev->stats);
    case STRATA__EV_RUN_END:
        return strata__tboard_close(&t->tb);
    default:
        return STRATA_OK;
    }
}

static void close_tensorboard(void *self)
{
    tensorboard_t *t = self;
    strata__tboard_close(&t->tb);
    free(t);
}

int strata__tensorboard_observer(strata__run_t *run, strata__bus_t *bus)
{
    const strata__train_cfg_t *tc = &run->s->train;
    if (!run->geo.chief || !tc->tensorboard[0])
        return STRATA_OK;
    tensorboard_t *t = calloc(1, sizeof *t);
    if (!t)
        return STRATA_ENOMEM;
    t->run = run;
    int rc = strata__tboard_open(&t->tb, tc->tensorboard,
                                 1u << STRATA__TB_TRAIN |
                                     (tc->eval ? 1u << STRATA__TB_VALIDATION
                                               : 0u));
    if (rc != STRATA_OK) {
        close_tensorboard(t);
        return rc;
    }
    const strata__observer_t o = { "tensorboard", t, on_event,
                                   close_tensorboard };
    return strata__bus_add(bus, &o);
}
