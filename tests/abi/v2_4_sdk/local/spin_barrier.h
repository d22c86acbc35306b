/* A barrier for the replica threads of one process that spins briefly,
 * then yields its core for a while, before it sleeps: a hand-off between
 * running threads then costs about a microsecond instead of a futex round
 * trip (hundreds of microseconds where an idle virtual CPU has to be woken
 * by the hypervisor), a thread that waits for one on the same core lets it
 * run, and a waiting thread still sleeps when the wait is long. */
#ifndef LOCAL_SPIN_BARRIER_H
#define LOCAL_SPIN_BARRIER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct spin_barrier {
    int             parties;
    int64_t         spin_ns;     /* how long to spin before yielding        */
    int64_t         yield_ns;    /* then how long to yield before sleeping  */
    atomic_int      arrived;
    atomic_uint     gen;         /* bumped by the last arrival              */
    atomic_int      sleepers;
    atomic_int      aborted;
    pthread_mutex_t mu;
    pthread_cond_t  cv;
} spin_barrier_t;

int  spin_barrier_init(spin_barrier_t *b, int parties, int64_t spin_ns,
                       int64_t yield_ns);
void spin_barrier_destroy(spin_barrier_t *b);
/* 0 when everybody arrived; -1 on abort; -2 when timeout_ns passed. */
int  spin_barrier_wait(spin_barrier_t *b, int64_t timeout_ns);
/* Wake every waiter, now and in the future, with -1. */
void spin_barrier_abort(spin_barrier_t *b);

#endif
