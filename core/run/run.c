/* Setting a run up (data, model, devices, the strategy and its variables),
 * its outputs (banner, metrics CSV, variable dump) and tearing it down. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/loss.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/states.h"
#include "member/elastic.h"
#include "member/rendezvous.h"
#include "run.h"
#include "run/precision.h"

extern char **environ;

static int chief_task(const strata__run_t *run)
{
    const strata_cluster_t *c = &run->cluster.pub;
    return c->tasks[c->self].rank == 0;
}

/* The training set; with [train] eval, the validation and test sets.
 * The split is made whether or not the run validates: the same samples
 * train either way. */
static int setup_data(strata__run_t *run)
{
    const strata__data_cfg_t *d = &run->s->data;
    unsigned want = STRATA__SET_TRAIN;
    if (run->s->train.eval)
        want |= STRATA__SET_VAL | STRATA__SET_TEST;
    strata__datasets_t sets;
    int rc = strata__datasets_load(d, (uint64_t)run->s->train.seed, want,
                                   &sets);
    if (rc != STRATA_OK)
        return rc;
    run->train = sets.train;
    run->val = sets.val;
    run->test = sets.test;
    if (run->s->train.eval && !run->val.n && chief_task(run))
        strata__log(STRATA_LOG_WARN, "data", "no validation set ([data] "
                    "validation_split or validation_images): val_loss, "
                    "val_accuracy, early stopping and keep_best read the "
                    "test set, and select the model on it");
    return strata__cursor_init(&run->cur, run->train.n);
}

/* [data] augment_*: the training set's, its draws by the epoch whose
 * order the cursor holds. */
static int setup_augment(strata__run_t *run)
{
    int rc = strata__augment_init(&run->aug, run->ctx->cfg, &run->s->data,
                                  (uint64_t)run->s->train.seed,
                                  &run->cur.ordered, &run->train);
    if (rc == STRATA_OK && strata__augment_on(&run->aug))
        run->train.augment = &run->aug;
    return rc;
}

/* The run's geometry (geometry.c) and what follows from it: the
 * learning-rate schedule and the monitor. */
static int setup_batches(strata__run_t *run)
{
    const strata__train_cfg_t *t = &run->s->train;
    const strata_cluster_t *c = &run->cluster.pub;
    const strata__geometry_in_t in = {
        .train = t, .samples = run->train.n, .nreplicas = run->nreplicas,
        .nworkers = c->nworkers, .rank = c->tasks[c->self].rank,
        .whole_batches = (run->strategy->caps & STRATA_CAP_NEXT_STEP) != 0,
        .elastic = run->elastic != NULL, .generation = -1,
    };
    int rc = strata__run_shape(run, &in, 1);
    if (rc == STRATA_OK) {
        strata__monitor_init(&run->monitor, run->s);
        strata__plateau_init(&run->plateau, run->s);
    }
    return rc;
}

static int setup_replicas(strata__run_t *run)
{
    run->reps = calloc((size_t)run->nreplicas, sizeof *run->reps);
    if (!run->reps)
        return STRATA_ENOMEM;
    /* Evaluation reuses the training work in chunks of up to 256 rows, as
     * many as fit in STRATA_EVAL_WORK_BYTES (a CNN's activations are 100x an
     * MLP's); a step's slice always fits. */
    size_t fit = STRATA_EVAL_WORK_BYTES / strata__work_row_bytes(&run->model);
    int rows = fit < 16 ? 16 : fit > 256 ? 256 : (int)fit;
    if (run->geo.slice_max > rows)
        rows = run->geo.slice_max;
    /* Embedding gradients as rows for a strategy that takes them: host
     * memory, so only when every replica is on a CPU (all replicas of a
     * step must hand the same form). */
    int as_rows = (run->strategy->caps & STRATA_CAP_SPARSE) != 0;
    for (int r = 0; r < run->nreplicas; r++)
        as_rows &= STRATA_DEVICE_TYPE(run->devices[r]) == STRATA_DEV_CPU;
    for (int r = 0; r < run->nreplicas; r++) {
        strata__replica_t *rep = &run->reps[r];
        rep->run = run;
        rep->r = r;
        rep->device = run->devices[r];
        int rc = strata__work_alloc_on(&run->model, rep->device, rows,
                                       &rep->work);
        if (rc == STRATA_OK && as_rows)
            rc = strata__work_rows_alloc(&run->model, &rep->work);
        rep->work.rows_apart =
            (run->strategy->caps & STRATA_CAP_ROWS_APART) != 0;
        if (rc == STRATA_OK && run->init_states)
            rc = strata__work_state_set(&run->model, &rep->work,
                                        run->init_states);
        if (rc != STRATA_OK)
            return rc;
        rep->grads = strata__dev_alloc(rep->device,
                                       run->model.count * sizeof(float));
        if (!rep->grads)
            return STRATA_ENOMEM;
    }
    return STRATA_OK;
}

/* A model whose layers sum statistics across the replicas of a step
 * (batchnorm) gets the hook when there are others: replicas here, or
 * workers the strategy sums across. */
static int setup_stepsum(strata__run_t *run)
{
    const strata__model_t *m = &run->model;
    const char *why = !m->nstates ? NULL
        : run->elastic && !(run->strategy->caps & STRATA_CAP_STEP_SUM)
        ? "an elastic job whose strategy cannot hand rank 0's moving "
          "statistics to a worker that joins (STRATA_CAP_STEP_SUM)"
        : (run->strategy->caps & (STRATA_CAP_DRIVES | STRATA_CAP_NEXT_STEP))
          && !(run->strategy->caps & STRATA_CAP_LAYER_STATES)
        ? "its strategy drives the job: the task that writes checkpoints "
          "trains no batch, so its moving statistics would not move (a "
          "strategy that carries its workers' moving statistics declares "
          "STRATA_CAP_LAYER_STATES, plugin ABI 2.8)"
        : NULL;
    if (why) {
        strata__log(STRATA_LOG_ERROR, "train", "batchnorm ('%s') is not for "
                    "this job yet: %s (strategy %s)",
                    m->states[0].name, why, run->strategy->name);
        return STRATA_ECONFIG;
    }
    if (!m->step_sums || (run->nreplicas == 1 &&
                          !(run->strategy->caps & STRATA_CAP_STEP_SUM)))
        return STRATA_OK;
    size_t cap = 0;
    for (int i = 0; i < m->nlayers; i++)
        if (m->layers[i].kind->nstate &&
            2 * (size_t)m->layers[i].in.c > cap)
            cap = 2 * (size_t)m->layers[i].in.c;
    int rc = strata__stepsum_init(&run->stepsum, run->nreplicas, cap);
    for (int r = 0; rc == STRATA_OK && r < run->nreplicas; r++) {
        run->reps[r].work.sum_replicas = strata__stepsum;
        run->reps[r].work.sum_arg = &run->reps[r];
    }
    return rc;
}

/* The AUC is read off bins summed over the whole job: a strategy that
 * drives the job (ps) hands the core per-step sums only. */
static int check_metric(const strata__run_t *run)
{
    if (run->model.loss.metric != KOPS_METRIC_AUC ||
        !(run->strategy->caps & (STRATA_CAP_DRIVES | STRATA_CAP_NEXT_STEP)))
        return STRATA_OK;
    const char *o = strata__cfg_origin(run->ctx->cfg, "model", "metric");
    strata__log(STRATA_LOG_ERROR, "train", "%s: [model] metric = auc needs a "
                "strategy whose replicas the core steps (mirrored, central, "
                "mwms): strategy %s reports per-step sums, from which no AUC "
                "can be read; use accuracy", o ? o : "default",
                run->strategy->name);
    return STRATA_ECONFIG;
}

static int check_role(strata__run_t *run);

static int load_strategy(strata__run_t *run)
{
    int rc = strata__ctx_plugin(run->ctx, run->s->strategy,
                                STRATA_KIND_STRATEGY, STRATA_LOG_ERROR,
                                &run->strategy);
    if (rc == STRATA_OK)
        rc = strata__plugin_cfg(run->ctx, run->strategy, "strategy",
                                STRATA__CFG_FLAT_STRICT, &run->scfg);
    if (rc == STRATA_OK)
        rc = check_role(run);
    return rc;
}

static int setup_strategy(strata__run_t *run)
{
    strata_ctx_t *ctx = run->ctx;
    int rc;

    run->env = (strata_env_t){
        .struct_size = sizeof run->env, .kind = STRATA_KIND_STRATEGY,
        .cfg = run->scfg, .section = "strategy", .cluster = &run->cluster.pub,
        .nreplicas = run->nreplicas, .nvars = run->model.nvars,
        .devices = run->devices, .model_count = run->model.count,
        .transport = run->s->transport.plugin,
    };
    const strata_plugin_v2_t *vt = run->strategy->vt;
    rc = strata__plugin_init(run->strategy, ctx, &run->env, &run->spctx,
                             &run->shc);
    if (rc != STRATA_OK) {
        if (!strata__elastic_job_over(run)) /* else nothing left to join */
            strata__log(STRATA_LOG_ERROR, "train", "strategy %s: init failed: "
                        "%s", run->strategy->name, strata_strerror(rc));
        run->spctx = NULL;
        return rc;
    }
    if (run->elastic && !strata__elastic_current(run->elastic)) {
        strata__log(STRATA_LOG_ERROR, "train", "this job's membership "
                    "service (strata launch --elastic) has no member: "
                    "strategy %s did not join it (mwms with [strategy.mwms] "
                    "elastic = true does)", run->strategy->name);
        return STRATA_ECONFIG;
    }
    run->var_state = calloc((size_t)run->model.nvars,
                            vt->var_state_size ? vt->var_state_size : 1);
    if (!run->var_state)
        return STRATA_ENOMEM;
    for (int i = 0; i < run->model.nvars; i++) {
        strata_var_t *v = &run->model.vars[i];
        v->init = run->init ? run->init + v->offset : NULL;
        v->value = calloc((size_t)run->nreplicas, sizeof *v->value);
        if (!v->value)
            return STRATA_ENOMEM;
        v->state = (char *)run->var_state + (size_t)i * vt->var_state_size;
        rc = vt->create_var(run->spctx, v);
        for (int r = 0; rc == STRATA_OK && r < run->nreplicas; r++)
            if (!v->value[r]) {
                strata__log(STRATA_LOG_ERROR, "train",
                            "strategy %s: create_var(%s) left replica %d "
                            "without storage", run->strategy->name, v->name, r);
                rc = STRATA_EINTERNAL;
            }
        if (rc != STRATA_OK) {
            strata__log(STRATA_LOG_ERROR, "train",
                        "strategy %s: create_var(%s): %s", run->strategy->name,
                        v->name, strata_strerror(rc));
            return rc;
        }
    }
    if (STRATA_HAS(vt, placed)) {
        rc = vt->placed(run->spctx);
        if (rc != STRATA_OK) {
            strata__log(STRATA_LOG_ERROR, "train", "strategy %s: placed: %s",
                        run->strategy->name, strata_strerror(rc));
            return rc;
        }
    }
    /* The strategy instance's own figure and its transports' (host.c). */
    run->placed_bytes = atomic_load(&run->shc->placed);
    return STRATA_OK;
}

/* The model's initial values: the core's copy, which every strategy
 * places from (var->init), or none for a strategy that reads them in part
 * (STRATA_CAP_LAZY_INIT, host init_values), unless [model] init_from
 * gives them (read whole from the file). */
static int setup_init_from(strata__run_t *run);

static int setup_init(strata__run_t *run)
{
    const char *from = run->s->model.init_from;
    if ((run->strategy->caps & STRATA_CAP_LAZY_INIT) && !(from && from[0]))
        return STRATA_OK;
    run->init = strata__host_alloc(run->model.count * sizeof(float));
    if (!run->init)
        return STRATA_ENOMEM;
    strata__model_init(&run->model, (uint64_t)run->s->train.seed, run->init);
    return setup_init_from(run);
}

int strata__run_init_values(strata__run_t *run, const strata_var_t *var,
                            size_t lo, size_t n, float *dst)
{
    const strata__model_t *m = &run->model;
    if (var->index >= (uint32_t)m->nvars)
        return STRATA_EINVAL;
    const strata_var_t *v = &m->vars[var->index];
    if (lo > v->count || n > v->count - lo)
        return STRATA_EINVAL;
    if (run->init) {
        memcpy(dst, run->init + v->offset + lo, n * sizeof *dst);
        return STRATA_OK;
    }
    return strata__model_init_range(m, (uint64_t)run->s->train.seed,
                                    (int)var->index, lo, n, dst);
}

/* [model] init_from: a warm start. After the seeded init, every variable is
 * read by name from a safetensors file (a strata checkpoint or a weights
 * file of another writer) into run->init, which every strategy places (or
 * the chief broadcasts): step 0, a fresh optimizer; a checkpoint's
 * optimizer slots and other tensors are not used. Every task reads the
 * file, so that run->init is the same everywhere (ps places from it on
 * every task). The file's problems are configuration errors (exit 2) but
 * for a damaged file (STRATA_EDATA) or an I/O error. */
/* Rank 0 of the cluster, before the geometry is computed. */
static int setup_init_from(strata__run_t *run)
{
    const char *path = run->s->model.init_from;
    if (!path || !path[0])
        return STRATA_OK;
    char what[4200];
    snprintf(what, sizeof what, "init_from %s", path);
    strata__ckpt_t *ck = NULL;
    int rc = strata__ckpt_read_weights(path, "model", what, &ck);
    if (rc != STRATA_OK)
        return rc == STRATA_ENOENT ? STRATA_ECONFIG : rc;
    const strata__model_t *m = &run->model;
    for (int i = 0; rc == STRATA_OK && i < m->nvars; i++) {
        const strata_var_t *v = &m->vars[i];
        rc = strata__ckpt_take_f32(ck, "model", what, v->name, v->shape,
                                   (int)v->ndim, run->init + v->offset);
    }
    /* The moving statistics when the file has them (a strata checkpoint);
     * a weights file without them starts them afresh. */
    if (rc == STRATA_OK && m->nstates &&
        strata__ckpt_find(ck, m->states[0].name)) {
        run->init_states = malloc(m->state_count * sizeof *run->init_states);
        rc = run->init_states ? strata__ckpt_take_states(ck, "model", what,
                                                         m, run->init_states)
                              : STRATA_ENOMEM;
    }
    /* Tensors of the file that are not variables of the model. */
    int extra = 0, slots = 0;
    const char *first = NULL;
    for (int k = 0; rc == STRATA_OK && k < strata__ckpt_ntensors(ck); k++) {
        const char *name = strata__ckpt_tensor(ck, k)->name;
        int mine = 0;
        for (int i = 0; !mine && i < m->nvars; i++)
            mine = strcmp(name, m->vars[i].name) == 0;
        for (int i = 0; !mine && i < m->nstates; i++)
            mine = strcmp(name, m->states[i].name) == 0;
        if (mine)
            continue;
        extra++;
        if (strncmp(name, "optimizer/", 10) == 0)
            slots++;
        else if (!first)
            first = name;
    }
    if (rc == STRATA_OK && extra > 0 && chief_task(run))
        strata__log(first ? STRATA_LOG_WARN : STRATA_LOG_INFO, "model",
                    "%s: %d tensor%s not in the model ignored (%d optimizer "
                    "slot%s: a warm start has a fresh optimizer)%s%.64s%s",
                    what, extra, extra == 1 ? "" : "s", slots,
                    slots == 1 ? "" : "s", first ? "; the first other: '" : "",
                    first ? first : "", first ? "'" : "");
    strata__ckpt_free(ck);
    if (rc != STRATA_OK)
        return rc == STRATA_EIO || rc == STRATA_ENOMEM ? rc : STRATA_ECONFIG;
    if (chief_task(run))
        strata__out(run->ctx, "initialised %d variables from %s\n",
                    m->nvars, path);
    return STRATA_OK;
}

/* Which tasks make the job and which one this process is. */
static int setup_cluster(strata__run_t *run)
{
    int rc = strata__cluster_resolve(run->ctx->cfg, run->ctx->task, environ,
                                     &run->cluster);
    if (rc != STRATA_OK)
        return rc;
    run->cluster_ok = 1;
    const strata_cluster_t *c = &run->cluster.pub;
    const strata_task_t *me = &c->tasks[c->self];
    strata__task_name(me, run->self, sizeof run->self);
    return STRATA_OK;
}

/* Tasks that do not know each other's addresses (torchrun across nodes,
 * Open MPI) learn them from rank 0 (rendezvous.h). Done last before the
 * transports open: every local problem (config, keys, data, model) has
 * been reported by then, and the ports picked are bound soon after. */
static int setup_rendezvous(strata__run_t *run)
{
    if (!strata__rendezvous_wanted(&run->cluster))
        return STRATA_OK;
    /* Authenticated with the job's keys, or in plaintext mode with its
     * token (rendezvous.h). */
    strata__rdzv_auth_t auth = { 0 };
    const char *token = run->s->security.token;
    uint32_t world = (uint32_t)run->cluster.pub.ntasks;
    int rc = STRATA_OK, authed = 1;
    if (run->ctx->keys) {
        rc = strata__rdzv_auth_keys(&auth, &run->cluster, run->ctx->keys);
    } else if (token[0]) {
        size_t n = strlen(token);
        int ok = n >= 16 && n <= 256;
        for (size_t i = 0; ok && i < n; i++)
            ok = token[i] > ' ' && token[i] <= '~';
        if (!ok)
            strata__log(STRATA_LOG_ERROR, "security", "[security] token: "
                        "16 to 256 printable characters without blanks "
                        "(it has %zu)", n);
        rc = ok ? strata__rdzv_auth_token(&auth, world, token)
                : STRATA_ECONFIG;
    } else {
        authed = 0;
        strata__log(STRATA_LOG_WARN, "security", "the rendezvous at %s is "
                    "not authenticated ([security] mode = off without a "
                    "token): whoever reaches it can take a rank; set "
                    "STRATA_SECURITY_TOKEN, the same on every node",
                    run->cluster.pub.rendezvous);
    }
    const strata__rdzv_opts_t o = {
        .timeout_s = run->cluster.rendezvous_timeout_s,
        .hello_s = STRATA_RDZV_HELLO_S, .stop = &run->ctx->stop,
        .auth = authed ? &auth : NULL, .late = &run->rdzv_late };
    if (rc == STRATA_OK)
        rc = strata__rendezvous(&run->cluster, &o);
    if (rc == STRATA_OK)
        rc = strata__rdzv_late_start(run->rdzv_late, &run->ctx->stop);
    strata__rdzv_auth_free(&auth);
    return rc;
}

/* [security]: the processes of a job authenticate and encrypt every
 * connection with the job's keys (the transports do it; the core loads and
 * checks the keys and hands them to every WORLD group). */
static int setup_security(strata__run_t *run)
{
    return strata__job_keys(&run->s->security, &run->cluster.pub,
                            &run->ctx->keys);
}

/* A task that does not train (a ps, a separate coordinator) needs a
 * strategy that drives the job itself. */
static int check_role(strata__run_t *run)
{
    const strata_cluster_t *c = &run->cluster.pub;
    const strata_task_t *me = &c->tasks[c->self];
    if (me->rank >= 0 || (run->strategy->caps & STRATA_CAP_DRIVES))
        return STRATA_OK;
    char name[48];
    strata__log(STRATA_LOG_ERROR, "train",
                "task %s does not train, and strategy %s runs chief and worker "
                "tasks only (cluster from %s)",
                strata__task_name(me, name, sizeof name), run->s->strategy,
                c->source);
    return STRATA_ECONFIG;
}

int strata__run_setup(strata_ctx_t *ctx, strata__run_t *run)
{
    run->ctx = ctx;
    run->s = &ctx->s;
    run->t_start = strata__now();
    if (strata__crew_init(&run->crew) != 0)
        return STRATA_ENOMEM;
    run->crew_ok = 1;
    int rc = strata__gemm_check();
    if (rc == STRATA_OK)
        rc = strata__precision_check(run->ctx->cfg, run->s);
    if (rc == STRATA_OK)
        rc = setup_cluster(run);
    const strata_cluster_t *c = &run->cluster.pub;
    if (rc == STRATA_OK && !strcmp(c->tasks[c->self].type, "evaluator")) {
        run->evaluator = 1; /* trains nothing: core/run/sidecar.c */
        return STRATA_OK;
    }
    if (rc == STRATA_OK)
        rc = setup_security(run);
    if (rc == STRATA_OK)
        rc = strata__elastic_setup(run);
    if (rc == STRATA_OK)
        rc = setup_data(run);
    if (rc == STRATA_OK) {
        int nclasses = strata__sets_label_width(&run->train, &run->val,
                                                &run->test);
        strata__shape_t in = strata__data_shape(&run->train);
        rc = nclasses < 0 ? STRATA_EDATA
             : strata__model_build_cfg(run->ctx->cfg, &run->s->model, &in,
                                       (int)run->train.ids_k, nclasses,
                                       &run->model);
        if (rc == STRATA_OK)
            strata__precision_apply(run->s, &run->model);
    }
    /* Every id in its table, checked once before anything trains. */
    if (rc == STRATA_OK)
        rc = strata__model_check_ids(&run->model, &run->train,
                                     "the training set", "train_ids");
    if (rc == STRATA_OK)
        rc = strata__model_check_ids(&run->model, &run->val,
                                     "the validation set",
                                     run->s->data.validation_split > 0.0
                                         ? "train_ids" : "validation_ids");
    if (rc == STRATA_OK)
        rc = strata__model_check_ids(&run->model, &run->test, "the test set",
                                     "test_ids");
    if (rc == STRATA_OK)
        rc = strata__devices_parse(run->s->train.devices, run->devices,
                                   STRATA_MAX_REPLICAS, &run->nreplicas);
    if (rc == STRATA_OK)
        rc = setup_augment(run);
    if (rc == STRATA_OK)
        rc = load_strategy(run);
    if (rc == STRATA_OK)
        rc = strata__run_memory_check(run);
    if (rc == STRATA_OK)
        rc = setup_init(run);
    if (rc == STRATA_OK)
        rc = strata__best_check(run);
    if (rc == STRATA_OK)
        rc = strata__plateau_check(
            run->s, run->strategy->name,
            (run->strategy->caps &
             (STRATA_CAP_DRIVES | STRATA_CAP_NEXT_STEP)) != 0,
            run->elastic != NULL);
    if (rc == STRATA_OK)
        rc = setup_batches(run);
    if (rc == STRATA_OK)
        rc = setup_replicas(run);
    if (rc == STRATA_OK)
        rc = strata__steplog_observer(run, &run->bus);
    if (rc == STRATA_OK)
        rc = setup_rendezvous(run);
    if (rc == STRATA_OK)
        rc = setup_strategy(run);
    if (rc == STRATA_OK)
        rc = setup_stepsum(run);
    if (rc == STRATA_OK)
        rc = check_metric(run);
    return rc;
}

void strata__run_banner(const strata__run_t *run)
{
    if (!run->geo.chief)
        return;
    char devs[512] = "", one[32];
    size_t used = 0;
    for (int r = 0; r < run->nreplicas && used < sizeof devs - 40; r++)
        used += (size_t)snprintf(devs + used, sizeof devs - used, "%s%s",
                                 r ? ", " : "",
                                 strata__device_str(run->devices[r], one,
                                                    sizeof one));
    /* A strategy that hands out steps has a coordinator (rank 0) that does
     * not train. */
    int workers = run->geo.nworkers -
                  ((run->strategy->caps & STRATA_CAP_NEXT_STEP) &&
                   run->geo.nworkers > 1);
    strata_ctx_t *ctx = run->ctx;
    if (!ctx->cb.text)
        return;
    strata__out(ctx, "num_replicas_in_sync: %d (strategy %s, transport %s, "
                "%d worker%s x devices %s)\n", run->nreplicas * workers,
                run->strategy->name, ctx->opened[0] ? ctx->opened : "none",
                workers, workers == 1 ? "" : "s", devs);
    char gemm[256];
    strata_gemm_kernels(gemm, sizeof gemm);
    strata__out(ctx, "gemm: %s\n", gemm);
    int cpu_conv = 0;
    for (int i = 0; i < run->model.nlayers; i++)
        cpu_conv |= run->model.layers[i].kind == &strata__layer_conv2d;
    for (int r = 0; cpu_conv && r < run->nreplicas; r++)
        if (STRATA_DEVICE_TYPE(run->devices[r]) == STRATA_DEV_CPU) {
            strata__out(ctx, "conv: %s\n",
                        run->s->train.precision == STRATA__PREC_FLOAT32
                            ? strata_conv_kernels()
                            : strata__precision_conv());
            break;
        }
    if (run->s->train.precision != STRATA__PREC_FLOAT32) {
        char kept[256];
        strata__precision_kept(&run->model, kept, sizeof kept);
        strata__out(ctx, "precision: %s%s%s%s\n",
                    strata__precision_name(run->s),
                    kept[0] ? "; float32 in " : "", kept,
                    kept[0] ? " (one input channel)" : "");
    }
    if (run->cluster.pub.ntasks > 1)
        strata__out(ctx, "security: %s\n", ctx->keys
                    ? "CURVE: every connection between the job's processes "
                      "authenticated and encrypted"
                    : "off: plaintext, unauthenticated ([security] mode = off)");
    strata__out(ctx, "model: %zu parameters; %zu training samples, global "
                "batch %d (%d per replica), %lld steps per epoch\n",
                run->model.params, run->train.n, run->geo.batch,
                run->geo.per_replica, (long long)run->geo.steps_per_epoch);
    const strata__augment_t *aug = run->train.augment;
    if (aug && aug->pad)
        strata__out(ctx, "augmentation: %spad %u + random %u x %u crops, "
                    "training samples only\n",
                    aug->flip ? "random horizontal flips, " : "", aug->pad,
                    run->train.rows, run->train.cols);
    else if (aug)
        strata__out(ctx, "augmentation: random horizontal flips, training "
                    "samples only\n");
    char *summary = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&summary, &len);
    if (f) {
        strata__model_summary(&run->model, f);
        if (fclose(f) == 0)
            strata__out(ctx, "%s", summary);
    }
    free(summary);
    /* The rate the steps use, after the linear scaling rule and with the
     * warm-up that leads to it. */
    const strata__train_cfg_t *t = &run->s->train;
    const strata__optimizer_cfg_t *o = &run->s->optimizer;
    char scaled[96] = "", warm[96] = "", sched[512], extra[256] = "";
    const double lr_target = strata__schedule_initial(&run->sched);
    if (t->lr_scaling)
        snprintf(scaled, sizeof scaled, " (%g x %d replicas: [train] "
                 "lr_scaling = linear)", lr_target / run->sched.scale,
                 run->geo.shards);
    if (run->sched.warmup > 0)
        snprintf(warm, sizeof warm, ", reached linearly over the first %lld "
                 "steps (warm-up)", (long long)run->sched.warmup);
    strata__schedule_describe(&run->sched, sched, sizeof sched);
    int at = 0;
    if (o->weight_decay > 0)
        at = snprintf(extra, sizeof extra, "; decoupled weight decay %g",
                      o->weight_decay);
    if (o->clip_norm > 0 && at >= 0 && (size_t)at < sizeof extra)
        at += snprintf(extra + at, sizeof extra - (size_t)at, "; gradients "
                       "clipped to a global norm of %g", o->clip_norm);
    if (t->rlr_patience > 0 && at >= 0 && (size_t)at < sizeof extra)
        snprintf(extra + at, sizeof extra - (size_t)at, "; x %g after %lld "
                 "epochs without improvement of %s (reduce_lr_patience)",
                 t->rlr_factor, (long long)t->rlr_patience,
                 strata__monitor_metric(t->monitor));
    strata__out(ctx, "optimizer: %s, learning rate %g%s%s%s%s\n",
                strata__opt_name(o->name), lr_target, scaled, warm, sched,
                extra);
    size_t model_bytes = run->model.count * sizeof(float);
    strata__out(ctx, "strategy %s placed %zu bytes of variables and optimizer "
                "state (%.2f x the model's %zu bytes)\n", run->strategy->name,
                run->placed_bytes,
                (double)run->placed_bytes / (double)model_bytes, model_bytes);
}

/* Every variable of replica 0, in model order, as one host buffer. */
static float *gather_vars(const strata__run_t *run, size_t *total)
{
    const strata__model_t *m = &run->model;
    *total = 0;
    for (int i = 0; i < m->nvars; i++)
        *total += m->vars[i].count;
    float *buf = malloc(*total * sizeof *buf + 1);
    size_t at = 0;
    for (int i = 0; buf && i < m->nvars; i++) {
        const strata_var_t *v = &m->vars[i];
        if (strata__dev_copy(STRATA_DEVICE(STRATA_DEV_CPU, 0), buf + at,
                             run->devices[0], v->value[0],
                             v->count * sizeof(float)) != STRATA_OK) {
            free(buf);
            return NULL;
        }
        at += v->count;
    }
    return buf;
}

/* FNV-1a over the bytes: equal hashes on every worker mean bitwise-equal
 * variables. */
static uint64_t fnv1a(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* debug.hash_vars: replica 0's layer states (batchnorm's moving
 * statistics) hashed too, as the variables. */
static int hash_states(const strata__run_t *run)
{
    const strata__model_t *m = &run->model;
    float *st = malloc(m->state_count * sizeof *st);
    if (!st)
        return STRATA_ENOMEM;
    int rc = strata__work_state_get(m, (strata__work_t *)&run->reps[0].work,
                                    st);
    if (rc == STRATA_OK)
        strata__out(run->ctx, "states hash (rank %d): %016llx\n",
                    run->geo.rank,
                    (unsigned long long)fnv1a(st, m->state_count * sizeof *st));
    free(st);
    return rc;
}

/* A word, from a task that ran steps, when clip_norm was asked of a
 * strategy that never clipped. */
static void check_clipped(const strata__run_t *run)
{
    if (run->stats.steps_run > 0 && run->s->optimizer.clip_norm > 0 &&
        atomic_load(&run->ctx->clip_calls) == 0)
        strata__log(STRATA_LOG_WARN, "train", "[optimizer] clip_norm = %g: "
                    "strategy %s clipped no gradient (it does not call the "
                    "host's grad_sumsq and grad_clip)",
                    run->s->optimizer.clip_norm, run->strategy->name);
}

int strata__run_finish(strata__run_t *run)
{
    const strata__debug_cfg_t *d = &run->s->debug;
    check_clipped(run);
    int want_dump = d->dump_vars && d->dump_vars[0] && run->geo.chief;
    if (want_dump || d->hash_vars) {
        size_t total;
        float *vars = gather_vars(run, &total);
        if (!vars)
            return STRATA_ENOMEM;
        int rc = STRATA_OK;
        if (want_dump) /* raw little-endian float32: tests compare runs */
            rc = strata__write_atomic(d->dump_vars, vars, total * sizeof *vars);
        if (d->hash_vars)
            strata__out(run->ctx, "variables hash (rank %d): %016llx\n",
                        run->geo.rank,
                        (unsigned long long)fnv1a(vars, total * sizeof *vars));
        if (d->hash_vars && run->model.state_count)
            rc = hash_states(run);
        free(vars);
        if (rc != STRATA_OK)
            return rc;
    }
    /* The result line, whatever the progress display ([train] progress =
     * none silences the progress, not the outcome). */
    if (run->geo.chief && run->stats.nclosed > 0) {
        const strata__epoch_stats_t *e = &run->stats.last;
        const char *s = e->epoch == 1 ? "" : "s";
        const char *mn = strata__metric_name(run->s->model.metric);
        if (run->stats.tested && run->restored)
            strata__out(run->ctx, "done: %d epoch%s, test %s %.4f, test "
                        "loss %.4f (the variables of epoch %d)\n", e->epoch, s,
                        mn, run->stats.test_acc, run->stats.test_loss,
                        run->best_epoch);
        else if (run->stats.tested)
            strata__out(run->ctx, "done: %d epoch%s, test %s %.4f, test "
                        "loss %.4f (val_%s %.4f, val_loss %.4f)\n",
                        e->epoch, s, mn, run->stats.test_acc,
                        run->stats.test_loss, mn, e->test_acc, e->test_loss);
        else if (e->has_test && run->val.n)
            strata__out(run->ctx, "done: %d epoch%s, val_%s %.4f, "
                        "val_loss %.4f (strategy %s scores no test set: "
                        "strata eval scores a checkpoint on it)\n", e->epoch,
                        s, mn, e->test_acc, e->test_loss,
                        run->strategy->name);
        else if (e->has_test)
            strata__out(run->ctx, "done: %d epoch%s, test %s %.4f, test "
                        "loss %.4f\n", e->epoch, s, mn, e->test_acc,
                        e->test_loss);
        else
            strata__out(run->ctx, "done: %d epoch%s, train %s %.4f, "
                        "train loss %.4f\n", e->epoch, s, mn, e->train_acc,
                        e->train_loss);
    }
    return STRATA_OK;
}

void strata__run_teardown(strata__run_t *run)
{
    if (run->spctx)
        strata__plugin_fini(run->strategy, run->spctx, run->shc);
    strata__bus_close(&run->bus);
    strata__elastic_close(run->elastic);
    strata__rdzv_late_end(run->rdzv_late);
    run->rdzv_late = NULL;
    if (run->ctx) {
        free(run->ctx->keys);
        run->ctx->keys = NULL;
    }
    for (int i = 0; i < run->model.nvars; i++)
        free(run->model.vars[i].value);
    free(run->var_state);
    free(run->scfg);
    if (run->reps)
        for (int r = 0; r < run->nreplicas; r++) {
            strata__work_free(&run->reps[r].work);
            strata__dev_free(run->reps[r].device, run->reps[r].grads);
        }
    free(run->reps);
    if (run->sync_bar_ok)
        pthread_barrier_destroy(&run->sync_bar);
    if (run->crew_ok)
        strata__crew_destroy(&run->crew);
    strata__stepsum_free(&run->stepsum);
    strata__host_free(run->init);
    free(run->init_states);
    strata__cursor_free(&run->cur);
    free(run->brows);
    strata__best_free(run);
    if (run->cluster_ok)
        strata__cluster_free(&run->cluster);
    strata__dataset_free(&run->train);
    strata__dataset_free(&run->val);
    strata__dataset_free(&run->test);
    free(run);
}
