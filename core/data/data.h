/* strata core -- the data layer: IDX and .npy files, datasets, epoch order, batches.
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
/* Labels are class ids in [0, STRATA_DATA_MAX_LABEL]: as many classes as
 * the data has, the model's last layer sized to them. */
#define STRATA_DATA_MAX_LABEL ((int64_t)INT32_MAX - 1)

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

/* Memory for a file's payload (malloc; transparent huge pages asked for
 * over a large one): what the readers hold their data in. */
void *strata__data_payload_alloc(size_t n);

/* ---- NumPy .npy files (numpy.save) ------------------------------------ */

/* Element types of a .npy file (its 'descr'): '|u1', '|i1', '<i2', '<u2',
 * '<i4', '<u4', '<i8', '<u8', '<f4'. Little-endian only. */
enum {
    STRATA__NPY_U1, STRATA__NPY_I1, STRATA__NPY_I2, STRATA__NPY_U2,
    STRATA__NPY_I4, STRATA__NPY_U4, STRATA__NPY_I8, STRATA__NPY_U8,
    STRATA__NPY_F4
};
/* What a file is read as: the dtypes and shapes allowed. */
enum {
    STRATA__NPY_ANY = 0,    /* any type above, any rank 1..4              */
    STRATA__NPY_IMAGES = 1, /* uint8 / float32; (n, h, w), (n, h, w, c), (n, dim) */
    STRATA__NPY_LABELS = 2, /* integers; (n,)                             */
    STRATA__NPY_TARGETS = 3,/* float32 or integers; (n, ...), rank 1..4  */
    STRATA__NPY_IDS = 4     /* int32 / int64; (n,) or (n, k)              */
};
#define STRATA__NPY_MAX_DIMS 4

/* One .npy array held in memory. As for IDX, dims[0] is the number of
 * items kept when the read was limited, file_items what the file holds. */
typedef struct strata__npy {
    int      type;        /* STRATA__NPY_*                                */
    size_t   elem;        /* bytes per element                            */
    int      ndim;        /* 1..STRATA__NPY_MAX_DIMS                      */
    uint64_t dims[STRATA__NPY_MAX_DIMS];
    uint64_t file_items;  /* dims[0] as declared in the file              */
    size_t   count;       /* elements held (product of dims)              */
    void    *data;        /* malloc'd, owned, little-endian as in the file */
} strata__npy_t;

/* Read a .npy file (version 1.0, 2.0 or 3.0; a regular file), strictly:
 * magic, version, header length within the file, a header dict of exactly
 * 'descr', 'fortran_order' (False only) and 'shape', the dtype and rank
 * allowed for `role`, no zero dimension, and the file size exactly the
 * header's end plus the shape's bytes (<= STRATA_DATA_MAX_BYTES). All that
 * is checked before anything larger than the header is allocated; float32
 * values must be finite. Keeps the first `max_items` items (0: all). On
 * failure *out is zeroed and one line naming the file has been logged.
 * Returns 0, STRATA_ENOENT, STRATA_EIO, STRATA_EDATA or STRATA_ENOMEM. */
int  strata__npy_read_first(const char *path, int role, size_t max_items,
                            strata__npy_t *out);
int  strata__npy_read(const char *path, int role, strata__npy_t *out);
void strata__npy_free(strata__npy_t *a);      /* zeroes; NULL / empty ok */
const char *strata__npy_type_name(int type);  /* "uint8", "float32", ... */
/* The bytes of a .npy file of a float32 (rows, cols) array, as numpy.save
 * writes them (npy_write.c): *buf (malloc'd, *len bytes) holds the header,
 * and *data (inside *buf, 64-byte aligned from its start) the rows * cols
 * floats for the caller to fill. STRATA_EINVAL when the size overflows,
 * STRATA_ENOMEM; nothing logged. */
int  strata__npy_f32_alloc(uint64_t rows, uint64_t cols, void **buf,
                           size_t *len, float **data);
/* 1 when `path` names a .npy file (by its extension), else 0 (IDX). */
int  strata__data_is_npy(const char *path);
/* The checks a .npy file's header gets for `role` (dtype, rank, no zero
 * dimension, at most 2^32 - 1 items), and its float32 values (finite): 0,
 * or STRATA_EDATA after one line naming `path`. */
int  strata__npy_check_role(const char *path, int role, const strata__npy_t *a);
int  strata__npy_check_finite(const char *path, const strata__npy_t *a);

/* ---- memory.c: arrays in memory (strata_ctx_set_array) ----------------- */

/* A data path "mem:NAME" names the array NAME registered on the context
 * the calling thread works for (strata__log_bind), in place of a file. */
#define STRATA__MEM_PREFIX "mem:"
int  strata__mem_is(const char *path);
/* As strata__npy_read_first reads a .npy file of the array's dtype and
 * shape: the same checks and messages, the first `max_items` items copied
 * into memory *out owns. STRATA_ENOENT (logged) for an unknown name. */
int  strata__mem_read_first(const char *path, int role, size_t max_items,
                            strata__npy_t *out);
/* Forget every array of ctx (strata_ctx_destroy); the data stay the
 * caller's. */
void strata__mem_clear(strata_ctx_t *ctx);

struct strata__augment;

/* A labelled image set: n samples of dim values, either uint8 pixels
 * (images; scaled by 1/255 per batch) or float32 values (images_f32, from
 * a float32 .npy; used as they are), and labels[n], class ids. */
typedef struct strata__dataset {
    size_t   n;
    size_t   dim;         /* rows * cols * channels                       */
    uint32_t rows, cols;  /* (1, dim) for a flat (n, dim) file            */
    uint32_t channels;    /* C of (n, rows, cols, C); 1 for (n, rows, cols);
                             0 for flat (n, dim)                          */
    int32_t  nclasses;    /* max label + 1 over the whole labels file, >= 2 */
    uint8_t *images;      /* uint8 pixels; NULL when images_f32 is set    */
    float   *images_f32;  /* float32 values; NULL for uint8 data          */
    int32_t *labels;      /* class ids; NULL when targets is set           */
    float   *targets;     /* float32 label rows of target_dim (the dense   */
    uint32_t target_dim;  /* losses); target_dim 0: class ids              */
    /* the training set's augmentation (augment.c), not owned; NULL none */
    const struct strata__augment *augment;
    uint64_t file_items;  /* samples its images file holds (>= n)          */
    /* Id features (ids.c; [data] train_ids ...): ids[n x ids_k], each a
     * row of an embedding's table or -1 (padding); NULL, 0 when none. */
    int32_t  *ids;
    uint32_t  ids_k;
    char     *ids_file;   /* their file, for messages (owned)              */
    uint32_t *file_row;   /* a split's part: row i is sample file_row[i] of
                             the files (owned); NULL: row i is sample i    */
} strata__dataset_t;

/* Each file is read by its name: *.npy as NumPy (images '|u1' or '<f4' of
 * shape (n, h, w), (n, h, w, c) or (n, dim); labels of any integer dtype,
 * shape (n,)), anything else as IDX (images ndim 3 (n, rows, cols), 4
 * (n, rows, cols, c) or 2 (n, dim); labels ndim 1). IDX and .npy may be
 * mixed. Counts must match and every label be in [0,
 * STRATA_DATA_MAX_LABEL] (a bad label names its index; any number of
 * classes). `limit` > 0
 * keeps only the first `limit` samples (the full files are still checked;
 * only the kept part is held). On failure *out is zeroed. */
int  strata__dataset_load(const char *images_path, const char *labels_path,
                          size_t limit, strata__dataset_t *out);
/* The width of the model's labels over the loaded sets (n > 0): the
 * largest class count for class ids; the values per sample of targets,
 * which must agree (else one line naming the sets, and -1). */
int  strata__sets_label_width(const strata__dataset_t *train,
                              const strata__dataset_t *val,
                              const strata__dataset_t *test);
/* How a labels file is read: class ids (the sparse loss), or float32 rows
 * of any shape (n, ...) into targets (any finite values; PROBS: each in
 * [0, 1], the labels of the cross-entropies); integer files are converted,
 * float64 is refused. */
enum { STRATA__LABELS_IDS = 0, STRATA__LABELS_VALUES = 1,
       STRATA__LABELS_PROBS = 2 };
int  strata__dataset_load_as(const char *images_path,
                             const char *labels_path, size_t limit, int as,
                             strata__dataset_t *out);
/* Images without labels (strata predict): `path` read as
 * strata__dataset_load reads images, whole; labels[n] are 0 and nclasses
 * 0. On failure *out is zeroed and one line naming the file logged. */
int  strata__images_load(const char *path, strata__dataset_t *out);

/* ---- ids.c: id features ----------------------------------------------- */

/* Read `path` (.npy or "mem:NAME": int32 or int64, (n,) or (n, k)) as the
 * id features of `d`, already loaded: its rows must be as many as d's
 * images file holds (d->file_items); the first d->n are kept. Every id
 * must be >= -1 (-1: padding). On failure d is unchanged and one line
 * names the file (and the sample and column of a bad id). */
int  strata__ids_load(const char *path, strata__dataset_t *d);
/* Every id of d below `vocab` (-1 allowed): 0, or STRATA_EDATA after one
 * line naming d's ids file, the sample (its index in the file) and the
 * column, and the table's size. */
int  strata__ids_check(const strata__dataset_t *d, int64_t vocab);
/* The ids of samples perm[first .. first + m) (perm NULL: first ..) into
 * ids[m x d->ids_k], as strata__batch_fill fills x. */
void strata__ids_fill(const strata__dataset_t *d, const uint32_t *perm,
                      size_t first, size_t m, int32_t *ids);
/* The distinct ids of the samples of `nslices` runs of the order perm
 * (run s: perm[first[s] .. first[s] + m[s]); perm NULL: first[s] ..), every
 * column, -1 left out, ascending in out (room for the runs' samples x
 * d->ids_k): what the embedding tables of those samples read. *n their
 * count. */
void strata__ids_rows(const strata__dataset_t *d, const uint32_t *perm,
                      const size_t *first, const size_t *m, int nslices,
                      int64_t *out, size_t *n);

/* Training and test sets must agree on one sample's shape (rows, cols,
 * channels) and on its type (uint8 or float32): 0, or STRATA_EDATA after
 * one line naming both. */
int  strata__dataset_check_pair(const strata__dataset_t *train,
                                const strata__dataset_t *test);
void strata__dataset_free(strata__dataset_t *d);   /* zeroes; NULL ok */
/* Hold out round(n x fraction) samples of `train` as *val, chosen by a
 * seeded permutation apart from every epoch's (split.c): the same samples
 * on every task and in every run with the same seed and data; both parts
 * keep the files' order. STRATA_ECONFIG (one line) when either part would
 * be empty; STRATA_ENOMEM. On failure train is unchanged and *val empty. */
int  strata__dataset_split(strata__dataset_t *train, double fraction,
                           uint64_t seed, strata__dataset_t *val);

/* The sets [data] names (sets.c). The validation set is [data]
 * validation_images/labels, or the samples [data] validation_split holds
 * out of the training set ([train] seed chooses them), or none (n == 0).
 * `want`: which to hold (a split reads the training set even when only
 * the validation set is wanted). Every set held has the same sample shape
 * and type. On failure nothing is held and the detail is logged. */
enum { STRATA__SET_TRAIN = 1, STRATA__SET_VAL = 2, STRATA__SET_TEST = 4 };
typedef struct strata__datasets {
    strata__dataset_t train, val, test;
} strata__datasets_t;
int  strata__datasets_load(const strata__data_cfg_t *d, uint64_t seed,
                           unsigned want, strata__datasets_t *out);
void strata__datasets_free(strata__datasets_t *s);
/* Does [data] name a validation set (a split or files)? */
int  strata__datasets_has_val(const strata__data_cfg_t *d);

/* perm[0..n) = a permutation of 0..n-1: Fisher-Yates driven by strata__rng
 * seeded with (seed, stream = epoch + 1); shuffle == 0 gives the identity.
 * The same (seed, epoch) gives the same order on every process and machine. */
void strata__epoch_order(uint32_t *perm, size_t n, uint64_t seed,
                         uint64_t epoch, int shuffle);

/* One slice of a batch: samples perm[first .. first + m) (perm NULL: samples
 * first .. first + m). x[m * dim] = pixel * (1/255.0f) (kc_u8_to_f32)
 * for uint8 images, the values themselves for float32, augmented when the
 * set has an augmentation; y[m] = label (class id, or a target row).
 * Indices must be < d->n (the
 * caller's contract). */
void strata__batch_fill(const strata__dataset_t *d, const uint32_t *perm,
                        size_t first, size_t m, float *x, void *y);
/* Bytes of one sample's label in a batch: an int32 id, or target_dim
 * floats. */
size_t strata__label_bytes(const strata__dataset_t *d);
/* y[i] = the label of sample s, as strata__batch_fill writes it. */
void strata__label_copy(const strata__dataset_t *d, size_t s, void *y,
                        size_t i);

/* ---- augment.c: random flips and crops of the training images ---------- */

/* [data] augment_flip and augment_crop_padding, for one run: every draw a
 * pure function of (seed, epoch, the sample's index in the set), so that
 * replicas and workers that fill the same sample draw the same, however a
 * batch is split, and a resumed run draws what the uninterrupted one did. */
typedef struct strata__augment {
    int        flip;   /* horizontal flip with probability 0.5             */
    uint32_t   pad;    /* zero pixels on every side, then a random crop of
                          the image's size; 0 none                         */
    uint64_t   seed;   /* [train] seed                                     */
    const int *epoch;  /* the epoch whose order the batches read (the run's
                          cursor: strata__cursor_t.ordered)                */
} strata__augment_t;

/* One sample's draw: flip, then the crop's offset into the padded image
 * (dy, dx in [-pad, pad]: output pixel (y, x) is input (y + dy, x + dx),
 * zero outside; then the row is mirrored when flip). */
typedef struct strata__augment_draw {
    int flip, dy, dx;
} strata__augment_draw_t;
void strata__augment_draw(const strata__augment_t *a, uint64_t epoch,
                          size_t sample, strata__augment_draw_t *out);
/* One image (rows, cols, channels) of `elem`-byte values, in place. */
void strata__augment_image(void *img, uint32_t rows, uint32_t cols,
                           uint32_t channels, size_t elem,
                           const strata__augment_draw_t *dr);
/* Rows i < m of x (dim values of `elem` bytes each: float32 after
 * batch_fill, or the file's uint8 / float32 as a device stages them) hold
 * samples perm[first + i]: each augmented by its draw. Nothing without
 * d->augment. Pixels move, none changes value, so augmenting before or
 * after the uint8 -> float scaling gives the same bits. */
void strata__augment_batch(const strata__dataset_t *d, const uint32_t *perm,
                           size_t first, size_t m, void *x, size_t elem);

/* The run's augmentation from [data] (augment_cfg.c): inactive (both keys
 * off) or checked against the training set: images (not flat samples),
 * padding below their height and width. One error line naming file:line
 * and the key; STRATA_ECONFIG. */
int strata__augment_init(strata__augment_t *a, const strata__cfg_t *c,
                         const strata__data_cfg_t *dc, uint64_t seed,
                         const int *epoch, const strata__dataset_t *train);
/* Any augmentation to apply? */
static inline int strata__augment_on(const strata__augment_t *a)
{
    return a->flip || a->pad > 0;
}

#endif /* STRATA_CORE_DATA_H */
