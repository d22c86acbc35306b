/* Helpers for the data tests: IDX files written raw or through zlib. The
 * temp dir and the stderr capture come from tests/testutil.h. */
#ifndef STRATA_TESTS_DATA_UTIL_H
#define STRATA_TESTS_DATA_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "testutil.h"

/* Write `n` bytes to `path`, raw or gzip-compressed (zlib gzopen "wb"). */
TESTUTIL void write_bytes(const char *path, const void *buf, size_t n, int gz)
{
    if (!gz) {
        write_file(path, buf, n);
        return;
    }
    gzFile g = gzopen(path, "wb");
    if (!g || (n && gzwrite(g, buf, (unsigned)n) != (int)n)
        || gzclose(g) != Z_OK) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
}

/* An IDX image: header (type, dims) + payload + `extra` junk bytes; payload
 * may be shorter than the dims say (truncation tests). Returns the size. */
TESTUTIL size_t idx_build(unsigned char *buf, uint8_t type, int ndim,
                            const uint32_t *dims, const uint8_t *payload,
                            size_t npayload, size_t extra)
{
    size_t k = 0;
    buf[k++] = 0;
    buf[k++] = 0;
    buf[k++] = type;
    buf[k++] = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++) {
        buf[k++] = (uint8_t)(dims[i] >> 24);
        buf[k++] = (uint8_t)(dims[i] >> 16);
        buf[k++] = (uint8_t)(dims[i] >> 8);
        buf[k++] = (uint8_t)dims[i];
    }
    memcpy(buf + k, payload, npayload);
    k += npayload;
    for (size_t i = 0; i < extra; i++)
        buf[k++] = 0xAB;
    return k;
}

/* Write a well-formed u8 IDX file with dims and payload (count = product). */
TESTUTIL void write_idx(const char *path, int ndim, const uint32_t *dims,
                          const uint8_t *payload, int gz)
{
    size_t count = 1;
    for (int i = 0; i < ndim; i++)
        count *= dims[i];
    unsigned char *buf = malloc(4 + 4 * (size_t)ndim + count);
    size_t n = idx_build(buf, 0x08, ndim, dims, payload, count, 0);
    write_bytes(path, buf, n, gz);
    free(buf);
}

#endif
