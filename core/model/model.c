/* The model once built (build.c): initialisation, the summary, and the
 * forward/backward pass of one replica, connecting the layer kinds of
 * layers/ (which know how to compute) with buffers, activations and the
 * loss. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

/* The bound of a layer's seeded uniform kernel: its kind's, else Glorot's. */
static double uniform_limit(const strata__layer_t *l, double fan_in,
                            double fan_out)
{
    return l->kind->init_uniform > 0.0 ? l->kind->init_uniform
                                       : sqrt(6.0 / (fan_in + fan_out));
}

/* Every variable as strata__model_init_range fills it: the whole model's
 * initial values are its ranges', bit for bit. */
void strata__model_init(const strata__model_t *m, uint64_t seed, float *flat)
{
    memset(flat, 0, m->count * sizeof *flat);
    for (int v = 0; v < m->nvars; v++)
        (void)strata__model_init_range(m, seed, v, 0, m->vars[v].count,
                                       flat + m->vars[v].offset);
}

int strata__model_init_range(const strata__model_t *m, uint64_t seed, int vi,
                             size_t lo, size_t n, float *dst)
{
    if (vi < 0 || vi >= m->nvars || lo > m->vars[vi].count ||
        n > m->vars[vi].count - lo)
        return STRATA_EINVAL;
    int i = 0;
    while (i < m->nlayers && !(vi >= m->layers[i].var0 &&
                               vi < m->layers[i].var0 + m->layers[i].kind->nvars))
        i++;
    if (i == m->nlayers)
        return STRATA_EINTERNAL;
    const strata__layer_t *l = &m->layers[i];
    int j = vi - l->var0;
    memset(dst, 0, n * sizeof *dst);
    if (j > 1 || (j == 1 && !l->kind->init))
        return STRATA_OK; /* a bias, or past what an init fills: zeros */
    const strata_var_t *k = &m->vars[l->var0];
    const strata_var_t *b = l->kind->nvars > 1 ? &m->vars[l->var0 + 1] : NULL;
    if (l->kind->init) {
        /* a layer of its own init (batchnorm, ...): small, filled whole */
        float *kt = calloc(k->count + (b ? b->count : 0) + 1, sizeof *kt);
        if (!kt)
            return STRATA_ENOMEM;
        l->kind->init(l, kt, k->count, b ? kt + k->count : NULL,
                      b ? b->count : 0);
        memcpy(dst, kt + (j ? k->count : 0) + lo, n * sizeof *dst);
        free(kt);
        return STRATA_OK;
    }
    int64_t dims[4];
    size_t bias;
    double fan_in, fan_out;
    l->kind->kernel_shape(l, dims, &bias, &fan_in, &fan_out);
    strata__rng_t rng;
    strata__rng_seed(&rng, seed, 1000u + (uint64_t)i);
    double limit = uniform_limit(l, fan_in, fan_out);
    for (size_t q = 0; q < lo; q++) /* the stream to the range's start */
        (void)strata__rng_next(&rng);
    for (size_t q = 0; q < n; q++)
        dst[q] = (float)((2.0 * strata__rng_uniform(&rng) - 1.0) * limit);
    return STRATA_OK;
}

/* The name of what input index j names: a layer, the data or the ids. */
static const char *input_name(const strata__model_t *m, int j)
{
    return j >= 0 ? m->layers[j].name
           : j == STRATA__IN_IDS ? "ids" : "input";
}

/* The names of the layers l reads ("input": the data), comma-separated. */
static void inputs_text(const strata__model_t *m, const strata__layer_t *l,
                        char *out, size_t len)
{
    out[0] = '\0';
    for (int k = 0; k < l->nin; k++) {
        int j = l->inputs[k];
        size_t at = strlen(out);
        snprintf(out + at, len - at, "%s%s", k ? ", " : "",
                 input_name(m, j));
    }
}

void strata__model_init_state(const strata__model_t *m, float *state)
{
    memset(state, 0, m->state_count * sizeof *state);
    for (int i = 0; i < m->nlayers; i++) {
        const strata__layer_t *l = &m->layers[i];
        for (int j = 0; j < l->kind->nstate; j++) {
            const strata_var_t *v = &m->states[l->state0 + j];
            for (size_t e = 0; e < v->count; e++)
                state[v->offset + e] = l->kind->state_fill[j];
        }
    }
}

void strata__model_summary(const strata__model_t *m, FILE *f)
{
    /* The name column fits the longest name ("global_avgpool2d_12"), the
     * spec column the longest spec, a graph's inputs column the longest
     * list: the table stays aligned. */
    int nw = 14, sw = 36, iw = 6;
    char ins[STRATA__MAX_INPUTS * 34];
    for (int i = 0; i < m->nlayers; i++) {
        int a = (int)strlen(m->layers[i].name);
        int b = (int)strlen(m->layers[i].text);
        inputs_text(m, &m->layers[i], ins, sizeof ins);
        int c = (int)strlen(ins);
        nw = a > nw ? a : nw;
        sw = b > sw ? b : sw;
        iw = c > iw ? c : iw;
    }
    if (m->graph)
        fprintf(f, " %-*s %-*s %-*s %-18s %10s\n", nw, "layer", sw, "spec",
                iw, "inputs", "output shape", "params");
    else
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
        for (int v = 0; v < l->kind->nvars; v++)
            params += m->vars[l->var0 + v].count;
        if (m->graph) {
            inputs_text(m, l, ins, sizeof ins);
            fprintf(f, " %-*s %-*s %-*s %-18s %10zu\n", nw, l->name, sw,
                    l->text, iw, ins, shape, params);
        } else {
            fprintf(f, " %-*s %-*s %-18s %10zu\n", nw, l->name, sw, l->text,
                    shape, params);
        }
    }
    fprintf(f, " total: %zu parameters\n", m->params);
}

uint64_t strata__model_step_seed(uint64_t seed, int64_t step)
{
    strata__rng_t rng;
    strata__rng_seed(&rng, seed, 0x64726f70ull ^ ((uint64_t)step << 20));
    return strata__rng_next(&rng);
}

int strata__model_check_ids(const strata__model_t *m,
                            const strata__dataset_t *d, const char *what,
                            const char *key)
{
    if (!m->ids_k || !d->n)
        return STRATA_OK;
    if (d->ids_k != (uint32_t)m->ids_k) {
        if (d->ids)
            strata__log(STRATA_LOG_ERROR, "data", "%s: %u ids per sample in "
                        "%s, but the model reads %d (those of [data] "
                        "train_ids)", d->ids_file, d->ids_k, what, m->ids_k);
        else
            strata__log(STRATA_LOG_ERROR, "data", "%s has no id features, "
                        "which the model reads ('ids'): name them in [data] "
                        "%s", what, key);
        return STRATA_EDATA;
    }
    return strata__ids_check(d, m->ids_vocab);
}

/* ---- per-replica work -------------------------------------------------- */

size_t strata__model_label_bytes(const strata__model_t *m)
{
    return m->loss.kind == STRATA__LOSS_SPARSE
               ? sizeof(int32_t) : (size_t)m->nclasses * sizeof(float);
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
    w->y = strata__dev_alloc(device, r * strata__model_label_bytes(m));
    int ok = w->x && w->y;
    w->ids_k = m->ids_k;
    size_t id_bytes = r * (size_t)m->ids_k * sizeof(int32_t);
    if (ok && id_bytes)
        ok = (w->ids = strata__dev_alloc(device, id_bytes)) != NULL;
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
    if (ok && m->state_count) {
        ok = (w->state = strata__dev_alloc(device, m->state_count *
                                                      sizeof(float))) != NULL;
        float *init = ok ? malloc(m->state_count * sizeof *init) : NULL;
        ok = init != NULL;
        if (ok) {
            strata__model_init_state(m, init);
            ok = strata__work_state_set(m, w, init) == STRATA_OK;
        }
        free(init);
    }
    for (int i = 0; ok && i < m->nslots; i++)
        ok = (w->delta[i] = strata__dev_alloc(device,
                  r * m->max_width * sizeof(float))) != NULL;
    if (ok && STRATA_DEVICE_TYPE(device) != STRATA_DEV_CPU) {
        /* A batch arrives as raw pixels and labels through page-locked
         * staging; the device scales the pixels (a quarter of the bytes of
         * floats cross the bus). */
        ok = (w->stage_x = o->host_alloc(w->kd,
                                         r * w->dim * sizeof(float))) &&
             (w->stage_y = o->host_alloc(w->kd, r * strata__model_label_bytes(m))) &&
             (w->pixels = strata__dev_alloc(device, r * w->dim)) &&
             (!id_bytes || (w->stage_ids = o->host_alloc(w->kd, id_bytes)));
    }
    if (ok)
        ok = o->xacc_init(w->kd, &w->acc) == STRATA_OK;
    if (ok)
        w->acc.hist_on = m->loss.metric == KOPS_METRIC_AUC;
    if (!ok) {
        strata__work_free(w);
        return STRATA_ENOMEM;
    }
    return STRATA_OK;
}

size_t strata__work_row_bytes(const strata__model_t *m)
{
    size_t bytes = ((size_t)m->input_dim + (size_t)m->nslots * m->max_width) *
                   sizeof(float) + (size_t)m->ids_k * sizeof(int32_t);
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
    strata__work_rows_free(w);
    if (w->kd) {
        const strata__kops_t *o = w->kd->ops;
        if (w->staged)
            (void)o->sync(w->kd); /* copies from the staging in flight */
        o->xacc_fini(w->kd, &w->acc);
        o->host_free(w->kd, w->stage_x);
        o->host_free(w->kd, w->stage_y);
        o->host_free(w->kd, w->stage_ids);
    }
    strata__dev_free(dev, w->pixels);
    strata__dev_free(dev, w->state);
    strata__dev_free(dev, w->x);
    strata__dev_free(dev, w->y);
    strata__dev_free(dev, w->ids);
    for (int i = 0; i < STRATA_MAX_LAYERS; i++) {
        strata__dev_free(dev, w->act[i]);
        strata__dev_free(dev, w->aux[i]);
    }
    for (int i = 0; i < STRATA_MAX_LAYERS + STRATA__MAX_INPUTS; i++)
        strata__dev_free(dev, w->delta[i]);
    memset(w, 0, sizeof *w);
}

int strata__work_state_get(const strata__model_t *m, strata__work_t *w,
                           float *host)
{
    if (!m->state_count)
        return STRATA_OK;
    const strata__kops_t *o = w->kd->ops;
    int rc = o->copy(w->kd, STRATA__D2H, host, w->state,
                     m->state_count * sizeof *host);
    return rc == STRATA_OK ? o->sync(w->kd) : rc;
}

int strata__work_state_set(const strata__model_t *m, strata__work_t *w,
                           const float *host)
{
    if (!m->state_count)
        return STRATA_OK;
    const strata__kops_t *o = w->kd->ops;
    int rc = o->copy(w->kd, STRATA__H2D, w->state, host,
                     m->state_count * sizeof *host);
    return rc == STRATA_OK ? o->sync(w->kd) : rc;
}

int strata__model_load_batch(strata__work_t *w, const strata__dataset_t *d,
                             const uint32_t *perm, size_t first, size_t rows)
{
    if (rows > (size_t)(w->rows > 0 ? w->rows : 1) || d->dim != w->dim ||
        (w->ids_k && d->ids_k != (uint32_t)w->ids_k)) {
        strata__log(STRATA_LOG_ERROR, "model", "a batch of %zu rows of %zu "
                    "features and %u ids does not fit work of %d rows of %zu "
                    "and %d", rows, d->dim, d->ids_k, w->rows, w->dim,
                    w->ids_k);
        return STRATA_EINVAL;
    }
    if (STRATA_DEVICE_TYPE(w->device) == STRATA_DEV_CPU) {
        strata__batch_fill(d, perm, first, rows, w->x, w->y);
        if (w->ids_k)
            strata__ids_fill(d, perm, first, rows, w->ids);
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
        strata__label_copy(d, s, w->stage_y, i);
    }
    strata__augment_batch(d, perm, first, rows, w->stage_x,
                          d->images_f32 ? sizeof(float) : 1);
    rc = o->copy(k, STRATA__H2D, d->images_f32 ? (void *)w->x : w->pixels,
                 w->stage_x, rows * row);
    if (rc == STRATA_OK)
        rc = o->copy(k, STRATA__H2D, w->y, w->stage_y,
                     rows * strata__label_bytes(d));
    if (rc == STRATA_OK && w->ids_k) {
        strata__ids_fill(d, perm, first, rows, w->stage_ids);
        rc = o->copy(k, STRATA__H2D, w->ids, w->stage_ids,
                     rows * (size_t)w->ids_k * sizeof(int32_t));
    }
    w->staged = 1;
    if (rc == STRATA_OK && !d->images_f32)
        rc = o->u8_to_f32(k, rows * d->dim, w->pixels, 1.0f / 255.0f, w->x);
    return rc;
}

/* ---- forward and backward ----------------------------------------------- */

/* The output of layer i: its own buffer, or its input's for an alias
 * layer; i = -1: the data. */
static float *out_of(const strata__model_t *m, strata__work_t *w, int i)
{
    while (i >= 0 && m->layers[i].kind->alias)
        i = m->layers[i].inputs[0];
    return i >= 0 ? w->act[i] : i == STRATA__IN_DATA ? w->x : NULL;
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

/* The layer applies its relu itself (layer.h's fuses_relu). */
static int fused_relu(const strata__layer_t *l)
{
    return l->kind->fuses_relu && l->act == STRATA__ACT_RELU;
}

/* The pass of layer i with replica r's variables; gradients into `grads`
 * when not NULL. */
static strata__pass_t pass_of(const strata__model_t *m, int r,
                              strata__work_t *w, int i, int rows,
                              int training, float *grads)
{
    const strata__layer_t *l = &m->layers[i];
    strata__pass_t p = {
        .k = w->kd, .rows = rows, .y = w->act[i],
        .aux = w->aux[i], .aux_bytes = w->aux_bytes[i],
        .training = training,
        .seed = w->noise_seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(i + 1)),
        .first = (uint64_t)w->row0 * strata__shape_size(&l->in),
        .sum_replicas = w->sum_replicas, .sum_arg = w->sum_arg,
    };
    for (int j = 0; j < l->kind->nstate; j++)
        p.state[j] = w->state + m->states[l->state0 + j].offset;
    for (int k = 0; k < l->nin; k++)
        p.xs[k] = out_of(m, w, l->inputs[k]);
    p.x = p.xs[0];
    if (l->kind->reads_ids)
        p.ids = w->ids;
    if (l->kind->nvars) {
        p.W = (const float *)m->vars[l->var0].value[r];
        if (grads)
            p.dW = grads + m->vars[l->var0].offset;
    }
    if (l->kind->nvars > 1) {
        p.b = (const float *)m->vars[l->var0 + 1].value[r];
        if (grads)
            p.db = grads + m->vars[l->var0 + 1].offset;
    }
    if (grads)
        strata__work_rows_pass(w, i, &p);
    return p;
}

/* Bytes of a group's output of layer i (its reader's input) that stay in
 * a core's L2 while the reader takes them. */
#define PAIR_GROUP_BYTES ((size_t)256 << 10)

/* Rows per group where layer i and its only reader i + 1 (a pooling that
 * applies i's relu: model.h's pair_next) go through the batch a group at a
 * time on a CPU, i's output for the group in the first rows of its own
 * buffer, read back from L2 by the reader, never written out whole: i's
 * backward does not read it (its relu is the reader's). Both kinds take
 * rows apart, so the bits are the batch's. 0: not grouped. */
static int pair_group(const strata__model_t *m, const strata__work_t *w,
                      int i, int rows)
{
    if (i < 0 || !m->pair_next[i] ||
        STRATA_DEVICE_TYPE(w->kd->device) != STRATA_DEV_CPU)
        return 0;
    size_t row = strata__shape_size(&m->layers[i].out) * sizeof(float);
    size_t group = row ? PAIR_GROUP_BYTES / row : 0;
    group = group < 1 ? 1 : group;
    return group < (size_t)rows ? (int)group : 0;
}

/* Layer i, first of a pair, whose backward takes the second's too. */
static int takes_pair(const strata__model_t *m, int i)
{
    const strata__layer_t *l = &m->layers[i];
    return l->kind->takes_pair && l->kind->takes_pair(l, l + 1);
}

/* Per-row bytes of layer i's scratch (its aux_bytes are rows times it). */
static size_t aux_row(const strata__layer_t *l)
{
    return l->kind->aux_bytes ? l->kind->aux_bytes(l, 1) : 0;
}

/* Layer i and its reader i + 1, `group` rows at a time (pair_group). */
static int forward_pair(const strata__model_t *m, int r, strata__work_t *w,
                        int i, int rows, int group, int training)
{
    const strata__layer_t *l = &m->layers[i], *q = &m->layers[i + 1];
    size_t in = strata__shape_size(&l->in), mid = strata__shape_size(&l->out);
    size_t out = strata__shape_size(&q->out);
    int rc = STRATA_OK;
    for (int r0 = 0; rc == STRATA_OK && r0 < rows; r0 += group) {
        int n = rows - r0 < group ? rows - r0 : group;
        strata__pass_t p = pass_of(m, r, w, i, n, training, NULL);
        p.x = p.xs[0] = p.x + (size_t)r0 * in;
        rc = l->kind->forward(l, &p);             /* into act[i]'s first rows */
        if (rc == STRATA_OK && !fused_relu(l))
            rc = act_forward(w->kd, l->act, (size_t)n * mid, p.y);
        if (rc != STRATA_OK)
            break;
        strata__pass_t pq = pass_of(m, r, w, i + 1, n, training, NULL);
        pq.y += (size_t)r0 * out;
        pq.aux = (char *)pq.aux + (size_t)r0 * aux_row(q);
        rc = q->kind->forward(q, &pq);
        if (rc == STRATA_OK && !fused_relu(q))
            rc = act_forward(w->kd, q->act, (size_t)n * out, pq.y);
    }
    return rc;
}

/* The reader's backward in forward_pair's groups: its scratch (a pool's
 * argmax) holds each group's own. */
static int backward_grouped(const strata__layer_t *l, strata__pass_t *p,
                            int rows, int group)
{
    size_t in = strata__shape_size(&l->in), out = strata__shape_size(&l->out);
    int rc = STRATA_OK;
    for (int r0 = 0; rc == STRATA_OK && r0 < rows; r0 += group) {
        strata__pass_t pg = *p;
        pg.rows = rows - r0 < group ? rows - r0 : group;
        pg.y += (size_t)r0 * out;
        pg.dy += (size_t)r0 * out;
        pg.dx = pg.dxs[0] = p->dx + (size_t)r0 * in;
        pg.aux = (char *)p->aux + (size_t)r0 * aux_row(l);
        rc = l->kind->backward(l, &pg);
    }
    return rc;
}

static int forward(const strata__model_t *m, int r, strata__work_t *w,
                   int rows, int training, float **logits)
{
    int rc = STRATA_OK;
    for (int i = 0; rc == STRATA_OK && i < m->nlayers; i++) {
        const strata__layer_t *l = &m->layers[i];
        if (l->kind->alias)
            continue;
        int group = pair_group(m, w, i, rows);
        if (group) {                           /* layers i and i + 1 */
            rc = forward_pair(m, r, w, i, rows, group, training);
            i++;
            continue;
        }
        strata__pass_t p = pass_of(m, r, w, i, rows, training, NULL);
        rc = l->kind->forward(l, &p);
        if (rc == STRATA_OK && !fused_relu(l))
            rc = act_forward(w->kd, l->act,
                             (size_t)rows * strata__shape_size(&l->out),
                             w->act[i]);
    }
    *logits = out_of(m, w, m->nlayers - 1);
    return rc;
}

/* From d loss / d logits in the last layer's gradient slot down to the
 * first layers' gradients, in the slots the model's plan gives; an output
 * read by several layers sums their gradients (dx_into). */
static int backward(const strata__model_t *m, int r, strata__work_t *w,
                    int rows, float *grads)
{
    const strata__kops_t *o = w->kd->ops;
    int rc = STRATA_OK;
    for (int i = m->nlayers - 1; rc == STRATA_OK && i >= 0; i--) {
        const strata__layer_t *l = &m->layers[i];
        if (l->kind->alias)
            continue;
        float *dy = w->delta[m->dy_slot[i]];
        size_t n = (size_t)rows * strata__shape_size(&l->out);
        int relu_done = m->relu_by_reader[i];
        if (!fused_relu(l) && !relu_done)
            rc = act_backward(w->kd, l->act, n, w->act[i], dy);
        strata__pass_t p = pass_of(m, r, w, i, rows, 1, grads);
        p.dy = dy;
        p.dy_relu_done = relu_done;
        int own = pair_group(m, w, i, rows);   /* i first of a pair */
        p.fwd_grouped = own > 0;
        if (own && takes_pair(m, i)) {            /* its dy from the reader's */
            p.pair = &m->layers[i + 1];
            p.pair_rows = own;
            p.pair_dy = w->delta[m->dy_slot[i + 1]];
            p.pair_y = w->act[i + 1];
            p.pair_aux = w->aux[i + 1];
        }
        int j = l->nin == 1 ? l->inputs[0] : -1;
        p.dx_relu = j >= 0 && m->relu_by_reader[j];
        int group = j == i - 1 ? pair_group(m, w, j, rows) : 0;
        if (group && takes_pair(m, j))
            continue;          /* layer j's backward does this one's too */
        int any = 0;
        for (int k = 0; k < l->nin; k++) {
            int s = m->dx_slot[i][k];
            p.dxs[k] = s >= 0 ? w->delta[s] : NULL;
            any |= s >= 0;
        }
        p.dx = p.dxs[0];
        if (rc == STRATA_OK && group && p.dx)
            rc = backward_grouped(l, &p, rows, group);
        else if (rc == STRATA_OK && (any || l->kind->nvars))
            rc = l->kind->backward(l, &p);
        if (rc == STRATA_OK && p.row_vals)
            strata__work_rows_done(w, i);
        for (int k = 0; rc == STRATA_OK && k < l->nin; k++)
            if (m->dx_into[i][k] >= 0)
                rc = o->axpy(w->kd,
                             (size_t)rows * strata__shape_size(&l->ins[k]),
                             1.0f, p.dxs[k], w->delta[m->dx_into[i][k]]);
        if (rc == STRATA_OK && w->on_ready && l->kind->nvars) {
            rc = o->sync(w->kd);
            if (rc == STRATA_OK)
                rc = w->on_ready(w->ready_arg, m->vars[l->var0].offset);
        }
    }
    return rc;
}

/* The step's sums reach the host: on a GPU this waits for the stream. */
static int read_back(strata__work_t *w, double *loss, double *metric)
{
    int rc = w->kd->ops->xent_read(w->kd, &w->acc);
    if (rc == STRATA_OK) {
        w->staged = 0; /* the wait covered the batch's copies */
        *loss = w->acc.loss;
        *metric += w->acc.metric;
    }
    return rc;
}

int strata__model_step(const strata__model_t *m, int r, strata__work_t *w,
                       int rows, float *grads, float scale, double *loss,
                       double *metric)
{
    strata__kdev_t *k = w->kd;
    float *logits;
    *loss = 0.0;
    int rc = k->ops->xent_zero(k, &w->acc);
    if (rc == STRATA_OK)
        rc = forward(m, r, w, rows, 1, &logits);
    if (rc == STRATA_OK)
        rc = k->ops->loss(k, &m->loss, rows, m->nclasses, logits, w->y,
                          w->delta[0], scale, &w->acc);
    if (w->timed)
        w->t_forward = strata__now();
    strata__work_rows_reset(w);
    if (rc == STRATA_OK)
        rc = backward(m, r, w, rows, grads);
    return rc == STRATA_OK ? read_back(w, loss, metric) : rc;
}

int strata__model_evaluate(const strata__model_t *m, int r, strata__work_t *w,
                           int rows, double *loss, double *metric)
{
    strata__kdev_t *k = w->kd;
    float *logits;
    *loss = 0.0;
    int rc = k->ops->xent_zero(k, &w->acc);
    if (rc == STRATA_OK)
        rc = forward(m, r, w, rows, 0, &logits);
    if (rc == STRATA_OK)
        rc = k->ops->loss(k, &m->loss, rows, m->nclasses, logits, w->y, NULL,
                          1.0f, &w->acc);
    return rc == STRATA_OK ? read_back(w, loss, metric) : rc;
}

int strata__model_predict(const strata__model_t *m, int r, strata__work_t *w,
                          int rows, int probs, float *out)
{
    strata__kdev_t *k = w->kd;
    float *logits;
    size_t c = (size_t)m->nclasses;
    int rc = forward(m, r, w, rows, 0, &logits);
    if (rc == STRATA_OK)
        rc = k->ops->copy(k, STRATA__D2H, out, logits,
                          (size_t)rows * c * sizeof *out);
    if (rc == STRATA_OK)
        rc = k->ops->sync(k);
    if (rc == STRATA_OK)
        w->staged = 0; /* the wait covered the batch's copies */
    if (probs && m->loss.kind == KOPS_LOSS_BINARY)  /* a sigmoid per unit */
        for (size_t i = 0; rc == STRATA_OK && i < (size_t)rows * c; i++)
            out[i] = (float)(1.0 / (1.0 + exp(-(double)out[i])));
    int softmax = m->loss.kind == STRATA__LOSS_SPARSE ||
                  m->loss.kind == KOPS_LOSS_CATEGORICAL;
    for (int i = 0; rc == STRATA_OK && probs && softmax && i < rows; i++) {
        float *z = out + (size_t)i * c;
        double max = z[0], sum = 0.0;
        for (size_t j = 1; j < c; j++)
            max = z[j] > max ? z[j] : max;
        for (size_t j = 0; j < c; j++)
            sum += exp((double)z[j] - max);
        for (size_t j = 0; j < c; j++)
            z[j] = (float)(exp((double)z[j] - max) / sum);
    }
    return rc;
}
