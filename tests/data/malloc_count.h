/* malloc/free counted through the linker's --wrap (the data tests link
 * with -Wl,--wrap=malloc,--wrap=free): live_ blocks outstanding and the
 * biggest_ single request, so a test can prove that nothing leaked and that
 * a bad file was refused before any large allocation. Include in one file
 * of a test executable. */
#ifndef STRATA_TESTS_MALLOC_COUNT_H
#define STRATA_TESTS_MALLOC_COUNT_H

#include <stddef.h>
#include <string.h>

#include "check.h"
#include "strata/strata.h"

void *__real_malloc(size_t n);
void  __real_free(void *p);
void *__wrap_malloc(size_t n);
void  __wrap_free(void *p);

static long live_;
static size_t biggest_;

void *__wrap_malloc(size_t n)
{
    void *p = __real_malloc(n);
    if (p)
        live_++;
    if (n > biggest_)
        biggest_ = n;
    return p;
}

void __wrap_free(void *p)
{
    if (p)
        live_--;
    __real_free(p);
}

/* The checks of a read that must be refused: code `rc`, exactly one log
 * line (`lines` of `log`) naming the file and holding `word`, no block
 * leaked since `live0`, no allocation over `max_alloc` (`big`: the biggest
 * request during the read). `line` is the caller's, for messages. */
static __attribute__((unused)) void
check_refused(int line, const char *path, int got, int rc, int lines,
              const char *log, const char *word, long live0, size_t big,
              size_t max_alloc)
{
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    CHECKF(got == rc, "line %d: %s: got %s, want %s", line, base,
           strata_err_name(got), strata_err_name(rc));
    CHECKF(lines == 1, "line %d: %d log lines: %s", line, lines, log);
    CHECKF(strstr(log, base) != NULL, "line %d: no file name in: %s", line,
           log);
    CHECKF(strstr(log, word) != NULL, "line %d: no '%s' in: %s", line, word,
           log);
    CHECKF(live_ == live0, "line %d: %ld blocks leaked", line, live_ - live0);
    CHECKF(big <= max_alloc, "line %d: allocated %zu bytes (max %zu)", line,
           big, max_alloc);
}

#endif /* STRATA_TESTS_MALLOC_COUNT_H */
