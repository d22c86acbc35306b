/* [train] trace through the strata binary, read back as JSON (cJSON): a
 * mirrored run of 2 replicas, a 2-worker mwms job started with `strata
 * launch` (the chief gathers both workers into one file), a ps job (a
 * file per task: its workers run on their own), and a run that
 * fails at its first epoch's end (its trace is still whole JSON). Each
 * trace: a process per worker (pid = rank) and a track per replica plus
 * the main thread's, named; every traced step once per replica with its
 * phases in order (forward, backward, [wait], reduce with its bytes,
 * update); no step past trace_steps; eval and checkpoint events where the
 * run had them. */
#include <cjson/cJSON.h>
#include <math.h>

#include "check.h"
#include "spawn.h"
#include "testutil.h"

enum { FORWARD, BACKWARD, WAIT, REDUCE, UPDATE, EVAL, CHECKPOINT, KINDS };
static const char *const k_kinds[KINDS] = {
    "forward", "backward", "wait", "reduce", "update", "eval", "checkpoint",
};
#define MAXW 2
#define MAXT 3    /* 2 replicas + main */
#define MAXS 128  /* steps */
#define TOL 1.0   /* microseconds: ts are rounded */

typedef struct trace {
    int    procs, threads[MAXW];
    int    n[MAXW][MAXT][MAXS][KINDS];
    double t0[MAXW][MAXT][MAXS][KINDS], t1[MAXW][MAXT][MAXS][KINDS];
    int    past;            /* step events at or past the window */
    double bytes;           /* of the reduces; -1 when they differ */
    int    bad;             /* malformed events */
} trace_t;

static spawn_result_t R;

static int run_strata(const char *cmd, const char *const *sets, int timeout)
{
    char *argv[48] = { (char *)spawn_strata_bin(), (char *)cmd };
    int n = 2;
    if (!strcmp(cmd, "launch")) {
        argv[n++] = "-n";
        argv[n++] = "2";
    }
    for (int i = 0; sets[i] && n < 46; i++) {
        argv[n++] = "--set";
        argv[n++] = (char *)sets[i];
    }
    spawn_run(argv, timeout, &R);
    return R.code;
}

static const cJSON *get(const cJSON *o, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

static int kind_of(const char *name)
{
    for (int k = 0; name && k < KINDS; k++)
        if (!strcmp(name, k_kinds[k]))
            return k;
    return -1;
}

/* Reads `path` into *t; 0 when it is not a trace-event JSON object. */
static int load(const char *path, int steps, trace_t *t)
{
    memset(t, 0, sizeof *t);
    char *text = read_all(path, NULL);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *evs = j ? get(j, "traceEvents") : NULL;
    const char *unit = j ? cJSON_GetStringValue(get(j, "displayTimeUnit"))
                         : NULL;
    if (!cJSON_IsArray(evs) || !unit || strcmp(unit, "ms") != 0) {
        cJSON_Delete(j);
        return 0;
    }
    t->bytes = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, evs) {
        const char *ph = cJSON_GetStringValue(get(e, "ph"));
        const char *name = cJSON_GetStringValue(get(e, "name"));
        int pid = (int)cJSON_GetNumberValue(get(e, "pid"));
        const cJSON *tidj = get(e, "tid"), *args = get(e, "args");
        int tid = tidj ? (int)cJSON_GetNumberValue(tidj) : -1;
        if (!ph || !name || pid < 0 || pid >= MAXW || tid >= MAXT) {
            t->bad++;
            continue;
        }
        if (!strcmp(ph, "M")) {
            const char *v = cJSON_GetStringValue(get(args, "name"));
            char want[64];
            if (!strcmp(name, "process_name")) {
                snprintf(want, sizeof want, "worker:%d (rank %d)", pid, pid);
                t->procs++;
                t->bad += !v || strcmp(v, want) != 0;
            } else if (!strcmp(name, "thread_name")) {
                snprintf(want, sizeof want, "replica %d (cpu:%d)", tid, tid);
                t->threads[pid]++;
                t->bad += !v || (strcmp(v, want) != 0 &&
                                 strcmp(v, "main (eval, checkpoint)") != 0);
            }
            continue;
        }
        int k = kind_of(name);
        double step = cJSON_GetNumberValue(get(args, "step"));
        double ts = cJSON_GetNumberValue(get(e, "ts"));
        double dur = cJSON_GetNumberValue(get(e, "dur"));
        const char *cat = cJSON_GetStringValue(get(e, "cat"));
        if (strcmp(ph, "X") || k < 0 || tid < 0 || isnan(step) || step < 0 ||
            step >= MAXS || isnan(ts) || isnan(dur) || dur < 0 || !cat) {
            t->bad++;
            continue;
        }
        if (k <= UPDATE && step >= steps) {
            t->past++;
            continue;
        }
        int s = (int)step;
        t->n[pid][tid][s][k]++;
        t->t0[pid][tid][s][k] = ts;
        t->t1[pid][tid][s][k] = ts + dur;
        if (k == REDUCE) {
            double b = cJSON_GetNumberValue(get(args, "bytes"));
            t->bytes = t->bytes == 0 && b > 0 ? b : t->bytes == b ? b : -1;
        }
    }
    cJSON_Delete(j);
    return 1;
}

/* Every replica of workers [w0, w0 + workers): steps [0, steps) once
 * each, phases in order, one step after the other. */
static void check_steps(const trace_t *t, int w0, int workers, int replicas,
                        int steps, const char *what)
{
    int missing = 0, order = 0;
    for (int w = w0; w < w0 + workers; w++)
        for (int r = 0; r < replicas; r++)
            for (int s = 0; s < steps; s++) {
                const int *n = t->n[w][r][s];
                const double *a = t->t0[w][r][s], *b = t->t1[w][r][s];
                missing += n[FORWARD] != 1 || n[BACKWARD] != 1 ||
                           n[REDUCE] != 1 || n[UPDATE] != 1 || n[WAIT] > 1;
                double red0 = n[WAIT] ? a[WAIT] : a[REDUCE];
                order += b[FORWARD] > a[BACKWARD] + TOL ||
                         b[BACKWARD] > red0 + TOL ||
                         (n[WAIT] && b[WAIT] > a[REDUCE] + TOL) ||
                         b[REDUCE] > a[UPDATE] + TOL ||
                         (s > 0 && t->t1[w][r][s - 1][UPDATE] >
                                       a[FORWARD] + TOL);
            }
    CHECKF(missing == 0, "%s: %d replica-steps lack a phase", what, missing);
    CHECKF(order == 0, "%s: %d replica-steps out of order", what, order);
    CHECKF(t->past == 0, "%s: %d events past trace_steps", what, t->past);
    CHECKF(t->bad == 0, "%s: %d malformed events", what, t->bad);
    /* the model's variables as float32: at least its 101770 parameters */
    CHECKF(t->bytes >= 101770 * 4, "%s: reduce bytes %g", what, t->bytes);
    CHECKF(t->procs == workers, "%s: %d processes", what, t->procs);
    for (int w = w0; w < w0 + workers; w++)
        CHECKF(t->threads[w] == replicas + 1, "%s: worker %d has %d tracks",
               what, w, t->threads[w]);
}

/* Events of kind k on track tid of worker w at each step (a string of the
 * steps, for messages and comparisons). */
static void steps_of(const trace_t *t, int w, int tid, int k, char *out,
                     size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (int s = 0; s < MAXS && n < cap; s++)
        for (int i = 0; i < t->n[w][tid][s][k] && n < cap; i++)
            n += (size_t)snprintf(out + n, cap - n, "%s%d", n ? "," : "", s);
}

static void mirrored(void)
{
    char trace[600], ckpt[600], set_t[700], set_c[700];
    snprintf(trace, sizeof trace, "%s/mirrored.json", tmpdir_);
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", tmpdir_);
    snprintf(set_t, sizeof set_t, "train.trace=%s", trace);
    snprintf(set_c, sizeof set_c, "checkpoint.dir=%s", ckpt);
    /* 3200 samples, batch 32: 100 steps an epoch; the first epoch traced,
     * with its checkpoints every 25 steps and its evaluation. */
    const char *sets[] = {
        "train.devices=cpu:0,cpu:1", "data.limit_train=3200",
        "data.limit_test=500", "train.epochs=2", "train.trace_steps=100",
        "checkpoint.every_steps=25", set_t, set_c, NULL,
    };
    CHECKF(run_strata("train", sets, 300) == 0, "exit %d: %s", R.code, R.err);
    static trace_t t;
    CHECKF(load(trace, 100, &t), "%s is not a trace", trace);
    check_steps(&t, 0, 1, 2, 100, "mirrored");
    char got[256];
    steps_of(&t, 0, 2, CHECKPOINT, got, sizeof got);
    CHECKF(!strcmp(got, "25,50,75,100"), "checkpoints at steps %s", got);
    steps_of(&t, 0, 2, EVAL, got, sizeof got);
    CHECKF(!strcmp(got, "100"), "main's eval at steps %s", got);
    for (int r = 0; r < 2; r++) {
        steps_of(&t, 0, r, EVAL, got, sizeof got);
        CHECKF(!strcmp(got, "100"), "replica %d's eval at steps %s", r, got);
        /* a replica's share of the evaluation is within the main's */
        CHECK(t.t0[0][r][100][EVAL] >= t.t0[0][2][100][EVAL] - TOL &&
              t.t1[0][r][100][EVAL] <= t.t1[0][2][100][EVAL] + TOL);
    }
}

static void mwms(void)
{
    char trace[600], set_t[700], other[700];
    snprintf(trace, sizeof trace, "%s/mwms.json", tmpdir_);
    snprintf(set_t, sizeof set_t, "train.trace=%s", trace);
    const char *sets[] = {
        "strategy.plugin=mwms", "transport.plugin=zmq",
        "train.devices=cpu:0,cpu:1", "data.limit_train=3200",
        "train.eval=false", "train.epochs=1", "train.trace_steps=40", set_t,
        NULL,
    };
    CHECKF(run_strata("launch", sets, 300) == 0, "exit %d: %s", R.code,
           R.err);
    static trace_t t;
    CHECKF(load(trace, 40, &t), "%s is not a trace", trace);
    check_steps(&t, 0, 2, 2, 40, "mwms");
    /* one file for the job: the other worker wrote none of its own */
    snprintf(other, sizeof other, "%s/mwms.worker-1.json", tmpdir_);
    CHECKF(!file_exists(other), "%s exists", other);
    char got[256];
    steps_of(&t, 1, 2, EVAL, got, sizeof got);
    CHECKF(!got[0], "eval events at %s without eval", got);
}

/* ps: the workers run on their own, so each task writes its own file: the
 * coordinator (worker:0, rank 0) its evaluations, worker:1 its steps. */
static void ps(void)
{
    char trace[600], set_t[700], mine[700];
    snprintf(trace, sizeof trace, "%s/ps.json", tmpdir_);
    snprintf(set_t, sizeof set_t, "train.trace=%s", trace);
    const char *sets[] = {
        "strategy.plugin=ps", "train.devices=cpu:0", "data.limit_train=3200",
        "data.limit_test=500", "train.epochs=1", "train.trace_steps=20", set_t,
        NULL,
    };
    char *argv[32] = { (char *)spawn_strata_bin(), "launch", "-n", "2",
                       "--ps", "1" };
    int n = 6;
    for (int i = 0; sets[i]; i++) {
        argv[n++] = "--set";
        argv[n++] = (char *)sets[i];
    }
    spawn_run(argv, 300, &R);
    CHECKF(R.code == 0, "exit %d: %s", R.code, R.err);
    static trace_t t;
    char got[256];
    CHECKF(load(trace, 20, &t), "%s is not a trace", trace);
    CHECK(t.procs == 1 && t.threads[0] == 2 && t.bad == 0);
    steps_of(&t, 0, 1, EVAL, got, sizeof got);
    CHECKF(!strcmp(got, "0"), "the coordinator's evals at %s", got);
    snprintf(mine, sizeof mine, "%s/ps.worker-1.json", tmpdir_);
    CHECKF(load(mine, 20, &t), "%s is not a trace", mine);
    check_steps(&t, 1, 1, 1, 20, "ps worker:1");
}

static void failed_run(void)
{
    char trace[600], set_t[700], set_m[700];
    snprintf(trace, sizeof trace, "%s/failed.json", tmpdir_);
    snprintf(set_t, sizeof set_t, "train.trace=%s", trace);
    /* the metrics CSV cannot be written: the run fails at the epoch's end */
    snprintf(set_m, sizeof set_m, "train.metrics_csv=%s", tmpdir_);
    const char *sets[] = {
        "train.devices=cpu:0,cpu:1", "data.limit_train=3200",
        "train.eval=false", "train.trace_steps=10", set_t, set_m, NULL,
    };
    CHECKF(run_strata("train", sets, 300) == 1, "exit %d: %s", R.code, R.err);
    static trace_t t;
    CHECKF(load(trace, 10, &t), "%s is not a trace", trace);
    check_steps(&t, 0, 1, 2, 10, "failed run");
}

int main(void)
{
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
               R_OK) != 0)
        CHECK_SKIP("Fashion-MNIST not installed");
    tmp_make("trace");
    mirrored();
    mwms();
    ps();
    failed_run();
    tmp_cleanup();
    return CHECK_DONE();
}
