/* Graph models ([graph]): a chain written as a graph is the same model
 * bit for bit, the order of the lines does not matter, the gradients of a
 * graph with residual adds, concats and layers read several times match
 * finite differences, every bad graph is one error naming the line (and
 * both layers for an input), the summary shows the inputs, and a job that
 * describes its model twice is refused. */
#include "graph_lines.h"
#include "net.h"

typedef struct graph {
    const char *const     *lines; /* "name = text", NULL-terminated */
    const strata__shape_t *in;
} graph_t;

static int build_lines(const void *arg, strata__model_t *m)
{
    const graph_t *g = arg;
    static graph_lines_t gl;
    graph_lines(g->lines, &gl);
    return strata__model_build_graph(gl.line, gl.n, g->in, NCLS, m);
}

static int graph_make(net_t *n, const char *const *lines,
                      const strata__shape_t *in)
{
    graph_t g = { lines, in };
    if (net_capture(build_lines, &g, &n->m, NULL, 0) != 0)
        return -1;
    return net_ready(n);
}

static const strata__shape_t k_img = { 9, 9, 2, 1 };

/* ---- the same model, written three ways -------------------------------- */

static void test_chain_as_graph(void)
{
    static net_t chain, graph, shuffled;
    CHECK(strata__model_build("conv2d 4 3 padding=same tanh, maxpool2d 2 "
                              "stride=1, flatten, dropout 0.2, dense 6 tanh, "
                              "dense 5", NULL, &k_img, NCLS, &chain.m) == 0);
    CHECK(net_ready(&chain) == 0);
    static const char *const g[] = {
        "conv = conv2d 4 3 padding=same tanh", "pool = maxpool2d 2 stride=1",
        "flat = flatten", "drop = dropout 0.2", "hidden = dense 6 tanh",
        "logits = dense 5", NULL };
    CHECK(graph_make(&graph, g, &k_img) == 0);
    CHECK(!chain.m.graph && graph.m.graph && graph.m.nslots == 2);
    CHECK(strcmp(graph.m.vars[0].name, "conv/kernel") == 0);
    CHECK(strcmp(graph.m.vars[5].name, "logits/bias") == 0);
    net_same_bits(&chain, &graph, "chain vs graph");
    /* Any order: each line names what it reads. */
    static const char *const s[] = {
        "logits = dense 5 <- hidden", "flat = flatten <- pool",
        "hidden = dense 6 tanh <- drop", "conv = conv2d 4 3 padding=same tanh "
        "<- input", "drop = dropout 0.2 <- flat",
        "pool = maxpool2d 2 stride=1 <- conv", NULL };
    CHECK(graph_make(&shuffled, s, &k_img) == 0);
    CHECK(strcmp(shuffled.m.layers[0].name, "conv") == 0 &&
          strcmp(shuffled.m.layers[5].name, "logits") == 0);
    net_same_bits(&graph, &shuffled, "ordered vs shuffled");
    net_free(&chain);
    net_free(&graph);
    net_free(&shuffled);
}

/* ---- gradients ----------------------------------------------------------- */

/* A residual block, a layer read by three, an add of one layer with
 * itself, a concat with the data, a flatten read twice and a flat concat:
 * every gradient against central differences, and the split of the batch
 * over two replicas adds up to the whole. */
static void test_gradients(void)
{
    static const char *const g[] = {
        "a = conv2d 4 3 padding=same tanh",
        "b = conv2d 4 3 padding=same tanh",
        "c = conv2d 4 3 padding=same <- b",
        "s = add <- c, a",
        "t = tanh",
        "d = add <- t, t",
        "e = concat <- d, a, input",
        "p = conv2d 3 3 stride=2 sigmoid",
        "f = flatten",
        "g = dense 6 tanh <- f",
        "h = dense 4 sigmoid <- f",
        "k = concat <- g, h",
        "out = dense 5",
        NULL };
    static net_t n, half;
    CHECK(graph_make(&n, g, &k_img) == 0 && graph_make(&half, g, &k_img) == 0);
    CHECK(n.m.layers[6].out.c == 10 && n.m.layers[11].out.c == 10);
    CHECK(n.m.nslots >= 3);
    float *grads = calloc(n.m.count, sizeof(float));
    double loss = net_check_gradients(&n, "residual graph", 150, grads);
    net_split_adds_up(&n, &half, grads, loss, "residual graph");
    free(grads);
    net_free(&half);
    net_free(&n);
}

/* ---- refusals ------------------------------------------------------------ */

static void error_is(const char *const *lines, const char *want)
{
    static strata__model_t m;
    char err[2048];
    graph_t g = { lines, &k_img };
    int rc = net_capture(build_lines, &g, &m, err, sizeof err);
    CHECKF(rc == STRATA_ECONFIG, "'%s' gave %d", want, rc);
    CHECKF(strstr(err, want) != NULL, "got '%s', wanted '%s'", err, want);
    CHECKF(strchr(err, '\n') == err + strlen(err) - 1 && m.nlayers == 0,
           "one line, no model: '%s'", err);
}

static void test_errors(void)
{
    error_is((const char *const[]){ "a = conv2d 4 3", "b = add <- a, c0nv",
                                    "out = dense 5 <- b", NULL },
             "g.ini:3: [graph] b = add <- a, c0nv: reads 'c0nv', which is no "
             "layer of [graph] nor 'input' (the data)");
    error_is((const char *const[]){ "conv = conv2d 4 3", "b = add <- conv, "
                                    "cnv", "out = dense 5 <- b", NULL },
             "did you mean 'conv'?");
    error_is((const char *const[]){ "a = conv2d 4 3 <- c", "b = relu <- a",
                                    "c = relu <- b", "f = flatten <- c",
                                    "out = dense 5", NULL },
             "g.ini:2: [graph] a = conv2d 4 3 <- c: a cycle: 'a' (g.ini:2) "
             "reads 'c' (g.ini:4) reads 'b' (g.ini:3) reads 'a' (g.ini:2)");
    error_is((const char *const[]){ "a = conv2d 4 3 <- a", "f = flatten",
                                    "out = dense 5", NULL },
             "a cycle: 'a' (g.ini:2) reads 'a' (g.ini:2)");
    error_is((const char *const[]){ "a = conv2d 4 3", "b = conv2d 8 3",
                                    "s = add <- a, b", "f = flatten",
                                    "out = dense 5", NULL },
             "g.ini:4: [graph] s = add <- a, b: 'b' (g.ini:3) gives (5, 5, 8)"
             " but 'a' (g.ini:2) gives (7, 7, 4): add needs equal shapes");
    error_is((const char *const[]){ "a = conv2d 4 3", "b = concat <- a, input",
                                    "f = flatten", "out = dense 5", NULL },
             "'input' (the data) gives (9, 9, 2) but 'a' (g.ini:2) gives "
             "(7, 7, 4): concat needs the same image size");
    error_is((const char *const[]){ "a = conv2d 4 3", "f = flatten",
                                    "out = dense 5", "side = dense 5 <- f",
                                    NULL },
             "g.ini:4: [graph] out = dense 5: the graph has 2 outputs (layers "
             "no other layer reads): 'out' (g.ini:4), 'side' (g.ini:5)");
    error_is((const char *const[]){ "input = flatten", "out = dense 5",
                                    NULL },
             "'input' names the data, not a layer");
    error_is((const char *const[]){ "2nd = flatten", "out = dense 5", NULL },
             "a layer name is a letter then letters, digits or '_'");
    error_is((const char *const[]){ "f = flatten", "f = dense 5", NULL },
             "g.ini:3: [graph] f = dense 5: a second layer of this name");
    error_is((const char *const[]){ "f = flatten", "s = add <- f",
                                    "out = dense 5", NULL },
             "add reads at least 2 layers; name them: "
             "'add <- LAYER, LAYER[, ...]'");
    error_is((const char *const[]){ "f = flatten", "g = dense 5 <- f, f",
                                    NULL },
             "dense reads one layer, not 2 (add and concat merge several)");
    error_is((const char *const[]){ "f = flatten <-", "out = dense 5", NULL },
             "nothing after '<-'");
    error_is((const char *const[]){ "f = flatten", "h = dense 8 softmax",
                                    "out = dense 5", NULL },
             "g.ini:3: [graph] h = dense 8 softmax: 'softmax' only on the "
             "last layer");
    error_is((const char *const[]){ "a = conv2d 4 3", "b = conv2d 4 3 "
                                    "padding=same", "s = add <- a, b", NULL },
             "the last layer must give the class scores");
    /* A chain's layer reads the one before; '<-' is for [graph]. */
    static strata__model_t m;
    CHECK(strata__model_build("flatten, dense 5 <- input", "job.ini:7",
                              &k_img, NCLS, &m) == STRATA_ECONFIG);
}

/* ---- the summary and the config ------------------------------------------ */

static void test_summary(void)
{
    static const char *const g[] = {
        "stem = conv2d 4 3 padding=same", "left = relu",
        "merged = concat <- left, stem", "pool = global_avgpool2d",
        "logits = dense 5", NULL };
    static net_t n;
    CHECK(graph_make(&n, g, &k_img) == 0);
    char buf[4096] = "";
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    strata__model_summary(&n.m, f);
    fclose(f);
    CHECKF(strstr(buf, " inputs ") && strstr(buf, "left, stem") &&
               strstr(buf, "(9, 9, 8)"),
           "summary:\n%s", buf);
    net_free(&n);
}

static void test_config(void)
{
    strata__cfg_t *c;
    CHECK(strata__cfg_new(&c) == 0);
    CHECK(strata__cfg_set(c, "graph.f=flatten", 1, "--set") == 0);
    CHECK(strata__cfg_set(c, "graph.out=dense 5", 1, "--set") == 0);
    static strata__model_t m;
    strata__model_cfg_t mc = { .layers = "dense 7" };
    CHECK(strata__model_build_cfg(c, &mc, &k_img, 0, NCLS, &m) == 0);
    CHECK(m.graph && m.nlayers == 2 && strcmp(m.layers[1].name, "out") == 0);
    CHECK(strata__cfg_set(c, "model.layers=dense 5", 1, "--set") == 0);
    mc.layers = "dense 5";
    CHECK(strata__model_build_cfg(c, &mc, &k_img, 0, NCLS, &m) == STRATA_ECONFIG);
    strata__cfg_free(c);
}

int main(void)
{
    test_chain_as_graph();
    test_gradients();
    test_errors();
    test_summary();
    test_config();
    return CHECK_DONE();
}
