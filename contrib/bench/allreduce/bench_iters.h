/* bench_iters.h -- iterations per size, shared by the benchmark's C
 * programs (gloo_allreduce.py has the same rule): about 0.25 s of calls
 * per size at the anchors' speed, at least 5, at most 2000, plus a
 * warm-up of a fifth of that (at least 2). */
#ifndef BENCH_ITERS_H
#define BENCH_ITERS_H

#include <stddef.h>

static inline void bench_iters(size_t bytes, int n, int *iters, int *warm)
{
    /* rough cost model: 30 us + 1 ns per byte per (n - 1) */
    double est = 30e-6 + 1e-9 * (double)bytes * (double)(n > 1 ? n - 1 : 1);
    int it = (int)(0.25 / est);
    if (it < 5)
        it = 5;
    if (it > 2000)
        it = 2000;
    *iters = it;
    *warm = it / 5 < 2 ? 2 : it / 5;
}

#endif
