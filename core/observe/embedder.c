/* The embedding application's callbacks (strata.h) as one more observer:
 * epoch() on the chief at each epoch's end, event() with every event of
 * the run translated to the public strata_event_t. */
#include <stdlib.h>
#include <string.h>

#include "run/run.h"
#include "run/stopping.h"

static void epoch_report(const strata__run_t *run,
                         const strata__epoch_stats_t *st)
{
    const strata_callbacks_t *cb = &run->ctx->cb;
    if (!cb->epoch || !run->geo.chief)
        return;
    strata_epoch_report_t r = {
        .epoch = st->epoch - 1, .epochs = strata__run_epochs(run),
        .steps = st->steps, .loss = st->train_loss,
        .accuracy = st->train_acc, .has_val = st->has_test,
        .val_loss = st->test_loss, .val_accuracy = st->test_acc,
        .seconds = st->seconds, .samples_per_s = st->samples_per_s,
    };
    cb->epoch(cb->user, &r);
}

/* STEP: one public event per step of the records (replicas summed). */
static void steps(const strata_callbacks_t *cb, const strata__event_t *ev,
                  strata_event_t *pe)
{
    for (int i = 0; i < ev->nrec; i++) {
        const strata__step_rec_t *r0 = &ev->rec[0][i];
        double loss = 0.0, metric = 0.0, n = 0.0, t0 = r0->t0, t1 = r0->upd;
        for (int r = 0; r < ev->nreps; r++) {
            const strata__step_rec_t *x = &ev->rec[r][i];
            loss += x->loss;
            metric += x->metric;
            n += (double)x->samples;
            t0 = x->t0 < t0 ? x->t0 : t0;
            t1 = x->upd > t1 ? x->upd : t1;
        }
        pe->step = r0->step;
        pe->loss = n > 0 ? loss / n : 0.0;
        pe->accuracy = n > 0 ? metric / n : 0.0;
        pe->learning_rate = r0->lr;
        pe->seconds = t1 - t0;
        cb->event(cb->user, pe);
    }
}

static int on_event(void *self, const strata__event_t *ev)
{
    const strata__run_t *run = self;
    const strata_callbacks_t *cb = &run->ctx->cb;
    if (ev->kind == STRATA__EV_EPOCH_END)
        epoch_report(run, ev->stats);
    if (!cb->event)
        return STRATA_OK;
    strata_event_t pe;
    memset(&pe, 0, sizeof pe);
    pe.struct_size = sizeof pe;
    pe.epoch = ev->epoch;
    switch (ev->kind) {
    case STRATA__EV_EPOCH_BEGIN:
        pe.kind = STRATA_EVENT_EPOCH_BEGIN;
        pe.steps = ev->steps;
        break;
    case STRATA__EV_STEPS:
        pe.kind = STRATA_EVENT_STEP;
        steps(cb, ev, &pe);
        return STRATA_OK;
    case STRATA__EV_EVAL:
        pe.kind = STRATA_EVENT_EVAL;
        pe.step = ev->step;
        pe.loss = ev->loss;
        pe.accuracy = ev->acc;
        pe.seconds = ev->t1 - ev->t0;
        break;
    case STRATA__EV_CHECKPOINT:
        pe.kind = STRATA_EVENT_CHECKPOINT;
        pe.step = ev->step;
        pe.seconds = ev->t1 - ev->t0;
        break;
    case STRATA__EV_EPOCH_END: {
        const strata__epoch_stats_t *st = ev->stats;
        pe.kind = STRATA_EVENT_EPOCH_END;
        pe.epoch = st->epoch - 1;
        pe.steps = st->steps;
        pe.loss = st->train_loss;
        pe.accuracy = st->train_acc;
        pe.learning_rate = st->lr;
        pe.seconds = st->seconds;
        pe.has_val = st->has_test;
        pe.val_loss = st->test_loss;
        pe.val_accuracy = st->test_acc;
        pe.samples_per_s = st->samples_per_s;
        pe.comm_share = st->comm;
        break;
    }
    case STRATA__EV_RUN_END:
        pe.kind = STRATA_EVENT_RUN_END;
        pe.result = ev->rc;
        break;
    default: /* SAMPLES, APPLIED (replica threads), PROGRESS, RUN_BEGIN */
        return STRATA_OK;
    }
    cb->event(cb->user, &pe);
    return STRATA_OK;
}

int strata__embedder_observer(strata__run_t *run, strata__bus_t *bus)
{
    const strata__observer_t o = { "callbacks", run, on_event, NULL };
    return strata__bus_add(bus, &o);
}
