/* strata_comm_*: the collectives of the public API, as users run them.
 *
 * The driver (no argument) checks a job of one process (every collective
 * returns at once, bad arguments refused one by one), the refusals of a
 * ps task and of a job without keys, then runs this
 * program as a job of 3 tasks under `strata launch -n 3 test_comm task`,
 * secured with keys of strata keygen. Each task (argument "task") checks
 * every collective against the sum computed here (values exact in float32,
 * so any order of addition gives the same bits; counts odd and not a
 * multiple of 3), attacks its own port as a stranger would (garbage, HTTP,
 * a ZeroMQ client, a CURVE client whose key is not the job's) between two
 * collectives, which go on unharmed, and at the end rank 0 waits in an
 * all-reduce that the others never join: bounded by the transport's
 * timeout ([transport.zmq] timeout_s, set on the context). Then an elastic
 * job (launch --elastic 2:3 -n 3 test_comm elastic DIR): worker:2 dies at
 * step 8, the others regroup without it, launch restarts it, it joins the
 * job under way and they regroup with it; the state goes on to the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <strata/strata.h>

#include "check.h"
#include "hostile.h"
#include "spawn.h"

#define N 3          /* tasks */
#define COUNT 10007  /* odd, not a multiple of N */
#define TIMEOUT_S 2  /* [transport.zmq] timeout_s of the job */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Member r's value at i: a multiple of 1/4 below 2^11, exact in float32,
 * and so is any sum of N of them. */
static float val(int r, size_t i) { return (float)((r + 1) * 3 + (int)(i % 97)) * 0.25f; }

static float sum_at(size_t i)
{
    float s = 0;
    for (int r = 0; r < N; r++)
        s += val(r, i);
    return s;
}

/* Every collective refuses bad arguments alike, in any job. */
static void bad_arguments(strata_comm_t *c)
{
    float x[4] = { 0 };
    CHECK(strata_comm_allreduce(NULL, x, 4, STRATA_COMM_SUM) == STRATA_EINVAL);
    CHECK(strata_comm_allreduce(c, NULL, 4, STRATA_COMM_SUM) == STRATA_EINVAL);
    CHECK(strata_comm_allreduce(c, x, 4, 7) == STRATA_EINVAL);
    CHECK(strata_comm_reduce_scatter(c, x, 1, -1) == STRATA_EINVAL);
    CHECK(strata_comm_broadcast(c, x, 4, -1) == STRATA_EINVAL);
    CHECK(strata_comm_broadcast(c, x, 4, strata_comm_size(c)) == STRATA_EINVAL);
    CHECK(strata_comm_allgather(c, NULL, 1) == STRATA_EINVAL);
    CHECK(strata_comm_allgather(c, x, SIZE_MAX / 2) == STRATA_EINVAL);
    CHECK(strata_comm_barrier(NULL) == STRATA_EINVAL);
    CHECK(strata_comm_rank(NULL) == STRATA_EINVAL);
    CHECK(strata_comm_size(NULL) == STRATA_EINVAL);
    CHECK(strata_comm_hosts(NULL) == STRATA_EINVAL);
    CHECK(strata_comm_open(NULL, &c) == STRATA_EINVAL);
    strata_comm_close(NULL);
}

/* Refused before any connection: a task that does not train, a job of
 * several processes without keys (secured by default). */
static void refusals(void)
{
    strata_ctx_t *ctx = NULL;
    strata_comm_t *c = NULL;
    CHECK(strata_ctx_create(NULL, &ctx) == 0);
    CHECK(strata_ctx_set(ctx, "cluster.worker=127.0.0.1:1, 127.0.0.1:2") == 0);
    CHECK(strata_ctx_set(ctx, "cluster.ps=127.0.0.1:3") == 0);
    CHECK(strata_ctx_set_task(ctx, "ps:0") == 0);
    CHECK(strata_comm_open(ctx, &c) == STRATA_ECONFIG && !c);
    CHECK(strata_ctx_set_task(ctx, "worker:1") == 0);
    CHECK(strata_comm_open(ctx, &c) == STRATA_ECONFIG && !c); /* no keys */
    strata_ctx_destroy(ctx);
}

static void alone(void)
{
    strata_ctx_t *ctx = NULL;
    strata_comm_t *c = NULL;
    CHECK(strata_ctx_create(NULL, &ctx) == 0);
    CHECK(strata_comm_open(ctx, &c) == 0 && c);
    CHECK(strata_comm_rank(c) == 0 && strata_comm_size(c) == 1);
    CHECK(!strcmp(strata_comm_transport(c), "none"));
    CHECK(strata_comm_hosts(c) == 1);
    float x[3] = { 1, 2, 3 };
    CHECK(strata_comm_allreduce(c, x, 3, STRATA_COMM_MEAN) == 0 && x[2] == 3);
    CHECK(strata_comm_broadcast(c, x, 3, 0) == 0 && x[0] == 1);
    CHECK(strata_comm_allgather(c, x, 3) == 0 && x[1] == 2);
    CHECK(strata_comm_reduce_scatter(c, x, 3, STRATA_COMM_SUM) == 0);
    CHECK(strata_comm_barrier(c) == 0);
    int64_t resume = 7;   /* not an elastic job: */
    CHECK(strata_comm_regroup(c, 0, &resume) == STRATA_ENOTSUP && resume == -1);
    CHECK(strata_comm_resize_due(c) == 0 && strata_comm_resume_step(c) == -1);
    strata_comm_finish(c, 0);
    CHECK(strata_comm_regroup(NULL, 0, NULL) == STRATA_EINVAL);
    bad_arguments(c);
    strata_comm_close(c);
    strata_ctx_destroy(ctx);
}

/* This task's port: its entry in launch's TF_CONFIG worker list. */
static int my_port(int rank)
{
    const char *tf = getenv("TF_CONFIG"), *p = tf ? strstr(tf, "\"worker\"") : NULL;
    for (int i = 0; p && (p = strstr(p, "127.0.0.1:")); i++, p++)
        if (i == rank)
            return atoi(p + 10);
    return -1;
}

static void attack_self(int rank)
{
    int port = my_port(rank);
    CHECKF(port > 0, "no port for rank %d in TF_CONFIG", rank);
    static const char garbage[] = "\x01\xff\x00\x7fnot a greeting at all";
    static const char http[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    char path[256], key[41];
    snprintf(path, sizeof path, "%s/worker-%d.key",
             getenv("STRATA_SECURITY_KEYS"), rank);
    CHECK(hostile_cert_key(path, key) == 0);
    CHECK(hostile_raw(port, garbage, sizeof garbage - 1) == 0);
    CHECK(hostile_raw(port, http, sizeof http - 1) == 0);
    CHECK(hostile_zmq(port, NULL) == 0);
    CHECK(hostile_zmq(port, key) == 0);
}

static int task(void)
{
    strata_ctx_t *ctx = NULL;
    strata_comm_t *c = NULL;
    CHECK(strata_ctx_create(NULL, &ctx) == 0);
    char timeout[64];
    snprintf(timeout, sizeof timeout, "transport.zmq.timeout_s=%d", TIMEOUT_S);
    CHECK(strata_ctx_set(ctx, timeout) == 0);
    int rc = strata_comm_open(ctx, &c);
    CHECKF(rc == 0, "strata_comm_open: %s", strata_strerror(rc));
    if (rc != 0)
        return CHECK_DONE();
    int rank = strata_comm_rank(c);
    CHECK(strata_comm_size(c) == N && rank >= 0 && rank < N);
    CHECK(strata_comm_hosts(c) == 1 && !strcmp(strata_comm_transport(c), "zmq"));
    float *buf = malloc(N * COUNT * sizeof *buf);

    /* all-reduce, sum then mean */
    for (size_t i = 0; i < COUNT; i++)
        buf[i] = val(rank, i);
    CHECK(strata_comm_allreduce(c, buf, COUNT, STRATA_COMM_SUM) == 0);
    int bad = 0;
    for (size_t i = 0; i < COUNT; i++)
        bad += buf[i] != sum_at(i);
    CHECKF(bad == 0, "rank %d: %d sums differ", rank, bad);

    attack_self(rank); /* a stranger between two collectives */
    CHECK(strata_comm_barrier(c) == 0);

    for (size_t i = 0; i < COUNT; i++)
        buf[i] = val(rank, i);
    CHECK(strata_comm_allreduce(c, buf, COUNT, STRATA_COMM_MEAN) == 0);
    bad = 0;
    for (size_t i = 0; i < COUNT; i++)
        bad += buf[i] != sum_at(i) / N;
    CHECKF(bad == 0, "rank %d: %d means differ", rank, bad);

    /* broadcast from the last rank */
    for (size_t i = 0; i < COUNT; i++)
        buf[i] = val(rank, i);
    CHECK(strata_comm_broadcast(c, buf, COUNT, N - 1) == 0);
    bad = 0;
    for (size_t i = 0; i < COUNT; i++)
        bad += buf[i] != val(N - 1, i);
    CHECKF(bad == 0, "rank %d: %d broadcast values differ", rank, bad);

    /* all-gather: each fills its block */
    for (size_t i = 0; i < N * COUNT; i++)
        buf[i] = -1;
    for (size_t i = 0; i < COUNT; i++)
        buf[(size_t)rank * COUNT + i] = val(rank, i);
    CHECK(strata_comm_allgather(c, buf, COUNT) == 0);
    bad = 0;
    for (int r = 0; r < N; r++)
        for (size_t i = 0; i < COUNT; i++)
            bad += buf[(size_t)r * COUNT + i] != val(r, i);
    CHECKF(bad == 0, "rank %d: %d gathered values differ", rank, bad);

    /* reduce-scatter: block m of every member's buffer, summed on m */
    for (size_t i = 0; i < N * COUNT; i++)
        buf[i] = val(rank, i);
    CHECK(strata_comm_reduce_scatter(c, buf, COUNT, STRATA_COMM_SUM) == 0);
    bad = 0;
    for (size_t i = 0; i < COUNT; i++)
        bad += buf[(size_t)rank * COUNT + i] != sum_at((size_t)rank * COUNT + i);
    CHECKF(bad == 0, "rank %d: %d scattered sums differ", rank, bad);

    bad_arguments(c);
    CHECK(strata_comm_barrier(c) == 0);

    /* Members that are there but never call: rank 0's wait ends with the
     * transport's timeout (the others stay connected past it). */
    if (rank == 0) {
        double t0 = now_s();
        rc = strata_comm_allreduce(c, buf, COUNT, STRATA_COMM_SUM);
        double took = now_s() - t0;
        CHECKF(rc == STRATA_ETIMEDOUT, "allreduce without the others: %s",
               strata_strerror(rc));
        CHECKF(took > 0.9 * TIMEOUT_S && took < 3 * TIMEOUT_S,
               "it waited %.1f s (timeout %d s)", took, TIMEOUT_S);
        printf("rank 0: alone in an all-reduce for %.1f s: %s\n", took,
               strata_err_name(rc));
    } else {
        sleep(3 * TIMEOUT_S);
    }
    free(buf);
    strata_comm_close(c);
    strata_ctx_destroy(ctx);
    if (!check_failed_)
        printf("rank %d: collectives ok\n", rank);
    return CHECK_DONE();
}

/* ---- an elastic job: launch --elastic 2:3 -n 3 test_comm elastic DIR ---- */

#define STEPS 40
#define DEADLINE_S 40.0

typedef struct elastic {
    strata_comm_t *c;
    float state[4], step; /* step: exact in float32 this far */
    char sizes[64];
} elastic_t;

/* Go on in the next generation from rank 0's state. */
static int regroup(elastic_t *e)
{
    int64_t resume = -1;
    int rc = strata_comm_regroup(e->c, (int64_t)e->step, &resume);
    if (rc == 0)
        rc = strata_comm_broadcast(e->c, e->state, 4, 0);
    if (rc == 0)
        rc = strata_comm_broadcast(e->c, &e->step, 1, 0);
    size_t n = strlen(e->sizes);
    snprintf(e->sizes + n, sizeof e->sizes - n, " %d", strata_comm_size(e->c));
    CHECKF(rc == 0 && resume == (int64_t)e->step, "regroup: %s, resume %lld "
           "at step %g", strata_strerror(rc), (long long)resume, e->step);
    return rc;
}

/* One step: the members agree on a resize, else add the mean of step + 1
 * (the same whoever computes it). worker:2 dies at step 8 the first time
 * (a marker file in dir). */
static int elastic_step(elastic_t *e, const char *me, const char *marker)
{
    float due = strata_comm_resize_due(e->c) ? 1.0f : 0.0f;
    int rc = strata_comm_allreduce(e->c, &due, 1, STRATA_COMM_SUM);
    if (rc == 0 && due > 0)
        return regroup(e);
    float g[4] = { e->step + 1, e->step + 1, e->step + 1, e->step + 1 };
    if (rc == 0)
        rc = strata_comm_allreduce(e->c, g, 4, STRATA_COMM_MEAN);
    if (rc == STRATA_EPEER || rc == STRATA_ETIMEDOUT || rc == STRATA_ECANCELED)
        return regroup(e);   /* a member was lost */
    for (int i = 0; rc == 0 && i < 4; i++)
        e->state[i] += g[i];
    e->step += rc == 0;
    usleep(50 * 1000);
    if (!strcmp(me, "worker:2") && e->step == 8 && access(marker, F_OK) != 0) {
        FILE *f = fopen(marker, "w");
        if (f)
            fclose(f);
        _exit(1);            /* launch restarts it */
    }
    return rc;
}

static int elastic_task(const char *dir)
{
    const char *me = getenv("STRATA_LAUNCHED");
    char marker[4096];
    snprintf(marker, sizeof marker, "%s/died", dir);
    strata_ctx_t *ctx = NULL;
    elastic_t e = { .step = 0 };
    CHECK(me && strata_ctx_create(NULL, &ctx) == 0);
    int rc = strata_comm_open(ctx, &e.c);
    CHECKF(rc == 0, "strata_comm_open: %s", strata_strerror(rc));
    snprintf(e.sizes, sizeof e.sizes, "%d", strata_comm_size(e.c));
    if (rc == 0 && strata_comm_resume_step(e.c) >= 0) { /* under way */
        rc = strata_comm_broadcast(e.c, e.state, 4, 0);
        if (rc == 0)
            rc = strata_comm_broadcast(e.c, &e.step, 1, 0);
        printf("%s joined at step %g\n", me, e.step);
    }
    double t0 = now_s();
    while (rc == 0 && (e.step < STEPS || (strata_comm_size(e.c) < 3 &&
                                          now_s() - t0 < DEADLINE_S)))
        rc = elastic_step(&e, me, marker);
    CHECKF(rc == 0, "%s: %s", me, strata_strerror(rc));
    for (int i = 0; i < 4; i++)
        CHECK(e.state[i] == e.step * (e.step + 1) / 2);
    strata_comm_finish(e.c, (int64_t)e.step);
    strata_comm_close(e.c);
    strata_ctx_destroy(ctx);
    if (!check_failed_)
        printf("%s: ok at step %g, sizes %s\n", me, e.step, e.sizes);
    return CHECK_DONE();
}

static void elastic(void)
{
    char self[4096], dir[] = "/tmp/strata-test-elasticXXXXXX";
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    CHECK(n > 0 && mkdtemp(dir));
    char *args[] = { "--elastic", "2:3", "-n", "3", "--max-restarts", "2",
                     self, "elastic", dir, NULL };
    spawn_result_t *r = malloc(sizeof *r);
    double t0 = now_s();
    spawn_strata("launch", args, 150, r);
    printf("elastic job of 2 to 3 tasks: exit %d in %.1f s\n", r->code,
           now_s() - t0);
    CHECKF(r->code == 0, "launch --elastic exit %d", r->code);
    CHECKF(strstr(r->out, "[worker:2] worker:2 joined at step"),
           "worker:2 did not rejoin:\n%s", r->out);
    for (int k = 0; k < N; k++) {
        char want[64];
        snprintf(want, sizeof want, "[worker:%d] worker:%d: ok at step", k, k);
        CHECKF(strstr(r->out, want), "no '%s' in:\n%s", want, r->out);
    }
    CHECKF(strstr(r->out, "sizes 3 2 3"), "no regroup 3 -> 2 -> 3:\n%s",
           r->out);
    char marker[64];
    snprintf(marker, sizeof marker, "%s/died", dir);
    unlink(marker);
    rmdir(dir);
    free(r);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "task"))
        return task();
    if (argc > 2 && !strcmp(argv[1], "elastic"))
        return elastic_task(argv[2]);
    alone();
    refusals();   /* before the keys exist */
    CHECK(spawn_job_keys() == 0);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0);
    self[n > 0 ? n : 0] = '\0';
    char *args[] = { "-n", "3", self, "task", NULL };
    spawn_result_t *r = malloc(sizeof *r);
    double t0 = now_s();
    spawn_strata("launch", args, 120, r);
    printf("3 tasks under strata launch: exit %d in %.1f s\n", r->code,
           now_s() - t0);
    CHECKF(r->code == 0, "launch exit %d", r->code);
    for (int k = 0; k < N; k++) {
        char want[64];
        snprintf(want, sizeof want, "[worker:%d] rank %d: collectives ok", k, k);
        CHECKF(strstr(r->out, want), "no '%s' in:\n%s", want, r->out);
    }
    const char *alone = strstr(r->out, "rank 0: alone in an all-reduce");
    CHECKF(alone, "rank 0 did not time out:\n%s", r->out);
    if (alone)
        printf("%.*s\n", (int)strcspn(alone, "\n"), alone);
    /* every task's stranger was refused and reported, the job went on */
    CHECKF(strstr(r->err, "refused by ZAP"), "no stranger reported:\n%s", r->err);
    free(r);
    elastic();
    return CHECK_DONE();
}
