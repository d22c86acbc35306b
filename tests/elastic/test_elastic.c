/* Elastic mwms jobs under `strata launch --elastic MIN:MAX`, one scenario
 * per run:
 *
 *   equal     a fault-free elastic job of 2 workers x 2 replicas ends with
 *             the very bits (debug.dump_vars) of the same job without
 *             --elastic
 *   kill      3 workers (--elastic 1:3 --max-restarts 1, a global batch of
 *             32 that 3 does not divide; a model with a SyncBatchNorm):
 *             worker:1 killed with -9 mid-epoch;
 *             the others re-form without it, launch restarts it and it
 *             joins at a step boundary with the survivors' state; the job
 *             ends with exit 0, the three workers with equal variables
 *             and moving statistics, and
 *             debug.step_log shows every sample of every epoch trained
 *             exactly once across both resizes (the step the kill broke
 *             counts once, in the generation that applied it)
 *   kill_share the same with [train] elastic_batch = per_worker and a
 *             batch of 30: each worker's share stays 10 samples, the global
 *             batch goes 30, 20, 30 and no sample is trained twice in an
 *             epoch (each leaves out less than one batch, its remainder);
 *             with lr_scaling = linear the learning rate follows it: 3, 2,
 *             then 3 times [optimizer] lr (debug.dump_lr)
 *   share_resume  per_worker with checkpoints: a worker lost, the job stopped
 *             (SIGTERM) at 2 workers and resumed by the same command at 3
 *             from the checkpoint, whose next batch is said in samples: no
 *             sample trained twice in any epoch across both runs
 *   belowmin  --elastic 2:2 without restarts, a worker killed: launch stops
 *             the job after [strategy.mwms] rendezvous_timeout_s with one
 *             error line and exit 1; the survivor says why it stops
 *   allgone   both workers killed, no restarts: launch ends the job at once
 *             (exit 1), not after the service's timeout
 *   stranger  garbage, HTTP, a JOIN as worker:0 with a tag not under its
 *             key (wire v3: the job's keys), an overlong message and
 *             a silent connection at the membership service are dropped and
 *             counted; the job finishes, exit 0
 *   token_leak  the job has CURVE keys (launch's own), and a hostile
 *             peer holds the membership token (it is in every worker's
 *             environment; wire version 2 sent it in the clear): its JOIN
 *             as worker:1 -- the version-2 message where no challenge
 *             comes, else with a tag it cannot compute -- is dropped,
 *             counted and named, and the job goes on as generation 0 to
 *             the end (before, the token admitted it: worker:1's
 *             connection was taken and a generation 1 formed with it)
 *   usage     --elastic for a ps job, a bad MIN:MAX, -n outside it, and
 *             elastic = true without launch: one clear error each, exit 2
 *
 * Loopback only, free ports (launch's), bounded waits, every child reaped
 * (launch reaps its tasks; the test reaps launch). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>

#include "check.h"
#include "hostile.h"
#include "member/wire.h"
#include "spawn.h"
#include "testutil.h"

#define DATA "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
#define NTRAIN 3200 /* 100 batches of 32: no remainder, every sample counts */

static char g_out[1 << 18], g_err[1 << 18];

/* ---- running strata launch ------------------------------------------- */

/* `strata launch ARGS... --set S...` started, not waited for. */
static void launch_start(char *const *args, char *const *sets,
                         spawn_child_t *c)
{
    char *argv[96] = { (char *)spawn_strata_bin(), "launch" };
    int a = 2;
    for (int i = 0; args[i] && a < 90; i++)
        argv[a++] = args[i];
    for (int i = 0; sets[i] && a < 92; i++) {
        argv[a++] = "--set";
        argv[a++] = sets[i];
    }
    argv[a] = NULL;
    CHECK(spawn_start(argv, NULL, c) == 0);
}

static void launch_wait(spawn_child_t *c, double timeout_s)
{
    spawn_wait(c, timeout_s);
    spawn_collect(c, g_out, sizeof g_out, g_err, sizeof g_err);
}

/* Wait until `needle` appears in the running launch's output (or in the
 * file `path` when not NULL); 1 when it did within timeout_s. */
static int await(const spawn_child_t *c, const char *path, const char *needle,
                 double timeout_s)
{
    static char buf[1 << 20];
    for (int i = 0; i < (int)(timeout_s * 10); i++) {
        if (path) {
            spawn_read_file_(path, buf, sizeof buf);
        } else {
            spawn_read_file_(c->outp, buf, sizeof buf / 2);
            size_t n = strlen(buf);
            spawn_read_file_(c->errp, buf + n, sizeof buf - n);
        }
        if (strstr(buf, needle))
            return 1;
        if (waitpid(c->pid, NULL, WNOHANG) != 0)
            return 0; /* launch ended (or is gone) */
        usleep(100000);
    }
    return 0;
}

/* The pid launch printed for `task` ("[launch] worker:1: pid N"). */
static long task_pid(const spawn_child_t *c, const char *task)
{
    char buf[65536], key[64];
    spawn_read_file_(c->outp, buf, sizeof buf);
    snprintf(key, sizeof key, "[launch] %s: pid ", task);
    const char *p = strstr(buf, key);
    return p ? atol(p + strlen(key)) : -1;
}

static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

static void show(const char *what, int code)
{
    fprintf(stderr, "---- %s: exit %d\n%s\n%s", what, code, g_out, g_err);
}

static char g_dir[256];

static const char *in_dir(const char *name)
{
    static char slots[8][512];
    static int next;
    char *p = slots[next++ % 8];
    snprintf(p, sizeof slots[0], "%s/%s", g_dir, name);
    return p;
}

/* ---- the step log: every sample of every epoch exactly once ----------- */

typedef struct attempt {
    int      gen, epoch, n;
    int64_t  step;
    uint32_t *ids;
} attempt_t;

/* Every "try" line of debug.step_log. */
static int read_tries(const char *path, attempt_t **out)
{
    FILE *f = fopen(path, "r");
    int cap = 0, n = 0;
    attempt_t *a = NULL;
    static char line[1 << 16];
    int run = 0; /* a "restart" line: the job started again (gen 0 again) */
    while (f && fgets(line, sizeof line, f)) {
        int gen, epoch, r, off = 0;
        if (!strcmp(line, "restart\n"))
            run++;
        long long step;
        char task[32];
        if (sscanf(line, "try %31s g%d e%d s%lld r%d %n", task, &gen, &epoch,
                   &step, &r, &off) != 5 || off == 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 4096;
            a = realloc(a, (size_t)cap * sizeof *a);
        }
        attempt_t *t = &a[n++];
        *t = (attempt_t){ .gen = gen + 1000 * run, .epoch = epoch,
                          .step = step };
        t->ids = malloc(64 * sizeof *t->ids);
        for (char *p = line + off; *p && *p != '\n' && t->n < 64;) {
            t->ids[t->n++] = (uint32_t)strtoul(p, &p, 10);
            if (*p == ',')
                p++;
        }
    }
    if (f)
        fclose(f);
    *out = a;
    return n;
}

/* Per epoch, the slices of each step's last generation (the attempt that
 * counts: a step tried again after a failure has lines of two) must hold
 * no sample twice and leave out fewer than one batch (the remainder an
 * epoch drops: none with a fixed global batch of 32, NTRAIN being 100 of
 * them). share: each worker's part of a step (per_worker), 0: the global
 * batch is 32. Returns the steps tried twice. */
static int exactly_once(const char *path, int epochs, int share)
{
    attempt_t *a;
    int n = read_tries(path, &a);
    int64_t steps = 0;
    for (int i = 0; i < n; i++)
        if (a[i].step + 1 > steps)
            steps = a[i].step + 1;
    int *last = calloc((size_t)steps + 1, sizeof *last), retried = 0;
    int *slices = calloc((size_t)steps + 1, sizeof *slices);
    for (int64_t s = 0; s < steps; s++)
        last[s] = -1;
    for (int i = 0; i < n; i++)
        if (a[i].step >= 0 && a[i].gen > last[a[i].step]) {
            retried += last[a[i].step] >= 0;
            last[a[i].step] = a[i].gen;
        }
    int *seen = calloc((size_t)epochs * NTRAIN, sizeof *seen);
    int bad_epoch = 0;
    for (int i = 0; i < n; i++) {
        attempt_t *t = &a[i];
        if (t->step < 0 || t->gen != last[t->step])
            continue;
        bad_epoch |= !share && t->epoch != (int)(t->step / 100);
        slices[t->step] += t->n;
        for (int k = 0; k < t->n; k++)
            if (t->epoch >= 0 && t->epoch < epochs && t->ids[k] < NTRAIN)
                seen[t->epoch * NTRAIN + (int)t->ids[k]]++;
    }
    CHECKF(!bad_epoch, "a step ran in another epoch than its number says");
    int bad_steps = 0, twice = 0, worst = 0;
    for (int64_t s = 0; s < steps; s++)
        bad_steps += share ? slices[s] == 0 || slices[s] % share != 0
                           : slices[s] != 32;
    for (int e = 0; e < epochs; e++) {
        int missing = 0;
        for (int k = 0; k < NTRAIN; k++) {
            missing += seen[e * NTRAIN + k] == 0;
            twice += seen[e * NTRAIN + k] > 1;
        }
        worst = missing > worst ? missing : worst;
    }
    CHECKF(steps > 0 && bad_steps == 0, "%d of %lld steps did not train "
           "whole batches", bad_steps, (long long)steps);
    CHECKF(twice == 0, "over %d epochs: %d samples trained more than once",
           epochs, twice);
    CHECKF(share ? worst < 3 * share : worst == 0, "an epoch left %d samples "
           "out", worst);
    printf("step log: %d slices, %lld steps, %d tried again after the "
           "failure; no sample trained twice in an epoch, at most %d left "
           "out (the remainder)\n", n, (long long)steps, retried, worst);
    for (int i = 0; i < n; i++)
        free(a[i].ids);
    free(a);
    free(last);
    free(slices);
    free(seen);
    return retried;
}

/* ---- scenarios ------------------------------------------------------- */

#define COMMON "strategy.plugin=mwms", "train.progress=none", \
               "train.eval=false", "data.limit_train=3200"

static void equal(void)
{
    char dump_fixed[600], dump_el[600];
    snprintf(dump_fixed, sizeof dump_fixed, "debug.dump_vars=%s",
             in_dir("fixed.bin"));
    snprintf(dump_el, sizeof dump_el, "debug.dump_vars=%s",
             in_dir("elastic.bin"));
    char *fixed_args[] = { "-n", "2", NULL };
    char *el_args[] = { "--elastic", "1:2", NULL };
    char *fixed_sets[] = { COMMON, "train.devices=cpu:0, cpu:1",
                           "train.epochs=2", dump_fixed, NULL };
    char *el_sets[] = { COMMON, "train.devices=cpu:0, cpu:1",
                        "train.epochs=2", dump_el, NULL };
    spawn_child_t c;
    launch_start(fixed_args, fixed_sets, &c);
    launch_wait(&c, 240);
    CHECKF(c.code == 0, "fixed job: exit %d\n%s", c.code, g_err);
    launch_start(el_args, el_sets, &c);
    launch_wait(&c, 240);
    CHECKF(c.code == 0, "elastic job: exit %d\n%s", c.code, g_err);
    CHECKF(strstr(g_err, "generation 0: 2 workers (worker:0, worker:1), a "
                  "fresh start") && !strstr(g_err, "generation 1"),
           "the elastic job did not run as one generation:\n%s", g_err);
    size_t na = 0, nb = 0;
    unsigned char *a = read_all(in_dir("fixed.bin"), &na);
    unsigned char *b = read_all(in_dir("elastic.bin"), &nb);
    CHECKF(a && b && na == nb && na > 0 && memcmp(a, b, na) == 0,
           "elastic and fixed variables differ (%zu and %zu bytes)", na, nb);
    printf("equal: 2 workers x 2 replicas, 2 epochs: the elastic job's %zu "
           "bytes of variables are the fixed job's\n", na);
    free(a);
    free(b);
}

/* The rates worker:0 stepped with ("STEP LR" lines): 3 x lr while 3
 * workers shared the batch, 2 x lr after worker:1 was lost, and 3 x lr
 * again from its return on, in that order. */
static void lr_follows(const char *path)
{
    FILE *f = fopen(path, "r");
    CHECKF(f, "%s: no learning-rate dump", path);
    if (!f)
        return;
    const double lr = 1e-3; /* [optimizer] lr, the default */
    int phase = 0, n[3] = { 0, 0, 0 }, other = 0;
    long long step;
    double r;
    while (fscanf(f, "%lld %lf", &step, &r) == 2) {
        int k = fabs(r - 3 * lr) < 1e-9 ? 3 : fabs(r - 2 * lr) < 1e-9 ? 2 : 0;
        if (k != (phase == 1 ? 2 : 3) && k != 0 && phase < 2)
            phase++;
        if (k == (phase == 1 ? 2 : 3))
            n[phase]++;
        else
            other++;
    }
    fclose(f);
    CHECKF(other == 0 && n[0] > 0 && n[1] > 0 && n[2] > 0 && phase == 2,
           "%s: %d steps at 3 x lr, then %d at 2 x lr, then %d at 3 x lr, "
           "%d at other rates", path, n[0], n[1], n[2], other);
}

/* Each of the 3 workers printed "WHAT hash (rank R): H" (debug.hash_vars),
 * all the same H: 1 and H in *out, else 0 after a line naming them. */
static int same_hashes(const char *what, char out[17])
{
    char h[3][17] = { "", "", "" };
    for (int w = 0; w < 3; w++) {
        char key[64];
        snprintf(key, sizeof key, "[worker:%d] %s hash (rank ", w, what);
        const char *p = strstr(g_out, key);
        p = p ? strstr(p, "): ") : NULL;
        if (p)
            snprintf(h[w], sizeof h[w], "%.16s", p + 3);
        CHECKF(p, "worker:%d printed no %s hash", w, what);
    }
    int same = h[0][0] && !strcmp(h[0], h[1]) && !strcmp(h[0], h[2]);
    CHECKF(same, "%s hashes differ: %s %s %s", what, h[0], h[1], h[2]);
    snprintf(out, 17, "%s", h[0]);
    return same;
}

/* share 0: keep the global batch (32); else per_worker with a global
 * batch of 3 x share. */
static void kill_one(int share)
{
    const int epochs = 24;
    char log[600], lr_dump[600];
    snprintf(log, sizeof log, "debug.step_log=%s", in_dir("steps.log"));
    snprintf(lr_dump, sizeof lr_dump, "debug.dump_lr=%s", in_dir("lr"));
    char *args[] = { "--elastic", "1:3", "--max-restarts", "1", NULL };
    char epochs_set[32], batch_set[48];
    snprintf(epochs_set, sizeof epochs_set, "train.epochs=%d", epochs);
    snprintf(batch_set, sizeof batch_set, "train.batch_size=%d",
             share ? 3 * share : 32);
    char *sets[] = { COMMON, "train.devices=cpu:0", epochs_set, batch_set,
                     "debug.step_delay_ms=4", "debug.hash_vars=true", log,
                     share ? "train.elastic_batch=per_worker"
                           : "train.elastic_batch=global",
                     share ? "train.lr_scaling=linear" : "train.seed=42",
                     share ? lr_dump : "train.seed=42",
                     /* a model with moving statistics: the joiner gets
                      * rank 0's beside the variables */
                     share ? "train.seed=42"
                           : "model.layers=dense 64, batchnorm sync=true, "
                             "relu, dense 10", NULL };
    spawn_child_t c;
    launch_start(args, sets, &c);
    /* Mid-epoch: 50 steps into the second epoch. */
    int up = await(&c, in_dir("steps.log"), "done worker:1 g0 s150 t", 120);
    long pid = task_pid(&c, "worker:1");
    CHECKF(up && pid > 0, "worker:1 did not train (pid %ld)", pid);
    if (up && pid > 0)
        kill((pid_t)pid, SIGKILL);
    launch_wait(&c, 300);
    if (c.code != 0)
        show("kill", c.code);
    CHECKF(c.code == 0, "launch exit %d after worker:1 was killed", c.code);
    CHECKF(strstr(g_err, "worker:1 failed (exit 137); restarting it alone"),
           "worker:1 was not restarted alone");
    CHECKF(strstr(g_err, "generation 1: 2 workers (worker:0, worker:2), "
                  "going on from step "),
           "the survivors did not re-form without worker:1");
    CHECKF(strstr(g_err, "worker:1 joins generation 2 as rank") &&
           strstr(g_err, "generation 2: 3 workers"),
           "the restarted worker:1 did not join the job");
    CHECKF(!strstr(g_err, "restart 1/1: the job failed"),
           "the job was restarted whole");
    /* The survivors and the rejoined worker hold the same variables and,
     * with batchnorm, the same moving statistics. */
    char hash[17] = "", shash[17] = "";
    (void)same_hashes("variables", hash);
    if (!share)
        (void)same_hashes("states", shash);
    exactly_once(in_dir("steps.log"), epochs, share);
    if (share) { /* the global batch followed the workers */
        char two[96], three[96];
        snprintf(two, sizeof two, "generation 1: global batch %d (%d per "
                 "worker)", 2 * share, share);
        snprintf(three, sizeof three, "generation 2: global batch %d (%d "
                 "per worker)", 3 * share, share);
        CHECKF(strstr(g_err, two) && strstr(g_err, three),
               "the global batch did not follow the workers");
        lr_follows(in_dir("lr.worker-0"));
    }
    printf("kill%s: worker:1 killed at step 150, restarted, rejoined; 3 "
           "workers end with variables %s\n", share ? " (per_worker)" : "",
           hash);
}

static void below_min(void)
{
    char log[600];
    snprintf(log, sizeof log, "debug.step_log=%s", in_dir("steps.log"));
    char *args[] = { "--elastic", "2:2", NULL };
    char *sets[] = { COMMON, "train.devices=cpu:0", "train.epochs=50",
                     "debug.step_delay_ms=4", log,
                     "strategy.mwms.rendezvous_timeout_s=3", NULL };
    spawn_child_t c;
    launch_start(args, sets, &c);
    int up = await(&c, in_dir("steps.log"), "done worker:1 g0 s50 t", 120);
    long pid = task_pid(&c, "worker:1");
    CHECKF(up && pid > 0, "worker:1 did not train (pid %ld)", pid);
    if (up && pid > 0)
        kill((pid_t)pid, SIGKILL);
    launch_wait(&c, 120);
    const char *line = "[launch] elastic: below min_workers: 1 of "
                       "min_workers = 2 workers for 3 s; stopping the job";
    CHECKF(c.code == 1 && count(g_err, line) == 1,
           "launch exit %d, not one below-min line:\n%s", c.code, g_err);
    CHECKF(strstr(g_err, "[worker:0] strata: elastic: error: the membership "
                  "service stopped the job: 1 of min_workers = 2"),
           "worker:0 did not say why it stopped:\n%s", g_err);
    CHECKF(strstr(g_out, "[launch] failed: 2 tasks, exit 1"),
           "launch's last line:\n%s", g_out);
    printf("belowmin: below min_workers, the job stopped with exit %d\n",
           c.code);
}

/* per_worker, a checkpoint every 40 steps: worker:1 killed (no restarts),
 * the two others train on with a global batch of 20, then the job is
 * stopped (SIGTERM: exit 75, a last checkpoint whose next batch is said in
 * samples); the same command resumes it with 3 workers from there, and no
 * sample of any epoch is trained twice across both runs. */
static void share_resume(void)
{
    char log[600], ckpt[600];
    snprintf(log, sizeof log, "debug.step_log=%s", in_dir("steps.log"));
    snprintf(ckpt, sizeof ckpt, "checkpoint.dir=%s", in_dir("ckpt"));
    char *args[] = { "--elastic", "1:3", NULL };
    char *sets[] = { COMMON, "train.devices=cpu:0", "train.epochs=6",
                     "train.batch_size=30", "train.elastic_batch=per_worker",
                     "debug.step_delay_ms=4", "checkpoint.every_steps=40",
                     ckpt, log, NULL };
    spawn_child_t c;
    launch_start(args, sets, &c);
    int up = await(&c, in_dir("steps.log"), "done worker:1 g0 s60 t", 120);
    long pid = task_pid(&c, "worker:1");
    CHECKF(up && pid > 0, "worker:1 did not train (pid %ld)", pid);
    if (up && pid > 0)
        kill((pid_t)pid, SIGKILL);
    up = await(&c, in_dir("steps.log"), "done worker:0 g1 s150 t", 120);
    CHECKF(up, "the two workers left did not train on");
    kill(c.pid, SIGTERM);
    launch_wait(&c, 120);
    CHECKF(c.code == 75, "stopped job: exit %d\n%s", c.code, g_err);
    CHECKF(strstr(g_err, "generation 1: global batch 20 (10 per worker)"),
           "the global batch did not follow the workers");
    FILE *f = fopen(in_dir("steps.log"), "a");
    if (f) {
        fputs("restart\n", f);
        fclose(f);
    }
    launch_start(args, sets, &c);
    launch_wait(&c, 300);
    if (c.code != 0)
        show("share_resume, again", c.code);
    CHECKF(c.code == 0, "resumed job: exit %d", c.code);
    const char *r = strstr(g_out, "resumed from ");
    CHECKF(r, "the job did not resume from its checkpoint");
    exactly_once(in_dir("steps.log"), 6, 10);
    printf("share_resume: stopped at 2 workers, resumed at 3 from %.60s\n",
           r ? r + 13 : "?");
}

/* Every worker killed and none to restart: launch ends the job at once,
 * exit 1, without waiting for the service's timeout. */
static void all_gone(void)
{
    char log[600];
    snprintf(log, sizeof log, "debug.step_log=%s", in_dir("steps.log"));
    char *args[] = { "--elastic", "1:2", NULL };
    char *sets[] = { COMMON, "train.devices=cpu:0", "train.epochs=50",
                     "debug.step_delay_ms=4", log, NULL };
    spawn_child_t c;
    launch_start(args, sets, &c);
    int up = await(&c, in_dir("steps.log"), "done worker:1 g0 s50 t", 120);
    long p0 = task_pid(&c, "worker:0"), p1 = task_pid(&c, "worker:1");
    CHECKF(up && p0 > 0 && p1 > 0, "the workers did not train");
    if (up && p0 > 0 && p1 > 0) {
        kill((pid_t)p0, SIGKILL);
        kill((pid_t)p1, SIGKILL);
    }
    launch_wait(&c, 60);
    CHECKF(c.code == 1 && strstr(g_err, "[launch] elastic: every worker is "
                                 "gone and none is left to restart"),
           "launch exit %d:\n%s", c.code, g_err);
    printf("allgone: exit %d\n", c.code);
}

static void stranger(void)
{
    char *args[] = { "--elastic", "1:2", NULL };
    char *sets[] = { COMMON, "train.devices=cpu:0", "train.epochs=12",
                     "debug.step_delay_ms=2", "debug.hash_vars=true", NULL };
    spawn_child_t c;
    launch_start(args, sets, &c);
    CHECK(await(&c, NULL, "generation 0: 2 workers", 120));
    static char buf[65536];
    spawn_read_file_(c.errp, buf, sizeof buf);
    const char *p = strstr(buf, "membership service on 127.0.0.1:");
    int port = p ? atoi(p + strlen("membership service on 127.0.0.1:")) : 0;
    CHECKF(port > 0, "no service port:\n%s", buf);
    int idle = hostile_connect(port, 0);
    const char garbage[] = "\x00\x01\x02\xff\xfe garbage\n";
    const char http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    /* a JOIN on the membership wire with a token that is not the job's,
     * and a message announced longer than a member may send */
    strata__member_join_t fj = { .token = "0123456789abcdef0123456789abcdef",
                                 .name = "worker:0", .addr = "127.0.0.1:9",
                                 .committed = 5000, .timeout_ms = 60000 };
    uint8_t forged[STRATA_MEMBER_CLIENT_MAX + STRATA_MEMBER_TAG];
    size_t flen = strata__member_join_encode(forged, &fj);
    if (flen) { /* a tag it cannot compute */
        memset(forged + flen, 0x5a, STRATA_MEMBER_TAG);
        flen += STRATA_MEMBER_TAG;
        strata__member_put_hdr(forged, STRATA_MEMBER_JOIN,
                               (uint32_t)(flen - STRATA_MEMBER_HDR));
    }
    uint8_t longline[700];
    memset(longline, 'A', sizeof longline);
    strata__member_put_hdr(longline, STRATA_MEMBER_JOIN,
                           sizeof longline - STRATA_MEMBER_HDR);
    CHECK(hostile_raw(port, garbage, sizeof garbage - 1) == 0);
    CHECK(hostile_raw(port, http, sizeof http - 1) == 0);
    CHECK(flen > 0 && hostile_raw(port, forged, flen) == 0);
    CHECK(hostile_raw(port, longline, sizeof longline) == 0);
    sleep(3); /* the silent one is dropped after 2 s */
    if (idle >= 0)
        close(idle);
    launch_wait(&c, 240);
    if (c.code != 0)
        show("stranger", c.code);
    CHECKF(c.code == 0, "launch exit %d", c.code);
    CHECKF(strstr(g_err, "its JOIN as worker:0 is not authenticated with "
                  "the job's keys") && strstr(g_err, "longer than 512") &&
           strstr(g_err, "no JOIN within 2 s") &&
           strstr(g_err, "[launch] elastic: 5 strangers dropped"),
           "strangers not dropped and counted:\n%s", g_err);
    CHECKF(!strstr(g_err, "generation 1"), "the strangers changed the job");
    char h0[17] = "", h1[17] = "";
    const char *a = strstr(g_out, "[worker:0] variables hash (rank 0): ");
    const char *b = strstr(g_out, "[worker:1] variables hash (rank 1): ");
    if (a)
        snprintf(h0, sizeof h0, "%.16s", a + 36);
    if (b)
        snprintf(h1, sizeof h1, "%.16s", b + 36);
    CHECKF(a && b && !strcmp(h0, h1), "hashes: '%s' '%s'", h0, h1);
    printf("stranger: 5 strangers dropped, the job finished\n");
}

/* The value of `var` in the environment of a process whose environment
 * also holds `with` ("NAME=value"); 0 when found within the bound. */
static int environ_of(const char *with, const char *var, char *out,
                      size_t cap)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    static char env[1 << 16];
    int found = -1;
    for (int n = 0; d && found && n < 100000 && (de = readdir(d)); n++) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9')
            continue;
        char path[300];
        snprintf(path, sizeof path, "/proc/%s/environ", de->d_name);
        FILE *f = fopen(path, "rb");
        size_t len = f ? fread(env, 1, sizeof env - 1, f) : 0;
        if (f)
            fclose(f);
        env[len] = '\0';
        int has = 0;
        const char *val = NULL;
        for (size_t at = 0; at < len; at += strlen(env + at) + 1) {
            has |= !strcmp(env + at, with);
            if (!strncmp(env + at, var, strlen(var)) &&
                env[at + strlen(var)] == '=')
                val = env + at + strlen(var) + 1;
        }
        if (has && val) {
            snprintf(out, cap, "%s", val);
            found = 0;
        }
    }
    if (d)
        closedir(d);
    return found;
}

static void token_leak(void)
{
    char *args[] = { "--elastic", "1:2", NULL };
    char *sets[] = { COMMON, "train.devices=cpu:0", "train.epochs=12",
                     "debug.step_delay_ms=2", "debug.hash_vars=true", NULL };
    spawn_child_t c;
    launch_start(args, sets, &c);
    CHECK(await(&c, NULL, "generation 0: 2 workers", 120));
    static char buf[65536];
    spawn_read_file_(c.errp, buf, sizeof buf);
    const char *p = strstr(buf, "membership service on 127.0.0.1:");
    int port = p ? atoi(p + strlen("membership service on 127.0.0.1:")) : 0;
    CHECKF(port > 0, "no service port:\n%s", buf);
    char with[64], token[128] = "";
    snprintf(with, sizeof with, "STRATA_ELASTIC=127.0.0.1:%d", port);
    CHECKF(environ_of(with, "STRATA_ELASTIC_TOKEN", token, sizeof token) == 0,
           "no worker's environment holds the token");
    int fd = hostile_connect(port, 0);
    uint8_t in[256];
    struct pollfd pf = { .fd = fd, .events = POLLIN };
    ssize_t got = fd >= 0 && poll(&pf, 1, 1000) == 1
                      ? recv(fd, in, sizeof in, 0) : 0;
    int challenged = got >= STRATA_MEMBER_HDR &&
                     in[5] == STRATA_MEMBER_CHALLENGE;
    strata__member_join_t fj = { .name = "worker:1", .addr = "127.0.0.1:9",
                                 .committed = 5000, .timeout_ms = 60000 };
    snprintf(fj.token, sizeof fj.token, "%s", token);
    uint8_t forged[STRATA_MEMBER_CLIENT_MAX + STRATA_MEMBER_TAG];
    size_t flen = strata__member_join_encode(forged, &fj);
    if (flen && challenged) { /* the version it speaks, a tag it guesses */
        memset(forged + flen, 0x5a, STRATA_MEMBER_TAG);
        flen += STRATA_MEMBER_TAG;
        strata__member_put_hdr(forged, STRATA_MEMBER_JOIN,
                               (uint32_t)(flen - STRATA_MEMBER_HDR));
    } else if (flen) {
        forged[4] = 2; /* wire version 2: the token was the JOIN's proof */
    }
    CHECK(fd >= 0 && flen > 0 && write(fd, forged, flen) == (ssize_t)flen);
    sleep(1); /* what the service makes of it; then the peer leaves */
    if (fd >= 0)
        close(fd);
    launch_wait(&c, 240);
    if (c.code != 0)
        show("token_leak", c.code);
    CHECKF(c.code == 0, "launch exit %d", c.code);
    const char *d = strstr(g_err, "[launch] elastic: dropped a connection "
                                  "from 127.0.0.1:");
    CHECKF(d && strstr(d, "its JOIN as worker:1 is not authenticated with "
                          "the job's keys (1 so far"),
           "the JOIN with the job's token was not dropped and named:\n%s",
           g_err);
    CHECKF(!strstr(g_err, "generation 1"), "the hostile JOIN changed the "
           "job:\n%s", g_err);
    const char *a = strstr(g_out, "[worker:0] variables hash (rank 0): ");
    const char *b = strstr(g_out, "[worker:1] variables hash (rank 1): ");
    CHECKF(a && b && !strncmp(a + 36, b + 36, 16), "hashes differ:\n%s",
           g_out);
    printf("token_leak: a JOIN with the leaked token (%s) sent; launch exit "
           "%d\n", challenged ? "tagged: the service challenged" : "wire v2",
           c.code);
}

static void usage(void)
{
    spawn_result_t *r = malloc(sizeof *r);
    char *ps[] = { (char *)spawn_strata_bin(), "launch", "--elastic", "1:2",
                   "--set", "strategy.plugin=ps", NULL };
    spawn_run(ps, 60, r);
    CHECKF(r->code == 2 && strstr(r->err, "--elastic runs mwms jobs only; "
                                  "this job's [strategy] plugin is 'ps'"),
           "ps: exit %d\n%s", r->code, r->err);
    char *bad[] = { (char *)spawn_strata_bin(), "launch", "--elastic", "3:2",
                    NULL };
    spawn_run(bad, 60, r);
    CHECKF(r->code == 2 && strstr(r->err, "--elastic needs MIN:MAX workers"),
           "3:2: exit %d\n%s", r->code, r->err);
    char *n[] = { (char *)spawn_strata_bin(), "launch", "--elastic", "2:3",
                  "-n", "1", "--set", "strategy.plugin=mwms", NULL };
    spawn_run(n, 60, r);
    CHECKF(r->code == 2 && strstr(r->err, "--elastic 2:3 starts 2 to 3 "
                                  "workers"), "-n 1: exit %d\n%s", r->code,
           r->err);
    char *alone[] = { (char *)spawn_strata_bin(), "train", "--set",
                      "strategy.plugin=mwms", "--set",
                      "strategy.mwms.elastic=true", "--set",
                      "data.limit_train=320", NULL };
    spawn_run(alone, 60, r);
    CHECKF(r->code == 2 && strstr(r->err, "elastic = true needs the "
                                  "membership service of strata launch "
                                  "--elastic"),
           "alone: exit %d\n%s", r->code, r->err);
    free(r);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s equal|kill|kill_share|share_resume|belowmin|allgone|stranger|usage\n",
                argv[0]);
        return 2;
    }
    if (access(DATA, R_OK) != 0)
        CHECK_SKIP("Fashion-MNIST not installed");
    snprintf(g_dir, sizeof g_dir, "%s", tmp_make("elastic"));
    signal(SIGPIPE, SIG_IGN);
    const char *s = argv[1];
    if (!strcmp(s, "equal"))
        equal();
    else if (!strcmp(s, "kill"))
        kill_one(0);
    else if (!strcmp(s, "kill_share"))
        kill_one(10);
    else if (!strcmp(s, "belowmin"))
        below_min();
    else if (!strcmp(s, "stranger"))
        stranger();
    else if (!strcmp(s, "token_leak"))
        token_leak();
    else if (!strcmp(s, "allgone"))
        all_gone();
    else if (!strcmp(s, "share_resume"))
        share_resume();
    else if (!strcmp(s, "usage"))
        usage();
    else {
        fprintf(stderr, "unknown scenario '%s'\n", s);
        return 2;
    }
    tmp_cleanup();
    return CHECK_DONE();
}
