/* debug.step_log: what every step trained on and when it was applied, one
 * line each, appended by every task of a job to one file (O_APPEND: each
 * line is one write, so lines of several processes never interleave):
 *
 *   try <task> g<generation> e<epoch> s<step> r<replica> <id>,<id>,...
 *   done <task> g<generation> s<step> t<unix seconds>.<nanoseconds>
 *
 * A `try` line is written before the replica's gradient leaves it, so a
 * step that was applied has the try lines of every slice that went into
 * it; a step tried again after a failure has lines of two generations, and
 * the later generation's are the ones that count. The test of an elastic
 * job's exactly-once data (tests/elastic) and the recovery benchmark
 * (contrib/bench/recovery) read it.
 *
 * Being appended to by several processes, the file is the one output that
 * is continued rather than replaced: created new when missing, else used
 * only when it is a regular file of this user with one name (a link, FIFO,
 * device or someone else's file at the name is an error, and is neither
 * followed, waited on nor written). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "createfile.h"
#include "elastic.h"
#include "run.h"

/* Why an existing step log (its lstat: `st`) is not ours to continue; NULL
 * when it is: a regular file of this user with no other name (a hard
 * link planted there would have us append to its other name). */
static const char *not_ours(const struct stat *st)
{
    if (S_ISLNK(st->st_mode))
        return "a symbolic link; strata does not follow it";
    if (!S_ISREG(st->st_mode))
        return "not a regular file; strata appends only to one";
    if (st->st_uid != geteuid())
        return "owned by another user; strata appends only to its own";
    if (st->st_nlink != 1)
        return "a file with other names (hard links); strata does not "
               "append to it";
    return NULL;
}

/* The step log: created new, or, since every task of a job (and a job run
 * again) appends to the same file, an existing one that is ours (see
 * not_ours), opened without following a link or waiting on a FIFO and
 * checked to be the file looked at. An fd, or -1 after the error line. */
static int open_step_log(const char *path)
{
    int fd = strata__create_new(path, 0644, O_APPEND);
    if (fd >= 0)
        return fd;
    const char *why = fd == -EEXIST ? NULL : strerror(-fd);
    struct stat st, fst;
    fd = -1;
    if (!why && lstat(path, &st) != 0)
        why = strerror(errno);
    if (!why)
        why = not_ours(&st);
    if (!why && (fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW |
                                     O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) < 0)
        why = strerror(errno);
    if (!why && (fstat(fd, &fst) != 0 || fst.st_dev != st.st_dev ||
                 fst.st_ino != st.st_ino))
        why = "replaced while being opened";
    if (why) {
        if (fd >= 0)
            close(fd);
        strata__log(STRATA_LOG_ERROR, "debug", "step_log = '%s': %s", path,
                    why);
        return -1;
    }
    return fd; /* O_NONBLOCK: no effect on a regular file's writes */
}

int strata__steplog_open(strata__run_t *run)
{
    run->steplog_fd = -1;
    const char *path = run->s->debug.step_log;
    if (!path || !path[0])
        return STRATA_OK;
    int fd = open_step_log(path);
    if (fd < 0)
        return STRATA_ECONFIG;
    run->steplog_fd = fd;
    for (int r = 0; r < run->nreplicas; r++) {
        strata__replica_t *rep = &run->reps[r];
        rep->logcap = 160 + (size_t)run->slice_max * 11;
        rep->logbuf = malloc(rep->logcap);
        if (!rep->logbuf)
            return STRATA_ENOMEM;
    }
    return STRATA_OK;
}

void strata__steplog_close(strata__run_t *run)
{
    if (run->steplog_fd >= 0)
        close(run->steplog_fd);
    run->steplog_fd = -1;
    for (int r = 0; run->reps && r < run->nreplicas; r++) {
        free(run->reps[r].logbuf);
        run->reps[r].logbuf = NULL;
    }
}

static int generation(const strata__run_t *run)
{
    const strata_membership_t *g = strata__elastic_current(run->elastic);
    return g ? g->generation : 0;
}

static void put(int fd, const char *buf, size_t len)
{
    if (write(fd, buf, len) != (ssize_t)len) {
        /* a debug record: a short write is not the job's failure */
    }
}

void strata__steplog_try(strata__replica_t *rep, int epoch, int64_t step,
                         size_t first, size_t n)
{
    strata__run_t *run = rep->run;
    if (run->steplog_fd < 0 || !rep->logbuf)
        return;
    char *b = rep->logbuf;
    size_t cap = rep->logcap;
    int len = snprintf(b, cap, "try %s g%d e%d s%" PRId64 " r%d ", run->self,
                       generation(run), epoch, step, rep->r);
    size_t at = len > 0 ? (size_t)len : 0;
    for (size_t i = 0; i < n && at + 12 < cap; i++)
        at += (size_t)snprintf(b + at, cap - at, "%s%u", i ? "," : "",
                               run->perm[first + i]);
    b[at++] = '\n';
    put(run->steplog_fd, b, at);
}

void strata__steplog_done(strata__run_t *run, int64_t step)
{
    if (run->steplog_fd < 0)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char b[160];
    int len = snprintf(b, sizeof b, "done %s g%d s%" PRId64 " t%lld.%09ld\n",
                       run->self, generation(run), step,
                       (long long)ts.tv_sec, ts.tv_nsec);
    if (len > 0 && (size_t)len < sizeof b)
        put(run->steplog_fd, b, (size_t)len);
}
