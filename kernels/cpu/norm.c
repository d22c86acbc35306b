/* Batch normalisation: per-channel sums in double, in row order, and the
 * normalisation and its gradient from them (kops_list.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_cpu.h"
#include "kc_loop.h"

KC_HOT void kc_bn_sums(size_t rows, int c, const float *x, double *sums)
{
    double *s1 = sums, *s2 = sums + c;
    memset(sums, 0, 2 * (size_t)c * sizeof *sums);
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * (size_t)c;
        for (int j = 0; j < c; j++) {
            double v = xr[j];
            s1[j] += v;
            s2[j] += v * v;
        }
    }
}

KC_HOT void kc_bn_stats(int c, const double *sums, double count, float eps,
                        float momentum, float *mean, float *invstd,
                        float *mov_mean, float *mov_var)
{
    int batch = sums && count > 0, moving = mov_mean && mov_var;
    for (int j = 0; j < c; j++) {
        double m = moving ? mov_mean[j] : 0.0, v = moving ? mov_var[j] : 1.0;
        if (batch) {
            m = sums[j] / count;
            v = sums[c + j] / count - m * m;
            if (v < 0)
                v = 0; /* rounding, for a constant channel */
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

KC_HOT void kc_bn_norm(size_t rows, int c, const float *x, const float *mean,
                       const float *invstd, const float *gamma,
                       const float *beta, float *y)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * (size_t)c;
        float *yr = y + r * (size_t)c;
        for (int j = 0; j < c; j++)
            yr[j] = (xr[j] - mean[j]) * invstd[j] * gamma[j] + beta[j];
    }
}

KC_HOT void kc_bn_bwd_sums(size_t rows, int c, const float *x,
                           const float *dy, const float *mean,
                           const float *invstd, double *sums, float *dgamma,
                           float *dbeta)
{
    double *s1 = sums, *s2 = sums + c;
    memset(sums, 0, 2 * (size_t)c * sizeof *sums);
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * (size_t)c, *dr = dy + r * (size_t)c;
        for (int j = 0; j < c; j++) {
            double xhat = ((double)xr[j] - mean[j]) * invstd[j];
            s1[j] += dr[j];
            s2[j] += dr[j] * xhat;
        }
    }
    for (int j = 0; j < c; j++) {
        dbeta[j] = (float)s1[j];
        dgamma[j] = (float)s2[j];
    }
}

/* The per-channel factors are taken out of the row loop (the same values:
 * the division of the second sum by count stays per element, so the bits
 * are those of the expression written out, the GPU's among them). */
enum { KC_BN_BLOCK = 64 };

KC_HOT void kc_bn_bwd_dx(size_t rows, int c, const float *x, const float *dy,
                         const float *mean, const float *invstd,
                         const float *gamma, const double *sums, double count,
                         float *dx)
{
    double g[KC_BN_BLOCK], a[KC_BN_BLOCK], m[KC_BN_BLOCK], is[KC_BN_BLOCK];
    for (int j0 = 0; j0 < c; j0 += KC_BN_BLOCK) {
        int w = c - j0 < KC_BN_BLOCK ? c - j0 : KC_BN_BLOCK;
        const double *s2 = sums + c + j0;
        for (int j = 0; j < w; j++) {
            g[j] = (double)gamma[j0 + j] * invstd[j0 + j];
            a[j] = sums[j0 + j] / count;
            m[j] = mean[j0 + j];
            is[j] = invstd[j0 + j];
        }
        for (size_t r = 0; r < rows; r++) {
            size_t o = r * (size_t)c + (size_t)j0;
            const float *xr = x + o, *dr = dy + o;
            float *out = dx + o;
            for (int j = 0; j < w; j++) {
                double xhat = ((double)xr[j] - m[j]) * is[j];
                out[j] = (float)(g[j] * (dr[j] - a[j] - xhat * s2[j] / count));
            }
        }
    }
}

/* Layer normalisation: each row over its own c values (kops_list.h). */
KC_HOT void kc_ln_fwd(size_t rows, int c, const float *x, const float *gamma,
                      const float *beta, float eps, float *y, float *mean,
                      float *invstd)
{
    for (size_t r = 0; r < rows; r++) {
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

/* dgamma and dbeta: column sums in row order, for blocks of channels at a
 * time in double on the stack (kernels never allocate). */
enum { KC_LN_BLOCK = 64 };

static void ln_param_grads(size_t rows, int c, const float *x,
                           const float *dy, const float *mean,
                           const float *invstd, float *dgamma, float *dbeta)
{
    for (int j0 = 0; j0 < c; j0 += KC_LN_BLOCK) {
        int nj = c - j0 < KC_LN_BLOCK ? c - j0 : KC_LN_BLOCK;
        double sg[KC_LN_BLOCK] = { 0 }, sb[KC_LN_BLOCK] = { 0 };
        for (size_t r = 0; r < rows; r++) {
            const float *xr = x + r * (size_t)c + j0;
            const float *dr = dy + r * (size_t)c + j0;
            for (int j = 0; j < nj; j++) {
                double xhat = ((double)xr[j] - mean[r]) * invstd[r];
                sb[j] += dr[j];
                sg[j] += dr[j] * xhat;
            }
        }
        for (int j = 0; j < nj; j++) {
            dgamma[j0 + j] = (float)sg[j];
            dbeta[j0 + j] = (float)sb[j];
        }
    }
}

KC_HOT void kc_ln_bwd(size_t rows, int c, const float *x, const float *dy,
                      const float *mean, const float *invstd,
                      const float *gamma, float *dx, float *dgamma,
                      float *dbeta)
{
    ln_param_grads(rows, c, x, dy, mean, invstd, dgamma, dbeta);
    if (!dx)
        return;
    for (size_t r = 0; r < rows; r++) {
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
