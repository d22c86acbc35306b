/* Embeddings: a gather of table rows by id (with TF's sum / mean
 * combiners), its scatter-add into the dense gradient of the table, and
 * the same gradient as (sorted distinct ids, rows). Every sum runs in the
 * row-major order of the ids, from 0, so the dense and the sparse forms,
 * and kernels/cuda's twins, give the same bits. */
#include <string.h>

#include "kernels_cpu.h"

/* Floats of dY per sample. */
static size_t dy_width(int k, int dim, int comb)
{
    return (size_t)(comb == KOPS_EMB_NONE ? k : 1) * (size_t)dim;
}

void kc_emb_fwd(int m, int k, int dim, int vocab, int comb,
                const int32_t *ids, const float *W, float *Y)
{
    if (m <= 0 || k <= 0 || dim <= 0)
        return;
    size_t d = (size_t)dim, out = dy_width(k, dim, comb);
    for (int i = 0; i < m; i++) {
        const int32_t *row = ids + (size_t)i * (size_t)k;
        float *y = Y + (size_t)i * out;
        memset(y, 0, out * sizeof *y);
        for (int j = 0; j < k; j++) {
            if (!kops_emb_real(row[j], vocab))
                continue;
            const float *w = W + (size_t)row[j] * d;
            float *dst = comb == KOPS_EMB_NONE ? y + (size_t)j * d : y;
            for (size_t c = 0; c < d; c++)
                dst[c] += w[c];
        }
        if (comb == KOPS_EMB_MEAN) {
            float s = kops_emb_scale(row, k, vocab, comb);
            for (size_t c = 0; c < d; c++)
                y[c] *= s;
        }
    }
}

/* Add the contribution of ids[i][j] (a real id) to g[dim]: its slice of
 * dY, times the sample's scale under MEAN. */
static void add_slice(int k, int dim, int comb, const float *dY, int i, int j,
                      float s, float *g)
{
    size_t d = (size_t)dim;
    const float *src = dY + (size_t)i * dy_width(k, dim, comb) +
                       (comb == KOPS_EMB_NONE ? (size_t)j * d : 0);
    if (comb == KOPS_EMB_MEAN)
        for (size_t c = 0; c < d; c++)
            g[c] += src[c] * s;
    else
        for (size_t c = 0; c < d; c++)
            g[c] += src[c];
}

void kc_emb_bwd(int m, int k, int dim, int vocab, int comb,
                const int32_t *ids, const float *dY, float *dW, int32_t *work)
{
    (void)work;
    if (vocab <= 0 || dim <= 0)
        return;
    memset(dW, 0, (size_t)vocab * (size_t)dim * sizeof *dW);
    for (int i = 0; i < m; i++) {
        const int32_t *row = ids + (size_t)i * (size_t)k;
        float s = kops_emb_scale(row, k, vocab, comb);
        for (int j = 0; j < k; j++)
            if (kops_emb_real(row[j], vocab))
                add_slice(k, dim, comb, dY, i, j, s,
                          dW + (size_t)row[j] * (size_t)dim);
    }
}

/* Sort n (id, position) pairs, 2 int32 each, appended in position order,
 * by id: a stable bottom-up merge sort between a and b (2n int32 each),
 * so each id's occurrences stay in position order. Returns the buffer
 * that holds the result. No allocation (unlike qsort). */
static int32_t *sort_pairs(int32_t *a, int32_t *b, size_t n)
{
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n;
            size_t hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid;
            for (size_t o = lo; o < hi; o++) {
                size_t from = j >= hi || (i < mid && a[2 * i] <= a[2 * j])
                                  ? i++ : j++;
                b[2 * o] = a[2 * from];
                b[2 * o + 1] = a[2 * from + 1];
            }
        }
        int32_t *t = a;
        a = b;
        b = t;
    }
    return a;
}

void kc_emb_sparse(int m, int k, int dim, int vocab, int comb,
                   const int32_t *ids, const float *dY, int32_t *uniq,
                   float *rows, int32_t *nuniq, int32_t *work)
{
    /* (id, position) of every real id, sorted by id: each id's
     * occurrences in position order, as kc_emb_bwd adds them. work holds
     * KOPS_EMB_WORK(n) >= 4n int32: the pairs and the sort's other half. */
    size_t n = m > 0 && k > 0 ? (size_t)m * (size_t)k : 0, len = 0;
    for (size_t p = 0; p < n; p++) {
        if (!kops_emb_real(ids[p], vocab))
            continue;
        work[2 * len] = ids[p];
        work[2 * len + 1] = (int32_t)p;
        len++;
    }
    const int32_t *pairs = sort_pairs(work, work + 2 * n, len);
    int32_t u = -1;
    size_t d = (size_t)dim;
    for (size_t q = 0; q < len; q++) {
        int32_t id = pairs[2 * q];
        size_t p = (size_t)pairs[2 * q + 1];
        if (u < 0 || id != uniq[u]) {
            uniq[++u] = id;
            memset(rows + (size_t)u * d, 0, d * sizeof *rows);
        }
        int i = (int)(p / (size_t)k), j = (int)(p % (size_t)k);
        float s = kops_emb_scale(ids + (size_t)i * (size_t)k, k, vocab, comb);
        add_slice(k, dim, comb, dY, i, j, s, rows + (size_t)u * d);
    }
    *nuniq = u + 1;
}
