/* The collectives of an elastic job (strata launch --elastic MIN:MAX
 * COMMAND): the world is the generation the membership service formed
 * (member/elastic.h), as mwms's is. A member that dies fails the others'
 * collective (STRATA_EPEER, STRATA_ETIMEDOUT); they call
 * strata_comm_regroup and go on with the next generation, where rank 0
 * holds the newest state; a worker that (re)joins makes the service
 * announce a resize, which strata_comm_resize_due reads. */
#include <stdlib.h>
#include <string.h>

#include "comm.h"

#define WHO "collectives"

/* The host of this task's address ("127.0.0.1" of "127.0.0.1:4000"): the
 * host the client makes the generation's fresh addresses on. */
static void own_host(const strata_comm_t *c, char *buf, size_t cap)
{
    const strata_cluster_t *pc = &c->cluster->pub;
    const char *a = pc->tasks[pc->self].address;
    const char *colon = a ? strrchr(a, ':') : NULL;
    size_t n = colon ? (size_t)(colon - a) : 0;
    if (n >= 2 && a[0] == '[' && a[n - 1] == ']')
        a++, n -= 2;
    snprintf(buf, cap, "%.*s", (int)(n < cap ? n : cap - 1), a ? a : "");
}

/* The generation's members, copied out of the client's arrays (valid
 * until its next join, which closes the group first). */
static int take(strata_comm_t *c, const strata_membership_t *g)
{
    free(c->addrs);
    free(c->names);
    free(c->bounds);
    c->size = g->size;
    c->rank = g->rank;
    c->resume_step = g->resume_step;
    c->addrs = calloc((size_t)g->size, sizeof *c->addrs);
    c->names = calloc((size_t)g->size, sizeof *c->names);
    c->bounds = calloc((size_t)g->size + 1, sizeof *c->bounds);
    if (!c->addrs || !c->names || !c->bounds)
        return STRATA_ENOMEM;
    for (int m = 0; m < g->size; m++) {
        c->addrs[m] = g->addrs[m];
        c->names[m] = g->names[m];
    }
    snprintf(c->tag, sizeof c->tag, "%s.g%d", WHO, g->generation);
    return STRATA_OK;
}

int strata__comm_join(strata_comm_t *c, int64_t committed)
{
    if (!c->el) {
        char self[48], host[272];
        const strata_cluster_t *pc = &c->cluster->pub;
        strata__task_name(&pc->tasks[pc->self], self, sizeof self);
        own_host(c, host, sizeof host);
        int rc = strata__elastic_open(self, host,
                                      c->keys ? c->keys->secret : NULL,
                                      &c->el);
        if (rc != STRATA_OK || !c->el)
            return rc;   /* no service: not an elastic job */
    }
    strata_membership_t g = { .struct_size = sizeof g };
    double ms = c->cluster->rendezvous_timeout_s * 1000.0;
    int rc = strata__elastic_join(c->el, committed,
                                  ms > 2e9 ? 2000000000 : (int)ms, &g);
    return rc == STRATA_OK ? take(c, &g) : rc;
}

int strata_comm_regroup(strata_comm_t *c, int64_t committed,
                        int64_t *resume_step)
{
    if (resume_step)
        *resume_step = -1;
    if (!c) {
        strata__log(STRATA_LOG_ERROR, WHO, "strata_comm_regroup: comm is "
                    "NULL");
        return STRATA_EINVAL;
    }
    pthread_mutex_lock(&c->lock);
    strata_ctx_t *prev = strata__log_bind(c->ctx);
    int rc = STRATA_OK;
    if (!c->el) {
        strata__log(STRATA_LOG_ERROR, WHO, "strata_comm_regroup: this job "
                    "has no membership service (strata launch --elastic "
                    "MIN:MAX starts one): its world cannot change");
        rc = STRATA_ENOTSUP;
    }
    if (rc == STRATA_OK) {
        if (c->t)
            strata__host_v2.t_close(c->hc, c->t);
        c->t = NULL;
        c->caps = 0;
        rc = strata__comm_join(c, committed);
    }
    if (rc == STRATA_OK && c->size > 1)
        rc = strata__comm_open_world(c);
    if (rc == STRATA_OK) {
        strata__log(STRATA_LOG_INFO, WHO, "%s: %s, rank %d of %d%s", c->tag,
                    c->names[c->rank], c->rank, c->size,
                    c->resume_step >= 0 ? ", rank 0 holds the newest state"
                                        : "");
        if (resume_step)
            *resume_step = c->resume_step;
    }
    strata__log_bind(prev);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int64_t strata_comm_resume_step(const strata_comm_t *c)
{
    return c ? c->resume_step : -1;
}

int strata_comm_resize_due(strata_comm_t *c)
{
    if (!c || !c->el)
        return 0;
    pthread_mutex_lock(&c->lock);
    int due = strata__elastic_pending(c->el);
    pthread_mutex_unlock(&c->lock);
    return due;
}

void strata_comm_finish(strata_comm_t *c, int64_t steps)
{
    if (!c || !c->el)
        return;
    pthread_mutex_lock(&c->lock);
    strata__elastic_done(c->el, steps);
    pthread_mutex_unlock(&c->lock);
}
