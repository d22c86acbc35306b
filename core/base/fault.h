/* strata core -- fault-injection points (internal; never installed).
 *
 * SQLite's SimulateIOError and test_malloc idea: every allocation and I/O
 * call whose failure path matters is a numbered point, and a test makes the
 * Nth point reached fail, for N = 1 .. the number an operation reaches, to
 * see each failure path end in one error line and nothing half-written.
 *
 *     if (STRATA_FAULT(ALLOC) || !(p = malloc(n)))     ... out of memory
 *     if (STRATA_FAULT(IO) || write(fd, b, n) != n)    ... I/O error
 *
 * A point that fires sets errno (ENOMEM for ALLOC, EIO for IO) and is true,
 * so the real call is skipped and the code after it sees a plain failure.
 *
 * Compiled in where STRATA_FAULT_INJECTION is defined non-zero: the core
 * library of every build type but Release (the CMake option of that name),
 * and tests/fault. Elsewhere (Release, the strata command's own sources,
 * tests that compile a core file on its own) STRATA_FAULT(kind) is the
 * constant 0 and the compiler removes it.
 *
 * The controller, read once, thread-safe (atomics):
 *   STRATA_FAULT=N      fail the Nth point the process reaches (from 1), once
 *   STRATA_FAULT=count  fail none; at exit, print to stderr how many points
 *                       the process reached
 * and, for tests in the process, strata__fault_arm / _count / _fired. */
#ifndef STRATA_CORE_FAULT_H
#define STRATA_CORE_FAULT_H

#ifndef STRATA_FAULT_INJECTION
#define STRATA_FAULT_INJECTION 0
#endif

enum { STRATA_FAULT_ALLOC = 1, STRATA_FAULT_IO = 2 };

#if STRATA_FAULT_INJECTION

/* One point reached: 1 when it is to fail (errno set), else 0. */
int strata__fault_hit(int kind, const char *file, int line);

#define STRATA_FAULT(kind) \
    __builtin_expect(strata__fault_hit(STRATA_FAULT_##kind, __FILE__, \
                                       __LINE__), 0)

/* Counting starts again from 0, and the nth point reached from now fails
 * (n == 0: none). Overrides STRATA_FAULT. */
void strata__fault_arm(long n);
/* Points reached since the last arm (or the start). */
long strata__fault_count(void);
/* Whether the armed point was reached (and failed); its kind and
 * "file:line" go to where[cap] when not NULL. */
int strata__fault_fired(char *where, unsigned long cap);

#else

#define STRATA_FAULT(kind) 0

#endif

/* close(fd) as an I/O fault point (a close can report a delayed write
 * error): the fd is closed either way. Needs <errno.h> and <unistd.h>. */
#define STRATA_CLOSE_POINT(fd)                                               \
    (STRATA_FAULT(IO) ? (close(fd), errno = EIO, -1) : close(fd))

#endif /* STRATA_CORE_FAULT_H */
