/* Batch and layer normalisation, the twin of kernels/cpu/norm.c.
 * Sums over the rows (bn_sums, bn_bwd_sums, ln_bwd's dgamma and dbeta) run
 * in double in a fixed tree per channel, no atomics: the same input gives
 * the same bits every time, within rounding of the CPU's row-order sums,
 * not bitwise. Everything else follows the CPU's arithmetic step for step
 * (-fmad=false, IEEE division and sqrt): bn_stats, bn_norm and bn_bwd_dx
 * from the same inputs, and layernorm's rows (one thread per row, in index
 * order), give the CPU's bits. */
#include "kg_internal.h"

/* bn_sums: x and x^2. */
struct kg_bn_sums_f {
    const float *x;
    double *sums;
    int c;
    __device__ void at(size_t r, int j, double &u, double &v) const
    {
        double e = x[r * (size_t)c + j];
        u = e;
        v = e * e;
    }
    __device__ void put(int j, double a, double b) const
    {
        sums[j] = a;
        sums[c + j] = b;
    }
};

/* bn_bwd_sums: dy and dy * xhat, xhat from the channel's statistics. */
struct kg_bn_bwd_f {
    const float *x, *dy, *mean, *invstd;
    double *sums;
    float *dgamma, *dbeta;
    int c;
    __device__ void at(size_t r, int j, double &u, double &v) const
    {
        size_t i = r * (size_t)c + j;
        double xhat = ((double)x[i] - mean[j]) * invstd[j];
        u = dy[i];
        v = dy[i] * xhat;
    }
    __device__ void put(int j, double a, double b) const
    {
        sums[j] = a;
        sums[c + j] = b;
        dbeta[j] = (float)a;
        dgamma[j] = (float)b;
    }
};

/* ln_bwd's dbeta and dgamma: dy and dy * xhat, xhat from the row's. */
struct kg_ln_bwd_f {
    const float *x, *dy, *mean, *invstd;
    float *dgamma, *dbeta;
    int c;
    __device__ void at(size_t r, int j, double &u, double &v) const
    {
        size_t i = r * (size_t)c + j;
        double xhat = ((double)x[i] - mean[r]) * invstd[r];
        u = dy[i];
        v = dy[i] * xhat;
    }
    __device__ void put(int j, double a, double b) const
    {
        dbeta[j] = (float)a;
        dgamma[j] = (float)b;
    }
};

/* ---- batchnorm: per channel and elementwise, the CPU's expressions ------- */

__global__ void kg_bn_stats_k(size_t c, const double *sums, double count,
                              float eps, float momentum, float *mean,
                              float *invstd, float *mov_mean, float *mov_var)
{
    bool batch = sums && count > 0, moving = mov_mean && mov_var;
    KG_FOR(j, c) {
        double m = moving ? mov_mean[j] : 0.0, v = moving ? mov_var[j] : 1.0;
        if (batch) {
            m = sums[j] / count;
            v = sums[c + j] / count - m * m;
            if (v < 0)
                v = 0;
            if (moving) {
                mov_mean[j] = (float)((double)momentum * mov_mean[j] +
                                      (1.0 - momentum) * m);
                mov_var[j] = (float)((double)momentum * mov_var[j] +
                                     (1.0 - momentum) * v);
            }
        }
        mean[j] = (float)m;
        invstd[j] = (float)(1.0 / sqrt(v + (double)eps));
    }
}

__global__ void kg_bn_norm_k(size_t n, int c, const float *x,
                             const float *mean, const float *invstd,
                             const float *gamma, const float *beta, float *y)
{
    KG_FOR(i, n) {
        size_t j = i % (size_t)c;
        y[i] = (x[i] - mean[j]) * invstd[j] * gamma[j] + beta[j];
    }
}

__global__ void kg_bn_bwd_dx_k(size_t n, int c, const float *x,
                               const float *dy, const float *mean,
                               const float *invstd, const float *gamma,
                               const double *sums, double count, float *dx)
{
    KG_FOR(i, n) {
        size_t j = i % (size_t)c;
        double xhat = ((double)x[i] - mean[j]) * invstd[j];
        double g = (double)gamma[j] * invstd[j];
        dx[i] = (float)(g * (dy[i] - sums[j] / count -
                             xhat * sums[c + j] / count));
    }
}

/* ---- layernorm: one thread per row, the CPU's loops ------------------------ */

__global__ void kg_ln_fwd_k(size_t rows, int c, const float *x,
                            const float *gamma, const float *beta, float eps,
                            float *y, float *mean, float *invstd)
{
    KG_FOR(r, rows) {
        const float *xr = x + r * (size_t)c;
        float *yr = y + r * (size_t)c;
        double s = 0.0, ss = 0.0;
        for (int j = 0; j < c; j++)
            s += xr[j];
        double m = s / c;
        for (int j = 0; j < c; j++) {
            double d = xr[j] - m;
            ss += d * d;
        }
        float mf = (float)m, is = (float)(1.0 / sqrt(ss / c + (double)eps));
        mean[r] = mf;
        invstd[r] = is;
        for (int j = 0; j < c; j++)
            yr[j] = (xr[j] - mf) * is * gamma[j] + beta[j];
    }
}

__global__ void kg_ln_dx_k(size_t rows, int c, const float *x,
                           const float *dy, const float *mean,
                           const float *invstd, const float *gamma, float *dx)
{
    KG_FOR(r, rows) {
        const float *xr = x + r * (size_t)c, *dr = dy + r * (size_t)c;
        float *out = dx + r * (size_t)c;
        double m = mean[r], is = invstd[r], s1 = 0.0, s2 = 0.0;
        for (int j = 0; j < c; j++) {
            double g = (double)dr[j] * gamma[j];
            s1 += g;
            s2 += g * (((double)xr[j] - m) * is);
        }
        for (int j = 0; j < c; j++) {
            double g = (double)dr[j] * gamma[j];
            double xhat = ((double)xr[j] - m) * is;
            out[j] = (float)(is * (g - s1 / c - xhat * s2 / c));
        }
    }
}

/* ---- the ops: c <= 0 is nothing to do, as in the CPU twin; rows == 0
 * still writes the (zero) sums ----------------------------------------------- */

int kg_bn_sums(size_t rows, int c, const float *x, double *sums,
               kg_stream_t s)
{
    if (c <= 0)
        return KG_OK;
    return kg_colsum(rows, c, kg_bn_sums_f{ x, sums, c }, s);
}

int kg_bn_stats(int c, const double *sums, double count, float eps,
                float momentum, float *mean, float *invstd, float *mov_mean,
                float *mov_var, kg_stream_t s)
{
    size_t n = c > 0 ? (size_t)c : 0;
    KG_LAUNCH(kg_bn_stats_k, n, s, sums, count, eps, momentum, mean, invstd,
              mov_mean, mov_var);
}

int kg_bn_norm(size_t rows, int c, const float *x, const float *mean,
               const float *invstd, const float *gamma, const float *beta,
               float *y, kg_stream_t s)
{
    size_t n = c > 0 ? rows * (size_t)c : 0;
    KG_LAUNCH(kg_bn_norm_k, n, s, c, x, mean, invstd, gamma, beta, y);
}

int kg_bn_bwd_sums(size_t rows, int c, const float *x, const float *dy,
                   const float *mean, const float *invstd, double *sums,
                   float *dgamma, float *dbeta, kg_stream_t s)
{
    if (c <= 0)
        return KG_OK;
    kg_bn_bwd_f f = { x, dy, mean, invstd, sums, dgamma, dbeta, c };
    return kg_colsum(rows, c, f, s);
}

int kg_bn_bwd_dx(size_t rows, int c, const float *x, const float *dy,
                 const float *mean, const float *invstd, const float *gamma,
                 const double *sums, double count, float *dx, kg_stream_t s)
{
    size_t n = c > 0 ? rows * (size_t)c : 0;
    KG_LAUNCH(kg_bn_bwd_dx_k, n, s, c, x, dy, mean, invstd, gamma, sums,
              count, dx);
}

int kg_ln_fwd(size_t rows, int c, const float *x, const float *gamma,
              const float *beta, float eps, float *y, float *mean,
              float *invstd, kg_stream_t s)
{
    size_t n = c > 0 ? rows : 0;
    KG_LAUNCH(kg_ln_fwd_k, n, s, c, x, gamma, beta, eps, y, mean, invstd);
}

/* The column sums read dy before the rows' pass writes dx (one stream). */
int kg_ln_bwd(size_t rows, int c, const float *x, const float *dy,
              const float *mean, const float *invstd, const float *gamma,
              float *dx, float *dgamma, float *dbeta, kg_stream_t s)
{
    if (c <= 0)
        return KG_OK;
    kg_ln_bwd_f f = { x, dy, mean, invstd, dgamma, dbeta, c };
    int rc = kg_colsum(rows, c, f, s);
    if (rc != KG_OK || !dx)
        return rc;
    KG_LAUNCH(kg_ln_dx_k, rows, s, c, x, dy, mean, invstd, gamma, dx);
}
