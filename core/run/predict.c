/* strata predict: a checkpoint's outputs for every sample of an images
 * file, as a float32 .npy. The scorer of eval.c holds the model, its
 * variables and the work; the whole output is computed before anything
 * is written, then written at once (strata__write_atomic). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "eval.h"

#define WHO "predict"

/* 1 when `out` is the file `in` (a link to it included). */
static int same_file(const char *out, const char *in)
{
    struct stat a, b;
    return stat(out, &a) == 0 && stat(in, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* Every sample of s->test through the model into out (n x units). */
static int forward_all(strata__scorer_t *s, int probs, float *out)
{
    int rc = STRATA_OK;
    size_t step = (size_t)s->work.rows, units = (size_t)s->model->nclasses;
    for (size_t i = 0; rc == STRATA_OK && i < s->test.n; i += step) {
        size_t rows = s->test.n - i < step ? s->test.n - i : step;
        rc = strata__model_load_batch(&s->work, &s->test, NULL, i, rows);
        if (rc == STRATA_OK)
            rc = strata__model_predict(s->model, 0, &s->work, (int)rows,
                                       probs, out + i * units);
    }
    return rc;
}

static int predict(strata_ctx_t *ctx, const char *path, const char *data,
                   const char *ids, const char *out, int batch,
                   unsigned flags)
{
    int rc = strata__ctx_resolve(ctx);
    if (rc != STRATA_OK)
        return rc;
    strata__fpenv_fast();
    if (batch == 0)
        batch = (int)ctx->s.train.batch_size;
    strata__dataset_t set;
    strata__scorer_t s;
    strata__ckpt_t *ck = NULL;
    void *file = NULL;
    size_t len = 0;
    float *y = NULL;
    memset(&s, 0, sizeof s);
    rc = strata__images_load(data, &set);
    if (rc == STRATA_OK && ids && (rc = strata__ids_load(ids, &set)) != 0)
        strata__dataset_free(&set);
    if (rc == STRATA_OK) {
        size_t n = set.n;
        rc = strata__scorer_open_set(ctx, WHO, &set, data,
                                     n < (size_t)batch ? (int)n : batch, &s);
    }
    if (rc == STRATA_OK)
        rc = strata__ckpt_read(path, &ck);
    if (rc == STRATA_OK)
        rc = strata__scorer_load(&s, ck, path);
    if (rc == STRATA_OK &&
        (rc = strata__npy_f32_alloc(s.test.n, (uint64_t)s.model->nclasses,
                                    &file, &len, &y)) != STRATA_OK)
        strata__log(STRATA_LOG_ERROR, WHO, "%s: out of memory for the "
                    "outputs of %zu samples", out, s.test.n);
    if (rc == STRATA_OK)
        rc = forward_all(&s, !(flags & STRATA_PREDICT_LOGITS), y);
    if (rc == STRATA_OK)
        rc = strata__write_atomic(out, file, len);
    if (rc == STRATA_OK)
        strata__out(ctx, "predict: %s: %zu samples of %s -> %s (%zu x %d "
                    "%s)\n", path, s.test.n, data, out, s.test.n,
                    s.model->nclasses,
                    s.model->loss.kind == KOPS_LOSS_MSE ||
                    s.model->loss.kind == KOPS_LOSS_MAE ? "outputs"
                    : flags & STRATA_PREDICT_LOGITS ? "logits"
                                                    : "probabilities");
    free(file);
    strata__ckpt_free(ck);
    strata__scorer_close(&s);
    return rc;
}

int strata_predict(strata_ctx_t *ctx, const char *path, const char *data,
                   const char *out, int batch_size, unsigned flags)
{
    return strata_predict_ids(ctx, path, data, NULL, out, batch_size, flags);
}

int strata_predict_ids(strata_ctx_t *ctx, const char *path, const char *data,
                       const char *ids, const char *out, int batch_size,
                       unsigned flags)
{
    if (!ctx)
        return STRATA_EINVAL;
    strata_ctx_t *prev = strata__log_bind(ctx);
    int rc = STRATA_EINVAL;
    if (!path || !data || !out || !out[0])
        strata__log(STRATA_LOG_ERROR, WHO, "needs a checkpoint, a data file "
                    "and an output file");
    else if (batch_size < 0 || batch_size > 1000000)
        strata__log(STRATA_LOG_ERROR, WHO, "batch size %d: expected 1 to "
                    "1000000 (0: [train] batch_size)", batch_size);
    else if (flags & ~STRATA_PREDICT_LOGITS)
        strata__log(STRATA_LOG_ERROR, WHO, "unknown flags 0x%x", flags);
    else if (same_file(out, path) || same_file(out, data) ||
             (ids && same_file(out, ids)))
        strata__log(STRATA_LOG_ERROR, WHO, "%s is the %s itself: the outputs "
                    "do not replace an input", out,
                    same_file(out, path) ? "checkpoint"
                    : same_file(out, data) ? "data file" : "ids file");
    else
        rc = predict(ctx, path, data, ids, out, batch_size, flags);
    strata__log_bind(prev);
    return rc;
}
