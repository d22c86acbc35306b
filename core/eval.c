/* strata eval / strata inspect: a checkpoint on the test set, and its
 * contents. One thread, no strategy: the checkpoint holds the variables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "runtime.h"

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

static int eval_checkpoint(strata_ctx_t *ctx, const char *path)
{
    int rc = strata__ctx_resolve(ctx);
    if (rc != STRATA_OK)
        return rc;
    strata__fpenv_fast();
    const strata__data_cfg_t *d = &ctx->s.data;
    char ip[4096], lp[4096];
    snprintf(ip, sizeof ip, "%s%s%s", d->test_images[0] == '/' ? "" : d->dir,
             d->test_images[0] == '/' ? "" : "/", d->test_images);
    snprintf(lp, sizeof lp, "%s%s%s", d->test_labels[0] == '/' ? "" : d->dir,
             d->test_labels[0] == '/' ? "" : "/", d->test_labels);
    strata__dataset_t test = { 0 };
    strata__ckpt_t *ck = NULL;
    strata__model_t *m = calloc(1, sizeof *m);
    float *flat = NULL;
    void *slot = NULL;
    strata__work_t w = { 0 };
    rc = m ? strata__ckpt_read(path, &ck) : STRATA_ENOMEM;
    if (rc == STRATA_OK)
        rc = strata__dataset_load(ip, lp, (size_t)d->limit_test, &test);
    if (rc == STRATA_OK) {
        strata__shape_t in = strata__data_shape(&test);
        rc = strata__model_build(ctx->s.model.layers,
                                 strata__cfg_origin(ctx->cfg, "model",
                                                    "layers"),
                                 &in, test.nclasses, m);
    }
    if (rc == STRATA_OK) {
        flat = malloc(m->count * sizeof *flat + 1);
        rc = flat ? load_vars(m, ck, path, flat) : STRATA_ENOMEM;
    }
    for (int i = 0; rc == STRATA_OK && i < m->nvars; i++) {
        slot = flat + m->vars[i].offset;
        m->vars[i].value = malloc(sizeof(void *));
        if (!m->vars[i].value)
            rc = STRATA_ENOMEM;
        else
            m->vars[i].value[0] = slot;
    }
    if (rc == STRATA_OK)
        rc = strata__work_alloc(m, 256, &w);
    double loss = 0.0;
    int64_t correct = 0;
    for (size_t i = 0; rc == STRATA_OK && i < test.n; i += 256) {
        size_t rows = test.n - i < 256 ? test.n - i : 256;
        strata__batch_fill(&test, NULL, i, rows, w.x, w.y);
        double part = 0.0;
        rc = strata__model_evaluate(m, 0, &w, (int)rows, &part, &correct);
        loss += part;
    }
    if (rc == STRATA_OK)
        strata__out(ctx, "eval: %s: test loss %.4f, test accuracy %.4f (%zu "
                    "samples)\n", path,
                    test.n ? loss / (double)test.n : 0.0,
                    test.n ? (double)correct / (double)test.n : 0.0, test.n);
    strata__work_free(&w);
    for (int i = 0; m && i < m->nvars; i++)
        free(m->vars[i].value);
    free(flat);
    free(m);
    strata__ckpt_free(ck);
    strata__dataset_free(&test);
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
