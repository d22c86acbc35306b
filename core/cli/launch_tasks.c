/* strata launch --tasks TYPE:INDEX,...: this machine's part of a job whose
 * cluster is static ([cluster] chief/worker/ps/evaluator addresses, as
 * TF_CONFIG gives them): a parameter-server job across machines, with one
 * launch per machine running and supervising the tasks listed. Each task
 * is `strata train` with the job's arguments and STRATA_CLUSTER_TASK set,
 * so that it takes its place in [cluster]; the other sources a launch may
 * have inherited (TF_CONFIG, torchrun's, SLURM's, Open MPI's variables)
 * are cleared. Supervision is launch.c's by role: a dead worker that does
 * not coordinate is restarted alone; another task's death ends this
 * launch's part (a whole job cannot be restarted from one machine). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char *const k_types[] = { "chief", "worker", "ps", "evaluator" };
#define NTYPES 4

/* Entries of a comma-separated [cluster] list ("" = none). */
static int list_len(const char *v)
{
    if (!v || !v[0])
        return 0;
    int n = 1;
    for (const char *p = v; *p; p++)
        n += *p == ',';
    return n;
}

/* The i-th entry of a comma-separated list, blanks trimmed, into out. */
static void list_at(const char *v, int i, char *out, size_t cap)
{
    while (i > 0 && (v = strchr(v, ',')) != NULL)
        v++, i--;
    out[0] = '\0';
    if (!v)
        return;
    while (*v == ' ' || *v == '\t')
        v++;
    size_t n = strcspn(v, ",");
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), v);
}

static int type_of(const char *s, size_t n)
{
    for (int t = 0; t < NTYPES; t++)
        if (strlen(k_types[t]) == n && !strncmp(s, k_types[t], n))
            return t;
    return -1;
}

int cli_tasks_arg(cli_tasks_t *ts, const char *v)
{
    ts->n = 0;
    const char *p = v;
    int ok = v && *v;
    while (ok && *p) {
        size_t len = strcspn(p, ",");
        const char *colon = memchr(p, ':', len);
        char *end = NULL;
        int t = colon ? type_of(p, (size_t)(colon - p)) : -1;
        long idx = colon && colon[1] >= '0' && colon[1] <= '9'
                       ? strtol(colon + 1, &end, 10) : -1;
        ok = t >= 0 && idx >= 0 && idx <= 1023 && end == p + len &&
             ts->n < CLI_TASKS_MAX;
        for (int i = 0; ok && i < ts->n; i++)
            if (ts->type[i] == t && ts->index[i] == idx) {
                fprintf(stderr, "strata: launch: --tasks names %s:%ld "
                        "twice\n", k_types[t], idx);
                return -1;
            }
        if (ok) {
            ts->type[ts->n] = t;
            ts->index[ts->n++] = (int)idx;
        }
        p += len;
        if (*p == ',')
            ok &= *++p != '\0'; /* no empty last entry */
    }
    if (!ok)
        fprintf(stderr, "strata: launch: --tasks needs TYPE:INDEX,... (TYPE "
                "chief, worker, ps or evaluator; at most %d tasks), got "
                "'%s'\n", CLI_TASKS_MAX, v ? v : "");
    return ok ? 0 : -1;
}

int cli_tasks_check(cli_tasks_t *ts, char **targv, int nt)
{
    strata_ctx_t *ctx = NULL;
    if (cli_job_ctx(targv, nt, &ctx) != 0)
        return -1;
    const char *lists[NTYPES];
    for (int t = 0; t < NTYPES; t++)
        lists[t] = strata_ctx_get(ctx, "cluster", k_types[t]);
    const char *mode = strata_ctx_get(ctx, "security", "mode");
    const char *keys = strata_ctx_get(ctx, "security", "keys");
    int rc = 0;
    for (int i = 0; rc == 0 && i < ts->n; i++) {
        int t = ts->type[i], have = list_len(lists[t]);
        if (ts->index[i] >= have) {
            fprintf(stderr, "strata: launch: --tasks %s:%d: the job's "
                    "[cluster] %s lists %d address%s (--tasks runs tasks of "
                    "a static cluster: [cluster] chief, worker, ps, "
                    "evaluator)\n", k_types[t], ts->index[i], k_types[t],
                    have, have == 1 ? "" : "es");
            rc = -1;
            break;
        }
        list_at(lists[t], ts->index[i], ts->addr[i], sizeof ts->addr[i]);
        snprintf(ts->name[i], sizeof ts->name[i], "%s:%d", k_types[t],
                 ts->index[i]);
    }
    ts->has_ps = list_len(lists[2]) > 0;
    ts->has_chief = list_len(lists[0]) > 0;
    /* Every machine of the job needs the same keys: launch's own are
     * per machine. */
    if (rc == 0 && !(mode && !strcmp(mode, "off")) && !(keys && keys[0])) {
        fprintf(stderr, "strata: launch: --tasks runs a part of a job on "
                "several machines, which needs one set of keys for all of "
                "them: make them once with `strata keygen DIR` and the "
                "job's tasks, copy DIR to every machine and set [security] "
                "keys = DIR (or STRATA_SECURITY_KEYS=DIR), or set [security] "
                "mode = off on a trusted network\n");
        rc = -1;
    }
    strata_ctx_destroy(ctx);
    return rc;
}

const char *cli_tasks_type(int t)
{
    return t >= 0 && t < NTYPES ? k_types[t] : "?";
}

int cli_tasks_env(const char *name)
{
    static const char *const k_clear[] = {
        "TF_CONFIG", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
        "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID",
        "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK",
        "TORCHELASTIC_USE_AGENT_STORE" };
    int rc = 0;
    for (size_t i = 0; i < sizeof k_clear / sizeof *k_clear; i++)
        rc |= unsetenv(k_clear[i]);
    return rc | setenv("STRATA_CLUSTER_TASK", name, 1) ? -1 : 0;
}
