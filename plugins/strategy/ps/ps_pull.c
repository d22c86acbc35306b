/* ps.so -- a PULL that asks for the rows of a batch (wire version 7,
 * ps_wire.h): a worker whose core says which rows of each embedding table
 * its step's batch reads (host batch_rows, ABI 2.11) asks each ps for
 * those rows of its table shards and the whole of its other shards.
 *
 * A PULL with b = B > 0 blocks carries, in 4-byte words, B times, shards
 * in placement order, the row blocks of a PUSH (ps_rows.c) without their
 * values:
 *
 *     u32 shard   the shard's index in the placement
 *     u32 nrows   rows asked (0 .. the shard's rows)
 *     i64 x nrows table row ids, ascending, distinct, within the shard
 *
 * and nothing after them. The PARAMS answering it has b = B and carries,
 * for each of the ps's shards in placement order as a whole PARAMS does,
 * the rows asked (nrows x row_len, in the block's order) when a block
 * names the shard, else all its values. The ids are not sent back: the
 * reply is matched to its request by the request id, and the worker holds
 * the ids it asked for (8 bytes a row less: an eighth of a row of 16). */
#include <string.h>

#include "ps.h"

static const strata_sparse_t *table_of(const strata_sparse_t *tabs,
                                       size_t ntabs, int32_t var)
{
    for (size_t i = 0; i < ntabs; i++)
        if ((int32_t)tabs[i].var == var)
            return &tabs[i];
    return NULL;
}

int ps_pull_pack(const ps_t *p, int ps, const strata_sparse_t *tabs,
                 size_t ntabs, ps_want_t *w)
{
    unsigned char *o = (unsigned char *)w->words[ps];
    size_t at = 0, reply = 0;
    w->nblocks[ps] = 0;
    for (int i = 0; i < p->place.n; i++) {
        const ps_shard_t *sh = &p->place.shard[i];
        if (sh->ps != ps)
            continue;
        const strata_sparse_t *t = table_of(tabs, ntabs, sh->var);
        if (!t) {
            reply += sh->count;
            continue;
        }
        if (t->row_len != ps_shard_row_len(sh) || t->row_len == 0 ||
            (t->nrows && !t->rows))
            return STRATA_EINVAL;
        size_t lo;
        uint32_t n;
        at += ps_rows_head(p, i, t, o + at, &lo, &n);
        reply += n * t->row_len;
        w->nblocks[ps]++;
    }
    w->count[ps] = (uint32_t)(at / 4);
    w->reply[ps] = (uint32_t)reply;
    return STRATA_OK;
}

const char *ps_pull_check(const ps_t *p, int j, const unsigned char *payload,
                          uint32_t count, int64_t nblocks)
{
    size_t len = (size_t)count * 4, at, named;
    const char *why = ps_rows_blocks(p, j, payload, len, nblocks, 0, &at,
                                     &named);
    if (!why && at != len)
        why = "payload size disagrees with its row blocks";
    return why;
}

/* The next block of a checked request (*at, *prev: where the walk is),
 * or r->shard = -1 past the last. */
static void next_block(const ps_t *p, int j, const unsigned char *req,
                       uint32_t count, int64_t nblocks, int64_t *b,
                       size_t *at, int *prev, ps_rows_t *r)
{
    r->shard = -1;
    if (*b < nblocks) {
        (void)ps_rows_walk(p, j, req, (size_t)count * 4, at, prev, r, 0);
        (*b)++;
    }
}

uint32_t ps_pull_answer(const ps_t *p, int j, const unsigned char *req,
                        uint32_t count, int64_t nblocks, const float *master,
                        float *out)
{
    size_t at = 0, o = 0;
    int64_t b = 0;
    int prev = -1;
    ps_rows_t r;
    next_block(p, j, req, count, nblocks, &b, &at, &prev, &r);
    for (int i = 0; i < p->place.n; i++) {
        const ps_shard_t *sh = &p->place.shard[i];
        if (sh->ps != j)
            continue;
        if (r.shard != i) {
            memcpy(out + o, master + sh->offset, sh->count * sizeof(float));
            o += sh->count;
            continue;
        }
        for (uint32_t k = 0; k < r.nrows; k++) {
            int64_t id;
            memcpy(&id, r.ids + 8 * (size_t)k, 8);
            memcpy(out + o,
                   master + sh->offset + (size_t)(id - sh->row0) * r.row_len,
                   r.row_len * sizeof(float));
            o += r.row_len;
        }
        next_block(p, j, req, count, nblocks, &b, &at, &prev, &r);
    }
    return (uint32_t)o;
}

/* Rows of a block into dst: a run of consecutive ids is one copy. *o:
 * bytes of the payload used. */
static int rows_in(ps_t *p, const ps_shard_t *sh, const ps_rows_t *r,
                   const unsigned char *payload, size_t *o, float *dst,
                   int32_t device)
{
    int rc = STRATA_OK;
    for (uint32_t i = 0; rc == STRATA_OK && i < r->nrows;) {
        int64_t id0, id;
        memcpy(&id0, r->ids + 8 * (size_t)i, 8);
        uint32_t e = i + 1;
        for (; e < r->nrows; e++) {
            memcpy(&id, r->ids + 8 * (size_t)e, 8);
            if (id != id0 + (int64_t)(e - i))
                break;
        }
        size_t bytes = (size_t)(e - i) * r->row_len * sizeof(float);
        rc = p->host->copy(p->hc, device,
                           dst + sh->offset
                               + (size_t)(id0 - sh->row0) * r->row_len,
                           p->cpu, payload + *o, bytes);
        *o += bytes;
        i = e;
    }
    return rc;
}

int ps_pull_scatter(ps_t *p, int j, const ps_want_t *w,
                    const unsigned char *payload, float *dst, int32_t device)
{
    const unsigned char *req = (const unsigned char *)w->words[j];
    size_t at = 0, o = 0;
    int64_t b = 0;
    int prev = -1, rc = STRATA_OK;
    ps_rows_t r;
    next_block(p, j, req, w->count[j], w->nblocks[j], &b, &at, &prev, &r);
    for (int i = 0; rc == STRATA_OK && i < p->place.n; i++) {
        const ps_shard_t *sh = &p->place.shard[i];
        if (sh->ps != j)
            continue;
        if (r.shard != i) {
            rc = p->host->copy(p->hc, device, dst + sh->offset, p->cpu,
                               payload + o, sh->count * sizeof(float));
            o += sh->count * sizeof(float);
            continue;
        }
        rc = rows_in(p, sh, &r, payload, &o, dst, device);
        next_block(p, j, req, w->count[j], w->nblocks[j], &b, &at, &prev,
                   &r);
    }
    return rc;
}
