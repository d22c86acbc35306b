/* The event stream of a run (strata_callbacks_t.event): what strata's own
 * outputs observe, delivered to the embedding program. Checks the order
 * (epoch begin, its steps, evaluation, epoch end; checkpoints between;
 * the run's end last), that every step comes once and in order, and that
 * the figures agree with the epoch reports: the mean of an epoch's step
 * losses is the epoch's loss. A program built against the callbacks of
 * 0.2 (no event member) gets none. Public API only. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <strata/strata.h>

#include "check.h"

#define MAXEV 256
static strata_event_t g_ev[MAXEV];
static int g_nev, g_lost;
static strata_epoch_report_t g_rep[4];
static int g_nrep;

static void on_event(void *user, const strata_event_t *ev)
{
    CHECK(user == g_ev);
    CHECK(ev->struct_size == sizeof *ev);
    if (g_nev < MAXEV)
        g_ev[g_nev++] = *ev;
    else
        g_lost++;
}

static void on_epoch(void *user, const strata_epoch_report_t *r)
{
    CHECK(user == g_ev);
    if (g_nrep < 4)
        g_rep[g_nrep++] = *r;
}

static strata_ctx_t *small_job(const char *ckdir)
{
    strata_ctx_t *ctx = NULL;
    CHECK(strata_ctx_create(NULL, &ctx) == 0);
    char ck[512], every[] = "checkpoint.every_steps=15";
    snprintf(ck, sizeof ck, "checkpoint.dir=%s", ckdir);
    const char *sets[] = { "train.epochs=2", "train.batch_size=32",
                           "train.devices=cpu:0,cpu:1",
                           "data.limit_train=640", "data.limit_test=200",
                           "train.progress=none", ck, every };
    for (size_t i = 0; ctx && i < sizeof sets / sizeof *sets; i++)
        CHECK(strata_ctx_set(ctx, sets[i]) == 0);
    return ctx;
}

static int approx(double a, double b)
{
    return fabs(a - b) <= 1e-6 * (fabs(a) + fabs(b)) + 1e-9;
}

int main(void)
{
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
               R_OK) != 0)
        CHECK_SKIP("Fashion-MNIST not installed");
    char dir[] = "/tmp/strata-eventsXXXXXX";
    CHECK(mkdtemp(dir) != NULL);

    strata_ctx_t *ctx = small_job(dir);
    strata_callbacks_t cb = { .struct_size = sizeof cb, .user = g_ev,
                              .epoch = on_epoch, .event = on_event };
    CHECK(ctx && strata_ctx_set_callbacks(ctx, &cb) == 0);
    int rc = ctx ? strata_train(ctx) : -1;
    CHECKF(rc == 0, "run: %s", strata_strerror(rc));
    strata_ctx_destroy(ctx);
    CHECKF(g_lost == 0 && g_nev > 0, "%d events, %d lost", g_nev, g_lost);
    CHECK(g_nrep == 2);

    /* 20 steps per epoch (640 / 32), evaluated after each epoch. */
    int epoch = -1, in_epoch = 0, nstep = 0, neval = 0, nend = 0, nckpt = 0;
    int64_t next_step = 0, last_ckpt = 0;
    double loss_sum = 0.0;
    for (int i = 0; i < g_nev; i++) {
        const strata_event_t *ev = &g_ev[i];
        switch (ev->kind) {
        case STRATA_EVENT_EPOCH_BEGIN:
            CHECKF(!in_epoch && ev->epoch == epoch + 1 && ev->steps == 20,
                   "event %d: epoch %d begins (%lld steps) after epoch %d",
                   i, ev->epoch, (long long)ev->steps, epoch);
            epoch = ev->epoch;
            in_epoch = 1;
            loss_sum = 0.0;
            break;
        case STRATA_EVENT_STEP:
            CHECKF(in_epoch && ev->epoch == epoch && ev->step == next_step,
                   "event %d: step %lld of epoch %d; expected step %lld of "
                   "epoch %d", i, (long long)ev->step, ev->epoch,
                   (long long)next_step, epoch);
            CHECK(ev->loss > 0 && ev->accuracy >= 0 && ev->accuracy <= 1);
            CHECK(ev->learning_rate > 0 && ev->seconds > 0);
            loss_sum += ev->loss;
            next_step++;
            nstep++;
            break;
        case STRATA_EVENT_EVAL:
            CHECKF(in_epoch && ev->step == next_step,
                   "event %d: evaluation at step %lld (%lld done)", i,
                   (long long)ev->step, (long long)next_step);
            CHECK(ev->accuracy > 0.1 && ev->loss > 0 && ev->seconds > 0);
            neval++;
            break;
        case STRATA_EVENT_CHECKPOINT:
            CHECKF(ev->step > last_ckpt && ev->step <= next_step &&
                       (ev->step % 15 == 0 || ev->step % 20 == 0),
                   "event %d: checkpoint at step %lld", i,
                   (long long)ev->step);
            last_ckpt = ev->step;
            nckpt++;
            break;
        case STRATA_EVENT_EPOCH_END: {
            CHECKF(in_epoch && ev->epoch == epoch && ev->steps == 20,
                   "event %d: epoch %d ends (%lld steps)", i, ev->epoch,
                   (long long)ev->steps);
            in_epoch = 0;
            const strata_epoch_report_t *r = &g_rep[epoch < 2 ? epoch : 1];
            CHECKF(approx(ev->loss, r->loss) &&
                       approx(ev->accuracy, r->accuracy) && ev->has_val &&
                       approx(ev->val_loss, r->val_loss) &&
                       approx(ev->val_accuracy, r->val_accuracy),
                   "epoch %d: the event says loss %g acc %g val %g/%g, the "
                   "report %g %g %g/%g", epoch, ev->loss, ev->accuracy,
                   ev->val_loss, ev->val_accuracy, r->loss, r->accuracy,
                   r->val_loss, r->val_accuracy);
            /* Steps of equal size: the mean of their losses. */
            CHECKF(approx(loss_sum / 20.0, ev->loss), "epoch %d: the steps' "
                   "mean loss %.9g, the epoch's %.9g", epoch, loss_sum / 20.0,
                   ev->loss);
            CHECKF(ev->comm_share >= 0 && ev->comm_share <= 1 &&
                       ev->learning_rate > 0 && ev->samples_per_s > 0,
                   "epoch %d: comm %g lr %g", epoch, ev->comm_share,
                   ev->learning_rate);
            nend++;
            break;
        }
        case STRATA_EVENT_RUN_END:
            CHECKF(i == g_nev - 1 && ev->result == 0,
                   "event %d of %d: the run's end, result %d", i, g_nev,
                   ev->result);
            break;
        default:
            CHECKF(0, "event %d: unknown kind %d", i, ev->kind);
        }
    }
    CHECKF(nstep == 40 && neval == 2 && nend == 2,
           "%d steps, %d evaluations, %d epoch ends", nstep, neval, nend);
    /* every_steps = 15: steps 15 and 30, and the end of the run (40). */
    CHECKF(nckpt >= 3 && last_ckpt == 40, "%d checkpoints, the last at %lld",
           nckpt, (long long)last_ckpt);

    /* Callbacks of 0.2: no event member, no events (and no crash). */
    g_nev = g_nrep = 0;
    char dir2[] = "/tmp/strata-eventsXXXXXX";
    CHECK(mkdtemp(dir2) != NULL);
    ctx = small_job(dir2);
    strata_callbacks_t old = cb;
    old.struct_size = (uint32_t)offsetof(strata_callbacks_t, event);
    CHECK(ctx && strata_ctx_set_callbacks(ctx, &old) == 0);
    CHECK(ctx && strata_train(ctx) == 0);
    strata_ctx_destroy(ctx);
    CHECKF(g_nev == 0 && g_nrep == 2, "0.2 callbacks: %d events, %d reports",
           g_nev, g_nrep);

    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir, dir2);
    CHECK(system(cmd) == 0);
    return CHECK_DONE();
}
