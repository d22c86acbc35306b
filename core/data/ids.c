/* Id features: the .npy array of int32 / int64 ids beside a set's images
 * ([data] train_ids, test_ids, validation_ids) that embedding layers read
 * as 'ids'. Held as int32 rows of k ids per sample, carried with their
 * sample wherever the images go (the split, each epoch's order, each
 * replica's rows). An id is a row of a table, or -1: padding (no id, as
 * TF's sparse tensors leave an entry out). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"

#define WHO "data"

/* Sample i's index in its file (a split part keeps its rows'). */
static uint64_t file_index(const strata__dataset_t *d, size_t i)
{
    return d->file_row ? d->file_row[i] : i;
}

/* The first n x k ids of `a` (int32 or int64) as int32 in *out, each >=
 * -1 and below 2^31 - 1. */
static int to_int32(const char *path, const strata__npy_t *a, size_t n,
                    uint32_t k, int32_t **out)
{
    size_t count = n * k;
    int32_t *ids = malloc((count ? count : 1) * sizeof *ids);
    if (!ids) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: out of memory", path);
        return STRATA_ENOMEM;
    }
    for (size_t e = 0; e < count; e++) {
        int64_t v;
        if (a->type == STRATA__NPY_I4) {
            int32_t v32;
            memcpy(&v32, (const char *)a->data + e * 4, 4);
            v = v32;
        } else {
            memcpy(&v, (const char *)a->data + e * 8, 8);
        }
        if (v < -1 || v >= INT32_MAX) {
            strata__log(STRATA_LOG_ERROR, WHO, "%s: id %lld of sample %zu "
                        "(column %u) is out of range: ids are rows of an "
                        "embedding's table, >= 0, or -1 for padding (no id)",
                        path, (long long)v, e / k, (unsigned)(e % k));
            free(ids);
            return STRATA_EDATA;
        }
        ids[e] = (int32_t)v;
    }
    *out = ids;
    return STRATA_OK;
}

int strata__ids_load(const char *path, strata__dataset_t *d)
{
    strata__npy_t a;
    int rc = strata__mem_is(path)
                 ? strata__mem_read_first(path, STRATA__NPY_IDS, d->n, &a)
             : strata__data_is_npy(path)
                 ? strata__npy_read_first(path, STRATA__NPY_IDS, d->n, &a)
                 : (strata__log(STRATA_LOG_ERROR, WHO, "%s: ids are read "
                                "from a NumPy .npy file (int32 or int64)",
                                path), STRATA_EDATA);
    if (rc != STRATA_OK)
        return rc;
    uint32_t k = a.ndim == 2 ? (uint32_t)a.dims[1] : 1;
    if (a.file_items != d->file_items) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s holds ids of %llu samples "
                    "but the images beside it hold %llu samples: one row of "
                    "ids per sample", path, (unsigned long long)a.file_items,
                    (unsigned long long)d->file_items);
        rc = STRATA_EDATA;
    } else if (a.dims[0] < d->n || (uint64_t)k * d->n > UINT32_MAX) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: %llu x %u ids: too many",
                    path, (unsigned long long)a.dims[0], k);
        rc = STRATA_EDATA;
    }
    int32_t *ids = NULL;
    char *file = NULL;
    if (rc == STRATA_OK)
        rc = to_int32(path, &a, d->n, k, &ids);
    if (rc == STRATA_OK && !(file = strdup(path))) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: out of memory", path);
        rc = STRATA_ENOMEM;
    }
    strata__npy_free(&a);
    if (rc != STRATA_OK) {
        free(ids);
        return rc;
    }
    free(d->ids);
    free(d->ids_file);
    d->ids = ids;
    d->ids_k = k;
    d->ids_file = file;
    return STRATA_OK;
}

int strata__ids_check(const strata__dataset_t *d, int64_t vocab)
{
    size_t k = d->ids_k;
    for (size_t e = 0; e < d->n * k; e++) {
        if (d->ids[e] < vocab)
            continue;
        strata__log(STRATA_LOG_ERROR, WHO, "%s: id %d of sample %llu "
                    "(column %zu) is outside the embedding's table of %lld "
                    "rows (ids in [0, %lld), or -1 for padding)",
                    d->ids_file, (int)d->ids[e],
                    (unsigned long long)file_index(d, e / k), e % k,
                    (long long)vocab, (long long)vocab);
        return STRATA_EDATA;
    }
    return STRATA_OK;
}

void strata__ids_fill(const strata__dataset_t *d, const uint32_t *perm,
                      size_t first, size_t m, int32_t *ids)
{
    size_t k = d->ids_k;
    for (size_t i = 0; i < m; i++) {
        size_t s = perm ? perm[first + i] : first + i;
        memcpy(ids + i * k, d->ids + s * k, k * sizeof *ids);
    }
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

void strata__ids_rows(const strata__dataset_t *d, const uint32_t *perm,
                      const size_t *first, const size_t *m, int nslices,
                      int64_t *out, size_t *n)
{
    size_t k = d->ids_k, got = 0;
    for (int r = 0; r < nslices; r++)
        for (size_t i = 0; i < m[r]; i++) {
            size_t s = perm ? perm[first[r] + i] : first[r] + i;
            for (size_t c = 0; c < k; c++)
                if (d->ids[s * k + c] >= 0)
                    out[got++] = d->ids[s * k + c];
        }
    qsort(out, got, sizeof *out, cmp_i64);
    size_t u = 0;
    for (size_t i = 0; i < got; i++)
        if (u == 0 || out[i] != out[u - 1])
            out[u++] = out[i];
    *n = u;
}
