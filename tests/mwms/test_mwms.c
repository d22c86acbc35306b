/* MultiWorkerMirroredStrategy across processes on loopback:
 *  - 2 and 3 workers x 1 and 2 replicas follow single-device training
 *    within 1e-5 relative L2 distance per variable after 50 steps, and every
 *    worker ends with bitwise-equal variables (equal hashes);
 *  - a worker killed with SIGKILL, or stopped with SIGSTOP, makes every other
 *    worker exit non-zero within transport.timeout_s + 5 s, naming it;
 *  - `strata launch` stops the job when a task fails.
 * Free ports, bounded waits, every child reaped. */
#include <math.h>

#include "check.h"
#include "dumps.h"
#include "spawn.h"

#include "mwms_job.h"

static char g_dir[] = "/tmp/strata-mwmsXXXXXX";

static void equivalence(int workers, int replicas, const char *single)
{
    char dump[700], dev[64], what[96];
    snprintf(dump, sizeof dump, "debug.dump_vars=%s/w%dr%d.bin", g_dir, workers,
             replicas);
    snprintf(dev, sizeof dev, "train.devices=%s",
             replicas == 1 ? "cpu:0" : "cpu:0, cpu:1");
    char *sets[] = { "strategy.plugin=mwms", "transport.plugin=zmq",
                     "transport.timeout_s=30", "train.batch_size=24",
                     "train.max_steps=50", "train.eval=false",
                     "train.progress=none", "data.limit_train=4000",
                     "debug.hash_vars=true", dump, dev };
    job_t j;
    start_job(&j, workers, sets, 11);
    wait_job(&j, 120);
    char first[17] = "";
    for (int i = 0; i < workers; i++) {
        CHECKF(j.child[i].code == 0, "%d workers x %d: worker %d exit %d: %s",
               workers, replicas, i, j.child[i].code, g_err[i]);
        char h[17];
        CHECKF(hash_of(g_out[i], h) == 0, "worker %d printed no hash", i);
        if (i == 0)
            memcpy(first, h, sizeof h);
        else
            CHECKF(strcmp(first, h) == 0, "worker %d hash %s != worker 0 %s",
                   i, h, first);
    }
    snprintf(what, sizeof what, "mwms %d workers x %d replicas vs 1 device",
             workers, replicas);
    dump_compare(single, dump + strlen("debug.dump_vars="), what, 1e-05);
}

/* The runs that a test kills or stops mid-training: at least 2 ms a step,
 * so that "mid-training" holds however fast the steps get (50 epochs of
 * 20000 samples on 2 workers took 4.0 s on a Zen 5, the kills come at 3
 * s). A sleep: the bits are those of a run without it. */
#define SLOW "debug.step_delay_ms=2"

/* Kill (SIGKILL) or stop (SIGSTOP) worker 1 of 3 mid-training: the others
 * must exit non-zero within timeout_s + 5 s and name worker:1. */
static void failure(int sig)
{
    char *sets[] = { "strategy.plugin=mwms", "transport.plugin=zmq",
                     "transport.timeout_s=3", "train.epochs=50",
                     "train.eval=false", "train.devices=cpu:0",
                     "train.progress=none", "data.limit_train=20000",
                     "train.batch_size=24", SLOW };
    job_t j;
    start_job(&j, 3, sets, 10);
    sleep(3); /* past the rendezvous, mid-epoch */
    kill(j.child[1].pid, sig);
    double waited[3] = { 0 };
    for (int i = 0; i < 3; i++)
        if (i != 1)
            waited[i] = spawn_wait(&j.child[i], 3 + 5 + 2);
    /* The victim: continue a stopped one so it can be killed and reaped. */
    kill(j.child[1].pid, SIGCONT);
    kill(j.child[1].pid, SIGKILL);
    spawn_wait(&j.child[1], 10);
    for (int i = 0; i < 3; i++)
        spawn_collect(&j.child[i], g_out[i], sizeof g_out[i], g_err[i],
                      sizeof g_err[i]);
    for (int i = 0; i < 3; i++) {
        if (i == 1)
            continue;
        printf("signal %d: worker %d exit %d after %.1f s\n", sig, i,
               j.child[i].code, waited[i]);
        CHECKF(j.child[i].code != 0 && j.child[i].code < 128,
               "worker %d exit %d (want a clean non-zero exit)", i,
               j.child[i].code);
        CHECKF(waited[i] <= 3 + 5, "worker %d took %.1f s", i, waited[i]);
        CHECKF(strstr(g_err[i], "worker:1") != NULL,
               "worker %d does not name worker:1:\n%s", i, g_err[i]);
    }
}

/* strata launch: one task fails -> the others are stopped, exit non-zero. */
static void launch_stops_on_failure(void)
{
    char *argv[] = { (char *)spawn_strata_bin(), "launch", "-n", "2", "--set",
                     "strategy.plugin=mwms", "--set", "transport.plugin=zmq",
                     "--set", "transport.timeout_s=3", "--set", "train.epochs=50",
                     "--set", "train.devices=cpu:0", "--set",
                     "data.limit_train=20000", "--set", "train.eval=false",
                     "--set", SLOW, NULL };
    spawn_child_t c;
    CHECK(spawn_start(argv, NULL, &c) == 0);
    sleep(3);
    /* Find worker:1's pid in the launcher's output so far. */
    char buf[65536] = "";
    spawn_read_file_(c.outp, buf, sizeof buf);
    const char *p = strstr(buf, "[launch] worker:1: pid ");
    long pid = p ? atol(p + strlen("[launch] worker:1: pid ")) : 0;
    CHECKF(pid > 0, "no pid for worker:1 in:\n%s", buf);
    if (pid > 0)
        kill((pid_t)pid, SIGKILL);
    double waited = spawn_wait(&c, 30);
    char err[65536];
    spawn_collect(&c, buf, sizeof buf, err, sizeof err);
    CHECKF(c.code != 0, "launch exit %d", c.code);
    CHECKF(waited < 20, "launch took %.1f s", waited);
    CHECKF(strstr(err, "worker:1 failed") != NULL, "%s", err);
}

/* strata launch killed with -9: its tasks do not go on unsupervised (each
 * gets SIGTERM when launch dies, stops at its next step boundary and
 * exits), and nothing is left of the job within a bounded time. */
static void launch_killed(void)
{
    char *argv[] = { (char *)spawn_strata_bin(), "launch", "-n", "2", "--set",
                     "strategy.plugin=mwms", "--set", "train.epochs=50",
                     "--set", "train.devices=cpu:0", "--set",
                     "data.limit_train=20000", "--set", "train.eval=false",
                     "--set", SLOW, NULL };
    spawn_child_t c;
    CHECK(spawn_start(argv, NULL, &c) == 0);
    sleep(3);
    char buf[65536] = "", err[65536];
    spawn_read_file_(c.outp, buf, sizeof buf);
    long pid[2] = { 0, 0 };
    for (int w = 0; w < 2; w++) {
        char key[48];
        snprintf(key, sizeof key, "[launch] worker:%d: pid ", w);
        const char *p = strstr(buf, key);
        pid[w] = p ? atol(p + strlen(key)) : 0;
        CHECKF(pid[w] > 0, "no pid for worker:%d in:\n%s", w, buf);
    }
    kill(c.pid, SIGKILL);
    spawn_wait(&c, 10);
    spawn_collect(&c, buf, sizeof buf, err, sizeof err);
    /* The workers are launch's children, reaped by init once gone: poll
     * until kill(pid, 0) says they no longer exist. */
    double waited = 0;
    int alive = 1;
    while (alive && waited < 30) {
        alive = 0;
        for (int w = 0; w < 2; w++)
            alive |= pid[w] > 0 && kill((pid_t)pid[w], 0) == 0;
        if (alive) {
            usleep(100000);
            waited += 0.1;
        }
    }
    CHECKF(!alive, "a task still runs %.0f s after launch was killed", waited);
    for (int w = 0; w < 2 && alive; w++)
        if (pid[w] > 0)
            kill((pid_t)pid[w], SIGKILL);
    printf("launch killed (-9): its tasks gone after %.1f s\n", waited);
}

/* `strata launch -n 2` with only the strategy named: the core walks
 * [transport] world = nccl, zmq, passes over nccl (not installed in a CPU
 * build, declining without a GPU), opens zmq, and the banner names the
 * transport actually opened (one replica per worker: no local group). A
 * list of only missing names fails with one line saying so. */
static void default_transports(void)
{
    char *argv[] = { (char *)spawn_strata_bin(), "launch", "-n", "2", "--set",
                     "strategy.plugin=mwms", "--set", "train.max_steps=20",
                     "--set", "train.eval=false", "--set",
                     "train.progress=none", "--set", "train.devices=cpu:0",
                     "--set", "data.limit_train=2000", NULL };
    spawn_result_t *r = malloc(sizeof *r);
    spawn_run(argv, 120, r);
    CHECKF(r->code == 0, "launch with the default transports: %s", r->err);
    CHECKF(strstr(r->out, "(strategy mwms, transport zmq, 2 workers")
               != NULL, "banner:\n%s", r->out);
    CHECKF(strstr(r->err, "a group of 2 processes: nccl ") &&
               strstr(r->err, "; trying the next") && !strstr(r->err, "error"),
           "%s", r->err);
    char *bad[] = { (char *)spawn_strata_bin(), "launch", "-n", "2", "--set",
                    "strategy.plugin=mwms", "--set", "transport.world=zmqq",
                    "--set", "train.max_steps=20", "--set",
                    "train.devices=cpu:0", NULL };
    spawn_run(bad, 120, r);
    CHECKF(r->code != 0 && strstr(r->err, "no transport of [transport] world "
                                  "= 'zmqq' accepts a group of 2 processes "
                                  "(zmqq not installed"),
           "exit %d:\n%s", r->code, r->err);
    /* Per-scope lists: the replica threads and the workers each get theirs,
     * and the strategy can ask which (host->t_name). */
    char *scoped[] = { (char *)spawn_strata_bin(), "launch", "-n", "2",
                       "--set", "strategy.plugin=mwms", "--set",
                       "transport.local=local", "--set", "transport.world=zmq",
                       "--set", "train.max_steps=20", "--set",
                       "train.eval=false", "--set", "train.progress=none",
                       "--set", "train.devices=cpu:0, cpu:1", "--set",
                       "data.limit_train=2000", NULL };
    spawn_run(scoped, 120, r);
    CHECKF(r->code == 0 &&
               strstr(r->out, "(strategy mwms, transport local, zmq, 2 "
                      "workers") &&
               strstr(r->err, "2 replicas through local, workers through zmq"),
           "exit %d:\n%s\n%s", r->code, r->out, r->err);
    free(r);
}

int main(void)
{
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
               R_OK) != 0)
        CHECK_SKIP("Fashion-MNIST not installed");
    CHECK(mkdtemp(g_dir) != NULL);
    CHECK(spawn_job_keys() == 0);
    char single[600], dump[700];
    snprintf(single, sizeof single, "%s/single.bin", g_dir);
    snprintf(dump, sizeof dump, "debug.dump_vars=%s", single);
    char *argv[] = { (char *)spawn_strata_bin(), "train", "--set",
                     "train.batch_size=24", "--set", "train.max_steps=50",
                     "--set", "train.eval=false", "--set", "train.devices=cpu:0",
                     "--set", "data.limit_train=4000", "--set", dump, NULL };
    spawn_result_t *r = malloc(sizeof *r);
    spawn_run(argv, 120, r);
    CHECKF(r->code == 0, "single-device run: %s", r->err);
    free(r);

    equivalence(2, 1, single);
    equivalence(2, 2, single);
    equivalence(3, 1, single);
    equivalence(3, 2, single);
    failure(SIGKILL);
    failure(SIGSTOP);
    launch_stops_on_failure();
    launch_killed();
    default_transports();

    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    CHECK(system(cmd) == 0);
    return CHECK_DONE();
}
