/* Checkpoints of a run: what goes into one (every variable, every optimizer
 * slot, the position in the data, what defines the model), writing one at a
 * step boundary, and resuming from the newest valid one. The file layer
 * (safetensors, CRC-32C, atomic rename, rotation) is checkpoint.c. */
#include <errno.h>
#include <inttypes.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "resume.h"
#include "states.h"
#include "run/stopping.h"

/* What must match between a checkpoint and the run that resumes from it:
 * the model, the optimizer's slots, and the data order. */
typedef struct identity {
    char model[256], input[32], optimizer[16], batch[32], seed[32],
         samples[32], shuffle[8], strategy[64], slots[64];
} identity_t;

static void identity_of(const strata__run_t *run, identity_t *id)
{
    const strata__settings_t *s = run->s;
    snprintf(id->model, sizeof id->model, "%s", s->model.layers);
    snprintf(id->input, sizeof id->input, "%d", run->model.input_dim);
    snprintf(id->optimizer, sizeof id->optimizer, "%s",
             strata__opt_name(s->optimizer.name));
    snprintf(id->batch, sizeof id->batch, "%d", run->geo.batch);
    snprintf(id->seed, sizeof id->seed, "%" PRId64, s->train.seed);
    snprintf(id->samples, sizeof id->samples, "%zu", run->train.n);
    snprintf(id->shuffle, sizeof id->shuffle, "%d", s->data.shuffle);
    snprintf(id->strategy, sizeof id->strategy, "%s", s->strategy);
    /* "rms,momentum": rmsprop's slots depend on rmsprop_momentum */
    size_t at = 0;
    id->slots[0] = '\0';
    for (int i = 0; i < strata__opt_nslots(&s->optimizer); i++)
        at += (size_t)snprintf(id->slots + at, sizeof id->slots - at, "%s%s",
                               i ? "," : "",
                               strata__opt_slot_name(s->optimizer.name, i));
}

/* The training state of the strategy, on the host: the slots at their
 * start values (adagrad's accumulator is not 0), as a fresh optimizer's. */
int strata__state_alloc(const strata__run_t *run, strata_state_t *st)
{
    memset(st, 0, sizeof *st);
    st->struct_size = sizeof *st;
    st->part_step = -1; /* gathered, unless a checkpoint asks for parts */
    st->nslots = strata__opt_nslots(&run->s->optimizer);
    size_t n = run->model.count, bytes = n * sizeof(float);
    st->vars = calloc(1, bytes);
    int ok = st->vars != NULL;
    for (int i = 0; ok && i < st->nslots; i++) {
        ok = (st->slots[i] = calloc(1, bytes)) != NULL;
        float init = strata__opt_slot_init(&run->s->optimizer, i);
        for (size_t j = 0; ok && init != 0.0f && j < n; j++)
            st->slots[i][j] = init;
    }
    return ok ? STRATA_OK : STRATA_ENOMEM;
}

void strata__state_free(strata_state_t *st)
{
    free(st->vars);
    for (int i = 0; i < 4; i++)
        free(st->slots[i]);
}

int strata__run_state(strata__run_t *run, int op, strata_state_t *st)
{
    const strata_plugin_v2_t *vt = run->strategy->vt;
    int rc = run->strategy->caps & STRATA_CAP_STATE
                 ? vt->ctl(run->spctx, op, st) : STRATA_ENOTSUP;
    if (rc == STRATA_ENOTSUP)
        strata__log(STRATA_LOG_ERROR, "checkpoint",
                    "strategy %s cannot %s its state: [checkpoint] needs a "
                    "strategy with STRATA_CTL_STATE_GET/SET (STRATA_CAP_STATE)",
                    run->strategy->name,
                    op == STRATA_CTL_STATE_GET ? "save" : "restore");
    return rc;
}

/* Can the strategy save its state? A plugin of 2.5 or later says so in
 * its capability word; one built before is asked once (a full GET: its
 * word was derived from its having a ctl entry at all). */
int strata__checkpoint_probe(strata__run_t *run)
{
    const strata_plugin_header_t *h = &run->strategy->vt->hdr;
    if (run->strategy->major == 2 && h->abi_minor >= 5)
        return run->strategy->caps & STRATA_CAP_STATE
                   ? STRATA_OK : strata__run_state(run, STRATA_CTL_STATE_GET, NULL);
    strata_state_t st;
    int rc = strata__state_alloc(run, &st);
    if (rc == STRATA_OK)
        rc = strata__run_state(run, STRATA_CTL_STATE_GET, &st);
    strata__state_free(&st);
    return rc;
}

int strata__checkpoint_part_write(strata__run_t *run, strata_part_t *part)
{
    const char *dir = run->s->checkpoint.dir;
    if (!dir[0]) {
        strata__log(STRATA_LOG_ERROR, "checkpoint", "part_write: this task "
                    "has no [checkpoint] dir");
        return STRATA_ESTATE;
    }
    const char *slot[4];
    int nslots = strata__opt_nslots(&run->s->optimizer);
    nslots = nslots < 4 ? nslots : 4; /* strata_state_t.slots[4] */
    for (int i = 0; i < nslots; i++)
        slot[i] = strata__opt_slot_name(run->s->optimizer.name, i);
    return strata__ckpt_part_write(dir, run->model.vars, run->model.nvars,
                                   slot, nslots, part);
}

/* STATE_GET for the checkpoint of `step`: in parts, each written by the
 * task that holds it, where the strategy offers that (plugin ABI 2.13)
 * and this task then sees every part in [checkpoint] dir; else gathered
 * into st (also from then on: tasks on machines that do not share the
 * directory). */
static int get_state(strata__run_t *run, int best, int64_t step,
                     strata_state_t *st)
{
    const char *dir = run->s->checkpoint.dir;
    if (!best && !run->parts_off
        && (run->strategy->caps & STRATA_CAP_STATE_PARTS)) {
        st->part_step = step;
        if (getrandom(&st->part_tag, sizeof st->part_tag, 0) !=
            (ssize_t)sizeof st->part_tag)
            st->part_tag = ((uint64_t)(strata__now() * 1e9) ^ (uint64_t)getpid())
                           * 0x9e3779b97f4a7c15ull;
    }
    int rc = strata__run_state(run, STRATA_CTL_STATE_GET, st);
    if (rc != STRATA_OK || st->part_step < 0 || st->nparts == 0
        || !run->geo.chief)
        return rc;
    char why[700];
    if (st->nparts < 0 || st->nparts > STRATA_CKPT_MAX_PARTS) {
        snprintf(why, sizeof why, "a count of %d parts", st->nparts);
        rc = STRATA_EDATA;
    } else
        rc = strata__ckpt_parts_check(dir, step, st->part_tag, st->nparts,
                                      why, sizeof why);
    if (rc == STRATA_OK || rc == STRATA_ENOMEM)
        return rc;
    strata__log(STRATA_LOG_WARN, "checkpoint", "strategy %s wrote the state "
                "of step %" PRId64 " in %d parts, and this task does not see "
                "them all in %s (%s): do its tasks share that directory? The "
                "state is gathered here instead, for this checkpoint and the "
                "rest of the run", run->strategy->name, step, st->nparts, dir,
                why);
    run->parts_off = 1;
    st->part_step = -1;
    st->nparts = 0;
    return strata__run_state(run, STRATA_CTL_STATE_GET, st);
}

/* A checkpoint at a step boundary into DIR/ckpt-<step> and the rotation,
 * or (best) into DIR/best.safetensors, outside it. */
static int save(strata__run_t *run, int best, int epoch, int64_t batch,
                int64_t step)
{
    const strata__checkpoint_cfg_t *c = &run->s->checkpoint;
    double t0 = strata__now();
    strata_state_t st;
    int rc = strata__state_alloc(run, &st);
    if (rc == STRATA_OK)
        rc = get_state(run, best, step, &st);
    if (rc != STRATA_OK || !run->geo.chief) {
        strata__state_free(&st);
        return rc;
    }
    const strata__model_t *m = &run->model;
    /* In parts: the variables and slots are in the part files. */
    int nt = st.nparts > 0 ? 0 : m->nvars * (1 + st.nslots);
    strata__tensor_t *t = calloc((size_t)(nt + m->nstates), sizeof *t);
    char (*names)[96] = calloc((size_t)nt + 1, sizeof *names);
    float *states = malloc(m->state_count * sizeof *states + 1);
    if (!t || !names || !states) {
        free(t);
        free(names);
        free(states);
        strata__state_free(&st);
        return STRATA_ENOMEM;
    }
    int k = 0;
    for (int s = -1; s < st.nslots && nt; s++)
        for (int i = 0; i < m->nvars; i++, k++) {
            const strata_var_t *v = &m->vars[i];
            if (s < 0)
                snprintf(names[k], sizeof names[k], "%s", v->name);
            else
                snprintf(names[k], sizeof names[k], "optimizer/%s/%s",
                         strata__opt_slot_name(run->s->optimizer.name, s),
                         v->name);
            t[k].name = names[k];
            t[k].dtype = "F32";
            t[k].ndim = (int)v->ndim;
            for (uint32_t d = 0; d < v->ndim; d++)
                t[k].shape[d] = v->shape[d];
            t[k].data = (s < 0 ? st.vars : st.slots[s]) + v->offset;
            t[k].nbytes = v->count * sizeof(float);
        }
    /* The moving statistics: the same on every replica. */
    rc = strata__work_state_get(m, &run->reps[0].work, states);
    strata__ckpt_state_tensors(m, states, t + nt);
    nt += m->nstates;
    identity_t id;
    identity_of(run, &id);
    char e[24], b[24], n[24], o[24], smp[24];
    snprintf(e, sizeof e, "%d", epoch);
    snprintf(b, sizeof b, "%" PRId64, batch);
    snprintf(n, sizeof n, "%" PRId64, step);
    snprintf(o, sizeof o, "%" PRId64, st.opt_steps);
    /* An elastic job that keeps a worker's share changes its global batch:
     * where the next batch starts is then said in samples. */
    int64_t sample = batch ? (int64_t)strata__batch_sample(run, batch) : 0;
    snprintf(smp, sizeof smp, "%" PRId64, sample);
    int moved = sample != batch * (int64_t)run->geo.batch;
    enum { FIXED = 13 };
    strata__meta_t meta[FIXED + 4 + STRATA__MONITOR_NMETA +
                        STRATA__PLATEAU_NMETA] = {
        { "strata.epoch", e },          { "strata.batch", b },
        { "strata.step", n },           { "strata.opt_steps", o },
        { "strata.model", id.model },   { "strata.input_dim", id.input },
        { "strata.optimizer", id.optimizer },
        { "strata.batch_size", id.batch }, { "strata.seed", id.seed },
        { "strata.train_samples", id.samples },
        { "strata.shuffle", id.shuffle }, { "strata.strategy", id.strategy },
        { "strata.optimizer_slots", id.slots },
    };
    /* Early stopping, keep_best and the plateau count on in a resumed
     * run, which goes on at the reduced rate. */
    const char *mkeys[STRATA__MONITOR_NMETA + STRATA__PLATEAU_NMETA];
    char mvals[STRATA__MONITOR_NMETA + STRATA__PLATEAU_NMETA][32];
    int nm = strata__monitor_to_meta(&run->monitor, mkeys, mvals);
    nm += strata__plateau_to_meta(&run->plateau, mkeys + nm, mvals + nm);
    for (int i = 0; i < nm; i++)
        meta[FIXED + i] = (strata__meta_t){ mkeys[i], mvals[i] };
    /* The end of training (its last step, or early stopping): the sidecar
     * evaluator stops after scoring it. */
    if (step >= strata__run_last_step(run) || run->halt)
        meta[FIXED + nm++] = (strata__meta_t){ "strata.final", "1" };
    if (moved)
        meta[FIXED + nm++] = (strata__meta_t){ "strata.sample", smp };
    char pc[16], ptag[24];
    snprintf(pc, sizeof pc, "%d", st.nparts);
    snprintf(ptag, sizeof ptag, "%016" PRIx64, st.part_tag);
    if (st.nparts > 0) {
        meta[FIXED + nm++] = (strata__meta_t){ "strata.part_count", pc };
        meta[FIXED + nm++] = (strata__meta_t){ "strata.part_tag", ptag };
    }
    char path[4096];
    if (rc != STRATA_OK)
        ; /* the state could not be read */
    else if (best && snprintf(path, sizeof path, "%s/" STRATA__BEST_CKPT,
                              c->dir) >= (int)sizeof path)
        rc = STRATA_EINVAL;
    else if (!best)
        rc = strata__ckpt_path(c->dir, step, path, sizeof path);
    if (rc == STRATA_OK)
        rc = strata__ckpt_write(path, t, nt, meta, FIXED + nm);
    if (rc == STRATA_OK && best)
        strata__log(STRATA_LOG_INFO, "checkpoint", "wrote %s: the best %s so "
                    "far, %.4f (epoch %d, step %" PRId64 ")", path,
                    strata__monitor_name(&run->monitor), run->monitor.kept,
                    run->monitor.kept_epoch, step);
    if (rc == STRATA_OK && !best) {
        char in[64] = "";
        if (st.nparts > 0)
            snprintf(in, sizeof in, ", the model in %d parts its tasks wrote",
                     st.nparts);
        strata__log(STRATA_LOG_INFO, "checkpoint", "wrote %s (epoch %d, batch "
                    "%" PRId64 ", step %" PRId64 "%s) in %.2f s", path, epoch,
                    batch, step, in, strata__now() - t0);
        rc = strata__ckpt_rotate(c->dir, (int)c->keep);
    }
    free(t);
    free(names);
    free(states);
    strata__state_free(&st);
    return rc;
}

/* A checkpoint that began at t0, to the observers (the step timeline). */
static void checkpointed(strata__run_t *run, double t0, int64_t step)
{
    const strata__event_t ev = { .kind = STRATA__EV_CHECKPOINT,
                                 .epoch = run->cur.epoch, .step = step,
                                 .t0 = t0, .t1 = strata__now() };
    strata__emit(&run->bus, &ev);
}

int strata__checkpoint_save(strata__run_t *run, int epoch, int64_t batch,
                            int64_t step)
{
    double t0 = strata__now();
    int rc = save(run, 0, epoch, batch, step);
    checkpointed(run, t0, step);
    return rc;
}

int strata__checkpoint_save_best(strata__run_t *run, int epoch, int64_t batch,
                                 int64_t step)
{
    double t0 = strata__now();
    int rc = save(run, 1, epoch, batch, step);
    checkpointed(run, t0, step);
    return rc;
}

/* A checkpoint of another model, optimizer or data order is refused with
 * the first difference named. */
static int check_identity(const strata__run_t *run, const strata__ckpt_t *ck,
                          const char *path)
{
    identity_t id;
    identity_of(run, &id);
    const struct { const char *key, *mine, *what; } k[] = {
        { "strata.model", id.model, "[model] layers" },
        { "strata.input_dim", id.input, "input features" },
        { "strata.optimizer", id.optimizer, "[optimizer] name" },
        { "strata.batch_size", id.batch, "[train] batch_size" },
        { "strata.seed", id.seed, "[train] seed" },
        { "strata.train_samples", id.samples, "training samples" },
        { "strata.shuffle", id.shuffle, "[data] shuffle" },
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        const char *theirs = strata__ckpt_meta(ck, k[i].key);
        if (!theirs || strcmp(theirs, k[i].mine) != 0) {
            strata__log(STRATA_LOG_ERROR, "checkpoint",
                        "%s was written by another job: %s is '%s' there, "
                        "'%s' here; refusing to resume (move it away or set "
                        "[checkpoint] restore = never)", path, k[i].what,
                        theirs ? theirs : "(missing)", k[i].mine);
            return STRATA_ECONFIG;
        }
    }
    /* The slots (a checkpoint from before this key has none: its kinds'
     * slots were fixed by the name) */
    const char *theirs = strata__ckpt_meta(ck, "strata.optimizer_slots");
    if (theirs && strcmp(theirs, id.slots) != 0) {
        strata__log(STRATA_LOG_ERROR, "checkpoint",
                    "%s was written by another job: its optimizer keeps the "
                    "slots '%s', this run's '%s' ([optimizer] "
                    "rmsprop_momentum > 0 adds rmsprop's 'momentum'); refusing "
                    "to resume (move it away or set [checkpoint] restore = "
                    "never)", path, theirs, id.slots);
        return STRATA_ECONFIG;
    }
    return STRATA_OK;
}

static const char *meta_of(const void *ck, const char *key)
{
    return strata__ckpt_meta(ck, key);
}

static int meta_int(const strata__ckpt_t *ck, const char *key, int64_t lo,
                    int64_t hi, int64_t *out, const char *path)
{
    const char *v = strata__ckpt_meta(ck, key);
    char *end = NULL;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || *end || x < lo || x > hi) {
        strata__log(STRATA_LOG_ERROR, "checkpoint", "%s: metadata %s = '%s': "
                    "expected an integer in [%" PRId64 ", %" PRId64 "]", path,
                    key, v ? v : "(missing)", lo, hi);
        return STRATA_EDATA;
    }
    *out = x;
    return STRATA_OK;
}

/* Every variable (and slot) of the model, with its exact shape. */
static int load_tensors(const strata__run_t *run, const strata__ckpt_t *ck,
                        const char *path, strata_state_t *st)
{
    const strata__model_t *m = &run->model;
    for (int s = -1; s < st->nslots; s++)
        for (int i = 0; i < m->nvars; i++) {
            const strata_var_t *v = &m->vars[i];
            char name[96];
            if (s < 0)
                snprintf(name, sizeof name, "%s", v->name);
            else
                snprintf(name, sizeof name, "optimizer/%s/%s",
                         strata__opt_slot_name(run->s->optimizer.name, s),
                         v->name);
            const strata__tensor_t *t = strata__ckpt_find(ck, name);
            int ok = t && !strcmp(t->dtype, "F32") && t->ndim == (int)v->ndim &&
                     t->nbytes == v->count * sizeof(float);
            for (uint32_t d = 0; ok && d < v->ndim; d++)
                ok = t->shape[d] == v->shape[d];
            if (!ok) {
                strata__log(STRATA_LOG_ERROR, "checkpoint",
                            "%s: tensor %s is %s; the model needs F32 %" PRId64
                            "x%" PRId64, path, name,
                            t ? "of another dtype or shape" : "missing",
                            v->shape[0], v->ndim > 1 ? v->shape[1] : 1);
                return STRATA_EDATA;
            }
            memcpy((s < 0 ? st->vars : st->slots[s]) + v->offset, t->data,
                   t->nbytes);
        }
    return STRATA_OK;
}

/* mkdir -p */
static int make_dirs(const char *dir)
{
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
        return STRATA_EINVAL;
    for (char *q = p + 1;; q++) {
        if (*q != '/' && *q != '\0')
            continue;
        char c = *q;
        *q = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            strata__log(STRATA_LOG_ERROR, "checkpoint",
                        "[checkpoint] dir: cannot create %s: %s", p,
                        strerror(errno));
            return STRATA_EIO;
        }
        *q = c;
        if (!c)
            return STRATA_OK;
    }
}

int strata__checkpoint_restore(strata__run_t *run, strata__resume_t *at)
{
    const strata__checkpoint_cfg_t *c = &run->s->checkpoint;
    memset(at, 0, sizeof *at);
    if (!c->dir[0])
        return STRATA_OK;
    if (run->geo.chief) {
        int rc = make_dirs(c->dir);
        if (rc != STRATA_OK)
            return rc;
    }
    if (c->restore == STRATA__RESTORE_NEVER)
        return STRATA_OK;
    /* Only the chief reads; a multi-process strategy's STATE_SET installs
     * the chief's state on every worker. Whether there is one to install is
     * agreed first, so that every worker takes the same path. */
    strata__ckpt_t *ck = NULL;
    char path[4096] = "";
    int rc = STRATA_OK;
    if (run->geo.chief) {
        rc = strata__ckpt_latest(c->dir, &ck, path, sizeof path);
        if (rc == STRATA_ENOENT)
            rc = STRATA_OK; /* nothing to resume from: a fresh start */
        else if (rc == STRATA_EDATA && c->restore == STRATA__RESTORE_FRESH) {
            strata__log(STRATA_LOG_WARN, "checkpoint", "no checkpoint in %s "
                        "is valid (each is named above); starting from "
                        "scratch, as [checkpoint] restore = fresh_if_invalid "
                        "says", c->dir);
            rc = STRATA_OK;
        } else if (rc == STRATA_EDATA) {
            strata__log(STRATA_LOG_ERROR, "checkpoint", "no checkpoint in %s "
                        "is valid (each is named above, with why): repair or "
                        "move them, or set [checkpoint] restore = "
                        "fresh_if_invalid to start from scratch", c->dir);
        }
        if (rc == STRATA_OK && ck)
            rc = check_identity(run, ck, path);
    }
    int64_t found = ck != NULL, epoch = 0, batch = 0, step = 0, opt_steps = 0;
    int64_t sample = -1;
    int moved = ck && strata__ckpt_meta(ck, "strata.sample");
    if (rc == STRATA_OK && ck) {
        rc = meta_int(ck, "strata.epoch", 0, run->s->train.epochs, &epoch, path);
        if (rc == STRATA_OK)
            rc = meta_int(ck, "strata.batch", 0, moved ? (int64_t)run->train.n
                                                      : run->geo.steps_per_epoch,
                          &batch, path);
        if (rc == STRATA_OK)
            rc = meta_int(ck, "strata.step", 0, INT64_MAX / 2, &step, path);
        if (rc == STRATA_OK)
            rc = meta_int(ck, "strata.opt_steps", 0, INT64_MAX / 2, &opt_steps,
                          path);
        if (rc == STRATA_OK && moved)
            rc = meta_int(ck, "strata.sample", 0, (int64_t)run->train.n,
                          &sample, path);
    }
    /* Every worker learns whether and where to resume, and at what rate:
     * the chief's figures (the others add zeros) travel as float32 sums,
     * exact below 2^24 (the step and the sample in two halves); without a
     * sample position the global step is rebuilt from the epoch and the
     * batch. */
    float v[8] = { 0, 0, 0, 0, 0, 0, 0, 0 };
    if (run->geo.chief) {
        v[0] = rc == STRATA_OK ? (float)found : -1.0f;
        v[1] = (float)epoch;
        v[2] = (float)batch;
        v[3] = (float)((sample + 1) & 0xffffff);
        v[4] = (float)((sample + 1) >> 24);
        v[5] = (float)(step & 0xffffff);
        v[6] = (float)(step >> 24);
        v[7] = ck ? (float)strata__plateau_meta_reductions(meta_of, ck) : 0.0f;
    }
    int arc = strata__run_world_sum(run, v, 8);
    if (rc == STRATA_OK)
        rc = arc;
    if (rc == STRATA_OK && v[0] < 0)
        rc = STRATA_ECANCELED; /* the chief failed and said so */
    if (rc != STRATA_OK || v[0] < 0.5f) {
        strata__ckpt_free(ck);
        return rc;
    }
    epoch = (int64_t)v[1];
    batch = (int64_t)v[2];
    if (ck) { /* the chief decides early stopping, keep_best, plateaus */
        strata__monitor_from_meta(&run->monitor, meta_of, ck);
        strata__plateau_from_meta(&run->plateau, meta_of, ck);
    }
    strata__plateau_set(&run->plateau, (int64_t)v[7]);
    sample = ((int64_t)v[4] << 24 | (int64_t)v[3]) - 1;
    step = sample < 0 ? epoch * run->geo.steps_per_epoch + batch
                      : (int64_t)v[6] << 24 | (int64_t)v[5];
    strata_state_t st;
    float *states = malloc(run->model.state_count * sizeof *states + 1);
    rc = states ? strata__state_alloc(run, &st) : STRATA_ENOMEM;
    if (rc == STRATA_OK)
        strata__model_init_state(&run->model, states);
    if (rc == STRATA_OK && ck)
        rc = load_tensors(run, ck, path, &st);
    if (rc == STRATA_OK && ck)
        rc = strata__ckpt_take_states(ck, "checkpoint", path, &run->model,
                                      states);
    st.opt_steps = ck ? opt_steps : step;
    if (rc == STRATA_OK)
        rc = strata__run_state(run, STRATA_CTL_STATE_SET, &st);
    if (rc == STRATA_OK)
        rc = strata__run_states_set(run, states, 1);
    free(states);
    strata__state_free(&st);
    strata__ckpt_free(ck);
    if (rc != STRATA_OK)
        return rc;
    at->resumed = 1;
    at->epoch = (int)epoch;
    at->batch = batch;
    at->step = step;
    at->sample = sample < 0 ? batch * run->geo.batch : sample;
    if (run->geo.chief)
        strata__out(run->ctx, "resumed from %s: epoch %d, batch %" PRId64
                    ", step %" PRId64 "\n", path, at->epoch, batch, step);
    return STRATA_OK;
}
