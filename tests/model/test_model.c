/* The model layer table: specs parse into the shapes and parameter counts
 * Keras gives, every bad spec is one error naming where, the layer and what
 * was expected, and the backward pass of a model that chains every layer
 * kind and activation matches central finite differences of its loss. The
 * activation layers and global_avgpool2d: shapes, the summary, refusals,
 * gradients, and the same bits as the activation words and avgpool2d they
 * share kernels with. */
#include "kernels_cpu.h"
#include "net.h"

static const strata__shape_t k_mnist = { 28, 28, 1, 1 };

typedef struct chain {
    const char            *spec;
    const strata__shape_t *in;
    int                    nclasses;
} chain_t;

static int build_chain(const void *arg, strata__model_t *m)
{
    const chain_t *c = arg;
    return strata__model_build(c->spec, "job.ini:7", c->in, c->nclasses, m);
}

/* Build `spec`; the error line (stderr) goes to err when not NULL. */
static int build(const char *spec, const strata__shape_t *in, int nclasses,
                 strata__model_t *m, char *err, size_t cap)
{
    chain_t c = { spec, in, nclasses };
    return net_capture(build_chain, &c, m, err, cap);
}

static void shape_is(const strata__layer_t *l, int h, int w, int c)
{
    CHECKF(l->out.h == h && l->out.w == w && l->out.c == c,
           "%s: (%d, %d, %d), expected (%d, %d, %d)", l->text, l->out.h,
           l->out.w, l->out.c, h, w, c);
}

static void test_shapes(void)
{
    static strata__model_t m;
    CHECK(build("dense 128 relu, dense 10", &k_mnist, 10, &m, NULL, 0) == 0);
    CHECKF(m.params == 101770, "MLP: %zu parameters", m.params);
    CHECK(m.count >= m.params && m.vars[0].shape[0] == 784);

    CHECK(build("conv2d 32 3 relu, maxpool2d 2, conv2d 64 3 relu, maxpool2d 2,"
                " flatten, dropout 0.5, dense 10 softmax", &k_mnist, 10, &m,
                NULL, 0) == 0);
    CHECKF(m.params == 34826, "Keras CNN: %zu parameters", m.params);
    shape_is(&m.layers[0], 26, 26, 32);
    shape_is(&m.layers[1], 13, 13, 32);
    shape_is(&m.layers[2], 11, 11, 64);
    shape_is(&m.layers[3], 5, 5, 64);
    shape_is(&m.layers[4], 1, 1, 1600);
    CHECK(!m.layers[4].out.spatial && m.layers[3].out.spatial);
    CHECK(m.nvars == 6 && !strcmp(m.vars[2].name, "conv2d_2/kernel"));
    CHECK(m.vars[2].ndim == 4 && m.vars[2].shape[0] == 3 &&
          m.vars[2].shape[1] == 3 && m.vars[2].shape[2] == 32 &&
          m.vars[2].shape[3] == 64);
    CHECK(!strcmp(m.vars[4].name, "dense_6/kernel") &&
          m.vars[4].shape[0] == 1600);

    CHECK(build("conv2d 32 3 relu, conv2d 64 3 relu, flatten, dense 64 relu, "
                "dense 10 softmax", &k_mnist, 10, &m, NULL, 0) == 0);
    CHECKF(m.params == 2378826, "seeds' CNN: %zu parameters", m.params);

    /* Keras 'same': ceil(n / stride); 'valid' with strides; non-square. */
    CHECK(build("conv2d 4 3 stride=2 padding=same, conv2d 2 5x3 tanh, "
                "maxpool2d 3 stride=2, flatten, dense 10", &k_mnist, 10, &m,
                NULL, 0) == 0);
    shape_is(&m.layers[0], 14, 14, 4);
    CHECK(m.layers[0].pad_top == 0 && m.layers[0].pad_left == 0);
    shape_is(&m.layers[1], 10, 12, 2);
    CHECK(m.layers[1].act == STRATA__ACT_TANH);
    shape_is(&m.layers[2], 4, 5, 2);
    CHECK(build("conv2d 4 5 padding=same sigmoid, flatten, dense 10",
                &k_mnist, 10, &m, NULL, 0) == 0);
    shape_is(&m.layers[0], 28, 28, 4);
    CHECK(m.layers[0].pad_top == 2 && m.layers[0].act == STRATA__ACT_SIGMOID);
    CHECK(build("conv2d 4 4 padding=same, flatten, dense 10", &k_mnist, 10,
                &m, NULL, 0) == 0);
    CHECK(m.layers[0].pad_top == 1); /* total 3: 1 before, 2 after */
}

static void error_is(const char *spec, const strata__shape_t *in,
                     const char *want)
{
    static strata__model_t m;
    char err[1024];
    int rc = build(spec, in, 10, &m, err, sizeof err);
    CHECKF(rc == STRATA_ECONFIG, "'%s' gave %d", spec, rc);
    CHECKF(strstr(err, want) != NULL, "'%s': got '%s', wanted '%s'", spec,
           err, want);
    CHECKF(strstr(err, "job.ini:7: [model] layers") != NULL &&
               strchr(err, '\n') == err + strlen(err) - 1,
           "'%s': one line naming the file: '%s'", spec, err);
}

static void test_errors(void)
{
    const strata__shape_t flat = { 1, 1, 784, 0 };
    error_is("conv2d 32 x relu, flatten, dense 10", &k_mnist,
             "layer 1 'conv2d 32 x relu': kernel 'x': expected K or KHxKW");
    error_is("conv2d 32 3, flatten, dense 10", &flat,
             "layer 1 'conv2d 32 3': needs an image input (h, w, c), got 784 "
             "flat features");
    error_is("conv2d 8 3, dense 10", &k_mnist,
             "layer 2 'dense 10': needs a flat input, got (26, 26, 8): put "
             "'flatten' before it");
    error_is("conv3d 8 3, flatten, dense 10", &k_mnist,
             "unknown kind 'conv3d'; expected one of dense, conv2d, maxpool2d,"
             " flatten, dropout");
    error_is("flatten, dropout 1.5, dense 10", &k_mnist,
             "layer 2 'dropout 1.5': expected one RATE in [0, 1)");
    error_is("dense 64 softmax, dense 10", &k_mnist,
             "'softmax' only on the last layer");
    error_is("dense 64, dense 10 relu", &k_mnist,
             "layer 2 'dense 10 relu': activation 'relu' on the last layer");
    error_is("conv2d 8 3, maxpool2d 2", &k_mnist,
             "the last layer must give the class scores");
    error_is("dense 64, dense 5", &k_mnist,
             "the last layer has 5 units but the data has 10 classes");
    error_is("maxpool2d 29, flatten, dense 10", &k_mnist,
             "pool 29x29 does not fit the input (28, 28, 1)");
    error_is("conv2d 8 3 stride=0, flatten, dense 10", &k_mnist,
             "stride '0': expected S or SHxSW");
    error_is("conv2d 8 3 padding=full, flatten, dense 10", &k_mnist,
             "padding 'full': expected valid or same");
    error_is("conv2d 8 3 swish, flatten, dense 10", &k_mnist,
             "'swish': expected stride=S, padding=valid|same or an activation"
             "; expected 'conv2d FILTERS KERNEL");
    error_is("dense 0, dense 10", &k_mnist, "units '0': expected an integer");
    error_is("flatten 3, dense 10", &k_mnist, "'flatten 3': takes no arguments");
    error_is("dense 64, , dense 10", &k_mnist, "layer 2 '': empty");
}

/* ---- the gradient of the whole chain ------------------------------------ */

static int net_make(net_t *n, const char *spec, const strata__shape_t *in)
{
    if (build(spec, in, NCLS, &n->m, NULL, 0) != 0)
        return -1;
    return net_ready(n);
}

/* Every variable: a spread of its elements against central differences
 * of the summed loss (dropout draws the same mask each call). */
static void test_gradients(void)
{
    const strata__shape_t in = { 9, 9, 2, 1 };
    static net_t n;
    CHECK(net_make(&n, "conv2d 4 3 stride=2 padding=same tanh, "
                       "maxpool2d 2 stride=1, conv2d 3 2 sigmoid, flatten, "
                       "dropout 0.3, dense 6 tanh, dense 5 softmax", &in) == 0);
    float *grads = calloc(n.m.count, sizeof(float));
    double base = net_check_gradients(&n, "chain", 100, grads);

    /* Evaluation passes dropout through: deterministic, and not the
     * training loss. */
    double e1 = 0, e2 = 0;
    double c = 0.0;
    CHECK(strata__model_evaluate(&n.m, 0, &n.w, ROWS, &e1, &c) == 0);
    CHECK(strata__model_evaluate(&n.m, 0, &n.w, ROWS, &e2, &c) == 0);
    CHECK(e1 == e2 && e1 != base);

    /* Two replicas that split the batch draw one device's dropout mask:
     * their gradients add up to the whole batch's. */
    static net_t half;
    CHECK(net_make(&half, "conv2d 4 3 stride=2 padding=same tanh, "
                          "maxpool2d 2 stride=1, conv2d 3 2 sigmoid, flatten, "
                          "dropout 0.3, dense 6 tanh, dense 5 softmax",
                   &in) == 0);
    net_split_adds_up(&n, &half, grads, base, "chain");
    free(grads);
    net_free(&half);
    net_free(&n);
}

/* ---- avgpool2d ------------------------------------------------------------ */

/* Shapes and errors: maxpool2d's words and 'valid' shapes, no variables. */
static void test_avgpool_spec(void)
{
    static strata__model_t m;
    CHECK(build("conv2d 8 3 relu, avgpool2d 2, avgpool2d 3x2 stride=2x1, "
                "flatten, dense 10", &k_mnist, 10, &m, NULL, 0) == 0);
    CHECK(!strcmp(m.layers[1].kind->name, "avgpool2d") &&
          !strcmp(m.layers[1].name, "avgpool2d_1"));
    shape_is(&m.layers[1], 13, 13, 8);
    shape_is(&m.layers[2], 6, 12, 8);
    CHECKF(m.params == 80 + 6 * 12 * 8 * 10 + 10, "%zu parameters", m.params);
    CHECK(m.nvars == 4);
    const strata__shape_t flat = { 1, 1, 784, 0 };
    error_is("avgpool2d 29, flatten, dense 10", &k_mnist,
             "layer 1 'avgpool2d 29': pool 29x29 does not fit the input "
             "(28, 28, 1)");
    error_is("avgpool2d 2, flatten, dense 10", &flat,
             "layer 1 'avgpool2d 2': needs an image input (h, w, c), got 784 "
             "flat features");
    error_is("avgpool2d 2 stride=0, flatten, dense 10", &k_mnist,
             "'stride=0': expected stride=S or stride=SHxSW");
    error_is("avgpool2d 2 relu, flatten, dense 10", &k_mnist,
             "'relu': expected stride=S or stride=SHxSW");
    error_is("avgpool2d, flatten, dense 10", &k_mnist,
             "expected POOL (P or PHxPW, integers in [1, 64])");
    error_is("conv2d 8 3, avgpool2d 2", &k_mnist,
             "the last layer must give the class scores");
}

/* Every variable's gradient, through two average poolings (one
 * overlapping), against central differences. */
static void test_avgpool_gradients(void)
{
    const strata__shape_t in = { 9, 9, 2, 1 };
    static net_t n;
    CHECK(net_make(&n, "conv2d 4 3 padding=same tanh, avgpool2d 2 stride=1, "
                       "conv2d 3 2 sigmoid, avgpool2d 2, flatten, "
                       "dense 5 softmax", &in) == 0);
    CHECK(n.m.layers[3].out.h == 3 && n.m.layers[3].out.c == 3);
    net_check_gradients(&n, "avgpool chain", 60, NULL);
    net_free(&n);
}

/* A small CNN with average pooling learns which half of an 8 x 8 image is
 * the brighter one: SGD on the mean loss, and the loss falls. */
static void test_avgpool_trains(void)
{
    enum { B = 32, STEPS = 40 };
    const strata__shape_t in = { 8, 8, 1, 1 };
    static strata__model_t m;
    CHECK(build("conv2d 4 3 relu, avgpool2d 2, flatten, dense 2", &in, 2, &m,
                NULL, 0) == 0);
    float *flat = malloc(m.count * sizeof(float));
    float *grads = calloc(m.count, sizeof(float));
    void *slots[STRATA__MAX_VARS];
    strata__model_init(&m, 11, flat);
    for (int i = 0; i < m.nvars; i++) {
        slots[i] = flat + m.vars[i].offset;
        m.vars[i].value = &slots[i];
    }
    strata__work_t w;
    CHECK(strata__work_alloc(&m, B, &w) == 0);
    strata__rng_t rng;
    strata__rng_seed(&rng, 5, 1);
    double first = 0.0, last = 0.0;
    for (int s = 0; s < STEPS; s++) {
        for (int r = 0; r < B; r++) {
            int label = (int)strata__rng_below(&rng, 2);
            ((int32_t *)w.y)[r] = label;
            for (int y = 0; y < 8; y++)
                for (int x = 0; x < 8; x++)
                    w.x[(r * 8 + y) * 8 + x] =
                        (float)strata__rng_uniform(&rng) * 0.5f +
                        ((x >= 4) == label ? 0.5f : 0.0f);
        }
        w.noise_seed = strata__model_step_seed(1, s);
        w.row0 = 0;
        double loss = 0.0;
        double correct = 0.0;
        CHECK(strata__model_step(&m, 0, &w, B, grads, 1.0f / B, &loss,
                                 &correct) == 0);
        loss /= B;
        if (s == 0)
            first = loss;
        if (s >= STEPS - 5)
            last += loss / 5;
        kc_sgd(m.count, flat, grads, 0.1f, 0.0f);
    }
    printf("avgpool2d CNN: loss %.4f at the first step, %.4f over the last "
           "5\n", first, last);
    CHECKF(first > 0.4 && last < 0.5 * first,
           "avgpool2d CNN: loss %.4f -> %.4f, not falling", first, last);
    strata__work_free(&w);
    free(flat);
    free(grads);
}


/* ---- global_avgpool2d and the activation layers ------------------------- */

static void summary_of(const strata__model_t *m, char *buf, size_t cap)
{
    FILE *f = tmpfile();
    strata__model_summary(m, f);
    rewind(f);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* One line of the summary: the layer's name, spec, output shape and
 * parameters in the columns every other layer uses (the name column as
 * wide as the longest name, at least 14). */
static void summary_has(const char *sum, int name_width, const char *name,
                        const char *spec, const char *shape, size_t params)
{
    char line[160];
    snprintf(line, sizeof line, " %-*s %-36s %-18s %10zu\n", name_width,
             name, spec, shape, params);
    CHECKF(strstr(sum, line) != NULL, "summary lacks '%s':\n%s", line, sum);
}

static void test_act_spec(void)
{
    static strata__model_t m;
    char sum[4096];
    CHECK(build("conv2d 8 3, relu, conv2d 8 3, leaky_relu, global_avgpool2d, "
                "dense 10", &k_mnist, 10, &m, NULL, 0) == 0);
    shape_is(&m.layers[1], 26, 26, 8);
    CHECK(m.layers[1].out.spatial && m.layers[1].act == STRATA__ACT_NONE);
    shape_is(&m.layers[3], 24, 24, 8);
    CHECK(m.layers[3].alpha == 0.3f);
    shape_is(&m.layers[4], 1, 1, 8);
    CHECK(!m.layers[4].out.spatial);
    CHECKF(m.params == 80 + 584 + 90, "%zu parameters", m.params);
    CHECK(m.nvars == 6 && !strcmp(m.vars[2].name, "conv2d_2/kernel") &&
          !strcmp(m.vars[4].name, "dense_5/kernel") &&
          m.vars[4].shape[0] == 8);
    summary_of(&m, sum, sizeof sum);
    char head[160];
    snprintf(head, sizeof head, " %-18s %-36s %-18s %10s\n", "layer", "spec",
             "output shape", "params");
    CHECKF(strncmp(sum, head, strlen(head)) == 0, "summary header:\n%s", sum);
    summary_has(sum, 18, "relu_1", "relu", "(26, 26, 8)", 0);
    summary_has(sum, 18, "leaky_relu_3", "leaky_relu", "(24, 24, 8)", 0);
    summary_has(sum, 18, "global_avgpool2d_4", "global_avgpool2d", "(8)", 0);
    summary_has(sum, 18, "dense_5", "dense 10", "(10)", 90);
    CHECK(strstr(sum, " total: 754 parameters\n") != NULL);

    CHECK(build("dense 64, gelu, dense 64, sigmoid, dense 10", &k_mnist, 10,
                &m, NULL, 0) == 0);
    CHECKF(m.params == 50240 + 4160 + 650, "%zu parameters", m.params);
    CHECK(m.nvars == 6 && !strcmp(m.vars[4].name, "dense_4/kernel"));
    summary_of(&m, sum, sizeof sum);
    summary_has(sum, 14, "gelu_1", "gelu", "(64)", 0);
    summary_has(sum, 14, "sigmoid_3", "sigmoid", "(64)", 0);

    /* Every kind, any shape; softmax before the last layer. */
    CHECK(build("conv2d 4 3, tanh, softmax, leaky_relu alpha=0.05, flatten, "
                "dense 16, softmax, leaky_relu alpha=0, relu, dense 10",
                &k_mnist, 10, &m, NULL, 0) == 0);
    shape_is(&m.layers[2], 26, 26, 4);
    CHECK(m.layers[3].alpha == 0.05f && m.layers[7].alpha == 0.0f);
    shape_is(&m.layers[6], 1, 1, 16);
    CHECK(m.nvars == 6 && m.params == 40 + 2704 * 16 + 16 + 170);
    CHECK(build("leaky_relu alpha=2.5, flatten, dense 10", &k_mnist, 10, &m,
                NULL, 0) == 0 && m.layers[0].alpha == 2.5f);

    const strata__shape_t flat = { 1, 1, 784, 0 };
    error_is("leaky_relu alpha=-1, flatten, dense 10", &k_mnist,
             "layer 1 'leaky_relu alpha=-1': 'alpha=-1': expected alpha=A, "
             "the slope below 0, a number >= 0 (default 0.3); expected "
             "'leaky_relu [alpha=A]'");
    error_is("flatten, leaky_relu 0.2, dense 10", &k_mnist,
             "layer 2 'leaky_relu 0.2': '0.2': expected alpha=A");
    error_is("flatten, leaky_relu alpha=nan, dense 10", &k_mnist,
             "'alpha=nan': expected alpha=A");
    error_is("flatten, leaky_relu alpha=0.1 alpha=0.2, dense 10", &k_mnist,
             "expected at most one word, alpha=A");
    error_is("conv2d 8 3, global_avgpool2d 2, dense 10", &k_mnist,
             "layer 2 'global_avgpool2d 2': takes no arguments (the window "
             "is the whole image); expected 'global_avgpool2d'");
    error_is("conv2d 8 3, flatten, global_avgpool2d, dense 10", &k_mnist,
             "layer 3 'global_avgpool2d': needs an image input (h, w, c), "
             "got 5408 flat features");
    error_is("global_avgpool2d, dense 10", &flat,
             "layer 1 'global_avgpool2d': needs an image input (h, w, c), got "
             "784 flat features");
    error_is("conv2d 8 3, global_avgpool2d", &k_mnist,
             "layer 2 'global_avgpool2d': the last layer must give the class "
             "scores (e.g. 'dense 10'), not a global_avgpool2d output");
    error_is("dense 64, relu 2, dense 10", &k_mnist,
             "layer 2 'relu 2': takes no arguments; expected 'relu'");
    error_is("dense 64, gelu x, dense 10", &k_mnist,
             "layer 2 'gelu x': takes no arguments; expected 'gelu'");
    error_is("dense 64, dense 10, softmax", &k_mnist,
             "layer 3 'softmax': a softmax layer cannot be the last one: the "
             "last layer gives the logits, and the loss applies softmax to "
             "them (drop this layer); a softmax layer is allowed only before "
             "the last layer");
    error_is("dense 64, dense 10, relu", &k_mnist,
             "layer 3 'relu': the last layer must give the class scores "
             "(e.g. 'dense 10'), not a relu output");
    error_is("conv2d 8 3, flatten, dense 10, tanh", &k_mnist,
             "not a tanh output");
    error_is("dense 64 gelu, dense 10", &k_mnist,
             "layer 1 'dense 64 gelu': 'gelu' is a layer of its own, not an "
             "activation word (relu, tanh, sigmoid or none): put it after "
             "this one, ', gelu'; expected 'dense UNITS [ACT]'");
    error_is("conv2d 8 3 leaky_relu, flatten, dense 10", &k_mnist,
             "'leaky_relu' is a layer of its own");
    error_is("dense 64 softmax, dense 10", &k_mnist,
             "or a softmax layer after this one, ', softmax'");
    error_is("swish, dense 10", &k_mnist,
             "unknown kind 'swish'; expected one of dense, conv2d, maxpool2d, "
             "flatten, dropout, avgpool2d, global_avgpool2d, relu, leaky_relu,"
             " gelu, tanh, sigmoid, softmax");
}

static void test_act_gradients(void)
{
    const strata__shape_t in = { 9, 9, 2, 1 };
    static net_t n;
    /* Every new kind, on images and flat, softmax over channels and over
     * features, an activation layer first (no input gradient). */
    CHECK(net_make(&n, "tanh, conv2d 4 3 padding=same, gelu, conv2d 4 2, "
                       "leaky_relu alpha=0.2, softmax, relu, sigmoid, "
                       "global_avgpool2d, dense 6, softmax, leaky_relu, "
                       "dense 5", &in) == 0);
    net_check_gradients(&n, "activation layers", 80, NULL);
    net_free(&n);
    /* Smooth through gelu and softmax alone, with strict differences. */
    CHECK(net_make(&n, "conv2d 3 3, gelu, global_avgpool2d, dense 7, gelu, "
                       "softmax, dense 5", &in) == 0);
    net_check_gradients(&n, "gelu / softmax", 40, NULL);
    net_free(&n);
}

/* Two specs of one model whose variables have the same layout: the same
 * bits from a step. */
static void same_bits(const char *a, const char *b,
                      const strata__shape_t *in)
{
    static net_t x, y;
    CHECK(net_make(&x, a, in) == 0 && net_make(&y, b, in) == 0);
    char what[512];
    snprintf(what, sizeof what, "'%s' vs '%s'", a, b);
    net_same_bits(&x, &y, what);
    net_free(&x);
    net_free(&y);
}

static void test_act_same_bits(void)
{
    const strata__shape_t in = { 9, 9, 2, 1 };
    same_bits("conv2d 4 3 relu, conv2d 3 2 tanh, flatten, dense 6 sigmoid, "
              "dense 5",
              "conv2d 4 3, relu, conv2d 3 2, tanh, flatten, dense 6, sigmoid, "
              "dense 5", &in);
    same_bits("conv2d 4 3 tanh, avgpool2d 7, flatten, dense 5",
              "conv2d 4 3 tanh, global_avgpool2d, dense 5", &in);
    /* A conv's relu left to the max pooling that reads it (the model's
     * relu_by_reader): the first pair's output rows are 54 KB, so the pair
     * runs 4 rows, then 2 (model.c's pair_group); the second's is small,
     * the whole batch at once; the third pools overlapping windows. The
     * bits of the relu as a layer of its own. */
    const strata__shape_t img = { 28, 28, 1, 1 };
    same_bits("conv2d 20 3 relu, maxpool2d 2, conv2d 8 3 relu, maxpool2d 2, "
              "conv2d 6 2 relu, maxpool2d 3 stride=2, flatten, dense 5",
              "conv2d 20 3, relu, maxpool2d 2, conv2d 8 3, relu, maxpool2d 2, "
              "conv2d 6 2, relu, maxpool2d 3 stride=2, flatten, dense 5",
              &img);
    same_bits("conv2d 20 3 relu, maxpool2d 3 stride=2, flatten, dense 5",
              "conv2d 20 3, relu, maxpool2d 3 stride=2, flatten, dense 5",
              &img);
    /* A grouped pair whose convolution has an input gradient to write */
    same_bits("conv2d 4 3 relu, conv2d 24 3 relu, maxpool2d 2, flatten, "
              "dense 5",
              "conv2d 4 3 relu, conv2d 24 3, relu, maxpool2d 2, flatten, "
              "dense 5", &img);
}

int main(void)
{
    test_shapes();
    test_errors();
    test_gradients();
    test_avgpool_spec();
    test_avgpool_gradients();
    test_avgpool_trains();
    test_act_spec();
    test_act_gradients();
    test_act_same_bits();
    return CHECK_DONE();
}
