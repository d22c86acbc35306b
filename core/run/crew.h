/* A crew: the main thread hands a phase to every worker thread and waits
 * until all of them have finished it. Per-epoch hand-offs only (the per-step
 * synchronisation between replicas is the transport's job), so a mutex and
 * two condition variables are enough. Works with however many threads did
 * start, which keeps failure paths simple. */
#ifndef STRATA_CORE_CREW_H
#define STRATA_CORE_CREW_H

#include <pthread.h>
#include <stdint.h>

typedef struct strata__crew {
    pthread_mutex_t mu;
    pthread_cond_t  go, done_cv;
    uint64_t        gen;      /* bumped for every phase                    */
    int             phase;
    int             members;  /* threads that joined                       */
    int             done;     /* members that finished the current phase   */
} strata__crew_t;

int  strata__crew_init(strata__crew_t *c);
void strata__crew_destroy(strata__crew_t *c);
/* A worker thread counts itself in (called by the main thread after a
 * successful pthread_create). */
void strata__crew_join(strata__crew_t *c);
/* Main thread: start `phase` on every member; wait for all when `wait`. */
void strata__crew_run(strata__crew_t *c, int phase, int wait);
/* Worker: block until a phase newer than *gen starts; returns it. */
int  strata__crew_wait(strata__crew_t *c, uint64_t *gen);
/* Worker: this phase is finished. */
void strata__crew_done(strata__crew_t *c);

#endif
