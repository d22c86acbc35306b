/* layernorm (Keras's LayerNormalization, axis -1): the shape it keeps, its
 * variables (gamma ones, beta zeros: 2c parameters, in the summary too),
 * its epsilon, every bad spec as one error line naming the layer, and the
 * gradients of models through it against finite differences, on an
 * image's channels and on flat features, first in the model or not; each
 * sample is normalised on its own, so a split batch adds up and evaluation
 * gives the training step's loss. */
#include "net.h"

static const strata__shape_t k_img = { 9, 9, 2, 1 };

static int build_spec(const void *arg, strata__model_t *m)
{
    return strata__model_build(arg, "job.ini:3", &k_img, NCLS, m);
}

static int net_make(net_t *n, const char *spec)
{
    if (net_capture(build_spec, spec, &n->m, NULL, 0) != 0)
        return -1;
    return net_ready(n);
}

static void test_spec(void)
{
    static net_t n;
    CHECK(net_make(&n, "conv2d 4 3 padding=same, layernorm, relu, flatten, "
                       "dense 5") == 0);
    const strata__layer_t *l = &n.m.layers[1];
    CHECK(l->out.h == 9 && l->out.w == 9 && l->out.c == 4 && l->out.spatial);
    CHECK(l->epsilon == 1e-3f);
    CHECK(n.m.nvars == 6 && !strcmp(n.m.vars[2].name, "layernorm_1/gamma") &&
          !strcmp(n.m.vars[3].name, "layernorm_1/beta") &&
          n.m.vars[2].count == 4 && n.m.vars[3].count == 4);
    const float *gamma = n.flat + n.m.vars[2].offset;
    const float *beta = n.flat + n.m.vars[3].offset;
    for (int j = 0; j < 4; j++)
        CHECKF(gamma[j] == 1.0f && beta[j] == 0.0f, "gamma %g, beta %g",
               gamma[j], beta[j]);
    CHECKF(n.m.params == 76 + 8 + 324 * 5 + 5, "%zu parameters", n.m.params);

    char sum[4096];
    FILE *f = tmpfile();
    strata__model_summary(&n.m, f);
    rewind(f);
    sum[fread(sum, 1, sizeof sum - 1, f)] = '\0';
    fclose(f);
    char line[160];
    snprintf(line, sizeof line, " %-14s %-36s %-18s %10d\n", "layernorm_1",
             "layernorm", "(9, 9, 4)", 8);
    CHECKF(strstr(sum, line) != NULL, "summary lacks '%s':\n%s", line, sum);
    net_free(&n);

    CHECK(net_make(&n, "flatten, dense 8, layernorm epsilon=0.01, tanh, "
                       "dense 5") == 0);
    CHECK(n.m.layers[2].epsilon == 0.01f && n.m.layers[2].out.c == 8 &&
          !n.m.layers[2].out.spatial);
    CHECKF(n.m.params == 162 * 8 + 8 + 16 + 45, "%zu parameters",
           n.m.params);
    net_free(&n);
}

static void error_is(const char *spec, const char *want)
{
    static strata__model_t m;
    char err[1024];
    int rc = net_capture(build_spec, spec, &m, err, sizeof err);
    CHECKF(rc == STRATA_ECONFIG, "'%s' gave %d", spec, rc);
    CHECKF(strstr(err, want) != NULL, "'%s': got '%s', wanted '%s'", spec,
           err, want);
    CHECKF(strstr(err, "job.ini:3: [model] layers") != NULL &&
               strchr(err, '\n') == err + strlen(err) - 1,
           "'%s': one line naming the file: '%s'", spec, err);
}

static void test_errors(void)
{
    error_is("layernorm epsilon=0, flatten, dense 5",
             "layer 1 'layernorm epsilon=0': epsilon '0': expected a number "
             "in [1e-12, 1]; expected 'layernorm [epsilon=E]'");
    error_is("flatten, layernorm epsilon=x, dense 5",
             "layer 2 'layernorm epsilon=x': epsilon 'x': expected a number");
    error_is("flatten, layernorm epsilon=0.01 center, dense 5",
             "layer 2 'layernorm epsilon=0.01 center': 'center': expected "
             "epsilon=E");
    error_is("flatten, layernorm 0.01, dense 5",
             "layer 2 'layernorm 0.01': '0.01': expected epsilon=E");
}

/* Gradients against finite differences; the batch split in two adds up;
 * evaluation is the training step's forward pass. */
static void check_chain(const char *spec, int min_checked)
{
    static net_t n, half;
    CHECK(net_make(&n, spec) == 0);
    float *grads = calloc(n.m.count, sizeof(float));
    double base = net_check_gradients(&n, spec, min_checked, grads);
    double e = 0;
    double correct = 0.0;
    CHECK(strata__model_evaluate(&n.m, 0, &n.w, ROWS, &e, &correct) == 0);
    CHECKF(e == base, "%s: evaluation %.9g, training %.9g", spec, e, base);
    CHECK(net_make(&half, spec) == 0);
    net_split_adds_up(&n, &half, grads, base, spec);
    free(grads);
    net_free(&half);
    net_free(&n);
}

int main(void)
{
    test_spec();
    test_errors();
    check_chain("conv2d 4 3 padding=same, layernorm, tanh, flatten, dense 5",
                60);
    /* relu right after the normalisation: half its inputs sit near the
     * kink, and the steps of the differences, times invstd, cross several
     * kinks at once with epsilon 1e-3; a larger epsilon keeps them apart. */
    check_chain("conv2d 4 3 padding=same, layernorm epsilon=0.1, relu, "
                "flatten, dense 5", 60);
    check_chain("flatten, dense 8, layernorm epsilon=0.01, tanh, dense 5", 60);
    check_chain("layernorm, conv2d 3 3, layernorm epsilon=0.1, tanh, "
                "global_avgpool2d, dense 6, layernorm, dense 5", 60);
    return CHECK_DONE();
}
