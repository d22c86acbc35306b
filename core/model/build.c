/* Building a model from its description, a chain ([model] layers) or a
 * graph ([graph]): each line parsed into a layer of its kind, the layers put
 * in an order where each reads only earlier ones, checked (inputs, cycles,
 * shapes, the output), their variables laid out, and the backward pass's
 * gradient buffers planned. */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

/* Every layer kind; the model knows them only through this table. */
static const strata__layer_kind_t *const k_kinds[] = {
    &strata__layer_dense,     &strata__layer_conv2d, &strata__layer_maxpool2d,
    &strata__layer_flatten,   &strata__layer_dropout, &strata__layer_avgpool2d,
    &strata__layer_global_avgpool2d,
    &strata__layer_relu,      &strata__layer_leaky_relu, &strata__layer_gelu,
    &strata__layer_tanh,      &strata__layer_sigmoid, &strata__layer_softmax,
    &strata__layer_add,       &strata__layer_concat,
    &strata__layer_batchnorm,
    &strata__layer_layernorm,
    &strata__layer_embedding,
};
#define NKINDS ((int)(sizeof k_kinds / sizeof k_kinds[0]))

static const char *const k_acts[] = { "none", "relu", "tanh", "sigmoid" };

/* A description being built. Layers are parsed in line order into
 * `parsed`, their inputs as line numbers (-1: the data), then placed in
 * the model in reading order: pos[line] is a line's place there. */
typedef struct build {
    const strata__layer_line_t *lines;
    int              n;
    int              graph;
    strata__layer_t *parsed;
    int             *pos;
    char            *softmax;   /* a trailing 'softmax' word was dropped   */
    int              loss;      /* [model] loss: 0 sparse, KOPS_LOSS_*     */
    int              ids_k;     /* id features per sample; 0: none         */
} build_t;

/* ---- words ---------------------------------------------------------------- */

/* Split `s` into words in place at blanks (and commas when `commas`);
 * returns the count, or max + 1 when there are more. */
static int split_words(char *s, char **w, int max, int commas)
{
    int n = 0;
    for (char *p = s; *p;) {
        while (isspace((unsigned char)*p) || (commas && *p == ','))
            p++;
        if (!*p)
            break;
        if (n == max)
            return max + 1;
        w[n++] = p;
        while (*p && !isspace((unsigned char)*p) && !(commas && *p == ','))
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

/* One error line: where line i comes from, the layer and the reason. */
static int line_error(const build_t *b, int i, const char *why)
{
    const strata__layer_line_t *ln = &b->lines[i];
    const char *o = ln->origin, *sep = o ? ": " : "";
    char text[256];
    trim_copy(text, sizeof text, ln->text ? ln->text : "");
    if (b->graph)
        strata__log(STRATA_LOG_ERROR, "model", "%s%s[graph] %s = %s: %s",
                    o ? o : "", sep, ln->name, text, why);
    else
        strata__log(STRATA_LOG_ERROR, "model",
                    "%s%s[model] layers: layer %d '%s': %s", o ? o : "", sep,
                    i + 1, text, why);
    return STRATA_ECONFIG;
}

/* The name of input `j` (a line, or -1: the data) and where it is set. */
static void input_label(const build_t *b, int j, char *out, size_t len)
{
    if (j == STRATA__IN_IDS)
        snprintf(out, len, "'ids' (the id features)");
    else if (j < 0)
        snprintf(out, len, "'input' (the data)");
    else if (b->lines[j].origin)
        snprintf(out, len, "'%s' (%s)", b->parsed[j].name,
                 b->lines[j].origin);
    else
        snprintf(out, len, "'%s'", b->parsed[j].name);
}

/* ---- one layer ------------------------------------------------------------ */

/* Strip a trailing activation word into l->act. 'softmax' is dropped and
 * noted: it is allowed on the output layer only, where the loss applies
 * it (checked once the output is known). */
static int take_activation(strata__layer_t *l, char **w, int *n,
                           char *softmax, char *why, size_t len)
{
    if (*n < 1)
        return 0;
    const char *a = w[*n - 1];
    if (!strcmp(a, "softmax")) {
        *softmax = 1;
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

/* Parse the layer part of line i (its text up to '<-') into parsed[i]. */
static int parse_layer(build_t *b, int i, const char *spec)
{
    strata__layer_t *l = &b->parsed[i];
    char buf[256], why[768] = "";
    trim_copy(l->text, sizeof l->text, spec);
    trim_copy(buf, sizeof buf, spec);
    char *w[12];
    int n = split_words(buf, w, 11, 0);
    if (n == 0)
        return line_error(b, i, "empty; expected e.g. 'dense 10'");
    if (n > 11)
        return line_error(b, i, "too many words");
    l->kind = find_kind(w[0]);
    if (!l->kind) {
        char list[320] = "";
        for (int k = 0; k < NKINDS; k++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                     k ? ", " : "", k_kinds[k]->name);
        snprintf(why, sizeof why, "unknown kind '%s'; expected one of %s",
                 w[0], list);
        return line_error(b, i, why);
    }
    if (b->graph)
        snprintf(l->name, sizeof l->name, "%s", b->lines[i].name);
    else
        snprintf(l->name, sizeof l->name, "%s_%d", l->kind->name, i);
    int nargs = n - 1;
    int rc = l->kind->has_act ? take_activation(l, w + 1, &nargs,
                                                &b->softmax[i], why,
                                                sizeof why)
                              : 0;
    if (rc == 0)
        rc = l->kind->parse(l, w + 1, nargs, why, sizeof why);
    if (rc != 0) {
        char full[896];
        snprintf(full, sizeof full, "%s; expected '%s'", why, l->kind->usage);
        return line_error(b, i, full);
    }
    return STRATA_OK;
}

/* A [graph] key names a layer and its variables ("stem/kernel"). */
static int check_name(const build_t *b, int i)
{
    const char *s = b->lines[i].name;
    size_t n = strlen(s);
    int ok = n > 0 && n < sizeof b->parsed[i].name &&
             isalpha((unsigned char)s[0]);
    for (size_t k = 0; ok && k < n; k++)
        ok = isalnum((unsigned char)s[k]) || s[k] == '_';
    if (!ok)
        return line_error(b, i, "a layer name is a letter then letters, "
                          "digits or '_', at most 31 characters");
    if (!strcmp(s, "input"))
        return line_error(b, i, "'input' names the data, not a layer");
    if (!strcmp(s, "ids"))
        return line_error(b, i, "'ids' names the id features, not a layer");
    for (int j = 0; j < i; j++)
        if (!strcmp(b->lines[j].name, s))
            return line_error(b, i, "a second layer of this name");
    return STRATA_OK;
}

/* The inputs of line i: the names after '<-' (graph), else the line
 * before. */
static int parse_inputs(build_t *b, int i, char *names)
{
    strata__layer_t *l = &b->parsed[i];
    char why[320];
    if (!names) {
        l->nin = 1;
        l->inputs[0] = i - 1;
    } else {
        char *w[STRATA__MAX_INPUTS + 1];
        int n = split_words(names, w, STRATA__MAX_INPUTS, 1);
        if (n == 0)
            return line_error(b, i, "nothing after '<-': expected the names "
                              "of the layers it reads ('input': the data)");
        if (n > STRATA__MAX_INPUTS) {
            snprintf(why, sizeof why, "reads more than %d layers",
                     STRATA__MAX_INPUTS);
            return line_error(b, i, why);
        }
        l->nin = n;
        for (int k = 0; k < n; k++) {
            int j = INT_MIN;
            if (!strcmp(w[k], "input"))
                j = STRATA__IN_DATA;
            if (!strcmp(w[k], "ids"))
                j = STRATA__IN_IDS;
            for (int c = 0; j == INT_MIN && c < b->n; c++)
                if (!strcmp(b->lines[c].name, w[k]))
                    j = c;
            if (j == STRATA__IN_IDS && !b->ids_k)
                return line_error(b, i, "reads 'ids', the id features, but "
                                  "the data has none: [data] train_ids, "
                                  "test_ids and validation_ids name them "
                                  "(strata predict: --ids)");
            if (j == INT_MIN) {
                const char *best = NULL;
                int bestd = 3;
                for (int c = 0; c < b->n; c++) {
                    int d = strata__edit_distance(w[k], b->lines[c].name);
                    if (d < bestd) {
                        best = b->lines[c].name;
                        bestd = d;
                    }
                }
                snprintf(why, sizeof why, "reads '%s', which is no layer of "
                         "[graph] nor 'input' (the data) nor 'ids' (the id "
                         "features)%s%s%s", w[k],
                         best ? "; did you mean '" : "", best ? best : "",
                         best ? "'?" : "");
                return line_error(b, i, why);
            }
            l->inputs[k] = j;
        }
    }
    const strata__layer_kind_t *kind = l->kind;
    for (int k = 0; k < l->nin; k++)
        if (!kind->reads_ids && l->inputs[k] == STRATA__IN_IDS) {
            snprintf(why, sizeof why, "%s reads 'ids', the id features, "
                     "which only an embedding reads (then concat its output "
                     "with other layers)", kind->name);
            return line_error(b, i, why);
        }
    if (kind->reads_ids && (l->nin != 1 || l->inputs[0] != STRATA__IN_IDS)) {
        snprintf(why, sizeof why, "%s reads the id features and only them: "
                 "'%s'%s", kind->name, kind->usage, b->graph ? ""
                 : " in a [graph] section (a [model] chain reads the "
                   "dense features)");
        return line_error(b, i, why);
    }
    if (!kind->max_in && l->nin != 1) {
        snprintf(why, sizeof why, "%s reads one layer, not %d (add and "
                 "concat merge several)", kind->name, l->nin);
        return line_error(b, i, why);
    }
    if (kind->max_in && l->nin < 2) {
        snprintf(why, sizeof why, "%s reads at least 2 layers; name them: "
                 "'%s'", kind->name, kind->usage);
        return line_error(b, i, why);
    }
    return STRATA_OK;
}

/* Line i, its name checked and its text split at '<-'. */
static int parse_line(build_t *b, int i)
{
    int rc = b->graph ? check_name(b, i) : STRATA_OK;
    if (rc != STRATA_OK)
        return rc;
    char *text = strdup(b->lines[i].text ? b->lines[i].text : "");
    if (!text)
        return STRATA_ENOMEM;
    char *arrow = strstr(text, "<-");
    if (arrow && !b->graph) {
        free(text);
        return line_error(b, i, "'<-' names inputs in a [graph] section "
                          "only; a chain's layer reads the one before");
    }
    if (arrow)
        *arrow = '\0';
    rc = parse_layer(b, i, text);
    if (rc == STRATA_OK)
        rc = parse_inputs(b, i, arrow ? arrow + 2 : NULL);
    free(text);
    return rc;
}

/* ---- the graph ------------------------------------------------------------ */

/* A cycle among the lines not placed: from one of them, follow unplaced
 * inputs until a line repeats, and name the loop. */
static int cycle_error(const build_t *b)
{
    int start = 0;
    while (b->pos[start] >= 0)
        start++;
    int seen[STRATA_MAX_LAYERS], path[STRATA_MAX_LAYERS], len = 0;
    memset(seen, -1, sizeof seen);
    int u = start;
    while (seen[u] < 0) {
        seen[u] = len;
        path[len++] = u;
        const strata__layer_t *l = &b->parsed[u];
        int next = -1;
        for (int k = 0; next < 0 && k < l->nin; k++)
            if (l->inputs[k] >= 0 && b->pos[l->inputs[k]] < 0)
                next = l->inputs[k];
        u = next;
    }
    char why[1024], who[160];
    int at = seen[u];
    input_label(b, path[at], who, sizeof who);
    int w = snprintf(why, sizeof why, "a cycle: %s", who);
    for (int k = at + 1; k <= len && w > 0 && (size_t)w < sizeof why; k++) {
        input_label(b, k < len ? path[k] : path[at], who, sizeof who);
        w += snprintf(why + w, sizeof why - (size_t)w, " reads %s", who);
    }
    (void)w;
    return line_error(b, path[at], why);
}

/* Place the lines in reading order (each after its inputs; among those
 * ready, the earliest line first), into order[]. */
static int sort_lines(build_t *b, int *order)
{
    for (int i = 0; i < b->n; i++)
        b->pos[i] = -1;
    for (int placed = 0; placed < b->n; placed++) {
        int pick = -1;
        for (int i = 0; pick < 0 && i < b->n; i++) {
            if (b->pos[i] >= 0)
                continue;
            const strata__layer_t *l = &b->parsed[i];
            int ready = 1;
            for (int k = 0; ready && k < l->nin; k++)
                ready = l->inputs[k] < 0 || b->pos[l->inputs[k]] >= 0;
            if (ready)
                pick = i;
        }
        if (pick < 0)
            return cycle_error(b);
        b->pos[pick] = placed;
        order[placed] = pick;
    }
    return STRATA_OK;
}

/* One output: the layer that no other reads. */
static int one_output(const build_t *b, int *out)
{
    char read[STRATA_MAX_LAYERS] = { 0 };
    for (int i = 0; i < b->n; i++)
        for (int k = 0; k < b->parsed[i].nin; k++)
            if (b->parsed[i].inputs[k] >= 0)
                read[b->parsed[i].inputs[k]] = 1;
    int nout = 0, first = -1;
    char list[768] = "";
    for (int i = 0; i < b->n; i++) {
        if (read[i])
            continue;
        char who[160];
        input_label(b, i, who, sizeof who);
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                 nout ? ", " : "", who);
        if (first < 0)
            first = i;
        nout++;
    }
    *out = first;
    if (nout == 1)
        return STRATA_OK;
    char why[1024];
    snprintf(why, sizeof why, "the graph has %d outputs (layers no other "
             "layer reads): %s; a model has one, the layer that gives the "
             "logits", nout, list);
    return line_error(b, first, why);
}

/* The shapes a merge layer reads must agree. */
static int check_merge(const build_t *b, int line, const strata__layer_t *l)
{
    for (int k = 1; k < l->nin; k++) {
        const strata__shape_t *a = &l->ins[0], *s = &l->ins[k];
        int same = a->spatial == s->spatial && a->h == s->h && a->w == s->w;
        if (l->kind->merge == STRATA__MERGE_SAME)
            same = same && a->c == s->c;
        if (same)
            continue;
        char wa[160], ws[160], why[512];
        input_label(b, l->inputs[0], wa, sizeof wa);
        input_label(b, l->inputs[k], ws, sizeof ws);
        snprintf(why, sizeof why, "%s gives (%d, %d, %d) but %s gives "
                 "(%d, %d, %d): %s", ws, s->h, s->w, s->c, wa, a->h, a->w,
                 a->c, l->kind->merge == STRATA__MERGE_SAME
                           ? "add needs equal shapes"
                           : "concat needs the same image size");
        return line_error(b, line, why);
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
    for (int j = 0; j < l->kind->nvars; j++) {
        int vi = m->nvars++;
        strata_var_t *v = &m->vars[vi];
        const char *what = l->kind->var_names[j];
        snprintf(m->names[vi], sizeof m->names[vi], "%s/%s", l->name,
                 what ? what : j == 0 ? "kernel" : "bias");
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

/* Lay out the state tensors of layer l (each of its bias's length). */
static void place_state(strata__model_t *m, strata__layer_t *l)
{
    size_t len = m->vars[l->var0 + 1].count;
    l->state0 = m->nstates;
    for (int j = 0; j < l->kind->nstate; j++) {
        int si = m->nstates++;
        strata_var_t *v = &m->states[si];
        snprintf(m->snames[si], sizeof m->snames[si], "%s/%s", l->name,
                 l->kind->state_names[j]);
        *v = (strata_var_t){ .struct_size = sizeof *v, .index = (uint32_t)si,
                             .name = m->snames[si],
                             .dtype = STRATA_DTYPE_F32, .ndim = 1,
                             .shape = { (int64_t)len }, .count = len,
                             .offset = m->state_count };
        m->state_count += (len + 15) & ~(size_t)15;
    }
    if (l->kind->nstate && l->sync >= 0)
        m->step_sums = 1;
}

/* The layers in reading order: inputs renumbered, shapes inferred,
 * variables and state placed. */
static int place_layers(const build_t *b, const int *order,
                        strata__model_t *m)
{
    size_t off = 0;
    for (int p = 0; p < b->n; p++) {
        int line = order[p];
        strata__layer_t *l = &m->layers[p];
        *l = b->parsed[line];
        l->index = p;
        for (int k = 0; k < l->nin; k++) {
            int j = l->inputs[k];
            l->inputs[k] = j < 0 ? j : b->pos[j];
            l->ins[k] = j >= 0 ? m->layers[b->pos[j]].out
                        : j == STRATA__IN_IDS
                            ? (strata__shape_t){ 1, 1, b->ids_k, 0 }
                            : m->input;
            if (j == STRATA__IN_IDS) {
                m->ids_k = b->ids_k;
                if (m->ids_vocab <= 0 || l->vocab < m->ids_vocab)
                    m->ids_vocab = l->vocab;
            }
        }
        l->in = l->ins[0];
        int rc = l->kind->merge ? check_merge(b, line, l) : STRATA_OK;
        if (rc != STRATA_OK)
            return rc;
        char why[192] = "";
        if (l->kind->infer(l, why, sizeof why) != 0)
            return line_error(b, line, why);
        size_t width = strata__shape_size(&l->out);
        if (width > ((size_t)1 << 28))
            return line_error(b, line, "output larger than 2^28 floats per "
                              "sample");
        if (width > m->max_width)
            m->max_width = width;
        if (l->kind->nvars)
            place_vars(m, l, &off);
        if (l->kind->nstate)
            place_state(m, l);
    }
    m->count = off;
    return STRATA_OK;
}

/* The output of a dense loss: as many units as the labels have values;
 * the cross-entropies take logits (binary_crossentropy fuses a last
 * 'sigmoid' as the sparse one fuses 'softmax'), the regressions any
 * activation. */
static int check_dense_output(const build_t *b, int out_line,
                              strata__model_t *m, int width)
{
    strata__layer_t *last = &m->layers[m->nlayers - 1];
    const strata__shape_t *o = &last->out;
    const char *loss = b->loss == KOPS_LOSS_CATEGORICAL
                           ? "categorical_crossentropy"
                       : b->loss == KOPS_LOSS_BINARY ? "binary_crossentropy"
                       : b->loss == KOPS_LOSS_MSE ? "mse" : "mae";
    char why[320] = "";
    int gives = last->kind->nvars || last->kind->merge;
    if (o->spatial || !gives)
        snprintf(why, sizeof why, "the last layer must give one unit per "
                 "label value (e.g. 'dense %d'), not a %s output", width,
                 o->spatial ? "spatial" : last->kind->name);
    else if (width > 0 && o->c != width)
        snprintf(why, sizeof why, "the last layer has %d units but the "
                 "labels have %d values per sample ([model] loss = %s)",
                 o->c, width, loss);
    else if (b->softmax[out_line] && b->loss != KOPS_LOSS_CATEGORICAL)
        snprintf(why, sizeof why, "'softmax' on the last layer: %s %s",
                 loss, b->loss == KOPS_LOSS_BINARY
                           ? "applies a sigmoid per unit; end with "
                             "'sigmoid' or nothing"
                           : "reads the outputs as they are; drop it");
    else if (b->loss == KOPS_LOSS_BINARY &&
             last->act != STRATA__ACT_NONE && last->act != STRATA__ACT_SIGMOID)
        snprintf(why, sizeof why, "activation '%s' on the last layer: "
                 "binary_crossentropy takes 'sigmoid' or none (it applies "
                 "the sigmoid itself)", k_acts[last->act]);
    else if (b->loss == KOPS_LOSS_CATEGORICAL && last->act != STRATA__ACT_NONE)
        snprintf(why, sizeof why, "activation '%s' on the last layer: "
                 "expected 'softmax' or none (the loss applies softmax)",
                 k_acts[last->act]);
    if (why[0])
        return line_error(b, out_line, why);
    if (b->loss == KOPS_LOSS_BINARY)
        last->act = STRATA__ACT_NONE;   /* the loss applies it to logits */
    return STRATA_OK;
}

/* The output gives the class scores; 'softmax' words only there. */
static int check_output(const build_t *b, int out_line,
                        strata__model_t *m, int nclasses)
{
    for (int i = 0; i < b->n; i++)
        if (b->softmax[i] && i != out_line)
            return line_error(b, i, "'softmax' only on the last layer (the "
                              "loss applies it); expected relu, tanh, "
                              "sigmoid or none, or a softmax layer after "
                              "this one, ', softmax'");
    const strata__layer_t *last = &m->layers[m->nlayers - 1];
    const strata__shape_t *o = &last->out;
    char why[320] = "";
    int gives = last->kind->nvars || last->kind->merge;
    if (b->loss != STRATA__LOSS_SPARSE && last->kind != &strata__layer_softmax)
        return check_dense_output(b, out_line, m, nclasses);
    if (last->kind == &strata__layer_softmax)
        snprintf(why, sizeof why, "a softmax layer cannot be the last one: "
                 "the last layer gives the logits, and the loss applies "
                 "softmax to them (drop this layer); a softmax layer is "
                 "allowed only before the last layer");
    else if (o->spatial || !gives)
        snprintf(why, sizeof why, "the last layer must give the class scores"
                 " (e.g. 'dense %d'), not a %s output", nclasses,
                 o->spatial ? "spatial" : last->kind->name);
    else if (o->c < nclasses)
        snprintf(why, sizeof why, "the last layer has %d units but the data "
                 "has %d classes", o->c, nclasses);
    else if (last->act != STRATA__ACT_NONE)
        snprintf(why, sizeof why, "activation '%s' on the last layer: "
                 "expected 'softmax' or none (the loss applies softmax)",
                 k_acts[last->act]);
    return why[0] ? line_error(b, out_line, why) : STRATA_OK;
}

/* ---- the backward plan ----------------------------------------------------- */

/* The layer whose buffer holds layer j's output (alias layers compute
 * nothing), or -1: the data. */
static int source_of(const strata__model_t *m, int j)
{
    while (j >= 0 && m->layers[j].kind->alias)
        j = m->layers[j].inputs[0];
    return j;
}

/* Layers whose relu their only reader's backward can apply (layer.h's
 * masks_relu_in): model.h's relu_by_reader; and with that reader next,
 * both taking rows apart, its pair_next. */
static void plan_relu_masks(strata__model_t *m)
{
    int readers[STRATA_MAX_LAYERS] = { 0 };
    for (int i = 0; i < m->nlayers; i++) {
        m->relu_by_reader[i] = m->pair_next[i] = 0;
        for (int k = 0; k < m->layers[i].nin; k++) {
            int t = source_of(m, m->layers[i].inputs[k]);
            if (t >= 0)
                readers[t]++;
        }
    }
    for (int i = 0; i < m->nlayers; i++) {
        const strata__layer_t *l = &m->layers[i];
        int j = l->nin == 1 ? l->inputs[0] : -1;
        if (l->kind->masks_relu_in && j >= 0 && !m->layers[j].kind->alias &&
            m->layers[j].act == STRATA__ACT_RELU && readers[j] == 1) {
            m->relu_by_reader[j] = 1;
            m->pair_next[j] = j == i - 1 && l->kind->rows_apart &&
                              m->layers[j].kind->rows_apart;
        }
    }
}

/* Walk the backward pass once, handing out gradient buffers: an output's
 * gradient takes a free slot when its first reader (in backward order)
 * writes it and frees it after its own layer's backward; a second reader
 * writes into a scratch slot, added to the first then freed. A pair's
 * second layer keeps its gradient through the first's backward, which
 * may make its own dy from it (model.c's backward of a pair). */
static void plan_backward(strata__model_t *m)
{
    int16_t owner[STRATA_MAX_LAYERS], freed[STRATA_MAX_LAYERS + STRATA__MAX_INPUTS];
    int16_t held = -1;
    int nfree = 0;
    m->nslots = 0;
#define TAKE() (nfree ? freed[--nfree] : (int16_t)m->nslots++)
    for (int i = 0; i < m->nlayers; i++)
        owner[i] = -1;
    owner[source_of(m, m->nlayers - 1)] = TAKE();
    for (int i = m->nlayers - 1; i >= 0; i--) {
        const strata__layer_t *l = &m->layers[i];
        m->dy_slot[i] = -1;
        for (int k = 0; k < STRATA__MAX_INPUTS; k++)
            m->dx_slot[i][k] = m->dx_into[i][k] = -1;
        if (l->kind->alias)
            continue;
        m->dy_slot[i] = owner[i];
        for (int k = 0; k < l->nin; k++) {
            int t = source_of(m, l->inputs[k]);
            if (t < 0)
                continue;
            if (owner[t] < 0) {
                owner[t] = TAKE();
                m->dx_slot[i][k] = owner[t];
            } else {
                m->dx_slot[i][k] = TAKE();
                m->dx_into[i][k] = owner[t];
            }
        }
        for (int k = 0; k < l->nin; k++)
            if (m->dx_into[i][k] >= 0)
                freed[nfree++] = m->dx_slot[i][k];
        if (held >= 0)
            freed[nfree++] = held;
        held = i > 0 && m->pair_next[i - 1] ? owner[i] : -1;
        if (held < 0)
            freed[nfree++] = owner[i];
        owner[i] = -1;
    }
#undef TAKE
}

/* ---- entry points ---------------------------------------------------------- */

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


static int build(build_t *b, const strata__shape_t *input, int nclasses,
                 strata__model_t *m)
{
    memset(m, 0, sizeof *m);
    m->graph = b->graph;
    m->input = *input;
    m->input_dim = (int)strata__shape_size(input);
    m->max_width = (size_t)m->input_dim;
    int *order = NULL;
    b->parsed = calloc((size_t)b->n, sizeof *b->parsed);
    b->pos = calloc((size_t)b->n, sizeof *b->pos);
    b->softmax = calloc((size_t)b->n, 1);
    order = calloc((size_t)b->n, sizeof *order);
    int rc = b->parsed && b->pos && b->softmax && order ? STRATA_OK
                                                        : STRATA_ENOMEM;
    for (int i = 0; rc == STRATA_OK && i < b->n; i++)
        rc = parse_line(b, i);
    int out = -1;
    if (rc == STRATA_OK)
        rc = sort_lines(b, order);
    if (rc == STRATA_OK)
        rc = one_output(b, &out);
    if (rc == STRATA_OK)
        rc = place_layers(b, order, m);
    if (rc == STRATA_OK) {
        m->nlayers = b->n;
        rc = check_output(b, out, m, nclasses);
    }
    if (rc == STRATA_OK) {
        m->nclasses = m->layers[m->nlayers - 1].out.c;
        plan_relu_masks(m), plan_backward(m);
    }
    free(b->parsed);
    free(b->pos);
    free(b->softmax);
    free(order);
    if (rc == STRATA_ENOMEM)
        strata__log(STRATA_LOG_ERROR, "model", "out of memory");
    if (rc != STRATA_OK)
        memset(m, 0, sizeof *m);
    return rc;
}

int strata__model_build(const char *spec, const char *origin,
                        const strata__shape_t *input, int nclasses,
                        strata__model_t *m)
{
    return strata__model_build_for(spec, origin, input, nclasses,
                                   STRATA__LOSS_SPARSE, m);
}

int strata__model_build_for(const char *spec, const char *origin,
                            const strata__shape_t *input, int nclasses,
                            int loss, strata__model_t *m)
{
    const char *where = origin ? origin : "", *sep = origin ? ": " : "";
    char *copy = strdup(spec ? spec : "");
    strata__layer_line_t *lines = calloc(STRATA_MAX_LAYERS, sizeof *lines);
    if (!copy || !lines) {
        free(copy);
        free(lines);
        memset(m, 0, sizeof *m);
        strata__log(STRATA_LOG_ERROR, "model", "out of memory");
        return STRATA_ENOMEM;
    }
    int n = 0, rc = STRATA_OK;
    for (char *save = NULL, *p = strtok_r(copy, ",", &save); p;
         p = strtok_r(NULL, ",", &save)) {
        if (n == STRATA_MAX_LAYERS) {
            strata__log(STRATA_LOG_ERROR, "model", "%s%s[model] layers: more "
                        "than %d layers", where, sep, STRATA_MAX_LAYERS);
            rc = STRATA_ECONFIG;
            break;
        }
        lines[n++] = (strata__layer_line_t){ NULL, p, origin };
    }
    if (rc == STRATA_OK && n == 0) {
        strata__log(STRATA_LOG_ERROR, "model", "%s%s[model] layers: empty; "
                    "expected e.g. 'dense 128 relu, dense 10'", where, sep);
        rc = STRATA_ECONFIG;
    }
    if (rc == STRATA_OK) {
        build_t b = { .lines = lines, .n = n, .graph = 0, .loss = loss };
        rc = build(&b, input, nclasses, m);
    } else {
        memset(m, 0, sizeof *m);
    }
    free(copy);
    free(lines);
    return rc;
}

int strata__model_build_graph(const strata__layer_line_t *lines, int n,
                              const strata__shape_t *input, int nclasses,
                              strata__model_t *m)
{
    return strata__model_build_graph_for(lines, n, input, nclasses,
                                         STRATA__LOSS_SPARSE, m);
}

int strata__model_build_graph_for(const strata__layer_line_t *lines, int n,
                                  const strata__shape_t *input, int nclasses,
                                  int loss, strata__model_t *m)
{
    return strata__model_build_graph_ids(lines, n, input, 0, nclasses, loss,
                                         m);
}

int strata__model_build_graph_ids(const strata__layer_line_t *lines, int n,
                                  const strata__shape_t *input, int ids_k,
                                  int nclasses, int loss, strata__model_t *m)
{
    if (n < 1 || n > STRATA_MAX_LAYERS) {
        memset(m, 0, sizeof *m);
        strata__log(STRATA_LOG_ERROR, "model", "%s%s[graph]: %d layers; "
                    "expected 1 to %d", n > 0 && lines[0].origin
                    ? lines[0].origin : "", n > 0 && lines[0].origin
                    ? ": " : "", n, STRATA_MAX_LAYERS);
        return STRATA_ECONFIG;
    }
    build_t b = { .lines = lines, .n = n, .graph = 1, .loss = loss,
                  .ids_k = ids_k };
    return build(&b, input, nclasses, m);
}
