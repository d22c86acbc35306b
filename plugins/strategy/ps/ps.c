/* ps.so -- ParameterServerStrategy: the variables live, sharded, on ps
 * tasks that apply every pushed gradient as it arrives; workers pull the
 * current parameters, compute the gradients of the batch the coordinator
 * gives them and push them back, without waiting for each other; the
 * coordinator (the chief) schedules the steps, joins every epoch,
 * evaluates and re-schedules the step of a worker that died. The same
 * binary plays every role: ps.h says which task is which, README.md lists
 * the options, ps_wire.h documents the messages. */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ps.h"
#include "../common/replicas.h"

static const strata_option_t ps_options[] = {
    { .key = "partitioner", .type = STRATA_OPT_STRING, .def = "",
      .offset = offsetof(ps_cfg_t, partitioner),
      .help = "split variables along dim 0: fixed:N, min_size:BYTES[:MAX] or "
              "max_size:BYTES[:MAX] (TensorFlow's partitioners); empty: whole "
              "variables, round-robin over the ps tasks" },
    { .key = "max_staleness", .type = STRATA_OPT_INT, .def = "0",
      .offset = offsetof(ps_cfg_t, max_staleness), .min = 0, .max = 1e9,
      .help = "a ps refuses a push computed from parameters more than this "
              "many of its versions old (the step is re-run on fresh "
              "parameters); 0: unbounded" },
    { .key = "timeout_s", .type = STRATA_OPT_FLOAT, .def = "30",
      .offset = offsetof(ps_cfg_t, timeout_s), .min = 0.1, .max = 86400,
      .help = "deadline of every request, and how long a silent ps (or "
              "coordinator) is waited for before the job stops" },
    { .key = "heartbeat_ms", .type = STRATA_OPT_INT, .def = "500",
      .offset = offsetof(ps_cfg_t, heartbeat_ms), .min = 10, .max = 60000,
      .help = "worker heartbeats and coordinator pings; a worker silent for "
              "6 intervals is lost and its step re-scheduled" },
    { .key = "min_workers", .type = STRATA_OPT_INT, .def = "1",
      .offset = offsetof(ps_cfg_t, min_workers), .min = 1, .max = 65535,
      .help = "the job goes on while at least this many workers are alive; "
              "below it for timeout_s, the coordinator stops the job with an "
              "error" },
    { .key = "resend_ms", .type = STRATA_OPT_INT, .def = "2000",
      .offset = offsetof(ps_cfg_t, resend_ms), .min = 10, .max = 600000,
      .help = "a worker sends a PUSH or PULL again when no answer came in "
              "this long plus the time the round's requests and answers "
              "take at 100 Mbit/s (one lost with its connection: a reset, a "
              "replayed or dropped frame), then after twice as long each "
              "time, up to 8 times the first wait; the ps applies a step "
              "once" },
    { .key = "sparse_as_dense", .type = STRATA_OPT_BOOL, .def = "false",
      .offset = offsetof(ps_cfg_t, sparse_as_dense),
      .help = "workers push an embedding table's gradient dense, the whole "
              "shard, and the ps steps every row (Horovod's "
              "sparse_as_dense); false: only the rows a step touched, "
              "stepped lazily" },
    { .key = "pull_rows", .type = STRATA_OPT_BOOL, .def = "true",
      .offset = offsetof(ps_cfg_t, pull_rows),
      .help = "a worker that pushes an embedding table as rows pulls only "
              "the rows its step's batch reads, and the other variables "
              "whole (the core must offer batch_rows, plugin ABI 2.11); "
              "false: every pull is the whole of every ps's shards" },
    { .key = "checkpoint_parts", .type = STRATA_OPT_BOOL, .def = "true",
      .offset = offsetof(ps_cfg_t, checkpoint_parts),
      .help = "each ps task writes its shards and their optimizer slots "
              "into a part file of the checkpoint, all in parallel, and the "
              "coordinator gathers nothing (plugin ABI 2.13; [checkpoint] dir "
              "must be one directory for every task: where the coordinator "
              "does not see the parts, it gathers instead); false: the "
              "coordinator gathers the whole state and writes it alone" },
    { .key = "piece_bytes", .type = STRATA_OPT_SIZE, .def = "1M",
      .offset = offsetof(ps_cfg_t, piece_bytes), .min = 16384,
      .max = 1024.0 * 1024 * 1024,
      .help = "a pull's answer, or a checkpoint's part, longer than this "
              "goes in pieces of this size (wire version 9), each a "
              "message of its own: no model needs a transport window of "
              "its size, and a puller copies each piece into place as it "
              "comes; a piece must fit [transport.zmq] window_bytes" },
    { .key = NULL },
};

static void ps_fini(void *pctx)
{
    ps_t *p = pctx;
    if (!p)
        return;
    ps_worker_fini(p);
    ps_coord_fini(p);
    ps_server_fini(p);
    p->host->t_close(p->hc, p->net);
    p->host->t_close(p->hc, p->local);
    for (int r = 0; p->slab && r < p->nrep; r++)
        p->host->free(p->hc, p->devices[r], p->slab[r]);
    free(p->slab);
    p->host->free(p->hc, p->cpu, p->master);
    p->host->free(p->hc, p->cpu, p->rbuf);
    ps_place_free(&p->place);
    free(p->addrs);
    free(p->names);
    free(p->name_buf);
    free(p->ps_member);
    free(p->member_ps);
    free(p->worker_member);
    free(p->member_worker);
    free(p);
}

static uint64_t incarnation(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec
                 ^ ((uint64_t)getpid() << 20);
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15ull;
    return x ^ (x >> 29);
}

/* Where this task keeps its copy of the variables. */
static int storage(ps_t *p)
{
    size_t bytes = p->model_count * sizeof(float);
    if (p->role == PS_ROLE_WORKER || p->role == PS_ROLE_COORD) {
        p->slab = calloc((size_t)p->nrep, sizeof *p->slab);
        if (!p->slab)
            return STRATA_ENOMEM;
        for (int r = 0; r < p->nrep; r++)
            if (!(p->slab[r] = p->host->alloc(p->hc, p->devices[r], bytes)))
                return STRATA_ENOMEM;
    } else if (!(p->master = p->host->alloc(p->hc, p->cpu,
                                            bytes + sizeof(float)))) {
        return STRATA_ENOMEM;
    }
    p->rcap = PS_HDR_SIZE + bytes;
    p->rbuf = p->host->alloc(p->hc, p->cpu, p->rcap);
    return p->rbuf ? STRATA_OK : STRATA_ENOMEM;
}

static int open_transports(ps_t *p)
{
    int rc = STRATA_OK;
    if (p->role == PS_ROLE_WORKER && p->nrep > 1) {
        const strata_group_t g = {
            .struct_size = sizeof g, .scope = STRATA_SCOPE_LOCAL,
            .size = p->nrep, .rank = 0, .nlocal = p->nrep,
            .devices = p->devices, .tag = "ps-local",
        };
        rc = p->host->t_open(p->hc, &g, &p->local);
    }
    if (rc == STRATA_OK && p->role != PS_ROLE_IDLE)
        rc = ps_net_open(p);
    return rc;
}

/* A worker pushes embedding tables as rows (ps_rows.c) unless the
 * section says sparse_as_dense, its replicas reduce in process first (a
 * sum of dense buffers), [optimizer] clip_norm needs the norm of the whole
 * gradient, or the core has no lazy optimizer step for the ps tasks. */
static int rows_allowed(const ps_t *p)
{
    const char *clip = p->host->cfg_get(p->hc, "optimizer", "clip_norm");
    return p->role == PS_ROLE_WORKER && !p->cfg.sparse_as_dense
           && p->nrep == 1 && !(clip && strtod(clip, NULL) > 0.0)
           && STRATA_HAS_FIELD(strata_host_v2_t, p->host, opt_step_rows);
}

/* A worker that pushes rows pulls only its batch's rows when the core
 * says which they are (host batch_rows, ABI 2.11): where its pushes are
 * dense (rows_allowed) it pulls whole, as does the coordinator. */
static int pull_allowed(const ps_t *p)
{
    return p->rows_ok && p->cfg.pull_rows
           && STRATA_HAS_FIELD(strata_host_v2_t, p->host, batch_rows);
}

static int ps_init(const strata_host_v2_t *host, strata_hctx_t *hc,
                   const strata_env_t *env, void **pctx)
{
    *pctx = NULL;
    ps_t *p = calloc(1, sizeof *p);
    if (!p)
        return STRATA_ENOMEM;
    p->host = host;
    p->hc = hc;
    p->env = env;
    p->cfg = *(const ps_cfg_t *)env->cfg;
    p->cpu = STRATA_DEVICE(STRATA_DEV_CPU, 0);
    p->nrep = env->nreplicas;
    p->devices = env->devices;
    p->model_count = env->model_count;
    p->timeout_ms = (int)(p->cfg.timeout_s * 1000.0);
    p->incarnation = incarnation();
    /* Request ids start at random: a reply is matched by its request's id,
     * and a worker takes its ABORT key from the coordinator's reply
     * (ps_worker.c), so a stranger must not guess one (in plaintext; in a
     * secured job no stranger reaches a task at all). */
    uint64_t req0 = 0;
    if (sodium_init() >= 0)
        randombytes_buf(&req0, sizeof req0);
    atomic_init(&p->next_req, (req0 ^ p->incarnation) >> 1);
    atomic_init(&p->malformed, 0);
    char why[256];
    int rc = STRATA_OK;
    if (ps_part_parse(p->cfg.partitioner, &p->part, why, sizeof why) != 0) {
        /* where it was set: [strategy.ps] or [strategy], a file:line */
        const char *at = NULL, *sec = "strategy.ps";
        if (STRATA_HAS_FIELD(strata_host_v2_t, host, cfg_origin) &&
            !(at = host->cfg_origin(hc, sec, "partitioner")))
            at = host->cfg_origin(hc, sec = "strategy", "partitioner");
        ps_log(p, STRATA_LOG_ERROR, "%s%s[%s] partitioner = '%s': %s",
               at ? at : "", at ? ": " : "", at ? sec : "strategy",
               p->cfg.partitioner, why);
        rc = STRATA_ECONFIG;
    }
    if (rc == STRATA_OK)
        rc = ps_net_members(p);
    const char *scaling = host->cfg_get(hc, "train", "lr_scaling");
    if (rc == STRATA_OK && p->role == PS_ROLE_COORD && scaling &&
        !strcmp(scaling, "linear"))
        ps_log(p, STRATA_LOG_WARN, "[train] lr_scaling = linear: a ps step is "
               "one worker's whole global batch, applied on its own, yet the "
               "learning rate is multiplied by the worker's %d replica%s; "
               "asynchronous training is usually run without scaling "
               "(etc/ps.ini)", p->nrep, p->nrep == 1 ? "" : "s");
    if (rc == STRATA_OK && p->cfg.min_workers > p->nworkers) {
        ps_log(p, STRATA_LOG_ERROR, "[strategy.ps] min_workers = %lld, but "
               "the job has %d worker%s", (long long)p->cfg.min_workers,
               p->nworkers, p->nworkers == 1 ? "" : "s");
        rc = STRATA_ECONFIG;
    }
    if (rc == STRATA_OK && ps_place_init(&p->place, p->nps) != 0)
        rc = STRATA_ENOMEM;
    if (rc == STRATA_OK) {
        p->rows_ok = rows_allowed(p);
        p->pull_rows = pull_allowed(p);
        rc = storage(p);
    }
    if (rc == STRATA_OK)
        rc = open_transports(p);
    if (rc != STRATA_OK) {
        ps_fini(p);
        return rc;
    }
    static const char *const roles[] = { "?", "coordinator", "worker", "ps",
                                         "idle" };
    ps_log(p, STRATA_LOG_DEBUG, "%s: %s of a job of %d ps and %d workers",
           ps_name(p, p->self), roles[p->role], p->nps, p->nworkers);
    *pctx = p;
    return STRATA_OK;
}

/* After the last variable: what each role needs of the placement. */
/* Every variable has its shards: the servers, the coordinator and the
 * workers can set up from the whole placement. */
static int ps_placed(void *pctx)
{
    ps_t *p = pctx;
    /* a payload's words are counted in 32 bits on the wire */
    for (int j = 0; j < p->nps; j++)
        if (p->place.ps_count[j] > UINT32_MAX) {
            ps_log(p, STRATA_LOG_ERROR, "ps:%d would hold %zu values, more "
                   "than one ps may (2^32 - 1): run more ps tasks, or split "
                   "the variables ([strategy.ps] partitioner)", j,
                   p->place.ps_count[j]);
            return STRATA_ECONFIG;
        }
    switch (p->role) {
    case PS_ROLE_PS:     return ps_server_init(p);
    case PS_ROLE_COORD:  return ps_coord_init(p);
    case PS_ROLE_WORKER: return ps_worker_init(p);
    default:             return STRATA_OK;
    }
}

/* Elements [lo, lo + n) of var's initial values into dst (host memory):
 * from var->init when the core gave it (a core before ABI 2.12). */
static int init_part(ps_t *p, const strata_var_t *var, size_t lo, size_t n,
                     float *dst)
{
    if (var->init) {
        memcpy(dst, var->init + lo, n * sizeof *dst);
        return STRATA_OK;
    }
    if (!STRATA_HAS_FIELD(strata_host_v2_t, p->host, init_values))
        return STRATA_EINVAL;
    int rc = p->host->init_values(p->hc, var, lo, n, dst);
    if (rc != STRATA_OK)
        ps_log(p, STRATA_LOG_ERROR, "initial values of %s [%zu, %zu): %s",
               var->name, lo, lo + n, ps_strerror(rc));
    return rc;
}

static int ps_create_var(void *pctx, strata_var_t *var)
{
    ps_t *p = pctx;
    if (var->offset + var->count > p->model_count || var->ndim > 4
        || ps_place_var(&p->place, &p->part, (int32_t)var->index, var->shape,
                        (int)var->ndim, var->offset, var->count) != 0) {
        ps_log(p, STRATA_LOG_ERROR, "cannot place variable %s (%zu values at "
               "%zu)", var->name, var->count, var->offset);
        return STRATA_EINVAL;
    }
    for (int r = 0; r < p->nrep; r++)
        var->value[r] = p->slab ? p->slab[r] + var->offset
                                : p->master + var->offset;
    /* Every task starts from the same seeded values, no broadcast; each
     * takes the part it holds (host init_values, STRATA_CAP_LAZY_INIT): a
     * worker none (it pulls before every step, and a table's rows only
     * where its batch reads them), a ps task its shards, the coordinator
     * (which evaluates and checkpoints) everything. */
    if (p->role == PS_ROLE_WORKER)
        return STRATA_OK;
    if (p->role == PS_ROLE_PS) {
        for (int i = 0; i < p->place.n; i++) {
            const ps_shard_t *sh = &p->place.shard[i];
            if (sh->var == (int32_t)var->index &&
                sh->ps == p->member_ps[p->self] &&
                init_part(p, var, sh->offset - var->offset, sh->count,
                          p->master + sh->offset) != STRATA_OK)
                return STRATA_EINVAL;
        }
        return STRATA_OK;
    }
    /* The values on the host: var->init, else drawn straight into
     * replica 0's copy when that is host memory (no second copy of a
     * table), else into a bounce buffer; then copied to the others. */
    size_t bytes = var->count * sizeof(float);
    int32_t dev0 = p->slab ? p->devices[0] : p->cpu;
    float *tmp = NULL;
    const float *src = var->init;
    int rc = STRATA_OK;
    if (!src && STRATA_DEVICE_TYPE(dev0) == STRATA_DEV_CPU) {
        rc = init_part(p, var, 0, var->count, var->value[0]);
        src = var->value[0];
    } else if (!src) {
        src = tmp = malloc(bytes ? bytes : 1);
        rc = tmp ? init_part(p, var, 0, var->count, tmp) : STRATA_ENOMEM;
    }
    for (int r = 0; rc == STRATA_OK && r < (p->slab ? p->nrep : 1); r++)
        if (var->value[r] != src &&
            p->host->copy(p->hc, p->slab ? p->devices[r] : p->cpu,
                          var->value[r], p->cpu, src, bytes) != STRATA_OK)
            rc = STRATA_EDEVICE;
    free(tmp);
    return rc;
}

/* Worker replicas: reduce in process, then replica 0 pushes. With
 * [optimizer] clip_norm each push is clipped to the global norm of the
 * worker's gradient of its step (every variable, before it is split over
 * the ps tasks): the ps apply pushes one by one, so a push is what a
 * synchronous strategy's reduced gradient is. */
static int ps_reduce(void *pctx, strata_op_t *op)
{
    ps_t *p = pctx;
    if (p->role != PS_ROLE_WORKER)
        return STRATA_ESTATE;
    /* Embedding tables given as rows (ABI 2.9) go on as rows only where
     * the worker pushes them so; else into their zero ranges first. */
    int rows = STRATA_HAS_FIELD(strata_op_t, op, nsparse) && op->nsparse > 0;
    if (rows && !p->rows_ok) {
        /* STRATA_CAP_ROWS_APART: the core leaves the ranges as they were,
         * so this step's densify first clears last step's (host memory:
         * rows are for CPU replicas only). */
        for (size_t i = 0; i < op->nsparse; i++)
            memset((float *)op->buf + op->sparse[i].offset, 0,
                   op->sparse[i].count * sizeof(float));
        int rc = strata_kit_sparse_densify(p->host, p->hc, op);
        if (rc != STRATA_OK)
            return rc;
        rows = 0;
    }
    strata_op_t t = *op;
    t.reduce_op = STRATA_REDUCE_MEAN;
    if (!rows) {
        t.sparse = NULL;
        t.nsparse = 0;
    }
    int rc = p->local ? p->host->t_reduce(p->hc, p->local, &t) : STRATA_OK;
    if (rc == STRATA_OK && op->slot == 0)
        rc = replicas_clip(p->host, p->hc, t.device, t.count, t.buf);
    if (rc == STRATA_OK && op->slot == 0)
        rc = ps_worker_push(p, &t);
    return rc;
}

/* The ps applied the update; the next step pulls the result. */
static int ps_update(void *pctx, strata_op_t *op)
{
    ps_t *p = pctx;
    (void)op;
    return p->role == PS_ROLE_WORKER ? STRATA_OK : STRATA_ESTATE;
}

static int ps_ctl(void *pctx, int op, void *arg)
{
    ps_t *p = pctx;
    if (op == STRATA_CTL_STATE_GET || op == STRATA_CTL_STATE_SET)
        /* Only the coordinator checkpoints: it gathers from the ps tasks
         * and pushes a restored state back to them. */
        return p->role == PS_ROLE_COORD
                   ? ps_coord_state(p, op == STRATA_CTL_STATE_SET, arg)
                   : STRATA_ESTATE;
    if (op != STRATA_CTL_ABORT)
        return STRATA_ENOTSUP;
    if (p->local)
        p->host->t_ctl(p->hc, p->local, op, arg);
    if (p->net)
        p->host->t_ctl(p->hc, p->net, op, arg);
    return STRATA_OK;
}

static int ps_drive(void *pctx, const strata_drive_t *d)
{
    ps_t *p = pctx;
    switch (p->role) {
    case PS_ROLE_COORD:
        return ps_coord_drive(p, d);
    case PS_ROLE_PS:
        return ps_server_drive(p, d);
    case PS_ROLE_WORKER:
        return STRATA_ENOTSUP; /* the core's step loop, with next_step */
    default:
        ps_log(p, STRATA_LOG_INFO, "%s has no part in a ps job",
               ps_name(p, p->self));
        return STRATA_OK;
    }
}

static int ps_next_step(void *pctx, strata_step_t *st)
{
    ps_t *p = pctx;
    return p->role == PS_ROLE_WORKER ? ps_worker_next_step(p, st)
                                     : STRATA_ESTATE;
}

STRATA_EXPORT const strata_plugin_v2_t strata_plugin_v2 = {
    STRATA_PLUGIN_HEADER_CAPS(STRATA_KIND_STRATEGY, "ps", "0.1.0",
                              "ParameterServerStrategy: sharded variables on "
                              "ps tasks, asynchronous workers, a coordinator "
                              "that schedules steps",
                              STRATA_CAP_DRIVES | STRATA_CAP_NEXT_STEP |
                                  STRATA_CAP_STATE | STRATA_CAP_LAYER_STATES |
                                  STRATA_CAP_SPARSE | STRATA_CAP_LAZY_INIT |
                                  STRATA_CAP_ROWS_APART |
                                  STRATA_CAP_STATE_PARTS),
    .options = ps_options,
    .cfg_size = sizeof(ps_cfg_t),
    .init = ps_init,
    .fini = ps_fini,
    .create_var = ps_create_var,
    .reduce = ps_reduce,
    .update = ps_update,
    .ctl = ps_ctl,
    .drive = ps_drive,
    .placed = ps_placed,
    .next_step = ps_next_step,
};
