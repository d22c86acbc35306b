/* Losses on dense targets (one-hot or soft labels, multi-label, regression)
 * and the metrics read off them; top-k accuracy of class scores. */
#include "kernels_cpu.h"

#include <math.h>

/* Index of the first maximum of x[0..c), c >= 1. */
static int first_max(int c, const float *x)
{
    int best = 0;
    for (int j = 1; j < c; j++)
        if (x[j] > x[best])
            best = j;
    return best;
}

/* softmax(x) * sum(y) - y: the exact gradient of -sum y log softmax(x),
 * which is the plain (softmax - y) of one-hot or soft labels summing to 1.
 * Returns the row's loss: sum(y) * logsumexp - sum(y * x), max-shifted. */
static double categorical_row(int c, const float *x, const float *y,
                              float *dx, float scale)
{
    float mx = x[first_max(c, x)];
    double s = 0.0, ysum = 0.0, yx = 0.0;
    for (int j = 0; j < c; j++) {
        s += expf(x[j] - mx);
        ysum += y[j];
        yx += (double)y[j] * ((double)x[j] - mx);
    }
    double loss = ysum * log(s) - yx;
    if (dx) {
        float f = (float)((double)scale * ysum / s);
        for (int j = 0; j < c; j++) {
            float e = expf(x[j] - mx) * f;   /* x read before dx written */
            dx[j] = e - y[j] * scale;
        }
    }
    return loss;
}

/* Keras's binary_crossentropy from logits, averaged over the row:
 * max(x, 0) - x y + log(1 + exp(-|x|)); gradient (sigmoid(x) - y) / c. */
static double binary_row(int c, const float *x, const float *y, float *dx,
                         float scale)
{
    double loss = 0.0;
    float f = scale / (float)c;
    for (int j = 0; j < c; j++) {
        double v = x[j], t = y[j];
        loss += (v > 0 ? v : 0.0) - v * t + log1p(exp(-fabs(v)));
        if (dx) {
            float p = 1.0f / (1.0f + expf(-x[j]));
            dx[j] = (p - y[j]) * f;
        }
    }
    return loss / c;
}

/* mse: mean (x - y)^2, gradient 2 (x - y) / c; mae: mean |x - y|,
 * gradient sign(x - y) / c (0 where they are equal, as TensorFlow). */
static double regression_row(int kind, int c, const float *x, const float *y,
                             float *dx, float scale)
{
    double loss = 0.0;
    float f = scale / (float)c;
    for (int j = 0; j < c; j++) {
        float d = x[j] - y[j];
        loss += kind == KOPS_LOSS_MSE ? (double)d * d : fabs((double)d);
        if (dx)
            dx[j] = kind == KOPS_LOSS_MSE ? 2.0f * d * f
                    : (d > 0 ? f : d < 0 ? -f : 0.0f);
    }
    return loss / c;
}

/* The row's metric, from x and y before dx (which may alias x) is written. */
static double metric_row(int kind, int metric, int c, const float *x,
                         const float *y)
{
    double v = 0.0;
    switch (metric) {
    case KOPS_METRIC_ACCURACY:
        if (kind != KOPS_LOSS_BINARY)
            return first_max(c, x) == first_max(c, y);
        for (int j = 0; j < c; j++)     /* sigmoid(x) > 0.5 <=> x > 0 */
            v += (x[j] > 0.0f) == (y[j] >= 0.5f);
        return v / c;
    case KOPS_METRIC_MAE:
    case KOPS_METRIC_MSE:
        for (int j = 0; j < c; j++) {
            double d = (double)x[j] - y[j];
            v += metric == KOPS_METRIC_MSE ? d * d : fabs(d);
        }
        return v / c;
    }
    return 0.0;
}

double kc_dense_loss(int kind, int metric, int m, int c, const float *x,
                     const float *y, float *dx, float scale, double *msum)
{
    if (m <= 0 || c <= 0)
        return 0.0;
    double loss = 0.0, met = 0.0;
    size_t cc = (size_t)c;
    for (size_t r = 0; r < (size_t)m; r++) {
        const float *xr = x + r * cc, *yr = y + r * cc;
        float *d = dx ? dx + r * cc : NULL;
        if (metric >= 0)
            met += metric_row(kind, metric, c, xr, yr);
        switch (kind) {
        case KOPS_LOSS_CATEGORICAL:
            loss += categorical_row(c, xr, yr, d, scale);
            break;
        case KOPS_LOSS_BINARY:
            loss += binary_row(c, xr, yr, d, scale);
            break;
        default:
            loss += regression_row(kind, c, xr, yr, d, scale);
            break;
        }
    }
    if (msum)
        *msum += met;
    return loss;
}

/* in_top_k: the label's score is among the k largest when fewer than k
 * scores are strictly larger (ties count in, as TensorFlow's in_top_k). */
int64_t kc_topk_count(int m, int c, int k, const float *x,
                      const int32_t *labels, const float *y)
{
    int64_t n = 0;
    for (size_t r = 0; m > 0 && c > 0 && r < (size_t)m; r++) {
        const float *xr = x + r * (size_t)c;
        int l = labels ? labels[r] : first_max(c, y + r * (size_t)c);
        if (l < 0 || l >= c)
            continue;
        int above = 0;
        for (int j = 0; j < c; j++)
            above += xr[j] > xr[l];
        n += above < k;
    }
    return n;
}

void kc_auc_hist(int m, int c, const float *x, const float *y, double *hist)
{
    size_t n = m > 0 && c > 0 ? (size_t)m * (size_t)c : 0;
    for (size_t i = 0; i < n; i++) {
        int k = kops_auc_bin(1.0f / (1.0f + expf(-x[i])));
        hist[k] += y[i];
        hist[KOPS_AUC_BINS + k] += 1.0 - y[i];
    }
}

double kc_auc(const double *hist)
{
    /* TP_i, FP_i: the weights of bins above threshold i (p > t_i) */
    double pos = 0.0, neg = 0.0;
    for (int k = 0; k < KOPS_AUC_BINS; k++) {
        pos += hist[k];
        neg += hist[KOPS_AUC_BINS + k];
    }
    if (!(pos > 0.0) || !(neg > 0.0))
        return 0.0;
    double tp = pos, fp = neg, auc = 0.0;
    double tpr_prev = 0.0, fpr_prev = 0.0;
    for (int i = 0; i < KOPS_AUC_THRESHOLDS; i++) {
        tp -= hist[i];               /* bins 0 .. i are at or below t_i */
        fp -= hist[KOPS_AUC_BINS + i];
        double tpr = tp / pos, fpr = fp / neg;
        if (i > 0)
            auc += (fpr_prev - fpr) * (tpr_prev + tpr) / 2.0;
        tpr_prev = tpr;
        fpr_prev = fpr;
    }
    return auc;
}
