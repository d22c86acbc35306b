/* Minimal test harness: CHECK(...) records a failure with file:line and goes
 * on; CHECK_DONE() prints "N passed, N failed" and returns the exit code. */
#ifndef STRATA_TESTS_CHECK_H
#define STRATA_TESTS_CHECK_H
#include <stdio.h>
#include <stdlib.h>

static int check_passed_, check_failed_;

#define CHECK(cond) do { if (cond) check_passed_++; else { check_failed_++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECKF(cond, ...) do { if (cond) check_passed_++; else { check_failed_++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)
/* Skip the whole test binary, visibly, with a reason (ctest: SKIP_RETURN_CODE 77). */
#define CHECK_SKIP(...) do { printf("SKIPPED: "); printf(__VA_ARGS__); printf("\n"); \
    exit(77); } while (0)
#define CHECK_DONE() (printf("%d passed, %d failed\n", check_passed_, check_failed_), \
    check_failed_ ? 1 : 0)
#endif
