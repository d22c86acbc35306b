/* [debug] dump_lr (schedule.h): every step's learning rate, for tests that
 * compare the schedule across strategies, workers and resumes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

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
