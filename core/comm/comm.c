/* strata_comm_open / close: join the job's world as strata train does --
 * the cluster from [cluster], TF_CONFIG, torchrun, Open MPI, SLURM or
 * strata launch, the rendezvous where addresses are unknown, the job's
 * CURVE keys, a WORLD group of the training tasks (chief, workers) in rank
 * order opened through the transports [transport] world lists. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "member/rendezvous.h"

extern char **environ;

#define WHO "collectives"

/* This task's rank, or a refusal for one that does not train. */
static int role(strata_comm_t *c)
{
    const strata_cluster_t *pc = &c->cluster->pub;
    const strata_task_t *me = &pc->tasks[pc->self];
    c->size = pc->nworkers;
    c->rank = me->rank;
    if (me->rank >= 0)
        return STRATA_OK;
    char name[48];
    strata__log(STRATA_LOG_ERROR, WHO, "task %s does not train: only the "
                "chief and the workers are members of the job's collectives "
                "(cluster from %s)", strata__task_name(me, name, sizeof name),
                pc->source);
    return STRATA_ECONFIG;
}

/* The training tasks in rank order (as mwms's world), with the addresses
 * the rendezvous filled in. */
static int members(strata_comm_t *c)
{
    const strata_cluster_t *pc = &c->cluster->pub;
    c->addrs = calloc((size_t)c->size, sizeof *c->addrs);
    c->names = calloc((size_t)c->size, sizeof *c->names);
    c->name_buf = calloc((size_t)c->size, 48);
    c->bounds = calloc((size_t)c->size + 1, sizeof *c->bounds);
    if (!c->addrs || !c->names || !c->name_buf || !c->bounds)
        return STRATA_ENOMEM;
    for (int i = 0; i < pc->ntasks; i++) {
        const strata_task_t *t = &pc->tasks[i];
        if (t->rank < 0)
            continue;
        char *name = c->name_buf + 48 * t->rank;
        strata__task_name(t, name, 48);
        c->names[t->rank] = name;
        c->addrs[t->rank] = t->address;
    }
    return STRATA_OK;
}

/* The WORLD group: the transport admits the listed keys only. */
int strata__comm_open_world(strata_comm_t *c)
{
    static const int32_t cpu = STRATA_DEVICE(STRATA_DEV_CPU, 0);
    const strata_group_t g = {
        .struct_size = sizeof g, .scope = STRATA_SCOPE_WORLD,
        .size = c->size, .rank = c->rank, .nlocal = 1, .devices = &cpu,
        .addrs = c->addrs, .names = c->names, .tag = c->tag,
    };
    if (!c->hc) /* one for every generation's group */
        c->hc = strata__hctx_new(c->ctx, WHO, "transport", NULL);
    if (!c->hc)
        return STRATA_ENOMEM;
    /* The host hands a WORLD group the context's keys: this comm's, for
     * the time of the open (a run of the context sets its own). */
    strata__keys_t *was = c->ctx->keys;
    c->ctx->keys = c->keys;
    int rc = strata__host_v2.t_open(c->hc, &g, &c->t);
    c->ctx->keys = was;
    if (rc == STRATA_OK)
        c->caps = strata__host_v2.t_caps(c->hc, c->t);
    return rc;
}

static int open_comm(strata_comm_t *c)
{
    strata_ctx_t *ctx = c->ctx;
    int rc = strata__ctx_resolve(ctx);
    if (rc != STRATA_OK)
        return rc;
    c->cluster = calloc(1, sizeof *c->cluster);
    if (!c->cluster)
        return STRATA_ENOMEM;
    rc = strata__cluster_resolve(ctx->cfg, ctx->task, environ, c->cluster);
    if (rc == STRATA_OK)
        rc = role(c);
    if (rc != STRATA_OK || c->size == 1) /* alone: nothing to connect */
        return rc == STRATA_OK ? members(c) : rc;
    rc = strata__job_keys(&ctx->s.security, &c->cluster->pub, &c->keys);
    if (rc == STRATA_OK)
        rc = strata__comm_join(c, -1);   /* an elastic job's generation */
    if (rc == STRATA_OK && !c->el) {
        const strata__rdzv_opts_t o = {
            .timeout_s = c->cluster->rendezvous_timeout_s,
            .hello_s = STRATA_RDZV_HELLO_S, .stop = &ctx->stop };
        rc = strata__rendezvous(c->cluster, &o);
        if (rc == STRATA_OK)
            rc = members(c);
    }
    if (rc == STRATA_OK && c->size > 1)
        rc = strata__comm_open_world(c);
    if (rc == STRATA_OK)
        strata__log(STRATA_LOG_INFO, WHO, "%s, rank %d of %d, through %s%s",
                    c->names[c->rank], c->rank, c->size,
                    c->t ? strata__host_v2.t_name(c->hc, c->t) : "none",
                    c->keys ? ", CURVE" : ", plaintext");
    return rc;
}

int strata_comm_open(strata_ctx_t *ctx, strata_comm_t **out)
{
    if (out)
        *out = NULL;
    if (!ctx || !out) {
        strata__log(STRATA_LOG_ERROR, WHO, "strata_comm_open: %s is NULL",
                    !ctx ? "ctx" : "out");
        return STRATA_EINVAL;
    }
    strata_ctx_t *prev = strata__log_bind(ctx);
    int rc = STRATA_OK;
    if (ctx->run) {
        strata__log(STRATA_LOG_ERROR, WHO, "strata_comm_open: a run of this "
                    "context is in progress (its task's port is taken): "
                    "open the collectives on another context, or after it");
        rc = STRATA_ESTATE;
    }
    strata_comm_t *c = rc == STRATA_OK ? calloc(1, sizeof *c) : NULL;
    if (rc == STRATA_OK && !c)
        rc = STRATA_ENOMEM;
    if (rc == STRATA_OK) {
        c->ctx = ctx;
        c->resume_step = -1;
        snprintf(c->tag, sizeof c->tag, "%s", WHO);
        pthread_mutex_init(&c->lock, NULL);
        rc = open_comm(c);
        if (rc == STRATA_OK)
            *out = c;
        else
            strata_comm_close(c);
    }
    strata__log_bind(prev);
    return rc;
}

void strata_comm_close(strata_comm_t *c)
{
    if (!c)
        return;
    strata_ctx_t *prev = strata__log_bind(c->ctx);
    if (c->t)
        strata__host_v2.t_close(c->hc, c->t);
    strata__elastic_close(c->el);
    strata__log_bind(prev);
    free(c->hc);
    free(c->keys);
    if (c->cluster)
        strata__cluster_free(c->cluster);
    free(c->cluster);
    free(c->addrs);
    free(c->names);
    free(c->name_buf);
    free(c->bounds);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

int strata_comm_rank(const strata_comm_t *c)
{
    return c ? c->rank : STRATA_EINVAL;
}

int strata_comm_size(const strata_comm_t *c)
{
    return c ? c->size : STRATA_EINVAL;
}

/* The host of "host:port" or "[v6]:port": its length. */
static size_t host_len(const char *addr)
{
    const char *colon = addr ? strrchr(addr, ':') : NULL;
    return colon ? (size_t)(colon - addr) : addr ? strlen(addr) : 0;
}

int strata_comm_hosts(const strata_comm_t *c)
{
    if (!c)
        return STRATA_EINVAL;
    int hosts = 0;
    for (int m = 0; m < c->size; m++) {
        size_t n = host_len(c->addrs[m]);
        int seen = 0;
        for (int k = 0; !seen && k < m; k++)
            seen = host_len(c->addrs[k]) == n &&
                   (!n || !strncmp(c->addrs[k], c->addrs[m], n));
        hosts += !seen;
    }
    return hosts;
}

const char *strata_comm_transport(const strata_comm_t *c)
{
    return !c ? NULL : c->t ? strata__host_v2.t_name(c->hc, c->t) : "none";
}
