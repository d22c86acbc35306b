/* [debug] dump_lr: every step's learning rate as it went into the step
 * (strata_op_t.lr), for tests that compare the schedule across
 * strategies, workers and resumes. Noted from the step records, written
 * once at the end of a run that succeeded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster.h"
#include "run/run.h"

void strata__lr_log_note(strata__lr_log_t *l, int64_t step, float lr)
{
    l->steps++;
    if (!l->keep || l->lost)
        return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 1024;
        struct strata__lr_entry *e = realloc(l->e, cap * sizeof *e);
        if (!e) {
            l->lost = 1;
            return;
        }
        l->e = e;
        l->cap = cap;
    }
    l->e[l->n].step = step;
    l->e[l->n].lr = lr;
    l->n++;
}

static int by_step(const void *a, const void *b)
{
    const struct strata__lr_entry *x = a, *y = b;
    return x->step < y->step ? -1 : x->step > y->step;
}

int strata__lr_log_write(const strata__lr_log_t *l, const char *path,
                         const char *task)
{
    if (l->lost) {
        strata__log(STRATA_LOG_ERROR, "train", "[debug] dump_lr: out of "
                    "memory while noting the learning rates");
        return STRATA_ENOMEM;
    }
    char file[4200];
    int w = snprintf(file, sizeof file, "%s%s%s", path, task ? "." : "",
                     task ? task : "");
    for (char *c = file + strlen(path); *c; c++)
        if (*c == ':')
            *c = '-';
    if (w < 0 || (size_t)w >= sizeof file) {
        strata__log(STRATA_LOG_ERROR, "train", "[debug] dump_lr: path too "
                    "long");
        return STRATA_ECONFIG;
    }
    /* A re-run step (ps) was noted twice, with the same rate. */
    qsort(l->e, l->n, sizeof *l->e, by_step);
    char *buf = malloc(l->n * 48 + 1);
    if (!buf)
        return STRATA_ENOMEM;
    size_t len = 0;
    for (size_t i = 0; i < l->n; i++)
        if (i == 0 || l->e[i].step != l->e[i - 1].step)
            len += (size_t)snprintf(buf + len, 48, "%lld %.9g\n",
                                    (long long)l->e[i].step,
                                    (double)l->e[i].lr);
    int rc = strata__write_atomic(file, buf, len);
    free(buf);
    return rc;
}

void strata__lr_log_free(strata__lr_log_t *l)
{
    free(l->e);
    memset(l, 0, sizeof *l);
}

typedef struct lr_dump {
    const strata__run_t *run;
    strata__lr_log_t     log;
} lr_dump_t;

static int on_event(void *self, const strata__event_t *ev)
{
    lr_dump_t *d = self;
    if (ev->kind == STRATA__EV_STEPS) {
        for (int i = 0; i < ev->nrec; i++)
            strata__lr_log_note(&d->log, ev->rec[0][i].step,
                                ev->rec[0][i].lr);
        return STRATA_OK;
    }
    if (ev->kind != STRATA__EV_RUN_END || ev->rc != STRATA_OK ||
        d->log.steps == 0)
        return STRATA_OK;
    const strata__run_t *run = d->run;
    const strata_cluster_t *c = &run->cluster.pub;
    char task[48];
    return strata__lr_log_write(&d->log, run->s->debug.dump_lr,
                                c->ntasks > 1
                                    ? strata__task_name(&c->tasks[c->self],
                                                        task, sizeof task)
                                    : NULL);
}

static void close_lr_dump(void *self)
{
    lr_dump_t *d = self;
    strata__lr_log_free(&d->log);
    free(d);
}

int strata__lr_dump_observer(strata__run_t *run, strata__bus_t *bus)
{
    if (!run->s->debug.dump_lr[0])
        return STRATA_OK;
    lr_dump_t *d = calloc(1, sizeof *d);
    if (!d)
        return STRATA_ENOMEM;
    d->run = run;
    d->log.keep = 1;
    const strata__observer_t o = { "dump_lr", d, on_event, close_lr_dump };
    return strata__bus_add(bus, &o);
}
