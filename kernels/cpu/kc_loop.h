/* Private to kernels/cpu: the loop shape that gcc -O2 vectorises.
 *
 * gcc >= 12 at -O2 uses the "very-cheap" vector cost model, which vectorises
 * a loop only when its trip count is a known multiple of the vector width
 * (no peeling, no runtime alias checks). KC_FOR runs `body` for i in [0, n)
 * as blocks of a constant KC_BLOCK iterations (vectorised, any width up to
 * 16 floats) followed by a scalar tail. Combined with restrict pointers this
 * vectorises with gcc -O2 and clang alike, also after inlining. */
#ifndef STRATA_KC_LOOP_H
#define STRATA_KC_LOOP_H

#include <stddef.h>

#define KC_BLOCK 16

#define KC_FOR(i, n, body)                                                    \
    do {                                                                      \
        size_t kc_n_ = (n), kc_b_ = 0;                                        \
        for (; kc_b_ + KC_BLOCK <= kc_n_; kc_b_ += KC_BLOCK)                  \
            for (size_t i = kc_b_; i < kc_b_ + KC_BLOCK; i++) { body; }       \
        for (size_t i = kc_b_; i < kc_n_; i++) { body; }                      \
    } while (0)

/* KC_HOT: compile an elementwise kernel twice, for AVX2 and for
 * the baseline, and pick at load time (ifunc, by CPU feature): one portable binary that uses
 * 8-wide vectors where the CPU has them. gcc only (clang 14 does not emit
 * the clones of a function declared without the attribute), and off under
 * the sanitizers, which do not mix well with ifunc resolvers. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define KC_HOT __attribute__((target_clones("avx2", "default")))
#else
#define KC_HOT
#endif

#endif /* STRATA_KC_LOOP_H */
