/* strata eval / strata inspect: a checkpoint on the test set, and its
 * contents. One thread, no strategy: the checkpoint holds the variables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/states.h"
#include "eval.h"

int strata_inspect(const char *path)
{
    return path ? strata__ckpt_inspect(path, stdout) : STRATA_EINVAL;
}

/* The variables of `m` from checkpoint `ck` into `flat` (m->count). */
static int load_vars(const strata__model_t *m, const strata__ckpt_t *ck,
                     const char *path, float *flat)
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
            strata__log(STRATA_LOG_ERROR, "eval",
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
    int rc = strata__gemm_check();
    if (rc != STRATA_OK)
        return rc;
    strata__datasets_t sets;
    s->model = calloc(1, sizeof *s->model);
    rc = s->model ? strata__datasets_load(&ctx->s.data,
                                          (uint64_t)ctx->s.train.seed, which,
                                          &sets)
                  : STRATA_ENOMEM;
    if (rc == STRATA_OK) {
        s->test = which == STRATA__SET_VAL ? sets.val : sets.test;
        if (which == STRATA__SET_VAL) /* neither train nor test is held */
            memset(&sets.val, 0, sizeof sets.val);
        else
            memset(&sets.test, 0, sizeof sets.test);
        strata__datasets_free(&sets);
    }
    if (rc == STRATA_OK) {
        strata__shape_t in = strata__data_shape(&s->test);
        rc = strata__model_build_cfg(ctx->cfg, ctx->s.model.layers, &in,
                                     s->test.nclasses, s->model);
    }
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
    if (rc == STRATA_OK)
        rc = strata__work_alloc(s->model, EVAL_ROWS, &s->work);
    if (rc != STRATA_OK)
        strata__scorer_close(s);
    return rc;
}

int strata__scorer_run(strata__scorer_t *s, const strata__ckpt_t *ck,
                       const char *path, double *loss, double *acc)
{
    int rc = load_vars(s->model, ck, path, s->flat);
    float *states = malloc(s->model->state_count * sizeof *states + 1);
    if (rc == STRATA_OK && !states)
        rc = STRATA_ENOMEM;
    if (rc == STRATA_OK)
        rc = strata__ckpt_take_states(ck, "eval", path, s->model, states);
    if (rc == STRATA_OK)
        rc = strata__work_state_set(s->model, &s->work, states);
    free(states);
    double sum = 0.0;
    int64_t correct = 0;
    for (size_t i = 0; rc == STRATA_OK && i < s->test.n; i += EVAL_ROWS) {
        size_t rows = s->test.n - i < EVAL_ROWS ? s->test.n - i : EVAL_ROWS;
        strata__batch_fill(&s->test, NULL, i, rows, s->work.x, s->work.y);
        double part = 0.0;
        rc = strata__model_evaluate(s->model, 0, &s->work, (int)rows, &part,
                                    &correct);
        sum += part;
    }
    *loss = s->test.n ? sum / (double)s->test.n : 0.0;
    *acc = s->test.n ? (double)correct / (double)s->test.n : 0.0;
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

static int eval_checkpoint(strata_ctx_t *ctx, const char *path)
{
    int rc = strata__ctx_resolve(ctx);
    if (rc != STRATA_OK)
        return rc;
    strata__fpenv_fast();
    strata__ckpt_t *ck = NULL;
    strata__scorer_t s;
    double loss = 0.0, acc = 0.0;
    rc = strata__scorer_open(ctx, STRATA__SET_TEST, &s);
    if (rc == STRATA_OK)
        rc = strata__ckpt_read(path, &ck);
    if (rc == STRATA_OK)
        rc = strata__scorer_run(&s, ck, path, &loss, &acc);
    if (rc == STRATA_OK)
        strata__out(ctx, "eval: %s: test loss %.4f, test accuracy %.4f (%zu "
                    "samples)\n", path, loss, acc, s.test.n);
    strata__ckpt_free(ck);
    strata__scorer_close(&s);
    return rc;
}

int strata_eval(strata_ctx_t *ctx, const char *path)
{
    if (!ctx || !path)
        return STRATA_EINVAL;
    strata_ctx_t *prev = strata__log_bind(ctx);
    int rc = eval_checkpoint(ctx, path);
    strata__log_bind(prev);
    return rc;
}
