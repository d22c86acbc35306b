/* Checkpoints and resume, end to end, through the strata binary:
 *  - kill -9 mid-epoch, restart: the final variables are bitwise equal to an
 *    uninterrupted run (mirrored and central, one process);
 *  - SIGTERM: a last checkpoint at the next step boundary, exit 75, restart
 *    resumes bitwise equal;
 *  - a corrupt newest checkpoint is skipped with a warning naming it; when
 *    every one is corrupt the run refuses to start, naming each, unless
 *    [checkpoint] restore = fresh_if_invalid;
 *  - a checkpoint of another model is refused with a clear error;
 *  - mwms, 2 workers: one killed, the job restarted (by hand, and by
 *    `strata launch --max-restarts`), it resumes and ends with the
 *    fault-free variables on every worker;
 *  - strata eval / inspect on good and damaged files. */
#include <dirent.h>
#include <sys/stat.h>

#include "check.h"
#include "spawn.h"
#include "testutil.h"

static char g_dir[] = "/tmp/strata-resumeXXXXXX";
static char g_out[65536], g_err[65536];

#define COMMON "--set", "train.epochs=2", "--set", "data.limit_train=12800", \
               "--set", "train.progress=none", "--set", "train.eval=false"

static int run_(char *const *args, int timeout_s)
{
    char *argv[40] = { (char *)spawn_strata_bin() };
    int n = 1;
    for (int i = 0; args[i] && n < 39; i++)
        argv[n++] = args[i];
    spawn_result_t *r = malloc(sizeof *r);
    spawn_run(argv, timeout_s, r);
    memcpy(g_out, r->out, sizeof g_out);
    memcpy(g_err, r->err, sizeof g_err);
    int code = r->code;
    free(r);
    return code;
}
#define run(...) run_((char *const[]){ __VA_ARGS__, NULL }, 180)

static int count_ckpts(const char *dir, char *newest, size_t len);
static void wait_for_checkpoint(const char *ck);

/* Start a run in the background; once checkpoint dir `ck` holds a
 * checkpoint (the run is mid-training; bounded wait), send `sig`. */
/* The runs a test signals or kills mid-training take at least 2 ms a
 * step, so the signal lands mid-run however fast the steps are (2 epochs
 * of the MLP took 70 ms on a Zen 5, 50 epochs 1.7 s); a sleep, so the bits
 * are those of a run without it. */
#define SLOW "--set", "debug.step_delay_ms=2"

static int interrupt_(char *const *args, const char *ck, int sig)
{
    char *argv[40] = { (char *)spawn_strata_bin() };
    int n = 1;
    for (int i = 0; args[i] && n < 37; i++)
        argv[n++] = args[i];
    static char *const slow[] = { SLOW };
    argv[n++] = slow[0];
    argv[n++] = slow[1];
    spawn_child_t c;
    if (spawn_start(argv, NULL, &c) != 0)
        return -1;
    wait_for_checkpoint(ck);
    kill(c.pid, sig);
    spawn_wait(&c, 60);
    spawn_collect(&c, g_out, sizeof g_out, g_err, sizeof g_err);
    return c.code;
}
#define interrupt(ck, sig, ...) interrupt_((char *const[]){ __VA_ARGS__, NULL }, ck, sig)

static int count_ckpts(const char *dir, char *newest, size_t len)
{
    DIR *d = opendir(dir);
    int n = 0;
    newest[0] = '\0';
    for (struct dirent *e; d && (e = readdir(d));)
        if (strncmp(e->d_name, "ckpt-", 5) == 0 && !strstr(e->d_name, ".tmp")) {
            n++;
            if (strcmp(e->d_name, newest) > 0)
                snprintf(newest, len, "%s", e->d_name);
        }
    if (d)
        closedir(d);
    return n;
}

static void path(char *buf, const char *name)
{
    snprintf(buf, 700, "%s/%s", g_dir, name);
}

static void one_process(const char *strategy)
{
    char ref[700], got[700], ck[700], s_ref[760], s_got[760], s_ck[760], s_st[64];
    path(ref, "ref.bin");
    path(got, "got.bin");
    snprintf(ck, sizeof ck, "%s/ck-%s", g_dir, strategy);
    snprintf(s_ref, sizeof s_ref, "debug.dump_vars=%s", ref);
    snprintf(s_got, sizeof s_got, "debug.dump_vars=%s", got);
    snprintf(s_ck, sizeof s_ck, "checkpoint.dir=%s", ck);
    snprintf(s_st, sizeof s_st, "strategy.plugin=%s", strategy);
    CHECK(run("train", COMMON, "--set", s_st, "--set", s_ref) == 0);

    /* kill -9 mid-epoch, then the same command again */
    int code = interrupt(ck, SIGKILL, "train", COMMON, "--set", s_st, "--set",
                         s_got, "--set", s_ck, "--set",
                         "checkpoint.every_steps=37");
    CHECKF(code == 128 + SIGKILL, "%s: killed run exit %d: %s", strategy, code,
           g_err);
    char newest[256];
    CHECKF(count_ckpts(ck, newest, sizeof newest) >= 1,
           "%s: no checkpoint before the kill", strategy);
    CHECK(run("train", COMMON, "--set", s_st, "--set", s_got, "--set", s_ck,
              "--set", "checkpoint.every_steps=37", "--set",
              "train.progress=line") == 0);
    CHECKF(strstr(g_out, "resumed from ") != NULL, "%s: %s", strategy, g_out);
    /* the resumed epoch's figures say they cover part of it */
    CHECKF(strstr(g_out, "resumed at batch ") && strstr(g_out, "steps only)"),
           "%s: %s", strategy, g_out);
    CHECKF(same_file(ref, got), "%s: resumed run differs from the "
           "uninterrupted one", strategy);
}

static void sigterm(void)
{
    char ref[700], got[700], ck[700], s_ref[760], s_got[760], s_ck[760];
    path(ref, "ref.bin");
    path(got, "got-term.bin");
    path(ck, "ck-term");
    snprintf(s_ref, sizeof s_ref, "debug.dump_vars=%s", ref);
    snprintf(s_got, sizeof s_got, "debug.dump_vars=%s", got);
    snprintf(s_ck, sizeof s_ck, "checkpoint.dir=%s", ck);
    CHECK(run("train", COMMON, "--set", s_ref) == 0);
    int code = interrupt(ck, SIGTERM, "train", COMMON, "--set", s_got, "--set",
                         s_ck, "--set", "checkpoint.every_steps=37");
    CHECKF(code == 75, "SIGTERM: exit %d (want 75): %s", code, g_err);
    CHECKF(strstr(g_err, "stopped on request") != NULL, "%s", g_err);
    char newest[256];
    CHECK(count_ckpts(ck, newest, sizeof newest) >= 1);
    CHECK(run("train", COMMON, "--set", s_got, "--set", s_ck, "--set",
              "checkpoint.every_steps=37") == 0);
    CHECK(same_file(ref, got));

    /* Without [checkpoint] dir a stop has nothing to resume from: it says
     * so and exits 128 + SIGTERM, not 75 with a hint to run it again. */
    {
        char *argv[] = { (char *)spawn_strata_bin(), "train", COMMON, "--set",
                         "train.epochs=50", SLOW, NULL };
        spawn_child_t c;
        CHECK(spawn_start(argv, NULL, &c) == 0);
        usleep(1500 * 1000);
        kill(c.pid, SIGTERM);
        spawn_wait(&c, 60);
        spawn_collect(&c, g_out, sizeof g_out, g_err, sizeof g_err);
        CHECKF(c.code == 128 + SIGTERM &&
               strstr(g_err, "nothing to resume from") &&
               !strstr(g_err, "run the same command again"),
               "SIGTERM without checkpoints: exit %d\n%s", c.code, g_err);
    }

    /* A damaged newest checkpoint: skipped with a warning naming it. */
    char victim[1000];
    count_ckpts(ck, newest, sizeof newest);
    snprintf(victim, sizeof victim, "%s/%s", ck, newest);
    FILE *f = fopen(victim, "r+b");
    CHECK(f != NULL);
    if (f) {
        fseek(f, -100, SEEK_END);
        int c = fgetc(f);
        fseek(f, -100, SEEK_END);
        fputc(c ^ 0x20, f);
        fclose(f);
    }
    CHECK(run("inspect", victim) != 0);
    CHECKF(strstr(g_err, newest) != NULL, "%s", g_err);
    CHECK(run("eval", "--checkpoint", victim) != 0);
    /* An earlier file (kept: keep = 3) serves; training goes on from it. */
    CHECK(run("train", COMMON, "--set", "train.epochs=3", "--set", s_got, "--set",
              s_ck) == 0);
    CHECKF(strstr(g_err, newest) != NULL, "no warning names %s: %s", newest,
           g_err);

    /* Every checkpoint damaged: no silent fresh start. The run refuses to
     * start (exit 1), naming each file and why; restore = fresh_if_invalid
     * starts from scratch after a warning. */
    char bad[760], s_bad[800], cmd[3000];
    path(bad, "ck-bad");
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s' && for f in '%s'/ckpt-*; do "
             "printf 'garbage' | dd of=\"$f\" bs=1 seek=8 conv=notrunc "
             "status=none; done", ck, bad, bad);
    CHECK(system(cmd) == 0);
    int nbad = count_ckpts(bad, newest, sizeof newest);
    snprintf(s_bad, sizeof s_bad, "checkpoint.dir=%s", bad);
    CHECK(run("train", COMMON, "--set", s_bad) == 1);
    int named = 0;
    for (const char *p = g_err; (p = strstr(p, "skipping checkpoint ")); p++)
        named++;
    CHECKF(nbad >= 2 && named == nbad &&
           strstr(g_err, "restore = fresh_if_invalid to start from scratch"),
           "all %d damaged: %d named\n%s", nbad, named, g_err);
    CHECK(run("train", COMMON, "--set", s_bad, "--set",
              "checkpoint.restore=fresh_if_invalid") == 0);
    CHECKF(strstr(g_err, "starting from scratch") && !strstr(g_out, "resumed"),
           "fresh_if_invalid:\n%s", g_err);

    /* Another model: refused, exit 2, the difference named. */
    CHECK(run("train", COMMON, "--set", s_ck, "--set",
              "model.layers=dense 64 relu, dense 10") == 2);
    CHECKF(strstr(g_err, "[model] layers") && strstr(g_err, "dense 64"), "%s",
           g_err);

    /* eval and inspect of a good one */
    count_ckpts(ck, newest, sizeof newest);
    snprintf(victim, sizeof victim, "%s/%s", ck, newest);
    CHECK(run("inspect", victim) == 0);
    CHECK(strstr(g_out, "dense_0/kernel") && strstr(g_out, "strata.step"));
    CHECK(run("eval", "--checkpoint", victim) == 0);
    CHECK(strstr(g_out, "test accuracy") != NULL);
    CHECK(run("eval", "--checkpoint", victim, "--set",
              "model.layers=dense 64 relu, dense 10") != 0);
}

/* Wait (30 s at most) until checkpoint dir `ck` holds a checkpoint. */
static void wait_for_checkpoint(const char *ck)
{
    char newest[256];
    /* polled every 2 ms: the MLP's epoch takes well under 100 ms on a fast
     * core, and a kill after its last checkpoint would resume at an epoch's
     * start, not mid-epoch (30 s at most) */
    for (int i = 0; i < 15000 && count_ckpts(ck, newest, sizeof newest) < 1;
         i++)
        usleep(2000);
}

/* Once checkpoint dir `ck` holds a checkpoint, kill -9 the first worker:1
 * that launcher `c` started. Returns its pid, 0 if none. */
static long kill_worker1_after_checkpoint(spawn_child_t *c, const char *ck)
{
    wait_for_checkpoint(ck);
    char buf[65536] = "";
    spawn_read_file_(c->outp, buf, sizeof buf);
    const char *p = strstr(buf, "[launch] worker:1: pid ");
    long pid = p ? atol(p + strlen("[launch] worker:1: pid ")) : 0;
    if (pid > 0)
        kill((pid_t)pid, SIGKILL);
    return pid;
}

/* Both workers' variable hashes (debug.hash_vars) in g_out equal `ref`. */
static void check_hashes(const char *ref)
{
    for (int r = 0; r < 2; r++) {
        char key[64];
        snprintf(key, sizeof key, "variables hash (rank %d): ", r);
        const char *q = strstr(g_out, key);
        CHECKF(q && strncmp(q + strlen(key), ref, 16) == 0,
               "worker %d after resume: %.16s, fault-free %s", r,
               q ? q + strlen(key) : "(none)", ref);
    }
}

/* mwms, 2 workers: kill one mid-training (the launcher stops the job),
 * start the job again: it resumes and ends with the fault-free variables. */
static void multi_worker(void)
{
    char ck[700], s_ck[760];
    path(ck, "ck-mwms");
    snprintf(s_ck, sizeof s_ck, "checkpoint.dir=%s", ck);
#define MW "--set", "strategy.plugin=mwms", "--set", "transport.plugin=zmq", \
           "--set", "transport.timeout_s=10", "--set", "train.devices=cpu:0", \
           "--set", "debug.hash_vars=true", "--set", "checkpoint.every_steps=25", \
           "--set", "train.epochs=4"
    CHECK(run("launch", "-n", "2", COMMON, MW) == 0);
    const char *h = strstr(g_out, "variables hash (rank 0): ");
    char ref[17] = "";
    if (h)
        memcpy(ref, h + strlen("variables hash (rank 0): "), 16);
    CHECK(ref[0] != '\0');

    char *argv[] = { (char *)spawn_strata_bin(), "launch", "-n", "2", COMMON, MW,
                     SLOW, "--set", s_ck, NULL };
    spawn_child_t c;
    CHECK(spawn_start(argv, NULL, &c) == 0);
    long pid = kill_worker1_after_checkpoint(&c, ck);
    CHECK(pid > 0);
    spawn_wait(&c, 60);
    char newest[256];
    spawn_collect(&c, g_out, sizeof g_out, g_err, sizeof g_err);
    CHECKF(c.code != 0, "launch exit %d", c.code);
    CHECKF(count_ckpts(ck, newest, sizeof newest) >= 1, "no mwms checkpoint");

    CHECK(run("launch", "-n", "2", COMMON, MW, "--set", s_ck) == 0);
    CHECKF(strstr(g_out, "resumed from ") != NULL, "%s", g_out);
    check_hashes(ref);

    /* The same with no hand on the restart: launch --max-restarts starts the
     * whole job again after the kill, and it resumes from the checkpoint. */
    path(ck, "ck-mwms-auto");
    snprintf(s_ck, sizeof s_ck, "checkpoint.dir=%s", ck);
    char *auto_argv[] = { (char *)spawn_strata_bin(), "launch", "-n", "2",
                          "--max-restarts", "2", COMMON, MW, SLOW, "--set",
                          s_ck, NULL };
    CHECK(spawn_start(auto_argv, NULL, &c) == 0);
    pid = kill_worker1_after_checkpoint(&c, ck);
    CHECK(pid > 0);
    spawn_wait(&c, 180);
    spawn_collect(&c, g_out, sizeof g_out, g_err, sizeof g_err);
    CHECKF(c.code == 0, "launch --max-restarts exit %d: %s", c.code, g_err);
    CHECKF(strstr(g_err, "[launch] restart 1/2: the job failed") != NULL, "%s",
           g_err);
    CHECKF(strstr(g_err, "restart 2/2") == NULL, "restarted twice: %s", g_err);
    CHECKF(strstr(g_out, "resumed from ") != NULL, "%s", g_out);
    check_hashes(ref);

    /* SIGTERM to launch itself: every task stops with a checkpoint, exit
     * 75, and --max-restarts does not start the job again. */
    path(ck, "ck-mwms-term");
    snprintf(s_ck, sizeof s_ck, "checkpoint.dir=%s", ck); /* in auto_argv */
    CHECK(spawn_start(auto_argv, NULL, &c) == 0);
    wait_for_checkpoint(ck);
    kill(c.pid, SIGTERM);
    spawn_wait(&c, 60);
    spawn_collect(&c, g_out, sizeof g_out, g_err, sizeof g_err);
    CHECKF(c.code == 75, "launch after SIGTERM: exit %d: %s", c.code, g_err);
    CHECKF(strstr(g_err, "restart 1/") == NULL, "restarted after SIGTERM: %s",
           g_err);
#undef MW
}

int main(void)
{
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
               R_OK) != 0)
        CHECK_SKIP("Fashion-MNIST not installed");
    CHECK(mkdtemp(g_dir) != NULL);
    one_process("mirrored");
    one_process("central");
    sigterm();
    multi_worker();
    char cmd[800];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    CHECK(system(cmd) == 0);
    return CHECK_DONE();
}
