/* A float32 (rows, cols) array as the bytes of a .npy file, as numpy.save
 * writes it: version 1.0, the header dict padded with spaces so that the
 * data starts 64-byte aligned, then the floats, little-endian, C order. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"

#define ALIGN 64

int strata__npy_f32_alloc(uint64_t rows, uint64_t cols, void **buf,
                          size_t *len, float **data)
{
    char dict[128];
    int n = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': "
                     "False, 'shape': (%" PRIu64 ", %" PRIu64 "), }", rows,
                     cols);
    /* magic (6), version (2), header length (2), dict, spaces, '\n' */
    size_t head = 10 + (size_t)n + 1;
    head = (head + ALIGN - 1) / ALIGN * ALIGN;
    uint64_t bytes;
    *buf = NULL;
    if (__builtin_mul_overflow(rows, cols, &bytes) ||
        __builtin_mul_overflow(bytes, (uint64_t)sizeof(float), &bytes) ||
        bytes > SIZE_MAX - head)
        return STRATA_EINVAL;
    char *p = malloc(head + (size_t)bytes);
    if (!p)
        return STRATA_ENOMEM;
    size_t hlen = head - 10;
    memcpy(p, "\x93NUMPY\x01\x00", 8);
    p[8] = (char)(hlen & 0xff);
    p[9] = (char)(hlen >> 8);
    memcpy(p + 10, dict, (size_t)n);
    memset(p + 10 + n, ' ', hlen - (size_t)n - 1);
    p[head - 1] = '\n';
    *buf = p;
    *len = head + (size_t)bytes;
    *data = (float *)(void *)(p + head);
    return STRATA_OK;
}
