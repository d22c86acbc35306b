/* strata core -- the state of one training run, shared by train.c (the
 * loop) and run.c (setup, output, teardown). Internal. */
#ifndef STRATA_CORE_RUN_H
#define STRATA_CORE_RUN_H

#include "cluster.h"
#include "crew.h"
#include "geometry.h"
#include "monitor.h"
#include "runtime.h"
#include "schedule.h"
#include "observe/observe.h"

typedef struct strata__run strata__run_t;

typedef struct strata__replica {
    strata__run_t   *run;
    int              r;
    int32_t          device;
    pthread_t        thread;
    strata__work_t   work;
    float           *grads;          /* flat, model.count elements         */
    int              no_ready;       /* the strategy declined reduce_ready */
    double           loss_sum;       /* this epoch                         */
    int64_t          correct;
    double           step_loss;      /* the last step                      */
    int64_t          step_correct;
    double           eval_loss;
    int64_t          eval_correct;
    int64_t          done;           /* steps applied here (elastic)       */
    int64_t          samples;        /* this epoch, in its slices          */
    /* the steps of this phase, for the observers (STRATA__EV_STEPS) */
    strata__step_rec_t rec[STRATA__STEP_SLOTS];
    int              nrec;
    double           eval_t0, eval_t1; /* its share of the last evaluation */
} strata__replica_t;

/* The run's figures, beside the replicas' running sums (loss_sum,
 * correct, samples): written by the training loop (train.c) only. */
typedef struct strata__run_stats {
    int                   epoch;      /* of the replicas' running sums (an */
                                      /* epoch goes on across a regroup),  */
                                      /* -1 none                           */
    double                secs;       /* of that epoch's steps, so far     */
    strata__phase_times_t times;      /* where its step time went          */
    int64_t               steps_run;  /* steps this process trained        */
    strata__epoch_stats_t last;       /* the last epoch closed             */
    int                   nclosed;    /* epochs closed by this run         */
} strata__run_stats_t;

/* Where a resumed run goes on. */
typedef struct strata__resume {
    int     resumed;
    int     epoch;     /* 0-based epoch to continue in                */
    int64_t batch;     /* next batch of that epoch                    */
    int64_t step;      /* steps done before                           */
    int64_t sample;    /* first sample of that batch in the epoch's   */
                       /* order: batch * global batch, unless an      */
                       /* elastic job changed its global batch        */
} strata__resume_t;

struct strata__run {
    strata_ctx_t             *ctx;
    const strata__settings_t *s;
    strata__dataset_t         train, test;
    uint32_t                 *perm;         /* this epoch's sample order   */
    uint32_t                 *test_order;   /* identity                    */
    strata__model_t           model;
    float                    *init;         /* flat initial values         */
    int                       nreplicas;
    int32_t                   devices[STRATA_MAX_REPLICAS];
    strata__replica_t        *reps;
    strata__geometry_t        geo;          /* who trains which slices:
                                               geometry.c, its one writer  */
    int64_t                   b0, pos0;     /* batch b0 of this epoch
                                               starts at sample pos0       */
    int                       done_epoch;   /* where the steps applied here */
    int64_t                   done_batch,   /* leave the data: the next     */
                              done_pos;     /* batch and its first sample   */
    int64_t                   step_batch, step_id; /* PHASE_STEP's step    */
    long                      delay_us;     /* debug.step_delay_ms here    */
    int                       evaluator;    /* the sidecar evaluator task  */
    int64_t                   warmup_steps;
    strata__schedule_t        sched;        /* the lr of every step        */
    strata__monitor_t         monitor;      /* early stopping, keep_best   */
    int                       halt;         /* early stopping ended it     */
    int                       best_due;     /* drive(): keep_best at the
                                               next boundary               */
    /* the strategy */
    strata__plugin_t         *strategy;
    void                     *scfg, *spctx;
    void                     *var_state;    /* nvars * var_state_size      */
    strata__cluster_t         cluster;      /* the job; pub is the ABI view */
    int                       cluster_ok;
    strata_env_t              env;
    size_t                    placed_bytes; /* by the strategy         */
    /* threads and phases */
    strata__crew_t            crew;
    int                       crew_ok, nthreads;
    pthread_barrier_t         sync_bar;     /* debug.check_sync only       */
    int                       sync_bar_ok;
    int64_t                   seg_lo, seg_hi;  /* batches of this phase   */
    int64_t                   epoch_step0;  /* global step of batch 0      */
    int64_t                   epoch_first;  /* first batch run this epoch  */
    strata__resume_t          resume;       /* where the run goes on     */
    int                       resume_done;
    int64_t                   last_boundary; /* drive(): step of the last
                                                checkpoint (or the resume) */
    _Atomic int               rc;           /* first failure               */
    strata__run_stats_t       stats;        /* train.c, its one writer     */
    /* elastic jobs (regroup.c) */
    struct strata__elastic   *elastic;      /* membership client, or NULL  */
    int                       resize_due;   /* agreed at an epoch's end    */
    int                       cur_epoch;    /* of the steps being run      */
    char                      self[48];     /* this task, "worker:1"       */
    /* the outputs (core/observe): they see the run only through events */
    strata__bus_t             bus;
    int                       lockstep;     /* every worker ran the core's
                                               loop in step (the trace is
                                               gathered at the end)        */
    double                    t_start;      /* strata__now() at setup      */
};

int  strata__run_setup(strata_ctx_t *ctx, strata__run_t *run);
void strata__run_banner(const strata__run_t *run);
/* After the last epoch: debug.dump_vars and the summary line. */
int  strata__run_finish(strata__run_t *run);
/* Frees everything; `run` itself too. */
void strata__run_teardown(strata__run_t *run);

/* The sidecar evaluator's whole run (core/sidecar.c). */
int strata__sidecar_run(strata__run_t *run);

/* First sample, in the epoch's order, of batch b of this epoch. */
static inline size_t strata__batch_sample(const strata__run_t *run, int64_t b)
{
    return (size_t)(run->pos0 + (b - run->b0) * (int64_t)run->geo.gbatch);
}
/* Batches of this epoch (the last partial one dropped). */
static inline int64_t strata__epoch_batches(const strata__run_t *run)
{
    return run->b0 + ((int64_t)run->train.n - run->pos0) / run->geo.gbatch;
}

/* ---- regroup.c: elastic jobs ------------------------------------------ */

/* The membership client when the job has a service (strata launch
 * --elastic); after the cluster is resolved. */
int  strata__elastic_setup(strata__run_t *run);
/* Did this process join a job that was already training? Then it starts
 * with strata__elastic_start instead of a checkpoint's resume. */
int  strata__elastic_joining(const strata__run_t *run);
/* A joiner receives the state of the step the job goes on from. */
int  strata__elastic_start(strata__run_t *run, strata__resume_t *at);
/* May the failure `rc` be mended by re-forming the world? (an elastic
 * job that lost a member, or a resize agreed: STRATA__RESIZE) */
#define STRATA__RESIZE 1
int  strata__elastic_regroupable(const strata__run_t *run, int rc);
/* Re-form the world (the strategy's STRATA_CTL_REGROUP), move the state
 * to the members that lack it, and say where training goes on. */
int  strata__elastic_regroup(strata__run_t *run, int why, strata__resume_t *at);
/* Training finished here: tell the service; the job is over. */
void strata__elastic_finish(strata__run_t *run, int64_t step);
/* A joiner found the job over (nothing to do, not a failure). */
int  strata__elastic_job_over(const strata__run_t *run);

#endif
