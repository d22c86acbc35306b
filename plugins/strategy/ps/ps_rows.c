/* ps.so -- the payload of a PUSH whose embedding tables go as rows (wire
 * version 6, ps_wire.h): the worker packs it (ps_rows_pack), the ps
 * checks every field of it before it applies anything (ps_rows_check) and
 * then walks it (ps_rows_next).
 *
 * A PUSH with b = B > 0 row blocks carries, in 4-byte words:
 *
 *   B times, shards in placement order:
 *     u32 shard   the shard's index in the placement (ps_part.h)
 *     u32 nrows   rows given (0 .. the shard's rows)
 *     i64 x nrows table row ids (2 words each), ascending, distinct, in
 *                 the shard's [row0, row0 + rows)
 *     f32 x nrows x row_len  their gradient rows, finite
 *   then the ps's shards no block names, placement order, as a dense PUSH
 *   carries them
 *
 * The blocks come first: what is left of the payload is then the dense
 * part, whose size the blocks' shards decide. A PULL that asks for rows
 * (wire v7, ps_pull.c) carries the same blocks without their values. */
#include <math.h>
#include <string.h>

#include "ps.h"

size_t ps_shard_row_len(const ps_shard_t *sh)
{
    return sh->rows > 0 ? sh->count / (size_t)sh->rows : 0;
}

size_t ps_rows_head(const ps_t *p, int i, const strata_sparse_t *t,
                    unsigned char *o, size_t *lo, uint32_t *n)
{
    const ps_shard_t *sh = &p->place.shard[i];
    /* the table's rows that fall in this shard: a run of the sorted ids */
    size_t a = 0, b;
    while (a < t->nrows && t->rows[a] < sh->row0)
        a++;
    for (b = a; b < t->nrows && t->rows[b] < sh->row0 + sh->rows; b++)
        ;
    uint32_t idx = (uint32_t)i;
    *lo = a;
    *n = (uint32_t)(b - a);
    memcpy(o, &idx, 4);
    memcpy(o + 4, n, 4);
    memcpy(o + 8, t->rows + a, *n * sizeof(int64_t));
    return 8 + *n * sizeof(int64_t);
}

/* The table of op->sparse that variable `var` is, or NULL. */
static const strata_sparse_t *table_of(const strata_op_t *op, int32_t var)
{
    for (size_t i = 0; i < op->nsparse; i++)
        if ((int32_t)op->sparse[i].var == var)
            return &op->sparse[i];
    return NULL;
}

size_t ps_rows_room(const ps_t *p, int ps)
{
    size_t words = 0;
    for (int i = 0; i < p->place.n; i++) {
        const ps_shard_t *sh = &p->place.shard[i];
        if (ps < 0 || sh->ps == ps)
            words += 2 + 2 * (size_t)sh->rows;
    }
    return words;
}

int ps_rows_pack(ps_t *p, int ps, const strata_op_t *op, float *out,
                 uint32_t *count, int64_t *nblocks)
{
    unsigned char *o = (unsigned char *)out;
    size_t at = 0; /* bytes */
    *nblocks = 0;
    for (int i = 0; i < p->place.n; i++) {
        const ps_shard_t *sh = &p->place.shard[i];
        const strata_sparse_t *t = sh->ps == ps ? table_of(op, sh->var) : NULL;
        if (!t)
            continue;
        if (t->row_len != ps_shard_row_len(sh))
            return STRATA_EINVAL;
        size_t lo;
        uint32_t n;
        at += ps_rows_head(p, i, t, o + at, &lo, &n);
        memcpy(o + at, t->values + lo * t->row_len,
               n * t->row_len * sizeof(float));
        at += n * t->row_len * sizeof(float);
        (*nblocks)++;
    }
    /* then the shards no block named */
    for (int i = 0; i < p->place.n; i++) {
        const ps_shard_t *sh = &p->place.shard[i];
        if (sh->ps != ps || table_of(op, sh->var))
            continue;
        int rc = p->host->copy(p->hc, p->cpu, o + at, op->device,
                               (const float *)op->buf + sh->offset,
                               sh->count * sizeof(float));
        if (rc != STRATA_OK)
            return rc;
        at += sh->count * sizeof(float);
    }
    *count = (uint32_t)(at / 4);
    return STRATA_OK;
}

const char *ps_rows_walk(const ps_t *p, int j, const unsigned char *pl,
                         size_t len, size_t *at, int *prev, ps_rows_t *r,
                         int values)
{
    uint32_t idx, n;
    if (len - *at < 8)
        return "a row block runs past the payload";
    memcpy(&idx, pl + *at, 4);
    memcpy(&n, pl + *at + 4, 4);
    if (idx >= (uint32_t)p->place.n || p->place.shard[idx].ps != j)
        return "a row block names a shard this ps does not hold";
    if ((int)idx <= *prev)
        return "row blocks not in placement order (or one shard twice)";
    *prev = (int)idx;
    const ps_shard_t *sh = &p->place.shard[idx];
    size_t rl = ps_shard_row_len(sh);
    if (rl == 0)
        return "a row block for a variable without rows";
    if ((int64_t)n > sh->rows)
        return "more rows than the shard has";
    size_t need = (size_t)n * (sizeof(int64_t)
                               + (values ? rl * sizeof(float) : 0));
    if (len - *at - 8 < need)
        return "row count disagrees with the payload";
    r->shard = (int)idx;
    r->nrows = n;
    r->row_len = rl;
    r->ids = pl + *at + 8;
    r->values = values ? pl + *at + 8 + (size_t)n * sizeof(int64_t) : NULL;
    *at += 8 + need;
    return NULL;
}

const char *ps_rows_ids_check(const ps_t *p, const ps_rows_t *r)
{
    const ps_shard_t *sh = &p->place.shard[r->shard];
    int64_t last = -1;
    for (uint32_t i = 0; i < r->nrows; i++) {
        int64_t id;
        memcpy(&id, r->ids + 8 * (size_t)i, 8);
        if (id < sh->row0 || id >= sh->row0 + sh->rows)
            return "a row id outside the shard";
        if (id <= last)
            return "row ids not ascending and distinct";
        last = id;
    }
    return NULL;
}

const char *ps_rows_blocks(const ps_t *p, int j, const unsigned char *payload,
                           size_t len, int64_t nblocks, int values,
                           size_t *at, size_t *named)
{
    int holds = 0, prev = -1;
    *at = *named = 0;
    for (int i = 0; i < p->place.n; i++)
        holds += p->place.shard[i].ps == j;
    if (nblocks < 0 || nblocks > holds)
        return "more row blocks than this ps holds shards";
    for (int64_t b = 0; b < nblocks; b++) {
        ps_rows_t r;
        const char *why = ps_rows_walk(p, j, payload, len, at, &prev, &r,
                                       values);
        if (why)
            return why;
        *named += p->place.shard[r.shard].count;
        if ((why = ps_rows_ids_check(p, &r)))
            return why;
        for (size_t e = 0; values && e < (size_t)r.nrows * r.row_len; e++) {
            float v;
            memcpy(&v, r.values + 4 * e, 4);
            if (!isfinite(v))
                return "a row value that is not finite";
        }
    }
    return NULL;
}

const char *ps_rows_check(const ps_t *p, int j, const unsigned char *payload,
                          uint32_t count, int64_t nblocks)
{
    size_t len = (size_t)count * 4, at, named;
    const char *why = ps_rows_blocks(p, j, payload, len, nblocks, 1, &at,
                                     &named);
    if (!why && len - at != (p->place.ps_count[j] - named) * sizeof(float))
        why = "payload size disagrees with its row blocks";
    return why;
}

size_t ps_rows_next(const ps_t *p, int j, const unsigned char *payload,
                    uint32_t count, size_t at, int *prev, ps_rows_t *r)
{
    (void)ps_rows_walk(p, j, payload, (size_t)count * 4, &at, prev, r, 1);
    return at;
}
