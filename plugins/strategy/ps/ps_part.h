/* ps.so -- where variables live: the partitioners and round-robin
 * placement over the ps tasks, with TensorFlow's semantics
 * (tf.distribute.experimental.partitioners and
 * ParameterServerStrategy's placement):
 *
 *   strategy.partitioner      shards along the first dimension
 *   (empty)                   1: whole variables
 *   fixed:N                   min(N, dim0)                   (FixedShardsPartitioner)
 *   min_size:BYTES[:MAX]      max(1, min(dim0, MAX, ceil(bytes / BYTES)))
 *                             MAX defaults to 1, as in TF    (MinSizePartitioner)
 *   max_size:BYTES[:MAX]      ceil(dim0 / max(1, floor(BYTES / row_bytes))),
 *                             then at most MAX               (MaxSizePartitioner)
 *
 * BYTES takes a K, M or G suffix (x1024). A variable of rank 0 is never
 * split. Shards are contiguous blocks of rows; the first dim0 % n shards
 * get one row more (13 rows over 5 shards: 3, 3, 3, 2, 2). Every shard
 * (a whole variable is one shard) goes to the next ps task in turn: a
 * running counter over the job's shards in model order, modulo the
 * number of ps tasks. Every task computes the same placement from the
 * same variables. */
#ifndef PS_PART_H
#define PS_PART_H

#include <stddef.h>
#include <stdint.h>

enum { PS_PART_NONE = 0, PS_PART_FIXED, PS_PART_MIN_SIZE, PS_PART_MAX_SIZE };

typedef struct ps_part {
    int     kind;
    int64_t shards;      /* FIXED                                        */
    int64_t bytes;       /* MIN_SIZE: min shard bytes; MAX_SIZE: max      */
    int64_t max_shards;  /* MIN_SIZE (default 1), MAX_SIZE (0: no limit)  */
} ps_part_t;

/* Parse a strategy.partitioner value (NULL or "" = none). Returns 0, or -1
 * with the reason written to why[cap]. */
int ps_part_parse(const char *spec, ps_part_t *out, char *why, size_t cap);

/* Shards along dim 0 of a variable of `shape` (ndim dims, elem_bytes per
 * element): >= 1. */
int64_t ps_part_count(const ps_part_t *p, const int64_t *shape, int ndim,
                      size_t elem_bytes);

/* Rows [*row0, *row0 + *rows) of shard k of n over dim0 rows. */
void ps_part_rows(int64_t dim0, int64_t n, int64_t k, int64_t *row0,
                  int64_t *rows);

typedef struct ps_shard {
    int32_t var;         /* variable index (model order)                  */
    int32_t ps;          /* owner: ps task index                          */
    int64_t row0, rows;  /* along dim 0                                   */
    size_t  offset;      /* first element in the flat layout              */
    size_t  count;       /* elements                                      */
} ps_shard_t;

typedef struct ps_place {
    int         nps;
    ps_shard_t *shard;   /* in placement order                            */
    int         n, cap;
    size_t     *ps_count;/* nps entries: elements each ps owns            */
    int64_t     next;    /* the round-robin counter                       */
} ps_place_t;

/* nps >= 1. 0 or -1 (out of memory). */
int  ps_place_init(ps_place_t *pl, int nps);
void ps_place_free(ps_place_t *pl);
/* Split variable `var` (flat [offset, offset + count)) and append its
 * shards. 0, or -1 when out of memory or count disagrees with shape. */
int  ps_place_var(ps_place_t *pl, const ps_part_t *p, int32_t var,
                  const int64_t *shape, int ndim, size_t offset, size_t count);

#endif /* PS_PART_H */
