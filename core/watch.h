/* strata core -- watching a run: where a step's time goes (compute,
 * waits, reduce), TensorBoard event files ([train] tensorboard) and the
 * step timeline ([train] trace). Internal.
 *
 *   bytes.c   a growable byte buffer
 *   pbwire.c  protobuf wire encoding and TFRecord framing
 *   tboard.c  TensorFlow Event records and the event files of a run
 *   trace.c   Chrome trace-event JSON, gathered from every worker
 *   watch.c   the hooks train.c calls: phase times -> the three above */
#ifndef STRATA_CORE_WATCH_H
#define STRATA_CORE_WATCH_H

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

/* ---- watch.c ------------------------------------------------------------- */

/* One step of one replica as its thread saw it (strata__now() seconds). */
typedef struct strata__step_rec {
    int64_t step;
    double  t0;          /* the step began (batch load)                     */
    double  fwd;         /* forward and loss done                           */
    double  bwd;         /* backward done = the replica reaches the reduce  */
    double  red;         /* reduce done                                     */
    double  upd;         /* update done                                     */
    double  loss;        /* summed over the replica's slice                 */
    int64_t correct;
    float   lr;
} strata__step_rec_t;

/* Steps a replica records in one phase of the crew (train.c's segment of
 * at most SEGMENT_STEPS steps, or a single step). */
#define STRATA__WATCH_SLOTS 32

typedef struct strata__watch {
    int              on;        /* replicas record their steps           */
    int              lockstep;  /* the core's loop ran every worker in
                                   step: the chief gathers the trace       */
    int              tb_on;
    strata__tboard_t tb;
    int              trace_on;
    strata__trace_t  tr;
    int64_t          trace_first, trace_end; /* steps traced: [first, end) */
    int              trace_past;   /* a step past the window was seen      */
    int64_t          last_step;    /* the last step recorded, -1 none      */
    /* this epoch, seconds summed over the replicas */
    double           compute, wait, reduce;
    int64_t          timed;        /* steps recorded this epoch            */
    float            lr;           /* of the last step recorded            */
    /* TensorBoard per-step points: the steps since the last one */
    double           span_sum;
    int64_t          span_n;
} strata__watch_t;

struct strata__run;
struct strata__replica;
struct strata__epoch_stats;

/* After the threads are up and the progress display is set: decides what
 * is measured, opens the TensorBoard files (chief). */
int  strata__watch_start(struct strata__run *run);
/* The step records of the phase just run (train or single step): phase
 * times, trace events, TensorBoard per-step scalars. Main thread. */
void strata__watch_steps(struct strata__run *run);
/* Evaluation of the whole test set that began at t0 (main thread, after
 * the replicas' eval phase). */
void strata__watch_eval(struct strata__run *run, double t0);
/* A checkpoint that began at t0 and is done. */
void strata__watch_checkpoint(struct strata__run *run, double t0, int64_t step);
/* Closing an epoch: TensorBoard epoch scalars (chief), flushed; *comm is
 * the share of the replicas' time in waits and reduce, or -1 when this
 * process measured no step of the epoch. 0 or STRATA_EIO. */
int  strata__watch_epoch(struct strata__run *run,
                         const struct strata__epoch_stats *st, double *comm);
/* The end of the run (`rc` its result so far): the trace written (gathered
 * from every worker when they all got here in step), the event files
 * closed, everything freed. Returns rc, or a write error when rc was 0. */
int  strata__watch_finish(struct strata__run *run, int rc);

#endif /* STRATA_CORE_WATCH_H */
