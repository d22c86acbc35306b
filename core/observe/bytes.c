/* A growable byte buffer for the files a run writes whole or in records
 * (the trace's JSON, TensorBoard's event records). An allocation failure
 * is remembered and checked once, where the buffer is used. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "observe/observe.h"

static int reserve(strata__bytes_t *b, size_t n)
{
    if (b->failed)
        return 0;
    if (n <= b->cap - b->len)
        return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n) {
        if (cap > SIZE_MAX / 2) {
            b->failed = 1;
            return 0;
        }
        cap *= 2;
    }
    unsigned char *p = realloc(b->p, cap);
    if (!p) {
        b->failed = 1;
        return 0;
    }
    b->p = p;
    b->cap = cap;
    return 1;
}

void strata__bytes_put(strata__bytes_t *b, const void *data, size_t n)
{
    if (n && reserve(b, n)) {
        memcpy(b->p + b->len, data, n);
        b->len += n;
    }
}

void strata__bytes_printf(strata__bytes_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    /* +1: vsnprintf writes the NUL, which is not kept. */
    if (!reserve(b, (size_t)n + 1))
        return;
    va_start(ap, fmt);
    vsnprintf((char *)b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void strata__bytes_json_str(strata__bytes_t *b, const char *s)
{
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            strata__bytes_printf(b, "\\%c", *c);
        else if (*c < 0x20)
            strata__bytes_printf(b, "\\u%04x", *c);
        else
            strata__bytes_put(b, c, 1);
    }
}

void strata__bytes_free(strata__bytes_t *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}
