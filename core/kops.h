/* strata core -- the per-device kernel table. Internal; never installed.
 *
 * The model, the optimizer and the host table's arithmetic run the same code
 * on every kind of device: they call the kernels through the table of the
 * device they work on, with that device's context. kops_cpu.c wraps
 * kernels/cpu (kc_*); cuda/kops_cuda.c wraps kernels/cuda (kg_*) in the
 * CUDA module, strata_cuda.so, which cuda_load.c loads when GPUs are
 * wanted (a CUDA build only).
 *
 * A context belongs to one device, for the whole process: on a GPU it holds
 * the device's one stream and one cuBLAS handle. Every GPU replica has a
 * device of its own, so this is also the replica's stream. Calls on a GPU
 * only ENQUEUE work on that stream, in call order, and return at once
 * unless they say otherwise; CPU calls are done when they return. Any
 * thread may call (each call selects the device for the calling thread).
 *
 * Every int function returns 0 or a negative STRATA_E* code and has logged
 * the cause (device, operation, CUDA's reason) once. */
#ifndef STRATA_CORE_KOPS_H
#define STRATA_CORE_KOPS_H

#include <stddef.h>
#include <stdint.h>

typedef struct strata__kops strata__kops_t;

/* The context of one device. `ops` and `device` are for everybody; the
 * rest (stream, cuBLAS handle) is private to the table's file. */
typedef struct strata__kdev {
    const strata__kops_t *ops;
    int32_t               device;   /* STRATA_DEVICE(type, index) */
} strata__kdev_t;

/* Loss and correct predictions of a step, accumulated on the device and
 * read back once (xent_read). */
typedef struct strata__xacc {
    double  loss;      /* after xent_read: summed loss                     */
    int64_t correct;   /* after xent_read: correct predictions             */
    void   *dev;       /* GPU: the device accumulator (kg_xent_acc_t)      */
    void   *host;      /* GPU: page-locked read-back of loss and correct   */
} strata__xacc_t;

/* Geometry of a conv2d / maxpool2d call, NHWC (see kc_conv_geom_t and
 * kc_pool_geom_t in kernels/cpu/kernels_cpu.h: same members, same order). */
typedef struct strata__conv {
    int n, h, w, c;
    int kh, kw, f;
    int stride_h, stride_w;
    int pad_top, pad_left;
    int oh, ow;
    int col_ready;
} strata__conv_t;

typedef struct strata__pool {
    int n, h, w, c;
    int ph, pw, stride_h, stride_w;
    int oh, ow;
} strata__pool_t;

/* Copy directions of kops->copy. */
enum { STRATA__H2D = 0, STRATA__D2H = 1, STRATA__D2D = 2 };

struct strata__kops {
    const char *name;                                  /* "cpu" | "cuda"  */

    /* ---- memory ------------------------------------------------------ */
    /* Zeroed device memory, ready for any stream and any thread when the
     * call returns (GPU: synchronous); NULL when out of memory. */
    void *(*alloc)(strata__kdev_t *k, size_t bytes);
    void  (*free)(strata__kdev_t *k, void *p);         /* NULL: no-op     */
    /* Host memory for staging copies (GPU: page-locked). */
    void *(*host_alloc)(strata__kdev_t *k, size_t bytes);
    void  (*host_free)(strata__kdev_t *k, void *p);
    /* Copy on the device's stream (asynchronous on a GPU: a host buffer
     * must stay untouched until sync). */
    int   (*copy)(strata__kdev_t *k, int dir, void *dst, const void *src,
                  size_t bytes);
    /* Wait until everything enqueued on the device's stream is done. */
    int   (*sync)(strata__kdev_t *k);

    /* ---- the kernels of kernels_cpu.h, same arguments ----------------- */
    int (*dense_fwd)(strata__kdev_t *k, int m, int kk, int n, const float *X,
                     const float *W, const float *b, float *Y);
    int (*dense_bwd)(strata__kdev_t *k, int m, int kk, int n, const float *X,
                     const float *W, const float *dY, float *dW, float *db,
                     float *dX);
    int (*relu_fwd)(strata__kdev_t *k, size_t n, const float *x, float *y);
    int (*relu_bwd)(strata__kdev_t *k, size_t n, const float *y,
                    const float *dy, float *dx);

    /* Softmax cross-entropy: xent_zero starts a step's sums, softmax_xent
     * adds one batch to them (dlogits as kc_softmax_xent), xent_read brings
     * them to a->loss / a->correct: on a GPU this waits for the stream, the
     * one host synchronisation of a training step. */
    int  (*xacc_init)(strata__kdev_t *k, strata__xacc_t *a);
    void (*xacc_fini)(strata__kdev_t *k, strata__xacc_t *a);
    int  (*xent_zero)(strata__kdev_t *k, strata__xacc_t *a);
    int  (*softmax_xent)(strata__kdev_t *k, int m, int c, const float *logits,
                         const int32_t *labels, float *dlogits, float scale,
                         strata__xacc_t *a);
    int  (*xent_read)(strata__kdev_t *k, strata__xacc_t *a);

    /* wd: decoupled weight decay, as kc_sgd et al. */
    int (*sgd)(strata__kdev_t *k, size_t n, float *w, const float *g, float lr,
               float wd);
    int (*momentum)(strata__kdev_t *k, size_t n, float *w, const float *g,
                    float *v, float lr, float momentum, float wd);
    int (*adam)(strata__kdev_t *k, size_t n, float *w, const float *g,
                float *m, float *v, float lr, float b1, float b2, float eps,
                int64_t t, float wd);
    /* *out = sum of x[i]^2 (double), deterministic on a given device; done
     * when it returns (on a GPU: waits for the stream). */
    int (*sumsq)(strata__kdev_t *k, size_t n, const float *x, double *out);

    int (*scale)(strata__kdev_t *k, size_t n, float a, float *x);
    int (*axpy)(strata__kdev_t *k, size_t n, float a, const float *x, float *y);
    /* srcs: a host array of nsrc >= 1 pointers on this device. */
    int (*sum)(strata__kdev_t *k, size_t n, float *dst,
               const float *const *srcs, int nsrc);
    int (*u8_to_f32)(strata__kdev_t *k, size_t n, const uint8_t *src,
                     float scale, float *dst);

    /* ---- layers beyond dense: the kc_* twins of kernels_cpu.h (NHWC;
     * strata__conv_t / strata__pool_t have kc_conv_geom_t's and
     * kc_pool_geom_t's members in the same order). `col` is workspace on
     * the device, col_len floats, at least conv2d_col_len(g). */
    int (*conv2d_fwd)(strata__kdev_t *k, const strata__conv_t *g,
                      const float *X, const float *W, const float *b,
                      float *Y, float *col, size_t col_len);
    int (*conv2d_bwd)(strata__kdev_t *k, const strata__conv_t *g,
                      const float *X, const float *W, const float *dY,
                      float *dW, float *db, float *dX, float *col,
                      size_t col_len);
    int (*maxpool2d_fwd)(strata__kdev_t *k, const strata__pool_t *g,
                         const float *X, float *Y, int32_t *argmax);
    int (*maxpool2d_bwd)(strata__kdev_t *k, const strata__pool_t *g,
                         const float *dY, const int32_t *argmax, float *dX);
    int (*dropout_fwd)(strata__kdev_t *k, size_t n, const float *x, float *y,
                       float rate, uint64_t seed, uint64_t first);
    int (*dropout_bwd)(strata__kdev_t *k, size_t n, const float *dy,
                       float *dx, float rate, uint64_t seed, uint64_t first);
    int (*tanh_fwd)(strata__kdev_t *k, size_t n, const float *x, float *y);
    int (*tanh_bwd)(strata__kdev_t *k, size_t n, const float *y,
                    const float *dy, float *dx);
    int (*sigmoid_fwd)(strata__kdev_t *k, size_t n, const float *x, float *y);
    int (*sigmoid_bwd)(strata__kdev_t *k, size_t n, const float *y,
                       const float *dy, float *dx);
};

/* kops_cpu.c: the CPU table, and the context of any device: CPU devices
 * share one stateless context; a GPU's is made on first use (CUDA build;
 * STRATA_ENOTSUP otherwise, STRATA_EDEVICE when it cannot be made). */
extern const strata__kops_t strata__kops_cpu;
int strata__kdev_get(int32_t device, strata__kdev_t **out);

/* cuda_load.c: the GPUs, through the CUDA module (stubs without
 * STRATA_HAVE_CUDA). */
/* 1 when this machine plausibly has an NVIDIA GPU (its driver's device
 * nodes exist): cheap, loads nothing. Always 0 in a build without CUDA. */
int strata__gpu_present(void);
/* *n = usable CUDA devices, probed once per process (this loads the
 * module); *why says why there is none. STRATA_ENOTSUP (and *n = 0) in a
 * build without CUDA or when the module cannot be loaded (*why: where it
 * was looked for, and dlerror()). */
int strata__gpu_count(int *n, const char **why);
/* The context of GPU `index`, made once (thread-safe). */
int strata__kdev_gpu(int index, strata__kdev_t **out);

#endif /* STRATA_CORE_KOPS_H */
