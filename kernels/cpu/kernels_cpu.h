/* CPU compute kernels: plain functions on raw row-major float32 pointers.
 * They know nothing of strata (no strata header, no strata types), never
 * allocate, never log, and are safe to call from many threads at once.
 * GEMM goes through CBLAS (OpenBLAS); kernels/cuda/ has a twin of each
 * function with the same arguments plus a stream. */
#ifndef STRATA_KERNELS_CPU_H
#define STRATA_KERNELS_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "../kops_list.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The ops of the kernel table, declared once in ../kops_list.h (their
 * contracts are there): void kc_NAME PARAMS for each. */
#define KOP(name, blas, what, params, args, data) void kc_##name params;
#include "../kops_list.h"
#undef KOP

/* ---- the CPU kernels outside the table ----------------------------------
 * Y[m x n] += b[n] ; db[n] = sum over rows of dY[m x n], added in row
 * order in double and rounded once (a conv2d bias sums n*oh*ow rows) */
void kc_bias_add(int m, int n, const float *b, float *Y);
void kc_bias_grad(int m, int n, const float *dY, float *db);

/* ---- conv2d's paths (kc_conv2d_fwd / kc_conv2d_bwd) --------------------
 * GEMM: im2col + sgemm (one per image forward). The direct paths give the
 * same bits as each other (scalar fmaf, AVX2, AVX-512; conv_direct.h) and
 * are the default, the widest the CPU has (AVX2 + FMA at least; GEMM on
 * other CPUs), for the shapes they take (filters <= 256; with padding,
 * strides <= the kernel size); others, and any shape under KC_CONV_GEMM,
 * go through GEMM. $KC_CONV_PATH = gemm |
 * scalar | avx2 | avx512 picks one at the first call (benchmarks). */
enum { KC_CONV_AUTO, KC_CONV_GEMM, KC_CONV_SCALAR, KC_CONV_AVX2,
       KC_CONV_AVX512 };
/* Forces a path for every later call (KC_CONV_AUTO: back to the default);
 * -1 when this CPU lacks it. For tests and benchmarks: not for use while
 * another thread convolves. */
int kc_conv2d_force_path(int path);
/* The default path in words: "direct (AVX-512)", ..., "im2col + GEMM". */
const char *kc_conv2d_kernels(void);
/* The path kc_conv2d_fwd/bwd take for this geometry. */
int kc_conv2d_path(const kops_conv2d_t *g);

/* ---- mixed_bfloat16: bf16 GEMM inputs, fp32 accumulation --------------
 * Where the CPU has AVX512_BF16 (kc_bf16_usable(); never call them
 * elsewhere): conv2d and dense with their operands rounded to bf16 (round
 * to nearest even, denormals to zero: kc_bf16_of) and multiplied in pairs
 * by VDPBF16PS into fp32 accumulators; bias, outputs and gradients fp32.
 * The same arguments and results as kc_conv2d_fwd / _bwd and kc_dense_fwd /
 * _bwd, but the workspace: `work`, of work_len >= kops_conv2d_bf16_len(g)
 * or kops_dense_bf16_len(m, kk, n) floats (kops_list.h), replaces col.
 * Every output element is one fixed chain of dot-product steps that
 * depends only on the shapes (conv_bf16.c, dense_bf16.c): an image's
 * output is the same bits in any batch, any shape takes this path. */
int      kc_bf16_usable(void);
/* What multiplies: "AMX-BF16" (TDPBF16PS on tiles, where the CPU has
 * AMX-BF16 and Linux grants the tile state) or "AVX512_BF16" (VDPBF16PS on
 * vectors). The two differ in the last bits of a sum, each is one fixed
 * chain. kc_bf16_force_engine(1: AMX, 0: vectors, -1: back to the default)
 * for tests and benchmarks, not while another thread convolves: -1 when
 * this CPU cannot. */
const char *kc_bf16_engine(void);
int      kc_bf16_force_engine(int amx);
uint16_t kc_bf16_of(float x);
/* y[i] = x[i] rounded to bf16 (kc_bf16_of), as a float: the operands a
 * bf16 kernel multiplies, for references and twins (y may be x). */
void     kc_bf16_round(size_t n, const float *x, float *y);
void kc_conv2d_fwd_bf16(const kops_conv2d_t *g, const float *X,
                        const float *W, const float *b, float *Y, float *work,
                        size_t work_len);
void kc_conv2d_bwd_bf16(const kops_conv2d_t *g, const float *X,
                        const float *W, const float *dY, float *dW, float *db,
                        float *dX, float *work, size_t work_len);
/* ... through the layer's relu: dY masked in place where Y <= 0 and db
 * summed from it first, as kc_relu_bias_grad then kc_conv2d_bwd_bf16 (the
 * same bits), a few images at a time. */
void kc_conv2d_bwd_relu_bf16(const kops_conv2d_t *g, const float *X,
                             const float *W, const float *Y, float *dY,
                             float *dW, float *db, float *dX, float *work,
                             size_t work_len);
void kc_dense_fwd_bf16(int m, int kk, int n, const float *X, const float *W,
                       const float *b, float *Y, float *work, size_t work_len);
void kc_dense_bwd_bf16(int m, int kk, int n, const float *X, const float *W,
                       const float *dY, float *dW, float *db, float *dX,
                       float *work, size_t work_len);

/* ---- fused softmax + sparse categorical cross-entropy ------------------
 * logits[m x c], labels[m] in [0, c). Numerically stable (max-shifted,
 * log-sum-exp). Returns the SUM over rows of -log softmax(logits)[label]
 * (double). When dlogits != NULL also writes
 *   dlogits = (softmax(logits) - onehot(label)) * scale
 * (scale = 1/global_batch for a mean loss); dlogits may alias logits.
 * When correct != NULL adds the number of rows whose argmax == label. */
double kc_softmax_xent(int m, int c, const float *logits, const int32_t *labels,
                       float *dlogits, float scale, int64_t *correct);
/* Rows of logits[m x c] whose argmax (first on ties) equals the label. */
int64_t kc_count_correct(int m, int c, const float *logits, const int32_t *labels);

/* ---- losses on dense targets --------------------------------------------
 * x[m x c] the last layer's outputs (logits for the cross-entropies), y[m x
 * c] the targets (float32); kind and metric as in kops_list.h. Returns the
 * SUM over rows of the row loss:
 *   KOPS_LOSS_CATEGORICAL  -sum_j y_j log softmax(x)_j (one-hot or soft)
 *   KOPS_LOSS_BINARY       mean_j of sigmoid cross-entropy (multi-label)
 *   KOPS_LOSS_MSE          mean_j (x_j - y_j)^2
 *   KOPS_LOSS_MAE          mean_j |x_j - y_j|
 * dx (may be NULL, may alias x) = d(row loss)/dx * scale. When metric >= 0
 * and msum != NULL, adds the sum over rows of the row metric:
 *   KOPS_METRIC_ACCURACY   categorical: argmax x == argmax y (first on ties);
 *                        binary: mean_j [x_j > 0 (sigmoid > 0.5)] ==
 *                        [y_j >= 0.5]
 *   KOPS_METRIC_MAE / MSE  mean_j |x_j - y_j| / (x_j - y_j)^2 */
double kc_dense_loss(int kind, int metric, int m, int c, const float *x,
                     const float *y, float *dx, float scale, double *msum);
/* Keras's AUC, accumulated: for each of the m x c logits x (sigmoid) and
 * labels y in [0, 1], hist[bin] += y and hist[KOPS_AUC_BINS + bin] += 1 - y
 * (kops_list.h's bins); kc_auc reads the ROC area off such a histogram
 * (trapezoids over the 200 thresholds, Keras's summation_method =
 * 'interpolation'; 0 without positives or negatives). */
void   kc_auc_hist(int m, int c, const float *x, const float *y, double *hist);
double kc_auc(const double *hist);
/* Rows whose label is in the top k of x[m x c] (fewer than k scores
 * strictly larger): the label labels[r], or with labels NULL the first
 * maximum of y[r]. */
int64_t kc_topk_count(int m, int c, int k, const float *x,
                      const int32_t *labels, const float *y);

/* Sum of x[i]^2 in double: 16 partial sums, element i into sum i % 16 in
 * index order, then added in lane order. Deterministic: the same bytes give
 * the same bits whatever the vector width (the global gradient norm that
 * every replica clips by). */
double kc_sumsq(size_t n, const float *x);

/* kops_conv2d_col_len(g), the im2col workspace of one image. */
size_t kc_conv2d_col_len(const kops_conv2d_t *g);

/* Whether dropout keeps element `index` (see dropout_fwd in the list). */
int  kc_dropout_keep(uint64_t seed, uint64_t index, float rate);

#ifdef __cplusplus
}
#endif
#endif /* STRATA_KERNELS_CPU_H */
