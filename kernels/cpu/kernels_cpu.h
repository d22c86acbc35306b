/* CPU compute kernels: plain functions on raw row-major float32 pointers.
 * They know nothing of strata (no strata header, no strata types), never
 * allocate, never log, and are safe to call from many threads at once.
 * GEMM goes through CBLAS (OpenBLAS); kernels/cuda/ has a twin of each
 * function with the same arguments plus a stream. */
#ifndef STRATA_KERNELS_CPU_H
#define STRATA_KERNELS_CPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- dense layer: Y[m x n] = X[m x k] W[k x n] + b[n] ------------------ */
void kc_dense_fwd(int m, int k, int n, const float *X, const float *W,
                  const float *b, float *Y);
/* dW[k x n] = X^T dY, db[n] = column sums of dY (both overwritten);
 * dX[m x k] = dY W^T when dX != NULL (skipped for the input layer). */
void kc_dense_bwd(int m, int k, int n, const float *X, const float *W,
                  const float *dY, float *dW, float *db, float *dX);
/* Y[m x n] += b[n] ; db[n] = sum over rows of dY[m x n] */
void kc_bias_add(int m, int n, const float *b, float *Y);
void kc_bias_grad(int m, int n, const float *dY, float *db);

/* ---- activations ------------------------------------------------------ */
void kc_relu_fwd(size_t n, const float *x, float *y);       /* y may be x  */
/* dx = dy where y > 0 else 0 (y is the forward output); dx may be dy.    */
void kc_relu_bwd(size_t n, const float *y, const float *dy, float *dx);

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

/* ---- optimizer steps, in place, one fused pass ------------------------
 * wd: decoupled weight decay (Keras' weight_decay, AdamW / SGDW): each step
 * first takes w -= (lr * wd) * w, with the w before the update, then
 * applies the gradient as below. wd = 0 gives the same bits as no decay. */
/* w -= lr * g */
void kc_sgd(size_t n, float *w, const float *g, float lr, float wd);
/* v = momentum * v - lr * g ; w += v   (Keras SGD(momentum=...)) */
void kc_momentum(size_t n, float *w, const float *g, float *v, float lr,
                 float momentum, float wd);
/* Adam (Kingma & Ba), bias-corrected, step t >= 1 counts this update:
 * m = b1 m + (1-b1) g ; v = b2 v + (1-b2) g^2 ;
 * w -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
 * (the paper's and PyTorch's form; eps is added to the corrected sqrt(v)).
 * The decay uses lr itself, not the bias-corrected step (AdamW). */
void kc_adam(size_t n, float *w, const float *g, float *m, float *v, float lr,
             float b1, float b2, float eps, int64_t t, float wd);

/* ---- vector helpers used by reductions --------------------------------- */
void kc_scale(size_t n, float a, float *x);                    /* x *= a       */
void kc_axpy(size_t n, float a, const float *x, float *y);     /* y += a x     */
/* dst = srcs[0] + srcs[1] + ... in that order (bitwise deterministic);
 * dst may equal srcs[0]. nsrc >= 1. */
void kc_sum(size_t n, float *dst, const float *const *srcs, int nsrc);
/* Sum of x[i]^2 in double: 16 partial sums, element i into sum i % 16 in
 * index order, then added in lane order. Deterministic: the same bytes give
 * the same bits whatever the vector width (the global gradient norm that
 * every replica clips by). */
double kc_sumsq(size_t n, const float *x);
/* dst[i] = src[i] * scale : the per-batch uint8 -> float input scaling. */
void kc_u8_to_f32(size_t n, const uint8_t *src, float scale, float *dst);

/* ---- convolution and pooling: NHWC tensors, row-major -------------------
 * Images are X[n][h][w][c]; a conv2d kernel is W[kh][kw][c][f] (Keras's
 * layout), its output Y[n][oh][ow][f]. Padding is given explicitly (the
 * caller computes Keras's 'valid' / 'same'); taps that fall in the padding
 * read zeros. oh = (h + pad_top + pad_bottom - kh) / stride_h + 1, and the
 * same for ow; the caller fills oh/ow and guarantees oh, ow >= 1. */
typedef struct kc_conv_geom {
    int n, h, w, c;          /* input                                      */
    int kh, kw, f;           /* kernel size, filters                       */
    int stride_h, stride_w;  /* >= 1                                       */
    int pad_top, pad_left;   /* zeros before the first row / column        */
    int oh, ow;              /* output                                     */
    /* backward only: `col` still holds the forward pass's im2col of all n
     * images (the workspace held the whole batch), so it is not redone */
    int col_ready;
} kc_conv_geom_t;

/* Floats of im2col workspace that one image needs: oh*ow*kh*kw*c. The conv
 * kernels lower to GEMM one group of images at a time, as many images as
 * `col_len` floats of `col` hold (at least one: col_len >= this value). */
size_t kc_conv2d_col_len(const kc_conv_geom_t *g);
/* Y = conv(X, W) + b (b may be NULL). */
void kc_conv2d_fwd(const kc_conv_geom_t *g, const float *X, const float *W,
                   const float *b, float *Y, float *col, size_t col_len);
/* dW[kh][kw][c][f] and db[f] (overwritten; db may be NULL) from dY[n][oh][ow][f];
 * dX[n][h][w][c] = the input gradient, overwritten, when dX != NULL. */
void kc_conv2d_bwd(const kc_conv_geom_t *g, const float *X, const float *W,
                   const float *dY, float *dW, float *db, float *dX,
                   float *col, size_t col_len);

/* Max pooling, 'valid' padding: Y[n][oh][ow][c] is the max of the window
 * of ph x pw inputs at (oy*stride_h, ox*stride_w); oh = (h - ph)/stride_h + 1.
 * argmax[n*oh*ow*c] keeps, per output, the index of the chosen input
 * element within X (first maximum in row-major window order). */
typedef struct kc_pool_geom {
    int n, h, w, c;
    int ph, pw, stride_h, stride_w;
    int oh, ow;
} kc_pool_geom_t;
void kc_maxpool2d_fwd(const kc_pool_geom_t *g, const float *X, float *Y,
                      int32_t *argmax);
/* dX (n*h*w*c, overwritten) = dY routed to the argmax inputs (summed where
 * windows overlap). */
void kc_maxpool2d_bwd(const kc_pool_geom_t *g, const float *dY,
                      const int32_t *argmax, float *dX);

/* ---- inverted dropout, counter-based ------------------------------------
 * Element i is kept when kc_dropout_keep(seed, first + i, rate): the mask is
 * a pure function of (seed, element index), so forward and backward agree
 * without storing it, and a replica that holds rows [r0, r1) of a global
 * batch (first = r0 * features) draws exactly what one device would.
 * The hash is in kc_hash.h (the CUDA twin uses it too).
 * y = x * (kept ? 1 / (1 - rate) : 0) ; 0 <= rate < 1 ; y may be x. */
int  kc_dropout_keep(uint64_t seed, uint64_t index, float rate);
void kc_dropout_fwd(size_t n, const float *x, float *y, float rate,
                    uint64_t seed, uint64_t first);
/* dx = dy * (kept ? 1 / (1 - rate) : 0) ; dx may be dy. */
void kc_dropout_bwd(size_t n, const float *dy, float *dx, float rate,
                    uint64_t seed, uint64_t first);

/* tanh and the logistic sigmoid; backward from the forward OUTPUT y:
 * tanh: dx = dy * (1 - y*y) ; sigmoid: dx = dy * y * (1 - y). y may be x,
 * dx may be dy. */
void kc_tanh_fwd(size_t n, const float *x, float *y);
void kc_tanh_bwd(size_t n, const float *y, const float *dy, float *dx);
void kc_sigmoid_fwd(size_t n, const float *x, float *y);
void kc_sigmoid_bwd(size_t n, const float *y, const float *dy, float *dx);

#ifdef __cplusplus
}
#endif
#endif /* STRATA_KERNELS_CPU_H */
