/* Datasets from a pair of IDX or .npy files, the epoch's sample order, and batches. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "kernels_cpu.h"

#define WHO "data"

/* One images or labels file, read by its name (*.npy: NumPy, else IDX),
 * seen the same way whichever it was. */
typedef struct arr {
    int      is_npy;
    int      type;        /* STRATA__NPY_* (IDX: STRATA__NPY_U1)           */
    size_t   elem;        /* bytes per element                             */
    int      ndim;
    uint64_t dims[4];     /* dims[0]: items held                           */
    uint64_t file_items;
    size_t   count;       /* elements held                                 */
    void    *data;        /* owned                                         */
} arr_t;

static int arr_read(const char *path, int role, size_t limit, arr_t *a)
{
    memset(a, 0, sizeof *a);
    if (strata__data_is_npy(path) || strata__mem_is(path)) {
        strata__npy_t npy;   /* an in-memory array reads as a .npy file */
        int rc = strata__mem_is(path)
                     ? strata__mem_read_first(path, role, limit, &npy)
                     : strata__npy_read_first(path, role, limit, &npy);
        if (rc)
            return rc;
        *a = (arr_t){ .is_npy = 1, .type = npy.type, .elem = npy.elem,
                      .ndim = npy.ndim, .file_items = npy.file_items,
                      .count = npy.count, .data = npy.data };
        memcpy(a->dims, npy.dims, sizeof a->dims);
        return 0;
    }
    strata__idx_t idx;
    int rc = strata__idx_read_first(path, limit, &idx);
    if (rc)
        return rc;
    *a = (arr_t){ .type = STRATA__NPY_U1, .elem = 1, .ndim = idx.ndim,
                  .file_items = idx.file_items, .count = idx.count,
                  .data = idx.data };
    for (int i = 0; i < idx.ndim; i++)
        a->dims[i] = idx.dims[i];
    return 0;
}

static void arr_free(arr_t *a)
{
    free(a->data);
    memset(a, 0, sizeof *a);
}

/* Every label in [0, STRATA_DATA_MAX_LABEL]; *nclasses = max + 1, at
 * least 2. The labels become int32 class ids (lab->data replaced, elem 4). */
static int check_labels(const char *path, arr_t *lab, int32_t *nclasses)
{
    if (lab->ndim != 1) {   /* IDX; a .npy file was checked by its reader */
        strata__log(STRATA_LOG_ERROR, WHO,
                    "%s: labels file has %d dimensions; expected 1 (n)",
                    path, lab->ndim);
        return STRATA_EDATA;
    }
    int is_signed = lab->type == STRATA__NPY_I1 || lab->type == STRATA__NPY_I2
                    || lab->type == STRATA__NPY_I4 || lab->type == STRATA__NPY_I8;
    const unsigned char *src = lab->data;
    int32_t *dst = malloc((lab->count ? lab->count : 1) * sizeof *dst);
    if (!dst)
        return STRATA_ENOMEM;
    uint64_t max = 0;
    for (size_t i = 0; i < lab->count; i++) {
        uint64_t u = 0;     /* little-endian, as in the file */
        for (size_t b = 0; b < lab->elem; b++)
            u |= (uint64_t)src[i * lab->elem + b] << (8 * b);
        int neg = is_signed && (u >> (8 * lab->elem - 1)) & 1;
        if (neg || u > (uint64_t)STRATA_DATA_MAX_LABEL) {
            char v[32];
            if (neg)
                snprintf(v, sizeof v, "%lld",
                         (long long)(int64_t)(u | (lab->elem < 8
                                                   ? ~(uint64_t)0 << (8 * lab->elem)
                                                   : 0)));
            else
                snprintf(v, sizeof v, "%llu", (unsigned long long)u);
            strata__log(STRATA_LOG_ERROR, WHO,
                        "%s: label %s at index %zu is out of range (labels "
                        "are class ids in [0, %lld])", path, v, i,
                        (long long)STRATA_DATA_MAX_LABEL);
            free(dst);
            return STRATA_EDATA;
        }
        dst[i] = (int32_t)u;
        if (u > max)
            max = u;
    }
    *nclasses = max + 1 < 2 ? 2 : (int32_t)(max + 1);
    free(lab->data);
    lab->data = dst;
    lab->elem = sizeof *dst;
    return 0;
}

/* Label rows of `lab` (float32 or integers, any shape (n, ...)) as float32
 * targets: *dim = floats per sample; each finite, and in [0, 1] for
 * STRATA__LABELS_PROBS (a bad one names its sample index and position). */
static int check_targets(const char *path, arr_t *lab, int as, uint32_t *dim)
{
    uint64_t per = 1;
    for (int i = 1; i < lab->ndim; i++)
        per *= lab->dims[i];
    size_t n = lab->count;
    float *dst = malloc((n ? n : 1) * sizeof *dst);
    if (!dst)
        return STRATA_ENOMEM;
    int is_signed = lab->type == STRATA__NPY_I1 || lab->type == STRATA__NPY_I2
                    || lab->type == STRATA__NPY_I4 || lab->type == STRATA__NPY_I8;
    const unsigned char *src = lab->data;
    for (size_t i = 0; i < n; i++) {
        float v;
        if (lab->type == STRATA__NPY_F4) {
            memcpy(&v, src + i * 4, 4);
        } else {
            uint64_t u = 0;
            for (size_t b = 0; b < lab->elem; b++)
                u |= (uint64_t)src[i * lab->elem + b] << (8 * b);
            if (is_signed && lab->elem < 8 && (u >> (8 * lab->elem - 1)) & 1)
                u |= ~(uint64_t)0 << (8 * lab->elem);
            v = is_signed ? (float)(int64_t)u : (float)u;
        }
        if (!isfinite(v) || (as == STRATA__LABELS_PROBS && !(v >= 0 && v <= 1))) {
            strata__log(STRATA_LOG_ERROR, WHO, "%s: label %g of sample %llu "
                        "(value %llu of its %llu) is out of range (%s)", path,
                        (double)v, (unsigned long long)(i / per),
                        (unsigned long long)(i % per),
                        (unsigned long long)per,
                        as == STRATA__LABELS_PROBS
                            ? "the cross-entropies take labels in [0, 1]"
                            : "labels must be finite");
            free(dst);
            return STRATA_EDATA;
        }
        dst[i] = v;
    }
    if (per > UINT32_MAX / sizeof(float)) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: %llu values per sample; at "
                    "most %u", path, (unsigned long long)per,
                    (unsigned)(UINT32_MAX / sizeof(float)));
        free(dst);
        return STRATA_EDATA;
    }
    free(lab->data);
    lab->data = dst;
    lab->elem = sizeof *dst;
    *dim = (uint32_t)per;
    return 0;
}

/* An images file of any supported rank (an IDX one is checked here; a
 * .npy one was by its reader). */
static int read_images(const char *path, size_t limit, arr_t *img)
{
    int rc = arr_read(path, STRATA__NPY_IMAGES, limit, img);
    if (rc == 0 && (img->ndim < 2 || img->ndim > 4)) {
        strata__log(STRATA_LOG_ERROR, WHO,
                    "%s: images file has %d dimensions; expected 3 (n, rows, "
                    "cols), 4 (n, rows, cols, channels) or 2 (n, dim)",
                    path, img->ndim);
        arr_free(img);
        rc = STRATA_EDATA;
    }
    return rc;
}

/* The images of `img` (their ownership too) into the set's shape fields. */
static void take_images(arr_t *img, strata__dataset_t *out)
{
    out->n = (size_t)img->dims[0];
    out->dim = img->count / out->n;
    out->rows = img->ndim >= 3 ? (uint32_t)img->dims[1] : 1;
    out->cols = img->ndim >= 3 ? (uint32_t)img->dims[2]
                               : (uint32_t)img->dims[1];
    out->channels = img->ndim == 4 ? (uint32_t)img->dims[3]
                                   : img->ndim == 3 ? 1 : 0;
    if (img->type == STRATA__NPY_F4)
        out->images_f32 = img->data;
    else
        out->images = img->data;
    memset(img, 0, sizeof *img);
}

int strata__images_load(const char *path, strata__dataset_t *out)
{
    memset(out, 0, sizeof *out);
    arr_t img;
    int rc = read_images(path, 0, &img);
    if (rc)
        return rc;
    out->file_items = img.file_items;
    take_images(&img, out);
    out->labels = calloc(out->n ? out->n : 1, sizeof *out->labels);
    if (!out->labels) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: out of memory", path);
        strata__dataset_free(out);
        return STRATA_ENOMEM;
    }
    return 0;
}

int strata__dataset_load(const char *images_path, const char *labels_path,
                         size_t limit, strata__dataset_t *out)
{
    return strata__dataset_load_as(images_path, labels_path, limit,
                                   STRATA__LABELS_IDS, out);
}

int strata__dataset_load_as(const char *images_path, const char *labels_path,
                            size_t limit, int as, strata__dataset_t *out)
{
    memset(out, 0, sizeof *out);
    arr_t lab, img;
    int32_t nclasses = 0;
    uint32_t tdim = 0;

    /* Labels are small: read and check them all, so nclasses and bad
     * labels do not depend on the limit. */
    int ids = as == STRATA__LABELS_IDS;
    int rc = arr_read(labels_path, ids ? STRATA__NPY_LABELS
                                       : STRATA__NPY_TARGETS, 0, &lab);
    if (rc)
        return rc;
    rc = ids ? check_labels(labels_path, &lab, &nclasses)
             : check_targets(labels_path, &lab, as, &tdim);
    if (rc) {
        arr_free(&lab);
        return rc;
    }
    rc = read_images(images_path, limit, &img);
    if (rc) {
        arr_free(&lab);
        return rc;
    }
    if (img.file_items != lab.file_items) {
        strata__log(STRATA_LOG_ERROR, WHO,
                    "%s holds %llu images but %s holds %llu labels",
                    images_path, (unsigned long long)img.file_items,
                    labels_path, (unsigned long long)lab.file_items);
        rc = STRATA_EDATA;
    }
    if (rc) {
        arr_free(&img);
        arr_free(&lab);
        return rc;
    }

    out->file_items = img.file_items;
    take_images(&img, out);
    out->nclasses = nclasses;
    out->target_dim = tdim;
    size_t keep = out->n * (ids ? 1 : tdim) * 4;
    void *p = keep < lab.count * 4 ? realloc(lab.data, keep) : NULL;
    void *data = p ? p : lab.data;  /* limited: the kept part */
    if (ids)
        out->labels = data;
    else
        out->targets = data;
    return 0;
}

/* "(28, 28, 1) uint8" for messages. */
static const char *sample_str(const strata__dataset_t *d, char *buf,
                              size_t cap)
{
    if (d->channels)
        snprintf(buf, cap, "(%u, %u, %u) %s", d->rows, d->cols, d->channels,
                 d->images_f32 ? "float32" : "uint8");
    else
        snprintf(buf, cap, "(%zu) %s", d->dim,
                 d->images_f32 ? "float32" : "uint8");
    return buf;
}

int strata__dataset_check_pair(const strata__dataset_t *train,
                               const strata__dataset_t *test)
{
    if (train->dim == test->dim && train->rows == test->rows &&
        train->cols == test->cols && train->channels == test->channels &&
        !train->images_f32 == !test->images_f32)
        return 0;
    char a[64], b[64];
    strata__log(STRATA_LOG_ERROR, WHO,
                "test samples are %s, training samples %s: they must agree "
                "on shape and type", sample_str(test, a, sizeof a),
                sample_str(train, b, sizeof b));
    return STRATA_EDATA;
}

void strata__dataset_free(strata__dataset_t *d)
{
    if (!d)
        return;
    free(d->images);
    free(d->images_f32);
    free(d->labels);
    free(d->targets);
    free(d->ids);
    free(d->ids_file);
    free(d->file_row);
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

static void prefetch_row_f32(const strata__dataset_t *d, const uint32_t *perm,
                             size_t i)
{
    const float *row = d->images_f32 + sample_at(perm, i) * d->dim;
    for (size_t off = 0; off < d->dim; off += 16)
        __builtin_prefetch(row + off);
}

/* float32 images: the values as they are (no scaling). */
size_t strata__label_bytes(const strata__dataset_t *d)
{
    return d->target_dim ? d->target_dim * sizeof(float) : sizeof(int32_t);
}

void strata__label_copy(const strata__dataset_t *d, size_t s, void *y,
                        size_t i)
{
    if (d->target_dim)
        memcpy((float *)y + i * d->target_dim, d->targets + s * d->target_dim,
               d->target_dim * sizeof(float));
    else
        ((int32_t *)y)[i] = d->labels[s];
}

static void batch_fill_f32(const strata__dataset_t *d, const uint32_t *perm,
                           size_t first, size_t m, float *x, void *y)
{
    for (size_t i = 0; i < m && i < PREFETCH_ROWS; i++)
        prefetch_row_f32(d, perm, first + i);
    for (size_t i = 0; i < m; i++) {
        if (i + PREFETCH_ROWS < m)
            prefetch_row_f32(d, perm, first + i + PREFETCH_ROWS);
        size_t s = sample_at(perm, first + i);
        memcpy(x + i * d->dim, d->images_f32 + s * d->dim,
               d->dim * sizeof *x);
        strata__label_copy(d, s, y, i);
    }
}

void strata__batch_fill(const strata__dataset_t *d, const uint32_t *perm,
                        size_t first, size_t m, float *x, void *y)
{
    if (d->images_f32) {
        batch_fill_f32(d, perm, first, m, x, y);
        strata__augment_batch(d, perm, first, m, x, sizeof *x);
        return;
    }
    const float scale = 1.0f / 255.0f;
    for (size_t i = 0; i < m && i < PREFETCH_ROWS; i++)
        prefetch_row(d, perm, first + i);
    for (size_t i = 0; i < m; i++) {
        if (i + PREFETCH_ROWS < m)
            prefetch_row(d, perm, first + i + PREFETCH_ROWS);
        size_t s = sample_at(perm, first + i);
        kc_u8_to_f32(d->dim, d->images + s * d->dim, scale, x + i * d->dim);
        strata__label_copy(d, s, y, i);
    }
    strata__augment_batch(d, perm, first, m, x, sizeof *x);
}
