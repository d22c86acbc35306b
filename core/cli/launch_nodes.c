/* strata launch --nnodes N --node-rank K --rendezvous HOST:PORT: the same
 * command on every machine forms one job of N x M workers, as torchrun
 * does. Launch on node K gives its M children torchrun's variables (RANK =
 * K*M + i, WORLD_SIZE = N*M, LOCAL_RANK = i, LOCAL_WORLD_SIZE = M,
 * MASTER_ADDR:MASTER_PORT = the rendezvous), so the tasks meet through the
 * one rendezvous the torchrun path has (core/rendezvous.h): rank 0, on
 * node 0, serves it at exactly HOST:PORT. Supervision, output prefixes and
 * restarts are launch.c's. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define MAX_NODES 1024
#define MAX_JOB   1024 /* tasks in one job (STRATA_MAX_TASKS) */

static int count_arg(const char *flag, const char *v, int lo, int hi,
                     int *out)
{
    char *end;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || x < lo || x > hi) {
        fprintf(stderr, "strata: launch: %s needs an integer in [%d, %d]%s%s"
                "%s\n", flag, lo, hi, v ? ", got '" : "", v ? v : "",
                v ? "'" : "");
        return -1;
    }
    *out = (int)x;
    return 0;
}

/* HOST:PORT or [V6]:PORT; host goes to n->host without brackets. */
static int rendezvous_arg(cli_nodes_t *n, const char *v)
{
    const char *colon = v ? strrchr(v, ':') : NULL, *h = v;
    size_t hl = colon ? (size_t)(colon - v) : 0;
    int v6 = hl >= 2 && v[0] == '[' && v[hl - 1] == ']', ok = colon != NULL;
    if (v6)
        h++, hl -= 2;
    ok &= hl > 0 && hl < sizeof n->host;
    for (size_t i = 0; ok && i < hl; i++)
        ok = v6 ? isxdigit((unsigned char)h[i]) || h[i] == ':' || h[i] == '.'
                : isalnum((unsigned char)h[i]) || strchr("-._", h[i]);
    char *end = NULL;
    long port = ok ? strtol(colon + 1, &end, 10) : 0;
    ok &= ok && isdigit((unsigned char)colon[1]) && !*end && port >= 1 &&
          port <= 65535;
    if (!ok) {
        fprintf(stderr, "strata: launch: --rendezvous needs HOST:PORT (node "
                "0's address and a free port there; [IPv6]:PORT), got "
                "'%s'\n", v ? v : "");
        return -1;
    }
    memcpy(n->host, h, hl);
    n->host[hl] = '\0';
    n->port = (int)port;
    return 0;
}

int cli_nodes_arg(cli_nodes_t *n, int argc, char **argv, int *i)
{
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    int rc;
    if (!strcmp(a, "--nnodes"))
        rc = count_arg(a, v, 1, MAX_NODES, &n->nnodes);
    else if (!strcmp(a, "--node-rank"))
        rc = count_arg(a, v, 0, MAX_NODES - 1, &n->node_rank);
    else if (!strcmp(a, "--rendezvous"))
        rc = rendezvous_arg(n, v);
    else
        return 0;
    *i += v != NULL;
    return rc == 0 ? 1 : -1;
}

/* [security] of the job as every task will see it (-c, --set and the
 * environment): several machines cannot use launch's per-machine keys. */
static int check_keys(const cli_nodes_t *n, char **targv, int nt)
{
    const char *ini = NULL;
    for (int i = 2; i + 1 < nt; i += 2)
        if (!strcmp(targv[i], "-c") || !strcmp(targv[i], "--config"))
            ini = targv[i + 1];
    strata_ctx_t *ctx = NULL;
    int rc = strata_ctx_create(ini, &ctx);
    for (int i = 2; rc == 0 && i + 1 < nt; i += 2)
        if (strcmp(targv[i], "-c") && strcmp(targv[i], "--config"))
            rc = strata_ctx_set(ctx, targv[i + 1]);
    if (rc != 0) {
        strata_ctx_destroy(ctx);
        return -1; /* libstrata said what is wrong */
    }
    const char *mode = strata_ctx_get(ctx, "security", "mode");
    const char *keys = strata_ctx_get(ctx, "security", "keys");
    int ok = (mode && !strcmp(mode, "off")) || (keys && keys[0]);
    strata_ctx_destroy(ctx);
    if (!ok)
        fprintf(stderr, "strata: launch: a job on %d machines needs one set "
                "of keys for all of them (launch's own are per machine): make "
                "them once with `strata keygen DIR worker:0-%d`, copy DIR to "
                "every machine and set [security] keys = DIR (or "
                "STRATA_SECURITY_KEYS=DIR), or set [security] mode = off on a "
                "trusted network\n", n->nnodes,
                n->nnodes * n->per_node - 1);
    return ok ? 0 : -1;
}

int cli_nodes_check(cli_nodes_t *n, int workers, int ps, int chief,
                    char **targv, int nt)
{
    n->per_node = workers;
    if (!n->nnodes) {
        if (n->node_rank < 0 && !n->host[0])
            return 0;
        fprintf(stderr, "strata: launch: --node-rank and --rendezvous go "
                "with --nnodes\n");
        return -1;
    }
    if (n->node_rank < 0 || !n->host[0]) {
        fprintf(stderr, "strata: launch: --nnodes %d needs --node-rank K "
                "(0..%d: this machine) and --rendezvous HOST:PORT (node 0's "
                "address and a free port there)\n", n->nnodes,
                n->nnodes - 1);
        return -1;
    }
    if (n->node_rank >= n->nnodes) {
        fprintf(stderr, "strata: launch: --node-rank %d is out of range for "
                "--nnodes %d (0..%d)\n", n->node_rank, n->nnodes,
                n->nnodes - 1);
        return -1;
    }
    if (ps || chief) {
        fprintf(stderr, "strata: launch: --nnodes starts workers only, as "
                "torchrun does (mwms, mirrored, central): a job with %s "
                "across machines takes its cluster from [cluster] or "
                "TF_CONFIG (every task's host:port); start each task on its "
                "machine with `strata train -c job.ini --task TYPE:INDEX`\n",
                ps ? "parameter servers" : "a separate chief");
        return -1;
    }
    if (workers < 1 || (long)n->nnodes * workers > MAX_JOB) {
        fprintf(stderr, "strata: launch: --nnodes %d x -n %d: a job has 1 "
                "to %d workers\n", n->nnodes, workers, MAX_JOB);
        return -1;
    }
    return n->nnodes > 1 ? check_keys(n, targv, nt) : 0;
}

int cli_nodes_first(const cli_nodes_t *n)
{
    return n->nnodes ? n->node_rank * n->per_node : 0;
}

int cli_nodes_env(const cli_nodes_t *n, int index)
{
    /* Sources that come before torchrun's would win over it: the job's
     * own variables are these, whatever launch inherited. */
    static const char *const k_clear[] = {
        "TF_CONFIG", "SLURM_PROCID", "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "TORCHELASTIC_USE_AGENT_STORE" };
    char v[6][32];
    snprintf(v[0], sizeof v[0], "%d", index);
    snprintf(v[1], sizeof v[1], "%d", n->nnodes * n->per_node);
    snprintf(v[2], sizeof v[2], "%d", index - cli_nodes_first(n));
    snprintf(v[3], sizeof v[3], "%d", n->per_node);
    snprintf(v[4], sizeof v[4], "%d", n->node_rank);
    snprintf(v[5], sizeof v[5], "%d", n->port);
    int rc = 0;
    for (size_t i = 0; i < sizeof k_clear / sizeof *k_clear; i++)
        rc |= unsetenv(k_clear[i]);
    rc |= setenv("RANK", v[0], 1) | setenv("WORLD_SIZE", v[1], 1) |
          setenv("LOCAL_RANK", v[2], 1) | setenv("LOCAL_WORLD_SIZE", v[3], 1) |
          setenv("GROUP_RANK", v[4], 1) | setenv("MASTER_ADDR", n->host, 1) |
          setenv("MASTER_PORT", v[5], 1);
    return rc ? -1 : 0;
}
