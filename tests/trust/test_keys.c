/* The job's keys, end to end through the strata binary: what `strata
 * keygen` writes (ZeroMQ certificates, modes), what a task refuses (keys
 * that others could read or replace, a key missing for a task, a job of
 * several processes with no keys at all), [security] mode = off (a warning,
 * then plaintext), a task whose key is not the job's (refused by its
 * neighbour's ZAP handler: the job does not form, and says so), and
 * `strata launch` (keys of its own, never on disk). */
#include <glob.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "spawn.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char g_dir[] = "/tmp/strata-keysXXXXXX";
static spawn_result_t g_r;

static int run(char **argv, int timeout_s)
{
    spawn_run(argv, timeout_s, &g_r);
    return g_r.code;
}

static int mode_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (int)(st.st_mode & 07777) : -1;
}

static void keygen(void)
{
    char keys[128], f[200];
    snprintf(keys, sizeof keys, "%s/job", g_dir);
    char *ok[] = { (char *)spawn_strata_bin(), "keygen", keys, "worker:0-1",
                   "ps:0", NULL };
    CHECKF(run(ok, 30) == 0 && strstr(g_r.out, "3 key pairs"), "keygen: %s",
           g_r.err);
    CHECKF(mode_of(keys) == 0700, "key dir mode %o", mode_of(keys));
    snprintf(f, sizeof f, "%s/worker-1.key_secret", keys);
    CHECKF(mode_of(f) == 0600, "secret mode %o", mode_of(f));
    char text[1024] = "";
    spawn_read_file_(f, text, sizeof text);
    CHECKF(strstr(text, "ZeroMQ CURVE **Secret** Certificate") &&
           strstr(text, "name = \"worker:1\"") && strstr(text, "secret-key = \""),
           "secret certificate:\n%s", text);
    snprintf(f, sizeof f, "%s/worker-1.key", keys);
    spawn_read_file_(f, text, sizeof text);
    CHECKF(mode_of(f) == 0644 && strstr(text, "public-key = \"") &&
           !strstr(text, "secret-key"), "public certificate (%o):\n%s",
           mode_of(f), text);
    /* Kept unless --force; bad task names refused. */
    CHECK(run(ok, 30) == 1 && strstr(g_r.err, "exists; keeping it"));
    char *bad[] = { (char *)spawn_strata_bin(), "keygen", keys, "worker", NULL };
    CHECK(run(bad, 30) == 2 && strstr(g_r.err, "is not TYPE:INDEX"));
}

/* A 2-worker job started by hand on ports held for it, with extra --set
 * for both (sets) and for worker 1 only (sets1, may be NULL). */
static void job2(const char *const *sets, const char *const *sets1,
                 int timeout_s, spawn_result_t out[2])
{
    int port[2] = { spawn_task_port(), spawn_task_port() };
    spawn_child_t c[2];
    char tf[2][300];
    for (int i = 0; i < 2; i++) {
        snprintf(tf[i], sizeof tf[i], "TF_CONFIG={\"cluster\": {\"worker\": "
                 "[\"127.0.0.1:%d\", \"127.0.0.1:%d\"]}, \"task\": {\"type\": "
                 "\"worker\", \"index\": %d}}", port[0], port[1], i);
        char *argv[40] = { (char *)spawn_strata_bin(), "train" };
        int a = 2;
        const char *common[] = { "strategy.plugin=mwms", "train.max_steps=30",
                                 "train.eval=false", "train.devices=cpu:0",
                                 "train.progress=none", "data.limit_train=2000",
                                 "transport.zmq.timeout_s=4" };
        for (size_t k = 0; k < sizeof common / sizeof *common; k++) {
            argv[a++] = "--set";
            argv[a++] = (char *)common[k];
        }
        for (int k = 0; sets[k] && a < 36; k++) {
            argv[a++] = "--set";
            argv[a++] = (char *)sets[k];
        }
        for (int k = 0; i == 1 && sets1 && sets1[k] && a < 38; k++) {
            argv[a++] = "--set";
            argv[a++] = (char *)sets1[k];
        }
        char *env[] = { tf[i], NULL };
        CHECK(spawn_start(argv, env, &c[i]) == 0);
    }
    for (int i = 0; i < 2; i++) {
        spawn_wait(&c[i], timeout_s);
        out[i].code = c[i].code;
        spawn_collect(&c[i], out[i].out, sizeof out[i].out, out[i].err,
                      sizeof out[i].err);
    }
}

static void job(const char *const *sets, int timeout_s, spawn_result_t out[2])
{
    job2(sets, NULL, timeout_s, out);
}

static void refusals(void)
{
    static spawn_result_t r[2];
    char keys[160], set[200], f[200];
    snprintf(keys, sizeof keys, "%s/job", g_dir);
    snprintf(set, sizeof set, "security.keys=%s", keys);
    unsetenv("STRATA_SECURITY_KEYS");

    const char *none[] = { NULL };
    job(none, 60, r);
    CHECKF(r[0].code == 2 && strstr(r[0].err, "this job has 2 processes and "
                                   "no keys: make them with `strata keygen"),
           "no keys: exit %d\n%s", r[0].code, r[0].err);

    const char *off[] = { "security.mode=off", NULL };
    job(off, 60, r);
    CHECKF(r[0].code == 0 && r[1].code == 0 &&
           strstr(r[0].err, "[security] mode = off: this job's 2 processes "
                            "talk in plaintext"),
           "mode off: exit %d/%d\n%s", r[0].code, r[1].code, r[0].err);

    const char *good[] = { set, NULL };
    job(good, 60, r);
    CHECKF(r[0].code == 0 && r[1].code == 0, "keys: exit %d/%d\n%s\n%s",
           r[0].code, r[1].code, r[0].err, r[1].err);

    snprintf(f, sizeof f, "%s/worker-1.key_secret", keys);
    chmod(f, 0644);
    job(good, 60, r);
    CHECKF(r[1].code == 2 && strstr(r[1].err, "worker-1.key_secret has mode "
                                   "0644: others may read the secret key; "
                                   "refused (chmod 600"),
           "readable secret: exit %d\n%s", r[1].code, r[1].err);
    chmod(f, 0600);

    chmod(keys, 0777);
    job(good, 60, r);
    CHECKF(r[0].code == 2 && strstr(r[0].err, "has mode 0777: others may "
                                   "replace the key"),
           "writable dir: exit %d\n%s", r[0].code, r[0].err);
    chmod(keys, 0700);

    /* A directory above the keys that others may write (the checks
     * stopped at the key directory): refused, naming it. /tmp above
     * g_dir is sticky, and the jobs above ran with it. */
    char above[300];
    snprintf(above, sizeof above, "refused: %s is world-writable (mode "
             "0777), so others could have replaced what is under it: chmod "
             "go-w %s", g_dir, g_dir);
    chmod(g_dir, 0777);
    job(good, 60, r);
    CHECKF(r[0].code == 2 && r[1].code == 2 && strstr(r[0].err, above),
           "writable parent: exit %d/%d\n%s", r[0].code, r[1].code, r[0].err);
    chmod(g_dir, 0700);

    snprintf(f, sizeof f, "%s/worker-0.key", keys);
    char moved[220];
    snprintf(moved, sizeof moved, "%s.away", f);
    CHECK(rename(f, moved) == 0);
    job(good, 60, r);
    CHECKF(r[0].code == 2 && strstr(r[0].err, "worker-0.key_secret: its public "
                                   "key is not in worker-0.key"),
           "missing public key: exit %d\n%s", r[0].code, r[0].err);
    CHECKF(r[1].code == 2 && strstr(r[1].err, "no public key for worker:0"),
           "missing public key (worker 1): exit %d\n%s", r[1].code, r[1].err);
    CHECK(rename(moved, f) == 0);

    /* A FIFO or a link among the public keys: refused at once, naming it
     * (a FIFO was opened and blocked the task forever). */
    char fifo[220], lnk[220], target[220];
    snprintf(fifo, sizeof fifo, "%s/stranger.key", keys);
    CHECK(mkfifo(fifo, 0600) == 0);
    double t0 = now_s();
    job(good, 60, r);
    CHECKF(r[0].code == 2 && r[1].code == 2 &&
           strstr(r[0].err, "stranger.key: not a regular file") &&
           now_s() - t0 < 30, "a FIFO among the keys: exit %d/%d in %.0f s\n%s",
           r[0].code, r[1].code, now_s() - t0, r[0].err);
    unlink(fifo);
    snprintf(lnk, sizeof lnk, "%s/worker-0.key", keys);
    snprintf(target, sizeof target, "%s/worker-0.pub", g_dir);
    CHECK(rename(lnk, target) == 0 && symlink(target, lnk) == 0);
    job(good, 60, r);
    CHECKF(r[0].code == 2 && strstr(r[0].err, "worker-0.key: a symbolic link"),
           "a linked key: exit %d\n%s", r[0].code, r[0].err);
    CHECK(unlink(lnk) == 0 && rename(target, lnk) == 0);

    /* worker:1 brings the keys of another job: each worker's CURVE
     * handshake with the other fails (neither holds the secret key behind
     * the public key the other expects), the ring never forms, and both
     * say so within the timeout, naming the other. */
    char other[160], oset[200];
    snprintf(other, sizeof other, "%s/other", g_dir);
    char *kg[] = { (char *)spawn_strata_bin(), "keygen", other, "worker:0-1",
                   NULL };
    CHECK(run(kg, 30) == 0);
    snprintf(oset, sizeof oset, "security.keys=%s", other);
    const char *theirs[] = { oset, NULL };
    job2(good, theirs, 60, r);
    for (int i = 0; i < 2; i++)
        CHECKF(r[i].code == 1 && strstr(r[i].err, "its handshake failed") &&
               strstr(r[i].err, i ? "worker:0" : "worker:1"),
               "foreign key: worker %d exit %d\n%s", i, r[i].code, r[i].err);
}

/* A task whose address is not one of this machine's does not listen on
 * every interface instead: it fails, naming the address. */
static void given_address_only(void)
{
    char tf[300];
    snprintf(tf, sizeof tf, "TF_CONFIG={\"cluster\": {\"worker\": "
             "[\"192.0.2.1:%d\", \"127.0.0.1:%d\"]}, \"task\": {\"type\": "
             "\"worker\", \"index\": 0}}", spawn_free_port(),
             spawn_free_port());
    char *argv[] = { (char *)spawn_strata_bin(), "train", "--set",
                     "strategy.plugin=mwms", "--set", "security.mode=off",
                     "--set", "train.max_steps=5", "--set",
                     "train.devices=cpu:0", "--set", "data.limit_train=320",
                     "--set", "transport.zmq.timeout_s=3", NULL };
    char *env[] = { tf, NULL };
    spawn_child_t c;
    CHECK(spawn_start(argv, env, &c) == 0);
    spawn_wait(&c, 60);
    spawn_collect(&c, g_r.out, sizeof g_r.out, g_r.err, sizeof g_r.err);
    CHECKF(c.code != 0 && strstr(g_r.err, "cannot listen on "
                                 "tcp://192.0.2.1:") &&
           !strstr(g_r.err, "every interface"),
           "a foreign address: exit %d\n%s", c.code, g_r.err);
}

/* launch makes the keys of its job itself and hands them to its tasks in
 * memfds: no key directory, ever (test_launch_kill.c: not even after a
 * kill -9). */
static void launched(void)
{
    /* launch's key directory went under TMPDIR: this test's own, so that
     * other jobs' directories in /tmp do not count */
    glob_t before, after;
    char pattern[200];
    snprintf(pattern, sizeof pattern, "%s/strata-keys-*", g_dir);
    const char *tmp = getenv("TMPDIR");
    char *saved = tmp ? strdup(tmp) : NULL;
    setenv("TMPDIR", g_dir, 1);
    glob(pattern, 0, NULL, &before);
    char *argv[] = { (char *)spawn_strata_bin(), "launch", "-n", "2", "--set",
                     "strategy.plugin=mwms", "--set", "train.max_steps=30",
                     "--set", "train.eval=false", "--set",
                     "train.devices=cpu:0", "--set", "data.limit_train=2000",
                     NULL };
    CHECKF(run(argv, 120) == 0 && !strstr(g_r.err, "no keys"),
           "launch: exit %d\n%s", g_r.code, g_r.err);
    glob(pattern, 0, NULL, &after);
    CHECKF(after.gl_pathc == 0 && before.gl_pathc == 0, "launch left %zu "
           "key directories behind", after.gl_pathc);
    if (saved)
        setenv("TMPDIR", saved, 1);
    else
        unsetenv("TMPDIR");
    free(saved);
    globfree(&before);
    globfree(&after);
}

int main(void)
{
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
               R_OK) != 0)
        CHECK_SKIP("Fashion-MNIST not installed");
    CHECK(mkdtemp(g_dir) != NULL);
    unsetenv("STRATA_LAUNCH_KEYS_FD");
    keygen();
    refusals();
    given_address_only();
    launched();
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    CHECK(system(cmd) == 0);
    return CHECK_DONE();
}
