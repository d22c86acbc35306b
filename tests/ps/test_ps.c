/* ParameterServerStrategy jobs on loopback, one scenario per run:
 *
 *   roles          no ps / no worker / one process: a clear error; a job
 *                  without a chief (worker 0 coordinates) trains
 *   accuracy_kill  1 coordinator + 2 ps + 3 workers (strata launch) reach
 *                  >= 85% test accuracy in 5 epochs; then the same job with
 *                  worker:1 killed (-9) at a random point: it completes
 *                  within 1% of that accuracy, the coordinator logs the
 *                  re-scheduled step and every ps applied each scheduled
 *                  step exactly once
 *   restart        worker:1 killed and restarted: it rejoins, gets work
 *   twice          worker:1 killed and restarted twice
 *   pskill         ps:1 killed: the coordinator exits non-zero within its
 *                  deadline, naming ps:1
 *   allgone        every worker killed: the coordinator stops the job with
 *                  one error line, the ps tasks with it
 *   belowmin       min_workers = 2 and one of two workers killed: the same
 *   launch_restart under strata launch --max-restarts 2, worker:1 killed
 *                  (-9): launch restarts it alone, the job ends exit 0
 *   launch_lost    the same without restarts: the job finishes without it
 *   launch_coord   no chief: worker:0 coordinates, and its death restarts
 *                  the whole job
 *   replay         in plaintext ([security] mode = off): malformed
 *                  messages, replayed pushes (one with a step id not run
 *                  yet), a worker's STATE_PUT/STATE_REQ/STATE_SAVE, and the
 *                  coordinator's STATE_PUT, STATE_SAVE, FINISH, ABORT and a PING with
 *                  another lease key forged in its name, sent to ps:0 with
 *                  a raw zmq socket change nothing: the pushes' leases and
 *                  the control messages' tags do not match (its counters
 *                  say so)
 *   stranger       the secured job: a plaintext socket and a CURVE client
 *                  with a foreign key reach nothing (ZAP refuses the key)
 *   stranger_kinds the secured job, and N connections of each kind of
 *                  stranger at ps:0's port and at the coordinator's:
 *                  silent, an HTTP request, a ZMTP greeting of another
 *                  mechanism (NULL), a CURVE client with a key of its own:
 *                  ps:0's zmq end-of-run line counts N of each, by kind
 *                  (1000 garbage connections went uncounted before), and
 *                  names each one that is not ZeroMQ as it goes; the
 *                  core's "strangers:" line of both says the same (plugin
 *                  ABI 2.7), the warnings name the peers' address:port,
 *                  and the coordinator's TensorBoard has the strangers/
 *                  scalars at every epoch, the last one those counts
 *   forged_abort   a plaintext job and ABORTs in the coordinator's name
 *                  at both workers' ports: refused by their tag (the key
 *                  each worker learns from its STEP replies), the job ends
 *                  as ever
 *   lossy          the secured job with worker:0's link to ps:0 through a
 *                  proxy of the test's that replays an earlier CURVE frame
 *                  before a push, drops a push's frame and resets, and
 *                  resets in the middle of one: each costs worker:0 a
 *                  resend (resend_ms), not its life; every step is applied
 *                  once
 *   pieces_lossy   the lossy job with every whole pull answered in pieces
 *                  of 16 KiB (wire v9): the proxy's resets cut answers in
 *                  the middle; each is asked again and comes whole, every
 *                  step applied once
 *   sparse_lossy   the same with the embedding model, whose pushes carry
 *                  its table as rows and whose pulls ask for a batch's rows
 *                  (the proxy faults frames above 256 bytes: both): a
 *                  resent push with rows is the same message, applied
 *                  once, and a lost pull of rows is asked again
 *   ckpt_pskill    ps:1 killed (-9) after the coordinator's checkpoint of
 *                  step 300: the job fails; restarted whole, it resumes
 *                  from that checkpoint (every ps takes its shards back),
 *                  applies every step once and reaches the accuracy of a
 *                  fault-free run; `strata eval` of its last checkpoint
 *                  gives the accuracy the coordinator reported
 *   ckpt_stop      SIGTERM to every task mid-epoch: each exits 75 after
 *                  the coordinator's checkpoint at the step it stopped at;
 *                  restarted, the job resumes at exactly that step
 *   outside_ledger in plaintext ([security] mode = off), one who reads the
 *                  network: a proxy of the test's on the coordinator's link
 *                  to ps:0 reads the lease key and the coordinator's
 *                  incarnation from its PING, and a raw socket puts a state
 *                  in the coordinator's name, tagged as the coordinator
 *                  tags it, before the first push: ps:0 takes it (nothing
 *                  in plaintext can tell it from the coordinator's), and at
 *                  FINISH the coordinator finds a restore it did not make:
 *                  the job exits non-zero with "state came from outside the
 *                  ledger", never the exactly-once summary
 *   bn_hostile     a model with batchnorm (plugin ABI 2.8: the workers'
 *                  moving statistics ride on their STEP_REQs), plaintext:
 *                  STEP_REQs forged in worker:0's name with a state too
 *                  few or a NaN state are dropped and counted by the
 *                  coordinator, never installed; the checkpoint's moving
 *                  statistics are finite and the workers' first steps
 *                  started from the coordinator's; worker:1 killed and
 *                  restarted starts from the newest step's
 *   sparse_restart an embedding model (wire v6: its table pushed as the
 *                  rows a step touched) under strata launch
 *                  --max-restarts 2 with 2 ps tasks: worker:1 killed with
 *                  -9 is started again and rejoins, every step is applied
 *                  exactly once, and the workers and ps tasks say the
 *                  table went as rows
 *   sparse_hostile the same model, plaintext: PUSHes forged in worker:0's
 *                  name with row blocks -- a row id outside the shard,
 *                  ids out of order, a row count the payload disagrees
 *                  with, a NaN row -- are dropped and counted by ps:0,
 *                  each named, never applied; so are PULLs asking for rows
 *                  (wire v7) outside the shard, out of order, twice, or
 *                  fewer than they carry, never answered (ps:0 answered
 *                  only the workers' pulls with rows); exactly once holds
 *
 * Free ports, bounded waits, every child reaped. */
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sodium.h>
#include <zmq.h>

#include "check.h"
#include "hostile.h"
#include "npy_write.h"
#include "ps_job.h"
#include "testutil.h"
#include "../../plugins/strategy/ps/ps_part.h"
#include "../../plugins/strategy/ps/ps_wire.h"
#include "../../plugins/transport/zmq/wire.h"

#define DATA "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
#define P2P_FLAG 0x50 /* zmq.so p2p.h: a point-to-point DATA message */

static const char *g_scenario;

/* ---- reading the tasks' output --------------------------------------- */

static double test_accuracy(const char *out)
{
    const char *p = strstr(out, "done: ");
    p = p ? strstr(p, "test accuracy ") : NULL;
    return p ? atof(p + strlen("test accuracy ")) : -1.0;
}

typedef struct counts {
    long long applied, dups, malformed;
} counts_t;

/* The line a ps prints at exit: "ps:0 applied N steps, D duplicates
 * discarded, M malformed messages dropped". */
static int ps_counts(const char *err, const char *name, counts_t *c)
{
    char key[64];
    snprintf(key, sizeof key, "%s applied ", name);
    const char *p = strstr(err, key);
    return p && sscanf(p + strlen(key), "%lld steps, %lld duplicates discarded, "
                       "%lld malformed", &c->applied, &c->dups,
                       &c->malformed) == 3 ? 0 : -1;
}

static void dump(const job_t *j)
{
    for (int i = 0; i < j->n; i++)
        fprintf(stderr, "---- %s:%d (exit %d)\n%s%s", j->t[i].type,
                j->t[i].index, j->t[i].code, j->t[i].out, j->t[i].err);
}

/* Every ps applied exactly `steps` (the coordinator agrees). */
static void exactly_once(const job_t *j, long long steps, int nps)
{
    for (int k = 0; k < nps; k++) {
        char name[16];
        snprintf(name, sizeof name, "ps:%d", k);
        counts_t c;
        int i = job_task(j, "ps", k);
        CHECKF(ps_counts(j->t[i].err, name, &c) == 0 && c.applied == steps,
               "%s: applied %lld, want %lld", name, c.applied, steps);
    }
    CHECKF(strstr(j->t[0].err, "exactly once: each of the") != NULL,
           "coordinator did not confirm exactly once");
}

static void all_ok(const job_t *j)
{
    for (int i = 0; i < j->n; i++)
        CHECKF(j->t[i].code == 0, "%s:%d exit %d", j->t[i].type,
               j->t[i].index, j->t[i].code);
}

/* ---- scenarios ------------------------------------------------------- */

static char *k_common[] = {
    "strategy.plugin=ps", "transport.plugin=zmq", "train.devices=cpu:0",
    "train.progress=line", "strategy.heartbeat_ms=250",
};
#define NCOMMON 5

static void sets_with(char **out, int *n, char *const *more, int nmore)
{
    *n = 0;
    for (int i = 0; i < NCOMMON; i++)
        out[(*n)++] = k_common[i];
    for (int i = 0; i < nmore; i++)
        out[(*n)++] = more[i];
}

/* A job of a chief, nw workers and nps ps tasks with the common settings
 * and `more`, every task started. */
static void job_run(job_t *j, int nw, int nps, char *const *more, int nmore)
{
    char *sets[JOB_SETS];
    int n;
    sets_with(sets, &n, more, nmore);
    job_init(j, nw, nps, sets, n);
    job_start_all(j);
}

static int launch(char *const *args, spawn_result_t *r, int timeout_s)
{
    char *argv[48] = { (char *)spawn_strata_bin(), "launch" };
    int a = 2;
    for (int i = 0; args[i] && a < 46; i++)
        argv[a++] = args[i];
    return spawn_run(argv, timeout_s, r);
}

static void roles(void)
{
    spawn_result_t *r = malloc(sizeof *r);
    char *no_ps[] = { "--workers", "2", "--set", "strategy.plugin=ps", "--set",
                      "transport.plugin=zmq", "--set", "data.limit_train=1000",
                      NULL };
    launch(no_ps, r, 60);
    CHECKF(r->code != 0 && strstr(r->err, "needs at least one ps task"),
           "no ps: exit %d\n%s", r->code, r->err);
    char *no_worker[] = { "--ps", "1", "--workers", "1", "--set",
                          "strategy.plugin=ps", "--set", "transport.plugin=zmq",
                          "--set", "data.limit_train=1000", NULL };
    launch(no_worker, r, 60);
    CHECKF(r->code != 0 && strstr(r->err, "0 workers besides worker:0"),
           "no worker: exit %d\n%s", r->code, r->err);
    char *bad_part[] = { "--ps", "1", "--workers", "1", "--chief", "--set",
                         "strategy.plugin=ps", "--set", "transport.plugin=zmq",
                         "--set", "strategy.partitioner=fixed:0", NULL };
    launch(bad_part, r, 60);
    /* once for the job (every task finds it; launch shows it once), and
     * where it was set */
    const char *pe = strstr(r->err, "--set: [strategy] partitioner = "
                                    "'fixed:0': ");
    CHECKF(r->code == 2 && pe && !strstr(pe + 40, "partitioner = 'fixed:0'") &&
               strstr(r->err, "not shown again"),
           "bad partitioner: exit %d\n%s", r->code, r->err);
    char *too_many[] = { "--ps", "1", "--workers", "2", "--chief", "--set",
                         "strategy.plugin=ps", "--set",
                         "strategy.min_workers=3", "--set",
                         "train.lr_scaling=linear", NULL };
    launch(too_many, r, 60);
    CHECKF(r->code == 2 && strstr(r->err, "[strategy.ps] min_workers = 3, "
                                  "but the job has 2 workers"),
           "min_workers > workers: exit %d\n%s", r->code, r->err);
    /* linear scaling under ps: one warning, from the coordinator */
    const char *w = strstr(r->err, "[train] lr_scaling = linear: a ps step");
    CHECKF(w && !strstr(w + 1, "[train] lr_scaling = linear: a ps step"),
           "lr_scaling warning once:\n%s", r->err);
    char *single[] = { (char *)spawn_strata_bin(), "train", "--set",
                       "strategy.plugin=ps", "--set", "data.limit_train=1000",
                       NULL };
    spawn_run(single, 60, r);
    CHECKF(r->code != 0 && strstr(r->err, "needs at least one ps task"),
           "one process: exit %d\n%s", r->code, r->err);
    /* No chief: worker 0 coordinates (SLURM's layout), the others train. */
    char *no_chief[] = { "--ps", "1", "--workers", "3", "--set",
                         "strategy.plugin=ps", "--set", "transport.plugin=zmq",
                         "--set", "train.devices=cpu:0, cpu:1", "--set",
                         "data.limit_train=3200", "--set", "train.epochs=2",
                         "--set", "strategy.partitioner=max_size:64K", NULL };
    launch(no_chief, r, 90);
    CHECKF(r->code == 0, "no chief: exit %d\n%s", r->code, r->err);
    CHECKF(strstr(r->err, "[ps:0] strata: ps: ps:0 applied 200 steps, 0 "
                  "duplicates discarded, 0 malformed") != NULL,
           "no chief: ps:0 counts\n%s", r->err);
    CHECKF(strstr(r->err, "exactly once") && strstr(r->err, "worker:2 ran "),
           "no chief:\n%s", r->err);
    /* Stale-synchronous: with 3 workers a bound of 1 version refuses many
     * pushes; each refused step is re-run, and still applied once. */
    char *ssp[] = { "--ps", "2", "--workers", "3", "--chief", "--set",
                    "strategy.plugin=ps", "--set", "transport.plugin=zmq",
                    "--set", "train.devices=cpu:0", "--set",
                    "data.limit_train=6400", "--set", "train.epochs=1", "--set",
                    "strategy.max_staleness=1", NULL };
    launch(ssp, r, 90);
    CHECKF(r->code == 0, "max_staleness=1: exit %d\n%s", r->code, r->err);
    const char *st = strstr(r->err, "[ps:0] strata: ps: ps:0 applied 200 steps");
    st = st ? strstr(st, "malformed messages dropped (") : NULL;
    long long refused = st ? atoll(st + strlen("malformed messages dropped (")) : -1;
    printf("max_staleness=1: ps:0 refused %lld stale pushes\n", refused);
    CHECKF(refused > 0, "no push refused as stale\n%s", r->err);
    CHECKF(strstr(r->err, "exactly once: each of the 2 ps tasks applied every "
                  "one of the 200 scheduled steps once") != NULL,
           "max_staleness=1:\n%s", r->err);
    free(r);
}

/* Kill worker:1 at a random point mid-epoch; returns the final accuracy. */
static double killed_run(const char *ini, char **sets, int nsets,
                         unsigned seed, long long steps)
{
    job_t j;
    job_init(&j, 3, 2, sets, nsets);
    j.config = ini;
    job_start_all(&j);
    srand(seed);
    int epoch = 2 + rand() % 3; /* after the line of epoch 2, 3 or 4 */
    double pause = 0.2 + (rand() % 600) / 1000.0;
    char line[32];
    snprintf(line, sizeof line, "Epoch %d/5", epoch);
    CHECKF(job_await(&j, 0, 1, line, 200) == 0, "no '%s'", line);
    usleep((useconds_t)(pause * 1e6));
    printf("kill -9 worker:1 %.2f s after '%s' (seed %u)\n", pause, line, seed);
    job_kill(&j, job_task(&j, "worker", 1));
    for (int i = 0; i < j.n; i++)
        job_wait(&j, i, 240);
    CHECKF(j.t[0].code == 0, "coordinator exit %d", j.t[0].code);
    for (int i = 0; i < j.n; i++)
        if (i != job_task(&j, "worker", 1))
            CHECKF(j.t[i].code == 0, "%s:%d exit %d", j.t[i].type,
                   j.t[i].index, j.t[i].code);
    CHECKF(strstr(j.t[0].err, "worker:1 (127.0.0.1:") && strstr(j.t[0].err,
           "lost: no heartbeat"), "coordinator did not see worker:1 go");
    /* Its step comes back either way: the heartbeat expires ("its worker
     * was lost"), or the coordinator fails to hand the dead worker its next
     * step first ("could not hand it over"). */
    const char *re = strstr(j.t[0].err, "of worker:1 re-scheduled: ");
    CHECKF(re != NULL, "no re-scheduled step of worker:1 in the coordinator's "
           "log");
    if (re) {
        const char *l = re;
        while (l > j.t[0].err && l[-1] != '\n')
            l--;
        printf("coordinator: %.*s\n", (int)(strchr(re, '\n') - l), l);
    }
    exactly_once(&j, steps, 2);
    double acc = test_accuracy(j.t[0].out);
    if (check_failed_ || getenv("PS_TEST_VERBOSE"))
        dump(&j);
    job_free(&j);
    return acc;
}

static void accuracy_kill(void)
{
    char ini[4096];
    const char *src = getenv("STRATA_SRC");
    snprintf(ini, sizeof ini, "%s/etc/ps.ini", src ? src : ".");
    /* etc/ps.ini with a batch of 64 and half its learning rate: half the
     * steps, and a final accuracy that varies less from run to run
     * (asynchronous runs differ), so that 1% tells a fault's harm apart. */
    char *args[] = { "--ps", "2", "--workers", "3", "--chief", "-c", ini,
                     "--set", "train.batch_size=64", "--set",
                     "optimizer.lr=0.0005", "--set", "train.progress=line",
                     NULL };
    spawn_result_t *r = malloc(sizeof *r);
    launch(args, r, 240);
    double base = test_accuracy(r->out);
    printf("fault-free: test accuracy %.4f\n", base);
    CHECKF(r->code == 0, "launch exit %d\n%s", r->code, r->err);
    CHECKF(base >= 0.85, "test accuracy %.4f < 0.85\n%s", base, r->out);
    const long long steps = 5 * (60000 / 64);
    char want[128];
    for (int k = 0; k < 2; k++) {
        snprintf(want, sizeof want, "[ps:%d] strata: ps: ps:%d applied %lld "
                 "steps, 0 duplicates discarded, 0 malformed", k, k, steps);
        CHECKF(strstr(r->err, want) != NULL, "missing '%s'", want);
    }
    free(r);

    char *more[] = { "train.batch_size=64", "optimizer.lr=0.0005" };
    char *sets[JOB_SETS];
    int n;
    sets_with(sets, &n, more, 2);
    double acc = killed_run(ini, sets, n, 20240611u, steps);
    printf("worker:1 killed: test accuracy %.4f (fault-free %.4f)\n", acc, base);
    CHECKF(acc >= 0 && fabs(acc - base) <= 0.01,
           "accuracy %.4f is not within 1%% of the fault-free %.4f", acc, base);
}

/* Kill worker:1 `times` times, restarting it each time. */
static void restart(int times)
{
    char *more[] = { "train.epochs=2", "strategy.timeout_s=30",
                     "strategy.partitioner=fixed:2" };
    job_t j;
    job_run(&j, 3, 2, more, 3);
    int w1 = job_task(&j, "worker", 1);
    CHECK(job_await(&j, 0, 0, "worker:1 registered", 60) == 0);
    for (int k = 0; k < times; k++) {
        usleep(1200000);
        printf("kill -9 worker:1 (%d of %d), restart it\n", k + 1, times);
        job_kill(&j, w1);
        usleep(300000);
        CHECK(job_start(&j, w1) == 0);
        char want[64];
        snprintf(want, sizeof want, "rejoined after a restart (%d so far)",
                 k + 1);
        CHECKF(job_await(&j, 0, 0, want, 60) == 0, "no '%s'", want);
    }
    job_wait_all(&j, 240);
    all_ok(&j);
    exactly_once(&j, 2 * 1875, 2);
    const char *ran = strstr(j.t[w1].err, "worker:1 ran ");
    long long nsteps = ran ? atoll(ran + strlen("worker:1 ran ")) : 0;
    printf("restarted worker:1 ran %lld steps\n", nsteps);
    CHECKF(nsteps > 0, "the restarted worker got no work");
    if (check_failed_ || getenv("PS_TEST_VERBOSE"))
        dump(&j);
    job_free(&j);
}

static void pskill(void)
{
    char *more[] = { "train.epochs=5", "strategy.timeout_s=3" };
    job_t j;
    job_run(&j, 3, 2, more, 2);
    CHECK(job_await(&j, 0, 0, "registered", 60) == 0);
    usleep(1500000);
    int ps1 = job_task(&j, "ps", 1);
    job_kill(&j, ps1);
    double waited = job_wait(&j, 0, 3 + 10);
    printf("ps:1 killed: coordinator exit %d after %.1f s\n", j.t[0].code,
           waited);
    CHECKF(j.t[0].code != 0 && j.t[0].code < 128,
           "coordinator exit %d (want a clean non-zero exit)", j.t[0].code);
    CHECKF(waited <= 3 + 4, "coordinator took %.1f s", waited);
    CHECKF(strstr(j.t[0].err, "ps:1 (127.0.0.1:") != NULL,
           "the coordinator does not name ps:1:\n%s", j.t[0].err);
    /* the others stop too (ABORT, or their own deadlines) */
    for (int i = 1; i < j.n; i++) {
        double w = job_wait(&j, i, 15);
        CHECKF(i == ps1 || (j.t[i].code != 0 && j.t[i].code < 128 && w < 14),
               "%s:%d exit %d after %.1f s", j.t[i].type, j.t[i].index,
               j.t[i].code, w);
    }
    if (check_failed_ || getenv("PS_TEST_VERBOSE"))
        dump(&j);
    job_free(&j);
}

/* Every worker killed mid-training: the coordinator stops the job once no
 * worker has been alive for strategy.timeout_s, with ONE error line and a
 * non-zero exit (it used to log that line at every tick and never stop),
 * and the ps tasks stop with it. */
static void allgone(int min_workers)
{
    char mw[48];
    snprintf(mw, sizeof mw, "strategy.min_workers=%d", min_workers);
    char *more[] = { "train.epochs=5", "strategy.timeout_s=3", mw };
    job_t j;
    job_run(&j, 2, 2, more, 3);
    CHECK(job_await(&j, 0, 1, "Epoch 1/5", 60) == 0);
    usleep(500000);
    /* min_workers 1: every worker dies; 2: one of the two. */
    if (min_workers == 1)
        job_kill(&j, job_task(&j, "worker", 0));
    job_kill(&j, job_task(&j, "worker", 1));
    double waited = job_wait(&j, 0, 3 + 20);
    printf("min_workers %d, below it: coordinator exit %d after %.1f s\n", min_workers,
           j.t[0].code, waited);
    CHECKF(j.t[0].code != 0 && j.t[0].code < 128,
           "coordinator exit %d (want a clean non-zero exit)", j.t[0].code);
    CHECKF(waited <= 3 + 15, "coordinator took %.1f s", waited);
    const char *why = min_workers == 1 ? "no worker alive"
                                       : "only 1 of 2 workers alive";
    int lines = 0;
    for (const char *p = j.t[0].err; (p = strstr(p, why)); p++)
        lines++;
    CHECKF(lines == 1, "'%s' logged %d times:\n%.2000s", why, lines,
           j.t[0].err);
    for (int k = 0; k < 2; k++) {
        int i = job_task(&j, "ps", k);
        double w = job_wait(&j, i, 15);
        CHECKF(j.t[i].code != 0 && j.t[i].code < 128 && w < 14,
               "ps:%d exit %d after %.1f s", k, j.t[i].code, w);
    }
    if (check_failed_ || getenv("PS_TEST_VERBOSE"))
        dump(&j);
    job_free(&j);
}

/* Under strata launch, a worker killed with -9 is not the job's end: with
 * --max-restarts launch starts it again alone and it rejoins; without, the
 * job finishes without it. Either way launch exits 0 and every ps applied
 * every scheduled step exactly once. Without a chief, worker:0 coordinates:
 * its death restarts the whole job (coord = 1). */
static void launch_worker_kill(int restarts, int coord)
{
    char r[8];
    snprintf(r, sizeof r, "%d", restarts);
    const char *victim = coord ? "[launch] worker:0: pid "
                               : "[launch] worker:1: pid ";
    char *argv[32] = { (char *)spawn_strata_bin(), "launch", "--ps", "1",
                       "--workers", coord ? "3" : "2", "--max-restarts", r };
    int a = 8;
    if (!coord)
        argv[a++] = "--chief";
    char *sets[] = { "strategy.plugin=ps", "train.epochs=4",
                     "data.limit_train=12000", "train.eval=false",
                     "train.progress=none", "strategy.timeout_s=10",
                     "debug.step_delay_ms=2" };
    for (size_t k = 0; k < sizeof sets / sizeof *sets; k++) {
        argv[a++] = "--set";
        argv[a++] = sets[k];
    }
    argv[a] = NULL;
    spawn_child_t c;
    CHECK(spawn_start(argv, NULL, &c) == 0);
    char out[65536] = "", err[65536] = "";
    long pid = 0;
    for (int i = 0; i < 300 && !pid; i++) {
        usleep(100000);
        spawn_read_file_(c.outp, out, sizeof out);
        spawn_read_file_(c.errp, err, sizeof err);
        const char *p = strstr(out, victim);
        pid = p && strstr(err, "worker:1 registered")
                  ? atol(p + strlen(victim)) : 0;
    }
    CHECKF(pid > 0, "no %s training under launch:\n%s", victim, out);
    usleep(500000);
    if (pid > 0)
        kill((pid_t)pid, SIGKILL);
    spawn_wait(&c, 240);
    spawn_collect(&c, out, sizeof out, err, sizeof err);
    int starts = 0;
    for (const char *p = out; (p = strstr(p, victim)); p++)
        starts++;
    CHECKF(c.code == 0, "launch exit %d after %s was killed:\n%s", c.code,
           victim, err);
    if (coord) {
        CHECKF(starts == 2 && strstr(err, "restart 1/2: the job failed") &&
               !strstr(err, "restarting it alone"),
               "the coordinating worker:0 was not restarted with its job "
               "(%d starts):\n%s", starts, err);
        return;
    }
    CHECKF(strstr(err, "exactly once: each of the 1 ps tasks"),
           "no exactly-once line:\n%s", err);
    if (restarts)
        CHECKF(starts == 2 && strstr(err, "worker:1 failed (exit 137); "
                                     "restarting it alone"),
               "worker:1 started %d times:\n%s", starts, err);
    else
        CHECKF(starts == 1 && strstr(err, "the job goes on without it"),
               "worker:1 started %d times:\n%s", starts, err);
    printf("launch, worker:1 killed, --max-restarts %d: exit %d, worker:1 "
           "started %d times\n", restarts, c.code, starts);
}

static uint32_t tag_hash(const char *tag)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *s = (const unsigned char *)tag; *s; s++)
        h = (h ^ *s) * 16777619u;
    return h & 0x7fffffffu;
}

/* One p2p message from member `sender` (zmq.so framing, p2p.h). */
static void raw(void *s, int sender, const void *msg, size_t len)
{
    strz_hdr_t h = { .type = STRZ_DATA, .flags = P2P_FLAG, .sender = sender,
                     .offset = len < PS_HDR_SIZE ? len : PS_HDR_SIZE,
                     .length = (uint32_t)len, .aux = (int32_t)tag_hash("ps") };
    unsigned char hb[STRZ_HDR_SIZE];
    strz_wire_pack(&h, hb);
    zmq_send(s, hb, sizeof hb, ZMQ_SNDMORE);
    zmq_send(s, msg, h.offset, ZMQ_SNDMORE);
    zmq_send(s, (const char *)msg + h.offset, len - h.offset, 0);
}

static size_t ps0_values(const char *spec)
{
    ps_part_t p;
    ps_place_t pl;
    char why[128];
    if (ps_part_parse(spec, &p, why, sizeof why) || ps_place_init(&pl, 2))
        return 0;
    int64_t k0[2] = { 784, 128 }, b0[1] = { 128 }, k1[2] = { 128, 10 },
            b1[1] = { 10 };
    ps_place_var(&pl, &p, 0, k0, 2, 0, 784 * 128);
    ps_place_var(&pl, &p, 1, b0, 1, 100352, 128);
    ps_place_var(&pl, &p, 2, k1, 2, 100480, 1280);
    ps_place_var(&pl, &p, 3, b1, 1, 101760, 10);
    size_t n = pl.ps_count[0];
    ps_place_free(&pl);
    return n;
}

/* What the ps refuses on its own, beneath the transport's authentication:
 * the job runs in plaintext here ([security] mode = off), so that a raw
 * socket reaches the ps at all (the "stranger" scenario is the secured
 * job, which such a socket never reaches). */
static void replay(void)
{
    char *more[] = { "train.epochs=3", "data.limit_train=12000",
                     "strategy.partitioner=fixed:3", "security.mode=off" };
    job_t j;
    job_run(&j, 3, 2, more, 4);
    CHECK(job_await(&j, 0, 1, "Epoch 1/3", 120) == 0);
    int ps0 = job_task(&j, "ps", 0), w0 = job_task(&j, "worker", 0);
    void *zc = zmq_ctx_new(), *s = zmq_socket(zc, ZMQ_DEALER);
    int linger = 2000;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", j.t[ps0].port);
    CHECK(zmq_connect(s, ep) == 0);
    size_t count = ps0_values("fixed:3");
    size_t len = PS_HDR_SIZE + count * sizeof(float);
    unsigned char *msg = calloc(1, len);
    zmq_send(s, "junk", 4, 0);                    /* transport drops it   */
    /* In the coordinator's name (member 0), without its lease key: a
     * state of 1e3 everywhere, the end of the job, an abort, a new key. */
    ps_hdr_t cput = { .type = PS_STATE_PUT, .sender = 0, .step = 0, .req = 7,
                      .count = (uint32_t)count };
    for (size_t i = 0; i < count; i++)
        memcpy(msg + PS_HDR_SIZE + 4 * i, &(float){ 1e3f }, 4);
    ps_wire_pack(&cput, msg);
    raw(s, 0, msg, len);
    ps_hdr_t fin = { .type = PS_FINISH, .sender = 0, .step = -1, .req = 8 };
    ps_wire_pack(&fin, msg);
    raw(s, 0, msg, PS_HDR_SIZE);
    ps_hdr_t ab = { .type = PS_ABORT, .sender = 0, .step = -1, .req = 9,
                    .a = -1 };
    ps_wire_pack(&ab, msg);
    raw(s, 0, msg, PS_HDR_SIZE);
    ps_hdr_t pk = { .type = PS_PING, .sender = 0, .step = -1, .req = 10,
                    .a = 1, .b = 2 };
    ps_wire_pack(&pk, msg);
    raw(s, 0, msg, PS_HDR_SIZE);
    ps_hdr_t sv = { .type = PS_STATE_SAVE, .sender = 0, .step = 5, .req = 11,
                    .a = 1, .b = 2, .c = 2 };     /* write a checkpoint part */
    ps_wire_pack(&sv, msg);
    raw(s, 0, msg, PS_HDR_SIZE);
    ps_hdr_t push = { .type = PS_PUSH, .sender = w0, .attempt = 1, .step = 0,
                      .req = 1, .a = 0, .f = 0.5, .count = (uint32_t)count };
    ps_wire_pack(&push, msg);
    msg[0] = 'X';
    raw(s, w0, msg, len);                         /* bad magic: malformed */
    ps_wire_pack(&push, msg);
    raw(s, w0, msg, len - 4);                     /* count lies: malformed */
    ps_hdr_t ping = { .type = PS_PING, .sender = w0, .step = -1 };
    ps_wire_pack(&ping, msg);
    raw(s, w0, msg, PS_HDR_SIZE);                 /* PING from a worker   */
    for (size_t i = 0; i < count; i++)            /* a gradient that would */
        memcpy(msg + PS_HDR_SIZE + 4 * i, &(float){ 1e3f }, 4); /* ruin it */
    ps_wire_pack(&push, msg);
    raw(s, w0, msg, len);                         /* replay of step 0     */
    push.attempt = 2;
    ps_wire_pack(&push, msg);
    raw(s, w0, msg, len);                         /* a late second attempt */
    push.step = 3 * 375 - 1;                      /* a step not run yet:  */
    push.attempt = 1;                             /* without the lease    */
    ps_wire_pack(&push, msg);                     /* check it would be    */
    raw(s, w0, msg, len);                         /* applied, and the real */
                                                  /* one discarded        */
    ps_hdr_t put = { .type = PS_STATE_PUT, .sender = w0, .step = 0, .b = 0,
                     .count = (uint32_t)count };
    ps_wire_pack(&put, msg);
    raw(s, w0, msg, len);                         /* a worker may not restore */
    ps_hdr_t get = { .type = PS_STATE_REQ, .sender = w0, .step = -1 };
    ps_wire_pack(&get, msg);
    raw(s, w0, msg, PS_HDR_SIZE);                 /* nor read the state     */
    sv.sender = w0;
    ps_wire_pack(&sv, msg);
    raw(s, w0, msg, PS_HDR_SIZE);                 /* nor have it written    */
    free(msg);
    zmq_close(s);
    zmq_ctx_term(zc);
    job_wait_all(&j, 240);
    all_ok(&j);
    exactly_once(&j, 3 * 375, 2);
    counts_t c = { -1, -1, -1 };
    CHECK(ps_counts(j.t[ps0].err, "ps:0", &c) == 0);
    printf("ps:0: applied %lld, %lld duplicates, %lld malformed\n", c.applied,
           c.dups, c.malformed);
    /* Every forged push is refused by its lease (none is a duplicate):
     * bad magic, short count, PING, the three pushes, STATE_PUT,
     * STATE_REQ, STATE_SAVE; the coordinator's forged STATE_PUT, FINISH,
     * ABORT, PING and STATE_SAVE by their tags. */
    CHECKF(c.dups == 0 && c.malformed == 14, "ps:0 counters");
    CHECKF(strstr(j.t[ps0].err, "its lease is not the coordinator's"),
           "the ps did not name the lease");
    CHECKF(strstr(j.t[ps0].err, "dropped STATE_PUT from chief:0: its tag is "
                                "not the coordinator's (forged)") &&
           strstr(j.t[ps0].err, "dropped FINISH from chief:0: its tag") &&
           strstr(j.t[ps0].err, "dropped ABORT from chief:0: its tag") &&
           strstr(j.t[ps0].err, "dropped STATE_SAVE from chief:0: its tag") &&
           !strstr(j.t[ps0].err, "part of the checkpoint") &&
           strstr(j.t[ps0].err, "dropped PING from chief:0: a lease key "
                                "other than the coordinator's"),
           "the ps did not name the forged control messages");
    CHECKF(strstr(j.t[ps0].err, "p2p: dropped a malformed message") != NULL,
           "the transport did not report the junk frame");
    double acc = test_accuracy(j.t[0].out);
    CHECKF(acc > 0.75, "accuracy %.4f: the replayed push did harm", acc);
    if (check_failed_ || getenv("PS_TEST_VERBOSE"))
        dump(&j);
    job_free(&j);
}

/* Batchnorm under ps (plugin ABI 2.8): the workers' STEP_REQs carry their
 * moving statistics to the coordinator. In plaintext, STEP_REQs forged in
 * worker:0's name at the coordinator's port -- a result with one state too
 * few, and one with the right count but a NaN among them -- are dropped
 * and counted (the coordinator names each), never installed: the job
 * ends as ever and its checkpoint's moving statistics are finite and none
 * of the forged 1e3. worker:1, killed and restarted, starts from the
 * coordinator's statistics of the newest step (not from (0, 1)). */
static void bn_hostile(void)
{
    tmp_make("ps-bn");
    char ck[320];
    snprintf(ck, sizeof ck, "checkpoint.dir=%s/ck", tmpdir_);
    FILE *f = fopen(tmp_path("bn.ini"), "w");
    CHECK(f && fputs("[graph]\nflat = flatten\nd1 = dense 128\n"
                     "bn = batchnorm\na1 = relu\nlogits = dense 10\n", f) >= 0
          && fclose(f) == 0);
    /* worker:0 is slowed so that the job cannot end before the killed
     * worker:1 is back (a process start under load takes a second):
     * the restarted worker then always runs steps. */
    char *more[] = { "train.epochs=3", "data.limit_train=12800",
                     "security.mode=off", ck, "debug.step_delay_ms=5",
                     "debug.delay_task=worker:0" };
    job_t j;
    char *sets[JOB_SETS];
    int n;
    sets_with(sets, &n, more, 6);
    job_init(&j, 2, 1, sets, n);
    j.config = tmp_path("bn.ini");
    job_start_all(&j);
    CHECK(job_await(&j, 0, 1, "Epoch 1/3", 120) == 0);
    int w0 = job_task(&j, "worker", 0);
    void *zc = zmq_ctx_new(), *s = zmq_socket(zc, ZMQ_DEALER);
    int linger = 2000;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", j.t[0].port);
    CHECK(zmq_connect(s, ep) == 0);
    enum { NST = 2 * 128 }; /* bn's moving mean and variance */
    size_t len = PS_HDR_SIZE + NST * sizeof(float);
    unsigned char *msg = calloc(1, len);
    for (size_t i = 0; i < NST; i++)
        memcpy(msg + PS_HDR_SIZE + 4 * i, &(float){ 1e3f }, 4);
    ps_hdr_t q = { .type = PS_STEP_REQ, .sender = w0, .attempt = 1,
                   .step = 0, .req = 3, .a = 32, .c = 1, .f = 1.0,
                   .count = NST - 1 };
    ps_wire_pack(&q, msg);
    raw(s, w0, msg, len - 4);                     /* one state too few   */
    q.count = NST;
    memcpy(msg + PS_HDR_SIZE + 4 * 7, &(float){ NAN }, 4);
    ps_wire_pack(&q, msg);
    raw(s, w0, msg, len);                         /* a NaN among them    */
    free(msg);
    zmq_close(s);
    zmq_ctx_term(zc);
    /* a restarted worker starts from the newest step's statistics */
    int w1 = job_task(&j, "worker", 1);
    usleep(300000);
    job_kill(&j, w1);
    usleep(200000);
    CHECK(job_start(&j, w1) == 0);
    CHECKF(job_await(&j, 0, 0, "rejoined after a restart (1 so far)", 60) == 0,
           "worker:1 did not rejoin");
    job_wait_all(&j, 240);
    all_ok(&j);
    const char *took = "layer states (256) taken from the coordinator "
                       "before step ";
    const char *t1 = strstr(j.t[w1].err, took);
    const char *t2 = t1 ? strstr(t1 + 1, took) : NULL;
    long long again = t2 ? atoll(t2 + strlen(took)) : -1;
    printf("worker:1 restarted: took the coordinator's layer states before "
           "step %lld\n", again);
    CHECKF(again > 0, "the restarted worker:1 took no layer states");
    CHECKF(strstr(j.t[0].err, "coordinator: dropped STEP_REQ from worker:0: "
                              "255 layer states, the model has 256"),
           "the coordinator did not drop the short states");
    CHECKF(strstr(j.t[0].err, "dropped a malformed message from worker:0: a "
                              "layer state that is not finite"),
           "the coordinator did not drop the NaN state");
    CHECKF(strstr(j.t[w0].err, took),
           "worker:0 did not start from the coordinator's statistics");
    char path[400];
    snprintf(path, sizeof path, "%s/ck/ckpt-%010d.safetensors", tmpdir_,
             3 * 400);
    char *argv[] = { (char *)spawn_strata_bin(), "inspect", path, NULL };
    spawn_result_t *r = malloc(sizeof *r);
    spawn_run(argv, 60, r);
    const char *mv = strstr(r->out, "bn/moving_variance");
    double vmax = -1;
    const char *mx = mv ? strstr(mv, " max ") : NULL;
    if (mx)
        vmax = atof(mx + 5);
    printf("checkpoint %s: bn/moving_variance max %g\n", path, vmax);
    CHECKF(r->code == 0 && strstr(r->out, "bn/moving_mean") && mv &&
           !strstr(r->out, "nan") && vmax > 0 && vmax < 100,
           "the checkpoint's moving statistics:\n%s%s", r->out, r->err);
    free(r);
    if (check_failed_ || getenv("PS_TEST_VERBOSE"))
        dump(&j);
    job_free(&j);
    tmp_cleanup();
}

/* A secured job (the default: keys from strata keygen) and strangers at a
 * ps task's port while it trains: a plaintext socket sending junk and a
 * forged push of a huge gradient, and a CURVE client with a key of its own
 * (it knows the ps's public key, which is no secret) sending the same
 * push. Neither reaches the ps: the plaintext one fails the handshake, the
 * CURVE one is refused by the ZAP handler, counted and logged with its
 * address. The job ends exactly once and as accurate as without them. */
static void stranger(void)
{
    char *more[] = { "train.epochs=2", "data.limit_train=12000",
                     "strategy.partitioner=fixed:3" };
    job_t j;
    job_run(&j, 3, 2, more, 3);
    CHECK(job_await(&j, 0, 1, "Epoch 1/2", 120) == 0);
    int ps0 = job_task(&j, "ps", 0), w0 = job_task(&j, "worker", 0);
    char ep[64], pspub[41] = "", mypub[41], mysec[41], path[128];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", j.t[ps0].port);
    snprintf(path, sizeof path, "%s/ps-0.key", spawn_keys_dir_);
    CHECK(hostile_cert_key(path, pspub) == 0);
    CHECK(zmq_curve_keypair(mypub, mysec) == 0);
    void *zc = zmq_ctx_new();
    void *plain = zmq_socket(zc, ZMQ_DEALER), *curve = zmq_socket(zc, ZMQ_DEALER);
    int linger = 2000;
    zmq_setsockopt(plain, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(curve, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(curve, ZMQ_CURVE_SERVERKEY, pspub, 41);
    zmq_setsockopt(curve, ZMQ_CURVE_PUBLICKEY, mypub, 41);
    zmq_setsockopt(curve, ZMQ_CURVE_SECRETKEY, mysec, 41);
    CHECK(zmq_connect(plain, ep) == 0 && zmq_connect(curve, ep) == 0);
    size_t count = ps0_values("fixed:3");
    size_t len = PS_HDR_SIZE + count * sizeof(float);
    unsigned char *msg = calloc(1, len);
    for (size_t i = 0; i < count; i++)
        memcpy(msg + PS_HDR_SIZE + 4 * i, &(float){ 1e3f }, 4);
    ps_hdr_t push = { .type = PS_PUSH, .sender = w0, .attempt = 1, .step = 0,
                      .req = 1, .a = 0, .f = 0.5, .count = (uint32_t)count };
    ps_wire_pack(&push, msg);
    zmq_send(plain, "junk", 4, ZMQ_DONTWAIT);
    raw(plain, w0, msg, len);
    raw(curve, w0, msg, len);
    free(msg);
    job_wait_all(&j, 240);
    zmq_close(plain);
    zmq_close(curve);
    zmq_ctx_term(zc);
    all_ok(&j);
    exactly_once(&j, 2 * 375, 2);
    counts_t c = { -1, -1, -1 };
    CHECK(ps_counts(j.t[ps0].err, "ps:0", &c) == 0);
    CHECKF(c.dups == 0 && c.malformed == 0, "ps:0: %lld duplicates, %lld "
           "malformed: a stranger's message reached the ps", c.dups,
           c.malformed);
    CHECKF(strstr(j.t[ps0].err, "dropped a connection from 127.0.0.1") &&
           strstr(j.t[ps0].err, "refused by ZAP"),
           "the ps did not report the stranger's key");
    double acc = test_accuracy(j.t[0].out);
    CHECKF(acc > 0.75, "accuracy %.4f: a stranger's push did harm", acc);
    if (check_failed_ || getenv("PS_TEST_VERBOSE"))
        dump(&j);
    job_free(&j);
}

/* A plaintext job ([security] mode = off: a message's sender is what it
 * says) and ABORTs forged in the coordinator's name at both workers' ports
 * mid-training: each worker refuses them by their tag (not under the key
 * its STEP replies carry), counts and names them, and the job ends as
 * ever, every step applied once. */
static void forged_abort(void)
{
    char *more[] = { "train.epochs=3", "data.limit_train=12000",
                     "security.mode=off" };
    job_t j;
    job_run(&j, 2, 1, more, 3);
    /* in epoch 2: both workers have had steps, hence their keys */
    CHECK(job_await(&j, 0, 1, "Epoch 2/3", 120) == 0);
    void *zc = zmq_ctx_new();
    unsigned char msg[PS_HDR_SIZE];
    for (int w = 0; w < 2; w++) {
        void *s = zmq_socket(zc, ZMQ_DEALER);
        int linger = 2000;
        zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
        char ep[64];
        snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d",
                 j.t[job_task(&j, "worker", w)].port);
        CHECK(zmq_connect(s, ep) == 0);
        /* in the coordinator's name (member 0): a made-up tag, and 0 */
        for (int k = 0; k < 2; k++) {
            ps_hdr_t ab = { .type = PS_ABORT, .sender = 0, .step = -1,
                            .req = k ? 0 : 0x5eed, .a = -1 };
            ps_wire_pack(&ab, msg);
            raw(s, 0, msg, PS_HDR_SIZE);
        }
        zmq_close(s);
    }
    zmq_ctx_term(zc);
    job_wait_all(&j, 240);
    all_ok(&j);
    exactly_once(&j, 3 * 375, 1);
    for (int w = 0; w < 2; w++) {
        const job_task_t *t = &j.t[job_task(&j, "worker", w)];
        CHECKF(strstr(t->err, "dropped ABORT from chief:0: its tag is not "
                              "the coordinator's (forged)") &&
                   !strstr(t->err, "stopped the job"),
               "worker:%d did not refuse the forged ABORT", w);
    }
    if (check_failed_ || getenv("PS_TEST_VERBOSE"))
        dump(&j);
    job_free(&j);
}

/* ---- strangers, by kind ------------------------------------------------ */

#define KINDS_N 10

static int tcp_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* A CURVE client with a key of its own that tries once (no reconnect). */
static void zmq_once(void *zc, const char *ep, const char *pspub)
{
    void *s = zmq_socket(zc, ZMQ_DEALER);
    int no = -1, linger = 0;
    zmq_setsockopt(s, ZMQ_RECONNECT_IVL, &no, sizeof no);
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    if (pspub) {
        char pub[41], sec[41];
        zmq_curve_keypair(pub, sec);
        zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, pspub, 41);
        zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, pub, 41);
        zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sec, 41);
    }
    /* Closed once its handshake has failed (ZAP's refusal reaches the
     * client as an ERROR), not after a fixed time: a client that gave up
     * first, under load, was a connection closed before its handshake. */
    static int nmon;
    char mep[64];
    snprintf(mep, sizeof mep, "inproc://zmq-once-%d", nmon++);
    void *mon = NULL;
    if (zmq_socket_monitor(s, mep, ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                           ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                           ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                           ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                           ZMQ_EVENT_DISCONNECTED) == 0 &&
        (mon = zmq_socket(zc, ZMQ_PAIR)) != NULL && zmq_connect(mon, mep) != 0) {
        zmq_close(mon);
        mon = NULL;
    }
    zmq_connect(s, ep);
    if (mon) {
        zmq_pollitem_t it = { .socket = mon, .events = ZMQ_POLLIN };
        zmq_poll(&it, 1, 5000);
        zmq_socket_monitor(s, NULL, 0);
        zmq_setsockopt(mon, ZMQ_LINGER, &linger, sizeof linger);
        zmq_close(mon);
    } else {
        usleep(50000); /* the handshake is refused meanwhile */
    }
    zmq_close(s);
}

/* `len` bytes on a fresh connection, then read until the ps hangs up. */
static void said_until_eof(int port, const void *bytes, size_t len)
{
    int fd = tcp_to(port);
    if (fd < 0)
        return;
    if (write(fd, bytes, len) < 0)
        perror("write");
    struct timeval tv = { 3, 0 };
    char junk[64];
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    while (read(fd, junk, sizeof junk) > 0) {
    }
    close(fd);
}

/* A ZMTP 3.0 greeting asking for the NULL mechanism (a CURVE server's
 * peer must ask for CURVE). */
static const unsigned char null_greeting[64] = {
    0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0, 'N', 'U', 'L', 'L' };

/* KINDS_N strangers of each kind at `port`, whose CURVE server key is the
 * one in keys dir file `keyfile` ("ps-0.key"). */
static void strangers_at(void *zc, int port, const char *keyfile)
{
    char ep[64], pub[41] = "", path[128];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    snprintf(path, sizeof path, "%s/%s", spawn_keys_dir_, keyfile);
    CHECK(hostile_cert_key(path, pub) == 0);
    static const char http[] = "GET / HTTP/1.0\r\n\r\n";
    for (int i = 0; i < KINDS_N; i++) {
        int fd = tcp_to(port); /* silent */
        /* a moment before it closes, as a port scanner's: the task reads
         * its address while the connection is still there (one closed at
         * once is gone before its monitor event is read, and is named by
         * the port it came to) */
        usleep(50000);
        if (fd >= 0)
            close(fd);
        said_until_eof(port, http, sizeof http - 1); /* garbage */
        said_until_eof(port, null_greeting, sizeof null_greeting);
        zmq_once(zc, ep, pub); /* a key that is not the job's */
    }
}

/* The core's end-of-run line in `out` (stdout): its four counts, or -1s. */
static void core_line(const char *out, long long k[4])
{
    k[0] = k[1] = k[2] = k[3] = -1;
    const char *line = strstr(out, "strangers: ");
    if (line)
        sscanf(line, "strangers: %lld refused by key, %lld closed before a "
               "handshake, %lld not the transport's protocol, %lld bad "
               "messages", &k[0], &k[1], &k[2], &k[3]);
}

/* A warning that names the peer by address and port: "dropped a
 * connection from 127.0.0.1:PORT: closed before its handshake". */
static int names_peer(const char *err)
{
    static const char pre[] = "dropped a connection from 127.0.0.1:";
    for (const char *p = err; (p = strstr(p, pre)); p++) {
        const char *q = p + sizeof pre - 1;
        int digits = 0;
        while (*q >= '0' && *q <= '9')
            q++, digits++;
        if (digits && !strncmp(q, ": closed before its handshake", 29))
            return 1;
    }
    return 0;
}

static void stranger_kinds(void)
{
    /* long enough for the strangers: they come while it trains */
    tmp_make("ps-strangers");
    char tb[600], tbset[700];
    snprintf(tb, sizeof tb, "%s/tb", tmpdir_);
    snprintf(tbset, sizeof tbset, "train.tensorboard=%s", tb);
    char *more[] = { "train.epochs=5", "data.limit_train=12000", tbset };
    job_t j;
    job_run(&j, 2, 1, more, 3);
    CHECK(job_await(&j, 0, 1, "Epoch 1/5", 120) == 0);
    int ps0 = job_task(&j, "ps", 0), chief = job_task(&j, "chief", 0);
    void *zc = zmq_ctx_new();
    /* at the coordinator's port first: it writes TensorBoard, whose last
     * epoch must come after them; then at ps:0's */
    strangers_at(zc, j.t[chief].port, "chief-0.key");
    strangers_at(zc, j.t[ps0].port, "ps-0.key");
    zmq_ctx_term(zc);
    job_wait_all(&j, 240);
    all_ok(&j);
    exactly_once(&j, 5 * 375, 1);
    const char *line = strstr(j.t[ps0].err, "from outside the job were "
                                            "dropped: ");
    long long n = -1, key = -1, early = -1, garbage = -1, msgs = -1;
    if (line) {
        while (line > j.t[ps0].err && line[-1] != '\n')
            line--;
        sscanf(line, "strata: zmq: warning: %lld messages or connections "
               "from outside the job were dropped: %lld refused by their key, "
               "%lld closed before a handshake, %lld not ZeroMQ or of another "
               "mechanism, %lld messages", &n, &key, &early, &garbage, &msgs);
    }
    printf("ps:0: %lld strangers: %lld key, %lld early, %lld garbage or "
           "another mechanism, %lld messages\n", n, key, early, garbage, msgs);
    /* the HTTP requests and the NULL clients are one kind (strz.h) */
    CHECKF(key == KINDS_N && early == KINDS_N && garbage == 2 * KINDS_N &&
           msgs == 0 && n == 4 * KINDS_N,
           "ps:0's strangers by kind (want %d of each): %s", KINDS_N,
           line ? line : "no line");
    /* the core's end-of-run line, from the transport's counts (ABI 2.7) */
    const int want[4] = { KINDS_N, KINDS_N, 2 * KINDS_N, 0 };
    for (int t = 0; t < 2; t++) {
        int i = t ? chief : ps0;
        long long k[4];
        core_line(j.t[i].out, k);
        printf("%s:%d: the core's line: %lld refused by key, %lld closed "
               "early, %lld not the protocol, %lld bad messages\n",
               j.t[i].type, j.t[i].index, k[0], k[1], k[2], k[3]);
        CHECKF(k[0] == want[0] && k[1] == want[1] && k[2] == want[2] &&
               k[3] == want[3], "%s:%d: the core's strangers line: %lld, "
               "%lld, %lld, %lld (want %d, %d, %d, %d)", j.t[i].type,
               j.t[i].index, k[0], k[1], k[2], k[3], want[0], want[1],
               want[2], want[3]);
        CHECKF(strstr(j.t[i].err, "dropped a connection from 127.0.0.1") &&
               names_peer(j.t[i].err),
               "%s:%d did not name the strangers' address and port",
               j.t[i].type, j.t[i].index);
    }
    /* ps:0's port names a peer that is not ZeroMQ as it goes (it does
     * without HANDSHAKE_FAILED_PROTOCOL: a connection that ends with no
     * handshake result is one). Best effort: a peer already gone when its
     * address is read (slow runs, the sanitizers) is said to be so. */
    static const char from[] = "strata: zmq: warning: dropped a connection "
                               "from 127.0.0.1:";
    static const char gone[] = "strata: zmq: warning: dropped a connection "
                               "to tcp://127.0.0.1:";
    int named = 0;
    for (const char *nz = j.t[ps0].err;
         !named && (nz = strstr(nz, "no handshake (not ZeroMQ, or not "
                                    "CURVE)")); nz++) {
        const char *bol = nz;
        while (bol > j.t[ps0].err && bol[-1] != '\n')
            bol--;
        named = !strncmp(bol, from, strlen(from)) ||
                !strncmp(bol, gone, strlen(gone));
    }
    CHECKF(named, "ps:0 named no peer that is not ZeroMQ:\n%s",
           j.t[ps0].err);
    /* the workers met no stranger: no line */
    CHECKF(!strstr(j.t[job_task(&j, "worker", 0)].out, "strangers: "),
           "worker:0 printed a strangers line:\n%s",
           j.t[job_task(&j, "worker", 0)].out);
    /* the coordinator's TensorBoard: the strangers/ scalars at every epoch's end */
    const char *src = getenv("STRATA_SRC"), *py = getenv("STRATA_PYTHON");
    char script[600], ks[4][16];
    snprintf(script, sizeof script, "%s/tests/ps/strangers_tb.py",
             src ? src : ".");
    for (int k = 0; k < 4; k++)
        snprintf(ks[k], sizeof ks[k], "%d", want[k]);
    char *pargv[] = { "/usr/bin/env", py && *py ? (char *)py : "python3",
                      script, tb, "5", ks[0], ks[1], ks[2], ks[3], NULL };
    spawn_result_t *P = malloc(sizeof *P);
    CHECK(P && spawn_run(pargv, 120, P) == 0);
    if (P && P->code != 77) {
        printf("%s%s", P->out, P->err);
        CHECKF(P->code == 0, "strangers_tb.py exit %d", P->code);
    } else if (P) {
        printf("strangers_tb.py skipped: no tensorboard package\n");
    }
    free(P);
    if (check_failed_ || getenv("PS_TEST_VERBOSE"))
        dump(&j);
    job_free(&j);
    tmp_cleanup();
}

/* ---- a lossy link ------------------------------------------------------- */

/* A TCP proxy in front of ps:0 for worker:0. It reads the worker's side as
 * ZMTP 3 (a 64-byte greeting, then frames: flags, a 1- or 8-byte size, the
 * body) and forwards whole frames; the big ones (> 64 KiB) are pushes'
 * gradients. At big frame FAULT_AT[k] it does fault k: replays the
 * previous big frame first (CurveZMQ refuses an old nonce and drops the
 * link), drops the frame and resets both sides, or forwards half of it and
 * resets. A dropped link is accepted again: zmq reconnects. */
enum { F_REPLAY, F_DROP, F_HALF, NFAULTS };
static const long k_fault_at[NFAULTS] = { 3, 6, 9 };

typedef struct proxy {
    int        lfd, port, target;
    atomic_int stop;
    int        done[NFAULTS];
    long       big;
    size_t     big_bytes;    /* a frame above this is a push's */
    uint8_t   *prev;         /* the last big frame */
    size_t     prev_len;
    pthread_t  th;
} proxy_t;

static void hard_close(int fd)
{
    struct linger l = { 1, 0 }; /* RST, as a reset link */
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close(fd);
}

static int send_all(int fd, const uint8_t *b, size_t n)
{
    while (n > 0) {
        ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
        if (k <= 0)
            return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

/* One connection of worker:0 until either side closes or a fault. */
static void proxy_conn(proxy_t *x, int c)
{
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)x->target),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
        if (s >= 0)
            close(s);
        close(c);
        return;
    }
    size_t cap = 1 << 20, got = 0, greeting = 0;
    uint8_t *in = malloc(cap), buf[65536];
    int alive = in != NULL;
    while (alive && !atomic_load(&x->stop)) {
        struct pollfd p[2] = { { c, POLLIN, 0 }, { s, POLLIN, 0 } };
        if (poll(p, 2, 100) <= 0)
            continue;
        if (p[1].revents) { /* ps -> worker: as it is */
            ssize_t n = read(s, buf, sizeof buf);
            alive = n > 0 && send_all(c, buf, (size_t)n) == 0;
        }
        if (!alive || !p[0].revents)
            continue;
        if (got == cap && !(in = realloc(in, cap *= 2)))
            break;
        ssize_t n = read(c, in + got, cap - got);
        alive = n > 0;
        got += n > 0 ? (size_t)n : 0;
        if (greeting < 64) { /* forwarded as it comes: zmq negotiates */
            size_t g = got < 64 - greeting ? got : 64 - greeting;
            alive = alive && send_all(s, in, g) == 0;
            memmove(in, in + g, got - g);
            got -= g;
            greeting += g;
        }
        while (alive && greeting == 64 && got >= 2) {
            size_t hl = in[0] & 0x02 ? 9 : 2, len = 0;
            if (got < hl)
                break;
            for (size_t i = 1; i < hl; i++)
                len = len << 8 | in[i];
            if (len > (64u << 20)) { /* not ZMTP: give up */
                alive = 0;
                break;
            }
            if (got < hl + len)
                break;
            size_t n_fr = hl + len;
            int fault = -1;
            if (len > x->big_bytes) {
                x->big++;
                for (int k = 0; k < NFAULTS; k++)
                    if (x->big == k_fault_at[k] && !x->done[k])
                        fault = k;
            }
            if (fault == F_REPLAY && x->prev)
                send_all(s, x->prev, x->prev_len); /* then goes on */
            if (fault == F_DROP || fault == F_HALF) {
                if (fault == F_HALF)
                    send_all(s, in, n_fr / 2);
                x->done[fault] = 1;
                alive = 0;
                break;
            }
            if (fault == F_REPLAY)
                x->done[fault] = x->prev != NULL;
            if (len > x->big_bytes && (x->prev = realloc(x->prev, n_fr))) {
                memcpy(x->prev, in, n_fr);
                x->prev_len = n_fr;
            }
            alive = send_all(s, in, n_fr) == 0;
            memmove(in, in + n_fr, got - n_fr);
            got -= n_fr;
        }
    }
    free(in);
    hard_close(c);
    hard_close(s);
}

static void *proxy_main(void *arg)
{
    proxy_t *x = arg;
    while (!atomic_load(&x->stop)) {
        struct pollfd p = { x->lfd, POLLIN, 0 };
        if (poll(&p, 1, 100) <= 0)
            continue;
        int c = accept(x->lfd, NULL, NULL);
        if (c >= 0)
            proxy_conn(x, c);
    }
    return NULL;
}

static int proxy_start(proxy_t *x, int target)
{
    memset(x, 0, sizeof *x);
    x->target = target;
    x->big_bytes = 65536;
    x->port = spawn_free_port();
    x->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)x->port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int one = 1;
    setsockopt(x->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(x->lfd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(x->lfd, 8) != 0)
        return -1;
    return pthread_create(&x->th, NULL, proxy_main, x);
}

static void proxy_stop(proxy_t *x)
{
    atomic_store(&x->stop, 1);
    pthread_join(x->th, NULL);
    close(x->lfd);
    free(x->prev);
}

/* worker:0 reaches ps:0 at `port` (the proxy); the others as they are. */
static void through(job_t *j, int worker, int ps, int port)
{
    char from[32], to[32];
    snprintf(from, sizeof from, "\"127.0.0.1:%d\"", j->t[ps].port);
    snprintf(to, sizeof to, "\"127.0.0.1:%d\"", port);
    char *tf = j->t[worker].tf, *at = strstr(tf, from), out[sizeof j->t[0].tf];
    if (!at)
        return;
    snprintf(out, sizeof out, "%.*s%s%s", (int)(at - tf), tf, to,
             at + strlen(from));
    memcpy(tf, out, sizeof out);
}

static const char *emb_job(void);
static void went_as_rows(const char *ps_err, const char *w_err, int nps);

static void lossy(int sparse, int pieces)
{
    char *more[] = { "train.epochs=1", "data.limit_train=9600",
                     "strategy.ps.timeout_s=10", "strategy.ps.resend_ms=300",
                     "strategy.ps.piece_bytes=16K" };
    if (sparse) { /* 1600 samples: 6 epochs of 50 steps */
        tmp_make("ps-sparse-lossy");
        more[0] = "train.epochs=6";
        more[1] = "train.batch_size=32";
    }
    char *sets[JOB_SETS];
    int n;
    sets_with(sets, &n, more, 4 + pieces);
    job_t j;
    job_init(&j, 1, 1, sets, n); /* every push through the proxy */
    if (sparse)
        j.config = emb_job();
    int ps0 = job_task(&j, "ps", 0), w0 = job_task(&j, "worker", 0);
    proxy_t x;
    CHECK(proxy_start(&x, j.t[ps0].port) == 0);
    /* pushes of rows are a few KiB, PULLs of rows some 300 to 600 bytes
     * (the ids of a batch), whole PULLs 80: the faults (big frames 3, 6,
     * 9) hit pushes and pulls of rows alike */
    if (sparse)
        x.big_bytes = 256;
    through(&j, w0, ps0, x.port);
    job_start_all(&j);
    job_wait_all(&j, 240);
    proxy_stop(&x);
    all_ok(&j);
    exactly_once(&j, 300, 1);
    if (sparse)
        went_as_rows(j.t[ps0].err, j.t[w0].err, 1);
    long long resent = -1;
    const char *r = strstr(j.t[w0].err, "pushes refused as stale, ");
    if (r)
        resent = atoll(r + strlen("pushes refused as stale, "));
    printf("proxy: %ld big frames, faults replay %d drop %d half %d; "
           "worker:0 sent %lld requests again\n", x.big, x.done[F_REPLAY],
           x.done[F_DROP], x.done[F_HALF], resent);
    CHECKF(x.done[F_REPLAY] && x.done[F_DROP] && x.done[F_HALF],
           "the proxy did not get to every fault (%ld big frames)", x.big);
    CHECKF(resent >= NFAULTS && strstr(j.t[w0].err, "to PUSH ") &&
           strstr(j.t[w0].err, ": sent again"),
           "worker:0 sent %lld requests again", resent);
    CHECKF(!sparse || strstr(j.t[w0].err, "to PULL "),
           "no PULL of rows was sent again:\n%s", j.t[w0].err);
    /* every whole pull of the MLP (101 770 values) in 25 pieces of 16 KiB,
     * cut by the proxy's resets as they come (wire v9) */
    CHECKF(!pieces || strstr(j.t[ps0].err, " pieces sent"),
           "ps:0 sent no answer in pieces:\n%s", j.t[ps0].err);
    double acc = test_accuracy(j.t[0].out);
    CHECKF(sparse || acc > 0.6, "accuracy %.4f", acc);
    if (check_failed_ || getenv("PS_TEST_VERBOSE"))
        dump(&j);
    job_free(&j);
    if (sparse)
        tmp_cleanup();
}

/* ---- a state from outside the ledger ----------------------------------- */

/* A TCP proxy in front of ps:0 for the coordinator: bytes go both ways as
 * they are; the coordinator's side is read for the PING's header (its
 * lease key, in clear in plaintext mode). */
typedef struct sniffer {
    int        lfd, port, target;
    atomic_int stop, found;
    ps_hdr_t   ping;
    pthread_t  th;
} sniffer_t;

static void sniff(sniffer_t *x, const uint8_t *b, size_t n)
{
    for (size_t i = 0; !atomic_load(&x->found) && i + PS_HDR_SIZE <= n; i++) {
        ps_hdr_t h;
        const unsigned char *pl;
        const char *why;
        if (memcmp(b + i, "STPS", 4) != 0 || b[i + 6] != PS_PING ||
            ps_wire_unpack(b + i, PS_HDR_SIZE, &h, &pl, &why) != 0 ||
            (!h.a && !h.b))
            continue;
        x->ping = h;
        atomic_store(&x->found, 1);
    }
}

static void sniff_conn(sniffer_t *x, int c)
{
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)x->target),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int alive = s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0;
    static uint8_t seen[1 << 16];
    size_t have = 0;
    while (alive && !atomic_load(&x->stop)) {
        struct pollfd p[2] = { { c, POLLIN, 0 }, { s, POLLIN, 0 } };
        if (poll(p, 2, 100) <= 0)
            continue;
        uint8_t buf[65536];
        if (p[1].revents) {
            ssize_t n = read(s, buf, sizeof buf);
            alive = n > 0 && send_all(c, buf, (size_t)n) == 0;
        }
        if (alive && p[0].revents) {
            ssize_t n = read(c, buf, sizeof buf);
            alive = n > 0 && send_all(s, buf, (size_t)n) == 0;
            /* the last bytes and these: a header split across reads */
            if (alive && have + (size_t)n > sizeof seen) {
                size_t keep = PS_HDR_SIZE < have ? PS_HDR_SIZE : have;
                memmove(seen, seen + have - keep, keep);
                have = keep;
            }
            if (alive && have + (size_t)n <= sizeof seen) {
                memcpy(seen + have, buf, (size_t)n);
                have += (size_t)n;
                sniff(x, seen, have);
            }
        }
    }
    if (s >= 0)
        close(s);
    close(c);
}

static void *sniffer_main(void *arg)
{
    sniffer_t *x = arg;
    while (!atomic_load(&x->stop)) {
        struct pollfd p = { x->lfd, POLLIN, 0 };
        if (poll(&p, 1, 100) <= 0)
            continue;
        int c = accept(x->lfd, NULL, NULL);
        if (c >= 0)
            sniff_conn(x, c);
    }
    return NULL;
}

/* The coordinator's tag of a control message (ps_lease.c's tag_under):
 * SipHash-2-4 under the lease key, which the PING carried. */
static uint64_t coordinator_tag(const ps_hdr_t *ping, const ps_hdr_t *h,
                                int sender)
{
    unsigned char key[16], in[60], out[crypto_shorthash_BYTES];
    memcpy(key, &ping->a, 8);
    memcpy(key + 8, &ping->b, 8);
    int64_t v[6] = { h->type | (int64_t)sender << 8, (int64_t)h->incarnation,
                     h->step, h->a, h->b, h->c };
    uint32_t n[3] = { h->count, h->at, h->count }; /* whole: total = count */
    memcpy(in, v, sizeof v);
    memcpy(in + sizeof v, n, sizeof n);
    crypto_shorthash(out, in, sizeof in, key);
    uint64_t tag;
    memcpy(&tag, out, 8);
    return tag;
}

static void outside_ledger(void)
{
    CHECK(sodium_init() >= 0);
    char *more[] = { "train.epochs=1", "data.limit_train=600",
                     "strategy.partitioner=fixed:3", "security.mode=off",
                     "debug.step_delay_ms=500", "debug.delay_task=worker:0" };
    char *sets[JOB_SETS];
    int n;
    sets_with(sets, &n, more, 6);
    job_t j;
    job_init(&j, 1, 2, sets, n);
    int ps0 = job_task(&j, "ps", 0), chief = job_task(&j, "chief", 0);
    sniffer_t x;
    memset(&x, 0, sizeof x);
    x.target = j.t[ps0].port;
    x.port = spawn_free_port();
    x.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)x.port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int one = 1;
    setsockopt(x.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    CHECK(bind(x.lfd, (struct sockaddr *)&a, sizeof a) == 0 &&
          listen(x.lfd, 8) == 0 &&
          pthread_create(&x.th, NULL, sniffer_main, &x) == 0);
    through(&j, chief, ps0, x.port);
    job_start_all(&j);
    for (int i = 0; i < 6000 && !atomic_load(&x.found); i++)
        usleep(10000); /* 60 s */
    CHECKF(atomic_load(&x.found), "no PING seen on the coordinator's link");
    /* ps:0 takes the PING (and the key) first; the first push comes a
     * step_delay_ms (500) after the first STEP, which follows the PONG */
    usleep(100000);
    /* ps:0's share of the model, 0.01 everywhere, and adam's two slots at
     * 0 (parts 0, 1, 2: the last installs them): the job trains on */
    void *zc = zmq_ctx_new(), *s = zmq_socket(zc, ZMQ_DEALER);
    int linger = 2000;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", j.t[ps0].port);
    CHECK(zmq_connect(s, ep) == 0);
    size_t count = ps0_values("fixed:3");
    size_t len = PS_HDR_SIZE + count * sizeof(float);
    unsigned char *msg = calloc(1, len);
    for (int part = 0; msg && x.ping.type == PS_PING && part <= 2; part++) {
        for (size_t i = 0; i < count; i++)
            memcpy(msg + PS_HDR_SIZE + 4 * i,
                   &(float){ part ? 0.0f : 0.01f }, 4);
        ps_hdr_t put = { .type = PS_STATE_PUT, .sender = x.ping.sender,
                         .step = 0, .incarnation = x.ping.incarnation,
                         .a = part, .b = 2, .count = (uint32_t)count };
        put.req = coordinator_tag(&x.ping, &put, x.ping.sender);
        ps_wire_pack(&put, msg);
        raw(s, x.ping.sender, msg, len);
    }
    free(msg);
    zmq_close(s); /* lingers until sent */
    zmq_ctx_term(zc);
    job_wait_all(&j, 240);
    atomic_store(&x.stop, 1);
    pthread_join(x.th, NULL);
    close(x.lfd);
    const char *err = j.t[chief].err;
    CHECKF(strstr(j.t[ps0].err, "ps:0: state restored at step 0"),
           "ps:0 did not take the state (it must, for this test to mean "
           "anything)");
    CHECKF(j.t[chief].code != 0 &&
           strstr(err, "exactly once cannot be claimed: ps:0's state was "
                       "replaced 1 time, the coordinator restored it 0: "
                       "state came from outside the ledger") &&
           !strstr(err, "exactly once: each of the"),
           "coordinator: exit %d", j.t[chief].code);
    printf("outside_ledger: coordinator exit %d\n", j.t[chief].code);
    if (check_failed_ || getenv("PS_TEST_VERBOSE"))
        dump(&j);
    job_free(&j);
}

/* ---- checkpoints ------------------------------------------------------ */

/* The step a job resumed from ("resumed from DIR/ckpt-N...: ..., step S"),
 * or -1. */
static long long resumed_step(const job_t *j, const char *dir)
{
    char key[400];
    snprintf(key, sizeof key, "resumed from %s/ckpt-", dir);
    const char *p = strstr(j->t[0].out, key);
    p = p ? strstr(p, ", step ") : NULL;
    return p ? atoll(p + strlen(", step ")) : -1;
}

/* Restart the job of `sets` on fresh ports and run it to the end; every
 * task exits 0, resumed from dir at a step the caller checks. */
static long long resume_job(const char *dir, char **sets, int n,
                            long long total, double *acc)
{
    job_t j;
    job_init(&j, 2, 2, sets, n);
    job_start_all(&j);
    job_wait_all(&j, 240);
    all_ok(&j);
    long long at = resumed_step(&j, dir);
    for (int k = 0; k < 2; k++) {
        char want[64];
        snprintf(want, sizeof want, "ps:%d: state restored at step %lld", k,
                 at);
        CHECKF(strstr(j.t[job_task(&j, "ps", k)].err, want) != NULL,
               "no '%s'", want);
    }
    exactly_once(&j, total, 2);
    *acc = test_accuracy(j.t[0].out);
    /* The last checkpoint, gathered from the ps tasks' shards, holds
     * exactly the variables the coordinator evaluated at the end. */
    char path[400];
    snprintf(path, sizeof path, "%s/ckpt-%010lld.safetensors", dir, total);
    char *argv[2 * JOB_SETS + 6] = { (char *)spawn_strata_bin(), "eval",
                                     "--checkpoint", path };
    int a = 4;
    for (int k = 0; k < n; k++) {
        argv[a++] = "--set";
        argv[a++] = sets[k];
    }
    spawn_result_t *r = malloc(sizeof *r);
    spawn_run(argv, 60, r);
    const char *e = strstr(r->out, "test accuracy ");
    double eacc = e ? atof(e + strlen("test accuracy ")) : -1.0;
    printf("strata eval %s: test accuracy %.4f (the job: %.4f)\n", path, eacc,
           *acc);
    CHECKF(r->code == 0 && eacc == *acc, "eval of the last checkpoint: exit "
           "%d, accuracy %.4f, the job's %.4f\n%s", r->code, eacc, *acc,
           r->err);
    free(r);
    if (check_failed_ || getenv("PS_TEST_VERBOSE"))
        dump(&j);
    job_free(&j);
    return at;
}

static void ckpt_pskill(void)
{
    tmp_make("ps-ckpt");
    char dir[300], set[320];
    snprintf(dir, sizeof dir, "%s/run", tmpdir_);
    snprintf(set, sizeof set, "checkpoint.dir=%s", dir);
    char *more[] = { "train.epochs=3", "data.limit_train=6400",
                     "strategy.timeout_s=3", "checkpoint.every_steps=100",
                     "strategy.partitioner=fixed:2", set };
    char *sets[JOB_SETS];
    int n;
    /* the fault-free run, without checkpoints */
    sets_with(sets, &n, more, 5);
    job_t j;
    job_init(&j, 2, 2, sets, n);
    job_start_all(&j);
    job_wait_all(&j, 240);
    all_ok(&j);
    double base = test_accuracy(j.t[0].out);
    job_free(&j);
    /* ps:1 dies after the checkpoint of step 300 */
    sets_with(sets, &n, more, 6);
    job_init(&j, 2, 2, sets, n);
    job_start_all(&j);
    CHECKF(job_await(&j, 0, 0, "ckpt-0000000300.safetensors", 120) == 0,
           "no checkpoint of step 300");
    job_kill(&j, job_task(&j, "ps", 1));
    job_wait_all(&j, 30);
    CHECKF(j.t[0].code != 0 && strstr(j.t[0].err, "ps:1 (127.0.0.1:"),
           "coordinator exit %d without naming ps:1", j.t[0].code);
    if (check_failed_ || getenv("PS_TEST_VERBOSE"))
        dump(&j);
    job_free(&j);
    /* the whole job restarted */
    double acc = -1;
    long long at = resume_job(dir, sets, n, 600, &acc);
    printf("ps:1 killed after step 300; the restarted job resumed at step "
           "%lld: test accuracy %.4f (fault-free %.4f)\n", at, acc, base);
    CHECKF(at >= 300 && at < 600 && at % 100 == 0, "resumed at step %lld", at);
    /* Asynchronous training: the same job's accuracy after 600 steps varies
     * by itself from run to run (0.803..0.830 over 8 runs on 2026-11-25,
     * under ASan; 0.792 against a fault-free 0.829 in a fresh-clone CI
     * under load on 2026-12-03), so "as accurate" means within 5 points;
     * that the state came back is checked exactly above (every ps task's
     * "state restored", each sample once, eval of the last checkpoint). */
    CHECKF(acc >= 0 && fabs(acc - base) <= 0.05,
           "accuracy %.4f is not within 5 points of the fault-free %.4f", acc,
           base);
    tmp_cleanup();
}

static void ckpt_stop(void)
{
    tmp_make("ps-stop");
    char set[320];
    snprintf(set, sizeof set, "checkpoint.dir=%s", tmpdir_);
    char *more[] = { "train.epochs=3", "data.limit_train=12800",
                     "strategy.timeout_s=10", set };
    char *sets[JOB_SETS];
    int n;
    sets_with(sets, &n, more, 4);
    job_t j;
    job_init(&j, 2, 2, sets, n);
    job_start_all(&j);
    CHECKF(job_await(&j, 0, 1, "Epoch 1/3", 120) == 0, "no epoch 1");
    usleep(300000);
    for (int i = 0; i < j.n; i++) /* what a preempted cluster gets */
        if (j.t[i].running)
            kill(j.t[i].child.pid, SIGTERM);
    job_wait_all(&j, 60);
    for (int i = 0; i < j.n; i++)
        CHECKF(j.t[i].code == 75, "%s:%d exit %d, want 75", j.t[i].type,
               j.t[i].index, j.t[i].code);
    const char *p = strstr(j.t[0].err, "stopped on request at step ");
    long long stop = p ? atoll(p + strlen("stopped on request at step ")) : -1;
    char ck[64];
    snprintf(ck, sizeof ck, "ckpt-%010lld.safetensors", stop);
    CHECKF(stop > 400 && stop < 1200 && access(tmp_path(ck), R_OK) == 0,
           "stopped at step %lld without its checkpoint %s", stop, ck);
    if (check_failed_ || getenv("PS_TEST_VERBOSE"))
        dump(&j);
    job_free(&j);
    double acc = -1;
    long long at = resume_job(tmpdir_, sets, n, 1200, &acc);
    printf("SIGTERM: every task exited 75 at step %lld; resumed at step %lld, "
           "test accuracy %.4f\n", stop, at, acc);
    CHECKF(at == stop, "resumed at step %lld, stopped at %lld", at, stop);
    CHECKF(acc > 0.78, "test accuracy %.4f after the resume", acc);
    tmp_cleanup();
}

/* ---- embedding tables pushed as rows (wire v6) ------------------------- */

enum { EMB_N = 1600, EMB_K = 3, EMB_V = 400, EMB_D = 8, EMB_NF = 4 };
/* emb/embeddings, feat kernel and bias, logits kernel and bias */
static const size_t k_emb_counts[] = { EMB_V * EMB_D, EMB_NF * 8, 8, 16 * 4,
                                       4 };

/* The embedding model of tests/train's train_sparse in tmpdir_: ids of a
 * table of 400 x 8 beside 4 dense features; returns its ini. */
static const char *emb_job(void)
{
    static float x[EMB_N * EMB_NF];
    static int64_t y[EMB_N], ids[EMB_N * EMB_K];
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < EMB_N; i++) {
        for (int j = 0; j < EMB_K; j++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            ids[i * EMB_K + j] = j == 0 || rng % 3 ? (int64_t)(rng % EMB_V)
                                                   : -1;
            if (ids[i * EMB_K + j] < 0) /* padding ends a bag */
                for (int k = j + 1; k < EMB_K; k++)
                    ids[i * EMB_K + k] = -1;
            if (ids[i * EMB_K + j] < 0)
                break;
        }
        y[i] = ids[i * EMB_K] % 4;
        for (int f = 0; f < EMB_NF; f++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            x[i * EMB_NF + f] = (float)(rng % 1000) / 1000.0f;
        }
    }
    char shape[32];
    snprintf(shape, sizeof shape, "(%d, %d)", EMB_N, EMB_NF);
    npy_write(tmp_path("x.npy"), "<f4", shape, x, sizeof x);
    snprintf(shape, sizeof shape, "(%d,)", EMB_N);
    npy_write(tmp_path("y.npy"), "<i8", shape, y, sizeof y);
    snprintf(shape, sizeof shape, "(%d, %d)", EMB_N, EMB_K);
    npy_write(tmp_path("ids.npy"), "<i8", shape, ids, sizeof ids);
    FILE *f = fopen(tmp_path("emb.ini"), "w");
    CHECK(f && fprintf(f, "[data]\ndir = %s\ntrain_images = x.npy\n"
                       "train_labels = y.npy\ntrain_ids = ids.npy\n"
                       "test_images = x.npy\ntest_labels = y.npy\n"
                       "test_ids = ids.npy\n[graph]\n"
                       "emb = embedding vocab=%d dim=%d combiner=mean <- ids\n"
                       "feat = dense 8 tanh <- input\n"
                       "both = concat <- emb, feat\nlogits = dense 4\n",
                       tmpdir_, EMB_V, EMB_D) > 0 && fclose(f) == 0);
    return tmp_path("emb.ini");
}

/* `nps` ps lines in `ps_err` say pushes with rows were applied, and the
 * worker lines in `w_err` say the table went as rows, none dense. */
static void went_as_rows(const char *ps_err, const char *w_err, int nps)
{
    int with_rows = 0;
    for (const char *p = ps_err; (p = strstr(p, " pushes applied (")); p++) {
        long long rows = 0;
        with_rows += sscanf(p, " pushes applied (%lld with rows)", &rows) == 1
                     && rows > 0;
    }
    CHECKF(with_rows == nps, "%d of %d ps tasks applied pushes with rows:\n"
           "%s", with_rows, nps, ps_err);
    CHECKF(strstr(w_err, "pushed, embedding tables as rows)") &&
               !strstr(w_err, "pushed, dense)"),
           "a worker pushed dense:\n%s", w_err);
    /* and pulled only its batches' rows (wire v7), every line of them */
    int lines = 0, whole = 0;
    for (const char *p = w_err; (p = strstr(p, " parameter bytes pulled ("));
         p++) {
        long long rows = 0;
        lines++;
        whole += sscanf(p, " parameter bytes pulled (%lld pulls with rows)",
                        &rows) != 1 || rows == 0;
    }
    CHECKF(lines > 0 && whole == 0, "%d of %d worker lines pulled no rows:\n"
           "%s", whole, lines, w_err);
}

static void sparse_restart(void)
{
    tmp_make("ps-sparse");
    const char *ini = emb_job();
    const char *victim = "[launch] worker:1: pid ";
    char *argv[40] = { (char *)spawn_strata_bin(), "launch", "--ps", "2",
                       "--workers", "2", "--chief", "--max-restarts", "2",
                       "-c", (char *)ini };
    int a = 11;
    char *sets[] = { "strategy.plugin=ps", "train.epochs=20",
                     "train.batch_size=32", "train.eval=false",
                     "train.progress=none", "strategy.timeout_s=10",
                     "strategy.ps.partitioner=fixed:2",
                     "train.devices=cpu:0", "debug.step_delay_ms=5" };
    for (size_t k = 0; k < sizeof sets / sizeof *sets; k++) {
        argv[a++] = "--set";
        argv[a++] = sets[k];
    }
    argv[a] = NULL;
    spawn_child_t c;
    CHECK(spawn_start(argv, NULL, &c) == 0);
    static char out[1 << 17], err[1 << 17];
    long pid = 0;
    for (int i = 0; i < 300 && !pid; i++) {
        usleep(100000);
        spawn_read_file_(c.outp, out, sizeof out);
        spawn_read_file_(c.errp, err, sizeof err);
        const char *p = strstr(out, victim);
        pid = p && strstr(err, "worker:1 registered")
                  ? atol(p + strlen(victim)) : 0;
    }
    CHECKF(pid > 0, "no %s training under launch:\n%s", victim, out);
    usleep(300000);
    if (pid > 0)
        kill((pid_t)pid, SIGKILL);
    spawn_wait(&c, 240);
    spawn_collect(&c, out, sizeof out, err, sizeof err);
    int starts = 0;
    for (const char *p = out; (p = strstr(p, victim)); p++)
        starts++;
    printf("sparse pushes, worker:1 killed under launch: exit %d, worker:1 "
           "started %d times\n", c.code, starts);
    CHECKF(c.code == 0 && starts == 2 &&
               strstr(err, "worker:1 failed (exit 137); restarting it alone")
               && strstr(err, "rejoined after a restart (1 so far)"),
           "launch exit %d, worker:1 started %d times:\n%s", c.code, starts,
           err);
    CHECKF(strstr(err, "exactly once: each of the 2 ps tasks applied every "
                       "one of the 1000 scheduled steps once"),
           "no exactly-once line:\n%s", err);
    went_as_rows(err, err, 2);
    /* only the restarted worker:1 lived to say what it pushed */
    const char *key = "[worker:1] strata: ps: worker:1 ran ";
    const char *again = strstr(err, key);
    long long ran = again ? atoll(again + strlen(key)) : 0;
    const char *eol = again ? strchr(again, '\n') : NULL;
    printf("worker:1 after its restart ran %lld steps\n", ran);
    CHECKF(ran > 0 && eol && strstr(again, "embedding tables as rows") &&
               strstr(again, "embedding tables as rows") < eol,
           "the restarted worker:1 ran no steps as rows:\n%s", err);
    tmp_cleanup();
}

/* A PUSH of worker `w` for step 0 with one row block for shard 0 (the
 * table, rows [0, 400) on the only ps): `nrows` ids and rows of 0.5 (the
 * first value `v0`), then the other shards' `ndense` zeros; `claim`: the
 * row count the block says. */
static void forged_rows(void *s, int w, const int64_t *ids, uint32_t nrows,
                        uint32_t claim, float v0, size_t ndense)
{
    size_t words = 2 + 2 * (size_t)nrows + nrows * EMB_D + ndense;
    size_t len = PS_HDR_SIZE + 4 * words;
    unsigned char *msg = calloc(1, len), *at = msg + PS_HDR_SIZE;
    uint32_t shard = 0;
    memcpy(at, &shard, 4);
    memcpy(at + 4, &claim, 4);
    memcpy(at + 8, ids, 8 * (size_t)nrows);
    at += 8 + 8 * (size_t)nrows;
    for (size_t e = 0; e < (size_t)nrows * EMB_D; e++)
        memcpy(at + 4 * e, &(float){ e ? 0.5f : v0 }, 4);
    ps_hdr_t push = { .type = PS_PUSH, .sender = w, .attempt = 1, .step = 0,
                      .req = 11, .a = 0, .f = 0.5, .b = 1,
                      .count = (uint32_t)words };
    ps_wire_pack(&push, msg);
    raw(s, w, msg, len);
    free(msg);
}

/* A PULL of worker `w` asking ps:0 for rows of shard 0 (the table): one
 * block that says `claim` rows and carries `nrows` ids. */
static void forged_pull(void *s, int w, const int64_t *ids, uint32_t nrows,
                        uint32_t claim)
{
    size_t words = 2 + 2 * (size_t)nrows, len = PS_HDR_SIZE + 4 * words;
    unsigned char *msg = calloc(1, len), *at = msg + PS_HDR_SIZE;
    uint32_t shard = 0;
    memcpy(at, &shard, 4);
    memcpy(at + 4, &claim, 4);
    memcpy(at + 8, ids, 8 * (size_t)nrows);
    ps_hdr_t pull = { .type = PS_PULL, .sender = w, .step = -1, .req = 12,
                      .b = 1, .count = (uint32_t)words };
    ps_wire_pack(&pull, msg);
    raw(s, w, msg, len);
    free(msg);
}

/* From a worker's end line: its pulls with rows and requests sent again. */
static void worker_pulls(const char *err, const char *name, long long *rows,
                         long long *resent)
{
    char key[64];
    snprintf(key, sizeof key, "%s ran ", name);
    const char *p = strstr(err, key), *q = p ? strstr(p, "), ") : NULL;
    long long b = 0, st = 0;
    *rows = *resent = -1;
    if (p)
        sscanf(strstr(p, " steps (") + 8, "%lld pushes refused as stale, "
               "%lld requests", &st, resent);
    if (q)
        sscanf(q + 3, "%lld parameter bytes pulled (%lld pulls with rows)",
               &b, rows);
}

static void sparse_hostile(void)
{
    tmp_make("ps-sparse-hostile");
    char *more[] = { "train.epochs=10", "train.batch_size=32",
                     "security.mode=off", "debug.step_delay_ms=5" };
    job_t j;
    char *sets[JOB_SETS];
    int n;
    sets_with(sets, &n, more, 4);
    job_init(&j, 2, 1, sets, n);
    j.config = emb_job();
    job_start_all(&j);
    CHECK(job_await(&j, 0, 1, "Epoch 1/10", 120) == 0);
    int ps0 = job_task(&j, "ps", 0), w0 = job_task(&j, "worker", 0);
    void *zc = zmq_ctx_new(), *s = zmq_socket(zc, ZMQ_DEALER);
    int linger = 2000;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", j.t[ps0].port);
    CHECK(zmq_connect(s, ep) == 0);
    size_t ndense = 0;
    for (size_t k = 1; k < sizeof k_emb_counts / sizeof *k_emb_counts; k++)
        ndense += k_emb_counts[k];
    const int64_t beyond[2] = { 5, EMB_V }, unsorted[2] = { 7, 3 },
                  fine[2] = { 3, 7 };
    forged_rows(s, w0, beyond, 2, 2, 0.5f, ndense);   /* id 400 of 400  */
    forged_rows(s, w0, unsorted, 2, 2, 0.5f, ndense); /* 7 before 3     */
    forged_rows(s, w0, fine, 2, 1, 0.5f, ndense);     /* says 1, has 2  */
    forged_rows(s, w0, fine, 2, 2, NAN, ndense);      /* a NaN row      */
    /* PULLs asking for rows (wire v7): refused whole, never answered */
    const int64_t twice[2] = { 3, 3 };
    forged_pull(s, w0, beyond, 2, 2);                 /* id 400 of 400  */
    forged_pull(s, w0, unsorted, 2, 2);               /* 7 before 3     */
    forged_pull(s, w0, twice, 2, 2);                  /* 3 twice        */
    forged_pull(s, w0, fine, 2, 1);                   /* says 1, has 2  */
    zmq_close(s);
    zmq_ctx_term(zc);
    job_wait_all(&j, 240);
    all_ok(&j);
    exactly_once(&j, 10 * 50, 1);
    counts_t c = { -1, -1, -1 };
    CHECK(ps_counts(j.t[ps0].err, "ps:0", &c) == 0);
    printf("ps:0: applied %lld, %lld duplicates, %lld malformed\n", c.applied,
           c.dups, c.malformed);
    CHECKF(c.dups == 0 && c.malformed == 8, "ps:0 counters");
    static const char *const why[] = {
        "a row id outside the shard", "row ids not ascending and distinct",
        "payload size disagrees with its row blocks",
        "a row value that is not finite" };
    for (int k = 0; k < 4; k++) {
        char want[160];
        snprintf(want, sizeof want, "ps:0: dropped PUSH from worker:0: %s",
                 why[k]);
        CHECKF(strstr(j.t[ps0].err, want), "ps:0 did not say '%s'", want);
        if (k == 3)
            break;
        snprintf(want, sizeof want, "ps:0: dropped PULL from worker:0: %s",
                 why[k]);
        CHECKF(strstr(j.t[ps0].err, want), "ps:0 did not say '%s'", want);
    }
    /* every pull with rows ps:0 answered was a worker's (or its resend):
     * none of the forged ones */
    long long answered = -1, pulls = 0, rows[2], again[2];
    const char *a = strstr(j.t[ps0].err, "pulls answered (");
    if (a)
        answered = atoll(a + strlen("pulls answered ("));
    for (int w = 0; w < 2; w++) {
        char name[16];
        snprintf(name, sizeof name, "worker:%d", w);
        worker_pulls(j.t[job_task(&j, "worker", w)].err, name, &rows[w],
                     &again[w]);
        pulls += rows[w];
    }
    printf("ps:0 answered %lld pulls with rows; the workers made %lld and "
           "%lld (%lld and %lld requests sent again)\n", answered, rows[0],
           rows[1], again[0], again[1]);
    CHECKF(rows[0] > 0 && rows[1] > 0 && answered >= pulls &&
               answered <= pulls + again[0] + again[1],
           "ps:0 answered %lld pulls with rows, the workers made %lld",
           answered, pulls);
    went_as_rows(j.t[ps0].err, j.t[w0].err, 1);
    if (check_failed_ || getenv("PS_TEST_VERBOSE"))
        dump(&j);
    job_free(&j);
    tmp_cleanup();
}

int main(int argc, char **argv)
{
    if (access(DATA, R_OK) != 0)
        CHECK_SKIP("Fashion-MNIST not installed");
    signal(SIGPIPE, SIG_IGN);
    CHECK(spawn_job_keys() == 0);
    g_scenario = argc > 1 ? argv[1] : "roles";
    if (!strcmp(g_scenario, "roles"))
        roles();
    else if (!strcmp(g_scenario, "accuracy_kill"))
        accuracy_kill();
    else if (!strcmp(g_scenario, "restart"))
        restart(1);
    else if (!strcmp(g_scenario, "twice"))
        restart(2);
    else if (!strcmp(g_scenario, "pskill"))
        pskill();
    else if (!strcmp(g_scenario, "allgone"))
        allgone(1);
    else if (!strcmp(g_scenario, "belowmin"))
        allgone(2);
    else if (!strcmp(g_scenario, "launch_restart"))
        launch_worker_kill(2, 0);
    else if (!strcmp(g_scenario, "launch_lost"))
        launch_worker_kill(0, 0);
    else if (!strcmp(g_scenario, "launch_coord"))
        launch_worker_kill(2, 1);
    else if (!strcmp(g_scenario, "replay"))
        replay();
    else if (!strcmp(g_scenario, "stranger"))
        stranger();
    else if (!strcmp(g_scenario, "lossy"))
        lossy(0, 0);
    else if (!strcmp(g_scenario, "pieces_lossy"))
        lossy(0, 1);
    else if (!strcmp(g_scenario, "sparse_lossy"))
        lossy(1, 0);
    else if (!strcmp(g_scenario, "outside_ledger"))
        outside_ledger();
    else if (!strcmp(g_scenario, "stranger_kinds"))
        stranger_kinds();
    else if (!strcmp(g_scenario, "forged_abort"))
        forged_abort();
    else if (!strcmp(g_scenario, "ckpt_pskill"))
        ckpt_pskill();
    else if (!strcmp(g_scenario, "ckpt_stop"))
        ckpt_stop();
    else if (!strcmp(g_scenario, "bn_hostile"))
        bn_hostile();
    else if (!strcmp(g_scenario, "sparse_restart"))
        sparse_restart();
    else if (!strcmp(g_scenario, "sparse_hostile"))
        sparse_hostile();
    else {
        fprintf(stderr, "unknown scenario '%s'\n", g_scenario);
        return 2;
    }
    return CHECK_DONE();
}
