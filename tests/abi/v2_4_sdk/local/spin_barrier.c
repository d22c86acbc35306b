#include "spin_barrier.h"

#include <errno.h>
#include <sched.h>
#include <time.h>

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

int spin_barrier_init(spin_barrier_t *b, int parties, int64_t spin_ns,
                      int64_t yield_ns)
{
    b->parties = parties;
    b->spin_ns = spin_ns;
    b->yield_ns = yield_ns;
    atomic_init(&b->arrived, 0);
    atomic_init(&b->gen, 0);
    atomic_init(&b->sleepers, 0);
    atomic_init(&b->aborted, 0);
    if (pthread_mutex_init(&b->mu, NULL) != 0)
        return -1;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&b->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0) {
        pthread_mutex_destroy(&b->mu);
        return -1;
    }
    return 0;
}

void spin_barrier_destroy(spin_barrier_t *b)
{
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
}

static void wake_all(spin_barrier_t *b)
{
    if (atomic_load(&b->sleepers) > 0) {
        pthread_mutex_lock(&b->mu);
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
    }
}

void spin_barrier_abort(spin_barrier_t *b)
{
    atomic_store(&b->aborted, 1);
    pthread_mutex_lock(&b->mu);
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

int spin_barrier_wait(spin_barrier_t *b, int64_t timeout_ns)
{
    if (atomic_load(&b->aborted))
        return -1;
    unsigned gen = atomic_load(&b->gen);
    if (atomic_fetch_add(&b->arrived, 1) == b->parties - 1) {
        /* Last to arrive: reset for the next round, then release. The
         * seq_cst store pairs with the sleepers count in wake_all. */
        atomic_store(&b->arrived, 0);
        atomic_store(&b->gen, gen + 1);
        wake_all(b);
        return 0;
    }
    int64_t start = now_ns();
    while (now_ns() - start < b->spin_ns) {
        for (int i = 0; i < 64; i++) {
            if (atomic_load_explicit(&b->gen, memory_order_acquire) != gen)
                return 0;
            cpu_relax();
        }
        if (atomic_load(&b->aborted))
            return -1;
    }
    /* Not a sleep: an idle CPU may take far longer to wake than the wait. */
    while (now_ns() - start < b->spin_ns + b->yield_ns) {
        if (atomic_load_explicit(&b->gen, memory_order_acquire) != gen)
            return 0;
        if (atomic_load(&b->aborted))
            return -1;
        sched_yield();
    }
    int64_t deadline = start + timeout_ns;
    struct timespec ts = { .tv_sec = deadline / 1000000000,
                           .tv_nsec = deadline % 1000000000 };
    int rc = 0;
    atomic_fetch_add(&b->sleepers, 1);
    pthread_mutex_lock(&b->mu);
    while (atomic_load(&b->gen) == gen && !atomic_load(&b->aborted)) {
        if (pthread_cond_timedwait(&b->cv, &b->mu, &ts) == ETIMEDOUT &&
            atomic_load(&b->gen) == gen) {
            rc = -2;
            break;
        }
    }
    pthread_mutex_unlock(&b->mu);
    atomic_fetch_sub(&b->sleepers, 1);
    if (rc == 0 && atomic_load(&b->gen) == gen)
        rc = -1;
    return rc;
}
