/* A Sequential stack of dense layers: parsing, initialisation, and the
 * forward/backward pass of one replica over the kernels of kernels/cpu. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_cpu.h"
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

int strata__work_alloc(const strata__model_t *m, int rows, strata__work_t *w)
{
    memset(w, 0, sizeof *w);
    w->rows = rows;
    size_t r = (size_t)(rows > 0 ? rows : 1);
    w->x = strata__dev_alloc(STRATA_DEVICE(STRATA_DEV_CPU, 0),
                             r * (size_t)m->input_dim * sizeof(float));
    w->y = strata__dev_alloc(STRATA_DEVICE(STRATA_DEV_CPU, 0), r * sizeof(int32_t));
    int ok = w->x && w->y;
    for (int i = 0; ok && i < m->nlayers; i++)
        ok = (w->act[i] = strata__dev_alloc(STRATA_DEVICE(STRATA_DEV_CPU, 0),
                  r * (size_t)m->layers[i].out * sizeof(float))) != NULL;
    for (int i = 0; ok && i < 2; i++)
        ok = (w->delta[i] = strata__dev_alloc(STRATA_DEVICE(STRATA_DEV_CPU, 0),
                  r * (size_t)m->max_width * sizeof(float))) != NULL;
    if (!ok) {
        strata__work_free(w);
        return STRATA_ENOMEM;
    }
    return STRATA_OK;
}

void strata__work_free(strata__work_t *w)
{
    int32_t cpu = STRATA_DEVICE(STRATA_DEV_CPU, 0);
    strata__dev_free(cpu, w->x);
    strata__dev_free(cpu, w->y);
    for (int i = 0; i < STRATA_MAX_LAYERS; i++)
        strata__dev_free(cpu, w->act[i]);
    for (int i = 0; i < 2; i++)
        strata__dev_free(cpu, w->delta[i]);
    memset(w, 0, sizeof *w);
}

static const float *var_at(const strata__model_t *m, int vi, int r)
{
    return (const float *)m->vars[vi].value[r];
}

/* Forward through every layer; returns the logits (last activation). */
static float *forward(const strata__model_t *m, int r, strata__work_t *w,
                      int rows)
{
    const float *in = w->x;
    for (int i = 0; i < m->nlayers; i++) {
        const strata__layer_t *l = &m->layers[i];
        kc_dense_fwd(rows, l->in, l->out, in, var_at(m, 2 * i, r),
                     var_at(m, 2 * i + 1, r), w->act[i]);
        if (l->relu)
            kc_relu_fwd((size_t)rows * (size_t)l->out, w->act[i], w->act[i]);
        in = w->act[i];
    }
    return w->act[m->nlayers - 1];
}

double strata__model_train_step(const strata__model_t *m, int r,
                                strata__work_t *w, int rows, float *grads,
                                float scale, int64_t *correct)
{
    float *logits = forward(m, r, w, rows);
    float *delta = w->delta[0];
    double loss = kc_softmax_xent(rows, m->nclasses, logits, w->y, delta,
                                  scale, correct);
    for (int i = m->nlayers - 1; i >= 0; i--) {
        const strata__layer_t *l = &m->layers[i];
        const float *in = i > 0 ? w->act[i - 1] : w->x;
        float *dx = i > 0 ? w->delta[(m->nlayers - i) & 1] : NULL;
        kc_dense_bwd(rows, l->in, l->out, in, var_at(m, 2 * i, r), delta,
                     grads + m->vars[2 * i].offset,
                     grads + m->vars[2 * i + 1].offset, dx);
        if (dx && m->layers[i - 1].relu)
            kc_relu_bwd((size_t)rows * (size_t)l->in, w->act[i - 1], dx, dx);
        delta = dx;
    }
    return loss;
}

double strata__model_eval(const strata__model_t *m, int r, strata__work_t *w,
                          int rows, int64_t *correct)
{
    float *logits = forward(m, r, w, rows);
    return kc_softmax_xent(rows, m->nclasses, logits, w->y, NULL, 1.0f,
                           correct);
}
