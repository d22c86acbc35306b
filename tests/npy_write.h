/* Tests: write a .npy file (numpy.save's format 1.0, the header padded to
 * a multiple of 64 bytes) of dtype `descr` ("<f4", "<i8", ...) and shape
 * text `shape` ("(640, 8)", "(12,)") holding `bytes` bytes of `data`. */
#ifndef STRATA_TEST_NPY_WRITE_H
#define STRATA_TEST_NPY_WRITE_H

#include <stdio.h>

#include "check.h"

static inline void npy_write(const char *path, const char *descr,
                             const char *shape, const void *data,
                             size_t bytes)
{
    char h[256];
    int n = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, "
                     "'shape': %s, }", descr, shape);
    int total = (10 + n + 1 + 63) / 64 * 64;
    FILE *f = fopen(path, "wb");
    CHECKF(f != NULL, "cannot write %s", path);
    if (!f)
        return;
    unsigned char pre[10] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                              (unsigned char)((total - 10) & 0xff),
                              (unsigned char)((total - 10) >> 8) };
    fwrite(pre, 1, sizeof pre, f);
    fwrite(h, 1, (size_t)n, f);
    for (int i = 10 + n; i < total - 1; i++)
        fputc(' ', f);
    fputc('\n', f);
    fwrite(data, 1, bytes, f);
    CHECKF(fclose(f) == 0, "cannot write %s", path);
}

/* dir/name of shape (n, k), or (n,) when k is 0, of n * max(k, 1)
 * elements of `elem` bytes. */
static inline void npy_write_nk(const char *dir, const char *name,
                                const char *descr, size_t n, size_t k,
                                const void *data, size_t elem)
{
    char path[800], shape[64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (k)
        snprintf(shape, sizeof shape, "(%zu, %zu)", n, k);
    else
        snprintf(shape, sizeof shape, "(%zu,)", n);
    npy_write(path, descr, shape, data, elem * n * (k ? k : 1));
}

#endif
