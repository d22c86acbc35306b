/* strata launch --nnodes N --node-rank K --rendezvous HOST:PORT: the same
 * command on every machine forms one job of N x M workers, as torchrun
 * does. Launch on node K gives its M children torchrun's variables (RANK =
 * K*M + i, WORLD_SIZE = N*M, LOCAL_RANK = i, LOCAL_WORLD_SIZE = M,
 * MASTER_ADDR:MASTER_PORT = the rendezvous), so the tasks meet through the
 * one rendezvous the torchrun path has (core/member/rendezvous.h): rank 0, on
 * node 0, serves it at exactly HOST:PORT. Supervision, output prefixes and
 * restarts are launch.c's. */
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sodium.h>

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

int cli_job_ctx(char **targv, int nt, strata_ctx_t **out)
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
        ctx = NULL;
    }
    *out = ctx;
    return rc == 0 ? 0 : -1;
}

/* [security] mode and keys of the job, into mode[cap] and keys[cap]; -1
 * after libstrata said what is wrong. */
int cli_job_security(char **targv, int nt, char *mode, char *keys,
                     size_t cap)
{
    strata_ctx_t *ctx = NULL;
    if (cli_job_ctx(targv, nt, &ctx) != 0)
        return -1;
    const char *m = strata_ctx_get(ctx, "security", "mode");
    const char *k = strata_ctx_get(ctx, "security", "keys");
    snprintf(mode, cap, "%s", m ? m : "");
    snprintf(keys, cap, "%s", k ? k : "");
    strata_ctx_destroy(ctx);
    return 0;
}

/* Several machines cannot use launch's per-machine keys. */
static int check_keys(const cli_nodes_t *n, char **targv, int nt)
{
    char mode[64], keys[4096];
    if (cli_job_security(targv, nt, mode, keys, sizeof keys) != 0)
        return -1;
    int ok = !strcmp(mode, "off") || keys[0];
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

/* ---- elastic jobs across machines ------------------------------------- */

int cli_nodes_self_host(const cli_nodes_t *n, char *out, size_t cap)
{
    char port[16];
    snprintf(port, sizeof port, "%d", n->port);
    struct addrinfo hints = { .ai_socktype = SOCK_DGRAM,
                              .ai_flags = AI_NUMERICSERV }, *ai = NULL;
    int g = getaddrinfo(n->host, port, &hints, &ai);
    if (g != 0 || !ai) {
        fprintf(stderr, "strata: launch: cannot resolve the rendezvous host "
                "'%s': %s\n", n->host, gai_strerror(g));
        return -1;
    }
    /* A UDP socket's connect() picks the route and sends nothing. */
    int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int ok = fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
             getsockname(fd, (struct sockaddr *)&ss, &len) == 0 &&
             getnameinfo((struct sockaddr *)&ss, len, out, (socklen_t)cap,
                         NULL, 0, NI_NUMERICHOST) == 0;
    int e = errno;
    if (fd >= 0)
        close(fd);
    freeaddrinfo(ai);
    if (!ok)
        fprintf(stderr, "strata: launch: no route from this machine to the "
                "rendezvous %s:%d: %s\n", n->host, n->port, strerror(e));
    return ok ? 0 : -1;
}

/* A token the service accepts: 16..79 characters, no blanks. */
static int token_ok(const char *t)
{
    size_t len = strlen(t);
    if (len < 16 || len >= 80)
        return 0;
    for (const char *p = t; *p; p++)
        if (*p <= ' ' || *p > '~')
            return 0;
    return 1;
}

int cli_nodes_token(const cli_nodes_t *n, char **targv, int nt, char *out,
                    size_t cap)
{
    const char *env = getenv("STRATA_ELASTIC_TOKEN");
    if (env && env[0]) {
        if (!token_ok(env) || strlen(env) >= cap) {
            fprintf(stderr, "strata: launch: STRATA_ELASTIC_TOKEN must be 16 "
                    "to 79 printable characters without blanks\n");
            return -1;
        }
        snprintf(out, cap, "%s", env);
        return 0;
    }
    char mode[64], keys[4096];
    if (cli_job_security(targv, nt, mode, keys, sizeof keys) != 0)
        return -1;
    if (!keys[0]) {
        fprintf(stderr, "strata: launch: an elastic job on %d machines needs "
                "a secret that every machine's launch shares: [security] "
                "keys (the token is derived from the workers' secret keys) "
                "or STRATA_ELASTIC_TOKEN, the same on every machine\n",
                n->nnodes);
        return -1;
    }
    /* BLAKE2b of every worker's secret key file, in index order: what only
     * holders of the job's keys can compute. */
    crypto_generichash_state st;
    unsigned char h[16];
    if (sodium_init() < 0 || cap < 2 * sizeof h + 1 ||
        crypto_generichash_init(&st, NULL, 0, sizeof h) != 0)
        return -1;
    static const char k_domain[] = "strata elastic membership token v1";
    crypto_generichash_update(&st, (const unsigned char *)k_domain,
                              sizeof k_domain);
    for (int i = 0; i < n->nnodes * n->per_node; i++) {
        char path[4200], buf[1024];
        snprintf(path, sizeof path, "%s/worker-%d.key_secret", keys, i);
        FILE *f = fopen(path, "rb");
        size_t got = f ? fread(buf, 1, sizeof buf, f) : 0;
        int bad = !f || ferror(f) || got == 0 || got == sizeof buf;
        int e = errno;
        if (f)
            fclose(f);
        if (bad) {
            fprintf(stderr, "strata: launch: cannot read %s for the elastic "
                    "job's membership token%s%s; every machine needs every "
                    "worker's secret key, or set STRATA_ELASTIC_TOKEN (the "
                    "same on every machine)\n", path, f ? "" : ": ",
                    f ? "" : strerror(e));
            return -1;
        }
        crypto_generichash_update(&st, (const unsigned char *)buf, got);
    }
    crypto_generichash_final(&st, h, sizeof h);
    sodium_bin2hex(out, cap, h, sizeof h);
    sodium_memzero(&st, sizeof st);
    return 0;
}

/* host:port, [host]:port for IPv6. */
static int put_addr(char *out, size_t cap, size_t *at, const char *host,
                    int port)
{
    int k = snprintf(out + *at, cap - *at, strchr(host, ':') ? "%s\"[%s]:%d\""
                                                             : "%s\"%s:%d\"",
                     *at > 0 && out[*at - 1] != '[' ? ", " : "", host, port);
    if (k < 0 || (size_t)k >= cap - *at)
        return -1;
    *at += (size_t)k;
    return 0;
}

int cli_nodes_elastic_env(const cli_nodes_t *n, int index,
                          const char *self_host, int port)
{
    static const char *const k_clear[] = {
        "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
        "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID", "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "TORCHELASTIC_USE_AGENT_STORE" };
    int rc = 0;
    for (size_t i = 0; i < sizeof k_clear / sizeof *k_clear; i++)
        rc |= unsetenv(k_clear[i]);
    /* Only this task's own address is real: the others' come from each
     * generation of the membership. Theirs are placeholders on the
     * rendezvous host, port 1 + their index: distinct (a cluster names an
     * address once) and below any port a task is given. */
    static char tf[65536];
    size_t at = 0;
    int k = snprintf(tf, sizeof tf, "{\"cluster\": {\"worker\": [");
    at = (size_t)k;
    for (int i = 0; rc == 0 && i < n->nnodes * n->per_node; i++)
        rc = i == index ? put_addr(tf, sizeof tf, &at, self_host, port)
                        : put_addr(tf, sizeof tf, &at, n->host, 1 + i);
    k = rc == 0 ? snprintf(tf + at, sizeof tf - at, "]}, \"task\": {\"type\": "
                           "\"worker\", \"index\": %d}}", index)
                : -1;
    if (k < 0 || (size_t)k >= sizeof tf - at)
        return -1;
    return rc | setenv("TF_CONFIG", tf, 1) ? -1 : 0;
}
