/* strata core -- the geometry of a run: which processes train, which
 * slices of which global batch each replica trains, and the learning-rate
 * scale that follows them. One function computes it, at the start of a run
 * and at every regroup of an elastic job; nothing else writes it.
 * Internal. */
#ifndef STRATA_CORE_GEOMETRY_H
#define STRATA_CORE_GEOMETRY_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

typedef struct strata__geometry {
    int     nworkers;        /* processes that train                         */
    int     rank;            /* this one's, 0 .. nworkers-1; -1: it trains   */
                             /* nothing (a ps task)                          */
    int     chief;           /* rank 0: prints, writes the job's files       */
    int     batch;           /* [train] batch_size, the global batch at the  */
                             /* start                                        */
    int     gbatch;          /* the global batch now (an elastic job that    */
                             /* keeps a worker's share: share x workers)     */
    int     share;           /* a worker's share of the start's batch        */
    int     shards;          /* replica slices of a batch, every worker's    */
    int     shard0;          /* this process's first slice                   */
    int     per_replica;     /* rows of a slice: gbatch / shards             */
    int     slice_max;       /* rows of the largest slice a replica may get  */
    int64_t steps_per_epoch; /* at the start's batch, the last partial one   */
                             /* dropped                                      */
    double  lr_scale;        /* the linear scaling rule's factor ([train]    */
                             /* lr_scaling), 1 without it                    */
} strata__geometry_t;

/* What the geometry is computed from. */
typedef struct strata__geometry_in {
    const strata__train_cfg_t *train;
    size_t samples;          /* training samples                             */
    int    nreplicas;        /* this process's replicas                      */
    int    nworkers, rank;   /* of the cluster, or of the generation joined  */
    int    whole_batches;    /* the strategy hands each worker whole batches */
                             /* (STRATA_CAP_NEXT_STEP): none are shared      */
    int    elastic;          /* an elastic job (regroup.c)                   */
    int    generation;       /* -1 at the start, else the generation's       */
} strata__geometry_in_t;

/* The geometry at the start (prev NULL) or of a new generation (prev: the
 * one before). 0, or STRATA_ECONFIG after one error line naming the batch
 * that does not fit. */
int strata__geometry(const strata__geometry_in_t *in,
                     const strata__geometry_t *prev, strata__geometry_t *out);

#endif
