/* [train] metrics_csv: one row per closed epoch, the whole file rewritten
 * atomically at each (a reader never sees half a row). The chief's. */
#include <stdio.h>
#include <stdlib.h>

#include "model/loss.h"
#include "run/run.h"

typedef struct metrics {
    const strata__run_t   *run;
    const char            *path;
    strata__epoch_stats_t *rows;
    int                    n;
} metrics_t;

/* The shortest text that reads back as the float32 `v` (Keras' CSVLogger
 * writes numpy's repr: 0.001, not 0.00100000005). */
static void float_text(float v, char *buf, size_t len)
{
    for (int p = 6; p <= 9; p++) {
        snprintf(buf, len, "%.*g", p, (double)v);
        if (strtof(buf, NULL) == v)
            return;
    }
}

static int write_csv(const metrics_t *m)
{
    size_t cap = 160 + (size_t)m->n * 200, len = 0;
    char *buf = malloc(cap);
    if (!buf)
        return STRATA_ENOMEM;
    /* Keras's names (CSVLogger's logs): the val_ columns are the
     * validation set's, or the test set's in a job without one. */
    const char *mn = strata__metric_name(m->run->s->model.metric);
    len += (size_t)snprintf(buf, cap, "epoch,steps,loss,%s,val_loss,val_%s,"
                            "seconds,samples_per_s,wall_s,learning_rate\n",
                            mn, mn);
    for (int i = 0; i < m->n; i++) {
        const strata__epoch_stats_t *e = &m->rows[i];
        char tl[32] = "", ta[32] = "", lr[32];
        float_text(e->lr, lr, sizeof lr);
        if (e->has_test) {
            snprintf(tl, sizeof tl, "%.6f", e->test_loss);
            snprintf(ta, sizeof ta, "%.6f", e->test_acc);
        }
        len += (size_t)snprintf(buf + len, cap - len,
                                "%d,%lld,%.6f,%.6f,%s,%s,%.4f,%.1f,%.3f,"
                                "%s\n", e->epoch, (long long)e->steps,
                                e->train_loss, e->train_acc, tl, ta,
                                e->seconds, e->samples_per_s, e->wall_s, lr);
    }
    int rc = strata__write_atomic(m->path, buf, len);
    free(buf);
    return rc;
}

static int on_event(void *self, const strata__event_t *ev)
{
    metrics_t *m = self;
    if (ev->kind != STRATA__EV_EPOCH_END)
        return STRATA_OK;
    strata__epoch_stats_t *rows = realloc(m->rows,
                                          (size_t)(m->n + 1) * sizeof *rows);
    if (!rows)
        return STRATA_ENOMEM;
    m->rows = rows;
    rows[m->n++] = *ev->stats;
    return m->run->geo.chief ? write_csv(m) : STRATA_OK;
}

static void close_metrics(void *self)
{
    metrics_t *m = self;
    free(m->rows);
    free(m);
}

int strata__metrics_observer(strata__run_t *run, strata__bus_t *bus)
{
    const char *path = run->s->train.metrics_csv;
    if (!path || !path[0])
        return STRATA_OK;
    metrics_t *m = calloc(1, sizeof *m);
    if (!m)
        return STRATA_ENOMEM;
    m->run = run;
    m->path = path;
    const strata__observer_t o = { "metrics_csv", m, on_event, close_metrics };
    return strata__bus_add(bus, &o);
}
