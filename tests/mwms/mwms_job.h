/* Jobs of mwms workers started by hand (TF_CONFIG on free loopback ports),
 * for the tests of tests/mwms. */
#ifndef STRATA_TESTS_MWMS_JOB_H
#define STRATA_TESTS_MWMS_JOB_H

#include "check.h"
#include "spawn.h"

#define MAXW 4
static char g_out[MAXW][65536], g_err[MAXW][65536];

typedef struct job {
    int           n;
    int           port[MAXW];
    spawn_child_t child[MAXW];
    char          tf[MAXW][1024];
} job_t;

static void tf_config(job_t *j, int self)
{
    char list[512] = "";
    size_t at = 0;
    for (int i = 0; i < j->n; i++)
        at += (size_t)snprintf(list + at, sizeof list - at, "%s\"127.0.0.1:%d\"",
                               i ? ", " : "", j->port[i]);
    snprintf(j->tf[self], sizeof j->tf[self],
             "TF_CONFIG={\"cluster\": {\"worker\": [%s]}, \"task\": {\"type\": "
             "\"worker\", \"index\": %d}}", list, self);
}

/* Start n workers of `strata train` with the given --set arguments. */
static void start_job(job_t *j, int n, char **sets, int nsets)
{
    j->n = n;
    for (int i = 0; i < n; i++) {
        j->port[i] = spawn_task_port();
    }
    for (int i = 0; i < n; i++) {
        tf_config(j, i);
        char *argv[64] = { (char *)spawn_strata_bin(), "train" };
        int a = 2;
        for (int k = 0; k < nsets && a < 62; k++) {
            argv[a++] = "--set";
            argv[a++] = sets[k];
        }
        char *env[] = { j->tf[i], NULL };
        CHECK(spawn_start(argv, env, &j->child[i]) == 0);
    }
}

static void wait_job(job_t *j, double timeout_s)
{
    for (int i = 0; i < j->n; i++) {
        spawn_wait(&j->child[i], timeout_s);
        spawn_collect(&j->child[i], g_out[i], sizeof g_out[i], g_err[i],
                      sizeof g_err[i]);
    }
}

/* The hash line every worker prints with debug.hash_vars. */
static int hash_of(const char *out, char hash[17])
{
    const char *p = strstr(out, "variables hash (rank ");
    if (!p || !(p = strstr(p, "): ")))
        return -1;
    memcpy(hash, p + 3, 16);
    hash[16] = '\0';
    return 0;
}

#endif
