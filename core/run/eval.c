/* strata eval / strata inspect: a checkpoint on the test set (or on the
 * images and labels given), and its contents. One thread, no strategy:
 * the checkpoint holds the variables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_cpu.h"
#include "model/loss.h"
#include "checkpoint/states.h"
#include "eval.h"

int strata_inspect(const char *path)
{
    return path ? strata__ckpt_inspect(path, stdout) : STRATA_EINVAL;
}

/* The variables of `m` from checkpoint `ck` into `flat` (m->count). */
static int load_vars(const strata__model_t *m, const strata__ckpt_t *ck,
                     const char *path, const char *who, float *flat)
{
    const char *layers = strata__ckpt_meta(ck, "strata.model");
    for (int i = 0; i < m->nvars; i++) {
        const strata_var_t *v = &m->vars[i];
        const strata__tensor_t *t = strata__ckpt_find(ck, v->name);
        int ok = t && !strcmp(t->dtype, "F32") && t->ndim == (int)v->ndim &&
                 t->nbytes == v->count * sizeof(float);
        for (uint32_t d = 0; ok && d < v->ndim; d++)
            ok = t->shape[d] == v->shape[d];
        if (!ok) {
            strata__log(STRATA_LOG_ERROR, who,
                        "%s: tensor %s %s the configured model%s%s%s", path,
                        v->name, t ? "does not fit" : "is missing for",
                        layers ? " (the checkpoint's model is '" : "",
                        layers ? layers : "", layers ? "')" : "");
            return STRATA_EDATA;
        }
        memcpy(flat + v->offset, t->data, t->nbytes);
    }
    return STRATA_OK;
}

#define EVAL_ROWS 256

int strata__scorer_open(strata_ctx_t *ctx, unsigned which,
                        strata__scorer_t *s)
{
    memset(s, 0, sizeof *s);
    strata__datasets_t sets;
    int rc = strata__datasets_load(&ctx->s.data, (uint64_t)ctx->s.train.seed,
                                   which, &sets);
    if (rc != STRATA_OK)
        return rc;
    strata__dataset_t *set = which == STRATA__SET_VAL ? &sets.val : &sets.test;
    const char *name = which == STRATA__SET_VAL ? "the validation set"
                                                : "the test set";
    rc = strata__scorer_open_set(ctx, "eval", set, name, EVAL_ROWS, s);
    strata__datasets_free(&sets);
    return rc;
}

int strata__scorer_open_set(strata_ctx_t *ctx, const char *who,
                            strata__dataset_t *set, const char *name, int rows,
                            strata__scorer_t *s)
{
    memset(s, 0, sizeof *s);
    s->test = *set;
    memset(set, 0, sizeof *set);
    s->who = who;
    s->name = name;
    int rc = strata__gemm_check();
    s->model = calloc(1, sizeof *s->model);
    if (rc == STRATA_OK && !s->model)
        rc = STRATA_ENOMEM;
    if (rc == STRATA_OK) {
        strata__shape_t in = strata__data_shape(&s->test);
        /* images without labels (predict): any width of a dense loss */
        int width = s->test.target_dim ? (int)s->test.target_dim
                    : ctx->s.model.loss != STRATA__LOSS_SPARSE ? 0
                    : s->test.nclasses ? s->test.nclasses : 2;
        rc = strata__model_build_cfg(ctx->cfg, &ctx->s.model, &in,
                                     (int)s->test.ids_k, width, s->model);
    }
    if (rc == STRATA_OK)
        rc = strata__model_check_ids(s->model, &s->test, name,
                                     "test_ids or validation_ids");
    if (rc == STRATA_OK) {
        s->flat = malloc(s->model->count * sizeof *s->flat + 1);
        rc = s->flat ? STRATA_OK : STRATA_ENOMEM;
    }
    for (int i = 0; rc == STRATA_OK && i < s->model->nvars; i++) {
        strata_var_t *v = &s->model->vars[i];
        if (!(v->value = malloc(sizeof(void *))))
            rc = STRATA_ENOMEM;
        else
            v->value[0] = s->flat + v->offset;
    }
    if (rc == STRATA_OK &&
        (rc = strata__work_alloc(s->model, rows, &s->work)) == STRATA_ENOMEM)
        strata__log(STRATA_LOG_ERROR, who, "out of memory for the work of "
                    "%d samples at a time (%zu bytes each)", rows,
                    strata__work_row_bytes(s->model));
    if (rc != STRATA_OK)
        strata__scorer_close(s);
    return rc;
}

int strata__scorer_load(strata__scorer_t *s, const strata__ckpt_t *ck,
                        const char *path)
{
    /* A checkpoint of strata's says what its model was built for. */
    const char *dim = strata__ckpt_meta(ck, "strata.input_dim");
    if (dim && strtoll(dim, NULL, 10) != (long long)s->model->input_dim) {
        strata__log(STRATA_LOG_ERROR, s->who, "%s: its model takes %s input "
                    "features per sample (strata.input_dim); %s has %d",
                    path, dim, s->name, s->model->input_dim);
        return STRATA_EDATA;
    }
    int rc = load_vars(s->model, ck, path, s->who, s->flat);
    /* the layers' state (batchnorm's moving statistics) */
    float *states = malloc(s->model->state_count * sizeof *states + 1);
    if (rc == STRATA_OK && !states)
        rc = STRATA_ENOMEM;
    if (rc == STRATA_OK)
        rc = strata__ckpt_take_states(ck, s->who, path, s->model, states);
    if (rc == STRATA_OK)
        rc = strata__work_state_set(s->model, &s->work, states);
    free(states);
    return rc;
}

int strata__scorer_run(strata__scorer_t *s, const strata__ckpt_t *ck,
                       const char *path, double *loss, double *acc)
{
    int rc = strata__scorer_load(s, ck, path);
    double sum = 0.0;
    double metric = 0.0, hist[2 * KOPS_AUC_BINS] = { 0 };
    int auc = s->model->loss.metric == KOPS_METRIC_AUC;
    size_t step = (size_t)s->work.rows;
    for (size_t i = 0; rc == STRATA_OK && i < s->test.n; i += step) {
        size_t rows = s->test.n - i < step ? s->test.n - i : step;
        rc = strata__model_load_batch(&s->work, &s->test, NULL, i, rows);
        double part = 0.0;
        if (rc == STRATA_OK)
            rc = strata__model_evaluate(s->model, 0, &s->work, (int)rows,
                                        &part, &metric);
        for (int k = 0; auc && k < 2 * KOPS_AUC_BINS; k++)
            hist[k] += s->work.acc.hist[k];
        sum += part;
    }
    *loss = s->test.n ? sum / (double)s->test.n : 0.0;
    *acc = auc ? kc_auc(hist) : s->test.n ? metric / (double)s->test.n : 0.0;
    return rc;
}

void strata__scorer_close(strata__scorer_t *s)
{
    strata__work_free(&s->work);
    for (int i = 0; s->model && i < s->model->nvars; i++)
        free(s->model->vars[i].value);
    free(s->flat);
    free(s->model);
    strata__dataset_free(&s->test);
    memset(s, 0, sizeof *s);
}

/* The test set, or the samples of images/labels when they are given. */
static int eval_checkpoint(strata_ctx_t *ctx, const char *path,
                           const char *images, const char *labels,
                           const char *ids)
{
    int rc = strata__ctx_resolve(ctx);
    if (rc != STRATA_OK)
        return rc;
    strata__fpenv_fast();
    strata__ckpt_t *ck = NULL;
    strata__scorer_t s;
    strata__dataset_t set;
    double loss = 0.0, acc = 0.0;
    memset(&s, 0, sizeof s);
    if (!images)
        rc = strata__scorer_open(ctx, STRATA__SET_TEST, &s);
    else if ((rc = strata__dataset_load_as(images, labels, 0,
                                           ctx->s.data.labels_as, &set)) ==
             STRATA_OK) {
        if (ids && (rc = strata__ids_load(ids, &set)) != STRATA_OK)
            strata__dataset_free(&set);
        else
            rc = strata__scorer_open_set(ctx, "eval", &set, images,
                                         EVAL_ROWS, &s);
    }
    if (rc == STRATA_OK)
        rc = strata__ckpt_read(path, &ck);
    if (rc == STRATA_OK)
        rc = strata__scorer_run(&s, ck, path, &loss, &acc);
    if (rc == STRATA_OK)
        strata__out(ctx, "eval: %s: test loss %.4f, test %s %.4f (%zu "
                    "samples)\n", path, loss,
                    strata__metric_name(ctx->s.model.metric), acc, s.test.n);
    if (rc == STRATA_OK && ctx->cb.event) {   /* the full-precision result */
        strata_event_t ev = { .struct_size = sizeof ev,
                              .kind = STRATA_EVENT_EVAL, .loss = loss,
                              .accuracy = acc, .steps = (int64_t)s.test.n };
        ctx->cb.event(ctx->cb.user, &ev);
    }
    strata__ckpt_free(ck);
    strata__scorer_close(&s);
    return rc;
}

int strata_eval(strata_ctx_t *ctx, const char *path)
{
    return strata_eval_data(ctx, path, NULL, NULL);
}

int strata_eval_data(strata_ctx_t *ctx, const char *path, const char *images,
                     const char *labels)
{
    return strata_eval_data_ids(ctx, path, images, labels, NULL);
}

int strata_eval_data_ids(strata_ctx_t *ctx, const char *path,
                         const char *images, const char *labels,
                         const char *ids)
{
    if (!ctx || !path)
        return STRATA_EINVAL;
    strata_ctx_t *prev = strata__log_bind(ctx);
    int rc = STRATA_EINVAL;
    if (!images != !labels)
        strata__log(STRATA_LOG_ERROR, "eval", "%s without %s: the data to "
                    "score is images and their labels", images ? "images"
                    : "labels", images ? "labels" : "images");
    else if (ids && !images)
        strata__log(STRATA_LOG_ERROR, "eval", "ids without images and "
                    "labels: the test set's ids are [data] test_ids");
    else
        rc = eval_checkpoint(ctx, path, images, labels, ids);
    strata__log_bind(prev);
    return rc;
}
