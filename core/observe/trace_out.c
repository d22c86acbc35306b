/* [train] trace: the step timeline of the first trace_steps steps of every
 * worker (forward, backward, the wait for the other replicas, reduce,
 * update; evaluation and checkpoints on the main thread's track), as
 * Chrome trace events; at the end of a run whose workers ran in step the
 * chief gathers every worker's events into one file. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/resume.h" /* strata__run_world_sum */
#include "run/run.h"

#define WHO "train"

typedef struct trace_out {
    strata__run_t  *run;          /* the world sum that gathers the trace */
    strata__trace_t tr;
    int64_t         first, end;   /* steps traced: [first, end)           */
    int             past;         /* a step past the window was seen      */
    int64_t         last_step;    /* the last step recorded, -1 none      */
} trace_out_t;

/* Is the directory that will hold `path` there and writable? Said at the
 * start, not after the run. */
static int check_dir_of(const char *path, const char *key)
{
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s", path);
    const char *dir = dirname(copy);
    if (access(dir, W_OK | X_OK) != 0) {
        strata__log(STRATA_LOG_ERROR, WHO, "[train] %s = %s: cannot write "
                    "in the directory %s: %s", key, path, dir,
                    strerror(errno));
        return STRATA_ECONFIG;
    }
    return STRATA_OK;
}

/* Is step `step` in the trace's window (the first trace_steps steps this
 * process runs)? */
static int traced(trace_out_t *t, int64_t step)
{
    if (t->first < 0) {
        t->first = step;
        t->end = step + t->run->s->train.trace_steps;
    }
    if (step >= t->end)
        t->past = 1;
    return step >= t->first && step < t->end;
}

/* The main thread's events (eval, checkpoint) go with the traced steps:
 * until a step past the window, and never more than a bound. */
static int main_traced(const trace_out_t *t)
{
    size_t bound = (size_t)t->run->s->train.trace_steps *
                   (size_t)(5 * t->run->nreplicas + 4) + 1024;
    return !t->past && t->tr.n < bound;
}

/* Slot i of every replica: one step. */
static void one_step(trace_out_t *t, const strata__event_t *ev, int i)
{
    const strata__step_rec_t *recs[STRATA_MAX_REPLICAS] = { 0 };
    const int R = ev->nreps;
    for (int r = 0; r < R; r++)
        recs[r] = &ev->rec[r][i];
    t->last_step = recs[0]->step;
    if (!traced(t, recs[0]->step))
        return;
    uint64_t bytes = t->run->model.count * sizeof(float);
    for (int r = 0; r < R; r++) {
        const strata__step_rec_t *x = recs[r];
        double fwd, wait;
        strata__step_split(recs, R, r, &fwd, &wait);
        strata__trace_add(&t->tr, STRATA__TR_FORWARD, r, x->step, x->t0, fwd,
                          0);
        strata__trace_add(&t->tr, STRATA__TR_BACKWARD, r, x->step, fwd, x->bwd,
                          0);
        if (wait > 0.0)
            strata__trace_add(&t->tr, STRATA__TR_WAIT, r, x->step, x->bwd,
                              x->bwd + wait, 0);
        strata__trace_add(&t->tr, STRATA__TR_REDUCE, r, x->step, x->bwd + wait,
                          x->red, bytes);
        strata__trace_add(&t->tr, STRATA__TR_UPDATE, r, x->step, x->red, x->upd,
                          0);
    }
}

static void evaluated(trace_out_t *t, const strata__event_t *ev)
{
    if (!main_traced(t))
        return;
    int64_t step = t->last_step + 1;
    strata__trace_add(&t->tr, STRATA__TR_EVAL, ev->nreps, step, ev->t0,
                      ev->t1, 0);
    for (int r = 0; r < ev->nreps; r++)
        strata__trace_add(&t->tr, STRATA__TR_EVAL, r, step, ev->rep_t0[r],
                          ev->rep_t1[r], 0);
}

/* ---- the trace file at the end of the run -------------------------------- */

/* FILE with ".TASK" before its extension: trace.json -> trace.worker-1.json */
static void task_path(char *out, size_t cap, const char *path,
                      const char *task)
{
    char t[48];
    snprintf(t, sizeof t, "%s", task);
    for (char *c = t; *c; c++)
        if (*c == ':' || *c == '/')
            *c = '-';
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    if (dot && dot > base)
        snprintf(out, cap, "%.*s.%s%s", (int)(dot - path), path, t, dot);
    else
        snprintf(out, cap, "%s.%s", path, t);
}

/* Every worker's fragment to every worker, through the strategy's world
 * sum: a float holds three bytes exactly (integers below 2^24), each
 * worker fills its own span of zeros, and x + 0 is x in any order.
 * 1: all[0..nworkers) filled; 0: the sum does not reach every worker
 * (a strategy without STRATA_CTL_WORLD_SUM); or an error. */
#define CHUNK (1 << 20)
static size_t frag_len(const float *hdr, int q)
{
    return ((size_t)hdr[3 * q + 1] << 24) + (size_t)hdr[3 * q + 2];
}

static int gather(strata__run_t *run, const strata__bytes_t *mine,
                  strata__bytes_t *all)
{
    const int W = run->geo.nworkers, me = run->geo.rank;
    float *hdr = calloc((size_t)W * 3, sizeof *hdr);
    size_t *off = calloc((size_t)W + 1, sizeof *off);
    float *buf = NULL;
    int rc = hdr && off ? STRATA_OK : STRATA_ENOMEM;
    if (rc == STRATA_OK) {
        hdr[3 * me] = 1.0f;
        hdr[3 * me + 1] = (float)(mine->len >> 24);
        hdr[3 * me + 2] = (float)(mine->len & 0xFFFFFF);
        rc = strata__run_world_sum(run, hdr, W * 3);
    }
    int everyone = 1;
    for (int q = 0; rc == STRATA_OK && q < W; q++) {
        everyone &= hdr[3 * q] == 1.0f;
        off[q + 1] = off[q] + (frag_len(hdr, q) + 2) / 3;
    }
    if (rc == STRATA_OK && !everyone) { /* no gathering */
        free(off);
        free(hdr);
        return 0;
    }
    if (rc == STRATA_OK && !(buf = calloc(off[W] + 1, sizeof *buf)))
        rc = STRATA_ENOMEM;
    for (size_t i = 0; rc == STRATA_OK && i < mine->len; i += 3) {
        uint32_t v = 0;
        for (size_t k = 0; k < 3; k++)
            v |= (uint32_t)(i + k < mine->len ? mine->p[i + k] : 0) << (8 * k);
        buf[off[me] + i / 3] = (float)v;
    }
    for (size_t at = 0; rc == STRATA_OK && at < off[W]; at += CHUNK) {
        size_t n = off[W] - at < CHUNK ? off[W] - at : CHUNK;
        rc = strata__run_world_sum(run, buf + at, (int)n);
    }
    for (int q = 0; rc == STRATA_OK && q < W; q++) {
        size_t len = frag_len(hdr, q);
        if (!run->geo.chief)
            continue; /* only the chief writes */
        for (size_t i = 0; i < len; i += 3) {
            uint32_t v = (uint32_t)buf[off[q] + i / 3];
            unsigned char b[3] = { (unsigned char)v, (unsigned char)(v >> 8),
                                   (unsigned char)(v >> 16) };
            strata__bytes_put(&all[q], b, len - i < 3 ? len - i : 3);
        }
    }
    free(buf);
    free(off);
    free(hdr);
    return rc == STRATA_OK ? 1 : rc;
}

static int write_trace(trace_out_t *t, int rc)
{
    strata__run_t *run = t->run;
    const strata_cluster_t *c = &run->cluster.pub;
    const int R = run->nreplicas;
    char task[48] = "chief:0", process[96], dev[32];
    if (run->cluster_ok)
        strata__task_name(&c->tasks[c->self], task, sizeof task);
    snprintf(process, sizeof process, "%s (rank %d)", task, run->geo.rank);
    char (*names)[64] = calloc((size_t)R + 1, sizeof *names);
    const char **np = calloc((size_t)R + 1, sizeof *np);
    strata__bytes_t mine = { 0 }, doc = { 0 };
    strata__bytes_t *all = calloc((size_t)run->geo.nworkers, sizeof *all);
    if (!names || !np || !all) {
        free(names);
        free(np);
        free(all);
        return STRATA_ENOMEM;
    }
    for (int r = 0; r <= R; r++) {
        if (r < R)
            snprintf(names[r], sizeof names[r], "replica %d (%s)", r,
                     strata__device_str(run->devices[r], dev, sizeof dev));
        else
            snprintf(names[r], sizeof names[r], "main (eval, checkpoint)");
        np[r] = names[r];
    }
    strata__trace_fragment(&t->tr, &mine, run->geo.rank, process, np, R + 1);
    /* One file for the job when every worker got here in step (the core's
     * loop, done or stopped on request): the chief gathers. Otherwise
     * (a failed run, a strategy whose workers run on their own) each
     * task writes its own: FILE for the chief, FILE.TASK.json else. */
    int got = 0, grc = STRATA_OK;
    if (run->geo.nworkers > 1 && run->lockstep &&
        (rc == STRATA_OK || rc == STRATA_ESTOPPED)) {
        got = gather(run, &mine, all);
        if (got < 0) {
            grc = got;
            strata__log(STRATA_LOG_ERROR, WHO, "[train] trace: gathering the "
                        "workers' events failed: %s; this task writes its "
                        "own", strata_strerror(grc));
            got = 0;
        }
    }
    char about[160], path[PATH_MAX];
    snprintf(about, sizeof about, "strata %s step timeline: the first %lld "
             "steps of each worker ([train] trace_steps)", strata_version(),
             (long long)run->s->train.trace_steps);
    int wrc = STRATA_OK;
    if (got && run->geo.chief) {
        strata__trace_document(&doc, all, run->geo.nworkers, about);
        snprintf(path, sizeof path, "%s", run->s->train.trace);
    } else if (!got) {
        strata__trace_document(&doc, &mine, 1, about);
        if (run->geo.chief)
            snprintf(path, sizeof path, "%s", run->s->train.trace);
        else
            task_path(path, sizeof path, run->s->train.trace, task);
    }
    if (doc.failed)
        wrc = STRATA_ENOMEM;
    else if (doc.len > 0)
        wrc = strata__write_atomic(path, doc.p, doc.len);
    for (int q = 0; q < run->geo.nworkers; q++)
        strata__bytes_free(&all[q]);
    free(all);
    strata__bytes_free(&doc);
    strata__bytes_free(&mine);
    free(np);
    free(names);
    return grc != STRATA_OK ? grc : wrc;
}

static int on_event(void *self, const strata__event_t *ev)
{
    trace_out_t *t = self;
    switch (ev->kind) {
    case STRATA__EV_STEPS:
        for (int i = 0; i < ev->nrec; i++)
            one_step(t, ev, i);
        return STRATA_OK;
    case STRATA__EV_EVAL:
        evaluated(t, ev);
        return STRATA_OK;
    case STRATA__EV_CHECKPOINT:
        if (main_traced(t))
            strata__trace_add(&t->tr, STRATA__TR_CHECKPOINT,
                              t->run->nreplicas, ev->step, ev->t0, ev->t1, 0);
        return STRATA_OK;
    case STRATA__EV_RUN_END:
        return write_trace(t, ev->rc);
    default:
        return STRATA_OK;
    }
}

static void close_trace(void *self)
{
    trace_out_t *t = self;
    strata__trace_free(&t->tr);
    free(t);
}

/* Every task that trains records its steps; a ps task does not. */
int strata__trace_observer(strata__run_t *run, strata__bus_t *bus)
{
    const strata__train_cfg_t *tc = &run->s->train;
    if (!tc->trace[0] || run->geo.rank < 0)
        return STRATA_OK;
    int rc = check_dir_of(tc->trace, "trace");
    if (rc != STRATA_OK)
        return rc;
    trace_out_t *t = calloc(1, sizeof *t);
    if (!t)
        return STRATA_ENOMEM;
    t->run = run;
    t->first = t->last_step = -1;
    strata__trace_init(&t->tr);
    const strata__observer_t o = { "trace", t, on_event, close_trace };
    return strata__bus_add(bus, &o);
}
