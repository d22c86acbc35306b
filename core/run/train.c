/* The training loop: persistent replica threads, each running forward and
 * backward on its slice of every global batch, then the strategy's reduce
 * and update. The main thread sequences epochs and evaluation. */
#include <assert.h>
#include <cblas.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "kernels_cpu.h"
#include "member/elastic.h"
#include "member/rendezvous.h"
#include "checkpoint/resume.h"
#include "stopping.h"

/* OpenBLAS: one BLAS thread per replica thread, so replicas do not
 * oversubscribe the cores. */
extern void openblas_set_num_threads(int n);

enum { PHASE_TRAIN, PHASE_STEP, PHASE_EVAL, PHASE_EXIT };

/* [model] metric = auc: the metric is read off summed bins. */
static int is_auc(const strata__run_t *run)
{
    return run->model.loss.metric == KOPS_METRIC_AUC;
}

/* sum += part (the AUC's bins) */
static void hist_add(double *sum, const double *part)
{
    for (int i = 0; i < 2 * KOPS_AUC_BINS; i++)
        sum[i] += part[i];
}

/* The bins summed over the job's workers (as float32, as world_sum: the
 * counts are exact up to 2^24 a bin). */
static int world_hist(strata__run_t *run, double *hist)
{
    return strata__run_world_sum_f64(run, hist, 2 * KOPS_AUC_BINS);
}

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

/* Learning rate of global step `step`: the schedule (schedule.c), with
 * the linear scaling rule and the warm-up, after the plateau's
 * reductions. */
static float lr_at(const strata__run_t *run, int64_t step)
{
    return (float)strata__run_lr(run, step);
}

/* Every replica compares its variables with replica 0's (debug.check_sync). */
static int check_sync(strata__run_t *run, int r, int64_t step)
{
    const strata__model_t *m = &run->model;
    for (int i = 0; i < m->nvars; i++) {
        const strata_var_t *v = &m->vars[i];
        int eq = v->value[r] == v->value[0]
                     ? 1 : strata__dev_equal(run->devices[r], v->value[r],
                                             run->devices[0], v->value[0],
                                             v->count * sizeof(float));
        if (eq < 0)
            return eq;
        if (!eq) {
            strata__log(STRATA_LOG_ERROR, "train",
                        "step %lld: replica %d's %s differs from replica 0's "
                        "(debug.check_sync)", (long long)step, r, v->name);
            return STRATA_EINTERNAL;
        }
    }
    return STRATA_OK;
}

/* The backward pass's hand-off to reduce_ready (strata__work_t.on_ready).
 * A strategy that has no use for it here says STRATA_ENOTSUP once: the
 * replica stops calling (and, on a GPU, waiting for its stream per layer). */
struct ready_arg {
    strata__replica_t *rep;
    const strata_op_t *op;
};

static int grads_ready(void *arg, size_t lo)
{
    const struct ready_arg *a = arg;
    strata__run_t *run = a->rep->run;
    int rc = run->strategy->vt->reduce_ready(run->spctx, a->op, lo);
    if (rc == STRATA_ENOTSUP) {
        a->rep->no_ready = 1;
        a->rep->work.on_ready = NULL;
        rc = STRATA_OK;
    }
    return rc;
}

static strata__slice_t slice_of(const strata__replica_t *rep)
{
    return strata__replica_slice(rep->run, rep->r);
}

/* debug.check_sync after the update: every replica passes both barriers,
 * failed or not, so that no replica waits for one that has left the loop. */
static int sync_checked(strata__replica_t *rep, int64_t step, int rc)
{
    strata__run_t *run = rep->run;
    if (rc != STRATA_OK)
        fail(run, rc);
    pthread_barrier_wait(&run->sync_bar);
    if (rc == STRATA_OK && !failed(run))
        rc = check_sync(run, rep->r, step);
    if (rc != STRATA_OK)
        fail(run, rc);
    pthread_barrier_wait(&run->sync_bar);
    return rc;
}

static int step_failed(strata__replica_t *rep, int64_t step, int rc)
{
    strata__run_t *run = rep->run;
    /* An elastic job says once, on the main thread, that it re-forms. */
    if (rc != STRATA_ECANCELED && !strata__elastic_regroupable(run, rc))
        strata__log(STRATA_LOG_ERROR, "train", "replica %d, step %lld: %s "
                    "failed: %s", rep->r, (long long)step,
                    run->strategy->name, strata_strerror(rc));
    fail(run, rc);
    return rc;
}

/* The step is applied here: its figures into the record and the epoch's
 * sums; replica 0 moves the data cursor (where the next step goes on). */
static void step_applied(strata__replica_t *rep, strata__step_rec_t *w,
                         int64_t batch)
{
    strata__run_t *run = rep->run;
    rep->step_loss = w->loss;
    rep->step_metric = w->metric;
    rep->nrec++;
    rep->loss_sum += w->loss;
    rep->metric += w->metric;
    if (is_auc(run)) /* the bins of the step, still in the work's sums */
        hist_add(rep->hist, rep->work.acc.hist);
    rep->samples += w->samples;
    rep->done = w->step + 1;
    if (!isfinite(w->loss) && !rep->nonfinite)
        rep->nonfinite = w->step + 1;
    if (rep->r != 0)
        return;
    strata__cursor_applied(&run->cur, batch, run->geo.gbatch);
    const strata__event_t applied = { .kind = STRATA__EV_APPLIED,
                                      .epoch = run->cur.epoch,
                                      .step = w->step };
    strata__emit(&run->bus, &applied);
}

/* One step of one replica: global batch `batch` of this epoch's order, the
 * job-wide step `step`. Load the slice, forward and backward, the
 * strategy's reduce and update. The step's record (a clock reading at each
 * phase boundary, its figures) is what the observers read after the
 * phase. */
static int train_step(strata__replica_t *rep, int64_t batch, int64_t step)
{
    strata__run_t *run = rep->run;
    const strata__slice_t sl = slice_of(rep);
    const size_t first = strata__batch_sample(run, batch) + sl.row0;
    assert(rep->nrec < STRATA__STEP_SLOTS);
    strata__step_rec_t *w = &rep->rec[rep->nrec];
    *w = (strata__step_rec_t){ .step = step, .t0 = strata__now(),
                               .samples = (int64_t)sl.rows,
                               .lr = lr_at(run, step) };
    rep->work.timed = 1;
    int rc = strata__model_load_batch(&rep->work, &run->train, run->cur.perm,
                                      first, sl.rows);
    /* Before the gradient leaves the replica (the step log's "try"). */
    const strata__event_t tried = {
        .kind = STRATA__EV_SAMPLES, .epoch = run->cur.epoch, .step = step,
        .replica = rep->r, .ids = run->cur.perm + first, .n = sl.rows,
    };
    strata__emit(&run->bus, &tried);
    rep->work.noise_seed =
        strata__model_step_seed((uint64_t)run->s->train.seed, step);
    rep->work.row0 = sl.row0;
    strata_op_t op = {
        .struct_size = sizeof op, .slot = rep->r, .buf = rep->grads,
        .count = run->model.count, .device = rep->device,
        .reduce_op = STRATA_REDUCE_MEAN, .lr = w->lr, .step = step,
        .flags = STRATA_OP_GRADIENT,
        /* embedding tables as rows (ABI 2.9), filled by the backward */
        .sparse = rep->work.grad_rows,
        .nsparse = rep->work.grad_rows ? (size_t)rep->work.ntables : 0,
    };
    /* A strategy that overlaps its reduce with the backward pass hears of
     * each layer's final gradients (ABI 2.4). */
    struct ready_arg ra = { rep, &op };
    /* Not with batchnorm across workers: its sums share the strategy's
     * world group with the overlapped reduce. */
    int overlap = (run->strategy->caps & STRATA_CAP_OVERLAP) &&
                  !rep->no_ready && !rep->work.sum_replicas;
    rep->work.on_ready = overlap ? grads_ready : NULL;
    rep->work.ready_arg = overlap ? &ra : NULL;
    if (rc == STRATA_OK)
        rc = strata__model_step(&run->model, rep->r, &rep->work, (int)sl.rows,
                                rep->grads, sl.scale, &w->loss, &w->metric);
    if (rc == STRATA_OK && is_auc(run)) /* the step's own AUC, as a sum */
        w->metric = kc_auc(rep->work.acc.hist) * (double)sl.rows;
    rep->work.on_ready = NULL;
    rep->work.ready_arg = NULL;
    w->fwd = rep->work.t_forward;
    w->bwd = strata__now();
    if (rc == STRATA_OK)
        rc = run->strategy->vt->reduce(run->spctx, &op);
    w->red = strata__now();
    if (rc == STRATA_OK)
        rc = run->strategy->vt->update(run->spctx, &op);
    w->upd = strata__now();
    if (run->s->debug.check_sync)
        rc = sync_checked(rep, step, rc);
    if (rc != STRATA_OK)
        return step_failed(rep, step, rc);
    step_applied(rep, w, batch);
    return STRATA_OK;
}

/* Batches [lo, hi) of the epoch: one segment between two step
 * boundaries at which the main thread may checkpoint or stop. */
static void train_segment(strata__replica_t *rep)
{
    strata__run_t *run = rep->run;
    const strata__cursor_t *c = &run->cur;
    for (int64_t s = c->lo; s < c->hi && !failed(run); s++)
        if (train_step(rep, s, c->step0 + s) != STRATA_OK)
            break;
}

/* Each replica evaluates a contiguous share of the set scored (run->scored)
 * with its own copy of the variables. */
static void eval_share(strata__replica_t *rep)
{
    strata__run_t *run = rep->run;
    const strata__dataset_t *set = run->scored;
    size_t n = set->n, R = (size_t)run->geo.shards;
    size_t g = (size_t)run->geo.shard0 + (size_t)rep->r;
    size_t lo = n * g / R, hi = n * (g + 1) / R;
    rep->eval_loss = 0.0;
    rep->eval_metric = 0.0;
    memset(rep->eval_hist, 0, sizeof rep->eval_hist);
    rep->eval_t0 = strata__now();
    for (size_t i = lo; i < hi; i += (size_t)rep->work.rows) {
        size_t rows = hi - i < (size_t)rep->work.rows ? hi - i
                                                      : (size_t)rep->work.rows;
        double loss = 0.0;
        int rc = strata__model_load_batch(&rep->work, set, NULL, i, rows);
        if (rc == STRATA_OK)
            rc = strata__model_evaluate(&run->model, rep->r, &rep->work,
                                        (int)rows, &loss, &rep->eval_metric);
        if (rc == STRATA_OK && is_auc(run))
            hist_add(rep->eval_hist, rep->work.acc.hist);
        if (rc != STRATA_OK) {
            fail(run, rc);
            return;
        }
        rep->eval_loss += loss;
    }
    rep->eval_t1 = strata__now();
}

static void *replica_main(void *arg)
{
    strata__replica_t *rep = arg;
    strata__run_t *run = rep->run;
    strata__log_bind(run->ctx);
    openblas_set_num_threads(1);
    strata__fpenv_fast();
    uint64_t gen = 0;
    for (;;) {
        int phase = strata__crew_wait(&run->crew, &gen);
        if (phase == PHASE_EXIT)
            break;
        if (phase == PHASE_TRAIN)
            train_segment(rep);
        else if (phase == PHASE_STEP)
            train_step(rep, run->cur.lo, run->cur.step);
        else
            eval_share(rep);
        strata__crew_done(&run->crew);
    }
    return NULL;
}

static void run_phase(strata__run_t *run, int phase)
{
    strata__stepsum_reset(&run->stepsum);
    strata__crew_run(&run->crew, phase, phase != PHASE_EXIT);
}

/* The steps of the phase just run, to the observers; then the running
 * figures of the epoch (replica 0's: an estimate). A replica that failed
 * stopped early: the steps all of them did. */
static void publish_steps(strata__run_t *run, int64_t done_in_epoch)
{
    strata__step_rec_t *recs[STRATA_MAX_REPLICAS] = { 0 };
    int n = STRATA__STEP_SLOTS;
    for (int r = 0; r < run->nreplicas; r++) {
        recs[r] = run->reps[r].rec;
        n = run->reps[r].nrec < n ? run->reps[r].nrec : n;
    }
    const strata__event_t ev = {
        .kind = STRATA__EV_STEPS, .epoch = run->cur.epoch, .rec = recs,
        .nreps = run->nreplicas, .nrec = n,
    };
    strata__phase_times_add(&run->stats.times, &ev);
    run->stats.steps_run += n;
    strata__emit(&run->bus, &ev);
    for (int r = 0; r < run->nreplicas; r++)
        run->reps[r].nrec = 0;
    if (done_in_epoch <= 0)
        return;
    const strata__replica_t *r0 = &run->reps[0];
    double rows = (double)done_in_epoch * run->geo.per_replica;
    const strata__event_t progress = {
        .kind = STRATA__EV_PROGRESS, .epoch = run->cur.epoch,
        .steps = done_in_epoch, .loss = r0->loss_sum / rows,
        .acc = is_auc(run) ? kc_auc(r0->hist) : r0->metric / rows,
    };
    strata__emit(&run->bus, &progress);
}

/* samples: NULL, or also summed. */
static int world_sum(strata__run_t *run, double *loss, double *metric,
                     int64_t *samples)
{
    double buf[3] = { *loss, *metric, samples ? (double)*samples : 0.0 };
    int rc = strata__run_world_sum_f64(run, buf, samples ? 3 : 2);
    *loss = buf[0];
    *metric = buf[1];
    if (samples)
        *samples = (int64_t)buf[2];
    return rc;
}

/* Loss and accuracy of `set` over the job: every replica scores its share.
 * Collective. */
static int score(strata__run_t *run, const strata__dataset_t *set,
                 double *loss, double *acc)
{
    run->scored = set;
    run_phase(run, PHASE_EVAL);
    double l = 0.0, c = 0.0, hist[2 * KOPS_AUC_BINS] = { 0 };
    for (int r = 0; r < run->nreplicas; r++) {
        l += run->reps[r].eval_loss;
        c += run->reps[r].eval_metric;
        hist_add(hist, run->reps[r].eval_hist);
    }
    int rc = world_sum(run, &l, &c, NULL);
    if (rc == STRATA_OK && is_auc(run))
        rc = world_hist(run, hist);
    *loss = set->n ? l / (double)set->n : 0.0;
    *acc = is_auc(run) ? kc_auc(hist) : set->n ? c / (double)set->n : 0.0;
    return rc;
}

/* The validation set ([data] validation_split or files; else the test
 * set), for val_*, the monitor and the observers. */
static int evaluate(strata__run_t *run, double *loss, double *acc)
{
    double t0 = strata__now();
    int rc = score(run, run->val.n ? &run->val : &run->test, loss, acc);
    double rep_t0[STRATA_MAX_REPLICAS], rep_t1[STRATA_MAX_REPLICAS];
    for (int r = 0; r < run->nreplicas; r++) {
        rep_t0[r] = run->reps[r].eval_t0;
        rep_t1[r] = run->reps[r].eval_t1;
    }
    const strata__event_t ev = {
        .kind = STRATA__EV_EVAL, .epoch = run->cur.epoch,
        .step = run->reps[0].done, .loss = *loss, .acc = *acc, .t0 = t0,
        .t1 = strata__now(), .nreps = run->nreplicas, .rep_t0 = rep_t0,
        .rep_t1 = rep_t1,
    };
    strata__emit(&run->bus, &ev);
    return rc;
}

/* Close an epoch: its figures, with where the replicas' time went, to the
 * observers (progress line, metrics CSV row, TensorBoard, callbacks). */
static int finish_epoch(strata__run_t *run, strata__epoch_stats_t *st)
{
    const strata__phase_times_t *pt = &run->stats.times;
    double all = pt->compute + pt->wait + pt->reduce, R = run->nreplicas;
    st->comm = pt->steps > 0 && all > 0.0 ? (pt->wait + pt->reduce) / all
                                          : -1.0;
    st->compute = pt->compute / R;
    st->wait = pt->wait / R;
    st->reduce = pt->reduce / R;
    st->lr = pt->lr;
    st->wall_s = strata__now() - run->t_start;
    memset(&run->stats.times, 0, sizeof run->stats.times);
    run->stats.last = *st;
    run->stats.nclosed++;
    const strata__event_t ev = { .kind = STRATA__EV_EPOCH_END,
                                 .epoch = st->epoch - 1, .stats = st };
    return strata__emit(&run->bus, &ev);
}

/* Steps between two checks for a stop request: short enough that a
 * preempted job stops promptly, long enough that the check costs nothing. */
#define SEGMENT_STEPS 32
_Static_assert(SEGMENT_STEPS <= STRATA__STEP_SLOTS,
               "a replica records every step of a segment");

/* Did a replica of this process train on a non-finite loss (on_nan =
 * stop)? The first step it did, + 1; 0 none. */
static int64_t nonfinite_step(const strata__run_t *run)
{
    int64_t first = 0;
    if (run->s->train.on_nan != STRATA__ON_NAN_STOP)
        return 0;
    for (int r = 0; r < run->nreplicas; r++)
        if (run->reps[r].nonfinite &&
            (!first || run->reps[r].nonfinite < first))
            first = run->reps[r].nonfinite;
    return first;
}

/* The one line of a run stopped by a non-finite loss (on_nan = stop), by
 * step `step` of epoch `epoch` (0-based); STRATA_EDIVERGED. */
static int diverged(const strata__run_t *run, int epoch, int64_t step)
{
    strata__log(STRATA_LOG_ERROR, "train", "epoch %d, step %lld: the "
                "training loss is not finite: training stopped ([train] "
                "on_nan = stop), no checkpoint of it written; lower "
                "[optimizer] lr (now %g)", epoch + 1, (long long)step,
                run->s->optimizer.lr);
    return STRATA_EDIVERGED;
}

/* Has anybody asked the job to stop, seen a non-finite loss, or (an
 * elastic job) heard that a resize is due? Agreed by every worker: one of
 * them saw it, all act. A diverged run ends here: STRATA_EDIVERGED, after
 * one line (the chief's). */
static int stop_requested(strata__run_t *run, int *stop, int *resize)
{
    float flag[3] = { atomic_load(&run->ctx->stop) ? 1.0f : 0.0f,
                      nonfinite_step(run) ? 1.0f : 0.0f, 0.0f };
    if (run->elastic && strata__elastic_pending(run->elastic))
        flag[2] = 1.0f;
    int rc = strata__run_world_sum(run, flag, run->elastic ? 3 : 2);
    *stop = flag[0] > 0.5f;
    *resize = flag[2] > 0.5f && !*stop;
    if (rc == STRATA_OK && flag[1] > 0.5f)
        return run->geo.chief ? diverged(run, run->cur.epoch,
                                         run->reps[0].done)
                              : STRATA_EDIVERGED;
    return rc;
}

static int checkpointing(const strata__run_t *run)
{
    return run->s->checkpoint.dir && run->s->checkpoint.dir[0];
}

static int stopped(const strata__run_t *run, int64_t step)
{
    if (strata__rdzv_late_failed(run->rdzv_late, 0))
        return STRATA_ESTOPPED; /* rank 0's word: its error says why */
    strata__log(STRATA_LOG_WARN, "train", "stopped on request at step %lld%s",
                (long long)step,
                checkpointing(run) ? "; the checkpoint resumes it"
                                   : " (no [checkpoint] dir: nothing to "
                                     "resume from)");
    return STRATA_ESTOPPED;
}

/* Restore the newest checkpoint once, whoever asks first (drive() of a
 * strategy that then declines to drive, or the core's loop). */
static int resume(strata__run_t *run, strata__resume_t *at)
{
    int rc = STRATA_OK;
    if (!run->resume_done)
        rc = strata__checkpoint_restore(run, &run->resume);
    run->resume_done = 1;
    *at = run->resume;
    return rc;
}

/* The epochs from `at` on. Returns STRATA__RESIZE, with *at where the
 * job stands, when the workers agreed at a step boundary that an elastic
 * job's world must be re-formed. */
/* Epoch e starts (at batch `first`; it will run to batch `steps`): its
 * sample order, and its figures unless it goes on across a regroup. */
static void begin_epoch(strata__run_t *run, int e, int64_t first,
                        int64_t steps, int64_t step)
{
    const strata__train_cfg_t *t = &run->s->train;
    strata__cursor_order(&run->cur, e, (uint64_t)t->seed, run->s->data.shuffle);
    int fresh = run->stats.epoch != e;
    if (fresh) {
        for (int r = 0; r < run->nreplicas; r++) {
            run->reps[r].loss_sum = 0.0;
            run->reps[r].metric = 0.0;
            memset(run->reps[r].hist, 0, sizeof run->reps[r].hist);
            run->reps[r].samples = 0;
        }
        run->stats.epoch = e;
        run->stats.secs = 0.0;
    }
    strata__cursor_begin(&run->cur, first, step, fresh);
    const strata__event_t begin = {
        .kind = STRATA__EV_EPOCH_BEGIN, .epoch = e,
        .steps = steps - run->cur.first, .first = fresh ? first : 0,
    };
    strata__emit(&run->bus, &begin);
}

/* Batches [first, steps) of epoch e, in segments between step boundaries
 * (at most SEGMENT_STEPS, ending on multiples of every_steps), where the
 * workers agree on a stop or a resize and a checkpoint is written when
 * due. *step: the global step reached. */
static int train_batches(strata__run_t *run, int e, int64_t first,
                         int64_t steps, int64_t *step, int *stop, int *resize)
{
    const strata__checkpoint_cfg_t *ck = &run->s->checkpoint;
    int rc = STRATA_OK;
    for (int64_t b = first; b < steps && !failed(run) && !*stop && !*resize;) {
        int64_t end = b + SEGMENT_STEPS < steps ? b + SEGMENT_STEPS : steps;
        if (ck->every_steps > 0) { /* end on the next multiple */
            int64_t g = run->cur.step0 + b, k = ck->every_steps;
            int64_t next = (g / k + 1) * k - run->cur.step0;
            if (next < end)
                end = next;
        }
        strata__cursor_segment(&run->cur, b, end);
        double t0 = strata__now();
        run_phase(run, PHASE_TRAIN);
        run->stats.secs += strata__now() - t0;
        publish_steps(run, end - run->cur.first);
        if (failed(run))
            break;
        b = end;
        *step = run->cur.step0 + b;
        rc = stop_requested(run, stop, resize);
        if (rc == STRATA_OK && b < steps &&
            strata__checkpoint_due(run, e, b, *step, *stop, 0))
            rc = strata__checkpoint_save(run, e, b, *step);
        if (rc != STRATA_OK) {
            fail(run, rc);
            break;
        }
    }
    return atomic_load(&run->rc);
}

/* Close epoch e after batch `steps` (of `full`) at global step `step`: its
 * figures summed over the job, the evaluation and the monitor where the
 * epoch is whole or the run ends, the checkpoints due, the observers. */
static int close_epoch(strata__run_t *run, int e, int64_t steps, int64_t full,
                       int64_t step, int stop)
{
    const strata__train_cfg_t *t = &run->s->train;
    int64_t done = steps - run->cur.first;
    double loss = 0.0, vloss = 0.0, vacc = 0.0, metric = 0.0;
    double hist[2 * KOPS_AUC_BINS] = { 0 };
    int64_t samples = 0;
    for (int r = 0; r < run->nreplicas; r++) {
        loss += run->reps[r].loss_sum;
        metric += run->reps[r].metric;
        samples += run->reps[r].samples;
        hist_add(hist, run->reps[r].hist);
    }
    double n = (double)done * (double)run->geo.batch;
    /* Elastic: the samples the members of now trained (a lost one's
     * figures went with it). */
    int rc = world_sum(run, &loss, &metric, run->elastic ? &samples : NULL);
    if (rc == STRATA_OK && is_auc(run))
        rc = world_hist(run, hist);
    if (run->elastic)
        n = samples > 0 ? (double)samples : 1.0;
    /* A whole epoch, or the run's last step (max_steps): validated,
     * watched by the monitor, and checkpointed when due; the end of the
     * run (its last step, early stopping) always is. */
    int whole = step == run->cur.step0 + full;
    int last = step >= strata__run_last_step(run);
    if (run->elastic && t->elastic_batch == STRATA__BATCH_PER_WORKER)
        last = (whole && e + 1 == t->epochs) || /* steps follow workers */
               (t->max_steps > 0 && step >= t->max_steps);
    int val = t->eval && (whole || last);
    if (rc == STRATA_OK && val)
        rc = evaluate(run, &vloss, &vacc);
    if (rc == STRATA_OK && val)
        rc = strata__run_monitor(run, e + 1, vloss, vacc, whole ? step : -1);
    int best = strata__run_take_best(run);
    int end = last || run->halt;
    /* Where the job goes on: the next epoch, or (max_steps) past the
     * epoch's last batch run. */
    int ce = whole ? e + 1 : e;
    int64_t cb = whole ? 0 : steps;
    if (rc == STRATA_OK && (whole || end) &&
        strata__checkpoint_due(run, ce, cb, step, stop, end))
        rc = strata__checkpoint_save(run, ce, cb, step);
    if (rc == STRATA_OK && best && run->s->checkpoint.keep_best)
        rc = strata__checkpoint_save_best(run, ce, cb, step);
    if (rc == STRATA_OK && best)
        rc = strata__best_keep(run, e + 1);
    if (rc != STRATA_OK) {
        fail(run, rc);
        return rc;
    }
    strata__epoch_stats_t st = {
        .epoch = e + 1, .steps = done, .train_loss = loss / n,
        .train_acc = is_auc(run) ? kc_auc(hist) : metric / n,
        .test_loss = vloss,
        .test_acc = vacc, .seconds = run->stats.secs,
        .samples_per_s = run->stats.secs > 0 ? n / run->stats.secs : 0.0,
        .has_test = val,
    };
    rc = finish_epoch(run, &st);
    if (rc == STRATA_OK)
        strata__cursor_closed(&run->cur, e);
    return rc;
}

static int train_epochs(strata__run_t *run, strata__resume_t *at)
{
    const strata__train_cfg_t *t = &run->s->train;
    int64_t step = at->step;
    int resize_due = 0; /* agreed as an epoch ended: at the next one's start */
    for (int e = at->epoch; e < t->epochs && !failed(run); e++) {
        int64_t first = e == at->epoch ? at->batch : 0;
        strata__cursor_enter(&run->cur, e, first, e == at->epoch ? at->sample : 0);
        /* An elastic job that resumes an epoch whose last batch was
         * trained but which was not closed has nothing left to train in
         * it (full == first): it closes it. */
        int64_t full = strata__epoch_batches(run), steps = full;
        if (t->max_steps > 0 && step + (steps - first) > t->max_steps)
            steps = first + (t->max_steps - step);
        if (steps < first || (steps == first && steps < full))
            break;
        if (resize_due) {
            *at = (strata__resume_t){ .resumed = 1, .epoch = e,
                                      .batch = first, .step = step,
                                      .sample = run->cur.pos0 };
            return STRATA__RESIZE;
        }
        begin_epoch(run, e, first, steps, step);
        int stop = 0, resize = 0;
        int rc = train_batches(run, e, first, steps, &step, &stop, &resize);
        if (rc != STRATA_OK || failed(run))
            break;
        if (stop && step < run->cur.step0 + steps)
            return stopped(run, step); /* mid-epoch: no closing line */
        if (resize && step < run->cur.step0 + steps) {
            int64_t b = step - run->cur.step0;
            *at = (strata__resume_t){
                .resumed = 1, .epoch = e, .batch = b, .step = step,
                .sample = (int64_t)strata__batch_sample(run, b) };
            return STRATA__RESIZE;
        }
        resize_due = resize; /* after the epoch's close */
        rc = close_epoch(run, e, steps, full, step, stop);
        if (rc != STRATA_OK)
            return rc;
        strata__run_plateau_line(run, e + 1);
        if (stop)
            return stopped(run, step);
        if (run->halt) {
            strata__run_halt_line(run, e + 1);
            break;
        }
    }
    return atomic_load(&run->rc);
}

/* A run that validated on a validation set scores the test set once, at
 * its end: the one figure of the test set it reports; so does a run that
 * ends on its best epoch's variables (restore_best_weights), whose last
 * validation was of others. Collective. */
static int final_test(strata__run_t *run)
{
    if (!(run->val.n || run->restored) || !run->test.n)
        return STRATA_OK;
    double loss, acc;
    int rc = score(run, &run->test, &loss, &acc);
    if (rc == STRATA_OK) {
        run->stats.tested = 1;
        run->stats.test_loss = loss;
        run->stats.test_acc = acc;
    }
    return rc;
}

static int train_loop(strata__run_t *run)
{
    strata__resume_t at;
    int rc;
    if (strata__elastic_joining(run)) { /* the job trains already */
        run->resume_done = 1;
        rc = strata__elastic_start(run, &at);
    } else {
        rc = resume(run, &at);
    }
    if (rc == STRATA_OK && checkpointing(run))
        rc = strata__checkpoint_probe(run);
    for (int r = 0; r < run->nreplicas; r++)
        run->reps[r].done = at.step;
    strata__cursor_at(&run->cur, at.epoch, at.batch, at.sample);
    /* An elastic job re-forms its world and goes on where it agreed. */
    while (rc == STRATA_OK) {
        rc = train_epochs(run, &at);
        if (!strata__elastic_regroupable(run, rc))
            break;
        rc = strata__elastic_regroup(run, rc, &at);
    }
    if (rc == STRATA_OK)
        rc = strata__best_restore(run);
    if (rc == STRATA_OK)
        rc = final_test(run);
    if (rc == STRATA_OK && run->elastic)
        strata__elastic_finish(run, run->reps[0].done);
    return rc;
}

/* A worker of a strategy that hands out steps (next_step): run the step it
 * is given, report its results with the next request, until done. */
static int step_loop(strata__run_t *run)
{
    const strata_plugin_v2_t *vt = run->strategy->vt;
    const strata__train_cfg_t *t = &run->s->train;
    strata_step_t st = { .struct_size = sizeof st };
    /* The layer states after each step go with its result (ABI 2.8, a
     * strategy that carries them: the core refused the model otherwise). */
    const strata__model_t *m = &run->model;
    float *states = NULL;
    if (m->state_count && (run->strategy->caps & STRATA_CAP_LAYER_STATES)) {
        states = malloc(m->state_count * sizeof *states);
        if (!states) {
            fail(run, STRATA_ENOMEM);
            return STRATA_ENOMEM;
        }
    }
    while (!failed(run)) {
        int rc = vt->next_step(run->spctx, &st);
        if (rc == STRATA_ESTOPPED) /* the job stopped on request */
            return stopped(run, st.id);
        if (rc == STRATA_OK && st.done)
            break;
        if (rc == STRATA_OK &&
            (st.epoch < 0 || st.epoch >= t->epochs || st.batch < 0 ||
             st.batch >= run->geo.steps_per_epoch)) {
            strata__log(STRATA_LOG_ERROR, "train",
                        "strategy %s handed out batch %lld of epoch %d: out of "
                        "range (%lld batches, %lld epochs)", run->strategy->name,
                        (long long)st.batch, st.epoch,
                        (long long)run->geo.steps_per_epoch, (long long)t->epochs);
            rc = STRATA_EPROTO;
        }
        if (rc != STRATA_OK) {
            fail(run, rc);
            break;
        }
        strata__cursor_order(&run->cur, st.epoch, (uint64_t)t->seed,
                             run->s->data.shuffle);
        strata__cursor_step(&run->cur, st.epoch, st.batch, st.id);
        run_phase(run, PHASE_STEP);
        publish_steps(run, 0);
        st.has_result = 1;
        st.samples = run->geo.batch;
        st.loss_sum = 0.0;
        st.metric_sum = 0.0;
        for (int r = 0; r < run->nreplicas; r++) {
            st.loss_sum += run->reps[r].step_loss;
            st.metric_sum += run->reps[r].step_metric;
        }
        st.correct = llround(st.metric_sum); /* a count for the accuracies */
        st.states = NULL;
        st.nstates = 0;
        if (states) {
            rc = strata__work_state_get(m, &run->reps[0].work, states);
            if (rc != STRATA_OK) {
                fail(run, rc);
                break;
            }
            st.states = states;
            st.nstates = m->state_count;
        }
    }
    free(states);
    return atomic_load(&run->rc);
}

/* ---- host services of a run (evaluate, report, boundaries) ------------- */

/* The host's services act on a run once its replicas are up. */
static int live(const strata__run_t *run)
{
    return run && run->nthreads > 0;
}

static int host_evaluate(strata__run_t *run, double *loss, double *acc)
{
    if (!live(run) || !loss || !acc)
        return live(run) ? STRATA_EINVAL : STRATA_ESTATE;
    return evaluate(run, loss, acc);
}

static int host_report(strata__run_t *run, const strata_report_t *r)
{
    if (!live(run) || !r)
        return live(run) ? STRATA_EINVAL : STRATA_ESTATE;
    /* A strategy that drives the job (ps: its coordinator) reports the
     * losses its workers computed: the core's on_nan decides. */
    if ((r->kind == STRATA_REPORT_STEP || r->kind == STRATA_REPORT_EPOCH_END)
        && !isfinite(r->loss) && run->s->train.on_nan == STRATA__ON_NAN_STOP)
        return diverged(run, r->epoch, (int64_t)r->epoch *
                        run->geo.steps_per_epoch + r->steps);
    switch (r->kind) {
    case STRATA_REPORT_EPOCH_BEGIN: {
        const strata__event_t ev = { .kind = STRATA__EV_EPOCH_BEGIN,
                                     .epoch = r->epoch, .steps = r->steps };
        return strata__emit(&run->bus, &ev);
    }
    case STRATA_REPORT_STEP: {
        const strata__event_t ev = { .kind = STRATA__EV_PROGRESS,
                                     .epoch = r->epoch, .steps = r->steps,
                                     .loss = r->loss, .acc = r->acc };
        return strata__emit(&run->bus, &ev);
    }
    case STRATA_REPORT_EPOCH_END: {
        double n = (double)r->steps * (double)run->geo.batch;
        /* The step after the epoch; the rate of its last, next - 1, is
         * the one its worker took from the step. */
        int64_t next = (int64_t)(r->epoch + 1) * run->geo.steps_per_epoch;
        if (next > strata__run_last_step(run))
            next = strata__run_last_step(run);
        strata__epoch_stats_t st = {
            .epoch = r->epoch + 1, .steps = r->steps, .train_loss = r->loss,
            .train_acc = r->acc, .test_loss = r->val_loss,
            .test_acc = r->val_acc, .seconds = r->seconds,
            .samples_per_s = r->seconds > 0 ? n / r->seconds : 0.0,
            .has_test = r->has_val, .lr = lr_at(run, next - 1),
        };
        /* The monitor decides here; the epoch's boundary() acts on it
         * (the best checkpoint) and training_done() tells the strategy. */
        int rc = r->has_val ? strata__run_monitor(run, r->epoch + 1,
                                                  r->val_loss, r->val_acc,
                                                  next)
                            : STRATA_OK;
        if (rc == STRATA_OK)
            rc = finish_epoch(run, &st);
        if (rc == STRATA_OK && run->halt)
            strata__run_halt_line(run, r->epoch + 1);
        return rc;
    }
    default:
        return STRATA_EINVAL;
    }
}

/* Would host_boundary act at this step? A checkpoint of
 * every_steps (not twice at one step: a resumed run starts on one), or a
 * stop request. */
static int host_boundary_due(strata__run_t *run, int32_t epoch,
                             int64_t batch, int64_t step)
{
    if (!live(run))
        return 0;
    if (atomic_load(&run->ctx->stop))
        return 1;
    return batch > 0 && step != run->last_boundary &&
           strata__checkpoint_due(run, epoch, batch, step, 0, 0);
}

static int host_boundary(strata__run_t *run, int32_t epoch, int64_t batch,
                         int64_t step)
{
    if (!live(run))
        return STRATA_ESTATE;
    int stop = atomic_load(&run->ctx->stop) != 0;
    int end = step >= strata__run_last_step(run) || run->halt;
    int rc = STRATA_OK;
    if (step != run->last_boundary &&
        strata__checkpoint_due(run, epoch, batch, step, stop, end)) {
        rc = strata__checkpoint_save(run, epoch, batch, step);
        if (rc == STRATA_OK)
            run->last_boundary = step;
    }
    int best = strata__run_take_best(run);
    if (rc == STRATA_OK && best && run->s->checkpoint.keep_best &&
        checkpointing(run))
        rc = strata__checkpoint_save_best(run, epoch, batch, step);
    return rc == STRATA_OK && stop ? stopped(run, step) : rc;
}

static int host_training_done(strata__run_t *run)
{
    return live(run) && run->halt;
}

static int host_states_get(strata__run_t *run, float *buf, size_t cap,
                           size_t *n)
{
    if (!live(run))
        return STRATA_ESTATE;
    const strata__model_t *m = &run->model;
    *n = m->state_count;
    if (!buf || !m->state_count)
        return STRATA_OK;
    if (cap < m->state_count)
        return STRATA_EINVAL;
    return strata__work_state_get(m, &run->reps[0].work, buf);
}

static int host_states_set(strata__run_t *run, const float *buf, size_t n)
{
    if (!live(run))
        return STRATA_ESTATE;
    const strata__model_t *m = &run->model;
    if (n != m->state_count || (n && !buf)) {
        strata__log(STRATA_LOG_ERROR, "train", "strategy %s installs %zu "
                    "layer states; the model has %zu", run->strategy->name,
                    n, m->state_count);
        return STRATA_EINVAL;
    }
    for (size_t i = 0; i < n; i++)
        if (!isfinite(buf[i])) {
            strata__log(STRATA_LOG_ERROR, "train", "strategy %s installs "
                        "layer states with a value that is not finite (at "
                        "%zu): not installed", run->strategy->name, i);
            return STRATA_EINVAL;
        }
    /* from_chief 0: this process's replicas only, buf only read. */
    return strata__run_states_set(run, (float *)buf, 0);
}

static int host_batch_rows(strata__run_t *run, int32_t epoch, int64_t batch,
                           strata_sparse_t *out, size_t cap, size_t *n)
{
    if (!live(run))
        return STRATA_ESTATE;
    return strata__run_batch_rows(run, epoch, batch, out, cap, n);
}

static const strata__run_services_t services = {
    .evaluate = host_evaluate,         .report = host_report,
    .boundary_due = host_boundary_due, .boundary = host_boundary,
    .training_done = host_training_done,
    .membership = strata__elastic_membership,
    .states_get = host_states_get,     .states_set = host_states_set,
    .batch_rows = host_batch_rows,
    .init_values = strata__run_init_values,
    .part_write = strata__checkpoint_part_write,
};

/* The strategy drives this task (ps server, coordinator); ENOTSUP: it
 * trains here in the core's loop. A restored checkpoint is installed
 * first (STRATA_CTL_STATE_SET: the coordinator takes it) and the job goes
 * on from its position. */
static int drive(strata__run_t *run)
{
    const strata__train_cfg_t *t = &run->s->train;
    strata__resume_t at;
    int rc = resume(run, &at);
    if (rc != STRATA_OK)
        return rc;
    const strata_drive_t d = {
        .struct_size = sizeof d, .epochs = (int32_t)t->epochs,
        .steps_per_epoch = run->geo.steps_per_epoch, .max_steps = t->max_steps,
        .batch = run->geo.batch, .eval = t->eval,
        .train_samples = (int64_t)run->train.n,
        .first_epoch = at.epoch, .first_batch = at.batch,
    };
    run->last_boundary = at.resumed ? at.step : -1;
    return run->strategy->vt->drive(run->spctx, &d);
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

/* The run on ctx, as the plugin host reaches it; NULL: none. */
static void attach(strata_ctx_t *ctx, strata__run_t *run)
{
    ctx->run = run;
    ctx->run_svc = run ? &services : NULL;
}

static int train(strata_ctx_t *ctx)
{
    strata__run_t *run = calloc(1, sizeof *run);
    if (!run)
        return STRATA_ENOMEM;
    openblas_set_num_threads(1);
    attach(ctx, run);
    run->stats.epoch = -1;
    strata__ctx_strangers_reset(ctx);
    int rc = strata__run_setup(ctx, run);
    if (rc == STRATA_OK && run->evaluator) {
        rc = strata__sidecar_run(run);
        attach(ctx, NULL);
        strata__run_teardown(run);
        strata__ctx_strangers_line(ctx);
        return rc;
    }
    if (rc == STRATA_OK)
        rc = start_threads(run);
    if (rc == STRATA_OK) {
        const uint32_t caps = run->strategy->caps;
        strata__run_banner(run);
        rc = strata__observers_open(run);
        if (rc == STRATA_OK)
            rc = caps & STRATA_CAP_DRIVES ? drive(run) : STRATA_ENOTSUP;
        /* The core's loop: every worker in step, to the end together. */
        run->lockstep = rc == STRATA_ENOTSUP && !(caps & STRATA_CAP_NEXT_STEP);
        if (rc == STRATA_ENOTSUP)
            rc = caps & STRATA_CAP_NEXT_STEP ? step_loop(run) : train_loop(run);
    }
    stop_threads(run);
    /* rank 0 ended the job (a rank claimed twice after the rendezvous):
     * its one error line is out, the stop was its doing */
    if (strata__rdzv_late_failed(run->rdzv_late,
                                 atomic_load(&ctx->stop) != 0))
        rc = STRATA_ECONFIG;
    const strata__event_t end = { .kind = STRATA__EV_RUN_END, .rc = rc };
    int orc = strata__emit(&run->bus, &end);
    if (rc == STRATA_OK)
        rc = orc;
    if (rc == STRATA_OK)
        rc = strata__run_finish(run);
    else if (strata__elastic_job_over(run))
        rc = STRATA_OK; /* it joined a job that had finished: nothing to do */
    attach(ctx, NULL);
    int tasks = run->cluster_ok ? run->cluster.pub.ntasks : 1;
    strata__run_teardown(run);
    /* After the teardown: the transports are closed, their counts final. */
    strata__ctx_strangers_line(ctx);
    /* A task of a job says what it held at most (what a memory limit per
     * task must allow: a ps worker holds a batch's rows of a table, the
     * ps tasks its shards). */
    struct rusage ru;
    if (tasks > 1 && getrusage(RUSAGE_SELF, &ru) == 0)
        strata__log(STRATA_LOG_INFO, "train", "peak resident memory of this "
                    "task: %.1f MiB", ru.ru_maxrss / 1024.0);
    return rc;
}

int strata_train(strata_ctx_t *ctx)
{
    if (!ctx)
        return STRATA_EINVAL;
    strata_ctx_t *prev = strata__log_bind(ctx);
    int rc = strata__ctx_resolve(ctx);
    if (rc == STRATA_OK)
        rc = train(ctx);
    /* A stop request is served by the run it stopped (or that ended
     * first): the context's next strata_train() runs afresh. */
    atomic_store(&ctx->stop, 0);
    strata__log_bind(prev);
    return rc;
}
