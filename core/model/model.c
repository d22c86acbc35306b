/* The model: parsing the layer list, the flat layout of its variables,
 * initialisation, and the forward/backward pass of one replica, chaining
 * the layer kinds of layers/ (which know how to compute) with buffers,
 * activations and the loss. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

/* Every layer kind; model.c knows them only through this table. */
static const strata__layer_kind_t *const k_kinds[] = {
    &strata__layer_dense,     &strata__layer_conv2d, &strata__layer_maxpool2d,
    &strata__layer_flatten,   &strata__layer_dropout, &strata__layer_avgpool2d,
    &strata__layer_global_avgpool2d,
    &strata__layer_relu,      &strata__layer_leaky_relu, &strata__layer_gelu,
    &strata__layer_tanh,      &strata__layer_sigmoid, &strata__layer_softmax,
};
#define NKINDS ((int)(sizeof k_kinds / sizeof k_kinds[0]))

static const char *const k_acts[] = { "none", "relu", "tanh", "sigmoid" };

/* ---- building ------------------------------------------------------------ */

/* Split "conv2d 32 3 relu" into words in place; returns the count, or
 * max + 1 when there are more. */
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

/* Copy `s` without its leading and trailing blanks. */
static void trim_copy(char *dst, size_t cap, const char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, s, n);
    dst[n] = '\0';
}

static const strata__layer_kind_t *find_kind(const char *name)
{
    for (int i = 0; i < NKINDS; i++)
        if (!strcmp(k_kinds[i]->name, name))
            return k_kinds[i];
    return NULL;
}

/* One error line: where the spec comes from, the layer and the reason. */
static int layer_error(const char *origin, const strata__layer_t *l,
                       const char *why)
{
    strata__log(STRATA_LOG_ERROR, "model",
                "%s%s[model] layers: layer %d '%s': %s", origin ? origin : "",
                origin ? ": " : "", l->index + 1, l->text, why);
    return STRATA_ECONFIG;
}

/* Strip a trailing activation word into l->act; 'softmax' only on the last
 * layer, where the loss applies it. */
static int take_activation(strata__layer_t *l, char **w, int *n, int is_last,
                           char *why, size_t len)
{
    if (*n < 1)
        return 0;
    const char *a = w[*n - 1];
    if (!strcmp(a, "softmax")) {
        if (!is_last) {
            snprintf(why, len, "'softmax' only on the last layer (the loss "
                     "applies it); expected relu, tanh, sigmoid or none, or "
                     "a softmax layer after this one, ', softmax'");
            return -1;
        }
        (*n)--;
        return 0;
    }
    for (int i = 0; i < (int)(sizeof k_acts / sizeof k_acts[0]); i++)
        if (!strcmp(a, k_acts[i])) {
            l->act = i;
            (*n)--;
            return 0;
        }
    if (find_kind(a)) {
        snprintf(why, len, "'%s' is a layer of its own, not an activation "
                 "word (relu, tanh, sigmoid or none): put it after this one, "
                 "', %s'", a, a);
        return -1;
    }
    return 0;
}

static int parse_layer(const char *text, const char *origin, int index,
                       int is_last, strata__layer_t *l)
{
    char buf[256], why[320] = "";
    l->index = index;
    trim_copy(l->text, sizeof l->text, text);
    trim_copy(buf, sizeof buf, text);
    char *w[12];
    int n = split_words(buf, w, 11);
    if (n == 0)
        return layer_error(origin, l, "empty; expected e.g. 'dense 10'");
    if (n > 11)
        return layer_error(origin, l, "too many words");
    l->kind = find_kind(w[0]);
    if (!l->kind) {
        char list[256] = "";
        for (int i = 0; i < NKINDS; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                     i ? ", " : "", k_kinds[i]->name);
        snprintf(why, sizeof why, "unknown kind '%s'; expected one of %s",
                 w[0], list);
        return layer_error(origin, l, why);
    }
    snprintf(l->name, sizeof l->name, "%s_%d", l->kind->name, index);
    int nargs = n - 1;
    int rc = l->kind->has_act
                 ? take_activation(l, w + 1, &nargs, is_last, why, sizeof why)
                 : 0;
    if (rc == 0)
        rc = l->kind->parse(l, w + 1, nargs, why, sizeof why);
    if (rc != 0) {
        char full[448];
        snprintf(full, sizeof full, "%s; expected '%s'", why, l->kind->usage);
        return layer_error(origin, l, full);
    }
    return STRATA_OK;
}

/* Lay out the variables of layer l: kernel then bias, each 64-byte
 * aligned in the flat buffer. */
static void place_vars(strata__model_t *m, strata__layer_t *l, size_t *off)
{
    int64_t dims[4] = { 0 };
    size_t bias;
    double fi, fo;
    int ndim = l->kind->kernel_shape(l, dims, &bias, &fi, &fo);
    l->var0 = m->nvars;
    for (int j = 0; j < 2; j++) {
        int vi = m->nvars++;
        strata_var_t *v = &m->vars[vi];
        snprintf(m->names[vi], sizeof m->names[vi], "%s/%s", l->name,
                 j == 0 ? "kernel" : "bias");
        v->struct_size = sizeof *v;
        v->index = (uint32_t)vi;
        v->name = m->names[vi];
        v->dtype = STRATA_DTYPE_F32;
        v->ndim = j == 0 ? (uint32_t)ndim : 1;
        v->count = 1;
        for (int d = 0; d < (int)v->ndim; d++) {
            v->shape[d] = j == 0 ? dims[d] : (int64_t)bias;
            v->count *= (size_t)v->shape[d];
        }
        v->offset = *off;
        m->params += v->count;
        *off += (v->count + 15) & ~(size_t)15;
    }
}

strata__shape_t strata__data_shape(const strata__dataset_t *d)
{
    if (d->channels > 0)
        return (strata__shape_t){ (int)d->rows, (int)d->cols,
                                  (int)d->channels, 1 };
    if (d->rows > 1)
        return (strata__shape_t){ (int)d->rows, (int)d->cols,
                                  (int)(d->dim / ((size_t)d->rows * d->cols)),
                                  1 };
    return (strata__shape_t){ 1, 1, (int)d->dim, 0 };
}

int strata__model_build(const char *spec, const char *origin,
                        const strata__shape_t *input, int nclasses,
                        strata__model_t *m)
{
    memset(m, 0, sizeof *m);
    char *copy = strdup(spec ? spec : "");
    if (!copy)
        return STRATA_ENOMEM;
    const char *where = origin ? origin : "";
    const char *sep = origin ? ": " : "";
    char *parts[STRATA_MAX_LAYERS + 1];
    int n = 0, rc = STRATA_OK;
    for (char *save = NULL, *p = strtok_r(copy, ",", &save); p;
         p = strtok_r(NULL, ",", &save)) {
        if (n == STRATA_MAX_LAYERS) {
            strata__log(STRATA_LOG_ERROR, "model", "%s%s[model] layers: more "
                        "than %d layers", where, sep, STRATA_MAX_LAYERS);
            rc = STRATA_ECONFIG;
            break;
        }
        parts[n++] = p;
    }
    if (rc == STRATA_OK && n == 0) {
        strata__log(STRATA_LOG_ERROR, "model", "%s%s[model] layers: empty; "
                    "expected e.g. 'dense 128 relu, dense 10'", where, sep);
        rc = STRATA_ECONFIG;
    }
    m->input = *input;
    m->input_dim = (int)strata__shape_size(input);
    m->max_width = (size_t)m->input_dim;
    strata__shape_t in = *input;
    size_t off = 0;
    for (int i = 0; rc == STRATA_OK && i < n; i++) {
        strata__layer_t *l = &m->layers[i];
        rc = parse_layer(parts[i], origin, i, i == n - 1, l);
        if (rc != STRATA_OK)
            break;
        char why[192] = "";
        l->in = in;
        if (l->kind->infer(l, why, sizeof why) != 0) {
            rc = layer_error(origin, l, why);
            break;
        }
        size_t width = strata__shape_size(&l->out);
        if (width > ((size_t)1 << 28)) {
            rc = layer_error(origin, l, "output larger than 2^28 floats per "
                             "sample");
            break;
        }
        if (width > m->max_width)
            m->max_width = width;
        if (l->kind->nvars)
            place_vars(m, l, &off);
        in = l->out;
    }
    free(copy);
    if (rc != STRATA_OK)
        return rc;
    strata__layer_t *last = &m->layers[n - 1];
    char why[320] = "";
    if (last->kind == &strata__layer_softmax)
        snprintf(why, sizeof why, "a softmax layer cannot be the last one: "
                 "the last layer gives the logits, and the loss applies "
                 "softmax to them (drop this layer); a softmax layer is "
                 "allowed only before the last layer");
    else if (in.spatial || last->kind->nvars == 0)
        snprintf(why, sizeof why, "the last layer must give the class scores"
                 " (e.g. 'dense %d'), not a %s output", nclasses,
                 in.spatial ? "spatial" : last->kind->name);
    else if (in.c < nclasses)
        snprintf(why, sizeof why, "the last layer has %d units but the data "
                 "has %d classes", in.c, nclasses);
    else if (last->act != STRATA__ACT_NONE)
        snprintf(why, sizeof why, "activation '%s' on the last layer: "
                 "expected 'softmax' or none (the loss applies softmax)",
                 k_acts[last->act]);
    if (why[0])
        return layer_error(origin, last, why);
    m->nlayers = n;
    m->nclasses = in.c;
    m->count = off;
    return STRATA_OK;
}

void strata__model_init(const strata__model_t *m, uint64_t seed, float *flat)
{
    memset(flat, 0, m->count * sizeof *flat);
    for (int i = 0; i < m->nlayers; i++) {
        const strata__layer_t *l = &m->layers[i];
        if (!l->kind->nvars)
            continue;
        int64_t dims[4];
        size_t bias;
        double fan_in, fan_out;
        l->kind->kernel_shape(l, dims, &bias, &fan_in, &fan_out);
        const strata_var_t *k = &m->vars[l->var0];
        strata__rng_t rng;
        /* One stream per layer: adding a layer leaves the others unchanged. */
        strata__rng_seed(&rng, seed, 1000u + (uint64_t)i);
        double limit = sqrt(6.0 / (fan_in + fan_out));
        for (size_t j = 0; j < k->count; j++)
            flat[k->offset + j] =
                (float)((2.0 * strata__rng_uniform(&rng) - 1.0) * limit);
    }
}

void strata__model_summary(const strata__model_t *m, FILE *f)
{
    /* The name column fits the longest name ("global_avgpool2d_12"), the
     * spec column the longest spec: the table stays aligned. */
    int nw = 14, sw = 36;
    for (int i = 0; i < m->nlayers; i++) {
        int a = (int)strlen(m->layers[i].name);
        int b = (int)strlen(m->layers[i].text);
        nw = a > nw ? a : nw;
        sw = b > sw ? b : sw;
    }
    fprintf(f, " %-*s %-*s %-18s %10s\n", nw, "layer", sw, "spec",
            "output shape", "params");
    for (int i = 0; i < m->nlayers; i++) {
        const strata__layer_t *l = &m->layers[i];
        char shape[48];
        if (l->out.spatial)
            snprintf(shape, sizeof shape, "(%d, %d, %d)", l->out.h, l->out.w,
                     l->out.c);
        else
            snprintf(shape, sizeof shape, "(%d)", l->out.c);
        size_t params = 0;
        if (l->kind->nvars)
            params = m->vars[l->var0].count + m->vars[l->var0 + 1].count;
        fprintf(f, " %-*s %-*s %-18s %10zu\n", nw, l->name, sw, l->text,
                shape, params);
    }
    fprintf(f, " total: %zu parameters\n", m->params);
}

uint64_t strata__model_step_seed(uint64_t seed, int64_t step)
{
    strata__rng_t rng;
    strata__rng_seed(&rng, seed, 0x64726f70ull ^ ((uint64_t)step << 20));
    return strata__rng_next(&rng);
}

/* ---- per-replica work -------------------------------------------------- */

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
    for (int i = 0; ok && i < m->nlayers; i++) {
        const strata__layer_t *l = &m->layers[i];
        if (l->kind->alias)
            continue;
        ok = (w->act[i] = strata__dev_alloc(device,
                  r * strata__shape_size(&l->out) * sizeof(float))) != NULL;
        w->aux_bytes[i] = l->kind->aux_bytes ? l->kind->aux_bytes(l, (int)r)
                                             : 0;
        if (ok && w->aux_bytes[i])
            ok = (w->aux[i] = strata__dev_alloc(device, w->aux_bytes[i])) !=
                 NULL;
    }
    for (int i = 0; ok && i < 2; i++)
        ok = (w->delta[i] = strata__dev_alloc(device,
                  r * m->max_width * sizeof(float))) != NULL;
    if (ok && STRATA_DEVICE_TYPE(device) != STRATA_DEV_CPU) {
        /* A batch arrives as raw pixels and labels through page-locked
         * staging; the device scales the pixels (a quarter of the bytes of
         * floats cross the bus). */
        ok = (w->stage_x = o->host_alloc(w->kd,
                                         r * w->dim * sizeof(float))) &&
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

size_t strata__work_row_bytes(const strata__model_t *m)
{
    size_t bytes = ((size_t)m->input_dim + 2 * m->max_width) * sizeof(float);
    for (int i = 0; i < m->nlayers; i++) {
        const strata__layer_t *l = &m->layers[i];
        if (l->kind->alias)
            continue;
        bytes += strata__shape_size(&l->out) * sizeof(float);
        bytes += l->kind->aux_bytes ? l->kind->aux_bytes(l, 1) : 0;
    }
    return bytes;
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
    for (int i = 0; i < STRATA_MAX_LAYERS; i++) {
        strata__dev_free(dev, w->act[i]);
        strata__dev_free(dev, w->aux[i]);
    }
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
    /* float32 data crosses as floats straight into w->x; uint8 pixels
     * cross as bytes (a quarter of the bus) and are scaled on the device. */
    size_t row = d->dim * (d->images_f32 ? sizeof(float) : 1);
    for (size_t i = 0; i < rows; i++) {
        size_t s = perm ? perm[first + i] : first + i;
        const void *src = d->images_f32
                              ? (const void *)(d->images_f32 + s * d->dim)
                              : (const void *)(d->images + s * d->dim);
        memcpy(w->stage_x + i * row, src, row);
        w->stage_y[i] = d->labels[s];
    }
    rc = o->copy(k, STRATA__H2D, d->images_f32 ? (void *)w->x : w->pixels,
                 w->stage_x, rows * row);
    if (rc == STRATA_OK)
        rc = o->copy(k, STRATA__H2D, w->y, w->stage_y, rows * sizeof(int32_t));
    w->staged = 1;
    if (rc == STRATA_OK && !d->images_f32)
        rc = o->u8_to_f32(k, rows * d->dim, w->pixels, 1.0f / 255.0f, w->x);
    return rc;
}

/* ---- forward and backward ----------------------------------------------- */

/* The output of layer i: its own buffer, or its input for an alias layer. */
static float *out_of(const strata__model_t *m, strata__work_t *w, int i)
{
    while (i >= 0 && m->layers[i].kind->alias)
        i--;
    return i >= 0 ? w->act[i] : w->x;
}

static float *in_of(const strata__model_t *m, strata__work_t *w, int i)
{
    return out_of(m, w, i - 1);
}

static int act_forward(strata__kdev_t *k, int act, size_t n, float *y)
{
    const strata__kops_t *o = k->ops;
    switch (act) {
    case STRATA__ACT_RELU:    return o->relu_fwd(k, n, y, y);
    case STRATA__ACT_TANH:    return o->tanh_fwd(k, n, y, y);
    case STRATA__ACT_SIGMOID: return o->sigmoid_fwd(k, n, y, y);
    default:                  return STRATA_OK;
    }
}

static int act_backward(strata__kdev_t *k, int act, size_t n, const float *y,
                        float *dy)
{
    const strata__kops_t *o = k->ops;
    switch (act) {
    case STRATA__ACT_RELU:    return o->relu_bwd(k, n, y, dy, dy);
    case STRATA__ACT_TANH:    return o->tanh_bwd(k, n, y, dy, dy);
    case STRATA__ACT_SIGMOID: return o->sigmoid_bwd(k, n, y, dy, dy);
    default:                  return STRATA_OK;
    }
}

/* The pass of layer i with replica r's variables; gradients into `grads`
 * when not NULL. */
static strata__pass_t pass_of(const strata__model_t *m, int r,
                              strata__work_t *w, int i, int rows,
                              int training, float *grads)
{
    const strata__layer_t *l = &m->layers[i];
    strata__pass_t p = {
        .k = w->kd, .rows = rows, .x = in_of(m, w, i), .y = w->act[i],
        .aux = w->aux[i], .aux_bytes = w->aux_bytes[i],
        .training = training,
        .seed = w->noise_seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(i + 1)),
        .first = (uint64_t)w->row0 * strata__shape_size(&l->in),
    };
    if (l->kind->nvars) {
        p.W = (const float *)m->vars[l->var0].value[r];
        p.b = (const float *)m->vars[l->var0 + 1].value[r];
        if (grads) {
            p.dW = grads + m->vars[l->var0].offset;
            p.db = grads + m->vars[l->var0 + 1].offset;
        }
    }
    return p;
}

static int forward(const strata__model_t *m, int r, strata__work_t *w,
                   int rows, int training, float **logits)
{
    int rc = STRATA_OK;
    for (int i = 0; rc == STRATA_OK && i < m->nlayers; i++) {
        const strata__layer_t *l = &m->layers[i];
        if (l->kind->alias)
            continue;
        strata__pass_t p = pass_of(m, r, w, i, rows, training, NULL);
        rc = l->kind->forward(l, &p);
        if (rc == STRATA_OK)
            rc = act_forward(w->kd, l->act,
                             (size_t)rows * strata__shape_size(&l->out),
                             w->act[i]);
    }
    *logits = out_of(m, w, m->nlayers - 1);
    return rc;
}

/* From d loss / d logits in delta[0] down to the first layer's gradients;
 * each layer writes its input's gradient into the other delta buffer. */
static int backward(const strata__model_t *m, int r, strata__work_t *w,
                    int rows, float *grads)
{
    int first = 0;
    while (first < m->nlayers && m->layers[first].kind->alias)
        first++;
    int cur = 0, rc = STRATA_OK;
    for (int i = m->nlayers - 1; rc == STRATA_OK && i >= first; i--) {
        const strata__layer_t *l = &m->layers[i];
        if (l->kind->alias)
            continue;
        rc = act_backward(w->kd, l->act,
                          (size_t)rows * strata__shape_size(&l->out),
                          w->act[i], w->delta[cur]);
        strata__pass_t p = pass_of(m, r, w, i, rows, 1, grads);
        p.dy = w->delta[cur];
        p.dx = i > first ? w->delta[1 - cur] : NULL;
        if (rc == STRATA_OK && (p.dx || l->kind->nvars))
            rc = l->kind->backward(l, &p);
        if (rc == STRATA_OK && w->on_ready && l->kind->nvars) {
            rc = w->kd->ops->sync(w->kd);
            if (rc == STRATA_OK)
                rc = w->on_ready(w->ready_arg, m->vars[l->var0].offset);
        }
        cur = 1 - cur;
    }
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
    float *logits;
    *loss = 0.0;
    int rc = k->ops->xent_zero(k, &w->acc);
    if (rc == STRATA_OK)
        rc = forward(m, r, w, rows, 1, &logits);
    if (rc == STRATA_OK)
        rc = k->ops->softmax_xent(k, rows, m->nclasses, logits, w->y,
                                  w->delta[0], scale, &w->acc);
    if (w->timed)
        w->t_forward = strata__now();
    if (rc == STRATA_OK)
        rc = backward(m, r, w, rows, grads);
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
        rc = forward(m, r, w, rows, 0, &logits);
    if (rc == STRATA_OK)
        rc = k->ops->softmax_xent(k, rows, m->nclasses, logits, w->y, NULL,
                                  1.0f, &w->acc);
    return rc == STRATA_OK ? read_back(w, loss, correct) : rc;
}
