/* Datasets from a pair of IDX files, the epoch's sample order, and batches. */
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "kernels_cpu.h"

#define WHO "data"

/* Every label < STRATA_DATA_MAX_CLASSES; *nclasses = max + 1, at least 2. */
static int check_labels(const char *path, const strata__idx_t *lab,
                        int *nclasses)
{
    if (lab->ndim != 1) {
        strata__log(STRATA_LOG_ERROR, WHO,
                    "%s: labels file has %d dimensions; expected 1 (n)",
                    path, lab->ndim);
        return STRATA_EDATA;
    }
    unsigned max = 0;
    for (size_t i = 0; i < lab->count; i++) {
        unsigned v = lab->data[i];
        if (v >= STRATA_DATA_MAX_CLASSES) {
            strata__log(STRATA_LOG_ERROR, WHO,
                        "%s: label %u at index %zu is out of range (labels "
                        "must be < %d)", path, v, i, STRATA_DATA_MAX_CLASSES);
            return STRATA_EDATA;
        }
        if (v > max)
            max = v;
    }
    *nclasses = max + 1 < 2 ? 2 : (int)max + 1;
    return 0;
}

int strata__dataset_load(const char *images_path, const char *labels_path,
                         size_t limit, strata__dataset_t *out)
{
    memset(out, 0, sizeof *out);
    strata__idx_t lab, img;
    int nclasses = 0;

    /* Labels are small (one byte a sample): read and check them all, so
     * nclasses and bad labels do not depend on the limit. */
    int rc = strata__idx_read(labels_path, &lab);
    if (rc)
        return rc;
    rc = check_labels(labels_path, &lab, &nclasses);
    if (rc) {
        strata__idx_free(&lab);
        return rc;
    }
    rc = strata__idx_read_first(images_path, limit, &img);
    if (rc) {
        strata__idx_free(&lab);
        return rc;
    }
    if (img.ndim != 2 && img.ndim != 3) {
        strata__log(STRATA_LOG_ERROR, WHO,
                    "%s: images file has %d dimensions; expected 3 (n, rows, "
                    "cols) or 2 (n, dim)", images_path, img.ndim);
        rc = STRATA_EDATA;
    } else if (img.file_items != lab.file_items) {
        strata__log(STRATA_LOG_ERROR, WHO,
                    "%s holds %u images but %s holds %u labels", images_path,
                    img.file_items, labels_path, lab.file_items);
        rc = STRATA_EDATA;
    }
    if (rc) {
        strata__idx_free(&img);
        strata__idx_free(&lab);
        return rc;
    }

    out->n = img.dims[0];
    out->dim = img.count / out->n;
    out->rows = img.ndim == 3 ? img.dims[1] : 1;
    out->cols = img.ndim == 3 ? img.dims[2] : img.dims[1];
    out->nclasses = nclasses;
    out->images = img.data;          /* ownership moves to the dataset */
    out->labels = lab.data;
    if (out->n < lab.count) {        /* limited: give back the tail    */
        uint8_t *p = realloc(lab.data, out->n);
        if (p)
            out->labels = p;
    }
    return 0;
}

void strata__dataset_free(strata__dataset_t *d)
{
    if (!d)
        return;
    free(d->images);
    free(d->labels);
    memset(d, 0, sizeof *d);
}

void strata__epoch_order(uint32_t *perm, size_t n, uint64_t seed,
                         uint64_t epoch, int shuffle)
{
    for (size_t i = 0; i < n; i++)
        perm[i] = (uint32_t)i;
    if (!shuffle || n < 2)
        return;
    strata__rng_t r;
    strata__rng_seed(&r, seed, epoch + 1);
    for (size_t i = n - 1; i > 0; i--) {      /* Fisher-Yates, from the end */
        size_t j = (size_t)strata__rng_below(&r, (uint64_t)i + 1);
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* Rows a batch fetches ahead of the one it converts: a shuffled batch
 * reads rows from anywhere in the images, and their cache misses were most
 * of the gather's time. */
#define PREFETCH_ROWS 4

/* Sample index of position i of the order (perm NULL: the file's order). */
static size_t sample_at(const uint32_t *perm, size_t i)
{
    return perm ? perm[i] : i;
}

static void prefetch_row(const strata__dataset_t *d, const uint32_t *perm,
                         size_t i)
{
    const uint8_t *row = d->images + sample_at(perm, i) * d->dim;
    for (size_t off = 0; off < d->dim; off += 64)
        __builtin_prefetch(row + off);
}

void strata__batch_fill(const strata__dataset_t *d, const uint32_t *perm,
                        size_t first, size_t m, float *x, int32_t *y)
{
    const float scale = 1.0f / 255.0f;
    for (size_t i = 0; i < m && i < PREFETCH_ROWS; i++)
        prefetch_row(d, perm, first + i);
    for (size_t i = 0; i < m; i++) {
        if (i + PREFETCH_ROWS < m)
            prefetch_row(d, perm, first + i + PREFETCH_ROWS);
        size_t s = sample_at(perm, first + i);
        kc_u8_to_f32(d->dim, d->images + s * d->dim, scale, x + i * d->dim);
        y[i] = d->labels[s];
    }
}
