/* A ps job for the tests: a chief (coordinator), workers and ps tasks, each
 * a `strata train` child with its own TF_CONFIG on free loopback ports;
 * tasks can be killed and restarted; every child is reaped. */
#ifndef STRATA_TESTS_PS_JOB_H
#define STRATA_TESTS_PS_JOB_H

#include "spawn.h"

#define JOB_MAX   8
#define JOB_OUT   (1 << 17)
#define JOB_SETS  32

typedef struct job_task {
    char          type[8];
    int           index, port, running;
    spawn_child_t child;
    char          tf[1024];
    char         *out, *err;     /* everything it printed, all restarts */
    size_t        out_len, err_len;
    int           code;          /* exit code of its last run */
} job_task_t;

typedef struct job {
    int        n;
    job_task_t t[JOB_MAX];
    char      *sets[JOB_SETS];
    int        nsets;
    const char *config;      /* -c FILE for every task, or NULL */
} job_t;

/* The cluster: chief, workers, ps in TF_CONFIG's JSON. */
static void job_config(job_t *j, int self)
{
    static const char *const types[] = { "chief", "worker", "ps" };
    char list[3][512] = { "", "", "" };
    for (int k = 0; k < 3; k++) {
        size_t at = 0;
        for (int i = 0; i < j->n; i++)
            if (!strcmp(j->t[i].type, types[k]))
                at += (size_t)snprintf(list[k] + at, sizeof list[k] - at,
                                       "%s\"127.0.0.1:%d\"", at ? ", " : "",
                                       j->t[i].port);
    }
    char cl[1600] = "";
    size_t at = 0;
    for (int k = 0; k < 3; k++)
        if (list[k][0])
            at += (size_t)snprintf(cl + at, sizeof cl - at, "%s\"%s\": [%s]",
                                   at ? ", " : "", types[k], list[k]);
    char type[8], tf[sizeof j->t[self].tf];
    memcpy(type, j->t[self].type, sizeof type);
    int n = snprintf(tf, sizeof tf, "TF_CONFIG={\"cluster\": {%s}, \"task\": "
                     "{\"type\": \"%s\", \"index\": %d}}", cl, type,
                     j->t[self].index);
    if (n < 0 || (size_t)n >= sizeof tf) {
        fprintf(stderr, "ps_job: TF_CONFIG of %d bytes does not fit\n", n);
        exit(2);
    }
    memcpy(j->t[self].tf, tf, sizeof tf);
}

/* A job of chief + nw workers + nps ps; `sets` are --set arguments. */
static void job_init(job_t *j, int nw, int nps, char *const *sets, int nsets)
{
    memset(j, 0, sizeof *j);
    int k = 0;
    snprintf(j->t[k++].type, 8, "chief");
    for (int i = 0; i < nw; i++, k++) {
        snprintf(j->t[k].type, 8, "worker");
        j->t[k].index = i;
    }
    for (int i = 0; i < nps; i++, k++) {
        snprintf(j->t[k].type, 8, "ps");
        j->t[k].index = i;
    }
    j->n = k;
    for (int i = 0; i < j->n; i++) {
        j->t[i].port = spawn_task_port();
        j->t[i].out = calloc(1, JOB_OUT);
        j->t[i].err = calloc(1, JOB_OUT);
    }
    for (int i = 0; i < j->n; i++)
        job_config(j, i);
    for (int i = 0; i < nsets && i < JOB_SETS; i++)
        j->sets[j->nsets++] = sets[i];
}

/* Task index of "worker:1" etc. */
static int job_task(const job_t *j, const char *type, int index)
{
    for (int i = 0; i < j->n; i++)
        if (!strcmp(j->t[i].type, type) && j->t[i].index == index)
            return i;
    return -1;
}

static int job_start(job_t *j, int i)
{
    char *argv[2 * JOB_SETS + 6] = { (char *)spawn_strata_bin(), "train" };
    int a = 2;
    if (j->config) {
        argv[a++] = "-c";
        argv[a++] = (char *)j->config;
    }
    for (int k = 0; k < j->nsets; k++) {
        argv[a++] = "--set";
        argv[a++] = j->sets[k];
    }
    char *env[] = { j->t[i].tf, NULL };
    int rc = spawn_start(argv, env, &j->t[i].child);
    j->t[i].running = rc == 0;
    return rc;
}

static void job_start_all(job_t *j)
{
    for (int i = 0; i < j->n; i++)
        job_start(j, i);
}

static void job_append(char *buf, size_t *len, const char *more)
{
    size_t m = strlen(more);
    if (*len + m >= JOB_OUT)
        m = JOB_OUT - 1 - *len;
    memcpy(buf + *len, more, m);
    *len += m;
    buf[*len] = '\0';
}

/* Wait for task i (SIGKILL at the deadline), keep its output. Returns the
 * seconds waited. */
static double job_wait(job_t *j, int i, double timeout_s)
{
    job_task_t *t = &j->t[i];
    if (!t->running)
        return 0;
    double w = spawn_wait(&t->child, timeout_s);
    static char out[JOB_OUT], err[JOB_OUT];
    spawn_collect(&t->child, out, sizeof out, err, sizeof err);
    job_append(t->out, &t->out_len, out);
    job_append(t->err, &t->err_len, err);
    t->code = t->child.code;
    t->running = 0;
    return w;
}

static void job_kill(job_t *j, int i)
{
    if (j->t[i].running)
        kill(j->t[i].child.pid, SIGKILL);
    job_wait(j, i, 10);
}

static void job_wait_all(job_t *j, double timeout_s)
{
    for (int i = 0; i < j->n; i++)
        job_wait(j, i, timeout_s);
}

static void job_free(job_t *j)
{
    for (int i = 0; i < j->n; i++) {
        if (j->t[i].running)
            job_kill(j, i);
        free(j->t[i].out);
        free(j->t[i].err);
    }
}

/* Poll task i's live stderr (or stdout) until `what` appears; 0 or -1. */
static int job_await(job_t *j, int i, int on_stdout, const char *what,
                     double timeout_s)
{
    static char buf[JOB_OUT];
    for (double t = 0; t < timeout_s; t += 0.05) {
        spawn_read_file_(on_stdout ? j->t[i].child.outp : j->t[i].child.errp,
                         buf, sizeof buf);
        if (strstr(buf, what))
            return 0;
        usleep(50000);
    }
    return -1;
}

#endif
