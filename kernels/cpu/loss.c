/* Fused softmax + sparse categorical cross-entropy, and accuracy counting. */
#include "kernels_cpu.h"

#include <math.h>

/* Index of the first maximum of x[0..c), c >= 1 (ties: the lowest index). */
static int argmax(int c, const float *x)
{
    int best = 0;
    float mx = x[0];
    for (int j = 1; j < c; j++) {
        if (x[j] > mx) {
            mx = x[j];
            best = j;
        }
    }
    return best;
}

/* One row: loss = log(sum_j exp(x_j - max)) - (x_label - max), which never
 * overflows (the largest term is exp(0) = 1, so the sum is in [1, c]).
 * A label outside [0, c) cannot be checked by the caller here without a
 * log, so the row's loss is NaN (visible), its gradient is the plain
 * softmax and it is never counted correct. */
double kc_softmax_xent(int m, int c, const float *logits, const int32_t *labels,
                       float *dlogits, float scale, int64_t *correct)
{
    if (m <= 0 || c <= 0)
        return 0.0;
    double loss = 0.0;
    int64_t ok = 0;
    size_t cc = (size_t)c;
    for (size_t r = 0; r < (size_t)m; r++) {
        const float *x = logits + r * cc;
        int32_t y = labels[r];
        int valid = y >= 0 && y < c;
        int am = argmax(c, x);
        float mx = x[am];
        /* Read before dlogits (which may alias logits) is written. */
        double xl = valid ? (double)x[y] : 0.0;
        double s = 0.0;
        if (dlogits) {
            float *d = dlogits + r * cc;
            for (size_t j = 0; j < cc; j++) {
                float e = expf(x[j] - mx);
                d[j] = e;
                s += e;
            }
            float f = (float)((double)scale / s);
            for (size_t j = 0; j < cc; j++)
                d[j] *= f;
            if (valid)
                d[y] -= scale;
        } else {
            for (size_t j = 0; j < cc; j++)
                s += expf(x[j] - mx);
        }
        loss += valid ? log(s) - (xl - (double)mx) : NAN;
        ok += valid && am == y;
    }
    if (correct)
        *correct += ok;
    return loss;
}

int64_t kc_count_correct(int m, int c, const float *logits, const int32_t *labels)
{
    if (m <= 0 || c <= 0)
        return 0;
    int64_t ok = 0;
    for (size_t r = 0; r < (size_t)m; r++)
        ok += argmax(c, logits + r * (size_t)c) == labels[r];
    return ok;
}
