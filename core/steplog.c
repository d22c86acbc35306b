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
 * (contrib/bench/recovery) read it. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "elastic.h"
#include "run.h"

int strata__steplog_open(strata__run_t *run)
{
    run->steplog_fd = -1;
    const char *path = run->s->debug.step_log;
    if (!path || !path[0])
        return STRATA_OK;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
                  0644);
    if (fd < 0) {
        strata__log(STRATA_LOG_ERROR, "debug", "step_log = '%s': %s", path,
                    strerror(errno));
        return STRATA_ECONFIG;
    }
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
