/* strata core -- the observers of a run and the one event stream they
 * consume. Internal.
 *
 * The training loop (core/run/train.c) knows none of the outputs below: it
 * emits events (strata__emit) at a few points of a run, and each output is
 * an observer that turns the events it cares about into its file or text.
 * The embedding application's callbacks (strata.h: epoch, event) are one
 * more observer of the same stream.
 *
 *   bus.c          the observers of a run and the emit loop
 *   steptimes.c    a step's replica records -> compute / wait / reduce
 *   progress.c     the Keras-like progress display       ([train] progress)
 *   metrics_csv.c  one row per epoch                      ([train] metrics_csv)
 *   tensorboard.c  scalars per step and per epoch         ([train] tensorboard)
 *   trace_out.c    the step timeline, gathered at the end ([train] trace)
 *   steplog.c      what every step trained on             ([debug] step_log)
 *   lr_dump.c      every step's learning rate             ([debug] dump_lr)
 *   straggler.c    a slow task's delay                    ([debug] step_delay_ms)
 *   embedder.c     the application's callbacks
 * and the encoders they use:
 *   bytes.c   a growable byte buffer
 *   pbwire.c  protobuf wire encoding and TFRecord framing
 *   tboard.c  TensorFlow Event records and the event files of a run
 *   trace.c   Chrome trace-event JSON */
#ifndef STRATA_CORE_OBSERVE_H
#define STRATA_CORE_OBSERVE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* ---- bytes.c ------------------------------------------------------------- */

/* Appends never fail visibly: the first allocation failure sets `failed`
 * and later appends do nothing; check it once at the end. */
typedef struct strata__bytes {
    unsigned char *p;
    size_t         len, cap;
    int            failed;
} strata__bytes_t;

void strata__bytes_put(strata__bytes_t *b, const void *data, size_t n);
void strata__bytes_printf(strata__bytes_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* `s` as the inside of a JSON string (quotes, backslashes and control
 * characters escaped). */
void strata__bytes_json_str(strata__bytes_t *b, const char *s);
void strata__bytes_free(strata__bytes_t *b);   /* and zeroes it */

/* ---- pbwire.c ------------------------------------------------------------ */

/* Protobuf fields (proto3 encoding: the caller skips default values where
 * the schema says so), appended to b. */
void strata__pb_varint(strata__bytes_t *b, int field, uint64_t v);
void strata__pb_double(strata__bytes_t *b, int field, double v);
void strata__pb_float(strata__bytes_t *b, int field, float v);
void strata__pb_bytes(strata__bytes_t *b, int field, const void *data,
                      size_t n);
/* One TFRecord: uint64 length, masked CRC-32C of the length, the data,
 * masked CRC-32C of the data (all little-endian). */
void strata__tfrecord(strata__bytes_t *b, const void *data, size_t n);
uint32_t strata__tfrecord_mask(uint32_t crc);

/* ---- tboard.c ------------------------------------------------------------ */

/* One tensorflow.Event as a TFRecord: wall_time, step, and either
 * file_version (n == 0) or a Summary of n simple_value scalars. */
void strata__tb_event(strata__bytes_t *b, double wall_time, int64_t step,
                      const char *file_version, const char *const *tags,
                      const float *values, int n);

/* The runs (subdirectories) of a TensorBoard DIR: Keras' train and
 * validation, and the sidecar evaluator's evaluation. */
enum { STRATA__TB_TRAIN = 0, STRATA__TB_VALIDATION = 1,
       STRATA__TB_EVALUATION = 2, STRATA__TB_RUNS = 3 };

typedef struct strata__tb_file {
    char           *path;     /* NULL: this run has no such file          */
    int             fd;
    strata__bytes_t pending;  /* records not written yet                  */
} strata__tb_file_t;

typedef struct strata__tboard {
    strata__tb_file_t run[STRATA__TB_RUNS];
    int               failed;  /* a write failed (logged once)             */
} strata__tboard_t;

/* DIR/<run> for each run whose bit (1 << STRATA__TB_*) is in `runs`, made
 * as needed, each with a new events.out.tfevents.TIME.HOST file that starts
 * with the file_version record. One error line and STRATA_EIO when that
 * fails. */
int  strata__tboard_open(strata__tboard_t *tb, const char *dir, unsigned runs);
/* Scalars at `step` of run `which`, buffered until the next flush. */
void strata__tboard_scalars(strata__tboard_t *tb, int which, int64_t step,
                            const char *const *tags, const float *values,
                            int n);
/* Write what is buffered (and fsync): 0, or STRATA_EIO after one error
 * line naming the file (then every later call fails quietly). */
int  strata__tboard_flush(strata__tboard_t *tb);
/* Flush, close, free; returns what the flush did. NULL-safe, repeatable. */
int  strata__tboard_close(strata__tboard_t *tb);

/* ---- trace.c ------------------------------------------------------------- */

enum { STRATA__TR_FORWARD, STRATA__TR_BACKWARD, STRATA__TR_WAIT,
       STRATA__TR_REDUCE, STRATA__TR_UPDATE, STRATA__TR_EVAL,
       STRATA__TR_CHECKPOINT, STRATA__TR_KINDS };

typedef struct strata__trace_ev {
    double   t0, t1;          /* strata__now() seconds                    */
    int64_t  step;
    uint64_t bytes;           /* reduce: the gradient bytes handed over   */
    int32_t  tid;             /* replica, or the main thread's track      */
    int32_t  kind;            /* STRATA__TR_*                             */
} strata__trace_ev_t;

typedef struct strata__trace {
    strata__trace_ev_t *ev;
    size_t              n, cap;
    double              mono0;    /* strata__now() at ...                  */
    int64_t             real0_us; /* ... this CLOCK_REALTIME microsecond  */
} strata__trace_t;

void strata__trace_init(strata__trace_t *tr);
void strata__trace_add(strata__trace_t *tr, int kind, int tid, int64_t step,
                       double t0, double t1, uint64_t bytes);
/* This process's tracks as trace events (no enclosing array): process pid
 * named `process`, tracks 0..ntracks-1 named by track_names, then every
 * event. Times are microseconds of the system clock (CLOCK_REALTIME), so
 * that the fragments of several processes line up. */
void strata__trace_fragment(const strata__trace_t *tr, strata__bytes_t *out,
                            int pid, const char *process,
                            const char *const *track_names, int ntracks);
/* A whole trace file: the fragments (n of them, each from _fragment) in
 * one {"traceEvents": [...]} object. */
void strata__trace_document(strata__bytes_t *out, const strata__bytes_t *frags,
                            int n, const char *about);
void strata__trace_free(strata__trace_t *tr);

/* ---- the events of a run ------------------------------------------------ */

/* One step of one replica as its thread saw it (strata__now() seconds). */
typedef struct strata__step_rec {
    int64_t step;
    double  t0;          /* the step began (batch load)                     */
    double  fwd;         /* forward and loss done                           */
    double  bwd;         /* backward done = the replica reaches the reduce  */
    double  red;         /* reduce done                                     */
    double  upd;         /* update done                                     */
    double  loss;        /* summed over the replica's slice                 */
    double  metric;      /* summed over the slice: correct rows for
                            the accuracies (observe's "accuracy")      */
    int64_t samples;     /* rows of the replica's slice                     */
    float   lr;
} strata__step_rec_t;

/* Steps a replica records in one phase of the crew (train.c's segment of
 * at most SEGMENT_STEPS steps, or a single step). */
#define STRATA__STEP_SLOTS 32

/* The figures of a closed epoch. */
typedef struct strata__epoch_stats {
    int     epoch;     /* 1-based                                          */
    int64_t steps;
    double  train_loss, train_acc, test_loss, test_acc, seconds, samples_per_s;
    int     has_test;
    double  wall_s;    /* since the run's setup began, when the epoch ended */
    /* where the replicas' step time went (seconds per replica), and the
     * share of waits and reduce in it; comm < 0: no step measured */
    double  compute, wait, reduce, comm;
    float   lr;        /* of the epoch's last step                          */
} strata__epoch_stats_t;

/* Where a step's time went, summed over the steps of an epoch. */
typedef struct strata__phase_times {
    double  compute, wait, reduce;  /* seconds, summed over the replicas   */
    int64_t steps;
    float   lr;                     /* of the last step                    */
} strata__phase_times_t;

enum strata__event_kind {
    STRATA__EV_RUN_BEGIN,   /* main thread: replicas up, banner printed     */
    STRATA__EV_SAMPLES,     /* replica thread, before its gradient leaves:  */
                            /* the samples of its slice of a step           */
    STRATA__EV_APPLIED,     /* replica 0's thread: every replica of this    */
                            /* process applied `step`                       */
    STRATA__EV_EPOCH_BEGIN, /* main thread                                  */
    STRATA__EV_STEPS,       /* main thread, after each phase: the records   */
    STRATA__EV_PROGRESS,    /* main thread: running figures of the epoch    */
    STRATA__EV_EVAL,        /* main thread: the test set was evaluated      */
    STRATA__EV_CHECKPOINT,  /* main thread: a checkpoint was written        */
    STRATA__EV_EPOCH_END,   /* main thread: an epoch closed                 */
    STRATA__EV_RUN_END,     /* main thread: the replicas have stopped       */
};

typedef struct strata__event {
    int     kind;             /* STRATA__EV_*                               */
    int     epoch;            /* 0-based                                    */
    int64_t step;             /* SAMPLES, APPLIED, CHECKPOINT, EVAL: the    */
                              /* global step (EVAL: the steps done)         */
    /* EPOCH_BEGIN: the steps it will run and the batch it starts at (> 0:
     * a resumed epoch); PROGRESS: the steps done, the running figures */
    int64_t steps, first;
    double  loss, acc;
    /* SAMPLES: replica `replica` trains on samples ids[0..n) */
    int     replica;
    const uint32_t *ids;
    size_t  n;
    /* STEPS: rec[r][0..nrec) for every replica r < nreps, one slot per
     * step, in step order */
    strata__step_rec_t *const *rec;
    int     nreps, nrec;
    /* EVAL, CHECKPOINT: the main thread's span; EVAL: each replica's share
     * rep_t0[r] .. rep_t1[r] */
    double  t0, t1;
    const double *rep_t0, *rep_t1;
    /* EPOCH_END */
    const strata__epoch_stats_t *stats;
    /* RUN_END: the run's result so far */
    int     rc;
} strata__event_t;

/* An observer: on() gets every event of the run in order (SAMPLES and
 * APPLIED from replica threads, concurrently: an observer that handles
 * them is thread-safe there) and returns 0 or the error that ends the run
 * (a file it cannot write); it ignores the kinds it does not handle.
 * close() frees it (after RUN_END, or after setup failed). */
typedef struct strata__observer {
    const char *name;
    void       *self;
    int       (*on)(void *self, const strata__event_t *ev);
    void      (*close)(void *self);
} strata__observer_t;

#define STRATA__MAX_OBSERVERS 12

typedef struct strata__bus {
    strata__observer_t obs[STRATA__MAX_OBSERVERS];
    int                n;
} strata__bus_t;

/* ---- bus.c ---------------------------------------------------------------- */

struct strata__run;

/* The run's observers, as its settings ask. After the run's setup. */
int  strata__observers_open(struct strata__run *run);
/* Add one (an observer constructor's last step). STRATA_ENOMEM when full. */
int  strata__bus_add(strata__bus_t *bus, const strata__observer_t *o);
/* Every observer in order; the first error (each observer still sees the
 * event). */
int  strata__emit(const strata__bus_t *bus, const strata__event_t *ev);
void strata__bus_close(strata__bus_t *bus);

/* ---- steptimes.c ---------------------------------------------------------- */

/* Where replica r's time of one step went, seen from the records of all
 * R replicas of the step (recs[k] is replica k's): the wait for the last
 * replica to reach the reduce, and the reduce itself. */
void strata__step_split(const strata__step_rec_t *const *recs, int R, int r,
                        double *fwd_end, double *wait);
/* Add the steps of a STEPS event to an epoch's times. */
void strata__phase_times_add(strata__phase_times_t *pt,
                             const strata__event_t *ev);

/* ---- the observers (one file each) ---------------------------------------- */

int strata__progress_observer(struct strata__run *run, strata__bus_t *bus);
int strata__metrics_observer(struct strata__run *run, strata__bus_t *bus);
int strata__tensorboard_observer(struct strata__run *run, strata__bus_t *bus);
int strata__trace_observer(struct strata__run *run, strata__bus_t *bus);
int strata__steplog_observer(struct strata__run *run, strata__bus_t *bus);
int strata__lr_dump_observer(struct strata__run *run, strata__bus_t *bus);
int strata__embedder_observer(struct strata__run *run, strata__bus_t *bus);
int strata__straggler_observer(struct strata__run *run, strata__bus_t *bus);

/* ---- progress.c: the Keras-like progress line ------------------------------ */

enum { STRATA__PROGRESS_AUTO = 0, STRATA__PROGRESS_BAR = 1,
       STRATA__PROGRESS_LINE = 2, STRATA__PROGRESS_NONE = 3 };

/* ---- lr_dump.c: [debug] dump_lr ------------------------------------------- */

typedef struct strata__lr_log {
    int64_t steps;            /* steps noted                               */
    int     keep;             /* store them                                */
    int     lost;             /* out of memory once: not written           */
    size_t  n, cap;
    struct strata__lr_entry { int64_t step; float lr; } *e;
} strata__lr_log_t;

void strata__lr_log_note(strata__lr_log_t *l, int64_t step, float lr);
/* "STEP LR" lines (LR as %.9g, which reads back to the same float), by
 * step, each step once, to `path` (atomically, core/base/fileio.c); `task`
 * (e.g. "worker:1", or NULL for a job of one process) is appended to the
 * name as ".worker-1". */
int  strata__lr_log_write(const strata__lr_log_t *l, const char *path,
                          const char *task);
void strata__lr_log_free(strata__lr_log_t *l);

#endif /* STRATA_CORE_OBSERVE_H */
