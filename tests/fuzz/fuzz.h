/* Shared by the fuzz harnesses (fuzz_*.c), the replay driver and libFuzzer.
 * Each harness defines LLVMFuzzerTestOneInput; FUZZ_CHECK aborts, so that a
 * broken invariant is a crash to libFuzzer and a failed test to ctest. */
#ifndef STRATA_TESTS_FUZZ_H
#define STRATA_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input as a file, for the readers that take a path: "/proc/self/fd/N"
 * of one memfd per process, holding exactly data[0..size). Nothing is
 * written to disk. Valid until the next call. */
const char *fuzz_as_file(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                    \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__,      \
                    __LINE__, #cond);                                       \
            abort();                                                        \
        }                                                                   \
    } while (0)

#endif /* STRATA_TESTS_FUZZ_H */
