/* A fake CUDA runtime and NCCL for the transport conformance suite: the
 * real nccl.so sources (plugins/transport/nccl/) compiled against the real
 * cuda_runtime_api.h and nccl.h, so every type and prototype is the real
 * one, but linked against this file instead of libcudart and libnccl. It
 * implements, on the CPU, exactly the calls the plugin makes.
 *
 *   GPUs:    STRATA_FAKE_GPUS of them (default 2; 0: cudaErrorNoDevice);
 *            the current device is per thread (cudaSetDevice).
 *   memory:  cudaMalloc is host memory filled with garbage (0xA5), kept in
 *            a table with its device: every pointer a copy, memset or
 *            collective is given must lie inside one allocation (of the
 *            communicator's device for a collective), host pointers where
 *            the copy's kind says host. What is still allocated, and every
 *            stream and communicator still alive, when the module unloads
 *            or the process exits is reported and the process exits 1.
 *   streams: FIFO queues of copies and collectives, run in order; work
 *            runs as soon as it reaches the head of its stream and can
 *            (a collective when every rank's matching call is at the head
 *            of its own stream). cudaStreamQuery says cudaErrorNotReady
 *            until the queue is empty; cudaMemcpyAsync from the host takes
 *            a snapshot of the source at the call, as a pageable copy does.
 *   NCCL:    a process-wide table of cliques keyed by the unique id: the
 *            ranks are threads of this process (the conformance suite's
 *            LOCAL group, and its WORLD group run as threads). The k-th
 *            collective of every rank forms one collective: it checks that
 *            all ranks agree (kind, count, datatype, op, root) and else
 *            fails every communicator with ncclInvalidUsage, then really
 *            reduces (sum, prod, max, min, avg as NCCL does: floats are
 *            pre-multiplied by 1/nranks) or broadcasts the data, for every
 *            rank, in rank order. Whoever completes a collective moves the
 *            data for all, under one global lock, so there is no thread
 *            to drive it. Non-blocking communicators (config.blocking = 0)
 *            are ncclInProgress until every rank has joined; blocking ones
 *            wait, bounded by STRATA_FAKE_NCCL_TIMEOUT_S (default 30).
 *            ncclGroupStart/End defer communicator creation to the end of
 *            the group, so one thread can create every rank's.
 *            ncclCommAbort drops the rank's queued collectives and fails
 *            every peer with ncclRemoteError. Empty collectives (count 0)
 *            are dropped at the call, as NCCL does.
 *   checks:  as NCCL's (with NCCL_CHECK_POINTERS=1): invalid datatype,
 *            op or root, NULL, host or foreign-device buffers, a config
 *            not made by NCCL_CONFIG_INITIALIZER, an id not from
 *            ncclGetUniqueId, a rank taken twice, a freed communicator:
 *            ncclInvalidArgument / ncclInvalidUsage, with the reason in
 *            ncclGetLastError.
 *
 * Not modelled: processes (every rank must be in this process), events,
 * graphs, reduce-scatter, all-gather and point-to-point calls (nccl.so
 * does not make them), 16-bit and 8-bit float reductions. */
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#define FK_MAX_DEV 16
#define FK_ID_MAGIC "strata-fake-nccl"
#define FK_CONFIG_MAGIC 0xcafebeefu

/* ---- state: everything under one lock ----------------------------------- */

enum fk_kind { FK_COPY, FK_COLL };
enum fk_coll { FK_ALLREDUCE, FK_BROADCAST };

struct fk_op {
    enum fk_kind    kind;
    struct fk_op   *next;
    /* FK_COPY */
    void           *dst;
    const void     *src;
    void           *owned;   /* the snapshot of a host source */
    size_t          n;
    /* FK_COLL */
    struct ncclComm *comm;
    uint64_t        seq;     /* the comm's k-th collective */
    enum fk_coll    coll;
    const void     *sendbuf;
    void           *recvbuf;
    size_t          count;
    ncclDataType_t  dtype;
    ncclRedOp_t     redop;
    int             root;
    int             done;
};

struct CUstream_st {
    int                 dev;
    unsigned            flags;
    int                 dflt;  /* the device's NULL stream */
    int                 dead;  /* destroyed: freed once empty */
    struct fk_op       *head, *tail;
    struct CUstream_st *next;
};

struct fk_clique;

struct ncclComm {
    struct fk_clique *cl;
    int               rank, dev, blocking, finalized, joined;
    ncclResult_t      state;   /* what ncclCommGetAsyncError says */
    uint64_t          seq;     /* collectives issued */
    int               pending; /* collectives queued on streams */
    char              err[256];
    struct ncclComm  *next, *group_next;
};

struct fk_clique {
    ncclUniqueId       id;
    int                nranks, njoined, nattached;
    uint64_t           next_seq; /* the collective all ranks do next */
    struct ncclComm  **comm;     /* nranks */
    struct fk_op     **posted;   /* nranks: at the head of their stream */
    struct fk_clique  *next;
};

struct fk_alloc {
    char            *p;
    size_t           n;
    int              dev;
    struct fk_alloc *next;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static struct fk_alloc *g_allocs;
static struct CUstream_st *g_streams;
static struct CUstream_st g_default[FK_MAX_DEV];
static struct ncclComm *g_comms;
static struct fk_clique *g_cliques;
static uint64_t g_ids;
static pid_t g_pid;

static _Thread_local int t_dev;
static _Thread_local cudaError_t t_cuda_err;
static _Thread_local char t_err[256];
static _Thread_local char t_err_out[256];
static _Thread_local struct ncclComm *t_group;
static _Thread_local int t_group_depth;

static int ndev(void)
{
    const char *e = getenv("STRATA_FAKE_GPUS");
    int n = e && *e ? atoi(e) : 2;
    return n < 0 ? 0 : n > FK_MAX_DEV ? FK_MAX_DEV : n;
}

static double timeout_s(void)
{
    const char *e = getenv("STRATA_FAKE_NCCL_TIMEOUT_S");
    double t = e && *e ? atof(e) : 30.0;
    return t > 0 ? t : 30.0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void lock(void)
{
    pthread_mutex_lock(&g_mu);
    if (!g_pid)
        g_pid = getpid();
}

static void unlock(void) { pthread_mutex_unlock(&g_mu); }

static void say(char *buf, size_t len, const char *fmt, va_list ap)
{
    int n = snprintf(buf, len, "fake nccl: ");
    vsnprintf(buf + n, len - (size_t)n, fmt, ap);
}

/* The reason of an NCCL error returned by this thread's call. */
static ncclResult_t nerr(ncclResult_t r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static ncclResult_t nerr(ncclResult_t r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say(t_err, sizeof t_err, fmt, ap);
    va_end(ap);
    return r;
}

/* A communicator's asynchronous error, sticky, with its reason. */
static void comm_fail(struct ncclComm *c, ncclResult_t r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void comm_fail(struct ncclComm *c, ncclResult_t r, const char *fmt, ...)
{
    if (c->state != ncclSuccess && c->state != ncclInProgress)
        return;
    c->state = r;
    va_list ap;
    va_start(ap, fmt);
    say(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
}

static cudaError_t cerr(cudaError_t e)
{
    if (e != cudaSuccess)
        t_cuda_err = e;
    return e;
}

/* ---- memory ------------------------------------------------------------- */

/* The allocation that holds [p, p + n), or NULL. */
static struct fk_alloc *find_alloc(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    for (struct fk_alloc *m = g_allocs; m; m = m->next) {
        uintptr_t lo = (uintptr_t)m->p;
        if (a >= lo && a < lo + m->n && n <= lo + m->n - a)
            return m;
    }
    return NULL;
}

/* Does any allocation overlap [p, p + n)? (a host pointer must not) */
static int touches_device(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    for (struct fk_alloc *m = g_allocs; m; m = m->next) {
        uintptr_t lo = (uintptr_t)m->p;
        if (a < lo + m->n && lo < a + n)
            return 1;
    }
    return 0;
}

/* ---- streams and progress ----------------------------------------------- */

static struct CUstream_st *default_stream(int dev)
{
    struct CUstream_st *s = &g_default[dev];
    s->dev = dev;
    s->dflt = 1;
    return s;
}

/* The stream behind a handle; NULL when it is no live stream. */
static struct CUstream_st *stream_of(cudaStream_t h)
{
    if (h == NULL || h == cudaStreamLegacy || h == cudaStreamPerThread)
        return default_stream(t_dev);
    for (struct CUstream_st *s = g_streams; s; s = s->next)
        if (s == h)
            return s->dead ? NULL : s;
    return NULL;
}

static void enqueue(struct CUstream_st *s, struct fk_op *op)
{
    op->next = NULL;
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    if (op->kind == FK_COLL)
        op->comm->pending++;
}

static void op_free(struct fk_op *op)
{
    if (op->kind == FK_COLL)
        op->comm->pending--;
    free(op->owned);
    free(op);
}

static size_t type_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2:
        return 1;
    case ncclFloat16: case ncclBfloat16:
        return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32:
        return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64:
        return 8;
    default:
        return 0;
    }
}

static const char *coll_name(enum fk_coll c)
{
    return c == FK_ALLREDUCE ? "ncclAllReduce" : "ncclBroadcast";
}

/* acc (op)= x over n elements of type T; avg: floats pre-multiplied by
 * 1/nranks (NCCL's PreMulSum), integers summed then divided. */
#define FK_REDUCE(T, ISFLOAT)                                                 \
    static void reduce_##T(T *acc, const T *x, size_t n, ncclRedOp_t op,      \
                           int first, int nranks)                             \
    {                                                                         \
        for (size_t i = 0; i < n; i++) {                                      \
            T v = x[i];                                                       \
            if (op == ncclAvg && (ISFLOAT))                                   \
                v = (T)(v * ((T)1 / (T)nranks));                              \
            if (first) {                                                      \
                acc[i] = v;                                                   \
                continue;                                                     \
            }                                                                 \
            switch (op) {                                                     \
            case ncclProd: acc[i] = (T)(acc[i] * v); break;                   \
            case ncclMax: acc[i] = acc[i] < v ? v : acc[i]; break;            \
            case ncclMin: acc[i] = acc[i] > v ? v : acc[i]; break;            \
            default: acc[i] = (T)(acc[i] + v); break;                         \
            }                                                                 \
        }                                                                     \
    }                                                                         \
    static void finish_##T(T *acc, size_t n, ncclRedOp_t op, int nranks)      \
    {                                                                         \
        if (op == ncclAvg && !(ISFLOAT))                                      \
            for (size_t i = 0; i < n; i++)                                    \
                acc[i] = (T)(acc[i] / (T)nranks);                              \
    }
FK_REDUCE(int8_t, 0)
FK_REDUCE(uint8_t, 0)
FK_REDUCE(int32_t, 0)
FK_REDUCE(uint32_t, 0)
FK_REDUCE(int64_t, 0)
FK_REDUCE(uint64_t, 0)
FK_REDUCE(float, 1)
FK_REDUCE(double, 1)

/* Reduce every rank's send buffer into acc, in rank order; 0, or -1 for a
 * datatype this fake does not reduce. */
static int reduce_all(struct fk_clique *cl, void *acc, const struct fk_op *o)
{
    for (int r = 0; r < cl->nranks; r++) {
        const void *x = cl->posted[r]->sendbuf;
        int first = r == 0, n = cl->nranks;
        switch (o->dtype) {
#define FK_CASE(E, T)                                                         \
        case E:                                                               \
            reduce_##T(acc, x, o->count, o->redop, first, n);                 \
            if (r == n - 1)                                                   \
                finish_##T(acc, o->count, o->redop, n);                       \
            break;
        FK_CASE(ncclInt8, int8_t)
        FK_CASE(ncclUint8, uint8_t)
        FK_CASE(ncclInt32, int32_t)
        FK_CASE(ncclUint32, uint32_t)
        FK_CASE(ncclInt64, int64_t)
        FK_CASE(ncclUint64, uint64_t)
        FK_CASE(ncclFloat32, float)
        FK_CASE(ncclFloat64, double)
#undef FK_CASE
        default:
            return -1;
        }
    }
    return 0;
}

/* Every rank's k-th collective is at the head of its stream: check that
 * they agree, then move the data of all of them. */
static void execute(struct fk_clique *cl)
{
    const struct fk_op *o = cl->posted[0];
    const char *why = NULL;
    char whybuf[200];
    for (int r = 1; r < cl->nranks && !why; r++) {
        const struct fk_op *p = cl->posted[r];
        if (p->coll != o->coll || p->count != o->count ||
            p->dtype != o->dtype ||
            (o->coll == FK_ALLREDUCE && p->redop != o->redop) ||
            (o->coll == FK_BROADCAST && p->root != o->root)) {
            snprintf(whybuf, sizeof whybuf, "collective %llu: rank 0 calls "
                     "%s(count %zu, type %d, op %d, root %d), rank %d calls "
                     "%s(count %zu, type %d, op %d, root %d)",
                     (unsigned long long)o->seq, coll_name(o->coll), o->count,
                     (int)o->dtype, (int)o->redop, o->root, r,
                     coll_name(p->coll), p->count, (int)p->dtype,
                     (int)p->redop, p->root);
            why = whybuf;
        }
    }
    size_t bytes = o->count * type_size(o->dtype);
    void *acc = NULL;
    if (!why && o->coll == FK_ALLREDUCE) {
        acc = malloc(bytes ? bytes : 1);
        if (!acc)
            why = "out of host memory";
        else if (reduce_all(cl, acc, o) != 0)
            why = "this fake does not reduce 16- and 8-bit floats";
    }
    const void *from = why ? NULL : o->coll == FK_ALLREDUCE
                                        ? acc : cl->posted[o->root]->sendbuf;
    for (int r = 0; r < cl->nranks; r++) {
        struct fk_op *p = cl->posted[r];
        if (why)
            comm_fail(p->comm, ncclInvalidUsage, "%s", why);
        else if (p->recvbuf != from)
            memcpy(p->recvbuf, from, bytes);
        p->done = 1;
    }
    for (int r = 0; r < cl->nranks; r++)
        cl->posted[r] = NULL;
    free(acc);
    cl->next_seq++;
}

/* Put a collective at the head of its stream into its clique; 1 when that
 * completed it (and every rank's). */
static int post(struct fk_op *op)
{
    struct fk_clique *cl = op->comm->cl;
    if (op->seq != cl->next_seq)
        return 0;
    cl->posted[op->comm->rank] = op;
    for (int r = 0; r < cl->nranks; r++)
        if (!cl->posted[r])
            return 0;
    execute(cl);
    return 1;
}

/* Run what can run at the head of one stream; 1 when anything ran. */
static int progress_stream(struct CUstream_st *s)
{
    int changed = 0;
    while (s->head) {
        struct fk_op *op = s->head;
        if (op->kind == FK_COLL && !op->done && !post(op))
            break;
        if (op->kind == FK_COPY)
            memcpy(op->dst, op->owned ? op->owned : op->src, op->n);
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        op_free(op);
        changed = 1;
    }
    return changed;
}

static void progress_all(void)
{
    int changed, any = 0;
    do {
        changed = 0;
        for (int d = 0; d < FK_MAX_DEV; d++)
            changed |= progress_stream(&g_default[d]);
        for (struct CUstream_st **sp = &g_streams; *sp;) {
            struct CUstream_st *s = *sp;
            changed |= progress_stream(s);
            if (s->dead && !s->head) {
                *sp = s->next;
                free(s);
            } else {
                sp = &s->next;
            }
        }
        any |= changed;
    } while (changed);
    if (any)
        pthread_cond_broadcast(&g_cv);
}

/* Wait (the lock held) until done(arg), driving progress; 0 at the
 * deadline. */
static int wait_for(int (*done)(const void *), const void *arg)
{
    const double deadline = now_s() + timeout_s();
    for (;;) {
        progress_all();
        if (done(arg))
            return 1;
        if (now_s() > deadline)
            return 0;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&g_cv, &g_mu, &ts);
    }
}

/* Are the streams of device *arg empty (those that synchronize with the
 * NULL stream only, when arg[1])? */
static int device_idle(const void *arg)
{
    const int *a = arg;
    if (g_default[a[0]].head)
        return 0;
    for (struct CUstream_st *s = g_streams; s; s = s->next)
        if (s->dev == a[0] && s->head &&
            !(a[1] && (s->flags & cudaStreamNonBlocking)))
            return 0;
    return 1;
}

/* ---- the CUDA runtime ----------------------------------------------------- */

cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count)
        return cerr(cudaErrorInvalidValue);
    *count = ndev();
    return *count ? cudaSuccess : cerr(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device)
{
    if (device < 0 || device >= ndev())
        return cerr(cudaErrorInvalidDevice);
    t_dev = device;
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = t_cuda_err;
    t_cuda_err = cudaSuccess;
    return e;
}

const char *cudaGetErrorString(cudaError_t error)
{
    switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorLaunchTimeout:
        return "the launch timed out and was terminated";
    default: return "unrecognized error code";
    }
}

cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    if (!devPtr)
        return cerr(cudaErrorInvalidValue);
    *devPtr = NULL;
    if (size == 0)
        return cudaSuccess;
    struct fk_alloc *m = malloc(sizeof *m);
    char *p = malloc(size);
    if (!m || !p) {
        free(m);
        free(p);
        return cerr(cudaErrorMemoryAllocation);
    }
    memset(p, 0xA5, size); /* device memory is not zeroed */
    lock();
    *m = (struct fk_alloc){ .p = p, .n = size, .dev = t_dev, .next = g_allocs };
    g_allocs = m;
    unlock();
    *devPtr = p;
    return cudaSuccess;
}

cudaError_t cudaFree(void *devPtr)
{
    if (!devPtr)
        return cudaSuccess;
    lock();
    struct fk_alloc **mp = &g_allocs;
    while (*mp && (*mp)->p != devPtr)
        mp = &(*mp)->next;
    if (!*mp) {
        unlock();
        return cerr(cudaErrorInvalidValue);
    }
    /* cudaFree synchronizes the device: nothing queued may use it after. */
    int arg[2] = { (*mp)->dev, 0 };
    if (!wait_for(device_idle, arg)) {
        unlock();
        return cerr(cudaErrorLaunchTimeout);
    }
    struct fk_alloc *m = *mp;
    *mp = m->next;
    unlock();
    free(m->p);
    free(m);
    return cudaSuccess;
}

cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
    if (count == 0)
        return cudaSuccess;
    lock();
    if (!find_alloc(devPtr, count)) {
        unlock();
        return cerr(cudaErrorInvalidValue);
    }
    int arg[2] = { t_dev, 1 }; /* the NULL stream's place in line */
    if (!wait_for(device_idle, arg)) {
        unlock();
        return cerr(cudaErrorLaunchTimeout);
    }
    memset(devPtr, value, count);
    unlock();
    return cudaSuccess;
}

/* Do dst and src fit the kind? (host pointers must be no device memory) */
static int copy_ok(void *dst, const void *src, size_t n, enum cudaMemcpyKind k,
                   int *src_host)
{
    int dd = find_alloc(dst, n) != NULL, sd = find_alloc(src, n) != NULL;
    int dh = !touches_device(dst, n), sh = !touches_device(src, n);
    *src_host = sh;
    if (!dst || !src)
        return 0;
    switch (k) {
    case cudaMemcpyHostToHost: return dh && sh;
    case cudaMemcpyHostToDevice: return dd && sh;
    case cudaMemcpyDeviceToHost: return dh && sd;
    case cudaMemcpyDeviceToDevice: return dd && sd;
    case cudaMemcpyDefault: return (dd || dh) && (sd || sh);
    default: return 0;
    }
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count,
                       enum cudaMemcpyKind kind)
{
    if (count == 0)
        return cudaSuccess;
    int src_host;
    lock();
    if (!copy_ok(dst, src, count, kind, &src_host)) {
        unlock();
        return cerr(cudaErrorInvalidValue);
    }
    /* The legacy NULL stream: after the work of the device's streams that
     * synchronize with it (not cudaStreamNonBlocking ones). */
    int arg[2] = { t_dev, 1 };
    if (!wait_for(device_idle, arg)) {
        unlock();
        return cerr(cudaErrorLaunchTimeout);
    }
    memmove(dst, src, count);
    unlock();
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                            enum cudaMemcpyKind kind, cudaStream_t stream)
{
    if (count == 0)
        return cudaSuccess;
    int src_host;
    lock();
    struct CUstream_st *s = stream_of(stream);
    if (!s) {
        unlock();
        return cerr(cudaErrorInvalidResourceHandle);
    }
    if (!copy_ok(dst, src, count, kind, &src_host)) {
        unlock();
        return cerr(cudaErrorInvalidValue);
    }
    struct fk_op *op = calloc(1, sizeof *op);
    void *snap = src_host ? malloc(count) : NULL;
    if (!op || (src_host && !snap)) {
        unlock();
        free(op);
        free(snap);
        return cerr(cudaErrorMemoryAllocation);
    }
    if (snap) /* pageable host memory: copied out before the call returns */
        memcpy(snap, src, count);
    *op = (struct fk_op){ .kind = FK_COPY, .dst = dst, .src = src,
                          .owned = snap, .n = count };
    enqueue(s, op);
    progress_all();
    unlock();
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    if (!pStream || (flags & ~(unsigned)cudaStreamNonBlocking))
        return cerr(cudaErrorInvalidValue);
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (!s)
        return cerr(cudaErrorMemoryAllocation);
    lock();
    s->dev = t_dev;
    s->flags = flags;
    s->next = g_streams;
    g_streams = s;
    unlock();
    *pStream = s;
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    lock();
    struct CUstream_st *s = stream ? stream_of(stream) : NULL;
    if (!s || s->dflt) {
        unlock();
        return cerr(cudaErrorInvalidResourceHandle);
    }
    s->dead = 1; /* freed once its work is done */
    progress_all();
    unlock();
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    lock();
    struct CUstream_st *s = stream_of(stream);
    if (!s) {
        unlock();
        return cerr(cudaErrorInvalidResourceHandle);
    }
    progress_all();
    int busy = s->head != NULL;
    unlock();
    return busy ? cerr(cudaErrorNotReady) : cudaSuccess;
}

static int device_all_idle(const void *arg)
{
    int a[2] = { *(const int *)arg, 0 };
    return device_idle(a);
}

cudaError_t cudaDeviceSynchronize(void)
{
    lock();
    int dev = t_dev;
    int ok = wait_for(device_all_idle, &dev);
    unlock();
    return ok ? cudaSuccess : cerr(cudaErrorLaunchTimeout);
}

/* ---- NCCL ------------------------------------------------------------------ */

const char *ncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

static struct ncclComm *live_comm(ncclComm_t comm)
{
    for (struct ncclComm *c = g_comms; c; c = c->next)
        if (c == comm)
            return c;
    return NULL;
}

const char *ncclGetLastError(ncclComm_t comm)
{
    lock();
    struct ncclComm *c = comm ? live_comm(comm) : NULL;
    snprintf(t_err_out, sizeof t_err_out, "%s",
             c && c->err[0] ? c->err : t_err);
    unlock();
    return t_err_out;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
    if (!uniqueId)
        return nerr(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    memset(uniqueId, 0, sizeof *uniqueId);
    lock();
    uint64_t k = ++g_ids;
    unlock();
    snprintf(uniqueId->internal, sizeof uniqueId->internal,
             FK_ID_MAGIC " %ld %llu %lld", (long)getpid(),
             (unsigned long long)k, (long long)time(NULL));
    return ncclSuccess;
}

static void join(struct ncclComm *c)
{
    if (c->joined)
        return;
    c->joined = 1;
    struct fk_clique *cl = c->cl;
    if (++cl->njoined == cl->nranks)
        for (int r = 0; r < cl->nranks; r++)
            if (cl->comm[r] && cl->comm[r]->state == ncclInProgress)
                cl->comm[r]->state = ncclSuccess;
    pthread_cond_broadcast(&g_cv);
}

static int clique_full(const void *arg)
{
    const struct fk_clique *cl = arg;
    return cl->njoined == cl->nranks;
}

/* Take the communicator out of its clique and of the live list; free it. */
static void comm_free(struct ncclComm *c)
{
    struct fk_clique *cl = c->cl;
    cl->comm[c->rank] = NULL;
    if (cl->posted[c->rank] && cl->posted[c->rank]->comm == c)
        cl->posted[c->rank] = NULL;
    if (--cl->nattached == 0) {
        for (struct fk_clique **p = &g_cliques; *p; p = &(*p)->next)
            if (*p == cl) {
                *p = cl->next;
                break;
            }
        free(cl->comm);
        free(cl->posted);
        free(cl);
    }
    for (struct ncclComm **p = &g_comms; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    for (struct ncclComm **p = &t_group; *p; p = &(*p)->group_next)
        if (*p == c) {
            *p = c->group_next;
            break;
        }
    free(c);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
                                    ncclUniqueId commId, int rank,
                                    ncclConfig_t *config)
{
    if (!comm)
        return nerr(ncclInvalidArgument, "ncclCommInitRankConfig: comm is NULL");
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return nerr(ncclInvalidArgument, "ncclCommInitRankConfig: rank %d "
                    "of %d", rank, nranks);
    if (config && (config->magic != FK_CONFIG_MAGIC ||
                   config->size < offsetof(ncclConfig_t, cgaClusterSize)))
        return nerr(ncclInvalidArgument, "ncclCommInitRankConfig: the "
                    "config was not set up by NCCL_CONFIG_INITIALIZER");
    if (strncmp(commId.internal, FK_ID_MAGIC, strlen(FK_ID_MAGIC)) != 0)
        return nerr(ncclInvalidArgument, "ncclCommInitRankConfig: the "
                    "unique id is not one of ncclGetUniqueId");
    int blocking = !config || config->blocking == NCCL_CONFIG_UNDEF_INT ||
                   config->blocking != 0;
    lock();
    struct fk_clique *cl = g_cliques;
    while (cl && memcmp(&cl->id, &commId, sizeof commId) != 0)
        cl = cl->next;
    if (cl && cl->nranks != nranks) {
        unlock();
        return nerr(ncclInvalidUsage, "ncclCommInitRankConfig: rank %d "
                    "joins a group of %d, another rank said %d", rank,
                    nranks, cl->nranks);
    }
    if (cl && cl->comm[rank]) {
        unlock();
        return nerr(ncclInvalidUsage, "ncclCommInitRankConfig: rank %d of "
                    "this unique id is taken", rank);
    }
    for (int r = 0; cl && r < nranks; r++)
        if (cl->comm[r] && cl->comm[r]->dev == t_dev) {
            unlock();
            return nerr(ncclInvalidUsage, "ncclCommInitRankConfig: "
                        "duplicate GPU detected: ranks %d and %d both on "
                        "device %d", r, rank, t_dev);
        }
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!cl) {
        cl = calloc(1, sizeof *cl);
        if (cl) {
            cl->comm = calloc((size_t)nranks, sizeof *cl->comm);
            cl->posted = calloc((size_t)nranks, sizeof *cl->posted);
        }
        if (!c || !cl || !cl->comm || !cl->posted) {
            unlock();
            if (cl) {
                free(cl->comm);
                free(cl->posted);
            }
            free(cl);
            free(c);
            return nerr(ncclSystemError, "out of host memory");
        }
        cl->id = commId;
        cl->nranks = nranks;
        cl->next = g_cliques;
        g_cliques = cl;
    } else if (!c) {
        unlock();
        return nerr(ncclSystemError, "out of host memory");
    }
    *c = (struct ncclComm){ .cl = cl, .rank = rank, .dev = t_dev,
                            .blocking = blocking, .state = ncclInProgress,
                            .next = g_comms };
    g_comms = c;
    cl->comm[rank] = c;
    cl->nattached++;
    *comm = c;
    if (t_group_depth > 0) { /* made at ncclGroupEnd */
        c->group_next = t_group;
        t_group = c;
        unlock();
        return ncclSuccess;
    }
    join(c);
    ncclResult_t r = ncclSuccess;
    if (!blocking) {
        r = c->state == ncclSuccess ? ncclSuccess : ncclInProgress;
    } else if (!wait_for(clique_full, cl)) {
        comm_free(c);
        *comm = NULL;
        r = nerr(ncclSystemError, "ncclCommInitRankConfig: rank %d: the "
                 "other ranks never came (%g s)", rank, timeout_s());
    }
    unlock();
    return r;
}

/* nccl.h declares these without (void): give them prototypes. */
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

ncclResult_t ncclGroupStart(void)
{
    t_group_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
    if (t_group_depth == 0)
        return nerr(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    if (--t_group_depth > 0)
        return ncclSuccess;
    lock();
    int blocking = 0, busy = 0;
    struct ncclComm *list = t_group;
    t_group = NULL;
    for (struct ncclComm *c = list; c; c = c->group_next)
        join(c);
    ncclResult_t r = ncclSuccess;
    for (struct ncclComm *c = list; c; c = c->group_next) {
        blocking |= c->blocking;
        busy |= c->state == ncclInProgress;
    }
    for (struct ncclComm *c = list; c && blocking; c = c->group_next)
        if (!wait_for(clique_full, c->cl))
            r = nerr(ncclSystemError, "ncclGroupEnd: rank %d: the other "
                     "ranks never came (%g s)", c->rank, timeout_s());
    while (list) {
        struct ncclComm *c = list;
        list = c->group_next;
        c->group_next = NULL;
    }
    unlock();
    return r == ncclSuccess && !blocking && busy ? ncclInProgress : r;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    if (!asyncError)
        return nerr(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError "
                    "is NULL");
    lock();
    struct ncclComm *c = live_comm(comm);
    if (!c) {
        unlock();
        return nerr(ncclInvalidArgument, "ncclCommGetAsyncError: %p is no "
                    "communicator (NULL, destroyed or aborted)", (void *)comm);
    }
    progress_all();
    *asyncError = c->finalized && c->state == ncclSuccess && c->pending
                      ? ncclInProgress : c->state;
    unlock();
    return ncclSuccess;
}

/* Is [p, p + bytes) device memory of `dev`? (count 0: anything goes) */
static ncclResult_t check_buf(const char *call, const char *what,
                              const void *p, size_t bytes, int dev)
{
    if (bytes == 0)
        return ncclSuccess;
    if (!p)
        return nerr(ncclInvalidArgument, "%s: %s is NULL", call, what);
    const struct fk_alloc *m = find_alloc(p, bytes);
    if (!m)
        return nerr(ncclInvalidArgument, "%s: %s %p (%zu bytes) is not in "
                    "device memory", call, what, p, bytes);
    if (m->dev != dev)
        return nerr(ncclInvalidArgument, "%s: %s is on device %d, the "
                    "communicator on device %d", call, what, m->dev, dev);
    return ncclSuccess;
}

static ncclResult_t collective(enum fk_coll coll, const void *sendbuff,
                               void *recvbuff, size_t count,
                               ncclDataType_t datatype, ncclRedOp_t op,
                               int root, ncclComm_t comm, cudaStream_t stream)
{
    const char *call = coll_name(coll);
    lock();
    struct ncclComm *c = live_comm(comm);
    ncclResult_t r = ncclSuccess;
    if (!c)
        r = nerr(ncclInvalidArgument, "%s: %p is no communicator (NULL, "
                 "destroyed or aborted)", call, (void *)comm);
    else if (c->state == ncclInProgress)
        r = nerr(ncclInvalidArgument, "%s: the communicator is not ready "
                 "(its creation is in progress)", call);
    else if (c->state != ncclSuccess)
        r = nerr(c->state, "%s: the communicator failed: %s", call, c->err);
    else if (c->finalized)
        r = nerr(ncclInvalidUsage, "%s: the communicator is finalized", call);
    else if (type_size(datatype) == 0)
        r = nerr(ncclInvalidArgument, "%s: invalid type %d", call,
                 (int)datatype);
    else if (coll == FK_ALLREDUCE && ((int)op < 0 || op >= ncclNumOps))
        r = nerr(ncclInvalidArgument, "%s: invalid reduction operation %d",
                 call, (int)op);
    else if (coll == FK_BROADCAST && (root < 0 || root >= c->cl->nranks))
        r = nerr(ncclInvalidArgument, "%s: invalid root %d (root should be "
                 "in the 0..%d range)", call, root, c->cl->nranks - 1);
    if (r != ncclSuccess) {
        unlock();
        return r;
    }
    size_t bytes = count * type_size(datatype);
    if (count && bytes / count != type_size(datatype))
        r = nerr(ncclInvalidArgument, "%s: count %zu overflows", call, count);
    if (r == ncclSuccess && (coll == FK_ALLREDUCE || c->rank == root))
        r = check_buf(call, "sendbuff", sendbuff, bytes, c->dev);
    if (r == ncclSuccess)
        r = check_buf(call, "recvbuff", recvbuff, bytes, c->dev);
    if (r == ncclSuccess && bytes && sendbuff != recvbuff &&
        (coll == FK_ALLREDUCE || c->rank == root) &&
        (uintptr_t)sendbuff < (uintptr_t)recvbuff + bytes &&
        (uintptr_t)recvbuff < (uintptr_t)sendbuff + bytes)
        r = nerr(ncclInvalidArgument, "%s: sendbuff and recvbuff overlap "
                 "without being the same", call);
    struct CUstream_st *s = r == ncclSuccess ? stream_of(stream) : NULL;
    if (r == ncclSuccess && (!s || s->dev != c->dev))
        r = nerr(ncclUnhandledCudaError, "%s: stream %p is %s", call,
                 (void *)stream, s ? "on another device than the "
                 "communicator" : "no live stream");
    if (r != ncclSuccess || count == 0) { /* NCCL drops empty ones */
        unlock();
        return r;
    }
    struct fk_op *o = calloc(1, sizeof *o);
    if (!o) {
        unlock();
        return nerr(ncclSystemError, "out of host memory");
    }
    *o = (struct fk_op){ .kind = FK_COLL, .comm = c, .seq = c->seq++,
                         .coll = coll, .sendbuf = sendbuff,
                         .recvbuf = recvbuff, .count = count,
                         .dtype = datatype, .redop = op, .root = root };
    enqueue(s, o);
    progress_all();
    unlock();
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream)
{
    return collective(FK_ALLREDUCE, sendbuff, recvbuff, count, datatype, op,
                      0, comm, stream);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream)
{
    return collective(FK_BROADCAST, sendbuff, recvbuff, count, datatype,
                      ncclSum, root, comm, stream);
}

/* Drop the communicator's queued collectives (its kernels stop). */
static void drop_in(struct CUstream_st *s, struct ncclComm *c)
{
    struct fk_op **p = &s->head, *last = NULL;
    while (*p) {
        struct fk_op *op = *p;
        if (op->kind == FK_COLL && op->comm == c) {
            *p = op->next;
            if (c->cl->posted[c->rank] == op)
                c->cl->posted[c->rank] = NULL;
            op_free(op);
        } else {
            last = op;
            p = &op->next;
        }
    }
    s->tail = last;
}

static void drop_work(struct ncclComm *c)
{
    for (int d = 0; d < FK_MAX_DEV; d++)
        drop_in(&g_default[d], c);
    for (struct CUstream_st *s = g_streams; s; s = s->next)
        drop_in(s, c);
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (!comm)
        return ncclSuccess;
    lock();
    struct ncclComm *c = live_comm(comm);
    if (!c) {
        unlock();
        return nerr(ncclInvalidArgument, "ncclCommAbort: %p is no "
                    "communicator", (void *)comm);
    }
    drop_work(c);
    struct fk_clique *cl = c->cl;
    for (int r = 0; r < cl->nranks; r++)
        if (cl->comm[r] && r != c->rank)
            comm_fail(cl->comm[r], ncclRemoteError, "rank %d aborted its "
                      "communicator", c->rank);
    comm_free(c);
    progress_all();
    pthread_cond_broadcast(&g_cv);
    unlock();
    return ncclSuccess;
}

static int comm_idle(const void *arg)
{
    return ((const struct ncclComm *)arg)->pending == 0;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    lock();
    struct ncclComm *c = live_comm(comm);
    ncclResult_t r = ncclSuccess;
    if (!c)
        r = nerr(ncclInvalidArgument, "ncclCommFinalize: %p is no "
                 "communicator", (void *)comm);
    else if (c->finalized)
        r = nerr(ncclInvalidUsage, "ncclCommFinalize: finalized already");
    if (r != ncclSuccess) {
        unlock();
        return r;
    }
    c->finalized = 1;
    progress_all();
    if (c->blocking) {
        if (!wait_for(comm_idle, c))
            r = nerr(ncclSystemError, "ncclCommFinalize: its collectives "
                     "never completed (%g s)", timeout_s());
    } else if (c->pending) {
        r = ncclInProgress;
    }
    unlock();
    return r;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm)
        return ncclSuccess;
    lock();
    struct ncclComm *c = live_comm(comm);
    if (!c) {
        unlock();
        return nerr(ncclInvalidArgument, "ncclCommDestroy: %p is no "
                    "communicator", (void *)comm);
    }
    ncclResult_t r = ncclSuccess;
    if (!wait_for(comm_idle, c)) { /* its work never completes: abort */
        drop_work(c);
        struct fk_clique *cl = c->cl;
        for (int k = 0; k < cl->nranks; k++)
            if (cl->comm[k] && k != c->rank)
                comm_fail(cl->comm[k], ncclRemoteError, "rank %d was "
                          "destroyed with work in flight", c->rank);
        r = nerr(ncclSystemError, "ncclCommDestroy: rank %d: its "
                 "collectives never completed (%g s)", c->rank, timeout_s());
    }
    comm_free(c);
    unlock();
    return r;
}

/* ---- what was never given back ----------------------------------------- */

__attribute__((destructor)) static void leak_check(void)
{
    if (!g_pid || g_pid != getpid())
        return;
    lock();
    size_t nalloc = 0, bytes = 0, nstream = 0, ncomm = 0;
    for (struct fk_alloc *m = g_allocs; m; m = m->next, nalloc++)
        bytes += m->n;
    for (struct CUstream_st *s = g_streams; s; s = s->next)
        nstream++;
    for (struct ncclComm *c = g_comms; c; c = c->next)
        ncomm++;
    unlock();
    if (!nalloc && !nstream && !ncomm)
        return;
    fprintf(stderr, "fake nccl: not given back: %zu device allocation%s "
            "(%zu bytes), %zu stream%s, %zu communicator%s\n", nalloc,
            nalloc == 1 ? "" : "s", bytes, nstream, nstream == 1 ? "" : "s",
            ncomm, ncomm == 1 ? "" : "s");
    fflush(NULL);
    _exit(1);
}
