/* strata core -- the data layer: IDX files, datasets, epoch order, batches.
 * Internal (strata__*), never installed. Errors are logged once, here, with
 * the file name and what is wrong; callers only pass the code on. */
#ifndef STRATA_CORE_DATA_H
#define STRATA_CORE_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "../internal.h"

#ifndef STRATA_DATA_MAX_BYTES
#define STRATA_DATA_MAX_BYTES ((size_t)1 << 30) /* largest IDX payload: 1 GiB */
#endif
#ifndef STRATA_DATA_MAX_CLASSES
#define STRATA_DATA_MAX_CLASSES 10  /* labels must be < this */
#endif

#define STRATA__IDX_U8 0x08   /* the only element type supported */

/* One IDX file (LeCun's format) held in memory. dims describe what is held:
 * when the read was limited, dims[0] is the number of items kept and
 * file_items the number the file holds. */
typedef struct strata__idx {
    uint8_t  type;        /* STRATA__IDX_U8                              */
    int      ndim;        /* 1..4                                        */
    uint32_t dims[4];
    uint32_t file_items;  /* dims[0] as declared in the file             */
    size_t   count;       /* product of dims: elements (= bytes) in data */
    uint8_t *data;        /* malloc'd, owned                             */
} strata__idx_t;

/* Read an IDX file, gzip-compressed (magic 1f 8b) or raw. The whole file is
 * checked (header, sizes, exact data length, gzip CRC); on failure *out is
 * zeroed, nothing is held, and one line naming the file has been logged.
 * Returns 0, STRATA_ENOENT (missing), STRATA_EIO (unreadable),
 * STRATA_EDATA (malformed, unsupported type, truncated, trailing bytes,
 * corrupt gzip) or STRATA_ENOMEM. Never allocates more than the
 * header-declared payload (<= STRATA_DATA_MAX_BYTES). */
int  strata__idx_read(const char *path, strata__idx_t *out);
/* Same, but keeps only the first `max_items` items along dims[0] (0: all);
 * the rest of the file is still read and checked, through a small buffer,
 * so memory holds only what is kept. */
int  strata__idx_read_first(const char *path, size_t max_items,
                            strata__idx_t *out);
void strata__idx_free(strata__idx_t *idx);   /* zeroes; NULL / empty ok */

/* A labelled image set: images[n * dim] (uint8 pixels), labels[n]. */
typedef struct strata__dataset {
    size_t   n;
    size_t   dim;         /* rows * cols                                  */
    uint32_t rows, cols;  /* (1, dim) for a 2-D images file               */
    int      nclasses;    /* max label + 1 over the whole labels file, >= 2 */
    uint8_t *images;
    uint8_t *labels;
} strata__dataset_t;

/* images: IDX ndim 3 (n, rows, cols) or 2 (n, dim); labels: ndim 1 (n).
 * Counts must match and every label be < STRATA_DATA_MAX_CLASSES (a bad
 * label names its index). `limit` > 0 keeps only the first `limit` samples
 * (the full files are still checked; only the kept part is held). On
 * failure *out is zeroed. */
int  strata__dataset_load(const char *images_path, const char *labels_path,
                          size_t limit, strata__dataset_t *out);
void strata__dataset_free(strata__dataset_t *d);   /* zeroes; NULL ok */

/* perm[0..n) = a permutation of 0..n-1: Fisher-Yates driven by strata__rng
 * seeded with (seed, stream = epoch + 1); shuffle == 0 gives the identity.
 * The same (seed, epoch) gives the same order on every process and machine. */
void strata__epoch_order(uint32_t *perm, size_t n, uint64_t seed,
                         uint64_t epoch, int shuffle);

/* One slice of a batch: samples perm[first .. first + m) (perm NULL: samples
 * first .. first + m). x[m * dim] = pixel * (1/255.0f) (kc_u8_to_f32),
 * y[m] = label. Indices must be < d->n (the caller's contract). */
void strata__batch_fill(const strata__dataset_t *d, const uint32_t *perm,
                        size_t first, size_t m, float *x, int32_t *y);

#endif /* STRATA_CORE_DATA_H */
