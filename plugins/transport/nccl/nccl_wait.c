/* Waiting on NCCL with a deadline. NCCL has no timeout of its own: the
 * communicators are non-blocking (ncclConfig_t.blocking = 0), so every call
 * returns at once and this file polls the communicator's state
 * (ncclCommGetAsyncError) and the member's stream (cudaStreamQuery) until
 * the work is done, an error shows, the deadline passes or ctl(ABORT) is
 * called; the last three end in ncclCommAbort, which also stops kernels
 * that wait for a peer that will never come. */
#include <sched.h>
#include <time.h>

#include "nccl_int.h"

double nc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int nc_errno(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess:
    case ncclInProgress:
        return STRATA_OK;
    case ncclUnhandledCudaError:
        return STRATA_EDEVICE;
    case ncclSystemError:
    case ncclRemoteError:
        return STRATA_EPEER;
    case ncclInvalidArgument:
    case ncclInvalidUsage:
        return STRATA_EINVAL;
    default:
        return STRATA_EINTERNAL;
    }
}

void nc_fail(nc_ctx_t *c, nc_member_t *mb, int rc)
{
    if (mb->comm) {
        (void)ncclCommAbort(mb->comm); /* blocking, also when non-blocking */
        mb->comm = NULL;
    }
    if (!mb->failed)
        mb->failed = rc;
    atomic_store(&c->aborted, 1);
}

/* Short waits are the common case (a step's all-reduce): spin a little,
 * then sleep in growing slices up to 200 us. */
static void backoff(unsigned i)
{
    if (i < 64) {
        sched_yield();
        return;
    }
    struct timespec ts = { 0, i < 1024 ? 20000 : 200000 };
    nanosleep(&ts, NULL);
}

static int fail_nccl(nc_ctx_t *c, nc_member_t *mb, ncclResult_t r,
                     const char *what)
{
    int rc = nc_errno(r);
    c->host->log(c->hc, STRATA_LOG_ERROR, "nccl", "gpu:%d: %s: %s (%s); group "
                 "%s: %s", mb->dev, what, ncclGetErrorString(r),
                 ncclGetLastError(mb->comm), c->tag, c->peers);
    nc_fail(c, mb, rc);
    return rc;
}

int nc_wait(nc_ctx_t *c, nc_member_t *mb, int on_stream, const char *what)
{
    const double t0 = nc_now();
    for (unsigned i = 0;; i++) {
        ncclResult_t st = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(mb->comm, &st);
        if (r != ncclSuccess)
            st = r;
        if (st != ncclSuccess && st != ncclInProgress)
            return fail_nccl(c, mb, st, what);
        if (st == ncclSuccess) {
            if (!on_stream)
                return STRATA_OK;
            cudaError_t e = cudaStreamQuery(mb->stream);
            if (e == cudaSuccess)
                return STRATA_OK;
            if (e != cudaErrorNotReady) {
                c->host->log(c->hc, STRATA_LOG_ERROR, "nccl", "gpu:%d: %s: "
                             "CUDA: %s; group %s: %s", mb->dev, what,
                             cudaGetErrorString(e), c->tag, c->peers);
                nc_fail(c, mb, STRATA_EDEVICE);
                return STRATA_EDEVICE;
            }
            (void)cudaGetLastError(); /* "not ready" is no error to keep */
        }
        if (atomic_load(&c->aborted)) {
            nc_fail(c, mb, STRATA_ECANCELED);
            return STRATA_ECANCELED;
        }
        if (nc_now() - t0 > c->timeout_s) {
            c->host->log(c->hc, STRATA_LOG_ERROR, "nccl", "gpu:%d: %s did not "
                         "complete within %g s; aborted. Group %s (%d "
                         "members): %s", mb->dev, what, c->timeout_s, c->tag,
                         c->size, c->peers);
            nc_fail(c, mb, STRATA_ETIMEDOUT);
            return STRATA_ETIMEDOUT;
        }
        backoff(i);
    }
}

int nc_issued(nc_ctx_t *c, nc_member_t *mb, ncclResult_t r, int on_stream,
              const char *what)
{
    if (r != ncclSuccess && r != ncclInProgress)
        return fail_nccl(c, mb, r, what);
    return nc_wait(c, mb, on_stream, what);
}
