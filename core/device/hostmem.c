/* Host memory of CPU devices: 64-byte aligned, zeroed, and committed only
 * where it is written.
 *
 * A buffer of at least LAZY_MIN bytes is an anonymous private mapping of
 * its own: its pages are the kernel's shared zero page until written, so
 * a buffer that a task reserves whole but writes in part (a parameter
 * server worker's copy of an embedding table, of which a step reads only
 * its batch's rows; the table's range of the gradients, which stays 0
 * when the gradient travels as rows) costs the pages written, not its
 * size. strata__host_discard() zeroes a range by handing its whole pages
 * back (madvise MADV_DONTNEED: private anonymous memory reads as zeros
 * afterwards), so such a task's resident memory stays at what one step
 * writes. Smaller buffers come from the heap, zeroed by memset.
 *
 * Each buffer starts with a header (a page for a mapping, so that the data
 * is page-aligned; 64 bytes on the heap) that says how to free it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime.h"

enum { LAZY_MIN = 1 << 20, HEAP_HEAD = 64 };
#define MAGIC_MAP  0x7374726d61707061ull /* "strmappa" */
#define MAGIC_HEAP 0x73747268656170aaull

struct head {
    uint64_t magic;
    size_t   len;   /* the mapping's length, header included */
};

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

void *strata__host_alloc(size_t bytes)
{
    size_t n = (bytes + 63) & ~(size_t)63;
    if (n < bytes)
        return NULL;
    if (n >= LAZY_MIN) {
        size_t pg = page_size(), len = n + pg;
        if (len < n)
            return NULL;
        void *base = mmap(NULL, len, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED)
            return NULL;
        struct head *h = (struct head *)((char *)base + pg - sizeof *h);
        h->magic = MAGIC_MAP;
        h->len = len;
        return (char *)base + pg;
    }
    char *base = aligned_alloc(64, n + HEAP_HEAD);
    if (!base)
        return NULL;
    memset(base + HEAP_HEAD, 0, n ? n : 1);
    struct head *h = (struct head *)(base + HEAP_HEAD - sizeof *h);
    h->magic = MAGIC_HEAP;
    h->len = 0;
    return base + HEAP_HEAD;
}

void strata__host_free(void *p)
{
    if (!p)
        return;
    struct head *h = (struct head *)((char *)p - sizeof *h);
    if (h->magic == MAGIC_MAP) {
        size_t pg = page_size();
        h->magic = 0;
        munmap((char *)p - pg, h->len);
    } else {
        h->magic = 0;
        free((char *)p - HEAP_HEAD);
    }
}

/* Zero [p, p + bytes) of a buffer of strata__host_alloc: the whole pages
 * inside go back to the kernel (they read as zeros and cost nothing until
 * written again), the partial pages at the ends are cleared. Below a few
 * pages a memset is cheaper than the system call and the faults after. */
void strata__host_discard(void *p, size_t bytes)
{
    size_t pg = page_size();
    uintptr_t a = (uintptr_t)p, end = a + bytes;
    uintptr_t lo = (a + pg - 1) & ~(uintptr_t)(pg - 1);
    uintptr_t hi = end & ~(uintptr_t)(pg - 1);
    if (bytes < 16 * pg || hi <= lo ||
        madvise((void *)lo, hi - lo, MADV_DONTNEED) != 0) {
        memset(p, 0, bytes);
        return;
    }
    memset(p, 0, lo - a);
    memset((void *)hi, 0, end - hi);
}
