/* The plugin kit: embedding gradients given as rows (ABI 2.9,
 * strata_op_t.sparse) combined over a group, as rows or dense
 * (include/strata/kit.h, part 4).
 *
 * Wire form of one member's rows, in float32 (what transports move): per
 * table that goes as rows, in the op's order, per row: the row index as
 * two floats (index >> 24, index & 0xffffff: exact, whatever the vocab),
 * then its row_len values. Counts travel as floats too (exact below
 * 2^24, checked). No arithmetic here but the host's: axpy adds a row,
 * scale applies MEAN. */
#include <stdlib.h>
#include <string.h>

#include "kit_impl.h"

#define ROW_SPLIT 16777216.0 /* 2^24: the floats' exact integers */

int strata_kit_sparse_densify(const strata_host_v2_t *host, strata_hctx_t *hc,
                              const strata_op_t *op)
{
    if (!STRATA_KIT_HAS_ROWS(op))
        return STRATA_OK;
    float *buf = op->buf;
    int rc = STRATA_OK;
    for (size_t j = 0; rc == STRATA_OK && j < op->nsparse; j++) {
        const strata_sparse_t *sp = &op->sparse[j];
        float *table = buf + sp->offset;
        for (size_t i = 0; rc == STRATA_OK && i < sp->nrows; i++)
            rc = host->copy(hc, op->device,
                            table + (size_t)sp->rows[i] * sp->row_len,
                            op->device, sp->values + i * sp->row_len,
                            sp->row_len * sizeof(float));
    }
    return rc;
}

int strata__kit_sparse_marks(strata_kit_sparse_t *s, size_t rows)
{
    if (s->mark_cap >= rows)
        return STRATA_OK;
    unsigned char *mk = realloc(s->mark, rows);
    if (!mk)
        return STRATA_ENOMEM;
    memset(mk + s->mark_cap, 0, rows - s->mark_cap);
    s->mark = mk;
    s->mark_cap = rows;
    return STRATA_OK;
}

int strata__kit_sparse_tally(const strata_host_v2_t *host, strata_hctx_t *hc,
                             strata_kit_sparse_t *s, const strata_op_t *op,
                             const unsigned char *rows)
{
    int rc = STRATA_OK;
    for (size_t j = 0; j < op->nsparse; j++) {
        s->as_rows += rows[j];
        s->as_dense += !rows[j];
        if (!rows[j] && rc == STRATA_OK) {
            strata_op_t one = *op;
            one.sparse = &op->sparse[j];
            one.nsparse = 1;
            rc = strata_kit_sparse_densify(host, hc, &one);
        }
    }
    return rc;
}

void strata_kit_sparse_fini(const strata_host_v2_t *host, strata_hctx_t *hc,
                            strata_kit_sparse_t *s)
{
    const int32_t cpu = STRATA_DEVICE(STRATA_DEV_CPU, 0);
    if (!s || !host)
        return;
    if (s->gather)
        host->free(hc, cpu, s->gather);
    if (s->counts)
        host->free(hc, cpu, s->counts);
    free(s->bounds);
    free(s->mark);
    s->mark = NULL;
    s->mark_cap = 0;
    s->gather = s->counts = NULL;
    s->bounds = NULL;
    s->gather_cap = s->counts_cap = 0;
    s->nbounds = 0;
}

/* Host floats of at least n in *p (capacity *cap), grown as needed. */
static int reserve(const strata_host_v2_t *host, strata_hctx_t *hc,
                   float **p, size_t *cap, size_t n)
{
    const int32_t cpu = STRATA_DEVICE(STRATA_DEV_CPU, 0);
    if (n <= *cap && *p)
        return STRATA_OK;
    size_t want = n < 1024 ? 1024 : n + n / 2;
    float *q = host->alloc(hc, cpu, want * sizeof *q);
    if (!q)
        return STRATA_ENOMEM;
    if (*p)
        host->free(hc, cpu, *p);
    *p = q;
    *cap = want;
    return STRATA_OK;
}

/* Every member's row count of every table: counts[m * P + j]. */
static int exchange_counts(const strata_host_v2_t *host, strata_hctx_t *hc,
                           strata_transport_t *t, int member, int nmembers,
                           strata_kit_sparse_t *s, const strata_op_t *op)
{
    size_t P = op->nsparse, n = (size_t)nmembers * P;
    int rc = reserve(host, hc, &s->counts, &s->counts_cap, n);
    if (rc != STRATA_OK)
        return rc;
    memset(s->counts, 0, n * sizeof *s->counts);
    for (size_t j = 0; j < P; j++) {
        if ((double)op->sparse[j].nrows >= ROW_SPLIT) {
            host->log(hc, STRATA_LOG_ERROR, NULL, "sparse gradients: %zu "
                      "rows of table %u in one step (at most 2^24)",
                      op->sparse[j].nrows, op->sparse[j].var);
            return STRATA_EINVAL;
        }
        s->counts[(size_t)member * P + j] = (float)op->sparse[j].nrows;
    }
    strata_op_t c = { .struct_size = sizeof c, .slot = op->slot,
                      .buf = s->counts, .count = n,
                      .device = STRATA_DEVICE(STRATA_DEV_CPU, 0),
                      .reduce_op = STRATA_REDUCE_SUM, .step = op->step };
    return host->t_reduce(hc, t, &c); /* each entry has one non-zero term */
}

/* Which tables go as rows: the same answer on every member. */
static void choose(const strata_kit_sparse_policy_t *pol, int nmembers,
                   const strata_kit_sparse_t *s, const strata_op_t *op,
                   unsigned char *rows)
{
    size_t P = op->nsparse;
    for (size_t j = 0; j < P; j++) {
        const strata_sparse_t *sp = &op->sparse[j];
        double total = 0.0;
        for (int m = 0; m < nmembers; m++)
            total += s->counts[(size_t)m * P + j];
        double table = (double)(sp->count / sp->row_len);
        rows[j] = !pol->as_dense && total <= pol->threshold * table;
    }
}

/* The ranges of op->buf between the tables that go as rows. */
int strata__kit_sparse_gaps(const strata_host_v2_t *host, strata_hctx_t *hc,
                       strata_transport_t *t, const strata_op_t *op,
                       const unsigned char *rows)
{
    size_t lo = 0;
    int rc = STRATA_OK;
    for (size_t j = 0; rc == STRATA_OK && j <= op->nsparse; j++) {
        if (j < op->nsparse && !rows[j])
            continue;
        size_t hi = j < op->nsparse ? op->sparse[j].offset : op->count;
        if (hi > lo) { /* every member skips the same ones */
            strata_op_t g = *op;
            g.buf = (float *)op->buf + lo;
            g.count = hi - lo;
            g.sparse = NULL;
            g.nsparse = 0;
            rc = host->t_reduce(hc, t, &g);
        }
        if (j < op->nsparse)
            lo = op->sparse[j].offset + op->sparse[j].count;
    }
    return rc;
}

/* Each member's floats on the wire, and where they go. */
static int place(strata_kit_sparse_t *s, int nmembers, const strata_op_t *op,
                 const unsigned char *rows, size_t *total)
{
    if (s->nbounds < nmembers + 1) {
        size_t *b = realloc(s->bounds, ((size_t)nmembers + 1) * sizeof *b);
        if (!b)
            return STRATA_ENOMEM;
        s->bounds = b;
        s->nbounds = nmembers + 1;
    }
    size_t P = op->nsparse;
    s->bounds[0] = 0;
    for (int m = 0; m < nmembers; m++) {
        size_t len = 0;
        for (size_t j = 0; j < P; j++)
            if (rows[j])
                len += (size_t)s->counts[(size_t)m * P + j] *
                       (op->sparse[j].row_len + 2);
        s->bounds[m + 1] = s->bounds[m] + len;
    }
    *total = s->bounds[nmembers];
    return STRATA_OK;
}

/* This member's rows into its part of the gather buffer. */
static void pack(const strata_kit_sparse_t *s, int member,
                 const strata_op_t *op, const unsigned char *rows)
{
    float *w = s->gather + s->bounds[member];
    for (size_t j = 0; j < op->nsparse; j++) {
        const strata_sparse_t *sp = &op->sparse[j];
        for (size_t i = 0; rows[j] && i < sp->nrows; i++) {
            int64_t r = sp->rows[i];
            *w++ = (float)(r >> 24);
            *w++ = (float)(r & 0xffffff);
            memcpy(w, sp->values + i * sp->row_len,
                   sp->row_len * sizeof *w);
            w += sp->row_len;
        }
    }
}

static int gather(const strata_host_v2_t *host, strata_hctx_t *hc,
                  strata_transport_t *t, int nmembers, strata_kit_sparse_t *s,
                  const strata_op_t *op, size_t total)
{
    strata_op_t g = { .struct_size = sizeof g, .slot = op->slot,
                      .buf = s->gather, .count = total,
                      .device = STRATA_DEVICE(STRATA_DEV_CPU, 0),
                      .step = op->step };
    if (STRATA_HAS_FIELD(strata_host_v2_t, host, t_caps) &&
        (host->t_caps(hc, t) & STRATA_CAP_SHARDS))
        return host->t_all_gather(hc, t, &g, s->bounds);
    int rc = STRATA_OK;
    for (int m = 0; rc == STRATA_OK && m < nmembers; m++) {
        g.buf = s->gather + s->bounds[m];
        g.count = s->bounds[m + 1] - s->bounds[m];
        g.root = m;
        if (g.count > 0) /* every member skips the same ones */
            rc = host->t_update(hc, t, &g);
    }
    return rc;
}

/* Where member m's rows of table j start in the gather buffer. */
static const float *rows_of(const strata_kit_sparse_t *s, int m, size_t j,
                            const strata_op_t *op, const unsigned char *rows)
{
    const float *w = s->gather + s->bounds[m];
    for (size_t q = 0; q < j; q++)
        if (rows[q])
            w += (size_t)s->counts[(size_t)m * op->nsparse + q] *
                 (op->sparse[q].row_len + 2);
    return w;
}

static size_t row_at(const float *w)
{
    return (size_t)((double)w[0] * ROW_SPLIT + (double)w[1]);
}

/* MEAN: each row some member gave, once, times 1 / nmembers (as the
 * transports scale a sum; the rows no member gave are 0 either way). A
 * byte per table row marks the rows done, cleared on the way out. */
static int scale_rows(const strata_host_v2_t *host, strata_hctx_t *hc,
                      int nmembers, strata_kit_sparse_t *s,
                      const strata_op_t *op, const unsigned char *rows)
{
    float *buf = op->buf, inv = 1.0f / (float)nmembers;
    size_t P = op->nsparse;
    int rc = STRATA_OK;
    for (size_t j = 0; rc == STRATA_OK && j < P; j++) {
        const strata_sparse_t *sp = &op->sparse[j];
        size_t vocab = sp->count / sp->row_len, step = 2 + sp->row_len;
        if (!rows[j])
            continue;
        if (strata__kit_sparse_marks(s, vocab) != STRATA_OK)
            return STRATA_ENOMEM;
        for (int pass = 0; pass < 2; pass++)
            for (int m = 0; m < nmembers; m++) {
                const float *w = rows_of(s, m, j, op, rows);
                size_t n = (size_t)s->counts[(size_t)m * P + j];
                for (size_t i = 0; i < n; i++, w += step) {
                    size_t r = row_at(w);
                    if (pass == 1) {
                        s->mark[r] = 0;
                    } else if (!s->mark[r] && rc == STRATA_OK) {
                        s->mark[r] = 1;
                        rc = host->scale(hc, op->device, sp->row_len, inv,
                                         buf + sp->offset + r * sp->row_len);
                    }
                }
            }
    }
    return rc;
}

/* Every member's rows added onto the zeros of their tables, member by
 * member, row by row; then MEAN. */
static int add_rows(const strata_host_v2_t *host, strata_hctx_t *hc,
                    int nmembers, strata_kit_sparse_t *s,
                    const strata_op_t *op, const unsigned char *rows)
{
    float *buf = op->buf;
    size_t P = op->nsparse;
    int rc = STRATA_OK;
    for (int m = 0; rc == STRATA_OK && m < nmembers; m++) {
        const float *w = s->gather + s->bounds[m];
        for (size_t j = 0; rc == STRATA_OK && j < P; j++) {
            const strata_sparse_t *sp = &op->sparse[j];
            size_t n = rows[j] ? (size_t)s->counts[(size_t)m * P + j] : 0;
            size_t vocab = sp->count / sp->row_len;
            for (size_t i = 0; rc == STRATA_OK && i < n; i++) {
                double r = (double)w[0] * ROW_SPLIT + (double)w[1];
                if (!(r >= 0.0 && r < (double)vocab)) {
                    host->log(hc, STRATA_LOG_ERROR, NULL, "sparse gradients: "
                              "member %d sent row %.0f of table %u, which "
                              "has %zu rows", m, r, sp->var, vocab);
                    return STRATA_EPROTO;
                }
                rc = host->axpy(hc, op->device, sp->row_len, 1.0f, w + 2,
                                buf + sp->offset + (size_t)r * sp->row_len);
                w += 2 + sp->row_len;
            }
        }
    }
    return rc == STRATA_OK && op->reduce_op == STRATA_REDUCE_MEAN
               ? scale_rows(host, hc, nmembers, s, op, rows)
               : rc;
}

int strata_kit_sparse_reduce(const strata_host_v2_t *host, strata_hctx_t *hc,
                             strata_transport_t *t, int member, int nmembers,
                             const strata_kit_sparse_policy_t *pol,
                             strata_kit_sparse_t *s, strata_op_t *op,
                             strata_kit_dense_fn dense, void *arg)
{
    if (!STRATA_KIT_HAS_ROWS(op))
        return dense(arg, op);
    if (STRATA_DEVICE_TYPE(op->device) != STRATA_DEV_CPU ||
        member < 0 || member >= nmembers) {
        host->log(hc, STRATA_LOG_ERROR, NULL, "sparse gradients: member %d "
                  "of %d on device %d: host memory only", member, nmembers,
                  (int)op->device);
        return STRATA_EINVAL;
    }
    unsigned char rows[64];
    if (op->nsparse > sizeof rows) {
        host->log(hc, STRATA_LOG_ERROR, NULL, "sparse gradients: %zu tables "
                  "(at most %zu)", op->nsparse, sizeof rows);
        return STRATA_EINVAL;
    }
    int rc = STRATA_OK;
    /* sparse_as_dense is the job's: every member skips the counts alike */
    if (nmembers > 1 && !pol->as_dense)
        rc = exchange_counts(host, hc, t, member, nmembers, s, op);
    if (rc != STRATA_OK)
        return rc;
    int any = 0;
    if (nmembers > 1 && !pol->as_dense)
        choose(pol, nmembers, s, op, rows);
    else
        memset(rows, 0, sizeof rows); /* one member: nothing to exchange */
    for (size_t j = 0; j < op->nsparse; j++)
        any |= rows[j];
    /* The tables that go dense join the gaps' all-reduce (all of them:
     * the caller's dense reduce of the whole op). */
    rc = strata__kit_sparse_tally(host, hc, s, op, rows);
    if (!any) {
        strata_op_t d = *op;
        d.sparse = NULL;
        d.nsparse = 0;
        return rc == STRATA_OK ? dense(arg, &d) : rc;
    }
    if (rc == STRATA_OK)
        rc = strata__kit_sparse_gaps(host, hc, t, op, rows);
    size_t total = 0;
    if (rc == STRATA_OK)
        rc = place(s, nmembers, op, rows, &total);
    if (rc == STRATA_OK && total > 0) {
        rc = reserve(host, hc, &s->gather, &s->gather_cap, total);
        if (rc == STRATA_OK) {
            pack(s, member, op, rows);
            rc = gather(host, hc, t, nmembers, s, op, total);
        }
    }
    return rc == STRATA_OK ? add_rows(host, hc, nmembers, s, op, rows) : rc;
}
