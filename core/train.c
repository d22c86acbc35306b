/* The training loop: persistent replica threads, each running forward and
 * backward on its slice of every global batch, then the strategy's reduce
 * and update. The main thread sequences epochs and evaluation. */
#include <cblas.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

/* OpenBLAS: one BLAS thread per replica thread, so replicas do not
 * oversubscribe the cores. */
extern void openblas_set_num_threads(int n);

enum { PHASE_TRAIN, PHASE_EVAL, PHASE_EXIT };

static void fail(strata__run_t *run, int rc)
{
    int expected = 0;
    if (rc == STRATA_ECANCELED || rc == STRATA_OK)
        return;
    if (atomic_compare_exchange_strong(&run->rc, &expected, rc) &&
        STRATA_HAS(run->strategy->vt, ctl))
        run->strategy->vt->ctl(run->spctx, STRATA_CTL_ABORT, NULL);
}

static int failed(strata__run_t *run) { return atomic_load(&run->rc) != 0; }

/* Learning rate of global step `step`: base (times the replicas under the
 * linear scaling rule), ramped linearly over the warm-up steps. */
static float lr_at(const strata__run_t *run, int64_t step)
{
    double lr = run->lr_target;
    if (step < run->warmup_steps)
        lr *= (double)(step + 1) / (double)run->warmup_steps;
    return (float)lr;
}

/* Every replica compares its variables with replica 0's (debug.check_sync). */
static int check_sync(strata__run_t *run, int r, int64_t step)
{
    const strata__model_t *m = &run->model;
    for (int i = 0; i < m->nvars; i++) {
        const strata_var_t *v = &m->vars[i];
        if (v->value[r] != v->value[0] &&
            memcmp(v->value[r], v->value[0], v->count * sizeof(float)) != 0) {
            strata__log(STRATA_LOG_ERROR, "train",
                        "step %lld: replica %d's %s differs from replica 0's "
                        "(debug.check_sync)", (long long)step, r, v->name);
            return STRATA_EINTERNAL;
        }
    }
    return STRATA_OK;
}

static void train_epoch(strata__replica_t *rep)
{
    strata__run_t *run = rep->run;
    const strata__model_t *m = &run->model;
    const int b = run->per_replica;
    const float scale = 1.0f / (float)b;
    for (int64_t s = 0; s < run->steps_this_epoch && !failed(run); s++) {
        int64_t step = run->global_step0 + s;
        /* This replica's slice of global batch s: replicas are numbered
         * across workers, so every worker reads only its own share and the
         * union is exactly the single-device batch. */
        size_t g = (size_t)run->rank * (size_t)run->nreplicas + (size_t)rep->r;
        size_t first = (size_t)s * (size_t)run->batch + g * (size_t)b;
        strata__batch_fill(&run->train, run->perm, first, (size_t)b,
                           rep->work.x, rep->work.y);
        int64_t correct = 0;
        double loss = strata__model_train_step(m, rep->r, &rep->work, b,
                                               rep->grads, scale, &correct);
        strata_op_t op = {
            .struct_size = sizeof op, .slot = rep->r, .buf = rep->grads,
            .count = m->count, .device = rep->device,
            .reduce_op = STRATA_REDUCE_MEAN, .lr = lr_at(run, step),
            .step = step,
        };
        int rc = run->strategy->vt->reduce(run->spctx, &op);
        if (rc == STRATA_OK)
            rc = run->strategy->vt->update(run->spctx, &op);
        if (run->s->debug.check_sync) {
            /* Every replica passes both barriers, failed or not, so that no
             * replica waits for one that has left the loop. */
            if (rc != STRATA_OK)
                fail(run, rc);
            pthread_barrier_wait(&run->sync_bar);
            if (rc == STRATA_OK && !failed(run))
                rc = check_sync(run, rep->r, step);
            if (rc != STRATA_OK)
                fail(run, rc);
            pthread_barrier_wait(&run->sync_bar);
        }
        if (rc != STRATA_OK) {
            if (rc != STRATA_ECANCELED)
                strata__log(STRATA_LOG_ERROR, "train",
                            "replica %d, step %lld: %s failed: %s", rep->r,
                            (long long)step, run->strategy->name,
                            strata_strerror(rc));
            fail(run, rc);
            break;
        }
        rep->loss_sum += loss;
        rep->correct += correct;
        atomic_store_explicit(&rep->steps_done, s + 1, memory_order_release);
        if (rep->r == 0) { /* replica 0's running figures: an estimate */
            double n = (double)(s + 1) * b;
            strata__progress_step(&run->progress, s + 1, rep->loss_sum / n,
                                  (double)rep->correct / n);
        }
    }
}

/* Each replica evaluates a contiguous share of the test set with its own
 * copy of the variables. */
static void eval_share(strata__replica_t *rep)
{
    strata__run_t *run = rep->run;
    size_t n = run->test.n, R = (size_t)run->nreplicas * (size_t)run->nworkers;
    size_t g = (size_t)run->rank * (size_t)run->nreplicas + (size_t)rep->r;
    size_t lo = n * g / R, hi = n * (g + 1) / R;
    rep->eval_loss = 0.0;
    rep->eval_correct = 0;
    for (size_t i = lo; i < hi; i += (size_t)rep->work.rows) {
        size_t rows = hi - i < (size_t)rep->work.rows ? hi - i
                                                      : (size_t)rep->work.rows;
        strata__batch_fill(&run->test, run->test_order, i, rows, rep->work.x,
                           rep->work.y);
        rep->eval_loss += strata__model_eval(&run->model, rep->r, &rep->work,
                                             (int)rows, &rep->eval_correct);
    }
}

static void *replica_main(void *arg)
{
    strata__replica_t *rep = arg;
    strata__run_t *run = rep->run;
    openblas_set_num_threads(1);
    strata__fpenv_fast();
    uint64_t gen = 0;
    for (;;) {
        int phase = strata__crew_wait(&run->crew, &gen);
        if (phase == PHASE_EXIT)
            break;
        if (phase == PHASE_TRAIN)
            train_epoch(rep);
        else
            eval_share(rep);
        strata__crew_done(&run->crew);
    }
    return NULL;
}

static void run_phase(strata__run_t *run, int phase)
{
    strata__crew_run(&run->crew, phase, phase != PHASE_EXIT);
}

/* Sum (loss, correct) over every process of the job: the strategy knows
 * how (STRATA_CTL_WORLD_SUM); a single-process strategy does not need to. */
static int world_sum(strata__run_t *run, double *loss, int64_t *correct)
{
    const strata_plugin_v1_t *vt = run->strategy->vt;
    if (run->nworkers == 1 || !STRATA_HAS(vt, ctl))
        return STRATA_OK;
    float buf[2] = { (float)*loss, (float)*correct };
    strata_op_t op = { .struct_size = sizeof op, .buf = buf, .count = 2,
                       .device = STRATA_DEVICE(STRATA_DEV_CPU, 0),
                       .reduce_op = STRATA_REDUCE_SUM };
    int rc = vt->ctl(run->spctx, STRATA_CTL_WORLD_SUM, &op);
    if (rc == STRATA_ENOTSUP)
        return STRATA_OK;
    *loss = buf[0];
    *correct = (int64_t)buf[1];
    return rc;
}

static int evaluate(strata__run_t *run, double *loss, double *acc)
{
    run_phase(run, PHASE_EVAL);
    double l = 0.0;
    int64_t c = 0;
    for (int r = 0; r < run->nreplicas; r++) {
        l += run->reps[r].eval_loss;
        c += run->reps[r].eval_correct;
    }
    int rc = world_sum(run, &l, &c);
    *loss = run->test.n ? l / (double)run->test.n : 0.0;
    *acc = run->test.n ? (double)c / (double)run->test.n : 0.0;
    return rc;
}

static int train_loop(strata__run_t *run)
{
    const strata__train_cfg_t *t = &run->s->train;
    /* Only the chief speaks; the other workers report errors only. */
    strata__progress_init(&run->progress,
                          run->chief ? t->progress : STRATA__PROGRESS_NONE,
                          (int)t->epochs);
    int64_t step = 0;
    for (int e = 0; e < t->epochs && !failed(run); e++) {
        int64_t steps = run->steps_per_epoch;
        if (t->max_steps > 0 && step + steps > t->max_steps)
            steps = t->max_steps - step;
        if (steps <= 0)
            break;
        strata__epoch_order(run->perm, run->train.n, (uint64_t)t->seed,
                            (uint64_t)e, run->s->data.shuffle);
        for (int r = 0; r < run->nreplicas; r++) {
            run->reps[r].loss_sum = 0.0;
            run->reps[r].correct = 0;
            atomic_store(&run->reps[r].steps_done, 0);
        }
        run->steps_this_epoch = steps;
        run->global_step0 = step;
        strata__progress_begin(&run->progress, e, steps);
        double t0 = strata__now();
        run_phase(run, PHASE_TRAIN);
        double secs = strata__now() - t0;
        if (failed(run))
            break;
        step += steps;
        double loss = 0.0, vloss = 0.0, vacc = 0.0;
        int64_t correct = 0;
        for (int r = 0; r < run->nreplicas; r++) {
            loss += run->reps[r].loss_sum;
            correct += run->reps[r].correct;
        }
        double n = (double)steps * (double)run->batch;
        int rc = world_sum(run, &loss, &correct);
        if (rc == STRATA_OK && t->eval)
            rc = evaluate(run, &vloss, &vacc);
        if (rc != STRATA_OK) {
            fail(run, rc);
            break;
        }
        strata__progress_end(&run->progress, steps, secs, loss / n,
                             (double)correct / n, t->eval, vloss, vacc);
        strata__epoch_stats_t st = {
            .epoch = e + 1, .steps = steps, .train_loss = loss / n,
            .train_acc = (double)correct / n, .test_loss = vloss,
            .test_acc = vacc, .seconds = secs,
            .samples_per_s = secs > 0 ? n / secs : 0.0, .has_test = t->eval,
        };
        rc = strata__metrics_append(run, &st);
        if (rc != STRATA_OK)
            return rc;
        run->last = st;
    }
    return atomic_load(&run->rc);
}

static int start_threads(strata__run_t *run)
{
    int R = run->nreplicas;
    if (pthread_barrier_init(&run->sync_bar, NULL, (unsigned)R) != 0)
        return STRATA_ENOMEM;
    run->sync_bar_ok = 1;
    for (int r = 0; r < R; r++) {
        if (pthread_create(&run->reps[r].thread, NULL, replica_main,
                           &run->reps[r]) != 0) {
            strata__log(STRATA_LOG_ERROR, "train",
                        "cannot start replica thread %d: %s", r,
                        strerror(errno));
            return STRATA_ENOMEM;
        }
        strata__crew_join(&run->crew);
        run->nthreads++;
    }
    return STRATA_OK;
}

static void stop_threads(strata__run_t *run)
{
    run_phase(run, PHASE_EXIT);
    for (int r = 0; r < run->nthreads; r++)
        pthread_join(run->reps[r].thread, NULL);
    run->nthreads = 0;
}

int strata__train(strata_ctx_t *ctx)
{
    strata__run_t *run = calloc(1, sizeof *run);
    if (!run)
        return STRATA_ENOMEM;
    openblas_set_num_threads(1);
    int rc = strata__run_setup(ctx, run);
    if (rc == STRATA_OK)
        rc = start_threads(run);
    if (rc == STRATA_OK) {
        strata__run_banner(run);
        rc = train_loop(run);
    }
    stop_threads(run);
    if (rc == STRATA_OK)
        rc = strata__run_finish(run);
    strata__run_teardown(run);
    return rc;
}
