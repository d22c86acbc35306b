#include "crew.h"

int strata__crew_init(strata__crew_t *c)
{
    c->gen = 0;
    c->phase = 0;
    c->members = c->done = 0;
    if (pthread_mutex_init(&c->mu, NULL) != 0)
        return -1;
    if (pthread_cond_init(&c->go, NULL) != 0) {
        pthread_mutex_destroy(&c->mu);
        return -1;
    }
    if (pthread_cond_init(&c->done_cv, NULL) != 0) {
        pthread_cond_destroy(&c->go);
        pthread_mutex_destroy(&c->mu);
        return -1;
    }
    return 0;
}

void strata__crew_destroy(strata__crew_t *c)
{
    pthread_cond_destroy(&c->done_cv);
    pthread_cond_destroy(&c->go);
    pthread_mutex_destroy(&c->mu);
}

void strata__crew_join(strata__crew_t *c)
{
    pthread_mutex_lock(&c->mu);
    c->members++;
    pthread_mutex_unlock(&c->mu);
}

void strata__crew_run(strata__crew_t *c, int phase, int wait)
{
    pthread_mutex_lock(&c->mu);
    c->phase = phase;
    c->done = 0;
    c->gen++;
    pthread_cond_broadcast(&c->go);
    while (wait && c->done < c->members)
        pthread_cond_wait(&c->done_cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

int strata__crew_wait(strata__crew_t *c, uint64_t *gen)
{
    pthread_mutex_lock(&c->mu);
    while (c->gen == *gen)
        pthread_cond_wait(&c->go, &c->mu);
    *gen = c->gen;
    int phase = c->phase;
    pthread_mutex_unlock(&c->mu);
    return phase;
}

void strata__crew_done(strata__crew_t *c)
{
    pthread_mutex_lock(&c->mu);
    if (++c->done == c->members)
        pthread_cond_signal(&c->done_cv);
    pthread_mutex_unlock(&c->mu);
}
