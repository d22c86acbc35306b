/* Keras-like progress: on a terminal a redrawn bar per epoch, elsewhere one
 * line per epoch (logs and CI stay readable). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "model/loss.h"
#include "run/run.h"
#include "run/stopping.h"

typedef struct progress {
    const strata__run_t *run;
    strata_ctx_t *ctx;       /* whose text callback shows it                */
    int     mode;            /* BAR / LINE / NONE after resolving AUTO      */
    int     epoch, epochs;
    int64_t total;           /* steps in this epoch                         */
    double  t0, last;        /* epoch start, last redraw (seconds)          */
} progress_t;

/* Keras's name of the job's metric ("accuracy", "mae", ...). */
static const char *metric_name(const progress_t *p)
{
    return strata__metric_name(p->run->s->model.metric);
}

/* Only the chief speaks (an elastic job's chief may change between
 * epochs); AUTO is a redrawn bar when stdout is a terminal, else a line
 * per epoch; nothing at all without a text callback. */
static int mode_now(const progress_t *p)
{
    const strata__run_t *run = p->run;
    int mode = run->geo.chief ? run->s->train.progress : STRATA__PROGRESS_NONE;
    if (mode == STRATA__PROGRESS_AUTO)
        mode = isatty(STDOUT_FILENO) ? STRATA__PROGRESS_BAR
                                     : STRATA__PROGRESS_LINE;
    return p->ctx->cb.text ? mode : STRATA__PROGRESS_NONE;
}

static void begin(progress_t *p, const strata__event_t *ev)
{
    p->mode = mode_now(p);
    p->epochs = strata__run_epochs(p->run);
    p->epoch = ev->epoch;
    p->total = ev->steps;
    p->t0 = p->last = strata__now();
    if (p->mode == STRATA__PROGRESS_BAR)
        strata__out(p->ctx, "Epoch %d/%d\n", ev->epoch + 1, p->epochs);
    if (ev->first > 0 && p->mode != STRATA__PROGRESS_NONE)
        strata__out(p->ctx, "(epoch %d resumed at batch %lld of %lld: its "
                    "loss and accuracy cover those %lld steps only)\n",
                    ev->epoch + 1, (long long)ev->first,
                    (long long)(ev->first + ev->steps), (long long)ev->steps);
}

static void draw_bar(char *out, int width, int64_t done, int64_t total)
{
    int fill = total > 0 ? (int)((double)done / (double)total * width) : width;
    for (int i = 0; i < width; i++)
        out[i] = i < fill ? '=' : '.';
    if (fill > 0 && fill < width)
        out[fill - 1] = '>';
    out[width] = '\0';
}

/* Columns of the terminal the bar is drawn on (stdout; $COLUMNS; 80). */
static int columns(void)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    const char *c = getenv("COLUMNS");
    int n = c ? atoi(c) : 0;
    return n > 0 ? n : 80;
}

/* Redraws at most every 100 ms (BAR mode only). */
static void step(progress_t *p, int64_t done, double loss, double acc)
{
    if (p->mode != STRATA__PROGRESS_BAR)
        return;
    double now = strata__now();
    if (now - p->last < 0.1)
        return;
    p->last = now;
    double eta = done > 0 ? (now - p->t0) / (double)done * (double)(p->total - done)
                          : 0.0;
    /* A redrawn line must never wrap: a wrapped one scrolls at every
     * redraw. The bar takes what the counters and figures leave of the
     * width (at most 30 like Keras', at least 5); on a very narrow
     * terminal the accuracy goes first. */
    char head[48], tail[128], b[31];
    snprintf(head, sizeof head, "%lld/%lld [", (long long)done,
             (long long)p->total);
    snprintf(tail, sizeof tail, "] - ETA: %.0fs - loss: %.4f - %s: %.4f", eta,
             loss, metric_name(p), acc);
    int room = columns() - 1 - (int)strlen(head) - (int)strlen(tail);
    if (room < 5) {
        snprintf(tail, sizeof tail, "] - ETA: %.0fs - loss: %.4f", eta, loss);
        room = columns() - 1 - (int)strlen(head) - (int)strlen(tail);
    }
    int width = room > 30 ? 30 : room < 5 ? 5 : room;
    draw_bar(b, width, done, p->total);
    strata__out(p->ctx, "\r%s%s%s", head, b, tail);
}

/* The epoch's closing line (`secs` of training); val_* when has_val;
 * comm: the share of the replicas' step time in waits and reduce, shown
 * when >= 0. */
static void end(progress_t *p, int64_t done, double secs, double loss,
                double acc, int has_val, double val_loss, double val_acc,
                double comm)
{
    if (p->mode == STRATA__PROGRESS_NONE)
        return;
    char val[192] = "";
    int n = 0;
    const char *mn = metric_name(p);
    if (has_val)
        n = snprintf(val, sizeof val, " - val_loss: %.4f - val_%s: %.4f",
                     val_loss, mn, val_acc);
    /* Last, so that the figures Keras shows keep their places. */
    if (comm >= 0.0 && n >= 0 && (size_t)n < sizeof val)
        snprintf(val + n, sizeof val - (size_t)n, " - comm: %.0f%%",
                 comm * 100.0);
    double per_step_ms = done > 0 ? secs / (double)done * 1e3 : 0.0;
    if (p->mode == STRATA__PROGRESS_BAR) {
        char b[31];
        draw_bar(b, 30, done, done);
        strata__out(p->ctx, "\r%lld/%lld [%s] - %.0fs %.2fms/step - loss: "
                    "%.4f - %s: %.4f%s\n", (long long)done,
                    (long long)p->total, b, secs, per_step_ms, loss, mn, acc,
                    val);
    } else {
        strata__out(p->ctx, "Epoch %d/%d - %lld steps - %.1fs %.2fms/step - "
                    "loss: %.4f - %s: %.4f%s\n", p->epoch + 1,
                    p->epochs, (long long)done, secs, per_step_ms, loss, mn,
                    acc, val);
    }
}

static int on_event(void *self, const strata__event_t *ev)
{
    progress_t *p = self;
    if (ev->kind == STRATA__EV_EPOCH_BEGIN) {
        begin(p, ev);
    } else if (ev->kind == STRATA__EV_PROGRESS) {
        step(p, ev->steps, ev->loss, ev->acc);
    } else if (ev->kind == STRATA__EV_EPOCH_END) {
        const strata__epoch_stats_t *st = ev->stats;
        end(p, st->steps, st->seconds, st->train_loss, st->train_acc,
            st->has_test, st->test_loss, st->test_acc, st->comm);
    }
    return STRATA_OK;
}

int strata__progress_observer(strata__run_t *run, strata__bus_t *bus)
{
    progress_t *p = calloc(1, sizeof *p);
    if (!p)
        return STRATA_ENOMEM;
    p->run = run;
    p->ctx = run->ctx;
    p->mode = STRATA__PROGRESS_NONE;
    const strata__observer_t o = { "progress", p, on_event, free };
    return strata__bus_add(bus, &o);
}
