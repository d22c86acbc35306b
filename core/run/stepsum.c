/* The replicas' sums of a step (stepsum.h). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"
#include "stepsum.h"

int strata__stepsum_init(strata__stepsum_t *s, int nrep, size_t cap)
{
    memset(s, 0, sizeof *s);
    s->nrep = nrep;
    s->cap = cap;
    s->part = calloc((size_t)nrep * (cap + 1), sizeof *s->part);
    s->total = calloc(cap + 1, sizeof *s->total);
    if (!s->part || !s->total) {
        free(s->part);
        free(s->total);
        s->part = s->total = NULL;
        return STRATA_ENOMEM;
    }
    if (pthread_mutex_init(&s->mu, NULL) != 0) {
        free(s->part);
        free(s->total);
        s->part = s->total = NULL;
        return STRATA_ENOMEM;
    }
    if (pthread_cond_init(&s->cv, NULL) != 0) {
        pthread_mutex_destroy(&s->mu);
        free(s->part);
        free(s->total);
        s->part = s->total = NULL;
        return STRATA_ENOMEM;
    }
    return STRATA_OK;
}

void strata__stepsum_free(strata__stepsum_t *s)
{
    if (!s->part)
        return;
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s->part);
    free(s->total);
    memset(s, 0, sizeof *s);
}

void strata__stepsum_reset(strata__stepsum_t *s)
{
    if (!s->part)
        return;
    pthread_mutex_lock(&s->mu);
    s->arrived = 0;
    pthread_mutex_unlock(&s->mu);
}

/* The last replica to arrive: the replicas' sums in replica order, then
 * the processes' (the strategy's, when it can), into s->total. */
static int add_up(strata__run_t *run, strata__stepsum_t *s)
{
    size_t n = s->n, w = s->cap + 1;
    for (size_t j = 0; j <= n; j++) {
        double t = s->part[j < n ? j : w - 1];
        for (int r = 1; r < s->nrep; r++)
            t += s->part[(size_t)r * w + (j < n ? j : w - 1)];
        s->total[j] = t;
    }
    if (!(run->strategy->caps & STRATA_CAP_STEP_SUM))
        return STRATA_OK; /* ps: each worker its own statistics */
    strata_op_t op = { .struct_size = sizeof op, .buf = s->total,
                       .count = n + 1,
                       .device = STRATA_DEVICE(STRATA_DEV_CPU, 0),
                       .reduce_op = STRATA_REDUCE_SUM };
    int rc = run->strategy->vt->ctl(run->spctx, STRATA_CTL_STEP_SUM, &op);
    if (rc != STRATA_OK)
        strata__log(STRATA_LOG_ERROR, "train", "summing batchnorm "
                    "statistics across the workers: %s", strata_strerror(rc));
    return rc;
}

int strata__stepsum(void *arg, double *sums, size_t n, double *count)
{
    strata__replica_t *rep = arg;
    strata__run_t *run = rep->run;
    strata__stepsum_t *s = &run->stepsum;
    const strata__kops_t *o = rep->work.kd->ops;
    if (n > s->cap)
        return STRATA_EINTERNAL;
    double *mine = s->part + (size_t)rep->r * (s->cap + 1);
    int rc = o->copy(rep->work.kd, STRATA__D2H, mine, sums, n * sizeof *sums);
    if (rc == STRATA_OK)
        rc = o->sync(rep->work.kd);
    mine[s->cap] = *count;
    pthread_mutex_lock(&s->mu);
    uint64_t gen = s->gen;
    if (rc == STRATA_OK && ++s->arrived == s->nrep) {
        s->n = n;
        s->rc = add_up(run, s);
        s->arrived = 0;
        s->gen++;
        pthread_cond_broadcast(&s->cv);
    }
    while (rc == STRATA_OK && s->gen == gen) {
        if (atomic_load(&run->rc) != 0) {
            rc = STRATA_ECANCELED;
            break;
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 50 * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->cv, &s->mu, &until);
    }
    if (rc == STRATA_OK)
        rc = s->rc;
    pthread_mutex_unlock(&s->mu);
    if (rc != STRATA_OK)
        return rc;
    *count = s->total[n];
    rc = o->copy(rep->work.kd, STRATA__H2D, sums, s->total, n * sizeof *sums);
    return rc;
}

int strata__run_states_set(strata__run_t *run, float *state, int from_chief)
{
    const strata__model_t *m = &run->model;
    if (!m->state_count)
        return STRATA_OK;
    int rc = STRATA_OK;
    if (from_chief && run->geo.nworkers > 1 &&
        (run->strategy->caps & STRATA_CAP_STEP_SUM)) {
        double *d = malloc(m->state_count * sizeof *d);
        if (!d)
            return STRATA_ENOMEM;
        for (size_t i = 0; i < m->state_count; i++)
            d[i] = run->geo.chief ? (double)state[i] : 0.0;
        strata_op_t op = { .struct_size = sizeof op, .buf = d,
                           .count = m->state_count,
                           .device = STRATA_DEVICE(STRATA_DEV_CPU, 0),
                           .reduce_op = STRATA_REDUCE_SUM };
        rc = run->strategy->vt->ctl(run->spctx, STRATA_CTL_STEP_SUM, &op);
        for (size_t i = 0; rc == STRATA_OK && i < m->state_count; i++)
            state[i] = (float)d[i];
        free(d);
    }
    for (int r = 0; rc == STRATA_OK && r < run->nreplicas; r++)
        rc = strata__work_state_set(m, &run->reps[r].work, state);
    return rc;
}
