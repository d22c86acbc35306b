/* A Sequential stack of dense layers: parsing, initialisation, and the
 * forward/backward pass of one replica, on the replica's device through its
 * kernel table (kops.h): the same code drives CPU and GPU replicas. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

/* Split "dense 128 relu" into words; returns the count (at most max). */
static int split_words(char *s, char **w, int max)
{
    int n = 0;
    for (char *p = s; *p;) {
        while (isspace((unsigned char)*p))
            p++;
        if (!*p)
            break;
        if (n == max)
            return max + 1;
        w[n++] = p;
        while (*p && !isspace((unsigned char)*p))
            p++;
        if (*p)
            *p++ = '\0';
    }
    return n;
}

static int parse_layer(char *text, int index, int is_last, strata__layer_t *l)
{
    char *w[4];
    int n = split_words(text, w, 3);
    if (n < 2 || n > 3 || strcmp(w[0], "dense") != 0) {
        strata__log(STRATA_LOG_ERROR, "model",
                    "[model] layers: layer %d: expected 'dense UNITS [relu]'",
                    index + 1);
        return STRATA_ECONFIG;
    }
    char *end;
    long units = strtol(w[1], &end, 10);
    if (*end || units < 1 || units > 65536) {
        strata__log(STRATA_LOG_ERROR, "model",
                    "[model] layers: layer %d: units '%s': expected an integer"
                    " in [1, 65536]", index + 1, w[1]);
        return STRATA_ECONFIG;
    }
    l->out = (int)units;
    l->relu = 0;
    if (n == 3) {
        if (strcmp(w[2], "relu") == 0 && !is_last)
            l->relu = 1;
        else if (!(strcmp(w[2], "softmax") == 0 && is_last)) {
            strata__log(STRATA_LOG_ERROR, "model",
                        "[model] layers: layer %d: activation '%s': expected "
                        "%s", index + 1, w[2],
                        is_last ? "'softmax' or none on the last layer"
                                : "'relu' or none");
            return STRATA_ECONFIG;
        }
    }
    return STRATA_OK;
}

int strata__model_build(const char *spec, int input_dim, int nclasses,
                        strata__model_t *m)
{
    memset(m, 0, sizeof *m);
    char *copy = strdup(spec ? spec : "");
    if (!copy)
        return STRATA_ENOMEM;
    char *parts[STRATA_MAX_LAYERS + 1];
    int n = 0;
    for (char *save = NULL, *p = strtok_r(copy, ",", &save); p;
         p = strtok_r(NULL, ",", &save)) {
        if (n == STRATA_MAX_LAYERS) {
            strata__log(STRATA_LOG_ERROR, "model",
                        "[model] layers: more than %d layers",
                        STRATA_MAX_LAYERS);
            free(copy);
            return STRATA_ECONFIG;
        }
        parts[n++] = p;
    }
    int rc = STRATA_OK;
    if (n == 0) {
        strata__log(STRATA_LOG_ERROR, "model",
                    "[model] layers: empty; expected e.g. 'dense 128 relu, "
                    "dense 10'");
        rc = STRATA_ECONFIG;
    }
    int in = input_dim;
    m->max_width = input_dim;
    for (int i = 0; rc == STRATA_OK && i < n; i++) {
        strata__layer_t *l = &m->layers[i];
        rc = parse_layer(parts[i], i, i == n - 1, l);
        l->in = in;
        in = l->out;
        if (l->out > m->max_width)
            m->max_width = l->out;
    }
    free(copy);
    if (rc != STRATA_OK)
        return rc;
    if (in < nclasses) {
        strata__log(STRATA_LOG_ERROR, "model",
                    "[model] layers: the last layer has %d units but the data "
                    "has %d classes", in, nclasses);
        return STRATA_ECONFIG;
    }
    m->nlayers = n;
    m->input_dim = input_dim;
    m->nclasses = in;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        const strata__layer_t *l = &m->layers[i];
        for (int j = 0; j < 2; j++) {
            int vi = 2 * i + j;
            strata_var_t *v = &m->vars[vi];
            snprintf(m->names[vi], sizeof m->names[vi], "dense_%d/%s", i,
                     j == 0 ? "kernel" : "bias");
            v->struct_size = sizeof *v;
            v->index = (uint32_t)vi;
            v->name = m->names[vi];
            v->dtype = STRATA_DTYPE_F32;
            v->ndim = j == 0 ? 2 : 1;
            v->shape[0] = j == 0 ? l->in : l->out;
            v->shape[1] = j == 0 ? l->out : 0;
            v->count = (size_t)l->out * (j == 0 ? (size_t)l->in : 1);
            v->offset = off;
            /* Keep every variable 64-byte aligned inside a flat buffer. */
            off += (v->count + 15) & ~(size_t)15;
        }
    }
    m->nvars = 2 * n;
    m->count = off;
    return STRATA_OK;
}

void strata__model_init(const strata__model_t *m, uint64_t seed, float *flat)
{
    memset(flat, 0, m->count * sizeof *flat);
    for (int i = 0; i < m->nlayers; i++) {
        const strata__layer_t *l = &m->layers[i];
        const strata_var_t *k = &m->vars[2 * i];
        strata__rng_t rng;
        /* One stream per layer: adding a layer leaves the others unchanged. */
        strata__rng_seed(&rng, seed, 1000u + (uint64_t)i);
        double limit = sqrt(6.0 / (double)(l->in + l->out));
        for (size_t j = 0; j < k->count; j++)
            flat[k->offset + j] =
                (float)((2.0 * strata__rng_uniform(&rng) - 1.0) * limit);
    }
}

int strata__work_alloc_on(const strata__model_t *m, int32_t device, int rows,
                          strata__work_t *w)
{
    memset(w, 0, sizeof *w);
    w->device = device;
    w->rows = rows;
    w->dim = (size_t)m->input_dim;
    int rc = strata__kdev_get(device, &w->kd);
    if (rc != STRATA_OK)
        return rc;
    const strata__kops_t *o = w->kd->ops;
    size_t r = (size_t)(rows > 0 ? rows : 1);
    w->x = strata__dev_alloc(device, r * w->dim * sizeof(float));
    w->y = strata__dev_alloc(device, r * sizeof(int32_t));
    int ok = w->x && w->y;
    for (int i = 0; ok && i < m->nlayers; i++)
        ok = (w->act[i] = strata__dev_alloc(device,
                  r * (size_t)m->layers[i].out * sizeof(float))) != NULL;
    for (int i = 0; ok && i < 2; i++)
        ok = (w->delta[i] = strata__dev_alloc(device,
                  r * (size_t)m->max_width * sizeof(float))) != NULL;
    if (ok && STRATA_DEVICE_TYPE(device) != STRATA_DEV_CPU) {
        /* A batch arrives as raw pixels and labels through page-locked
         * staging; the device scales the pixels (a quarter of the bytes of
         * floats cross the bus). */
        ok = (w->stage_x = o->host_alloc(w->kd, r * w->dim)) &&
             (w->stage_y = o->host_alloc(w->kd, r * sizeof(int32_t))) &&
             (w->pixels = strata__dev_alloc(device, r * w->dim));
    }
    if (ok)
        ok = o->xacc_init(w->kd, &w->acc) == STRATA_OK;
    if (!ok) {
        strata__work_free(w);
        return STRATA_ENOMEM;
    }
    return STRATA_OK;
}

int strata__work_alloc(const strata__model_t *m, int rows, strata__work_t *w)
{
    return strata__work_alloc_on(m, STRATA_DEVICE(STRATA_DEV_CPU, 0), rows, w);
}

void strata__work_free(strata__work_t *w)
{
    int32_t dev = w->device;
    if (w->kd) {
        const strata__kops_t *o = w->kd->ops;
        if (w->staged)
            (void)o->sync(w->kd); /* copies from the staging in flight */
        o->xacc_fini(w->kd, &w->acc);
        o->host_free(w->kd, w->stage_x);
        o->host_free(w->kd, w->stage_y);
    }
    strata__dev_free(dev, w->pixels);
    strata__dev_free(dev, w->x);
    strata__dev_free(dev, w->y);
    for (int i = 0; i < STRATA_MAX_LAYERS; i++)
        strata__dev_free(dev, w->act[i]);
    for (int i = 0; i < 2; i++)
        strata__dev_free(dev, w->delta[i]);
    memset(w, 0, sizeof *w);
}

int strata__model_load_batch(strata__work_t *w, const strata__dataset_t *d,
                             const uint32_t *perm, size_t first, size_t rows)
{
    if (rows > (size_t)(w->rows > 0 ? w->rows : 1) || d->dim != w->dim) {
        strata__log(STRATA_LOG_ERROR, "model", "a batch of %zu rows of %zu "
                    "features does not fit work of %d rows of %zu", rows,
                    d->dim, w->rows, w->dim);
        return STRATA_EINVAL;
    }
    if (STRATA_DEVICE_TYPE(w->device) == STRATA_DEV_CPU) {
        strata__batch_fill(d, perm, first, rows, w->x, w->y);
        return STRATA_OK;
    }
    strata__kdev_t *k = w->kd;
    const strata__kops_t *o = k->ops;
    /* The last batch's copies read the staging until the step's read-back
     * waited for them; wait here if nothing did. */
    int rc = w->staged ? o->sync(k) : STRATA_OK;
    if (rc != STRATA_OK)
        return rc;
    w->staged = 0;
    for (size_t i = 0; i < rows; i++) {
        size_t s = perm ? perm[first + i] : first + i;
        memcpy(w->stage_x + i * d->dim, d->images + s * d->dim, d->dim);
        w->stage_y[i] = d->labels[s];
    }
    rc = o->copy(k, STRATA__H2D, w->pixels, w->stage_x, rows * d->dim);
    if (rc == STRATA_OK)
        rc = o->copy(k, STRATA__H2D, w->y, w->stage_y, rows * sizeof(int32_t));
    w->staged = 1;
    if (rc == STRATA_OK)
        rc = o->u8_to_f32(k, rows * d->dim, w->pixels, 1.0f / 255.0f, w->x);
    return rc;
}

static const float *var_at(const strata__model_t *m, int vi, int r)
{
    return (const float *)m->vars[vi].value[r];
}

/* Forward through every layer; *logits = the last activation. */
static int forward(const strata__model_t *m, int r, strata__work_t *w,
                   int rows, float **logits)
{
    strata__kdev_t *k = w->kd;
    const strata__kops_t *o = k->ops;
    const float *in = w->x;
    int rc = STRATA_OK;
    for (int i = 0; rc == STRATA_OK && i < m->nlayers; i++) {
        const strata__layer_t *l = &m->layers[i];
        rc = o->dense_fwd(k, rows, l->in, l->out, in, var_at(m, 2 * i, r),
                          var_at(m, 2 * i + 1, r), w->act[i]);
        if (rc == STRATA_OK && l->relu)
            rc = o->relu_fwd(k, (size_t)rows * (size_t)l->out, w->act[i],
                             w->act[i]);
        in = w->act[i];
    }
    *logits = w->act[m->nlayers - 1];
    return rc;
}

/* The step's sums reach the host: on a GPU this waits for the stream. */
static int read_back(strata__work_t *w, double *loss, int64_t *correct)
{
    int rc = w->kd->ops->xent_read(w->kd, &w->acc);
    if (rc == STRATA_OK) {
        w->staged = 0; /* the wait covered the batch's copies */
        *loss = w->acc.loss;
        *correct += w->acc.correct;
    }
    return rc;
}

int strata__model_step(const strata__model_t *m, int r, strata__work_t *w,
                       int rows, float *grads, float scale, double *loss,
                       int64_t *correct)
{
    strata__kdev_t *k = w->kd;
    const strata__kops_t *o = k->ops;
    float *logits;
    *loss = 0.0;
    int rc = o->xent_zero(k, &w->acc);
    if (rc == STRATA_OK)
        rc = forward(m, r, w, rows, &logits);
    float *delta = w->delta[0];
    if (rc == STRATA_OK)
        rc = o->softmax_xent(k, rows, m->nclasses, logits, w->y, delta, scale,
                             &w->acc);
    for (int i = m->nlayers - 1; rc == STRATA_OK && i >= 0; i--) {
        const strata__layer_t *l = &m->layers[i];
        const float *in = i > 0 ? w->act[i - 1] : w->x;
        float *dx = i > 0 ? w->delta[(m->nlayers - i) & 1] : NULL;
        rc = o->dense_bwd(k, rows, l->in, l->out, in, var_at(m, 2 * i, r),
                          delta, grads + m->vars[2 * i].offset,
                          grads + m->vars[2 * i + 1].offset, dx);
        if (rc == STRATA_OK && dx && m->layers[i - 1].relu)
            rc = o->relu_bwd(k, (size_t)rows * (size_t)l->in, w->act[i - 1],
                             dx, dx);
        delta = dx;
    }
    return rc == STRATA_OK ? read_back(w, loss, correct) : rc;
}

int strata__model_evaluate(const strata__model_t *m, int r, strata__work_t *w,
                           int rows, double *loss, int64_t *correct)
{
    strata__kdev_t *k = w->kd;
    float *logits;
    *loss = 0.0;
    int rc = k->ops->xent_zero(k, &w->acc);
    if (rc == STRATA_OK)
        rc = forward(m, r, w, rows, &logits);
    if (rc == STRATA_OK)
        rc = k->ops->softmax_xent(k, rows, m->nclasses, logits, w->y, NULL,
                                  1.0f, &w->acc);
    return rc == STRATA_OK ? read_back(w, loss, correct) : rc;
}

double strata__model_train_step(const strata__model_t *m, int r,
                                strata__work_t *w, int rows, float *grads,
                                float scale, int64_t *correct)
{
    double loss;
    return strata__model_step(m, r, w, rows, grads, scale, &loss, correct) ==
                   STRATA_OK ? loss : NAN;
}

double strata__model_eval(const strata__model_t *m, int r, strata__work_t *w,
                          int rows, int64_t *correct)
{
    double loss;
    return strata__model_evaluate(m, r, w, rows, &loss, correct) == STRATA_OK
               ? loss : NAN;
}
