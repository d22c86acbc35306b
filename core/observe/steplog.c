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

#include "base/createfile.h"
#include "member/elastic.h"
#include "run/run.h"

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

typedef struct steplog {
    const strata__run_t *run;
    int                  fd;
    int                  nbufs;
    size_t               cap;      /* of each replica's line buffer        */
    char               **buf;      /* one per replica: lines are built on  */
                                   /* the replicas' threads at once        */
} steplog_t;

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

static void tried(steplog_t *l, const strata__event_t *ev)
{
    const strata__run_t *run = l->run;
    char *b = l->buf[ev->replica];
    size_t cap = l->cap;
    int len = snprintf(b, cap, "try %s g%d e%d s%" PRId64 " r%d ", run->self,
                       generation(run), ev->epoch, ev->step, ev->replica);
    size_t at = len > 0 ? (size_t)len : 0;
    for (size_t i = 0; i < ev->n && at + 12 < cap; i++)
        at += (size_t)snprintf(b + at, cap - at, "%s%u", i ? "," : "",
                               ev->ids[i]);
    b[at++] = '\n';
    put(l->fd, b, at);
}

static void applied(steplog_t *l, int64_t step)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char b[160];
    int len = snprintf(b, sizeof b, "done %s g%d s%" PRId64 " t%lld.%09ld\n",
                       l->run->self, generation(l->run), step,
                       (long long)ts.tv_sec, ts.tv_nsec);
    if (len > 0 && (size_t)len < sizeof b)
        put(l->fd, b, (size_t)len);
}

static int on_event(void *self, const strata__event_t *ev)
{
    steplog_t *l = self;
    if (ev->kind == STRATA__EV_SAMPLES && ev->replica < l->nbufs)
        tried(l, ev);
    else if (ev->kind == STRATA__EV_APPLIED)
        applied(l, ev->step);
    return STRATA_OK;
}

static void close_steplog(void *self)
{
    steplog_t *l = self;
    if (l->fd >= 0)
        close(l->fd);
    for (int r = 0; l->buf && r < l->nbufs; r++)
        free(l->buf[r]);
    free(l->buf);
    free(l);
}

int strata__steplog_observer(strata__run_t *run, strata__bus_t *bus)
{
    const char *path = run->s->debug.step_log;
    if (!path || !path[0])
        return STRATA_OK;
    steplog_t *l = calloc(1, sizeof *l);
    if (!l)
        return STRATA_ENOMEM;
    l->run = run;
    l->fd = -1;
    l->cap = 160 + (size_t)run->geo.slice_max * 11;
    l->buf = calloc((size_t)run->nreplicas, sizeof *l->buf);
    int rc = l->buf ? STRATA_OK : STRATA_ENOMEM;
    for (int r = 0; rc == STRATA_OK && r < run->nreplicas; r++, l->nbufs++)
        if (!(l->buf[r] = malloc(l->cap)))
            rc = STRATA_ENOMEM;
    if (rc == STRATA_OK && (l->fd = open_step_log(path)) < 0)
        rc = STRATA_ECONFIG;
    if (rc != STRATA_OK) {
        close_steplog(l);
        return rc;
    }
    const strata__observer_t o = { "step_log", l, on_event, close_steplog };
    return strata__bus_add(bus, &o);
}
