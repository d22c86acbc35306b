/* Elastic jobs in the core: the membership client's host entry, the shape
 * of a generation (workers, rank, the slices of every batch), re-forming
 * the world after a lost member or at a resize, and a joiner's start.
 *
 * Policy "keep the global batch": every generation trains the same global
 * batches in the same order at the same learning rate; only who computes
 * which slice changes. A step is identified by its global number S; the
 * batch it trains is batch S mod steps_per_epoch of epoch S div
 * steps_per_epoch, whatever the generation, so every sample of an epoch is
 * trained exactly once across any resize. The slices of a batch of B
 * samples over the generation's R x W replicas are [B*g/(R*W),
 * B*(g+1)/(R*W)) for replica g: equal when R*W divides B (then the
 * arithmetic is that of a fixed job, bit for bit), within one sample
 * otherwise, each replica's gradient weighted so that the mean over
 * replicas is the batch's mean gradient.
 *
 * After a failure the members may disagree by one step: a ring all-reduce
 * can complete on some members and fail on others. Every member tells the
 * service the steps it has applied; the generation goes on from the
 * highest, whose holder the service makes rank 0, and rank 0's state
 * (variables, optimizer slots) goes to every member that lacks it through
 * the strategy's STATE_GET/SET: from memory, no checkpoint involved. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "member/elastic.h"
#include "checkpoint/resume.h"
#include "stepsum.h"

#define WHO "elastic"
/* Generations one failure may take to mend: each attempt that fails
 * (another member lost meanwhile) joins the next one. */
#define MAX_ATTEMPTS 16

/* The host part of this task's cluster address ("tcp://h:p", "[v6]:p"). */
static void host_of(const char *addr, char *out, size_t cap)
{
    snprintf(out, cap, "127.0.0.1");
    if (!addr)
        return;
    if (!strncmp(addr, "tcp://", 6))
        addr += 6;
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr)
        return;
    size_t n = (size_t)(colon - addr);
    if (addr[0] == '[' && n > 2 && addr[n - 1] == ']') {
        addr++;
        n -= 2;
    }
    if (n < cap)
        snprintf(out, cap, "%.*s", (int)n, addr);
}

int strata__elastic_setup(strata__run_t *run)
{
    const strata_cluster_t *c = &run->cluster.pub;
    char host[272];
    host_of(c->tasks[c->self].address, host, sizeof host);
    const strata__keys_t *k = run->ctx->keys;
    return strata__elastic_open(run->self, host, k ? k->secret : NULL,
                                &run->elastic);
}

/* The generation's shape: who this process is, which slices it trains
 * (geometry.c), and the schedule when the linear scaling rule follows the
 * replicas that share a batch. */
static int take_shape(strata__run_t *run, const strata_membership_t *g)
{
    const strata__geometry_in_t in = {
        .train = &run->s->train, .samples = run->train.n,
        .nreplicas = run->nreplicas, .nworkers = g->size, .rank = g->rank,
        .elastic = 1, .generation = g->generation,
    };
    return strata__run_shape(run, &in, 0);
}

int strata__elastic_membership(strata__run_t *run, int64_t committed,
                               int timeout_ms, strata_membership_t *out)
{
    if (!run || !out || out->struct_size < sizeof *out || timeout_ms < 1)
        return STRATA_EINVAL;
    if (!run->elastic)
        return STRATA_ENOTSUP;
    int rc = strata__elastic_join(run->elastic, committed, timeout_ms, out);
    return rc == STRATA_OK ? take_shape(run, out) : rc;
}

int strata__elastic_joining(const strata__run_t *run)
{
    const strata_membership_t *g = strata__elastic_current(run->elastic);
    return g && g->resume_step >= 0 &&
           strata__elastic_joined_with(run->elastic) != g->resume_step;
}

int strata__elastic_job_over(const strata__run_t *run)
{
    return strata__elastic_over(run->elastic);
}

int strata__elastic_regroupable(const strata__run_t *run, int rc)
{
    return run->elastic && (rc == STRATA__RESIZE || rc == STRATA_EPEER ||
                            rc == STRATA_ETIMEDOUT);
}

/* The steps this process has applied: every replica the same, or -1 (its
 * state is not one step's, someone else's must replace it). */
static int64_t applied(const strata__run_t *run)
{
    int64_t d = run->reps[0].done;
    for (int r = 1; r < run->nreplicas; r++)
        if (run->reps[r].done != d)
            return -1;
    return d;
}

/* The strategy's ctl op `op` when its capability word promises it. */
static int strategy_ctl(strata__run_t *run, int op, void *arg)
{
    uint32_t need = op == STRATA_CTL_REGROUP ? STRATA_CAP_ELASTIC
                                             : STRATA_CAP_STATE;
    return run->strategy->caps & need
               ? run->strategy->vt->ctl(run->spctx, op, arg)
               : STRATA_ENOTSUP;
}

/* The layers' state tensors (batchnorm's moving statistics) are not the
 * strategy's: rank 0's go to every member beside the variables. */
static int move_layer_states(strata__run_t *run)
{
    const strata__model_t *m = &run->model;
    if (!m->state_count)
        return STRATA_OK;
    float *host = calloc(m->state_count, sizeof *host);
    if (!host)
        return STRATA_ENOMEM;
    int rc = run->geo.chief
                 ? strata__work_state_get(m, &run->reps[0].work, host)
                 : STRATA_OK;
    if (rc == STRATA_OK)
        rc = strata__run_states_set(run, host, 1);
    free(host);
    return rc;
}

/* Rank 0 holds the state of the step the generation goes on from; every
 * member that had applied another number of steps receives it. */
static int move_state(strata__run_t *run, const strata_membership_t *g)
{
    int need = 0;
    for (int i = 0; i < g->size; i++)
        need |= g->committed[i] != g->resume_step;
    if (!need)
        return STRATA_OK;
    strata_state_t st;
    int rc = strata__state_alloc(run, &st);
    st.opt_steps = g->resume_step; /* mwms: one optimizer update a step */
    if (rc == STRATA_OK && run->geo.rank == 0)
        rc = strategy_ctl(run, STRATA_CTL_STATE_GET, &st);
    if (rc == STRATA_OK)
        rc = strategy_ctl(run, STRATA_CTL_STATE_SET, &st);
    strata__state_free(&st);
    return rc == STRATA_OK ? move_layer_states(run) : rc;
}

/* Where training goes on: where rank 0's data stood after the steps it
 * applied (its epoch, next batch and that batch's first sample; a closed
 * epoch is the next one's start, an epoch trained to its end but not
 * closed is closed first). Every member takes rank 0's figures: a sum of
 * float32 to which the others add zeros, each number in halves of 24 bits
 * (exact). */
static int agree_position(strata__run_t *run, const strata_membership_t *g,
                          strata__resume_t *at)
{
    int64_t mine[4] = { run->cur.done_epoch, run->cur.done_batch,
                        run->cur.done_pos,
                        g->resume_step };
    float v[8] = { 0 };
    for (int i = 0; run->geo.rank == 0 && i < 4; i++) {
        v[2 * i] = (float)(mine[i] & 0xffffff);
        v[2 * i + 1] = (float)(mine[i] >> 24);
    }
    int rc = strata__run_world_sum(run, v, 8);
    int64_t got[4];
    for (int i = 0; i < 4; i++)
        got[i] = (int64_t)v[2 * i + 1] << 24 | (int64_t)v[2 * i];
    if (rc == STRATA_OK && got[3] != g->resume_step) {
        strata__log(STRATA_LOG_ERROR, WHO, "generation %d: rank 0 says step "
                    "%lld, the service %lld", g->generation,
                    (long long)got[3], (long long)g->resume_step);
        rc = STRATA_EPROTO;
    }
    *at = (strata__resume_t){ .resumed = 1, .epoch = (int)got[0],
                              .batch = got[1], .sample = got[2],
                              .step = got[3] };
    return rc;
}

/* The state of the current generation is in place everywhere: agree on
 * where the data stands, and say so. */
static int settled(strata__run_t *run, const strata_membership_t *g,
                   strata__resume_t *at)
{
    for (int r = 0; r < run->nreplicas; r++)
        run->reps[r].done = g->resume_step;
    int rc = agree_position(run, g, at);
    if (rc != STRATA_OK)
        return rc;
    strata__cursor_at(&run->cur, at->epoch, at->batch, at->sample);
    if (run->geo.chief)
        strata__log(STRATA_LOG_INFO, WHO, "generation %d: %d worker%s, "
                    "training goes on from step %lld (epoch %d, batch %lld)",
                    g->generation, g->size, g->size == 1 ? "" : "s",
                    (long long)at->step, at->epoch + 1, (long long)at->batch);
    return STRATA_OK;
}

/* Join generations until one forms whose state is in place everywhere. */
static int reform(strata__run_t *run, int64_t committed, strata__resume_t *at)
{
    int rc = STRATA_EPEER;
    for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        atomic_store(&run->rc, 0);
        rc = strategy_ctl(run, STRATA_CTL_REGROUP, &committed);
        const strata_membership_t *g = strata__elastic_current(run->elastic);
        if (rc == STRATA_OK && g->resume_step < 0) {
            strata__log(STRATA_LOG_ERROR, WHO, "generation %d: no worker "
                        "holds the job's state any more; restart the job "
                        "(from its checkpoint, if any)", g->generation);
            return STRATA_EPEER;
        }
        if (rc == STRATA_OK)
            rc = move_state(run, g);
        if (rc == STRATA_OK) { /* the state is the generation's now */
            committed = g->resume_step;
            rc = settled(run, g, at);
        }
        if (rc == STRATA_OK)
            return rc;
        /* A join that failed (the service gave up, is gone, or the job
         * is over) ends it; a transport that failed on a member lost
         * meanwhile joins the next generation. */
        if (!strata__elastic_regroupable(run, rc) ||
            strata__elastic_failed(run->elastic))
            return rc;
        strata__log(STRATA_LOG_WARN, WHO, "re-forming the world failed (%s);"
                    " joining the next generation", strata_strerror(rc));
    }
    strata__log(STRATA_LOG_ERROR, WHO, "the world did not settle after %d "
                "generations", MAX_ATTEMPTS);
    return rc;
}

int strata__elastic_regroup(strata__run_t *run, int why, strata__resume_t *at)
{
    int64_t committed = applied(run);
    if (why == STRATA__RESIZE)
        strata__log(STRATA_LOG_INFO, WHO, "a resize is due at step %lld: "
                    "re-forming the world", (long long)committed);
    else
        strata__log(STRATA_LOG_WARN, WHO, "lost a member (%s) after step "
                    "%lld: re-forming the world without it",
                    strata_strerror(why), (long long)committed);
    int rc = reform(run, committed, at);
    if (rc == STRATA_ENOTSUP)
        strata__log(STRATA_LOG_ERROR, WHO, "strategy %s cannot re-form its "
                    "world (STRATA_CTL_REGROUP)", run->strategy->name);
    return rc == STRATA_ENOTSUP ? why : rc;
}

int strata__elastic_start(strata__run_t *run, strata__resume_t *at)
{
    const strata_membership_t *g = strata__elastic_current(run->elastic);
    strata__log(STRATA_LOG_INFO, WHO, "%s joins generation %d as rank %d of "
                "%d at step %lld", run->self, g->generation, g->rank, g->size,
                (long long)g->resume_step);
    int64_t committed = -1;
    int rc = move_state(run, g);
    if (rc == STRATA_OK) {
        committed = g->resume_step;
        rc = settled(run, g, at);
    }
    if (!strata__elastic_regroupable(run, rc))
        return rc;
    return reform(run, committed, at);
}

void strata__elastic_finish(strata__run_t *run, int64_t step)
{
    strata__elastic_done(run->elastic, step);
}
