/* Embeddings on the GPU, the twins of kernels/cpu/embedding.c, bit for bit:
 * the gather sums a sample's rows in column order from 0; the gradient
 * sorts the ids (CUB's radix sort, stable: each id's occurrences stay in
 * position order), then one thread per (run of an id, column) sums the run
 * in that order from 0, as the CPU adds them. No atomics, so the result
 * does not depend on scheduling. CUB's temporary storage is stream-ordered
 * memory (kg_malloc) taken and given back during the call. */
#include <climits>

/* CUB's iterators include <iostream> for an operator<<, and its static
 * std::ios_base::Init would need libstdc++ where C programs link this
 * library with the C compiler: <ostream> declares what the operator
 * needs, and <iostream> itself is skipped (libstdc++'s guard). */
#include <ostream>
#ifndef _GLIBCXX_IOSTREAM
#define _GLIBCXX_IOSTREAM 1
#endif
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "kg_internal.h"

static __device__ __forceinline__ size_t kg_emb_width(int k, int dim,
                                                      int comb)
{
    return (size_t)(comb == KOPS_EMB_NONE ? k : 1) * (size_t)dim;
}

/* One thread per output float: (sample, column j, c) for NONE, (sample, c)
 * for the combiners. */
__global__ void kg_emb_fwd_k(size_t n, int k, int dim, int vocab, int comb,
                             const int32_t *ids, const float *W, float *Y)
{
    KG_FOR(e, n) {
        size_t out = kg_emb_width(k, dim, comb);
        size_t i = e / out, c = e % out;
        const int32_t *row = ids + i * (size_t)k;
        if (comb == KOPS_EMB_NONE) {
            int32_t id = row[c / (size_t)dim];
            Y[e] = kops_emb_real(id, vocab)
                       ? W[(size_t)id * dim + c % (size_t)dim] : 0.0f;
            continue;
        }
        float s = 0.0f;
        for (int j = 0; j < k; j++)
            if (kops_emb_real(row[j], vocab))
                s += W[(size_t)row[j] * dim + c];
        Y[e] = comb == KOPS_EMB_MEAN
                   ? s * kops_emb_scale(row, k, vocab, comb) : s;
    }
}

int kg_emb_fwd(int m, int k, int dim, int vocab, int comb, const int32_t *ids,
               const float *W, float *Y, kg_stream_t s)
{
    if (m <= 0 || k <= 0 || dim <= 0)
        return KG_OK;
    size_t n = (size_t)m * (size_t)(comb == KOPS_EMB_NONE ? k : 1) * dim;
    KG_LAUNCH(kg_emb_fwd_k, n, s, k, dim, vocab, comb, ids, W, Y);
}

/* keys[p] = ids[p], or INT_MAX for padding (sorted last, then skipped);
 * pos[p] = p. */
__global__ void kg_emb_keys_k(size_t n, int vocab, const int32_t *ids,
                              int32_t *keys, int32_t *pos)
{
    KG_FOR(p, n) {
        keys[p] = kops_emb_real(ids[p], vocab) ? ids[p] : INT_MAX;
        pos[p] = (int32_t)p;
    }
}

/* head[q] = 1 where a run of a real id starts in the sorted keys. */
__global__ void kg_emb_heads_k(size_t n, const int32_t *keys, int32_t *head)
{
    KG_FOR(q, n)
        head[q] = keys[q] != INT_MAX && (q == 0 || keys[q - 1] != keys[q]);
}

/* The sum of column c of the run of keys starting at q, in sorted order. */
static __device__ float kg_emb_run(size_t n, size_t q, size_t c, int k,
                                   int dim, int vocab, int comb,
                                   const int32_t *ids, const float *dY,
                                   const int32_t *keys, const int32_t *pos)
{
    float g = 0.0f;
    size_t width = kg_emb_width(k, dim, comb);
    for (size_t r = q; r < n && keys[r] == keys[q]; r++) {
        size_t p = (size_t)pos[r], i = p / (size_t)k, j = p % (size_t)k;
        const float *src = dY + i * width +
                           (comb == KOPS_EMB_NONE ? j * (size_t)dim : 0);
        if (comb == KOPS_EMB_MEAN)
            g += src[c] * kops_emb_scale(ids + i * (size_t)k, k, vocab,
                                         comb);
        else
            g += src[c];
    }
    return g;
}

/* One thread per (sorted position, column): a run's head writes its row of
 * dW. */
__global__ void kg_emb_dense_k(size_t n2, size_t n, int k, int dim,
                               int vocab, int comb, const int32_t *ids,
                               const float *dY, const int32_t *keys,
                               const int32_t *pos, const int32_t *head,
                               float *dW)
{
    KG_FOR(e, n2) {
        size_t q = e / (size_t)dim, c = e % (size_t)dim;
        if (head[q])
            dW[(size_t)keys[q] * dim + c] =
                kg_emb_run(n, q, c, k, dim, vocab, comb, ids, dY, keys, pos);
    }
}

/* The same into (uniq, rows) at the run's rank, scan[q] - 1. */
__global__ void kg_emb_rows_k(size_t n2, size_t n, int k, int dim, int vocab,
                              int comb, const int32_t *ids, const float *dY,
                              const int32_t *keys, const int32_t *pos,
                              const int32_t *head, const int32_t *scan,
                              int32_t *uniq, float *rows, int32_t *nuniq)
{
    KG_FOR(e, n2) {
        size_t q = e / (size_t)dim, c = e % (size_t)dim;
        if (e == 0)
            *nuniq = scan[n - 1];
        if (!head[q])
            continue;
        size_t u = (size_t)scan[q] - 1;
        if (c == 0)
            uniq[u] = keys[q];
        rows[u * dim + c] =
            kg_emb_run(n, q, c, k, dim, vocab, comb, ids, dY, keys, pos);
    }
}

/* work[0..6n): keys and positions in, sorted keys and positions, run
 * heads, their inclusive scan. Sorts and marks the runs (and scans them
 * when `scan`). */
static int kg_emb_sort(size_t n, int vocab, const int32_t *ids,
                       int32_t *work, bool scan, kg_stream_t s)
{
    int32_t *keys = work, *pos = work + n, *skeys = work + 2 * n,
            *spos = work + 3 * n, *head = work + 4 * n, *sc = work + 5 * n;
    kg_emb_keys_k<<<kg__blocks(n), KG_THREADS, 0, s>>>(n, vocab, ids, keys,
                                                       pos);
    int rc = kg__launched();
    size_t sort_bytes = 0, scan_bytes = 0;
    if (rc == KG_OK)
        rc = kg__cuda(cub::DeviceRadixSort::SortPairs(
            nullptr, sort_bytes, keys, skeys, pos, spos, (int)n, 0,
            (int)sizeof(int32_t) * 8, s));
    if (rc == KG_OK && scan)
        rc = kg__cuda(cub::DeviceScan::InclusiveSum(nullptr, scan_bytes,
                                                    head, sc, (int)n, s));
    void *tmp = nullptr;
    size_t bytes = sort_bytes > scan_bytes ? sort_bytes : scan_bytes;
    if (rc == KG_OK)
        rc = kg_malloc(&tmp, bytes, s);
    if (rc == KG_OK)
        rc = kg__cuda(cub::DeviceRadixSort::SortPairs(
            tmp, sort_bytes, keys, skeys, pos, spos, (int)n, 0,
            (int)sizeof(int32_t) * 8, s));
    if (rc == KG_OK) {
        kg_emb_heads_k<<<kg__blocks(n), KG_THREADS, 0, s>>>(n, skeys, head);
        rc = kg__launched();
    }
    if (rc == KG_OK && scan)
        rc = kg__cuda(cub::DeviceScan::InclusiveSum(tmp, scan_bytes, head, sc,
                                                    (int)n, s));
    int fr = kg_free(tmp, s);
    return rc == KG_OK ? fr : rc;
}

int kg_emb_bwd(int m, int k, int dim, int vocab, int comb, const int32_t *ids,
               const float *dY, float *dW, int32_t *work, kg_stream_t s)
{
    if (vocab <= 0 || dim <= 0)
        return KG_OK;
    int rc = kg_memset(dW, 0, (size_t)vocab * dim * sizeof *dW, s);
    size_t n = m > 0 && k > 0 ? (size_t)m * (size_t)k : 0;
    if (rc != KG_OK || n == 0)
        return rc;
    rc = kg_emb_sort(n, vocab, ids, work, false, s);
    if (rc != KG_OK)
        return rc;
    KG_LAUNCH(kg_emb_dense_k, n * (size_t)dim, s, n, k, dim, vocab, comb, ids,
              dY, work + 2 * n, work + 3 * n, work + 4 * n, dW);
}

int kg_emb_sparse(int m, int k, int dim, int vocab, int comb,
                  const int32_t *ids, const float *dY, int32_t *uniq,
                  float *rows, int32_t *nuniq, int32_t *work, kg_stream_t s)
{
    size_t n = m > 0 && k > 0 ? (size_t)m * (size_t)k : 0;
    if (n == 0 || dim <= 0)
        return kg_memset(nuniq, 0, sizeof *nuniq, s);
    int rc = kg_emb_sort(n, vocab, ids, work, true, s);
    if (rc != KG_OK)
        return rc;
    KG_LAUNCH(kg_emb_rows_k, n * (size_t)dim, s, n, k, dim, vocab, comb, ids,
              dY, work + 2 * n, work + 3 * n, work + 4 * n, work + 5 * n,
              uniq, rows, nuniq);
}
