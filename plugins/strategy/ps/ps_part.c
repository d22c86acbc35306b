/* ps.so -- partitioners and round-robin placement (semantics: ps_part.h). */
#include "ps_part.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A positive integer with an optional K/M/G suffix, up to `end` or ':'. */
static int parse_num(const char **s, int suffix, int64_t *out)
{
    const char *p = *s;
    if (*p < '0' || *p > '9')
        return -1;
    errno = 0;
    char *e;
    unsigned long long v = strtoull(p, &e, 10);
    if (errno || v == 0 || v > (1ull << 50))
        return -1;
    if (suffix && (*e == 'K' || *e == 'M' || *e == 'G')) {
        int shift = *e == 'K' ? 10 : *e == 'M' ? 20 : 30;
        if (v > (1ull << (50 - shift)))
            return -1;
        v <<= shift;
        e++;
    }
    if (*e != '\0' && *e != ':')
        return -1;
    *s = e;
    *out = (int64_t)v;
    return 0;
}

int ps_part_parse(const char *spec, ps_part_t *out, char *why, size_t cap)
{
    memset(out, 0, sizeof *out);
    if (!spec || !spec[0])
        return 0;
    const char *rest;
    if (!strncmp(spec, "fixed:", 6)) {
        out->kind = PS_PART_FIXED;
        rest = spec + 6;
        if (parse_num(&rest, 0, &out->shards) == 0 && *rest == '\0')
            return 0;
    } else if (!strncmp(spec, "min_size:", 9) || !strncmp(spec, "max_size:", 9)) {
        out->kind = spec[1] == 'i' ? PS_PART_MIN_SIZE : PS_PART_MAX_SIZE;
        out->max_shards = out->kind == PS_PART_MIN_SIZE ? 1 : 0;
        rest = spec + 9;
        if (parse_num(&rest, 1, &out->bytes) == 0
            && (*rest == '\0'
                || (rest++, parse_num(&rest, 0, &out->max_shards) == 0
                    && *rest == '\0')))
            return 0;
    }
    snprintf(why, cap, "'%s' is not fixed:N, min_size:BYTES[:MAX_SHARDS] or "
             "max_size:BYTES[:MAX_SHARDS] (positive integers; BYTES may end "
             "in K, M or G)", spec);
    memset(out, 0, sizeof *out);
    return -1;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

int64_t ps_part_count(const ps_part_t *p, const int64_t *shape, int ndim,
                      size_t elem_bytes)
{
    if (ndim < 1 || shape[0] < 1)
        return 1;
    int64_t dim0 = shape[0], elems = 1;
    for (int i = 0; i < ndim; i++)
        elems *= shape[i] > 0 ? shape[i] : 1;
    int64_t total = elems * (int64_t)elem_bytes, n = 1;
    switch (p->kind) {
    case PS_PART_FIXED:
        n = min64(p->shards, dim0);
        break;
    case PS_PART_MIN_SIZE: /* min_max_variable_partitioner */
        n = min64(min64(dim0, p->max_shards), (total + p->bytes - 1) / p->bytes);
        break;
    case PS_PART_MAX_SIZE: { /* variable_axis_size_partitioner */
        int64_t row_bytes = total / dim0;
        int64_t per = row_bytes > 0 ? p->bytes / row_bytes : dim0;
        if (per < 1)
            per = 1;
        n = (dim0 + per - 1) / per;
        if (p->max_shards > 0)
            n = min64(n, p->max_shards);
        break;
    }
    default:
        break;
    }
    return n < 1 ? 1 : n;
}

void ps_part_rows(int64_t dim0, int64_t n, int64_t k, int64_t *row0,
                  int64_t *rows)
{
    int64_t base = dim0 / n, extra = dim0 % n;
    *rows = base + (k < extra ? 1 : 0);
    *row0 = k * base + (k < extra ? k : extra);
}

int ps_place_init(ps_place_t *pl, int nps)
{
    memset(pl, 0, sizeof *pl);
    pl->nps = nps;
    pl->ps_count = calloc((size_t)(nps > 0 ? nps : 1), sizeof *pl->ps_count);
    return pl->ps_count ? 0 : -1;
}

void ps_place_free(ps_place_t *pl)
{
    free(pl->shard);
    free(pl->ps_count);
    memset(pl, 0, sizeof *pl);
}

int ps_place_var(ps_place_t *pl, const ps_part_t *p, int32_t var,
                 const int64_t *shape, int ndim, size_t offset, size_t count)
{
    size_t elems = 1;
    for (int i = 0; i < ndim; i++)
        elems *= shape[i] > 0 ? (size_t)shape[i] : 0;
    if (elems != count || pl->nps < 1)
        return -1;
    int64_t n = ps_part_count(p, shape, ndim, sizeof(float));
    int64_t dim0 = ndim >= 1 ? shape[0] : 1;
    size_t row_elems = dim0 > 0 ? count / (size_t)dim0 : count;
    if (n > (int64_t)(1 << 20) - pl->n)
        return -1;
    if (pl->n + n > pl->cap) {
        int cap = pl->cap ? pl->cap : 16;
        while (cap < pl->n + n)
            cap *= 2;
        ps_shard_t *s = realloc(pl->shard, (size_t)cap * sizeof *s);
        if (!s)
            return -1;
        pl->shard = s;
        pl->cap = cap;
    }
    for (int64_t k = 0; k < n; k++) {
        ps_shard_t *s = &pl->shard[pl->n++];
        s->var = var;
        s->ps = (int32_t)(pl->next++ % pl->nps);
        if (ndim >= 1 && dim0 > 0) {
            ps_part_rows(dim0, n, k, &s->row0, &s->rows);
        } else {
            s->row0 = 0;
            s->rows = 1;
        }
        s->offset = offset + (size_t)s->row0 * row_elems;
        s->count = ndim >= 1 && dim0 > 0 ? (size_t)s->rows * row_elems : count;
        pl->ps_count[s->ps] += s->count;
    }
    return 0;
}
