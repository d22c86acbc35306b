/* Elementwise kernels: activations (and softmax, row by row), optimizer
 * steps, reduction helpers. Memory-bound grid-stride loops. The library is
 * built with -fmad=false so that a*b+c rounds twice, as in the C twin:
 * leaky_relu, SGD, momentum, RMSprop, Adagrad (IEEE division and sqrtf,
 * nvcc's default), scale, axpy, sum and u8_to_f32 give the same bits as
 * kernels/cpu. */
#include <math.h>

#include "kg_internal.h"

__global__ void kg_relu_fwd_k(size_t n, const float *x, float *y)
{
    KG_FOR(i, n) y[i] = x[i] < 0.0f ? 0.0f : x[i];   /* keeps NaN, as kc */
}

__global__ void kg_relu_bwd_k(size_t n, const float *y, const float *dy,
                              float *dx)
{
    KG_FOR(i, n) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

/* tanh and sigmoid: CUDA's tanhf / expf (a few ulps from libm); the
 * backward formulas round as the C twin's (no FMA). */
__global__ void kg_tanh_fwd_k(size_t n, const float *x, float *y)
{
    KG_FOR(i, n) y[i] = tanhf(x[i]);
}

__global__ void kg_tanh_bwd_k(size_t n, const float *y, const float *dy,
                              float *dx)
{
    KG_FOR(i, n) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

__global__ void kg_sigmoid_fwd_k(size_t n, const float *x, float *y)
{
    KG_FOR(i, n) y[i] = 1.0f / (1.0f + expf(-x[i]));
}

__global__ void kg_sigmoid_bwd_k(size_t n, const float *y, const float *dy,
                                 float *dx)
{
    KG_FOR(i, n) dx[i] = dy[i] * y[i] * (1.0f - y[i]);
}

/* Leaky ReLU: one compare, one multiply: the C twin's bits. */
__global__ void kg_leaky_relu_fwd_k(size_t n, const float *x, float *y,
                                    float alpha)
{
    KG_FOR(i, n) {
        float v = x[i];
        y[i] = v > 0.0f ? v : alpha * v;
    }
}

__global__ void kg_leaky_relu_bwd_k(size_t n, const float *x,
                                    const float *dy, float *dx, float alpha)
{
    KG_FOR(i, n) {
        float g = dy[i];
        dx[i] = x[i] > 0.0f ? g : alpha * g;
    }
}

/* GELU, exact, the C twin's expressions (kernels/cpu/activation.c) on
 * CUDA's erfcf / expf: a few ulps from libm. */
#define KG_SQRT1_2       0.70710678118654752440f
#define KG_INV_SQRT_2PI  0.39894228040143267794f

__global__ void kg_gelu_fwd_k(size_t n, const float *x, float *y)
{
    KG_FOR(i, n) {
        float v = x[i];
        float cdf = 0.5f * erfcf(-v * KG_SQRT1_2);
        y[i] = cdf == 0.0f ? 0.0f : v * cdf;
    }
}

__global__ void kg_gelu_bwd_k(size_t n, const float *x, const float *dy,
                              float *dx)
{
    KG_FOR(i, n) {
        float v = x[i];
        float cdf = 0.5f * erfcf(-v * KG_SQRT1_2);
        float pdf = expf(-0.5f * v * v) * KG_INV_SQRT_2PI;
        float slope = cdf + (pdf == 0.0f ? 0.0f : v * pdf);
        dx[i] = dy[i] * slope;
    }
}

/* Softmax over the last axis, one thread per row of c: the C twin's max,
 * sum and dot product in index order and one IEEE division per element,
 * so only expf's ulps differ. Rows are the samples (or samples x positions
 * of an image), which fills the GPU for images; a few wide flat rows use
 * few threads. */
__global__ void kg_softmax_fwd_k(size_t m, int c, const float *x, float *y)
{
    KG_FOR(i, m) {
        const float *xr = x + i * (size_t)c;
        float *yr = y + i * (size_t)c;
        float mx = xr[0];
        for (int j = 1; j < c; j++)
            mx = xr[j] > mx ? xr[j] : mx;
        float sum = 0.0f;
        for (int j = 0; j < c; j++) {
            float e = expf(xr[j] - mx);
            yr[j] = e;
            sum += e;
        }
        for (int j = 0; j < c; j++)
            yr[j] = yr[j] / sum;
    }
}

__global__ void kg_softmax_bwd_k(size_t m, int c, const float *y,
                                 const float *dy, float *dx)
{
    KG_FOR(i, m) {
        const float *yr = y + i * (size_t)c, *gr = dy + i * (size_t)c;
        float *dr = dx + i * (size_t)c;
        float dot = 0.0f;
        for (int j = 0; j < c; j++)
            dot += gr[j] * yr[j];
        for (int j = 0; j < c; j++)
            dr[j] = yr[j] * (gr[j] - dot);
    }
}

/* d = lr * wd: the decoupled weight decay, before the update (kc_*). */
__global__ void kg_sgd_k(size_t n, float *w, const float *g, float lr, float d)
{
    KG_FOR(i, n) {
        float wi = w[i] - d * w[i];
        w[i] = wi - lr * g[i];
    }
}

__global__ void kg_momentum_k(size_t n, float *w, const float *g, float *v,
                              float lr, float mom, float d)
{
    KG_FOR(i, n) {
        float wi = w[i] - d * w[i];
        float vi = mom * v[i] - lr * g[i];
        v[i] = vi;
        w[i] = wi + vi;
    }
}

/* PyTorch's arithmetic, as kc_adam: step = lr / (1 - b1^t) and
 * rsq_bc2 = 1 / sqrt(1 - b2^t), both from double on the host. */
__global__ void kg_adam_k(size_t n, float *w, const float *g, float *m,
                          float *v, float b1, float b2, float eps, float step,
                          float rsq_bc2, float d)
{
    KG_FOR(i, n) {
        float gi = g[i];
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        float wi = w[i] - d * w[i];
        m[i] = mi;
        v[i] = vi;
        w[i] = wi - step * mi / (sqrtf(vi) * rsq_bc2 + eps);
    }
}

/* Keras RMSprop, as kc_rmsprop: (lr g) / sqrt(v + eps); mom NULL: none. */
__global__ void kg_rmsprop_k(size_t n, float *w, const float *g, float *v,
                             float *mom, float lr, float rho, float mu,
                             float eps, float d)
{
    KG_FOR(i, n) {
        float gi = g[i];
        float vi = rho * v[i] + (1.0f - rho) * (gi * gi);
        float wi = w[i] - d * w[i];
        float inc = lr * gi / sqrtf(vi + eps);
        v[i] = vi;
        if (mom) {
            inc = mu * mom[i] + inc;
            mom[i] = inc;
        }
        w[i] = wi - inc;
    }
}

/* Keras Adagrad, as kc_adagrad. */
__global__ void kg_adagrad_k(size_t n, float *w, const float *g, float *acc,
                             float lr, float eps, float d)
{
    KG_FOR(i, n) {
        float gi = g[i];
        float ai = acc[i] + gi * gi;
        float wi = w[i] - d * w[i];
        acc[i] = ai;
        w[i] = wi - lr * gi / sqrtf(ai + eps);
    }
}

__global__ void kg_fill_const_k(size_t n, float *x, float a)
{
    KG_FOR(i, n) x[i] = a;
}

__global__ void kg_scale_k(size_t n, float a, float *x)
{
    KG_FOR(i, n) x[i] *= a;
}

__global__ void kg_axpy_k(size_t n, float a, const float *x, float *y)
{
    KG_FOR(i, n) y[i] += a * x[i];
}

/* Sources travel by value in the kernel's parameters: no device-side array
 * to allocate or copy. Longer lists run in chunks that continue from dst,
 * which keeps the strict left-to-right order of additions. */
enum { KG_SUM_CHUNK = 32 };
struct kg_srcs { const float *p[KG_SUM_CHUNK]; };

__global__ void kg_sum_k(size_t n, float *dst, kg_srcs src, int nsrc,
                         int from_dst)
{
    KG_FOR(i, n) {
        float acc = from_dst ? dst[i] : src.p[0][i];
        for (int j = from_dst ? 0 : 1; j < nsrc; j++)
            acc += src.p[j][i];
        dst[i] = acc;
    }
}

/* Tree sum of a block's KG_THREADS values in shared memory, in a fixed
 * order; thread 0 gets the total. */
static __device__ double kg_block_sum(double v, double *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (unsigned half = KG_THREADS / 2; half > 0; half /= 2) {
        if (threadIdx.x < half)
            sh[threadIdx.x] += sh[threadIdx.x + half];
        __syncthreads();
    }
    return sh[0];
}

/* Stage 1: block b sums elements b*T + t, b*T + t + B*T, ... per thread,
 * then its threads' sums; part[b] = the block's. */
__global__ void kg_sumsq_part_k(size_t n, const float *x, double *part)
{
    __shared__ double sh[KG_THREADS];
    double acc = 0.0;
    for (size_t i = blockIdx.x * (size_t)KG_THREADS + threadIdx.x; i < n;
         i += (size_t)KG_SUMSQ_BLOCKS * KG_THREADS)
        acc += (double)x[i] * (double)x[i];
    double s = kg_block_sum(acc, sh);
    if (threadIdx.x == 0)
        part[blockIdx.x] = s;
}

/* Stage 2, one block: the parts in the same tree order. */
__global__ void kg_sumsq_total_k(const double *part, double *out)
{
    __shared__ double sh[KG_THREADS];
    double acc = 0.0;
    for (unsigned i = threadIdx.x; i < KG_SUMSQ_BLOCKS; i += KG_THREADS)
        acc += part[i];
    double s = kg_block_sum(acc, sh);
    if (threadIdx.x == 0)
        *out = s;
}

__global__ void kg_u8_to_f32_k(size_t n, const uint8_t *src, float scale,
                               float *dst)
{
    KG_FOR(i, n) dst[i] = (float)src[i] * scale;
}

/* One thread per copied float: item i is row i / width, channel
 * i % width. */
__global__ void kg_channel_copy_k(size_t n, int width, const float *x,
                                  int x_c, int x_off, float *y, int y_c,
                                  int y_off)
{
    KG_FOR(i, n) {
        size_t r = i / (size_t)width, j = i % (size_t)width;
        y[r * (size_t)y_c + (size_t)y_off + j] =
            x[r * (size_t)x_c + (size_t)x_off + j];
    }
}

int kg_relu_fwd(size_t n, const float *x, float *y, kg_stream_t s)
{
    KG_LAUNCH(kg_relu_fwd_k, n, s, x, y);
}

int kg_relu_bwd(size_t n, const float *y, const float *dy, float *dx,
                kg_stream_t s)
{
    KG_LAUNCH(kg_relu_bwd_k, n, s, y, dy, dx);
}

int kg_tanh_fwd(size_t n, const float *x, float *y, kg_stream_t s)
{
    KG_LAUNCH(kg_tanh_fwd_k, n, s, x, y);
}

int kg_tanh_bwd(size_t n, const float *y, const float *dy, float *dx,
                kg_stream_t s)
{
    KG_LAUNCH(kg_tanh_bwd_k, n, s, y, dy, dx);
}

int kg_sigmoid_fwd(size_t n, const float *x, float *y, kg_stream_t s)
{
    KG_LAUNCH(kg_sigmoid_fwd_k, n, s, x, y);
}

int kg_sigmoid_bwd(size_t n, const float *y, const float *dy, float *dx,
                   kg_stream_t s)
{
    KG_LAUNCH(kg_sigmoid_bwd_k, n, s, y, dy, dx);
}

int kg_leaky_relu_fwd(size_t n, const float *x, float *y, float alpha,
                      kg_stream_t s)
{
    KG_LAUNCH(kg_leaky_relu_fwd_k, n, s, x, y, alpha);
}

int kg_leaky_relu_bwd(size_t n, const float *x, const float *dy, float *dx,
                      float alpha, kg_stream_t s)
{
    KG_LAUNCH(kg_leaky_relu_bwd_k, n, s, x, dy, dx, alpha);
}

int kg_gelu_fwd(size_t n, const float *x, float *y, kg_stream_t s)
{
    KG_LAUNCH(kg_gelu_fwd_k, n, s, x, y);
}

int kg_gelu_bwd(size_t n, const float *x, const float *dy, float *dx,
                kg_stream_t s)
{
    KG_LAUNCH(kg_gelu_bwd_k, n, s, x, dy, dx);
}

/* m or c <= 0: nothing, as kc. */
int kg_softmax_fwd(int m, int c, const float *x, float *y, kg_stream_t s)
{
    size_t rows = m > 0 && c > 0 ? (size_t)m : 0;
    KG_LAUNCH(kg_softmax_fwd_k, rows, s, c, x, y);
}

int kg_softmax_bwd(int m, int c, const float *y, const float *dy, float *dx,
                   kg_stream_t s)
{
    size_t rows = m > 0 && c > 0 ? (size_t)m : 0;
    KG_LAUNCH(kg_softmax_bwd_k, rows, s, c, y, dy, dx);
}

int kg_sgd(size_t n, float *w, const float *g, float lr, float wd,
           kg_stream_t s)
{
    KG_LAUNCH(kg_sgd_k, n, s, w, g, lr, lr * wd);
}

int kg_momentum(size_t n, float *w, const float *g, float *v, float lr,
                float momentum, float wd, kg_stream_t s)
{
    KG_LAUNCH(kg_momentum_k, n, s, w, g, v, lr, momentum, lr * wd);
}

int kg_adam(size_t n, float *w, const float *g, float *m, float *v, float lr,
            float b1, float b2, float eps, int64_t t, float wd, kg_stream_t s)
{
    if (t < 1)
        t = 1;              /* as kc_adam: t counts this update */
    double bc1 = 1.0 - pow((double)b1, (double)t);
    double bc2 = 1.0 - pow((double)b2, (double)t);
    float step = (float)((double)lr / bc1);
    float rsq_bc2 = (float)(1.0 / sqrt(bc2));
    KG_LAUNCH(kg_adam_k, n, s, w, g, m, v, b1, b2, eps, step, rsq_bc2,
              lr * wd);
}

int kg_rmsprop(size_t n, float *w, const float *g, float *v, float *mom,
               float lr, float rho, float momentum, float eps, float wd,
               kg_stream_t s)
{
    KG_LAUNCH(kg_rmsprop_k, n, s, w, g, v, mom, lr, rho, momentum, eps,
              lr * wd);
}

int kg_adagrad(size_t n, float *w, const float *g, float *acc, float lr,
               float eps, float wd, kg_stream_t s)
{
    KG_LAUNCH(kg_adagrad_k, n, s, w, g, acc, lr, eps, lr * wd);
}

int kg_fill_const(size_t n, float *x, float a, kg_stream_t s)
{
    KG_LAUNCH(kg_fill_const_k, n, s, x, a);
}

int kg_scale(size_t n, float a, float *x, kg_stream_t s)
{
    KG_LAUNCH(kg_scale_k, n, s, a, x);
}

int kg_axpy(size_t n, float a, const float *x, float *y, kg_stream_t s)
{
    KG_LAUNCH(kg_axpy_k, n, s, a, x, y);
}

int kg_sum(size_t n, float *dst, const float *const *srcs, int nsrc,
           kg_stream_t s)
{
    if (nsrc < 1 || n == 0)
        return KG_OK;                       /* as kc_sum */
    if (!srcs)
        return kg__fail(KG_EINVAL, "kg_sum: srcs is NULL");
    for (int at = 0; at < nsrc; at += KG_SUM_CHUNK) {
        kg_srcs chunk;
        int cnt = nsrc - at < KG_SUM_CHUNK ? nsrc - at : KG_SUM_CHUNK;
        for (int j = 0; j < KG_SUM_CHUNK; j++)
            chunk.p[j] = j < cnt ? srcs[at + j] : NULL;
        kg_sum_k<<<kg__blocks(n), KG_THREADS, 0, s>>>(n, dst, chunk, cnt,
                                                      at > 0);
        int rc = kg__launched();
        if (rc != KG_OK)
            return rc;
    }
    return KG_OK;
}

int kg_sumsq(size_t n, const float *x, double *scratch, kg_stream_t s)
{
    if (!scratch)
        return kg__fail(KG_EINVAL, "kg_sumsq: scratch is NULL");
    kg_sumsq_part_k<<<KG_SUMSQ_BLOCKS, KG_THREADS, 0, s>>>(n, x, scratch + 1);
    int rc = kg__launched();
    if (rc != KG_OK)
        return rc;
    kg_sumsq_total_k<<<1, KG_THREADS, 0, s>>>(scratch + 1, scratch);
    return kg__launched();
}

int kg_u8_to_f32(size_t n, const uint8_t *src, float scale, float *dst,
                 kg_stream_t s)
{
    KG_LAUNCH(kg_u8_to_f32_k, n, s, src, scale, dst);
}

int kg_channel_copy(size_t rows, int width, const float *x, int x_c, int x_off,
                    float *y, int y_c, int y_off, kg_stream_t s)
{
    if (width <= 0)
        return KG_OK;
    KG_LAUNCH(kg_channel_copy_k, rows * (size_t)width, s, width, x, x_c,
              x_off, y, y_c, y_off);
}
