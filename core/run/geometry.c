/* The geometry of a run (geometry.h): at the start from the configuration
 * and the cluster, at each regroup from the generation joined. */
#include <assert.h>

#include "geometry.h"

#define WHO "train"

static int at_start(const strata__geometry_in_t *in, strata__geometry_t *g)
{
    const strata__train_cfg_t *t = in->train;
    /* A strategy that hands out steps gives each worker whole global
     * batches; otherwise all workers share every batch. */
    int sharing = in->whole_batches || in->nworkers < 1 ? 1 : in->nworkers;
    int R = in->nreplicas, total = R * sharing;
    /* An elastic job's generations may have any number of workers. When
     * they keep the global batch, its slices differ by one sample where
     * they do not divide it, and a replica's work is sized for the largest
     * (one worker alone); when they keep a worker's share, the slices never
     * change. */
    int uneven = in->elastic && t->elastic_batch == STRATA__BATCH_GLOBAL;
    if (t->batch_size % total != 0 && !uneven) {
        strata__log(STRATA_LOG_ERROR, WHO,
                    "[train] batch_size = %lld is the global batch and must "
                    "split evenly across %d replicas%s",
                    (long long)t->batch_size, total,
                    in->nworkers > 1 ? " (all workers)" : "");
        return STRATA_ECONFIG;
    }
    if ((size_t)t->batch_size > in->samples) {
        strata__log(STRATA_LOG_ERROR, WHO,
                    "[train] batch_size = %lld is larger than the %zu training "
                    "samples", (long long)t->batch_size, in->samples);
        return STRATA_ECONFIG;
    }
    g->batch = g->gbatch = (int)t->batch_size;
    g->share = g->batch / sharing;
    g->shards = total;
    g->shard0 = sharing > 1 ? in->rank * R : 0;
    g->per_replica = g->batch / total;
    g->slice_max = uneven ? (g->batch + R - 1) / R : g->batch / total;
    /* The last partial batch of an epoch is dropped (drop_remainder):
     * every step then splits evenly, and the shuffle puts other samples
     * there in the next epoch. */
    g->steps_per_epoch = (int64_t)(in->samples / (size_t)g->batch);
    g->lr_scale = t->lr_scaling ? (double)total : 1.0;
    return STRATA_OK;
}

/* An elastic generation: the global batch kept, or a worker's share. */
static int regrouped(const strata__geometry_in_t *in,
                     const strata__geometry_t *prev, strata__geometry_t *g)
{
    const strata__train_cfg_t *t = in->train;
    int per_worker = t->elastic_batch == STRATA__BATCH_PER_WORKER;
    int total = in->nworkers * in->nreplicas;
    int gbatch = per_worker ? prev->share * in->nworkers : prev->batch;
    if (gbatch < total || (size_t)gbatch > in->samples) {
        strata__log(STRATA_LOG_ERROR, WHO, "generation %d: a global batch "
                    "of %d for %d replicas (%d workers x %d) and %zu "
                    "samples: [train] batch_size does not fit",
                    in->generation, gbatch, total, in->nworkers,
                    in->nreplicas, in->samples);
        return STRATA_ECONFIG;
    }
    if (gbatch != prev->gbatch && in->rank == 0)
        strata__log(STRATA_LOG_INFO, WHO, "generation %d: global batch %d "
                    "(%d per worker), %lld steps per epoch", in->generation,
                    gbatch, prev->share,
                    (long long)(in->samples / (size_t)gbatch));
    *g = *prev;
    g->gbatch = gbatch;
    g->shards = total;
    g->shard0 = in->rank * in->nreplicas;
    g->per_replica = gbatch / total;
    /* The linear scaling rule follows the replicas that share a batch. */
    if (t->lr_scaling && per_worker)
        g->lr_scale = (double)total;
    return STRATA_OK;
}

int strata__geometry(const strata__geometry_in_t *in,
                     const strata__geometry_t *prev, strata__geometry_t *out)
{
    assert(in->nreplicas > 0);
    strata__geometry_t g = { 0 };
    int rc = prev ? regrouped(in, prev, &g) : at_start(in, &g);
    if (rc != STRATA_OK)
        return rc;
    g.nworkers = in->nworkers;
    g.rank = in->rank;
    g.chief = in->rank == 0;
    *out = g;
    return STRATA_OK;
}
