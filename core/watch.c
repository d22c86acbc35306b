/* Watching a run: the replicas' step records (train.c takes a clock
 * reading at each phase boundary, and nothing when the run is not timed)
 * become the epoch's compute / wait / reduce times, the progress line's
 * comm share, TensorBoard scalars and trace events.
 *
 * A replica reaches the reduce when its backward ends; the reduce cannot
 * end before the last replica of the process reaches it. So the span from
 * its arrival to the last arrival is the replica's wait for the others
 * (the step barrier), and the rest of the reduce call is the reduce itself.
 * Waits for other workers (mwms) happen inside the cross-worker reduce,
 * whose clocks are not this machine's: they count as reduce. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "resume.h" /* strata__run_world_sum */
#include "run.h"

#define WHO "train"

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

int strata__watch_start(strata__run_t *run)
{
    strata__watch_t *w = &run->watch;
    const strata__train_cfg_t *t = &run->s->train;
    w->last_step = -1;
    w->trace_first = -1;
    w->tb_on = run->chief && t->tensorboard[0];
    /* Every task that trains records its steps; a ps task does not. */
    w->trace_on = t->trace[0] && run->rank >= 0;
    w->on = w->tb_on || w->trace_on ||
            run->progress.mode != STRATA__PROGRESS_NONE;
    int rc = STRATA_OK;
    if (w->trace_on) {
        rc = check_dir_of(t->trace, "trace");
        strata__trace_init(&w->tr);
    }
    for (int r = 0; rc == STRATA_OK && w->on && r < run->nreplicas; r++) {
        run->reps[r].rec = calloc(STRATA__WATCH_SLOTS,
                                  sizeof(strata__step_rec_t));
        if (!run->reps[r].rec)
            rc = STRATA_ENOMEM;
    }
    if (rc == STRATA_OK && w->tb_on)
        rc = strata__tboard_open(&w->tb, t->tensorboard,
                                 1u << STRATA__TB_TRAIN |
                                     (t->eval ? 1u << STRATA__TB_VALIDATION
                                              : 0u));
    if (rc != STRATA_OK) /* no run: nothing to write at its end */
        w->tb_on = w->trace_on = 0;
    return rc;
}

/* Is step `step` in the trace's window (the first trace_steps steps this
 * process runs)? */
static int traced(strata__run_t *run, int64_t step)
{
    strata__watch_t *w = &run->watch;
    if (!w->trace_on)
        return 0;
    if (w->trace_first < 0) {
        w->trace_first = step;
        w->trace_end = step + run->s->train.trace_steps;
    }
    if (step >= w->trace_end)
        w->trace_past = 1;
    return step >= w->trace_first && step < w->trace_end;
}

/* The main thread's events (eval, checkpoint) go with the traced steps:
 * until a step past the window, and never more than a bound. */
static int main_traced(const strata__run_t *run)
{
    const strata__watch_t *w = &run->watch;
    size_t bound = (size_t)run->s->train.trace_steps *
                   (size_t)(5 * run->nreplicas + 4) + 1024;
    return w->trace_on && !w->trace_past && w->tr.n < bound;
}

static void step_points(strata__run_t *run, int64_t step, double loss,
                        int64_t correct, float lr)
{
    strata__watch_t *w = &run->watch;
    int64_t every = run->s->train.log_every_steps;
    if (!w->tb_on || every <= 0 || (step + 1) % every != 0)
        return;
    /* Steps are numbered as TensorFlow's global_step: the steps done. */
    static const char *const tags[] = {
        "batch_loss", "batch_accuracy", "batch_learning_rate",
        "batch_step_time_ms",
    };
    double samples = (double)run->nreplicas * run->per_replica;
    const float v[] = {
        (float)(loss / samples), (float)((double)correct / samples), lr,
        (float)(w->span_n ? w->span_sum / (double)w->span_n * 1e3 : 0.0),
    };
    strata__tboard_scalars(&w->tb, STRATA__TB_TRAIN, step + 1, tags, v, 4);
    w->span_sum = 0.0;
    w->span_n = 0;
}

/* Slot i of every replica: one step. */
static void one_step(strata__run_t *run, int i)
{
    strata__watch_t *w = &run->watch;
    const int R = run->nreplicas;
    const strata__step_rec_t *r0 = &run->reps[0].rec[i];
    double arrive = r0->bwd, start = r0->t0, end = r0->upd, loss = 0.0;
    int64_t correct = 0;
    for (int r = 1; r < R; r++) {
        const strata__step_rec_t *x = &run->reps[r].rec[i];
        arrive = x->bwd > arrive ? x->bwd : arrive;
        start = x->t0 < start ? x->t0 : start;
        end = x->upd > end ? x->upd : end;
    }
    int tr = traced(run, r0->step);
    uint64_t bytes = run->model.count * sizeof(float);
    for (int r = 0; r < R; r++) {
        const strata__step_rec_t *x = &run->reps[r].rec[i];
        double fwd = x->fwd > x->t0 && x->fwd < x->bwd ? x->fwd : x->t0;
        double wait = arrive - x->bwd;
        if (wait > x->red - x->bwd)
            wait = x->red - x->bwd;
        if (wait < 0.0)
            wait = 0.0;
        w->compute += (x->bwd - x->t0) + (x->upd - x->red);
        w->wait += wait;
        w->reduce += x->red - x->bwd - wait;
        loss += x->loss;
        correct += x->correct;
        if (!tr)
            continue;
        strata__trace_add(&w->tr, STRATA__TR_FORWARD, r, x->step, x->t0, fwd,
                          0);
        strata__trace_add(&w->tr, STRATA__TR_BACKWARD, r, x->step, fwd, x->bwd,
                          0);
        if (wait > 0.0)
            strata__trace_add(&w->tr, STRATA__TR_WAIT, r, x->step, x->bwd,
                              x->bwd + wait, 0);
        strata__trace_add(&w->tr, STRATA__TR_REDUCE, r, x->step, x->bwd + wait,
                          x->red, bytes);
        strata__trace_add(&w->tr, STRATA__TR_UPDATE, r, x->step, x->red, x->upd,
                          0);
    }
    w->timed++;
    w->lr = r0->lr;
    w->last_step = r0->step;
    w->span_sum += end - start;
    w->span_n++;
    step_points(run, r0->step, loss, correct, r0->lr);
}

void strata__watch_steps(strata__run_t *run)
{
    if (!run->watch.on)
        return;
    /* A replica that failed stopped early: the steps all of them did. */
    int n = STRATA__WATCH_SLOTS;
    for (int r = 0; r < run->nreplicas; r++)
        n = run->reps[r].nrec < n ? run->reps[r].nrec : n;
    for (int i = 0; i < n; i++)
        one_step(run, i);
    for (int r = 0; r < run->nreplicas; r++)
        run->reps[r].nrec = 0;
}

void strata__watch_eval(strata__run_t *run, double t0)
{
    strata__watch_t *w = &run->watch;
    if (!main_traced(run))
        return;
    int64_t step = w->last_step + 1;
    strata__trace_add(&w->tr, STRATA__TR_EVAL, run->nreplicas, step, t0,
                      strata__now(), 0);
    for (int r = 0; r < run->nreplicas; r++)
        strata__trace_add(&w->tr, STRATA__TR_EVAL, r, step,
                          run->reps[r].eval_t0, run->reps[r].eval_t1, 0);
}

void strata__watch_checkpoint(strata__run_t *run, double t0, int64_t step)
{
    if (main_traced(run))
        strata__trace_add(&run->watch.tr, STRATA__TR_CHECKPOINT,
                          run->nreplicas, step, t0, strata__now(), 0);
}

int strata__watch_epoch(strata__run_t *run, const strata__epoch_stats_t *st,
                        double *comm)
{
    strata__watch_t *w = &run->watch;
    double all = w->compute + w->wait + w->reduce;
    int timed = w->timed > 0 && all > 0.0;
    *comm = timed ? (w->wait + w->reduce) / all : -1.0;
    int rc = STRATA_OK;
    if (w->tb_on) {
        /* Keras' TensorBoard callback: epoch_* tags at the epoch's index,
         * the training run's and the validation run's. The phase times are
         * seconds per replica (a replica's epoch is compute + wait +
         * reduce). */
        const char *tags[9] = {
            "epoch_loss", "epoch_accuracy", "epoch_samples_per_second",
            "epoch_learning_rate", "epoch_compute_seconds",
            "epoch_wait_seconds", "epoch_reduce_seconds", "epoch_comm_share",
        };
        const double R = run->nreplicas;
        float v[9] = {
            (float)st->train_loss, (float)st->train_acc,
            (float)st->samples_per_s, w->lr, (float)(w->compute / R),
            (float)(w->wait / R), (float)(w->reduce / R), (float)*comm,
        };
        int64_t e = st->epoch - 1;
        strata__tboard_scalars(&w->tb, STRATA__TB_TRAIN, e, tags, v,
                               timed ? 8 : 3);
        if (st->has_test) {
            v[0] = (float)st->test_loss;
            v[1] = (float)st->test_acc;
            strata__tboard_scalars(&w->tb, STRATA__TB_VALIDATION, e, tags, v,
                                   2);
        }
        rc = strata__tboard_flush(&w->tb);
    }
    w->compute = w->wait = w->reduce = 0.0;
    w->timed = 0;
    return rc;
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
    const int W = run->nworkers, me = run->rank;
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
        if (!run->chief)
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

static int write_trace(strata__run_t *run, int rc)
{
    strata__watch_t *w = &run->watch;
    const strata_cluster_t *c = &run->cluster.pub;
    const int R = run->nreplicas;
    char task[48] = "chief:0", process[96], dev[32];
    if (run->cluster_ok)
        strata__task_name(&c->tasks[c->self], task, sizeof task);
    snprintf(process, sizeof process, "%s (rank %d)", task, run->rank);
    char (*names)[64] = calloc((size_t)R + 1, sizeof *names);
    const char **np = calloc((size_t)R + 1, sizeof *np);
    strata__bytes_t mine = { 0 }, doc = { 0 };
    strata__bytes_t *all = calloc((size_t)run->nworkers, sizeof *all);
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
    strata__trace_fragment(&w->tr, &mine, run->rank, process, np, R + 1);
    /* One file for the job when every worker got here in step (the core's
     * loop, done or stopped on request): the chief gathers. Otherwise
     * (a failed run, a strategy whose workers run on their own) each
     * task writes its own: FILE for the chief, FILE.TASK.json else. */
    int got = 0, grc = STRATA_OK;
    if (run->nworkers > 1 && w->lockstep &&
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
    if (got && run->chief) {
        strata__trace_document(&doc, all, run->nworkers, about);
        snprintf(path, sizeof path, "%s", run->s->train.trace);
    } else if (!got) {
        strata__trace_document(&doc, &mine, 1, about);
        if (run->chief)
            snprintf(path, sizeof path, "%s", run->s->train.trace);
        else
            task_path(path, sizeof path, run->s->train.trace, task);
    }
    if (doc.failed)
        wrc = STRATA_ENOMEM;
    else if (doc.len > 0)
        wrc = strata__write_atomic(path, doc.p, doc.len);
    for (int q = 0; q < run->nworkers; q++)
        strata__bytes_free(&all[q]);
    free(all);
    strata__bytes_free(&doc);
    strata__bytes_free(&mine);
    free(np);
    free(names);
    return grc != STRATA_OK ? grc : wrc;
}

int strata__watch_finish(strata__run_t *run, int rc)
{
    strata__watch_t *w = &run->watch;
    int wrc = w->trace_on ? write_trace(run, rc) : STRATA_OK;
    if (w->tb_on) {
        int c = strata__tboard_close(&w->tb);
        wrc = wrc == STRATA_OK ? c : wrc;
    }
    for (int r = 0; run->reps && r < run->nreplicas; r++) {
        free(run->reps[r].rec);
        run->reps[r].rec = NULL;
    }
    strata__trace_free(&w->tr);
    w->on = w->trace_on = w->tb_on = 0;
    return rc != STRATA_OK ? rc : wrc;
}
