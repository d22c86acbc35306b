/* A validation set held out of a training set ([data] validation_split):
 * a seeded choice of samples, the same on every task of a job and in every
 * run with the same seed, so that replicas, workers and a resumed run all
 * train on the same samples and validate on the others. */
#include <stdlib.h>
#include <string.h>

#include "data.h"

/* The stream of strata__epoch_order that chooses the held-out samples:
 * apart from every epoch's (epoch e uses stream e + 1). */
#define SPLIT_STREAM UINT64_C(0x76616c6964) /* "valid" */

/* Rows idx[0..k) of d (ascending) into out, a new set. */
static int take(const strata__dataset_t *d, const uint32_t *idx, size_t k,
                strata__dataset_t *out)
{
    *out = *d;
    out->n = k;
    out->images = NULL;
    out->images_f32 = NULL;
    void *y = malloc(k * strata__label_bytes(d));
    out->labels = NULL;
    out->targets = NULL;
    size_t row = d->dim * (d->images_f32 ? sizeof(float) : 1);
    void *x = strata__data_payload_alloc(k * row);
    /* the ids go with their samples, which keep their index in the file
     * for messages */
    int with_ids = d->ids != NULL;
    size_t nids = k * d->ids_k;
    out->ids = with_ids ? malloc((nids ? nids : 1) * sizeof *out->ids)
                        : NULL;
    out->ids_file = with_ids ? strdup(d->ids_file) : NULL;
    out->file_row = with_ids ? malloc((k ? k : 1) * sizeof *out->file_row)
                             : NULL;
    if (!y || !x || (with_ids && (!out->ids || !out->ids_file ||
                                  !out->file_row))) {
        free(y);
        free(x);
        free(out->ids);
        free(out->ids_file);
        free(out->file_row);
        memset(out, 0, sizeof *out);
        return STRATA_ENOMEM;
    }
    if (with_ids) {
        strata__ids_fill(d, idx, 0, k, out->ids);
        for (size_t i = 0; i < k; i++)
            out->file_row[i] = d->file_row ? d->file_row[idx[i]] : idx[i];
    }
    const uint8_t *src = d->images_f32 ? (const uint8_t *)d->images_f32
                                       : d->images;
    for (size_t i = 0; i < k; i++) {
        memcpy((uint8_t *)x + i * row, src + (size_t)idx[i] * row, row);
        strata__label_copy(d, idx[i], y, i);
    }
    if (d->target_dim)
        out->targets = y;
    else
        out->labels = y;
    if (d->images_f32)
        out->images_f32 = x;
    else
        out->images = x;
    return STRATA_OK;
}

static int ascending(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

int strata__dataset_split(strata__dataset_t *train, double fraction,
                          uint64_t seed, strata__dataset_t *val)
{
    memset(val, 0, sizeof *val);
    size_t n = train->n, k = (size_t)((double)n * fraction + 0.5);
    if (k < 1 || k >= n) {
        strata__log(STRATA_LOG_ERROR, "data", "[data] validation_split = %g "
                    "of %zu training samples leaves %zu to %s: at least one "
                    "sample each", fraction, n, k < 1 ? (size_t)0 : n - k,
                    k < 1 ? "validate on" : "train on");
        return STRATA_ECONFIG;
    }
    uint32_t *perm = malloc(n * sizeof *perm);
    if (!perm)
        return STRATA_ENOMEM;
    strata__epoch_order(perm, n, seed, SPLIT_STREAM - 1, 1);
    /* the last k of the order validate; both parts keep the file's order */
    qsort(perm, n - k, sizeof *perm, ascending);
    qsort(perm + (n - k), k, sizeof *perm, ascending);
    strata__dataset_t kept;
    int rc = take(train, perm + (n - k), k, val);
    val->augment = NULL; /* validation samples are never augmented */
    if (rc == STRATA_OK && (rc = take(train, perm, n - k, &kept)) != STRATA_OK)
        strata__dataset_free(val);
    free(perm);
    if (rc != STRATA_OK)
        return rc;
    strata__dataset_free(train);
    *train = kept;
    return STRATA_OK;
}
