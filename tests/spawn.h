/* Run a program with a deadline, capturing its output: for tests that drive
 * the strata binary. The child is always reaped (killed at the deadline). */
#ifndef STRATA_TESTS_SPAWN_H
#define STRATA_TESTS_SPAWN_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct spawn_result {
    int  code;          /* exit code; 128+N when killed by signal N; -1 on error */
    int  timed_out;
    char out[65536];    /* stdout, truncated */
    char err[65536];    /* stderr, truncated */
} spawn_result_t;

static inline void spawn_read_file_(const char *path, char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* argv[0] is the program path; argv ends with NULL. */
static inline int spawn_run(char *const argv[], int timeout_s, spawn_result_t *res)
{
    char outp[] = "/tmp/strata-test-outXXXXXX", errp[] = "/tmp/strata-test-errXXXXXX";
    int ofd = mkstemp(outp), efd = mkstemp(errp);
    res->code = -1;
    res->timed_out = 0;
    if (ofd < 0 || efd < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(ofd, 1);
        dup2(efd, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    close(ofd);
    close(efd);
    int status = 0;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec >= timeout_s) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            res->timed_out = 1;
            break;
        }
        usleep(10000);
    }
    res->code = WIFEXITED(status) ? WEXITSTATUS(status)
              : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
    spawn_read_file_(outp, res->out, sizeof res->out);
    spawn_read_file_(errp, res->err, sizeof res->err);
    unlink(outp);
    unlink(errp);
    return 0;
}

/* A child started without waiting: output goes to files read at the end. */
typedef struct spawn_child {
    pid_t pid;
    char  outp[64], errp[64];
    int   code;            /* after spawn_wait */
    int   reaped;
} spawn_child_t;

/* Start argv with extra environment entries ("NAME=value", NULL-ended). */
static inline int spawn_start(char *const argv[], char *const env_add[],
                       spawn_child_t *c)
{
    snprintf(c->outp, sizeof c->outp, "/tmp/strata-test-outXXXXXX");
    snprintf(c->errp, sizeof c->errp, "/tmp/strata-test-errXXXXXX");
    int ofd = mkstemp(c->outp), efd = mkstemp(c->errp);
    c->code = -1;
    c->reaped = 0;
    if (ofd < 0 || efd < 0)
        return -1;
    c->pid = fork();
    if (c->pid == 0) {
        dup2(ofd, 1);
        dup2(efd, 2);
        for (int i = 0; env_add && env_add[i]; i++)
            putenv(env_add[i]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(ofd);
    close(efd);
    return c->pid > 0 ? 0 : -1;
}

/* Wait until the child exits or `timeout_s` passes (then SIGKILL). Returns
 * the seconds waited. */
static inline double spawn_wait(spawn_child_t *c, double timeout_s)
{
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double waited = 0;
    int status = 0;
    for (;;) {
        pid_t w = waitpid(c->pid, &status, WNOHANG);
        clock_gettime(CLOCK_MONOTONIC, &now);
        waited = (double)(now.tv_sec - t0.tv_sec) +
                 (double)(now.tv_nsec - t0.tv_nsec) * 1e-9;
        if (w == c->pid)
            break;
        if (waited >= timeout_s) {
            kill(c->pid, SIGCONT);
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &status, 0);
            break;
        }
        usleep(10000);
    }
    c->reaped = 1;
    c->code = WIFEXITED(status) ? WEXITSTATUS(status)
            : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
    return waited;
}

/* Read the child's output files (after spawn_wait) and remove them. */
static inline void spawn_collect(spawn_child_t *c, char *out, size_t outcap, char *err,
                          size_t errcap)
{
    spawn_read_file_(c->outp, out, outcap);
    spawn_read_file_(c->errp, err, errcap);
    unlink(c->outp);
    unlink(c->errp);
}

/* A TCP port that was free on 127.0.0.1 a moment ago. */
static inline int spawn_free_port(void);

/* A port on 127.0.0.1 for a task that listens (zmq: SO_REUSEADDR), held
 * until this test ends, as strata launch holds its tasks' (see launch.c's
 * free_port): the kernel never hands it to another bind(0) or connect()
 * meanwhile, and two calls never give the same port. */
static inline int spawn_task_port(void);

/* The strata binary under test ($STRATA_BIN, set by ctest). */
static inline const char *spawn_strata_bin(void)
{
    const char *b = getenv("STRATA_BIN");
    return b && *b ? b : "strata";
}

/* Tasks started by hand (TF_CONFIG) form a job of several processes,
 * which strata secures with CURVE keys as a user's job is: `strata keygen`
 * makes them in a private temp dir for every task these tests start, and
 * STRATA_SECURITY_KEYS hands them to every child. Removed at exit. */
/* `strata CMD ARGS...` (args NULL-terminated, at most 61) into *r; when it
 * fails, its output goes to the test's stderr. Returns its exit code. */
static inline int spawn_strata(const char *cmd, char *const *args,
                               int timeout_s, spawn_result_t *r)
{
    char *argv[64] = { (char *)spawn_strata_bin(), (char *)cmd };
    int n = 2;
    for (int i = 0; args[i] && n < 63; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    spawn_run(argv, timeout_s, r);
    if (r->code != 0)
        fprintf(stderr, "strata %s exited %d:\n%s\n%s\n", cmd, r->code,
                r->out, r->err);
    return r->code;
}

/* `strata CMD -c JOB --set S...` (launch: with -n 2, 2 workers), the
 * settings of the NULL-terminated lists `common` then `more`. */
static inline int spawn_strata_job(const char *cmd, const char *job,
                                   const char *const *common,
                                   const char *const *more, int timeout_s,
                                   spawn_result_t *r)
{
    char *args[64];
    int a = 0;
    if (!strcmp(cmd, "launch")) {
        args[a++] = "-n";
        args[a++] = "2";
    }
    args[a++] = "-c";
    args[a++] = (char *)job;
    for (const char *const *l = common; l; l = l == common ? more : NULL)
        for (int i = 0; l[i] && a < 61; i++) {
            args[a++] = "--set";
            args[a++] = (char *)l[i];
        }
    args[a] = NULL;
    return spawn_strata(cmd, args, timeout_s, r);
}

static char spawn_keys_dir_[64];

static inline void spawn_keys_remove_(void)
{
    char cmd[128];
    if (spawn_keys_dir_[0]) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", spawn_keys_dir_);
        if (system(cmd) != 0) {
            /* best effort: a temp dir */
        }
    }
}

static inline int spawn_job_keys(void)
{
    if (spawn_keys_dir_[0])
        return 0;
    snprintf(spawn_keys_dir_, sizeof spawn_keys_dir_,
             "/tmp/strata-test-keysXXXXXX");
    if (!mkdtemp(spawn_keys_dir_)) {
        spawn_keys_dir_[0] = '\0';
        return -1;
    }
    atexit(spawn_keys_remove_);
    char *argv[] = { (char *)spawn_strata_bin(), "keygen", "--force",
                     spawn_keys_dir_, "chief:0", "worker:0-15", "ps:0-7",
                     "evaluator:0", NULL };
    spawn_result_t *r = malloc(sizeof *r);
    int ok = r && spawn_run(argv, 60, r) == 0 && r->code == 0;
    if (!ok)
        fprintf(stderr, "spawn_job_keys: strata keygen failed: %s\n",
                r ? r->err : "out of memory");
    free(r);
    return ok && setenv("STRATA_SECURITY_KEYS", spawn_keys_dir_, 1) == 0
               ? 0 : -1;
}

static inline int spawn_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static inline int spawn_task_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0 &&
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0)
        return ntohs(a.sin_port); /* fd stays open: the exit closes it */
    if (fd >= 0)
        close(fd);
    return -1;
}

#endif
