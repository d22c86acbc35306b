/* Keras-like progress: on a terminal a redrawn bar per epoch, elsewhere one
 * line per epoch (logs and CI stay readable). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "runtime.h"

void strata__progress_init(strata__progress_t *p, strata_ctx_t *ctx, int mode,
                           int epochs)
{
    if (mode == STRATA__PROGRESS_AUTO)
        mode = isatty(STDOUT_FILENO) ? STRATA__PROGRESS_BAR
                                     : STRATA__PROGRESS_LINE;
    if (!ctx->cb.text)
        mode = STRATA__PROGRESS_NONE;
    p->ctx = ctx;
    p->mode = mode;
    p->epochs = epochs;
}

void strata__progress_begin(strata__progress_t *p, int epoch, int64_t total)
{
    p->epoch = epoch;
    p->total = total;
    p->t0 = p->last = strata__now();
    if (p->mode == STRATA__PROGRESS_BAR) {
        strata__out(p->ctx, "Epoch %d/%d\n", epoch + 1, p->epochs);
    }
}

static void bar(char *out, int width, int64_t done, int64_t total)
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

void strata__progress_step(strata__progress_t *p, int64_t done, double loss,
                           double acc)
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
    char head[48], tail[96], b[31];
    snprintf(head, sizeof head, "%lld/%lld [", (long long)done,
             (long long)p->total);
    snprintf(tail, sizeof tail, "] - ETA: %.0fs - loss: %.4f - accuracy: "
             "%.4f", eta, loss, acc);
    int room = columns() - 1 - (int)strlen(head) - (int)strlen(tail);
    if (room < 5) {
        snprintf(tail, sizeof tail, "] - ETA: %.0fs - loss: %.4f", eta, loss);
        room = columns() - 1 - (int)strlen(head) - (int)strlen(tail);
    }
    int width = room > 30 ? 30 : room < 5 ? 5 : room;
    bar(b, width, done, p->total);
    strata__out(p->ctx, "\r%s%s%s", head, b, tail);
}

void strata__progress_end(strata__progress_t *p, int64_t done, double secs,
                          double loss, double acc, int has_val,
                          double val_loss, double val_acc, double comm)
{
    if (p->mode == STRATA__PROGRESS_NONE)
        return;
    char val[128] = "";
    int n = 0;
    if (has_val)
        n = snprintf(val, sizeof val, " - val_loss: %.4f - val_accuracy: %.4f",
                     val_loss, val_acc);
    /* Last, so that the figures Keras shows keep their places. */
    if (comm >= 0.0 && n >= 0 && (size_t)n < sizeof val)
        snprintf(val + n, sizeof val - (size_t)n, " - comm: %.0f%%",
                 comm * 100.0);
    double per_step_ms = done > 0 ? secs / (double)done * 1e3 : 0.0;
    if (p->mode == STRATA__PROGRESS_BAR) {
        char b[31];
        bar(b, 30, done, done);
        strata__out(p->ctx, "\r%lld/%lld [%s] - %.0fs %.2fms/step - loss: "
                    "%.4f - accuracy: %.4f%s\n", (long long)done,
                    (long long)p->total, b, secs, per_step_ms, loss, acc, val);
    } else {
        strata__out(p->ctx, "Epoch %d/%d - %lld steps - %.1fs %.2fms/step - "
                    "loss: %.4f - accuracy: %.4f%s\n", p->epoch + 1,
                    p->epochs, (long long)done, secs, per_step_ms, loss, acc,
                    val);
    }
}
