/* The losses and their metrics: one warp per row.
 * The loss sum is deterministic: each block adds its rows in a fixed order,
 * writes one partial into the caller's kg_xent_acc_t, and the last block to
 * finish (atomic ticket) adds the partials in block order. */
#include <math.h>

#include "kg_internal.h"

enum { KG_WARPS = 8, KG_WARP = 32 };

/* Argmax of a row, first index on ties (as the CPU twin), for one warp.
 * Max-with-lowest-index is commutative and associative, so the butterfly
 * leaves every lane with the same (value, index). c >= 1 gives index >= 0. */
__device__ static int kg_row_argmax(const float *x, int c, int lane,
                                    float *maxv)
{
    float best = -INFINITY;
    int bi = -1;                      /* -1: this lane saw no element */
    for (int j = lane; j < c; j += KG_WARP) {
        float v = x[j];
        if (bi < 0 || v > best) {
            best = v;
            bi = j;
        }
    }
    for (int off = KG_WARP / 2; off > 0; off /= 2) {
        float ob = __shfl_xor_sync(0xffffffffu, best, off);
        int oi = __shfl_xor_sync(0xffffffffu, bi, off);
        if (oi >= 0 && (bi < 0 || ob > best || (ob == best && oi < bi))) {
            best = ob;
            bi = oi;
        }
    }
    *maxv = best;
    return bi;
}

__device__ static double kg_warp_sum(double v)
{
    for (int off = KG_WARP / 2; off > 0; off /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

/* Row r of the global warp w: rows w, w + nwarps, ... (fixed for given m). */
__global__ void __launch_bounds__(KG_WARPS * KG_WARP)
kg_xent_k(int m, int c, const float *logits, const int32_t *labels,
          float *dlogits, float scale, int count, kg_xent_acc_t *acc)
{
    __shared__ double s_loss[KG_WARPS];
    __shared__ long long s_corr[KG_WARPS];
    const int lane = threadIdx.x % KG_WARP, warp = threadIdx.x / KG_WARP;
    const int nwarps = gridDim.x * KG_WARPS;
    double loss = 0.0;                /* meaningful in lane 0 */
    long long corr = 0;

    for (int r = blockIdx.x * KG_WARPS + warp; r < m; r += nwarps) {
        const float *x = logits + (size_t)r * (size_t)c;
        const int label = labels[r];
        const bool valid = label >= 0 && label < c;
        float mx;
        const int am = kg_row_argmax(x, c, lane, &mx);
        const double xl = valid ? (double)x[label] : 0.0;
        /* As kc_softmax_xent: exp in float, sums and the log in double. */
        double se = 0.0;
        for (int j = lane; j < c; j += KG_WARP)
            se += (double)expf(x[j] - mx);
        se = kg_warp_sum(se);
        if (lane == 0) {
            loss += valid ? log(se) - (xl - (double)mx) : (double)NAN;
            corr += (count && valid && am == label);
        }
        /* dlogits may alias logits: every lane has read x[label] and its
         * own elements before any lane overwrites them. */
        __syncwarp();
        if (dlogits) {
            float *d = dlogits + (size_t)r * (size_t)c;
            const float f = (float)((double)scale / se);
            for (int j = lane; j < c; j += KG_WARP) {
                float p = expf(x[j] - mx) * f;
                d[j] = j == label ? p - scale : p;
            }
        }
        __syncwarp();
    }
    if (lane == 0) {
        s_loss[warp] = loss;
        s_corr[warp] = corr;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double bl = 0.0;
        long long bc = 0;
        for (int w = 0; w < KG_WARPS; w++) {
            bl += s_loss[w];
            bc += s_corr[w];
        }
        acc->part_loss[blockIdx.x] = bl;
        acc->part_correct[blockIdx.x] = bc;
        __threadfence();              /* partial visible before the ticket */
        /* atomicInc wraps to 0 at gridDim.x - 1: the ticket is reset for
         * the next call by the last block itself. */
        unsigned t = atomicInc(&acc->ticket, gridDim.x - 1);
        if (t == gridDim.x - 1) {
            __threadfence();
            const volatile double *pl = acc->part_loss;
            const volatile int64_t *pc = acc->part_correct;
            double tl = 0.0;
            long long tc = 0;
            for (unsigned b = 0; b < gridDim.x; b++) {
                tl += pl[b];
                tc += pc[b];
            }
            acc->loss_sum += tl;
            acc->correct += tc;
        }
    }
}

__global__ void __launch_bounds__(KG_WARPS * KG_WARP)
kg_count_correct_k(int m, int c, const float *logits, const int32_t *labels,
                   int64_t *correct)
{
    const int lane = threadIdx.x % KG_WARP;
    const int gw = blockIdx.x * KG_WARPS + threadIdx.x / KG_WARP;
    unsigned long long corr = 0;
    for (int r = gw; r < m; r += gridDim.x * KG_WARPS) {
        float mx;
        int am = kg_row_argmax(logits + (size_t)r * (size_t)c, c, lane, &mx);
        corr += (am == labels[r]);
    }
    if (lane == 0 && corr)            /* integer atomics: order-free */
        atomicAdd((unsigned long long *)correct, corr);
}

/* Enough warps for one row each, capped at the accumulator's partials. */
static unsigned kg_row_blocks(int m, unsigned cap)
{
    unsigned b = ((unsigned)m + KG_WARPS - 1) / KG_WARPS;   /* m > 0 */
    return b < cap ? b : cap;
}

int kg_softmax_xent(int m, int c, const float *logits, const int32_t *labels,
                    float *dlogits, float scale, int count,
                    kg_xent_acc_t *acc, kg_stream_t s)
{
    if (!acc)
        return kg__fail(KG_EINVAL, "kg_softmax_xent: acc is NULL");
    if (m <= 0 || c <= 0)
        return KG_OK;                           /* as kc_softmax_xent */
    kg_xent_k<<<kg_row_blocks(m, KG_XENT_MAX_BLOCKS), KG_WARPS * KG_WARP, 0,
                s>>>(m, c, logits, labels, dlogits, scale, count, acc);
    return kg__launched();
}

int kg_count_correct(int m, int c, const float *logits, const int32_t *labels,
                     int64_t *correct, kg_stream_t s)
{
    if (!correct)
        return kg__fail(KG_EINVAL, "kg_count_correct: correct is NULL");
    if (m <= 0 || c <= 0)
        return KG_OK;
    kg_count_correct_k<<<kg_row_blocks(m, 4096), KG_WARPS * KG_WARP, 0,
                         s>>>(m, c, logits, labels, correct);
    return kg__launched();
}

/* ---- losses on dense targets ------------------------------------------- */

/* The block's loss and metric partials, then the last block adds them in
 * block order (as kg_xent_k). Called by every thread of the block. */
__device__ static void kg_finish_rows(double loss, double met,
                                      kg_xent_acc_t *acc)
{
    __shared__ double s_loss[KG_WARPS], s_met[KG_WARPS];
    const int lane = threadIdx.x % KG_WARP, warp = threadIdx.x / KG_WARP;
    if (lane == 0) {
        s_loss[warp] = loss;
        s_met[warp] = met;
    }
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    double bl = 0.0, bm = 0.0;
    for (int w = 0; w < KG_WARPS; w++) {
        bl += s_loss[w];
        bm += s_met[w];
    }
    acc->part_loss[blockIdx.x] = bl;
    acc->part_metric[blockIdx.x] = bm;
    __threadfence();
    unsigned t = atomicInc(&acc->ticket, gridDim.x - 1);
    if (t == gridDim.x - 1) {
        __threadfence();
        const volatile double *pl = acc->part_loss, *pm = acc->part_metric;
        double tl = 0.0, tm = 0.0;
        for (unsigned b = 0; b < gridDim.x; b++) {
            tl += pl[b];
            tm += pm[b];
        }
        acc->loss_sum += tl;
        acc->metric += tm;
    }
}

/* First maximum of a row of y (as kc's first_max), every lane. */
__device__ static int kg_row_first_max(const float *y, int c, int lane)
{
    float mx;
    return kg_row_argmax(y, c, lane, &mx);
}

/* The row's metric (kc_dense_loss's metric_row), every lane; x and y are
 * read before any dx is written. */
__device__ static double kg_metric_row(int kind, int metric, int c,
                                       const float *x, const float *y,
                                       int lane)
{
    double v = 0.0;
    if (metric == KOPS_METRIC_ACCURACY && kind != KOPS_LOSS_BINARY) {
        float mx;
        int ax = kg_row_argmax(x, c, lane, &mx);
        return ax == kg_row_first_max(y, c, lane) ? 1.0 : 0.0;
    }
    for (int j = lane; j < c; j += KG_WARP) {
        double d = (double)x[j] - y[j];
        v += metric == KOPS_METRIC_ACCURACY
                 ? (double)((x[j] > 0.0f) == (y[j] >= 0.5f))
                 : metric == KOPS_METRIC_MSE ? d * d : fabs(d);
    }
    return kg_warp_sum(v) / c;
}

__global__ void __launch_bounds__(KG_WARPS * KG_WARP)
kg_dense_loss_k(int kind, int metric, int m, int c, const float *x,
                const float *y, float *dx, float scale, kg_xent_acc_t *acc)
{
    const int lane = threadIdx.x % KG_WARP, warp = threadIdx.x / KG_WARP;
    const int nwarps = gridDim.x * KG_WARPS;
    double loss = 0.0, met = 0.0;     /* meaningful in lane 0 */
    const float f = scale / (float)c;
    for (int r = blockIdx.x * KG_WARPS + warp; r < m; r += nwarps) {
        const float *xr = x + (size_t)r * (size_t)c;
        const float *yr = y + (size_t)r * (size_t)c;
        float *d = dx ? dx + (size_t)r * (size_t)c : NULL;
        double rm = metric >= 0 ? kg_metric_row(kind, metric, c, xr, yr, lane)
                                : 0.0;
        double rl = 0.0;
        if (kind == KOPS_LOSS_CATEGORICAL) {
            float mx;
            kg_row_argmax(xr, c, lane, &mx);
            double se = 0.0, ys = 0.0, yx = 0.0;
            for (int j = lane; j < c; j += KG_WARP) {
                se += (double)expf(xr[j] - mx);
                ys += yr[j];
                yx += (double)yr[j] * ((double)xr[j] - mx);
            }
            se = kg_warp_sum(se);
            ys = kg_warp_sum(ys);
            yx = kg_warp_sum(yx);
            rl = ys * log(se) - yx;
            __syncwarp();
            const float g = (float)((double)scale * ys / se);
            for (int j = lane; d && j < c; j += KG_WARP) {
                float e = expf(xr[j] - mx) * g;
                d[j] = e - yr[j] * scale;
            }
        } else {
            for (int j = lane; j < c; j += KG_WARP) {
                const float xv = xr[j], yv = yr[j], dv = xv - yv;
                double v = xv, t = yv;
                if (kind == KOPS_LOSS_BINARY)
                    rl += (v > 0 ? v : 0.0) - v * t + log1p(exp(-fabs(v)));
                else
                    rl += kind == KOPS_LOSS_MSE ? (double)dv * dv
                                                : fabs((double)dv);
                if (d)
                    d[j] = kind == KOPS_LOSS_BINARY
                               ? (1.0f / (1.0f + expf(-xv)) - yv) * f
                           : kind == KOPS_LOSS_MSE ? 2.0f * dv * f
                           : (dv > 0 ? f : dv < 0 ? -f : 0.0f);
            }
            rl = kg_warp_sum(rl) / c;
        }
        if (lane == 0) {
            loss += rl;
            met += rm;
        }
        __syncwarp();
    }
    kg_finish_rows(loss, met, acc);
}

__global__ void __launch_bounds__(KG_WARPS * KG_WARP)
kg_topk_k(int m, int c, int k, const float *x, const int32_t *labels,
          const float *y, kg_xent_acc_t *acc)
{
    const int lane = threadIdx.x % KG_WARP;
    const int gw = blockIdx.x * KG_WARPS + threadIdx.x / KG_WARP;
    unsigned long long n = 0;
    for (int r = gw; r < m; r += gridDim.x * KG_WARPS) {
        const float *xr = x + (size_t)r * (size_t)c;
        int l = labels ? labels[r]
                       : kg_row_first_max(y + (size_t)r * (size_t)c, c, lane);
        if (l < 0 || l >= c)
            continue;
        int above = 0;
        for (int j = lane; j < c; j += KG_WARP)
            above += xr[j] > xr[l];
        for (int off = KG_WARP / 2; off > 0; off /= 2)
            above += __shfl_xor_sync(0xffffffffu, above, off);
        n += above < k;
    }
    if (lane == 0 && n)               /* integer atomics: order-free */
        atomicAdd((unsigned long long *)&acc->correct, n);
}

int kg_dense_loss(int kind, int metric, int m, int c, const float *x,
                  const float *y, float *dx, float scale, kg_xent_acc_t *acc,
                  kg_stream_t s)
{
    if (!acc)
        return kg__fail(KG_EINVAL, "kg_dense_loss: acc is NULL");
    if (kind < KOPS_LOSS_CATEGORICAL || kind > KOPS_LOSS_MAE)
        return kg__fail(KG_EINVAL, "kg_dense_loss: unknown loss kind");
    if (m <= 0 || c <= 0)
        return KG_OK;
    kg_dense_loss_k<<<kg_row_blocks(m, KG_XENT_MAX_BLOCKS), KG_WARPS * KG_WARP,
                      0, s>>>(kind, metric, m, c, x, y, dx, scale, acc);
    return kg__launched();
}

int kg_topk_count(int m, int c, int k, const float *x, const int32_t *labels,
                  const float *y, kg_xent_acc_t *acc, kg_stream_t s)
{
    if (!acc || (!labels && !y))
        return kg__fail(KG_EINVAL, "kg_topk_count: acc or labels is NULL");
    if (m <= 0 || c <= 0)
        return KG_OK;
    kg_topk_k<<<kg_row_blocks(m, 4096), KG_WARPS * KG_WARP, 0, s>>>(
        m, c, k, x, labels, y, acc);
    return kg__launched();
}

__global__ void kg_auc_hist_k(size_t n, const float *x, const float *y,
                              double *hist)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        int k = kops_auc_bin(1.0f / (1.0f + expf(-x[i])));
        atomicAdd(&hist[k], (double)y[i]);
        atomicAdd(&hist[KOPS_AUC_BINS + k], 1.0 - (double)y[i]);
    }
}

int kg_auc_hist(int m, int c, const float *x, const float *y,
                kg_xent_acc_t *acc, kg_stream_t s)
{
    if (!acc || !x || !y)
        return kg__fail(KG_EINVAL, "kg_auc_hist: a pointer is NULL");
    if (m <= 0 || c <= 0)
        return KG_OK;
    size_t n = (size_t)m * (size_t)c;
    unsigned blocks = (unsigned)((n + 255) / 256 < 1024 ? (n + 255) / 256
                                                         : 1024);
    kg_auc_hist_k<<<blocks, 256, 0, s>>>(n, x, y, acc->hist);
    return kg__launched();
}
