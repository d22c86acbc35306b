/* strata core -- the state of one training run, shared by train.c (the
 * loop) and run.c (setup, output, teardown). Internal. */
#ifndef STRATA_CORE_RUN_H
#define STRATA_CORE_RUN_H

#include "cluster/cluster.h"
#include "crew.h"
#include "cursor.h"
#include "geometry.h"
#include "monitor.h"
#include "plateau.h"
#include "runtime.h"
#include "schedule.h"
#include "stepsum.h"
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
    double           metric;         /* this epoch                         */
    double           step_loss;      /* the last step                      */
    double           step_metric;
    double           eval_loss;
    double           eval_metric;
    /* [model] metric = auc: its bins, this epoch's and the evaluation's
     * (kops_list.h); the metrics above hold the AUC times the samples */
    double           hist[2 * KOPS_AUC_BINS];
    double           eval_hist[2 * KOPS_AUC_BINS];
    int64_t          done;           /* steps applied here (elastic)       */
    int64_t          nonfinite;      /* first step with a non-finite loss, */
                                     /* + 1; 0 none                        */
    int64_t          samples;        /* this epoch, in its slices          */
    /* the steps of this phase, for the observers (STRATA__EV_STEPS) */
    strata__step_rec_t rec[STRATA__STEP_SLOTS];
    int              nrec;
    double           eval_t0, eval_t1; /* its share of the last evaluation */
} strata__replica_t;

/* The run's figures, beside the replicas' running sums (loss_sum,
 * metric, samples): written by the training loop (train.c) only. */
typedef struct strata__run_stats {
    int                   epoch;      /* of the replicas' running sums (an */
                                      /* epoch goes on across a regroup),  */
                                      /* -1 none                           */
    double                secs;       /* of that epoch's steps, so far     */
    strata__phase_times_t times;      /* where its step time went          */
    int64_t               steps_run;  /* steps this process trained        */
    strata__epoch_stats_t last;       /* the last epoch closed             */
    int                   nclosed;    /* epochs closed by this run         */
    int                   tested;     /* the test set was scored at the    */
    double                test_loss,  /* end (a run with a validation set) */
                          test_acc;
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

/* The run, in parts. Each part names its one writer; the others read it.
 * Set up once by run.c (and freed by it): the parts marked "setup". */
struct strata__run {
    strata_ctx_t             *ctx;          /* setup                       */
    const strata__settings_t *s;
    double                    t_start;      /* strata__now() at setup      */
    char                      self[48];     /* this task, "worker:1"       */
    int                       evaluator;    /* the sidecar evaluator task  */
    /* the data and the model (setup) */
    strata__dataset_t         train, val, test; /* val.n == 0: none, the
                                               test set validates         */
    strata__augment_t         aug;          /* train.augment, when on      */
    strata__model_t           model;
    float                    *init;         /* flat initial values         */
    float                    *init_states;  /* init_from's state tensors,
                                               or NULL: the fills         */
    int                       nreplicas;
    int32_t                   devices[STRATA_MAX_REPLICAS];
    strata__replica_t        *reps;         /* each its own thread's       */
    /* the strategy and the job (setup) */
    strata__plugin_t         *strategy;
    void                     *scfg, *spctx;
    strata_hctx_t            *shc;          /* the strategy instance's     */
    void                     *var_state;    /* nvars * var_state_size      */
    strata__cluster_t         cluster;      /* the job; pub is the ABI view */
    int                       cluster_ok;
    strata_env_t              env;
    size_t                    placed_bytes; /* by the strategy             */
    /* membership: the elastic job's client, or NULL (regroup.c) */
    struct strata__elastic   *elastic;
    /* the rendezvous after the table: a late claim ends the job
     * (member/rdzv_late.c); NULL without a rendezvous */
    struct strata__rdzv_late *rdzv_late;
    /* shape: who trains which slices, and the lr of every step
     * (shape.c, at the start and at every regroup) */
    strata__geometry_t        geo;
    strata__schedule_t        sched;
    /* the data cursor: where the steps are in the data (cursor.c) */
    strata__cursor_t          cur;
    /* the monitor: early stopping and keep_best (monitor.c), what it
     * decided (stopping.c: halt, the best checkpoint due at the next
     * boundary) */
    strata__monitor_t         monitor;
    int                       halt, best_due;
    /* reduce_lr_patience: the chief's count, every task's reductions
     * (plateau.c; stopping.c applies the agreed decision) */
    strata__plateau_t         plateau;
    /* restore_best_weights: the state at the best epoch (best.c) */
    strata_state_t            best;
    float                    *best_states;  /* and its state tensors       */
    int                       best_epoch;   /* of `best`, 1-based; 0 none  */
    int                       restored;     /* the run ends with it        */
    /* the loop (train.c): its threads, where it resumed, its figures */
    strata__crew_t            crew;
    int                       crew_ok, nthreads;
    pthread_barrier_t         sync_bar;     /* debug.check_sync only       */
    strata__stepsum_t         stepsum;      /* batchnorm's statistics
                                               across the replicas (setup) */
    int                       sync_bar_ok;
    strata__resume_t          resume;       /* where the run goes on       */
    int                       resume_done;
    int                       parts_off;    /* a checkpoint's parts were not
                                               all seen here: gather (ABI
                                               2.13, resume.c)             */
    int64_t                   last_boundary; /* drive(): step of the last
                                                checkpoint (or the resume) */
    _Atomic int               rc;           /* first failure (any thread)  */
    strata__run_stats_t       stats;
    const strata__dataset_t  *scored;       /* what the eval phase scores  */
    int                       lockstep;     /* every worker ran the core's
                                               loop in step (the trace is
                                               gathered at the end)        */
    /* the outputs (core/observe): they see the run only through events */
    strata__bus_t             bus;
    /* host batch_rows (batchrows.c): the rows of its last answer */
    int64_t                  *brows;
    size_t                    brows_cap;
};

int  strata__run_setup(strata_ctx_t *ctx, strata__run_t *run);
void strata__run_banner(const strata__run_t *run);
/* After the last epoch: debug.dump_vars and the summary line. */
int  strata__run_finish(strata__run_t *run);
/* Frees everything; `run` itself too. */
void strata__run_teardown(strata__run_t *run);

/* Take the run's shape, at the start (start = 1) or at a regroup: the
 * geometry `in` gives, and the schedule when its lr scale changed
 * (shape.c). */
int strata__run_shape(strata__run_t *run, const strata__geometry_in_t *in,
                      int start);

/* [train] restore_best_weights (best.c): refused for a job it cannot
 * serve (one error line); keep the state of the best epoch, after the
 * monitor found it; install it at the end of the run (collective). */
int  strata__best_check(const strata__run_t *run);
int  strata__best_keep(strata__run_t *run, int epoch);
int  strata__best_restore(strata__run_t *run);
void strata__best_free(strata__run_t *run);

/* Sum n floats across every training process (the strategy's
 * STRATA_CTL_WORLD_SUM); a no-op for a job of one process (world.c). */
int strata__run_world_sum(strata__run_t *run, float *buf, int n);
int strata__run_world_sum_f64(strata__run_t *run, double *buf, int n);

/* The sidecar evaluator's whole run (core/run/sidecar.c). */
int strata__sidecar_run(strata__run_t *run);

/* The learning rate of global step `step`: the schedule's, after the
 * plateau's reductions. */
static inline double strata__run_lr(const strata__run_t *run, int64_t step)
{
    return strata__plateau_lr(&run->plateau,
                              strata__schedule_lr(&run->sched, step));
}

/* First sample, in the epoch's order, of batch b of this epoch. */
static inline size_t strata__batch_sample(const strata__run_t *run, int64_t b)
{
    return (size_t)strata__cursor_sample(&run->cur, b, run->geo.gbatch);
}
/* Replica r's slice of a global batch: slices are numbered across the
 * workers that share a batch, so every worker reads only its own share and
 * the union is exactly the single-device batch. `scale` averages the
 * slice's gradient over the global batch. */
typedef struct strata__slice {
    size_t row0, rows;
    float  scale;
} strata__slice_t;

static inline strata__slice_t strata__replica_slice(const strata__run_t *run,
                                                    int r)
{
    size_t g = (size_t)run->geo.shard0 + (size_t)r,
           b = (size_t)run->geo.per_replica;
    if (!run->elastic)
        return (strata__slice_t){ g * b, b, 1.0f / (float)b };
    /* Any number of slices (regroup.c): == the above when S divides B. */
    size_t B = (size_t)run->geo.gbatch, S = (size_t)run->geo.shards;
    size_t row0 = B * g / S;
    return (strata__slice_t){ row0, B * (g + 1) / S - row0,
                              (float)S / (float)B };
}

/* host init_values (plugin ABI 2.12, run.c): elements [lo, lo + n) of a
 * variable's initial values, from the core's copy or drawn again. */
int  strata__run_init_values(strata__run_t *run, const strata_var_t *var,
                             size_t lo, size_t n, float *dst);
/* memlimit.c: STRATA_ENOMEM, one line, when the model cannot fit the
 * memory limit of this task (rlimits, cgroups) under its strategy. */
int  strata__run_memory_check(strata__run_t *run);

/* host batch_rows (plugin ABI 2.11, batchrows.c): the rows each embedding
 * table is read at in batch `batch` of epoch `epoch` by this process's
 * replicas; run->brows holds them until the next call. */
int  strata__run_batch_rows(strata__run_t *run, int32_t epoch, int64_t batch,
                            strata_sparse_t *out, size_t cap, size_t *n);

/* Batches of this epoch (the last partial one dropped). */
static inline int64_t strata__epoch_batches(const strata__run_t *run)
{
    return run->cur.b0 + ((int64_t)run->train.n - run->cur.pos0) /
                             run->geo.gbatch;
}

/* ---- regroup.c: elastic jobs ------------------------------------------ */

/* The membership client when the job has a service (strata launch
 * --elastic); after the cluster is resolved. */
int  strata__elastic_setup(strata__run_t *run);
/* host->membership: the job's next membership, its shape taken. */
int  strata__elastic_membership(strata__run_t *run, int64_t committed,
                                int timeout_ms, strata_membership_t *out);
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
