/* A barrier for the replica threads of one process that spins briefly
 * before it sleeps: a hand-off between running threads then costs about a
 * microsecond instead of the tens of microseconds of a futex round trip,
 * and a waiting thread still gives its core away when the wait is long. */
#ifndef LOCAL_SPIN_BARRIER_H
#define LOCAL_SPIN_BARRIER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct spin_barrier {
    int             parties;
    int64_t         spin_ns;     /* how long to spin before sleeping        */
    atomic_int      arrived;
    atomic_uint     gen;         /* bumped by the last arrival              */
    atomic_int      sleepers;
    atomic_int      aborted;
    pthread_mutex_t mu;
    pthread_cond_t  cv;
} spin_barrier_t;

int  spin_barrier_init(spin_barrier_t *b, int parties, int64_t spin_ns);
void spin_barrier_destroy(spin_barrier_t *b);
/* 0 when everybody arrived; -1 on abort; -2 when timeout_ns passed. */
int  spin_barrier_wait(spin_barrier_t *b, int64_t timeout_ns);
/* Wake every waiter, now and in the future, with -1. */
void spin_barrier_abort(spin_barrier_t *b);

#endif
