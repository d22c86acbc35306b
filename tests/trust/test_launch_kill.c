/* `kill -9` of strata launch, through the binary: the job's ephemeral keys
 * leave nothing behind (they never touch the disk: each task reads its own
 * sealed memfd, and holds no other task's), and the tasks are gone within
 * seconds (PR_SET_PDEATHSIG), reaped here as their subreaper. Before, a
 * strata-keys-XXXXXX directory with every task's secret key stayed in
 * $TMPDIR. A task refuses a STRATA_LAUNCH_KEYS_FD that is not a number or
 * not such a memfd (a closed fd here), naming it. */
#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "spawn.h"
#include "testutil.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The pids whose parent is `parent`, into pid[max]; how many. */
static int children_of(pid_t parent, pid_t *pid, int max)
{
    int n = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL && n < max) {
        char path[300], text[512];
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        text[0] = '\0';
        spawn_read_file_(path, text, sizeof text);
        const char *rp = strrchr(text, ')'); /* the name may hold spaces */
        long ppid = 0;
        if (rp && sscanf(rp + 1, " %*c %ld", &ppid) == 1 && ppid == parent)
            pid[n++] = (pid_t)atol(e->d_name);
    }
    if (d)
        closedir(d);
    return n;
}

/* Open files of `pid` that are launch's key memfds. */
static int key_memfds(pid_t pid)
{
    char path[64], target[256];
    snprintf(path, sizeof path, "/proc/%ld/fd", (long)pid);
    DIR *d = opendir(path);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL) {
        char fd[320];
        snprintf(fd, sizeof fd, "%s/%s", path, e->d_name);
        ssize_t len = readlink(fd, target, sizeof target - 1);
        if (len > 0) {
            target[len] = '\0';
            n += strstr(target, "memfd:strata-keys") != NULL;
        }
    }
    if (d)
        closedir(d);
    return n;
}

/* Entries of `dir` other than . and .. */
static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

/* Worker 0 of a 2-worker job with STRATA_LAUNCH_KEYS_FD=value: it
 * refuses at once, its error into err. */
static int bad_fd(const char *value, char *err, size_t cap)
{
    char tf[300], env_fd[100];
    snprintf(tf, sizeof tf, "TF_CONFIG={\"cluster\": {\"worker\": "
             "[\"127.0.0.1:%d\", \"127.0.0.1:%d\"]}, \"task\": {\"type\": "
             "\"worker\", \"index\": 0}}", spawn_free_port(),
             spawn_free_port());
    snprintf(env_fd, sizeof env_fd, "STRATA_LAUNCH_KEYS_FD=%s", value);
    char *argv[] = { (char *)spawn_strata_bin(), "train", "--set",
                     "strategy.plugin=mwms", "--set", "train.devices=cpu:0",
                     "--set", "data.limit_train=320", NULL };
    char *env[] = { tf, env_fd, NULL };
    spawn_child_t c;
    char out[8192];
    if (spawn_start(argv, env, &c) != 0)
        return -1;
    spawn_wait(&c, 60);
    spawn_collect(&c, out, sizeof out, err, cap);
    return c.code;
}

int main(void)
{
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
               R_OK) != 0)
        CHECK_SKIP("Fashion-MNIST not installed");
    /* Orphans of the killed launch come to us: we reap them. */
    CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
    const char *tmp = tmp_make("launchkill");
    char tmpdir_env[300];
    snprintf(tmpdir_env, sizeof tmpdir_env, "TMPDIR=%s", tmp);
    char *argv[] = { (char *)spawn_strata_bin(), "launch", "-n", "2", "--set",
                     "strategy.plugin=mwms", "--set", "train.epochs=1000",
                     "--set", "train.eval=false", "--set",
                     "train.devices=cpu:0", "--set", "data.limit_train=2000",
                     "--set", "train.progress=none", NULL };
    char *env[] = { tmpdir_env, NULL };
    spawn_child_t launch;
    CHECK(spawn_start(argv, env, &launch) == 0);

    /* Mid-run: both tasks have read their keys and formed the job. */
    char out[16384] = "";
    double t0 = now_s();
    while (!strstr(out, "security: CURVE") && now_s() - t0 < 60 &&
           waitpid(launch.pid, NULL, WNOHANG) == 0) {
        usleep(50000);
        spawn_read_file_(launch.outp, out, sizeof out);
    }
    CHECKF(strstr(out, "security: CURVE"), "the job did not start:\n%s", out);
    pid_t task[8];
    int ntask = children_of(launch.pid, task, 8);
    CHECKF(ntask == 2, "launch has %d children", ntask);
    for (int i = 0; i < ntask; i++)
        CHECKF(key_memfds(task[i]) == 1, "task %ld holds %d key memfds",
               (long)task[i], key_memfds(task[i]));
    CHECKF(entries(tmp) == 0, "%d files in launch's TMPDIR %s", entries(tmp),
           tmp);

    CHECK(kill(launch.pid, SIGKILL) == 0);
    spawn_wait(&launch, 10);
    CHECK(launch.code == 128 + SIGKILL);

    /* The tasks go (SIGTERM from the kernel: they stop at their next step
     * boundary); bounded, then killed and reported. */
    int left = ntask;
    t0 = now_s();
    while (left > 0 && now_s() - t0 < 30) {
        pid_t w = waitpid(-1, NULL, WNOHANG);
        if (w > 0)
            left--;
        else if (w < 0)
            break;
        else
            usleep(20000);
    }
    double took = now_s() - t0;
    CHECKF(left == 0, "%d tasks still running %.0f s after launch died", left,
           took);
    for (int i = 0; left > 0 && i < ntask; i++)
        kill(task[i], SIGKILL);
    while (waitpid(-1, NULL, 0) > 0)
        ;
    printf("tasks gone %.2f s after launch's kill -9\n", took);

    /* Nothing left behind: no key directory, no file at all. */
    CHECKF(entries(tmp) == 0, "launch left %d files in %s", entries(tmp), tmp);
    char err[16384];
    spawn_collect(&launch, out, sizeof out, err, sizeof err);

    CHECKF(bad_fd("3x", err, sizeof err) == 2 &&
           strstr(err, "STRATA_LAUNCH_KEYS_FD = '3x': not a file descriptor"),
           "%s", err);
    CHECKF(bad_fd("200", err, sizeof err) == 2 &&
           strstr(err, "launch's keys (fd 200): not the keys strata launch "
                       "hands its tasks"), "%s", err);
    tmp_cleanup();
    return CHECK_DONE();
}
