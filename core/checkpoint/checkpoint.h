/* strata core -- checkpoint files (internal; never installed).
 *
 * A checkpoint is one safetensors file
 * (https://github.com/huggingface/safetensors):
 *
 *   u64 N (little-endian) | N bytes of UTF-8 JSON header | data section
 *
 * The header maps each tensor name to {"dtype", "shape", "data_offsets":
 * [begin, end]} (offsets relative to the data section; the tensors cover it
 * exactly, without gaps or overlaps) plus an optional "__metadata__" object
 * of string -> string. strata writes the header padded with spaces so that
 * the data section starts 8-byte aligned, and always puts three metadata
 * keys:
 *   "strata.format" = "1"
 *   "strata.crc32c" = CRC-32C of the whole data section, 8 lowercase hex digits
 *   "strata.header_crc32c" = CRC-32C of what the header says, in a canonical
 *       order: every other metadata key and value by key, then every tensor
 *       by name with its dtype, data offsets and shape
 * next to whatever the caller passes (epoch, step, rng state, ...). Files
 * written by other safetensors writers (no strata.* keys) read fine; a
 * present checksum is always checked (strata__ckpt_read_weights: a
 * mismatch is a warning there).
 *
 * Files in a checkpoint directory: DIR/ckpt-<step, 10 digits>.safetensors,
 * and, only while one is being written, DIR/ckpt-<step>.safetensors.tmp.<pid>
 * (.tmp.<pid>.<n> when that name is taken: see createfile.h).
 *
 * Every function returns 0 or a negative STRATA_E* code and logs the detail
 * once (who: "ckpt"). */
#ifndef STRATA_CORE_CHECKPOINT_H
#define STRATA_CORE_CHECKPOINT_H

#include <stdint.h>
#include <stdio.h>

#include "internal.h"

/* safetensors' own cap on the header (serde reader: 100,000,000 bytes). */
#define STRATA_CKPT_MAX_HEADER 100000000u
#define STRATA_CKPT_MAX_NDIM   4

typedef struct strata__tensor {
    const char *name;
    const char *dtype;   /* "F32", "F64", "I64", "U8", "U32", ... (see below) */
    int         ndim;    /* 0 (a scalar) .. STRATA_CKPT_MAX_NDIM */
    int64_t     shape[STRATA_CKPT_MAX_NDIM];
    const void *data;    /* little-endian element bytes */
    size_t      nbytes;  /* == prod(shape) * dtype size */
} strata__tensor_t;

typedef struct strata__meta {
    const char *key;
    const char *value;
} strata__meta_t;

/* dtypes known to read and write: BOOL U8 I8 F8_E4M3 F8_E5M2 (1 byte),
 * U16 I16 F16 BF16 (2), U32 I32 F32 (4), U64 I64 F64 (8). Returns the
 * element size, or 0 for an unknown name (NULL included). */
size_t strata__ckpt_dtype_size(const char *dtype);

/* Write atomically: the file is written as `path`.tmp.<pid> in the same dir,
 * created new (strata__create_temp: a name already taken, by a link, a FIFO
 * or anything else, is skipped for `path`.tmp.<pid>.<n>, never followed),
 * fsynced, renamed over `path` (whatever is at `path`, a link included, is
 * replaced, not followed), and the dir is fsynced; on any failure the temp
 * file is removed and `path` is untouched (the old file, if any, stays).
 * Tensors are written in the given order; names must be unique, valid UTF-8
 * and not "__metadata__"; each tensor's nbytes must equal prod(shape) * size.
 * Metadata keys must be unique and none of the writer's own three; keys and values must be valid UTF-8.
 * Bad arguments: STRATA_EINVAL; missing dir: STRATA_ENOENT; I/O: STRATA_EIO.
 * For zero-copy readers of other frameworks, put tensors with larger
 * elements first (each tensor is then aligned to its element size).
 *
 * TEST ONLY: the environment variable STRATA_TEST_CKPT_CRASH makes the
 * process _exit(99) in the middle of a write, to test crash safety:
 *   "mid_write"     after half of the file's bytes are written to the temp file
 *   "before_rename" after the temp file is complete and fsynced, before rename
 * Never set it outside tests. */
int strata__ckpt_write(const char *path, const strata__tensor_t *t, int nt,
                       const strata__meta_t *m, int nm);

/* A loaded checkpoint (opaque). Every pointer it hands out (tensors, names,
 * data, metadata) stays valid until strata__ckpt_free. Each tensor's data is
 * aligned to at least 16 bytes. */
typedef struct strata__ckpt strata__ckpt_t;

/* Read and validate the whole file before trusting any of it: header length
 * (<= 100 MB and within the file), UTF-8, JSON object, every tensor's dtype,
 * shape (rank <= 4, non-negative, no overflow), data_offsets (in range,
 * end - begin == prod(shape) * size, the tensors tile the data section with
 * no gap or overlap), unique names, metadata strings, strata.format "1" if
 * present, strata.crc32c and strata.header_crc32c if present (they must be
 * when strata.format is). Memory is allocated only after these
 * checks, and never more than the file's size plus small overhead.
 * Missing file: STRATA_ENOENT; read error: STRATA_EIO; anything invalid:
 * STRATA_EDATA, with one error line naming the file and the problem.
 * On failure *out == NULL. */
int  strata__ckpt_read(const char *path, strata__ckpt_t **out);
void strata__ckpt_free(strata__ckpt_t *c);                 /* NULL: no-op */

/* Tensors in header order (for strata's files, the order they were written). */
int strata__ckpt_ntensors(const strata__ckpt_t *c);
const strata__tensor_t *strata__ckpt_tensor(const strata__ckpt_t *c, int i);
const strata__tensor_t *strata__ckpt_find(const strata__ckpt_t *c,
                                          const char *name);  /* NULL: absent */
/* Metadata value of `key`, NULL if absent. */
const char *strata__ckpt_meta(const strata__ckpt_t *c, const char *key);
int strata__ckpt_nmeta(const strata__ckpt_t *c);
const strata__meta_t *strata__ckpt_meta_at(const strata__ckpt_t *c, int i);
/* Sizes as found in the file (for inspect). */
uint64_t strata__ckpt_header_len(const strata__ckpt_t *c);
uint64_t strata__ckpt_data_len(const strata__ckpt_t *c);
/* strata__ckpt_read without the log line: the reason ("crc mismatch: ...")
 * goes to why (for _latest, which warns instead). */
int strata__ckpt_load_quiet(const char *path, strata__ckpt_t **out, char *why,
                            size_t len);

/* A weights file ([model] init_from): any safetensors file, read for its
 * tensors -- a strata checkpoint, or a weights-only file of another writer
 * (Python's `safetensors` package). The same reader and every structural
 * check of strata__ckpt_read (header length within the file, UTF-8 JSON,
 * dtypes, shapes, offsets tiling the data section, unique names, metadata
 * strings; no allocation past the file's size before them). Only strata's
 * own metadata is not binding here: strata.format and the two checksums
 * are checked when present, and when they do not hold (a checkpoint
 * written back from Python with its metadata copied, or a damaged one) ONE
 * warning says so and the tensors are used. Resume keeps the strict
 * strata__ckpt_read. Log lines are "who: what: reason" (NULL who: "ckpt";
 * NULL what: the path). Codes as strata__ckpt_read. */
int strata__ckpt_read_weights(const char *path, const char *who,
                              const char *what, strata__ckpt_t **out);

/* Copy tensor `name` of `c` into dst (a variable of shape[0..ndim), F32).
 * ONE error line "who: what: ..." and: STRATA_ENOENT "tensor 'NAME'
 * missing"; STRATA_EDATA "tensor 'NAME' is F64; the model's variables are
 * F32" or "tensor 'NAME' has shape (3, 3, 1, 32) in the file, (3, 3, 1,
 * 16) in the model". */
int strata__ckpt_take_f32(const strata__ckpt_t *c, const char *who,
                          const char *what, const char *name,
                          const int64_t *shape, int ndim, float *dst);

/* ---- checkpoint directories (checkpoint_dir.c) ------------------------- */

/* buf = "DIR/ckpt-<step, %010>.safetensors". step < 0 or buf too short:
 * STRATA_EINVAL. */
int strata__ckpt_path(const char *dir, int64_t step, char *buf, size_t len);

/* Delete every checkpoint of `dir` but the `keep` newest (by the step in the
 * name); keep == 0 keeps them all (TensorFlow's max_to_keep=None), keep < 0
 * is STRATA_EINVAL. Also removes stale temp files (*.safetensors.tmp.<pid>
 * and .tmp.<pid>.<n>)
 * left by a writer that no longer runs: another pid, and no live process
 * has that pid. Missing dir: STRATA_ENOENT. */
int strata__ckpt_rotate(const char *dir, int keep);

/* The newest checkpoint of `dir` that reads and validates. A newer one that
 * does not is skipped with ONE warning naming it and why, and the previous
 * one is tried. Temp files never count. STRATA_ENOENT (no log) when there
 * is no checkpoint (or no dir); STRATA_EDATA when there are some and every
 * one was refused (each named in its warning). On success *out holds the loaded
 * checkpoint and path_out (if not NULL) its path; path_out too short for
 * the path: STRATA_EINVAL. */
int strata__ckpt_latest(const char *dir, strata__ckpt_t **out, char *path_out,
                        size_t len);

/* The step in the name of dir's newest checkpoint file, without reading it
 * (a cheap look for a watcher). STRATA_ENOENT (no log) when there is none. */
int strata__ckpt_newest_step(const char *dir, int64_t *step);

/* `strata inspect PATH`: read (fully validated) and print the tensors (name,
 * dtype, shape, bytes, and min/max/mean of float tensors) and the metadata
 * to `f`. Returns what strata__ckpt_read returns. */
int strata__ckpt_inspect(const char *path, FILE *f);

/* ---- checkpoints in parts (parts.c; plugin ABI 2.13) -------------------- */
/* A strategy whose tasks each hold part of the model may have each write
 * its part beside the checkpoint (host part_write):
 *   DIR/ckpt-<step, %010>.part-<index>-of-<count>.safetensors
 * holding tensors "NAME[ROW0:ROW1]" (rows along dimension 0; a slot's
 * "optimizer/SLOT/NAME[ROW0:ROW1]") and the metadata strata.step,
 * strata.part_tag (16 lowercase hex digits, drawn for that checkpoint),
 * strata.part_index and strata.part_count. The main file, written last,
 * holds no variable or slot and says strata.part_count and
 * strata.part_tag. Every reader (strata__ckpt_read, _load_quiet,
 * _read_weights, _latest) joins the parts into whole tensors: a
 * checkpoint reads the same whatever placement wrote it. */
#define STRATA_CKPT_MAX_PARTS 4096

/* buf = "DIR/ckpt-<step, %010>.part-<index>-of-<count>.safetensors". */
int strata__ckpt_part_path(const char *dir, int64_t step, int index,
                           int count, char *buf, size_t len);

/* Write part->index of part->count (host part_write): vars/nvars the
 * model's variables, slot[0..nslots) its optimizer's slot names. Checks
 * every piece (variable, slot, rows within the variable, no two pieces
 * of a tensor overlapping) before writing: STRATA_EINVAL, one line.
 * part->bytes receives the file's size. */
int strata__ckpt_part_write(const char *dir, const strata_var_t *vars,
                            int nvars, const char *const *slot, int nslots,
                            strata_part_t *part);

/* After a STATE_GET in parts: is every part of the checkpoint of `step`
 * there with its tag, index and count? Headers only (the data's CRC is
 * checked when read). STRATA_OK, or the first problem in why. */
int strata__ckpt_parts_check(const char *dir, int64_t step, uint64_t tag,
                             int count, char *why, size_t len);

/* Join the parts of the loaded main file `c` (read from `path`) into
 * whole tensors of c. The reason of a refusal goes to why. */
int strata__ckpt_join(const char *path, strata__ckpt_t *c, char *why,
                      size_t len);

/* Internal to parts.c and checkpoint.c: a file's header only (tensors
 * without data; every structural check of strata__ckpt_read but the
 * data's CRC), and the joined tensors handed to c (it owns names and
 * data from then on, also on failure). */
int strata__ckpt_header(const char *path, strata__ckpt_t **out, char *why,
                        size_t len);
/* A part file, read whole and checked, never joined (a part names no
 * parts of its own). */
int strata__ckpt_load_part(const char *path, strata__ckpt_t **out,
                           char *why, size_t len);
int strata__ckpt_adopt(strata__ckpt_t *c, const strata__tensor_t *t, int n,
                       char *names, unsigned char *data);

/* ---- crc32c.c ----------------------------------------------------------- */

/* CRC-32C (Castagnoli). Start with crc = 0; continue a running checksum by
 * passing the previous result: crc32c(crc32c(0, a, na), b, nb) equals the
 * CRC of a followed by b. "123456789" -> 0xE3069283. Uses SSE4.2 when the
 * CPU has it. */
uint32_t strata__crc32c(uint32_t crc, const void *data, size_t n);
/* The portable software path (slicing-by-8), exposed for tests. */
uint32_t strata__crc32c_sw(uint32_t crc, const void *data, size_t n);

#endif /* STRATA_CORE_CHECKPOINT_H */
