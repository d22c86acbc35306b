/* The kernel op list: the one place where an op of the per-device kernel
 * table is declared -- its name, its arguments, the data it touches -- and
 * the geometry structs that the CPU and CUDA kernels share. Like every file
 * of kernels/ it knows nothing of strata.
 *
 * An X-macro list (the .def pattern): define KOP, include this file, undef
 * KOP. Each entry expands to what the includer makes of it:
 *   kernels/cpu/kernels_cpu.h     void kc_NAME PARAMS;
 *   kernels/cuda/kernels_cuda.h   int kg_NAME([kg_blas_t h,] PARAMS..., kg_stream_t s);
 *   core/device/kops.h            int (*NAME)(strata__kdev_t *k, PARAMS...);
 *   core/device/kops_cpu.c        the CPU table's wrapper: kc_NAME ARGS
 *   core/device/cuda/kops_cuda.c  the CUDA table's wrapper: kg_NAME(...)
 *   tests/gpu/fake_kg.c           kg_NAME on the CPU: checks DATA, then kc_NAME
 * Without KOP defined, this file gives the shared types only.
 *
 *   KOP(NAME, BLAS, WHAT, PARAMS, ARGS, DATA)
 *   NAME    the op: kc_NAME, kg_NAME, kops->NAME
 *   BLAS    1: the CUDA kernel takes a cuBLAS handle first; 0: not
 *   WHAT    what it does, for error lines ("conv2d forward")
 *   PARAMS  the parameter list, parenthesised, the same on every device
 *   ARGS    those parameters' names, parenthesised, to pass them on
 *   DATA    the op's contract on its arguments, a parenthesised sequence of
 *           KOP_REQ(cond)       cond holds, else the call is invalid
 *           KOP_NOOP(cond)      cond: nothing to do, no pointer is read
 *           KOP_DEV(p, bytes)   p is device memory of at least bytes
 *           KOP_OPT(p, bytes)   the same, or p == NULL
 *           KOP_DEVS(pp, n, bytes)  pp: a HOST array of n device
 *                               pointers of bytes each
 *           checked in order by the fake CUDA library, documentation
 *           elsewhere.
 *
 * Adding an op: one entry here, kc_NAME in kernels/cpu, kg_NAME in
 * kernels/cuda; the tables, prototypes and the fake follow. The kernel
 * table's special members (memory, the loss accumulator, sumsq) are not
 * here: their CPU and CUDA forms differ. */
#ifndef STRATA_KOPS_LIST_TYPES_H
#define STRATA_KOPS_LIST_TYPES_H

#include <stddef.h>
#include <stdint.h>

/* Expands a parenthesised list to its contents: KOP_UNPAREN PARAMS. */
#define KOP_UNPAREN(...) __VA_ARGS__

/* Elements of an a x b x c x d tensor; a size <= 0 counts as 0 (empty). */
static inline size_t kops_n4(int a, int b, int c, int d)
{
    if (a <= 0 || b <= 0 || c <= 0 || d <= 0)
        return 0;
    return (size_t)a * (size_t)b * (size_t)c * (size_t)d;
}
#define KOP_F(n) ((size_t)(n) * sizeof(float))
#define KOP_MN(a, b) ((a) > 0 && (b) > 0 ? (size_t)(a) * (size_t)(b) : 0)

/* ---- losses on dense targets (kc_dense_loss, kg_dense_loss) ------------- */
enum { KOPS_LOSS_CATEGORICAL = 1, KOPS_LOSS_BINARY = 2, KOPS_LOSS_MSE = 3,
       KOPS_LOSS_MAE = 4 };
enum { KOPS_METRIC_ACCURACY = 0, KOPS_METRIC_MAE = 1, KOPS_METRIC_MSE = 2,
       KOPS_METRIC_AUC = 3 /* not a row sum: kc_auc_hist */ };

/* Keras's AUC (num_thresholds = 200): thresholds t_0 = -1e-7, t_i = i / 199
 * (i = 1 .. 198, as float32), t_199 = 1 + 1e-7. A prediction p = sigmoid(x)
 * falls in bin k = the number of thresholds below it (0 .. 200); hist[k]
 * adds its label y (the positive weight), hist[KOPS_AUC_BINS + k] 1 - y. */
#define KOPS_AUC_THRESHOLDS 200
#define KOPS_AUC_BINS (KOPS_AUC_THRESHOLDS + 1)
#ifdef __CUDACC__
#define KOPS_HD __host__ __device__
#else
#define KOPS_HD
#endif
static inline KOPS_HD float kops_auc_threshold(int i)
{
    return i == 0 ? -1e-7f
           : i == KOPS_AUC_THRESHOLDS - 1 ? 1.0f + 1e-7f
           : (float)((double)i / (KOPS_AUC_THRESHOLDS - 1));
}
/* The bin of p: thresholds strictly below it (binary search). */
static inline KOPS_HD int kops_auc_bin(float p)
{
    int lo = 0, hi = KOPS_AUC_THRESHOLDS;  /* answer in [lo, hi] */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (kops_auc_threshold(mid) < p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ---- convolution and pooling: NHWC tensors, row-major -------------------
 * Images are X[n][h][w][c]; a conv2d kernel is W[kh][kw][c][f] (Keras's
 * layout), its output Y[n][oh][ow][f]. Padding is given explicitly (the
 * caller computes Keras's 'valid' / 'same'); taps that fall in the padding
 * read zeros. oh = (h + pad_top + pad_bottom - kh) / stride_h + 1, and the
 * same for ow; the caller fills oh/ow and guarantees oh, ow >= 1. On a GPU
 * the geometry is read on the host during the call. */
typedef struct kops_conv2d {
    int n, h, w, c;          /* input                                      */
    int kh, kw, f;           /* kernel size, filters                       */
    int stride_h, stride_w;  /* >= 1                                       */
    int pad_top, pad_left;   /* zeros before the first row / column        */
    int oh, ow;              /* output                                     */
    /* backward only: `col` still holds the forward pass's im2col of all n
     * images (the workspace held the whole batch), so it is not redone
     * (read only where both passes take the GEMM path: the CPU's direct
     * path leaves no im2col there) */
    int col_ready;
    /* forward only: Y goes through ReLU (x < 0 ? 0 : x, kc_relu_fwd's
     * bits) image by image while it is in cache -- the conv2d layer's own
     * relu, fused: one pass over Y less */
    int relu;
} kops_conv2d_t;

/* Floats of im2col workspace that one image needs: oh*ow*kh*kw*c. The conv
 * kernels lower to GEMM one group of images at a time, as many images as
 * `col_len` floats of `col` hold (at least one: col_len >= this value). */
static inline size_t kops_conv2d_col_len(const kops_conv2d_t *g)
{
    return (size_t)g->oh * g->ow * g->kh * g->kw * g->c;
}

/* mixed_bfloat16 on the CPU (kernels_cpu.h's kc_conv2d_fwd_bf16 /
 * kc_conv2d_bwd_bf16): the floats of workspace a call needs, whatever g->n
 * -- the weights packed as bf16 pairs along the reduction, and one image's
 * operands in bf16 (a forward's padded input; dW's input pairs per kernel
 * column and dY's pairs; dX's padded or plain dY). The backward holds dW's
 * part and dX's side by side: it takes the batch a few images at a time
 * through both. */
static inline size_t kops_conv2d_bf16_dw_len(const kops_conv2d_t *g)
{
    size_t C = (size_t)g->c, F = (size_t)g->f, ow2 = ((size_t)g->ow + 1) / 2;
    size_t hp = (size_t)(g->oh - 1) * g->stride_h + g->kh;
    return (size_t)g->kw * hp * ow2 * C + (size_t)g->oh * ow2 * F;
}

static inline size_t kops_conv2d_bf16_len(const kops_conv2d_t *g)
{
    size_t C = (size_t)g->c, F = (size_t)g->f, T = (size_t)g->kh * g->kw;
    size_t Ch = (C + 1) / 2, Fh = (F + 1) / 2;
    size_t hp = (size_t)(g->oh - 1) * g->stride_h + g->kh;
    size_t wp = (size_t)(g->ow - 1) * g->stride_w + g->kw;
    size_t hq = (size_t)g->h + g->kh - 1, wq = (size_t)g->w + g->kw - 1;
    size_t plane = (size_t)g->oh * g->ow;
    size_t fwd = T * Ch * F + hp * wp * Ch;
    size_t bwd = kops_conv2d_bf16_dw_len(g) + T * Fh * C +
                 (hq * wq > plane ? hq * wq : plane) * Fh;
    return fwd > bwd ? fwd : bwd;
}

/* ... and kc_dense_fwd_bf16 / kc_dense_bwd_bf16's, for m rows of kk inputs
 * and n outputs: X and W in bf16 pairs forward, dY with X's or W's pairs
 * backward. */
static inline size_t kops_dense_bf16_len(int m, int kk, int n)
{
    size_t M = m > 0 ? (size_t)m : 0, K = kk > 0 ? (size_t)kk : 0;
    size_t N = n > 0 ? (size_t)n : 0;
    size_t Mh = (M + 1) / 2, Kh = (K + 1) / 2, Nh = (N + 1) / 2;
    size_t fwd = M * Kh + Kh * N;
    size_t dw = Mh * K + Mh * N, dx = M * Nh + Nh * K;
    size_t len = fwd > dw ? fwd : dw;
    return len > dx ? len : dx;
}

/* mixed_bfloat16 on a GPU (kernels/cuda: kg_conv2d_fwd_bf16 / _bwd_bf16,
 * kg_dense_fwd_bf16 / _bwd_bf16: cuBLAS GEMMs on bf16 copies of the
 * operands, fp32 accumulation and outputs). The workspace is carved in
 * parts of whole 256-byte lines (cuBLAS's alignment for tensor cores);
 * kops_bf16_part: the floats of the part that holds `halves` bf16 values. */
static inline size_t kops_bf16_part(size_t halves)
{
    return ((halves + 1) / 2 + 63) / 64 * 64;
}

/* conv2d, `group` images at once: W, the group's im2col and its dY in
 * bf16, and the group's dX columns in fp32. The kernels take as many
 * images at once as their work_len holds (at least one). */
static inline size_t kops_conv2d_bf16_gpu_len(const kops_conv2d_t *g,
                                              size_t group)
{
    size_t K = (size_t)g->kh * g->kw * g->c, F = (size_t)g->f;
    size_t rows = group * (size_t)g->oh * g->ow;
    return kops_bf16_part(K * F) + kops_bf16_part(rows * K) +
           kops_bf16_part(rows * F) + kops_bf16_part(2 * rows * K);
}

/* dense, m rows of kk inputs and n outputs: X, W and dY in bf16. */
static inline size_t kops_dense_bf16_gpu_len(int m, int kk, int n)
{
    size_t M = m > 0 ? (size_t)m : 0, K = kk > 0 ? (size_t)kk : 0;
    size_t N = n > 0 ? (size_t)n : 0;
    return kops_bf16_part(M * K) + kops_bf16_part(K * N) +
           kops_bf16_part(M * N);
}

/* Pooling (maxpool2d, avgpool2d), 'valid' windows: output (oy, ox) covers
 * the ph x pw inputs from (oy*stride_h, ox*stride_w); oh = (h - ph) /
 * stride_h + 1, the same for ow, filled by the caller (>= 1). */
typedef struct kops_pool2d {
    int n, h, w, c;
    int ph, pw, stride_h, stride_w;
    int oh, ow;
} kops_pool2d_t;

/* ---- embeddings: rows of a table W[vocab x dim] picked by ids -----------
 * ids[m x k] int32, one row of k per sample: a row of W, or -1, padding
 * (no id: TF's sparse tensors leave the entry out). The data layer refuses
 * anything else at load; a kernel reads an id outside [0, vocab) as
 * padding. How a sample's k rows are combined: */
enum { KOPS_EMB_NONE = 0, /* side by side: k * dim outputs per sample    */
       KOPS_EMB_SUM = 1,  /* summed in column order: dim outputs          */
       KOPS_EMB_MEAN = 2  /* the sum times 1 / (its real ids), 0 without */
};
static inline KOPS_HD int kops_emb_real(int32_t id, int vocab)
{
    return id >= 0 && id < vocab;
}
/* The factor a sample's rows get: 1 / (its real ids) for MEAN (0 when it
 * has none), else 1. The same float on every device. */
static inline KOPS_HD float kops_emb_scale(const int32_t *ids, int k,
                                           int vocab, int comb)
{
    if (comb != KOPS_EMB_MEAN)
        return 1.0f;
    int c = 0;
    for (int j = 0; j < k; j++)
        c += kops_emb_real(ids[j], vocab);
    return c ? 1.0f / (float)c : 0.0f;
}
/* int32 scratch of the backward ops for n = m * k ids: a GPU's sort (6n),
 * the CPU's sparse form (4n). */
#define KOPS_EMB_WORK(n) (6 * (size_t)(n))

#endif /* STRATA_KOPS_LIST_TYPES_H */

#ifdef KOP

/* ---- dense layer: Y[m x n] = X[m x kk] W[kk x n] + b[n] -----------------
 * b may be NULL (no bias). The CPU's own kernels where the CPU has AVX2
 * or AVX-512 (kernels/cpu/dense.c), else OpenBLAS; cuBLAS on a GPU. */
KOP(dense_fwd, 1, "dense forward",
    (int m, int kk, int n, const float *X, const float *W, const float *b,
     float *Y),
    (m, kk, n, X, W, b, Y),
    (KOP_DEV(X, KOP_F(KOP_MN(m, kk))) KOP_DEV(W, KOP_F(KOP_MN(kk, n)))
     KOP_DEV(b, KOP_F(n > 0 ? n : 0)) KOP_DEV(Y, KOP_F(KOP_MN(m, n)))))
/* dW[kk x n] = X^T dY, db[n] = column sums of dY (both overwritten);
 * dX[m x kk] = dY W^T when dX != NULL (skipped for the input layer). */
KOP(dense_bwd, 1, "dense backward",
    (int m, int kk, int n, const float *X, const float *W, const float *dY,
     float *dW, float *db, float *dX),
    (m, kk, n, X, W, dY, dW, db, dX),
    (KOP_DEV(X, KOP_F(KOP_MN(m, kk))) KOP_DEV(W, KOP_F(KOP_MN(kk, n)))
     KOP_DEV(dY, KOP_F(KOP_MN(m, n))) KOP_DEV(dW, KOP_F(KOP_MN(kk, n)))
     KOP_DEV(db, KOP_F(n > 0 ? n : 0)) KOP_OPT(dX, KOP_F(KOP_MN(m, kk)))))

/* ---- activations: y may be x; backward from the forward OUTPUT y, dx may
 * be dy. relu: dx = dy where y > 0 else 0; tanh: dx = dy * (1 - y*y);
 * sigmoid: dx = dy * y * (1 - y). On a GPU tanh and sigmoid forward go
 * through CUDA's tanhf / expf: within a few ulps of libm, not bitwise. */
#define KOP_ACT(name, fwd, bwd)                                              \
    KOP(name##_fwd, 0, fwd, (size_t n, const float *x, float *y), (n, x, y), \
        (KOP_DEV(x, KOP_F(n)) KOP_DEV(y, KOP_F(n))))                         \
    KOP(name##_bwd, 0, bwd,                                                  \
        (size_t n, const float *y, const float *dy, float *dx),              \
        (n, y, dy, dx),                                                      \
        (KOP_DEV(y, KOP_F(n)) KOP_DEV(dy, KOP_F(n)) KOP_DEV(dx, KOP_F(n))))
KOP_ACT(relu, "relu forward", "relu backward")
KOP_ACT(tanh, "tanh forward", "tanh backward")
KOP_ACT(sigmoid, "sigmoid forward", "sigmoid backward")
#undef KOP_ACT
/* relu backward fused with the bias gradient of the layer before it, for
 * dy[m x n] of rows of n channels: dy = y > 0 ? dy : 0 in place (relu_bwd's
 * bits), and when db != NULL db[j] = the sum of dy's column j over the
 * rows in order, in double, rounded once (the bias gradient's bits, 0 for
 * m <= 0). One pass over dy where the two took two. */
KOP(relu_bias_grad, 0, "relu backward and bias gradient",
    (int m, int n, const float *y, float *dy, float *db), (m, n, y, dy, db),
    (KOP_NOOP(n <= 0) KOP_DEV(y, KOP_F(KOP_MN(m, n)))
     KOP_DEV(dy, KOP_F(KOP_MN(m, n))) KOP_OPT(db, KOP_F(n))))

/* ---- the activation layers' own ops (relu, tanh, sigmoid above serve
 * those layers too). Backward from the forward INPUT x here; y may be x,
 * dx may be dy.
 * leaky_relu (Keras's LeakyReLU, alpha >= 0): y = x > 0 ? x : alpha * x
 * (NaN stays NaN); dx = dy where x > 0, else alpha * dy. The same bits on
 * every device. */
KOP(leaky_relu_fwd, 0, "leaky_relu forward",
    (size_t n, const float *x, float *y, float alpha),
    (n, x, y, alpha),
    (KOP_DEV(x, KOP_F(n)) KOP_DEV(y, KOP_F(n))))
KOP(leaky_relu_bwd, 0, "leaky_relu backward",
    (size_t n, const float *x, const float *dy, float *dx, float alpha),
    (n, x, dy, dx, alpha),
    (KOP_DEV(x, KOP_F(n)) KOP_DEV(dy, KOP_F(n)) KOP_DEV(dx, KOP_F(n))))
/* gelu, exact (Keras's approximate=False): y = x * Phi(x), Phi the normal
 * CDF, computed as erfc(-x / sqrt 2) / 2 (no cancellation for x << 0);
 * dx = dy * (Phi(x) + x * exp(-x*x / 2) / sqrt(2 pi)). On a GPU through
 * CUDA's erfcf / expf: within a few ulps of libm, not bitwise. */
KOP(gelu_fwd, 0, "gelu forward",
    (size_t n, const float *x, float *y),
    (n, x, y),
    (KOP_DEV(x, KOP_F(n)) KOP_DEV(y, KOP_F(n))))
KOP(gelu_bwd, 0, "gelu backward",
    (size_t n, const float *x, const float *dy, float *dx),
    (n, x, dy, dx),
    (KOP_DEV(x, KOP_F(n)) KOP_DEV(dy, KOP_F(n)) KOP_DEV(dx, KOP_F(n))))
/* softmax over the last axis of x[m][n] (m rows: samples, or samples x
 * positions of an image; n classes: features or channels): y = exp(x -
 * max) / sum, the row summed in index order; backward from the forward
 * OUTPUT y: dx = y * (dy - sum_j dy_j y_j), the dot product in index order.
 * y may be x, dx may be dy; m or n <= 0: nothing. On a GPU exp is CUDA's
 * expf (a few ulps from libm); the sums run in the same order. */
KOP(softmax_fwd, 0, "softmax forward",
    (int m, int n, const float *x, float *y),
    (m, n, x, y),
    (KOP_DEV(x, KOP_F(KOP_MN(m, n))) KOP_DEV(y, KOP_F(KOP_MN(m, n)))))
KOP(softmax_bwd, 0, "softmax backward",
    (int m, int n, const float *y, const float *dy, float *dx),
    (m, n, y, dy, dx),
    (KOP_DEV(y, KOP_F(KOP_MN(m, n))) KOP_DEV(dy, KOP_F(KOP_MN(m, n)))
     KOP_DEV(dx, KOP_F(KOP_MN(m, n)))))

/* ---- batch normalisation ------------------------------------------------
 * x[rows][c]: the positions of a batch (samples, or samples x pixels of an
 * image) by channel. Statistics are sums in double over the rows, in row
 * order, so that a SyncBatchNorm adds the sums of several replicas (and
 * workers) before it derives mean and variance, and gets one device's
 * figures on the whole batch. Every array of c is per channel. A GPU adds
 * the rows in another fixed order (a tree per channel): its sums are
 * deterministic and within rounding of the CPU's, not bitwise; bn_stats,
 * bn_norm and bn_bwd_dx give the CPU's bits from the same inputs.
 * bn_sums: sums[j] = sum_r x[r][j], sums[c + j] = sum_r x[r][j]^2. */
KOP(bn_sums, 0, "batchnorm statistics",
    (size_t rows, int c, const float *x, double *sums),
    (rows, c, x, sums),
    (KOP_REQ(c >= 1) KOP_DEV(x, KOP_F(rows * (size_t)c))
     KOP_DEV(sums, 2 * (size_t)c * sizeof(double))))
/* mean and invstd from the sums over `count` rows: mean = S1 / count,
 * var = S2 / count - mean^2 (biased, as Keras), invstd = 1 / sqrt(var +
 * eps); then, when mov_mean and mov_var are given, the moving statistics
 * take mov = momentum * mov + (1 - momentum) * batch (Keras's update).
 * sums NULL or count 0: inference, mean and var are the moving ones (mean
 * 0 and var 1 without them). In double; the same bits on every device. */
KOP(bn_stats, 0, "batchnorm mean and variance",
    (int c, const double *sums, double count, float eps, float momentum,
     float *mean, float *invstd, float *mov_mean, float *mov_var),
    (c, sums, count, eps, momentum, mean, invstd, mov_mean, mov_var),
    (KOP_REQ(c >= 1) KOP_OPT(sums, 2 * (size_t)c * sizeof(double))
     KOP_DEV(mean, KOP_F(c)) KOP_DEV(invstd, KOP_F(c))
     KOP_OPT(mov_mean, KOP_F(c)) KOP_OPT(mov_var, KOP_F(c))))
/* y = (x - mean) * invstd * gamma + beta; y may be x. */
KOP(bn_norm, 0, "batchnorm forward",
    (size_t rows, int c, const float *x, const float *mean,
     const float *invstd, const float *gamma, const float *beta, float *y),
    (rows, c, x, mean, invstd, gamma, beta, y),
    (KOP_REQ(c >= 1) KOP_DEV(x, KOP_F(rows * (size_t)c))
     KOP_DEV(mean, KOP_F(c)) KOP_DEV(invstd, KOP_F(c))
     KOP_DEV(gamma, KOP_F(c)) KOP_DEV(beta, KOP_F(c))
     KOP_DEV(y, KOP_F(rows * (size_t)c))))
/* Backward sums: sums[j] = sum_r dy, sums[c + j] = sum_r dy * xhat with
 * xhat = (x - mean) * invstd; then dbeta[j] = sums[j], dgamma[j] =
 * sums[c + j] (this replica's share: the strategy adds them up). */
KOP(bn_bwd_sums, 0, "batchnorm backward statistics",
    (size_t rows, int c, const float *x, const float *dy, const float *mean,
     const float *invstd, double *sums, float *dgamma, float *dbeta),
    (rows, c, x, dy, mean, invstd, sums, dgamma, dbeta),
    (KOP_REQ(c >= 1) KOP_DEV(x, KOP_F(rows * (size_t)c))
     KOP_DEV(dy, KOP_F(rows * (size_t)c)) KOP_DEV(mean, KOP_F(c))
     KOP_DEV(invstd, KOP_F(c)) KOP_DEV(sums, 2 * (size_t)c * sizeof(double))
     KOP_DEV(dgamma, KOP_F(c)) KOP_DEV(dbeta, KOP_F(c))))
/* dx = gamma * invstd * (dy - S1 / count - xhat * S2 / count), with the
 * backward sums of all `count` rows normalised together (a SyncBatchNorm's
 * added up across replicas); dx may be dy. */
KOP(bn_bwd_dx, 0, "batchnorm backward",
    (size_t rows, int c, const float *x, const float *dy, const float *mean,
     const float *invstd, const float *gamma, const double *sums,
     double count, float *dx),
    (rows, c, x, dy, mean, invstd, gamma, sums, count, dx),
    (KOP_REQ(c >= 1) KOP_DEV(x, KOP_F(rows * (size_t)c))
     KOP_DEV(dy, KOP_F(rows * (size_t)c)) KOP_DEV(mean, KOP_F(c))
     KOP_DEV(invstd, KOP_F(c)) KOP_DEV(gamma, KOP_F(c))
     KOP_DEV(sums, 2 * (size_t)c * sizeof(double))
     KOP_DEV(dx, KOP_F(rows * (size_t)c))))

/* ---- layer normalisation (Keras's LayerNormalization, axis -1) ----------
 * x[rows][c]: each row (a sample's features, or one position of an image
 * across its channels) is normalised over its own c values. Per row, in
 * double: mean = sum / c, then var = sum (x - mean)^2 / c (biased, a
 * second pass), invstd = 1 / sqrt(var + eps); mean[r] and invstd[r] are
 * kept (floats) for the backward pass, and y = (x - mean) * invstd * gamma
 * + beta in float, as bn_norm. y may be x. A row is summed in index order
 * on every device: the same bits on a GPU. */
KOP(ln_fwd, 0, "layernorm forward",
    (size_t rows, int c, const float *x, const float *gamma,
     const float *beta, float eps, float *y, float *mean, float *invstd),
    (rows, c, x, gamma, beta, eps, y, mean, invstd),
    (KOP_REQ(c >= 1) KOP_DEV(x, KOP_F(rows * (size_t)c))
     KOP_DEV(gamma, KOP_F(c)) KOP_DEV(beta, KOP_F(c))
     KOP_DEV(y, KOP_F(rows * (size_t)c)) KOP_DEV(mean, KOP_F(rows))
     KOP_DEV(invstd, KOP_F(rows))))
/* With xhat = (x - mean[r]) * invstd[r] and g = dy * gamma, per row in
 * double: dx = invstd * (g - sum_j g / c - xhat * sum_j (g xhat) / c)
 * (the row's sums in index order: the same bits on a GPU), when dx !=
 * NULL (dx may be dy); dgamma[j] = sum_r dy xhat, dbeta[j] = sum_r dy, in double over the
 * rows in row order (on a GPU in a fixed tree: within rounding of the CPU,
 * not bitwise), rounded once and written, not accumulated. */
KOP(ln_bwd, 0, "layernorm backward",
    (size_t rows, int c, const float *x, const float *dy, const float *mean,
     const float *invstd, const float *gamma, float *dx, float *dgamma,
     float *dbeta),
    (rows, c, x, dy, mean, invstd, gamma, dx, dgamma, dbeta),
    (KOP_REQ(c >= 1) KOP_DEV(x, KOP_F(rows * (size_t)c))
     KOP_DEV(dy, KOP_F(rows * (size_t)c)) KOP_DEV(mean, KOP_F(rows))
     KOP_DEV(invstd, KOP_F(rows)) KOP_DEV(gamma, KOP_F(c))
     KOP_OPT(dx, KOP_F(rows * (size_t)c)) KOP_DEV(dgamma, KOP_F(c))
     KOP_DEV(dbeta, KOP_F(c))))

/* ---- optimizer steps, in place, one fused pass ------------------------
 * wd: decoupled weight decay (Keras' weight_decay, AdamW / SGDW): each step
 * first takes w -= (lr * wd) * w, with the w before the update, then
 * applies the gradient as below. wd = 0 gives the same bits as no decay.
 * sgd: w -= lr * g */
KOP(sgd, 0, "SGD step",
    (size_t n, float *w, const float *g, float lr, float wd),
    (n, w, g, lr, wd),
    (KOP_DEV(w, KOP_F(n)) KOP_DEV(g, KOP_F(n))))
/* v = momentum * v - lr * g ; w += v   (Keras SGD(momentum=...)) */
KOP(momentum, 0, "momentum step",
    (size_t n, float *w, const float *g, float *v, float lr, float momentum,
     float wd),
    (n, w, g, v, lr, momentum, wd),
    (KOP_DEV(w, KOP_F(n)) KOP_DEV(g, KOP_F(n)) KOP_DEV(v, KOP_F(n))))
/* Adam (Kingma & Ba), bias-corrected, step t >= 1 counts this update:
 * m = b1 m + (1-b1) g ; v = b2 v + (1-b2) g^2 ;
 * w -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
 * (the paper's and PyTorch's form; eps is added to the corrected sqrt(v)).
 * The decay uses lr itself, not the bias-corrected step (AdamW). The bias
 * corrections are computed in double on the host (t < 1 counts as 1). */
KOP(adam, 0, "Adam step",
    (size_t n, float *w, const float *g, float *m, float *v, float lr,
     float b1, float b2, float eps, int64_t t, float wd),
    (n, w, g, m, v, lr, b1, b2, eps, t, wd),
    (KOP_DEV(w, KOP_F(n)) KOP_DEV(g, KOP_F(n)) KOP_DEV(m, KOP_F(n))
     KOP_DEV(v, KOP_F(n))))
/* RMSprop (Keras RMSprop, centered = False): v is the moving average of
 * the squared gradient,
 *   v = rho v + (1-rho) g^2 ; inc = lr g / sqrt(v + eps)
 * eps under the square root, as Keras and TF's ApplyRMSProp. Without mom
 * (NULL): w -= inc. With mom (Keras momentum > 0): mom = momentum mom +
 * inc ; w -= mom (momentum is read only then). */
KOP(rmsprop, 0, "RMSprop step",
    (size_t n, float *w, const float *g, float *v, float *mom, float lr,
     float rho, float momentum, float eps, float wd),
    (n, w, g, v, mom, lr, rho, momentum, eps, wd),
    (KOP_DEV(w, KOP_F(n)) KOP_DEV(g, KOP_F(n)) KOP_DEV(v, KOP_F(n))
     KOP_OPT(mom, KOP_F(n))))
/* Adagrad (Keras Adagrad): acc = acc + g^2 ; w -= lr g / sqrt(acc + eps).
 * acc starts at Keras' initial_accumulator_value (fill_const). */
KOP(adagrad, 0, "Adagrad step",
    (size_t n, float *w, const float *g, float *acc, float lr, float eps,
     float wd),
    (n, w, g, acc, lr, eps, wd),
    (KOP_DEV(w, KOP_F(n)) KOP_DEV(g, KOP_F(n)) KOP_DEV(acc, KOP_F(n))))

/* ---- vector helpers used by reductions --------------------------------- */
KOP(scale, 0, "scale", (size_t n, float a, float *x), (n, a, x),   /* x *= a */
    (KOP_DEV(x, KOP_F(n))))
/* x[i] = a: optimizer slots that do not start at zero (Adagrad's). */
KOP(fill_const, 0, "fill", (size_t n, float *x, float a), (n, x, a),
    (KOP_DEV(x, KOP_F(n))))
KOP(axpy, 0, "axpy", (size_t n, float a, const float *x, float *y),
    (n, a, x, y),                                               /* y += a x */
    (KOP_DEV(x, KOP_F(n)) KOP_DEV(y, KOP_F(n))))
/* dst = srcs[0] + srcs[1] + ... in that order (bitwise deterministic, the
 * same bits on a GPU); dst may equal srcs[0]. srcs is a HOST array of
 * nsrc >= 1 pointers, read during the call only. */
KOP(sum, 0, "sum",
    (size_t n, float *dst, const float *const *srcs, int nsrc),
    (n, dst, srcs, nsrc),
    (KOP_REQ(nsrc >= 1) KOP_DEV(dst, KOP_F(n))
     KOP_DEVS(srcs, nsrc, KOP_F(n))))
/* dst[i] = src[i] * scale : the per-batch uint8 -> float input scaling. */
KOP(u8_to_f32, 0, "scale the input",
    (size_t n, const uint8_t *src, float scale, float *dst),
    (n, src, scale, dst),
    (KOP_DEV(src, n) KOP_DEV(dst, KOP_F(n))))

/* y[r][y_off + j] = x[r][x_off + j] for r < rows, j < width, where a row
 * of x holds x_c floats and one of y y_c: a concat copies each input into
 * its channel slice of the output, and its slice of dy back. */
KOP(channel_copy, 0, "channel copy",
    (size_t rows, int width, const float *x, int x_c, int x_off, float *y,
     int y_c, int y_off),
    (rows, width, x, x_c, x_off, y, y_c, y_off),
    (KOP_NOOP(rows == 0 || width <= 0)
     KOP_REQ(x_off >= 0 && x_off + width <= x_c && y_off >= 0 &&
             y_off + width <= y_c)
     KOP_DEV(x, KOP_F(rows * (size_t)x_c))
     KOP_DEV(y, KOP_F(rows * (size_t)y_c))))

/* ---- convolution (kops_conv2d_t above) ---------------------------------
 * Y = conv(X, W) + b (b may be NULL). `col` is workspace of col_len floats,
 * at least kops_conv2d_col_len(g); the images are lowered to GEMM in groups
 * of col_len / kops_conv2d_col_len(g), on every device alike -- except
 * where the CPU convolves directly (kernels_cpu.h's paths), using col for
 * one padded image or the transposed weights: each output element is then
 * one fixed chain of FMAs, whatever the batch and the vector width. */
KOP(conv2d_fwd, 1, "conv2d forward",
    (const kops_conv2d_t *g, const float *X, const float *W, const float *b,
     float *Y, float *col, size_t col_len),
    (g, X, W, b, Y, col, col_len),
    (KOP_REQ(g != NULL) KOP_NOOP(g->n <= 0 || g->f <= 0)
     KOP_REQ(col_len >= kops_conv2d_col_len(g))
     KOP_DEV(X, KOP_F(kops_n4(g->n, g->h, g->w, g->c)))
     KOP_DEV(W, KOP_F(kops_n4(g->kh, g->kw, g->c, g->f)))
     KOP_OPT(b, KOP_F(g->f)) KOP_DEV(col, KOP_F(col_len))
     KOP_DEV(Y, KOP_F(kops_n4(g->n, g->oh, g->ow, g->f)))))
/* dW[kh][kw][c][f] and db[f] (overwritten; db may be NULL) from
 * dY[n][oh][ow][f]; dX[n][h][w][c] = the input gradient, overwritten, when
 * dX != NULL. On a GPU dX is gathered (each input sums the taps that read
 * it, in the CPU's order): deterministic, no atomics. */
KOP(conv2d_bwd, 1, "conv2d backward",
    (const kops_conv2d_t *g, const float *X, const float *W, const float *dY,
     float *dW, float *db, float *dX, float *col, size_t col_len),
    (g, X, W, dY, dW, db, dX, col, col_len),
    (KOP_REQ(g != NULL)
     KOP_DEV(dW, KOP_F(kops_n4(g->kh, g->kw, g->c, g->f)))
     KOP_OPT(db, KOP_F(g->f > 0 ? g->f : 0))
     KOP_REQ(g->n <= 0 || col_len >= kops_conv2d_col_len(g))
     KOP_DEV(X, KOP_F(kops_n4(g->n, g->h, g->w, g->c)))
     KOP_DEV(W, KOP_F(g->n > 0 ? kops_n4(g->kh, g->kw, g->c, g->f) : 0))
     KOP_DEV(col, KOP_F(g->n > 0 ? col_len : 0))
     KOP_DEV(dY, KOP_F(kops_n4(g->n, g->oh, g->ow, g->f)))
     KOP_OPT(dX, KOP_F(kops_n4(g->n, g->h, g->w, g->c)))))
/* conv2d_bwd through the layer's own relu: dY, the gradient of the relu's
 * output Y[n][oh][ow][f], is first masked in place where Y <= 0 (relu_bwd's
 * bits) and db summed from the masked values (relu_bias_grad's bits), then
 * conv2d_bwd runs on it: the same bits as relu_bias_grad then conv2d_bwd,
 * on the CPU a few images at a time while each one's dY is in cache. */
KOP(conv2d_bwd_relu, 1, "conv2d backward through relu",
    (const kops_conv2d_t *g, const float *X, const float *W, const float *Y,
     float *dY, float *dW, float *db, float *dX, float *col, size_t col_len),
    (g, X, W, Y, dY, dW, db, dX, col, col_len),
    (KOP_REQ(g != NULL)
     KOP_DEV(dW, KOP_F(kops_n4(g->kh, g->kw, g->c, g->f)))
     KOP_OPT(db, KOP_F(g->f > 0 ? g->f : 0))
     KOP_REQ(g->n <= 0 || col_len >= kops_conv2d_col_len(g))
     KOP_DEV(X, KOP_F(kops_n4(g->n, g->h, g->w, g->c)))
     KOP_DEV(W, KOP_F(g->n > 0 ? kops_n4(g->kh, g->kw, g->c, g->f) : 0))
     KOP_DEV(col, KOP_F(g->n > 0 ? col_len : 0))
     KOP_DEV(Y, KOP_F(kops_n4(g->n, g->oh, g->ow, g->f)))
     KOP_DEV(dY, KOP_F(kops_n4(g->n, g->oh, g->ow, g->f)))
     KOP_OPT(dX, KOP_F(kops_n4(g->n, g->h, g->w, g->c)))))

/* conv2d_bwd whose dY is made from the max pooling that reads the layer's
 * relu output Y: dY[n][oh][ow][f] (overwritten) = maxpool2d_bwd_relu(pg,
 * dP, argmax, P), then conv2d_bwd on it -- the same bits as the two ops.
 * The pooling's forward ran pool_rows images a call (its argmax counts
 * from each call's first image; pool_rows = n: one call, the only form a
 * GPU takes). On the CPU the two go a few images at a time, each image's
 * dY made while the backward reads it from cache. */
KOP(conv2d_bwd_pooled, 1, "conv2d backward from a max pooling",
    (const kops_conv2d_t *g, const kops_pool2d_t *pg, int pool_rows,
     const float *dP, const int32_t *argmax, const float *P, const float *X,
     const float *W, float *dY, float *dW, float *db, float *dX, float *col,
     size_t col_len),
    (g, pg, pool_rows, dP, argmax, P, X, W, dY, dW, db, dX, col, col_len),
    (KOP_REQ(g != NULL && pg != NULL)
     KOP_REQ(pg->n == g->n && pg->h == g->oh && pg->w == g->ow &&
             pg->c == g->f && pool_rows >= 1)
     KOP_DEV(dW, KOP_F(kops_n4(g->kh, g->kw, g->c, g->f)))
     KOP_OPT(db, KOP_F(g->f > 0 ? g->f : 0))
     KOP_REQ(g->n <= 0 || col_len >= kops_conv2d_col_len(g))
     KOP_DEV(dP, KOP_F(kops_n4(pg->n, pg->oh, pg->ow, pg->c)))
     KOP_DEV(argmax, kops_n4(pg->n, pg->oh, pg->ow, pg->c) * sizeof(int32_t))
     KOP_DEV(P, KOP_F(kops_n4(pg->n, pg->oh, pg->ow, pg->c)))
     KOP_DEV(X, KOP_F(kops_n4(g->n, g->h, g->w, g->c)))
     KOP_DEV(W, KOP_F(g->n > 0 ? kops_n4(g->kh, g->kw, g->c, g->f) : 0))
     KOP_DEV(col, KOP_F(g->n > 0 ? col_len : 0))
     KOP_DEV(dY, KOP_F(kops_n4(g->n, g->oh, g->ow, g->f)))
     KOP_OPT(dX, KOP_F(kops_n4(g->n, g->h, g->w, g->c)))))

/* ---- pooling (kops_pool2d_t above) -------------------------------------
 * Max: Y[n][oh][ow][c] is the max of the window; argmax[n*oh*ow*c] keeps,
 * per output, the index in X of the first maximum in row-major window
 * order (a NaN first element stays, a later one is never chosen): Y and
 * argmax are the same bits on every device. */
KOP(maxpool2d_fwd, 0, "maxpool2d forward",
    (const kops_pool2d_t *g, const float *X, float *Y, int32_t *argmax),
    (g, X, Y, argmax),
    (KOP_REQ(g != NULL) KOP_DEV(X, KOP_F(kops_n4(g->n, g->h, g->w, g->c)))
     KOP_DEV(Y, KOP_F(kops_n4(g->n, g->oh, g->ow, g->c)))
     KOP_DEV(argmax, kops_n4(g->n, g->oh, g->ow, g->c) * sizeof(int32_t))))
/* dX (n*h*w*c, overwritten) = dY routed to the argmax inputs, summed in
 * output order where windows overlap (the same bits on every device).
 * argmax must come from maxpool2d_fwd with the same geometry. */
KOP(maxpool2d_bwd, 0, "maxpool2d backward",
    (const kops_pool2d_t *g, const float *dY, const int32_t *argmax,
     float *dX),
    (g, dY, argmax, dX),
    (KOP_REQ(g != NULL) KOP_DEV(dY, KOP_F(kops_n4(g->n, g->oh, g->ow, g->c)))
     KOP_DEV(argmax, kops_n4(g->n, g->oh, g->ow, g->c) * sizeof(int32_t))
     KOP_DEV(dX, KOP_F(kops_n4(g->n, g->h, g->w, g->c)))))
/* maxpool2d_bwd into a relu's output: X was relu(Z), whose backward (dX
 * where X > 0, else 0) is applied here, so it needs no pass of its own.
 * An output's gradient reaches its argmax only where Y > 0 -- Y (the
 * forward's output) is the argmax's own X -- the same bits as
 * maxpool2d_bwd then relu_bwd with X. */
KOP(maxpool2d_bwd_relu, 0, "maxpool2d backward into a relu",
    (const kops_pool2d_t *g, const float *dY, const int32_t *argmax,
     const float *Y, float *dX),
    (g, dY, argmax, Y, dX),
    (KOP_REQ(g != NULL) KOP_DEV(dY, KOP_F(kops_n4(g->n, g->oh, g->ow, g->c)))
     KOP_DEV(argmax, kops_n4(g->n, g->oh, g->ow, g->c) * sizeof(int32_t))
     KOP_DEV(Y, KOP_F(kops_n4(g->n, g->oh, g->ow, g->c)))
     KOP_DEV(dX, KOP_F(kops_n4(g->n, g->h, g->w, g->c)))))
/* Average: Y[n][oh][ow][c] = (the window's sum, taps added in row-major
 * window order) / (ph * pw), the same bits on every device. */
KOP(avgpool2d_fwd, 0, "avgpool2d forward",
    (const kops_pool2d_t *g, const float *X, float *Y),
    (g, X, Y),
    (KOP_REQ(g != NULL) KOP_DEV(X, KOP_F(kops_n4(g->n, g->h, g->w, g->c)))
     KOP_DEV(Y, KOP_F(kops_n4(g->n, g->oh, g->ow, g->c)))))
/* dX (n*h*w*c, overwritten): each input sums dY[o] / (ph * pw) over the
 * windows o that hold it, in output order (the same bits on every
 * device); 0 where no window reaches. */
KOP(avgpool2d_bwd, 0, "avgpool2d backward",
    (const kops_pool2d_t *g, const float *dY, float *dX),
    (g, dY, dX),
    (KOP_REQ(g != NULL) KOP_DEV(dY, KOP_F(kops_n4(g->n, g->oh, g->ow, g->c)))
     KOP_DEV(dX, KOP_F(kops_n4(g->n, g->h, g->w, g->c)))))

/* ---- embeddings (KOPS_EMB_* above) --------------------------------------
 * NONE: Y[m x k*dim], sample i's k rows side by side (zeros for padding);
 * SUM / MEAN: Y[m x dim] = its real ids' rows added in column order from 0,
 * then (MEAN) times kops_emb_scale: TF's embedding_lookup_sparse. The same
 * bits on every device. */
KOP(emb_fwd, 0, "embedding forward",
    (int m, int kk, int dim, int vocab, int comb, const int32_t *ids,
     const float *W, float *Y),
    (m, kk, dim, vocab, comb, ids, W, Y),
    (KOP_NOOP(m <= 0 || kk <= 0 || dim <= 0)
     KOP_DEV(ids, KOP_MN(m, kk) * sizeof(int32_t))
     KOP_DEV(W, KOP_F(KOP_MN(vocab, dim)))
     KOP_DEV(Y, KOP_F(KOP_MN(m, comb == KOPS_EMB_NONE ? kk * dim : dim)))))
/* dW[vocab x dim], overwritten: row v is the sum, from 0, of the slices of
 * dY (times kops_emb_scale) of v's occurrences in ids, added in row-major
 * order of ids; rows no id names are 0. The same bits on every device and
 * for any duplicates: a GPU sorts the ids stably (radix) and sums each
 * run in that order, no atomics. A sample's contribution does not depend
 * on the rows beside it, so replicas' gradients add up to one device's
 * within rounding. work: KOPS_EMB_WORK(m * kk) int32 of scratch (unused
 * on a CPU). */
KOP(emb_bwd, 0, "embedding backward",
    (int m, int kk, int dim, int vocab, int comb, const int32_t *ids,
     const float *dY, float *dW, int32_t *work),
    (m, kk, dim, vocab, comb, ids, dY, dW, work),
    (KOP_NOOP(vocab <= 0 || dim <= 0)
     KOP_DEV(dW, KOP_F(KOP_MN(vocab, dim)))
     KOP_DEV(ids, KOP_MN(m, kk) * sizeof(int32_t))
     KOP_DEV(dY, KOP_F(KOP_MN(m, comb == KOPS_EMB_NONE ? kk * dim : dim)))
     KOP_DEV(work, KOPS_EMB_WORK(KOP_MN(m, kk)) * sizeof(int32_t))))
/* The same gradient in its sparse form, what a parameter server or an
 * all-gather moves: uniq[0 .. *nuniq) the distinct real ids, ascending,
 * and rows[*nuniq x dim] their rows of emb_bwd's dW, bit for bit. uniq and
 * rows have room for m * kk; *nuniq is device memory. */
KOP(emb_sparse, 0, "embedding sparse gradient",
    (int m, int kk, int dim, int vocab, int comb, const int32_t *ids,
     const float *dY, int32_t *uniq, float *rows, int32_t *nuniq,
     int32_t *work),
    (m, kk, dim, vocab, comb, ids, dY, uniq, rows, nuniq, work),
    (KOP_REQ(dim > 0) KOP_DEV(nuniq, sizeof(int32_t))
     KOP_DEV(ids, KOP_MN(m, kk) * sizeof(int32_t))
     KOP_DEV(dY, KOP_F(KOP_MN(m, comb == KOPS_EMB_NONE ? kk * dim : dim)))
     KOP_DEV(uniq, KOP_MN(m, kk) * sizeof(int32_t))
     KOP_DEV(rows, KOP_F(KOP_MN(m, kk) * (size_t)dim))
     KOP_DEV(work, KOPS_EMB_WORK(KOP_MN(m, kk)) * sizeof(int32_t))))

/* ---- inverted dropout, counter-based ------------------------------------
 * Element i is kept when kc_dropout_keep(seed, first + i, rate): the mask is
 * a pure function of (seed, element index), so forward and backward agree
 * without storing it, and a replica that holds rows [r0, r1) of a global
 * batch (first = r0 * features) draws exactly what one device would; a GPU
 * draws the same mask and values bit for bit (kc_hash.h).
 * y = x * (kept ? 1 / (1 - rate) : 0) ; 0 <= rate < 1 ; y may be x. */
KOP(dropout_fwd, 0, "dropout forward",
    (size_t n, const float *x, float *y, float rate, uint64_t seed,
     uint64_t first),
    (n, x, y, rate, seed, first),
    (KOP_DEV(x, KOP_F(n)) KOP_DEV(y, KOP_F(n))))
/* dx = dy * (kept ? 1 / (1 - rate) : 0) ; dx may be dy. */
KOP(dropout_bwd, 0, "dropout backward",
    (size_t n, const float *dy, float *dx, float rate, uint64_t seed,
     uint64_t first),
    (n, dy, dx, rate, seed, first),
    (KOP_DEV(dy, KOP_F(n)) KOP_DEV(dx, KOP_F(n))))

#endif /* KOP */
