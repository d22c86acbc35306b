/* malloc/free counted through the linker's --wrap (the data tests link
 * with -Wl,--wrap=malloc,--wrap=free): live_ blocks outstanding and the
 * biggest_ single request, so a test can prove that nothing leaked and that
 * a bad file was refused before any large allocation. Include in one file
 * of a test executable. */
#ifndef STRATA_TESTS_MALLOC_COUNT_H
#define STRATA_TESTS_MALLOC_COUNT_H

#include <stddef.h>

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

#endif /* STRATA_TESTS_MALLOC_COUNT_H */
