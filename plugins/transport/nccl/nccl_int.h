/* nccl.so internals: the instance, one member per local GPU, and the
 * helpers shared by its files (nccl_plugin.c: vtable and collectives,
 * nccl_wait.c: waits, failures and aborts, nccl_id.c: the unique id of a
 * group of processes over ZeroMQ). */
#ifndef STRATA_NCCL_INT_H
#define STRATA_NCCL_INT_H

#include <stdatomic.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <strata/plugin.h>

typedef struct nc_member {
    int          dev;     /* CUDA ordinal (STRATA_DEVICE_INDEX of gpu:N)    */
    ncclComm_t   comm;    /* NULL before init and after an abort           */
    cudaStream_t stream;  /* where this member's collectives run           */
    float       *one;     /* one float on dev: ctl(BARRIER)'s all-reduce   */
    float       *stage;   /* on dev: where a host buffer is reduced        */
    size_t       staged;  /* floats of stage                               */
    int          failed;  /* sticky STRATA_E* once this member failed      */
} nc_member_t;

typedef struct nc_ctx {
    const strata_host_v2_t *host;
    strata_hctx_t          *hc;        /* first argument of every host call */
    int32_t                 scope;     /* STRATA_SCOPE_LOCAL | _WORLD      */
    int                     size;      /* members of the whole group       */
    int                     rank;      /* WORLD: this process's member     */
    int                     nlocal;    /* members in this process          */
    double                  timeout_s; /* bound on every wait              */
    atomic_int              aborted;   /* ctl(ABORT), or a member failed   */
    char                    tag[64];   /* the group's name, for messages   */
    char                    peers[1024]; /* "worker:0 (h:p), ..." / "gpu:0, ..." */
    nc_member_t            *m;         /* nlocal                           */
} nc_ctx_t;

/* nccl_wait.c */
double nc_now(void);
/* STRATA_E* for an NCCL result that is an error. */
int    nc_errno(ncclResult_t r);
/* Wait until member `mb` has nothing in progress: its communicator's state
 * is ncclSuccess and, when `on_stream`, its stream is idle. Bounded by the
 * timeout; ctl(ABORT) ends it early. A failure, the deadline or an abort
 * aborts the member's communicator (ncclCommAbort), marks the instance
 * aborted (the other local members stop too) and returns STRATA_E*; the
 * error line names `what` and the group's members. */
int    nc_wait(nc_ctx_t *c, nc_member_t *mb, int on_stream, const char *what);
/* Check the result of an NCCL call just made for `mb`: ncclSuccess and
 * ncclInProgress go on to nc_wait(); an error is logged and fails the
 * member as nc_wait does. */
int    nc_issued(nc_ctx_t *c, nc_member_t *mb, ncclResult_t r, int on_stream,
                 const char *what);
/* Abort the member's communicator, if any, and make `rc` sticky. */
void   nc_fail(nc_ctx_t *c, nc_member_t *mb, int rc);

/* nccl_id.c */
/* WORLD groups of more than one process: rank 0 hands `id` (made by the
 * caller) to every other rank, which receives it into `id`. ZeroMQ, one
 * REP socket on rank 0 at port+1 of addrs[0], a REQ on every other rank;
 * bounded by the timeout; the error names the ranks that never came. */
int    nc_id_share(nc_ctx_t *c, const strata_group_t *g, ncclUniqueId *id);

#endif
