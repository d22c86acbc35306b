/* mwms.so -- MultiWorkerMirroredStrategy: synchronous replicas across
 * processes (workers) and machines. Inside a worker the replicas are
 * mirrored as in mirrored.so and reduce through `local`; one thread per
 * worker (replica 0) then all-reduces the worker's result with the other
 * workers through the transport the core opens for them ([transport] world:
 * nccl, zmq) and the result fans back out to the local replicas. Every
 * replica of every worker ends each step with bitwise-equal gradients,
 * hence bitwise-equal variables. The variables start from the chief's
 * (rank 0) broadcast.
 *
 * Elastic ([strategy.mwms] elastic = true, under strata launch --elastic):
 * the workers that train are a generation of the job's membership, which
 * the core's client joins for us (host->membership): init joins the first
 * one; STRATA_CTL_REGROUP, after a lost member or at the boundary of a
 * resize, closes the groups, joins the next one and opens the groups on
 * its members' fresh addresses. The core then moves the state from rank 0
 * (STATE_GET/SET) to whoever lacks it. A worker that joins a running job
 * takes no part in the start-up broadcast: its state comes that way.
 *
 * shard_optimizer (ZeRO stage 1 across workers): worker w keeps the
 * optimizer state of its shard [bound[w], bound[w + 1]) of the flat layout
 * only (16-float lines) -- 1/W of it per worker, on its replica 0, none on
 * the other replicas. A step: the gradients are all-reduced as ever; replica
 * 0 clips (by the whole gradient's norm, which it holds) and steps its
 * shard with the same element-wise kernel as an unsharded step, the
 * workers all-gather the variables (one broadcast per worker, of its
 * shard), and the worker's replicas take replica 0's copy: every copy ends
 * bitwise equal to an unsharded run's. Where the world transport offers
 * reduce-scatter and all-gather over shards (STRATA_CTL_REDUCE_SCATTER,
 * zmq's ring; not its shared memory) and no clip_norm needs the whole
 * gradient, the step is ZeRO's own instead: reduce-scatter the gradients,
 * step the shard, all-gather the variables -- the bytes of one
 * all-reduce, not 1.5 -- the reduce-scatter in the buckets below, so it
 * overlaps with the backward pass as the all-reduce does; the sums then
 * run in the order of the shards, not of the all-reduce's chunks (2
 * workers: the same bits; more: within rounding).
 * Checkpoints: STATE_GET gathers every shard's slots (the file is the
 * unsharded run's), STATE_SET keeps each worker's own range. Not with
 * elastic = true: a lost worker would take its shard of the state along.
 *
 * Buckets and overlap (overlap.c): the workers' all-reduce goes in buckets
 * of whole variables of about bucket_bytes, last layer first; with overlap
 * (one replica per worker, on a CPU) a thread of the worker all-reduces
 * each bucket as soon as the backward pass has produced it (reduce_ready,
 * ABI 2.4), while the earlier layers' backward still runs. The same
 * buckets in the same order either way: the bits do not depend on it.
 *
 * STRATA_CTL_STEP_SUM (step_sum.c): batchnorm's statistics, summed across
 * the workers during a step, exactly and in rank order.
 *
 * Embedding tables (ABI 2.9, STRATA_CAP_SPARSE): their gradients come as
 * rows. With one replica per worker (no shard_optimizer, no overlap
 * thread) the workers exchange the rows (plugins/kit/sparse.c): row
 * counts all-reduced, then all-gathered while the rows of all workers are
 * at most sparse_threshold of the table's, each worker adding them in rank
 * order (2 workers: the bits of the dense all-reduce); above it, with
 * sparse_as_dense, or in the other set-ups the rows are copied into the
 * dense gradient (the same bits) and all-reduced as ever. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata/plugin.h>

#include "../common/replicas.h"
#include "overlap.h"
#include "step_sum.h"

typedef struct mwms_cfg {
    int     reduce_op; /* 0 mean, 1 sum */
    int     elastic;
    int64_t min_workers, max_workers;
    double  rendezvous_timeout_s;
    int     shard_optimizer;
    int     overlap;   /* 0 auto, 1 true, 2 false */
    int64_t bucket_bytes;
    int     sparse_as_dense;
    double  sparse_threshold;
} mwms_cfg_t;

static const strata_option_t mwms_options[] = {
    { .key = "reduce_op", .type = STRATA_OPT_ENUM, .def = "mean",
      .offset = offsetof(mwms_cfg_t, reduce_op), .min = 1, .max = 0,
      .choices = "mean|sum",
      .help = "how gradients combine over all replicas of all workers: mean "
              "(the global-batch gradient) or sum" },
    { .key = "elastic", .type = STRATA_OPT_BOOL, .def = "false",
      .offset = offsetof(mwms_cfg_t, elastic), .min = 1, .max = 0,
      .help = "train on as workers come and go: a lost worker ends nothing "
              "while min_workers remain, one that comes back joins at a step "
              "boundary (needs strata launch --elastic MIN:MAX, which sets "
              "it)" },
    { .key = "min_workers", .type = STRATA_OPT_INT, .def = "1",
      .offset = offsetof(mwms_cfg_t, min_workers), .min = 1, .max = 1024,
      .help = "elastic: the fewest workers the job trains with" },
    { .key = "max_workers", .type = STRATA_OPT_INT, .def = "0",
      .offset = offsetof(mwms_cfg_t, max_workers), .min = 0, .max = 1024,
      .help = "elastic: the most workers the job trains with; 0 = no bound "
              "but the job's" },
    { .key = "rendezvous_timeout_s", .type = STRATA_OPT_FLOAT, .def = "60",
      .offset = offsetof(mwms_cfg_t, rendezvous_timeout_s), .min = 1,
      .max = 86400,
      .help = "elastic: how long forming a generation may wait for a "
              "worker; with fewer than min_workers for that long, the job "
              "stops" },
    { .key = "shard_optimizer", .type = STRATA_OPT_BOOL, .def = "false",
      .offset = offsetof(mwms_cfg_t, shard_optimizer), .min = 1, .max = 0,
      .help = "ZeRO stage 1 across workers: each worker keeps and steps the "
              "optimizer state of 1/W of the variables, and the workers "
              "all-gather the variables after each step (the same bits, or "
              "within rounding over TCP with 3 or more workers, where a "
              "reduce-scatter and an all-gather move the bytes of one "
              "all-reduce); not with elastic" },
    { .key = "overlap", .type = STRATA_OPT_ENUM, .def = "auto",
      .offset = offsetof(mwms_cfg_t, overlap), .min = 1, .max = 0,
      .choices = "auto|true|false",
      .help = "all-reduce each bucket of gradients across the workers while "
              "the backward pass of the earlier layers runs (one replica per "
              "worker, CPU devices); the same bits either way. auto: when "
              "the workers are not all on this host (on one host they share "
              "its cores, and overlap slows the step down)" },
    { .key = "bucket_bytes", .type = STRATA_OPT_SIZE, .def = "1M",
      .offset = offsetof(mwms_cfg_t, bucket_bytes), .min = 0,
      .max = (int64_t)1 << 40,
      .help = "gradient bytes per all-reduce across the workers (whole "
              "variables, last layer first); 0 = one all-reduce of the whole "
              "gradient. The buckets decide the order of the sums: workers of "
              "one job must agree" },
    { .key = "sparse_as_dense", .type = STRATA_OPT_BOOL, .def = "false",
      .offset = offsetof(mwms_cfg_t, sparse_as_dense),
      .help = "embedding gradients always as the dense all-reduce of the "
              "whole table (Horovod's sparse_as_dense), never as rows; "
              "workers of one job must agree" },
    { .key = "sparse_threshold", .type = STRATA_OPT_FLOAT, .def = "0.1",
      .offset = offsetof(mwms_cfg_t, sparse_threshold), .min = 0, .max = 1e6,
      .help = "embedding gradients go as rows (all-gathered) while the rows "
              "of all workers together are at most this fraction of the "
              "table's rows, else dense (one replica per worker; measured: "
              "contrib/bench/sparse); workers of one job must agree" },
    { .key = NULL },
};

typedef struct mwms {
    replicas_t          rs;
    int                 reduce_op;
    mwms_cfg_t          cfg;
    const strata_env_t *env;
    int                 nworkers, rank;
    strata_transport_t *local;   /* replica threads of this worker          */
    strata_transport_t *world;   /* one member per worker                   */
    /* the world group: training tasks in rank order */
    const char        **addrs;
    const char        **names;
    char               *name_buf;
    int32_t             cpu;
    /* elastic: the generation joined last (its arrays are the core's) */
    strata_membership_t gen;
    int                 joining;  /* init joined a running job          */
    char                tag[32];  /* of the world group: one per generation */
    /* shard_optimizer: nworkers + 1 bounds, this worker's optimizer state */
    size_t             *bound;
    strata_opt_t       *wopt;
    int                 halves;  /* reduce-scatter + all-gather (above) */
    /* the all-reduce's buckets: each variable's first element, then them */
    size_t             *var_lo;
    int                 nvars;
    mw_buckets_t       *buckets;
    /* embedding gradients as rows, between the workers (replica 0) */
    strata_kit_sparse_policy_t sparse_pol;
    strata_kit_sparse_t        sparse;
    /* replica 0's step: the flat layout from here on is densified and
     * handed to the bucket thread (reduce_ready), which may be reducing it:
     * no copy may land there any more. SIZE_MAX between steps. */
    size_t                     densified_lo;
    int                        told_dense; /* said why rows go dense */
} mwms_t;

static void mwms_fini(void *pctx)
{
    mwms_t *m = pctx;
    if (!m)
        return;
    mw_buckets_close(m->buckets); /* its thread may use the world */
    free(m->var_lo);
    if (m->rs.host && m->sparse.as_rows + m->sparse.as_dense)
        m->rs.host->log(m->rs.hc, m->rank == 0 ? STRATA_LOG_INFO
                                               : STRATA_LOG_DEBUG, "mwms",
                        "embedding gradients: %lld table-steps as rows, "
                        "%lld dense", (long long)m->sparse.as_rows,
                        (long long)m->sparse.as_dense);
    if (m->rs.host)
        strata_kit_sparse_fini(m->rs.host, m->rs.hc, &m->sparse);
    if (m->rs.host) {
        m->rs.host->t_close(m->rs.hc, m->world);
        m->rs.host->t_close(m->rs.hc, m->local);
    }
    if (m->wopt)
        m->rs.host->opt_destroy(m->rs.hc, m->wopt);
    free(m->bound);
    replicas_fini(&m->rs);
    if (!m->cfg.elastic) { /* else the core's */
        free(m->addrs);
        free(m->names);
    }
    free(m->name_buf);
    free(m);
}

/* The training tasks (chief, workers) of the cluster, in rank order. */
static int world_members(mwms_t *m, const strata_cluster_t *c)
{
    snprintf(m->tag, sizeof m->tag, "mwms");
    m->nworkers = c->nworkers;
    m->rank = c->tasks[c->self].rank;
    m->addrs = calloc((size_t)c->nworkers, sizeof *m->addrs);
    m->names = calloc((size_t)c->nworkers, sizeof *m->names);
    m->name_buf = calloc((size_t)c->nworkers, 48);
    if (!m->addrs || !m->names || !m->name_buf)
        return STRATA_ENOMEM;
    for (int i = 0; i < c->ntasks; i++) {
        const strata_task_t *t = &c->tasks[i];
        if (t->rank < 0)
            continue;
        if (t->rank >= c->nworkers)
            return STRATA_EINVAL;
        char *name = m->name_buf + 48 * t->rank;
        snprintf(name, 48, "%s:%d", t->type, t->index);
        m->names[t->rank] = name;
        m->addrs[t->rank] = t->address;
    }
    return STRATA_OK;
}

/* The local group of this worker's replicas and the world group of the
 * workers (members already chosen). */
static int open_groups(mwms_t *m)
{
    const strata_host_v2_t *host = m->rs.host;
    const strata_env_t *env = m->env;
    int rc = STRATA_OK;
    if (env->nreplicas > 1) {
        const strata_group_t g = {
            .struct_size = sizeof g, .scope = STRATA_SCOPE_LOCAL,
            .size = env->nreplicas, .rank = 0, .nlocal = env->nreplicas,
            .devices = env->devices, .tag = "mwms-local",
        };
        rc = host->t_open(m->rs.hc, &g, &m->local);
    }
    if (rc == STRATA_OK && m->nworkers > 1) {
        const strata_group_t g = {
            .struct_size = sizeof g, .scope = STRATA_SCOPE_WORLD,
            .size = m->nworkers, .rank = m->rank, .nlocal = 1,
            .devices = &env->devices[0], .addrs = m->addrs,
            .names = m->names, .tag = m->tag,
        };
        rc = host->t_open(m->rs.hc, &g, &m->world);
    }
    return rc;
}

/* Elastic: join the next generation; its members are the world. */
static int join(mwms_t *m, int64_t committed)
{
    const strata_host_v2_t *h = m->rs.host;
    if (!STRATA_HAS_FIELD(strata_host_v2_t, h, membership) || !h->membership) {
        h->log(m->rs.hc, STRATA_LOG_ERROR, "mwms", "[strategy.mwms] elastic "
               "= true needs a core of plugin ABI 2.3 or later");
        return STRATA_ECONFIG;
    }
    m->gen = (strata_membership_t){ .struct_size = sizeof m->gen };
    int rc = h->membership(m->rs.hc, committed,
                           (int)(m->cfg.rendezvous_timeout_s * 1000.0), &m->gen);
    if (rc == STRATA_ENOTSUP) {
        h->log(m->rs.hc, STRATA_LOG_ERROR, "mwms", "[strategy.mwms] elastic "
               "= true needs the membership service of strata launch "
               "--elastic MIN:MAX (none in this job)");
        return STRATA_ECONFIG;
    }
    if (rc != STRATA_OK)
        return rc;
    if (m->gen.size < m->cfg.min_workers || m->gen.rank < 0 ||
        m->gen.rank >= m->gen.size ||
        (m->cfg.max_workers > 0 && m->gen.size > m->cfg.max_workers)) {
        h->log(m->rs.hc, STRATA_LOG_ERROR, "mwms", "generation %d has %d "
               "workers; [strategy.mwms] min_workers = %lld, max_workers = "
               "%lld", m->gen.generation, m->gen.size,
               (long long)m->cfg.min_workers, (long long)m->cfg.max_workers);
        return STRATA_EPROTO;
    }
    m->nworkers = m->gen.size;
    m->rank = m->gen.rank;
    m->addrs = (const char **)m->gen.addrs;
    m->names = (const char **)m->gen.names;
    snprintf(m->tag, sizeof m->tag, "mwms.g%d", m->gen.generation);
    return STRATA_OK;
}

/* shard_optimizer: every worker's bounds, and this worker's state. */
static int shard_init(mwms_t *m)
{
    m->bound = calloc((size_t)m->nworkers + 1, sizeof *m->bound);
    if (!m->bound)
        return STRATA_ENOMEM;
    for (int w = 0; w <= m->nworkers; w++)
        m->bound[w] = replicas_shard_lo(m->rs.count, m->nworkers, w);
    return m->rs.host->opt_create(m->rs.hc, m->rs.devices[0],
                                  m->bound[m->rank + 1] - m->bound[m->rank],
                                  &m->wopt);
}

/* The all-gather: worker w broadcasts buf's range of its shard. */
static int all_gather(mwms_t *m, float *buf, int32_t device)
{
    if (m->halves && m->world) {
        strata_op_t o = { .struct_size = sizeof o, .buf = buf,
                          .count = m->rs.count, .device = device };
        const strata_host_v2_t *h = m->rs.host;
        if (STRATA_HAS_FIELD(strata_host_v2_t, h, t_all_gather))
            return h->t_all_gather(m->rs.hc, m->world, &o, m->bound);
        strata_shards_t sh = { .struct_size = sizeof sh, .op = &o,
                               .bounds = m->bound };
        return h->t_ctl(m->rs.hc, m->world, STRATA_CTL_ALL_GATHER, &sh);
    }
    int rc = STRATA_OK;
    for (int w = 0; m->world && rc == STRATA_OK && w < m->nworkers; w++) {
        strata_op_t b = { .struct_size = sizeof b, .buf = buf + m->bound[w],
                          .count = m->bound[w + 1] - m->bound[w],
                          .device = device, .root = w };
        if (b.count > 0) /* every worker skips the same ones */
            rc = m->rs.host->t_update(m->rs.hc, m->world, &b);
    }
    return rc;
}

/* A sharded step (see the top): replica 0 steps this worker's shard, the
 * workers all-gather, the replicas take replica 0's copy. */
static int shard_update(mwms_t *m, strata_op_t *op)
{
    const strata_host_v2_t *h = m->rs.host;
    strata_hctx_t *hc = m->rs.hc;
    if (op->slot < 0 || op->slot >= m->rs.n || op->count != m->rs.count)
        return STRATA_EINVAL;
    int rc = STRATA_OK;
    if (op->slot == 0) {
        size_t lo = m->bound[m->rank], len = m->bound[m->rank + 1] - lo;
        int32_t dev = m->rs.devices[0];
        float *grad = op->buf;
        /* clip_norm: the whole gradient's norm, this shard scaled by it */
        rc = replicas_clip_range(h, hc, dev, m->rs.count, grad, lo, len);
        /* Stepped even when empty: every shard counts the same steps. */
        if (rc == STRATA_OK)
            rc = h->opt_step(hc, m->wopt, m->rs.slab[0] + lo, grad + lo, len,
                             op->lr);
        if (rc == STRATA_OK)
            rc = all_gather(m, m->rs.slab[0], dev);
        if (rc != STRATA_OK && m->local)
            h->t_ctl(hc, m->local, STRATA_CTL_ABORT, NULL);
    }
    if (rc == STRATA_OK && m->local) {
        strata_op_t b = { .struct_size = sizeof b, .slot = op->slot,
                          .buf = m->rs.slab[op->slot], .count = m->rs.count,
                          .device = m->rs.devices[op->slot], .root = 0 };
        rc = h->t_update(hc, m->local, &b);
    }
    return rc;
}

/* STATE_GET/SET of this worker's shard of the optimizer state: its range
 * of st's slots; a GET then all-gathers every worker's range. */
static int shard_state(mwms_t *m, int set, strata_state_t *st)
{
    float *slots[8];
    if (st->nslots < 0 || st->nslots > 8)
        return STRATA_EINVAL;
    for (int i = 0; i < st->nslots; i++)
        slots[i] = st->slots[i] + m->bound[m->rank];
    int rc = m->rs.host->opt_io(m->rs.hc, m->wopt, set, slots, st->nslots,
                                &st->opt_steps);
    for (int i = 0; !set && rc == STRATA_OK && i < st->nslots; i++)
        rc = all_gather(m, st->slots[i], m->cpu);
    return rc;
}

static int mwms_init(const strata_host_v2_t *host, strata_hctx_t *hc,
                     const strata_env_t *env, void **pctx)
{
    *pctx = NULL;
    const strata_cluster_t *c = env->cluster;
    if (!c || c->self < 0 || c->self >= c->ntasks ||
        c->tasks[c->self].rank < 0) {
        host->log(hc, STRATA_LOG_ERROR, "mwms",
                  "this process is not a training task (chief or worker) of "
                  "the cluster");
        return STRATA_EINVAL;
    }
    mwms_t *m = calloc(1, sizeof *m);
    if (!m)
        return STRATA_ENOMEM;
    m->cfg = *(const mwms_cfg_t *)env->cfg;
    m->env = env;
    m->reduce_op = m->cfg.reduce_op == 0 ? STRATA_REDUCE_MEAN
                                         : STRATA_REDUCE_SUM;
    m->cpu = STRATA_DEVICE(STRATA_DEV_CPU, 0);
    m->sparse_pol = (strata_kit_sparse_policy_t){
        .as_dense = m->cfg.sparse_as_dense,
        .threshold = m->cfg.sparse_threshold };
    m->densified_lo = SIZE_MAX;
    if (m->cfg.shard_optimizer && m->cfg.elastic) {
        host->log(hc, STRATA_LOG_ERROR, "mwms", "[strategy.mwms] "
                  "shard_optimizer = true with elastic = true: a lost worker "
                  "would take its shard of the optimizer state along; choose "
                  "one");
        free(m);
        return STRATA_ECONFIG;
    }
    int rc = m->cfg.shard_optimizer ? replicas_init_bare(&m->rs, host, hc, env)
                                    : replicas_init(&m->rs, host, hc, env);
    if (rc == STRATA_OK && m->cfg.elastic) {
        rc = join(m, -1);
        m->joining = m->gen.resume_step >= 0;
    } else if (rc == STRATA_OK) {
        rc = world_members(m, c);
    }
    if (rc == STRATA_OK && m->cfg.shard_optimizer)
        rc = shard_init(m);
    if (rc == STRATA_OK)
        rc = open_groups(m);
    if (rc != STRATA_OK) {
        mwms_fini(m);
        return rc;
    }
    host->log(hc, m->rank == 0 ? STRATA_LOG_INFO : STRATA_LOG_DEBUG, "mwms",
              "worker %s: rank %d of %d; %d replicas through %s, workers "
              "through %s", m->names[m->rank], m->rank, m->nworkers, m->rs.n,
              m->local ? host->t_name(hc, m->local) : "-",
              m->world ? host->t_name(hc, m->world) : "-");
    *pctx = m;
    return STRATA_OK;
}

/* shard_optimizer: does the world offer reduce-scatter and all-gather,
 * and is the whole gradient never needed (no clip_norm: grad_sumsq says 0
 * at once when clipping is off)? */
static int halves_offered(mwms_t *m)
{
    const strata_host_v2_t *h = m->rs.host;
    strata_shards_t ask = { .struct_size = sizeof ask };
    double unused;
    /* A core before 2.5 answers the question as a ctl op. */
    int offered = m->world &&
                  (STRATA_HAS_FIELD(strata_host_v2_t, h, t_caps)
                       ? (h->t_caps(m->rs.hc, m->world) & STRATA_CAP_SHARDS) != 0
                       : h->t_ctl(m->rs.hc, m->world, STRATA_CTL_REDUCE_SCATTER,
                                  &ask) == STRATA_OK);
    return m->wopt && offered &&
           (!STRATA_HAS_FIELD(strata_host_v2_t, h, grad_sumsq) ||
            h->grad_sumsq(m->rs.hc, m->cpu, 0, NULL, &unused) == 0);
}

/* Each variable's first element, for the buckets. */
static int note_var(mwms_t *m, const strata_var_t *var)
{
    size_t *lo = realloc(m->var_lo, ((size_t)m->nvars + 1) * sizeof *lo);
    if (!lo)
        return STRATA_ENOMEM;
    m->var_lo = lo;
    m->var_lo[m->nvars++] = var->offset;
    return STRATA_OK;
}

/* The host part of "host:port" ("[::1]:port" too). */
static size_t host_len(const char *addr)
{
    const char *colon = addr ? strrchr(addr, ':') : NULL;
    return colon ? (size_t)(colon - addr) : 0;
}

/* overlap = auto: on unless every worker is on this one's host, where the
 * bucket thread would take cores the backward pass needs (measured:
 * contrib/bench/overlap). */
static int workers_elsewhere(const mwms_t *m)
{
    const char *me = m->addrs ? m->addrs[m->rank] : NULL;
    size_t n = host_len(me);
    for (int w = 0; n && w < m->nworkers; w++)
        if (host_len(m->addrs[w]) != n || strncmp(m->addrs[w], me, n) != 0)
            return 1;
    return 0;
}

/* The buckets: threaded (overlap) with one replica per worker on a CPU,
 * where the backward pass runs on the replica's thread and the bucket
 * thread only waits on sockets. */
static int open_buckets(mwms_t *m)
{
    int want = m->cfg.overlap == 1 ||
               (m->cfg.overlap == 0 && workers_elsewhere(m));
    int threaded = want && m->rs.n == 1 &&
                   (m->world || m->cfg.elastic) &&
                   STRATA_DEVICE_TYPE(m->rs.devices[0]) == STRATA_DEV_CPU;
    int rc = mw_buckets_open(&m->buckets, m->rs.host, m->rs.hc, m->var_lo,
                             m->nvars, m->rs.count,
                             (size_t)m->cfg.bucket_bytes, threaded,
                             m->halves ? m->bound : NULL, m->nworkers);
    if (rc == STRATA_OK && m->rank == 0)
        m->rs.host->log(m->rs.hc, STRATA_LOG_INFO, "mwms", "%s in %d "
                        "bucket%s of about %lld bytes%s",
                        m->halves ? "reduce-scatter" : "all-reduce",
                        mw_buckets_count(m->buckets),
                        mw_buckets_count(m->buckets) == 1 ? "" : "s",
                        (long long)m->cfg.bucket_bytes,
                        mw_buckets_threaded(m->buckets)
                            ? ", overlapped with the backward pass"
                        : m->cfg.overlap == 0 && !want
                            ? " (overlap = auto: every worker on this host)"
                            : "");
    return rc;
}

static int mwms_create_var(void *pctx, strata_var_t *var)
{
    mwms_t *m = pctx;
    int rc = replicas_create_var(&m->rs, var);
    return rc == STRATA_OK ? note_var(m, var) : rc;
}

/* Every replica of every worker starts from the chief's values: the chief
 * broadcasts the whole slab once every variable is placed. */
static int mwms_placed(void *pctx)
{
    mwms_t *m = pctx;
    m->halves = halves_offered(m);
    if (m->wopt && m->rank == 0)
        m->rs.host->log(m->rs.hc, STRATA_LOG_INFO, "mwms", "shard_optimizer: "
                        "%s", m->halves
                            ? "reduce-scatter, step the shard, all-gather"
                            : "all-reduce, step the shard, one broadcast per "
                              "worker");
    int rc = open_buckets(m);
    if (rc != STRATA_OK || !m->world || m->joining)
        return rc;
    strata_op_t op = {
        .struct_size = sizeof op, .slot = 0, .buf = m->rs.slab[0],
        .count = m->rs.count, .device = m->rs.devices[0], .root = 0,
    };
    rc = m->rs.host->t_update(m->rs.hc, m->world, &op);
    for (int r = 1; rc == STRATA_OK && r < m->rs.n; r++)
        rc = m->rs.host->copy(m->rs.hc, m->rs.devices[r], m->rs.slab[r],
                              m->rs.devices[0], m->rs.slab[0],
                              m->rs.count * sizeof(float));
    return rc;
}

/* Local all-reduce, then replica 0 all-reduces across workers, then the
 * local replicas take replica 0's result. With MEAN the local mean of equal
 * replica counts, averaged over workers, is the global mean. */
static int buckets_reduce(void *arg, strata_op_t *op)
{
    mwms_t *m = arg;
    return mw_buckets_reduce(m->buckets, m->world, op);
}

/* Rows between the workers: one replica each, its whole gradient on the
 * thread that reduces (no bucket thread), every variable in one place. */
static int rows_between_workers(const mwms_t *m)
{
    return m->world && !m->local && !m->wopt &&
           !mw_buckets_threaded(m->buckets);
}

/* The rows of the tables that start in [lo, hi) into their ranges. */
static int densify_between(mwms_t *m, const strata_op_t *op, size_t lo,
                           size_t hi)
{
    int rc = STRATA_OK;
    for (size_t j = 0; STRATA_KIT_HAS_ROWS(op) && rc == STRATA_OK &&
                       j < op->nsparse; j++)
        if (op->sparse[j].offset >= lo && op->sparse[j].offset < hi) {
            strata_op_t one = *op;
            one.sparse = &op->sparse[j];
            one.nsparse = 1;
            rc = strata_kit_sparse_densify(m->rs.host, m->rs.hc, &one);
        }
    return rc;
}

static int mwms_reduce(void *pctx, strata_op_t *op)
{
    mwms_t *m = pctx;
    const strata_host_v2_t *h = m->rs.host;
    strata_hctx_t *hc = m->rs.hc;
    strata_op_t t = *op;
    t.reduce_op = m->reduce_op;
    if (STRATA_KIT_HAS_ROWS(op) && rows_between_workers(m))
        return strata_kit_sparse_reduce(h, hc, m->world, m->rank, m->nworkers,
                                        &m->sparse_pol, &m->sparse, &t,
                                        buckets_reduce, m);
    if (STRATA_KIT_HAS_ROWS(op) && m->world && op->slot == 0 &&
        !m->told_dense && !m->sparse_pol.as_dense) {
        m->told_dense = 1;
        h->log(hc, m->rank == 0 ? STRATA_LOG_INFO : STRATA_LOG_DEBUG,
               "mwms", "embedding gradients go dense: the workers exchange "
               "rows with one replica each, without shard_optimizer and "
               "without the overlap thread (%s)",
               m->local ? "this worker has several replicas"
               : m->wopt ? "shard_optimizer = true"
                         : "overlap: set [strategy.mwms] overlap = false");
    }
    /* Elsewhere the rows join the dense gradient: those the bucket thread
     * has not been handed yet (reduce_ready did the others). */
    size_t handed = op->slot == 0 ? m->densified_lo : SIZE_MAX;
    if (op->slot == 0)
        m->densified_lo = SIZE_MAX; /* the next step starts afresh */
    int rc = densify_between(m, op, 0, handed);
    if (rc != STRATA_OK)
        return rc;
    if (m->local)
        rc = h->t_reduce(hc, m->local, &t);
    if (rc == STRATA_OK && m->world && op->slot == 0) {
        rc = mw_buckets_reduce(m->buckets, m->world, &t);
        if (rc != STRATA_OK && m->local)
            h->t_ctl(hc, m->local, STRATA_CTL_ABORT, NULL);
    }
    if (rc == STRATA_OK && m->local && m->world) {
        t.root = 0;
        rc = h->t_update(hc, m->local, &t);
    }
    return rc;
}

/* The gradients [ready, count) are final: their buckets may go (overlap);
 * without a bucket thread the core need not tell us. */
static int mwms_reduce_ready(void *pctx, const strata_op_t *op, size_t ready)
{
    mwms_t *m = pctx;
    if (!mw_buckets_threaded(m->buckets) || op->slot != 0)
        return STRATA_ENOTSUP;
    if (!m->world) /* elastic, a generation of one */
        return STRATA_OK;
    /* The buckets from `ready` on go now: the rows of the tables that
     * became final since the last call into them first, never again
     * into a range the bucket thread may be reducing. */
    int rc = densify_between(m, op, ready, m->densified_lo);
    if (rc != STRATA_OK)
        return rc;
    m->densified_lo = ready;
    strata_op_t t = *op;
    t.reduce_op = m->reduce_op;
    return mw_buckets_ready(m->buckets, m->world, &t, ready);
}

static int mwms_update(void *pctx, strata_op_t *op)
{
    mwms_t *m = pctx;
    return m->wopt ? shard_update(m, op) : replicas_update(&m->rs, op);
}

static int mwms_ctl(void *pctx, int op, void *arg)
{
    mwms_t *m = pctx;
    const strata_host_v2_t *h = m->rs.host;
    strata_hctx_t *hc = m->rs.hc;
    switch (op) {
    case STRATA_CTL_ABORT:
        if (m->local)
            h->t_ctl(hc, m->local, op, arg);
        if (m->world)
            h->t_ctl(hc, m->world, op, arg);
        return STRATA_OK;
    case STRATA_CTL_STATE_GET: { /* every worker holds the same variables */
        int rc = replicas_state(&m->rs, 0, arg);
        return rc == STRATA_OK && m->wopt ? shard_state(m, 0, arg) : rc;
    }
    case STRATA_CTL_STATE_SET: {
        /* The chief read the checkpoint: its state goes to every worker. */
        strata_state_t *st = arg;
        strata_op_t b = { .struct_size = sizeof b, .count = m->rs.count,
                          .device = m->cpu, .root = 0 };
        int rc = STRATA_OK;
        for (int i = -1; m->world && rc == STRATA_OK && i < st->nslots; i++) {
            b.buf = i < 0 ? st->vars : st->slots[i];
            rc = h->t_update(hc, m->world, &b);
        }
        if (rc == STRATA_OK)
            rc = replicas_state(&m->rs, 1, st);
        return rc == STRATA_OK && m->wopt ? shard_state(m, 1, st) : rc;
    }
    case STRATA_CTL_WORLD_SUM: {
        if (!m->world)
            return STRATA_OK; /* one worker: the local sum is the sum */
        strata_op_t w = *(const strata_op_t *)arg;
        w.slot = 0;
        w.reduce_op = STRATA_REDUCE_SUM;
        return h->t_reduce(hc, m->world, &w);
    }
    case STRATA_CTL_STEP_SUM:
        return mw_step_sum(h, hc, m->world, m->rank, m->nworkers,
                           (const strata_op_t *)arg);
    case STRATA_CTL_REGROUP: {
        if (!m->cfg.elastic)
            return STRATA_ENOTSUP;
        m->densified_lo = SIZE_MAX; /* a failed step's hand-offs are void */
        /* Closing a broken group is bounded (the transport's linger). */
        mw_buckets_drain(m->buckets);
        h->t_close(hc, m->world);
        h->t_close(hc, m->local);
        m->world = m->local = NULL;
        int rc = join(m, *(const int64_t *)arg);
        if (rc == STRATA_OK)
            rc = open_groups(m);
        if (rc == STRATA_OK)
            h->log(hc, m->rank == 0 ? STRATA_LOG_INFO : STRATA_LOG_DEBUG,
                   "mwms", "generation %d: worker %s is rank %d of %d",
                   m->gen.generation, m->names[m->rank], m->rank,
                   m->nworkers);
        return rc;
    }
    default:
        return STRATA_ENOTSUP;
    }
}

STRATA_EXPORT const strata_plugin_v2_t strata_plugin_v2 = {
    STRATA_PLUGIN_HEADER_CAPS(STRATA_KIND_STRATEGY, "mwms", "0.1.0",
                              "MultiWorkerMirroredStrategy: synchronous "
                              "replicas across workers, local then "
                              "cross-worker all-reduce",
                              STRATA_CAP_ELASTIC | STRATA_CAP_STATE |
                                  STRATA_CAP_CLIP | STRATA_CAP_WORLD_SUM |
                                  STRATA_CAP_OVERLAP | STRATA_CAP_STEP_SUM |
                                  STRATA_CAP_SPARSE),
    .options = mwms_options,
    .cfg_size = sizeof(mwms_cfg_t),
    .init = mwms_init,
    .fini = mwms_fini,
    .create_var = mwms_create_var,
    .placed = mwms_placed,
    .reduce = mwms_reduce,
    .update = mwms_update,
    .ctl = mwms_ctl,
    .reduce_ready = mwms_reduce_ready,
};
