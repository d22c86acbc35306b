/* Run a program with a deadline, capturing its output: for tests that drive
 * the strata binary. The child is always reaped (killed at the deadline). */
#ifndef STRATA_TESTS_SPAWN_H
#define STRATA_TESTS_SPAWN_H

#include <fcntl.h>
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

static void spawn_read_file_(const char *path, char *buf, size_t cap)
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
static int spawn_run(char *const argv[], int timeout_s, spawn_result_t *res)
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

/* The strata binary under test ($STRATA_BIN, set by ctest). */
static const char *spawn_strata_bin(void)
{
    const char *b = getenv("STRATA_BIN");
    return b && *b ? b : "strata";
}

#endif
