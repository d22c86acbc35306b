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

/* The op list (kops_conv2d_t, kops_pool2d_t too), by its place in the tree:
 * every includer of this header finds it, whatever its include path. */
#include "../../kernels/kops_list.h"

typedef struct strata__kops strata__kops_t;

/* The context of one device. `ops` and `device` are for everybody; the
 * rest (stream, cuBLAS handle) is private to the table's file. */
typedef struct strata__kdev {
    const strata__kops_t *ops;
    int32_t               device;   /* STRATA_DEVICE(type, index) */
} strata__kdev_t;

/* The loss of a model and the metric read off it: kind is
 * STRATA__LOSS_SPARSE (softmax cross-entropy of int32 class ids) or a
 * KOPS_LOSS_* of kernels/kops_list.h (float32 targets, one row of c per
 * sample); metric a KOPS_METRIC_* (-1: none; AUC: binary_crossentropy's,
 * into the accumulator's hist); top_k > 0 makes the metric top-k accuracy
 * instead (class ids, or the targets' first maxima). */
enum { STRATA__LOSS_SPARSE = 0 };
typedef struct strata__lossfn {
    int kind, metric, top_k;
} strata__lossfn_t;

/* Loss and metric of a step, accumulated on the device and read back once
 * (xent_read). */
typedef struct strata__xacc {
    double  loss;      /* after xent_read: summed loss                     */
    double  metric;    /* after xent_read: summed metric (a count for the
                          accuracies; 0 for the AUC)                       */
    double  hist[2 * KOPS_AUC_BINS]; /* after xent_read: the AUC's bins    */
    int     hist_on;   /* set after xacc_init: the bins are zeroed and read
                          back only for a model whose metric is the AUC   */
    void   *dev;       /* GPU: the device accumulator (kg_xent_acc_t)      */
    void   *host;      /* GPU: page-locked read-back of loss and metric    */
} strata__xacc_t;

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

    /* ---- the ops of kernels/kops_list.h: kc_NAME's arguments, after the
     * device; on a GPU, kg_NAME on the device's stream (and cuBLAS handle).
     * Pointers are on the device; geometry structs are host memory. ---- */
#define KOP(name, blas, what, params, args, data) \
    int (*name)(strata__kdev_t *k, KOP_UNPAREN params);
#include "../../kernels/kops_list.h"
#undef KOP

    /* ---- the members whose CPU and GPU forms differ -------------------- */
    /* The loss: xent_zero starts a step's sums, loss adds one batch to
     * them (the outputs x[m x c], the labels y: int32 ids or float32 rows
     * as f says; dx, which may alias x, the loss's gradient times scale, or
     * NULL), xent_read brings them to a->loss / a->metric: on a GPU this
     * waits for the stream, the one host synchronisation of a training
     * step. */
    int  (*xacc_init)(strata__kdev_t *k, strata__xacc_t *a);
    void (*xacc_fini)(strata__kdev_t *k, strata__xacc_t *a);
    int  (*xent_zero)(strata__kdev_t *k, strata__xacc_t *a);
    int  (*loss)(strata__kdev_t *k, const strata__lossfn_t *f, int m, int c,
                 const float *x, const void *y, float *dx, float scale,
                 strata__xacc_t *a);
    int  (*xent_read)(strata__kdev_t *k, strata__xacc_t *a);

    /* *out = sum of x[i]^2 (double), deterministic on a given device; done
     * when it returns (on a GPU: waits for the stream). */
    int (*sumsq)(strata__kdev_t *k, size_t n, const float *x, double *out);

    /* mixed_bfloat16 ([train] precision): conv2d and dense with bf16
     * inputs and fp32 sums -- the ops of the list with `work` in place of
     * col: kernels_cpu.h's kc_*_bf16 on a CPU (work_len >=
     * kops_conv2d_bf16_len(g) / kops_dense_bf16_len(m, kk, n) floats),
     * kernels_cuda.h's kg_*_bf16 on a GPU (kops_conv2d_bf16_gpu_len(g, 1)
     * and up / kops_dense_bf16_gpu_len(m, kk, n)). conv2d_bwd_bf16 with Y
     * != NULL goes through the layer's relu first, as conv2d_bwd_relu:
     * dY, Y's gradient, masked in place, db from the masked values. */
    int (*conv2d_fwd_bf16)(strata__kdev_t *k, const kops_conv2d_t *g,
                           const float *X, const float *W, const float *b,
                           float *Y, float *work, size_t work_len);
    int (*conv2d_bwd_bf16)(strata__kdev_t *k, const kops_conv2d_t *g,
                           const float *X, const float *W, const float *Y,
                           float *dY, float *dW, float *db, float *dX,
                           float *work, size_t work_len);
    int (*dense_fwd_bf16)(strata__kdev_t *k, int m, int kk, int n,
                          const float *X, const float *W, const float *b,
                          float *Y, float *work, size_t work_len);
    int (*dense_bwd_bf16)(strata__kdev_t *k, int m, int kk, int n,
                          const float *X, const float *W, const float *dY,
                          float *dW, float *db, float *dX, float *work,
                          size_t work_len);
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
/* The compute capability of GPU `index` (loads the module): STRATA_OK,
 * else STRATA_ENOTSUP (no CUDA build or module) or STRATA_EDEVICE (no such
 * GPU), nothing logged. */
int strata__gpu_arch(int index, int *major, int *minor);

#endif /* STRATA_CORE_KOPS_H */
