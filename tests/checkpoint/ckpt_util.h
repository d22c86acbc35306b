/* Helpers for the checkpoint tests: hand-made safetensors images. The temp
 * dir, raw files and the stderr capture come from tests/testutil.h. */
#ifndef STRATA_TESTS_CKPT_UTIL_H
#define STRATA_TESTS_CKPT_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

/* A safetensors image: u64 `hlen` (the header's real length unless
 * hlen_lie != 0), the header text, `ndata` bytes of data (0, 1, 2, ...). */
TESTUTIL size_t st_image(unsigned char *buf, const char *header,
                         uint64_t hlen_lie, size_t ndata)
{
    size_t h = strlen(header);
    uint64_t n = hlen_lie ? hlen_lie : h;
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(n >> (8 * i));
    memcpy(buf + 8, header, h);
    for (size_t i = 0; i < ndata; i++)
        buf[8 + h + i] = (unsigned char)i;
    return 8 + h + ndata;
}

/* python3 along PATH, or $STRATA_PYTHON: 0 with its path in buf. */
TESTUTIL int find_python(char *buf, size_t len)
{
    const char *env = getenv("STRATA_PYTHON");
    if (env && *env) {
        snprintf(buf, len, "%s", env);
        return access(buf, X_OK);
    }
    const char *path = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s", path ? path : "/usr/bin:/bin");
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d;
         d = strtok_r(NULL, ":", &save)) {
        snprintf(buf, len, "%s/python3", d);
        if (access(buf, X_OK) == 0)
            return 0;
    }
    return -1;
}

#endif
