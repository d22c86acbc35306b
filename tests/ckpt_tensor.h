/* A tensor of a strata checkpoint, read the way a test reads it: straight
 * from the safetensors bytes, independent of the core's reader. A
 * checkpoint in parts (plugin ABI 2.13: a ps job's tasks each write
 * "NAME[ROW0:ROW1]" of their shards beside the main file, which says
 * "strata.part_count") is joined here: the rows of every part, in order,
 * must tile the tensor. */
#ifndef STRATA_TESTS_CKPT_TENSOR_H
#define STRATA_TESTS_CKPT_TENSOR_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The whole file, malloc'd (NUL-terminated), or NULL. */
static inline char *ckpt_slurp_(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *b = NULL;
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
        fseek(f, 0, SEEK_SET) == 0 && (b = malloc((size_t)n + 1)) &&
        fread(b, 1, (size_t)n, f) == (size_t)n) {
        b[n] = '\0';
        *len = (size_t)n;
    } else {
        free(b);
        b = NULL;
    }
    if (f)
        fclose(f);
    return b;
}

/* The header of a loaded file: its length, or 0 when it is not one. */
static inline uint64_t ckpt_hlen_(const char *f, size_t len)
{
    uint64_t h = 0;
    if (f && len >= 8)
        memcpy(&h, f, 8);
    return h && 8 + h <= len ? h : 0;
}

/* The data of the JSON entry at `key` (a quoted name) of a header. */
static inline int ckpt_entry_(const char *f, size_t len, uint64_t hlen,
                              const char *key, const char **data,
                              size_t *n)
{
    const char *o = strstr(key, "\"data_offsets\":[");
    unsigned long long a, b;
    if (!o || (size_t)(o - f) >= 8 + hlen ||
        sscanf(o + strlen("\"data_offsets\":["), "%llu,%llu", &a, &b) != 2 ||
        a > b || 8 + hlen + b > len)
        return -1;
    *data = f + 8 + hlen + a;
    *n = (size_t)(b - a);
    return 0;
}

/* The bytes of tensor `name` of the checkpoint at `path` into out (cap
 * bytes): their count, or 0 when it is not there (or does not fit). */
static inline size_t ckpt_tensor_bytes(const char *path, const char *name,
                                       void *out, size_t cap)
{
    size_t len = 0, got = 0;
    char *f = ckpt_slurp_(path, &len);
    uint64_t hlen = ckpt_hlen_(f, len);
    char key[200];
    snprintf(key, sizeof key, "\"%s\"", name);
    const char *k = hlen ? strstr(f + 8, key) : NULL, *data;
    size_t n;
    if (k && (size_t)(k - f) < 8 + hlen &&
        ckpt_entry_(f, len, hlen, k, &data, &n) == 0 && n <= cap) {
        memcpy(out, data, n);
        got = n;
    }
    const char *pc = hlen && !got ? strstr(f + 8, "\"strata.part_count\":\"")
                              : NULL;
    int parts = pc && (size_t)(pc - f) < 8 + hlen
                    ? atoi(pc + strlen("\"strata.part_count\":\"")) : 0;
    free(f);
    /* In parts: every "NAME[r0:r1]" of every part, rows in order. */
    size_t row_bytes = 0;
    long long rows = 0;
    for (int pass = 0; parts > 0 && pass < 2; pass++)
        for (int j = 0; j < parts; j++) {
            char pp[4096];
            size_t plen = strlen(path) - strlen(".safetensors");
            snprintf(pp, sizeof pp, "%.*s.part-%d-of-%d.safetensors",
                     (int)plen, path, j, parts);
            size_t l2 = 0;
            char *g = ckpt_slurp_(pp, &l2);
            uint64_t h2 = ckpt_hlen_(g, l2);
            snprintf(key, sizeof key, "\"%s[", name);
            for (const char *q = h2 ? strstr(g + 8, key) : NULL;
                 q && (size_t)(q - g) < 8 + h2; q = strstr(q + 1, key)) {
                long long r0, r1;
                if (sscanf(q + strlen(key), "%lld:%lld]\"", &r0, &r1) != 2 ||
                    r1 <= r0 || ckpt_entry_(g, l2, h2, q, &data, &n) != 0)
                    continue;
                if (pass == 0) { /* the row size and the row count */
                    row_bytes = n / (size_t)(r1 - r0);
                    rows += r1 - r0;
                } else if ((size_t)r1 * row_bytes <= cap) {
                    memcpy((char *)out + (size_t)r0 * row_bytes, data, n);
                    got += n;
                }
            }
            free(g);
        }
    /* every row once, and nothing else */
    return parts > 0 && got != (size_t)rows * row_bytes ? 0 : got;
}

#endif
