/* The embedding layer and its kernels:
 *  - the kernels: the gather and its combiners against a direct sum; the
 *    dense gradient against the sparse one (sorted distinct ids, rows),
 *    bit for bit, with duplicates and padding;
 *  - a graph that concats the embeddings of the id features (side by side,
 *    summed, averaged over a variable-length bag) with the dense features,
 *    an MLP on top: every gradient, the table's included, against central
 *    differences; the split of the batch over two replicas adds up to the
 *    whole; the table is a variable named `<layer>/embeddings` [vocab,
 *    dim], drawn uniform in [-0.05, 0.05];
 *  - every refusal names its line: ids read by another kind, an embedding
 *    reading the dense features or in a chain, ids the data lacks, bad
 *    words. */
#include "graph_lines.h"
#include "kernels_cpu.h"
#include "net.h"

enum { K = 3, VOCAB = 7, DIM = 4 };
static const strata__shape_t k_flat = { 1, 1, 5, 0 };

typedef struct emb_graph {
    const char *const *lines;
    int                ids_k;
} emb_graph_t;

static int build_lines(const void *arg, strata__model_t *m)
{
    const emb_graph_t *g = arg;
    static graph_lines_t gl;
    graph_lines(g->lines, &gl);
    return strata__model_build_graph_ids(gl.line, gl.n, &k_flat, g->ids_k,
                                         NCLS, 0, m);
}

static int build_chain(const void *spec, strata__model_t *m)
{
    return strata__model_build(spec, "j.ini:3", &k_flat, NCLS, m);
}

/* Ids for ROWS samples: duplicates within and across samples, padding
 * (-1), one sample all padding (its mean is 0). */
static const int32_t k_ids[ROWS * K] = {
    1, 3, 1,    -1, 6, 0,    2, -1, -1,
    -1, -1, -1, 5, 5, 3,     0, 4, 2,
};

static int make(net_t *n, const char *const *lines)
{
    emb_graph_t g = { lines, K };
    if (net_capture(build_lines, &g, &n->m, NULL, 0) != 0)
        return -1;
    if (net_ready(n) != 0)
        return -1;
    memcpy(n->w.ids, k_ids, sizeof k_ids);
    return 0;
}

/* ---- kernels ------------------------------------------------------------ */

static void test_kernels(void)
{
    enum { M = 5, KK = 4, V = 9, D = 3, N = M * KK };
    int32_t ids[N];
    float W[V * D], dy[N * D], y[N * D], dW[V * D], rows[N * D];
    int32_t uniq[N], work[KOPS_EMB_WORK(N)], nu = -1;
    strata__rng_t rng;
    strata__rng_seed(&rng, 11, 2);
    for (int i = 0; i < N; i++)
        ids[i] = (int32_t)strata__rng_below(&rng, V + 1) - 1; /* -1 .. V-1 */
    ids[0] = ids[1] = ids[7] = 4;                              /* duplicates */
    for (int i = 0; i < V * D; i++)
        W[i] = (float)strata__rng_uniform(&rng) - 0.5f;
    for (int i = 0; i < N * D; i++)
        dy[i] = (float)strata__rng_uniform(&rng) - 0.5f;
    for (int comb = KOPS_EMB_NONE; comb <= KOPS_EMB_MEAN; comb++) {
        kc_emb_fwd(M, KK, D, V, comb, ids, W, y);
        int bad = 0;
        for (int i = 0; i < M; i++) {
            int real = 0;
            double s[D] = { 0 };
            for (int j = 0; j < KK; j++) {
                int id = ids[i * KK + j];
                real += id >= 0;
                for (int c = 0; c < D; c++) {
                    double w = id >= 0 ? W[id * D + c] : 0.0;
                    s[c] += w;
                    if (comb == KOPS_EMB_NONE)
                        bad += y[(i * KK + j) * D + c] != (float)w;
                }
            }
            for (int c = 0; comb != KOPS_EMB_NONE && c < D; c++) {
                double want = comb == KOPS_EMB_MEAN && real ? s[c] / real
                              : comb == KOPS_EMB_MEAN ? 0.0 : s[c];
                bad += fabs(y[i * D + c] - want) > 1e-6;
            }
        }
        CHECKF(bad == 0, "combiner %d: %d outputs off", comb, bad);
        /* the dense gradient and the sparse one: the same bits */
        kc_emb_bwd(M, KK, D, V, comb, ids, dy, dW, work);
        kc_emb_sparse(M, KK, D, V, comb, ids, dy, uniq, rows, &nu, work);
        int seen[V] = { 0 }, want_nu = 0, same = 1;
        for (int i = 0; i < N; i++)
            if (ids[i] >= 0 && !seen[ids[i]]++)
                want_nu++;
        CHECKF(nu == want_nu, "combiner %d: %d distinct ids, want %d", comb,
               nu, want_nu);
        for (int u = 0; u < nu; u++) {
            same &= u == 0 || uniq[u] > uniq[u - 1];
            same &= memcmp(rows + u * D, dW + uniq[u] * D,
                           D * sizeof(float)) == 0;
        }
        for (int v = 0; v < V; v++)
            for (int c = 0; !seen[v] && c < D; c++)
                same &= dW[v * D + c] == 0.0f;
        CHECKF(same, "combiner %d: sparse rows differ from the dense "
               "gradient", comb);
    }
    /* an id of 4 under NONE: rows 0, 1 and 7 of dy, added in that order */
    kc_emb_bwd(M, KK, D, V, KOPS_EMB_NONE, ids, dy, dW, work);
    float want = 0.0f;
    want += dy[0 * D];
    want += dy[1 * D];
    want += dy[7 * D];
    for (int i = 8; i < N; i++)
        if (ids[i] == 4)
            want += dy[i * D];
    CHECK(dW[4 * D] == want);
}

/* A bigger batch, random ids with many duplicates: the sparse rows are
 * the dense gradient's, bit for bit, for every combiner. */
static void test_sparse_large(int m, int k, int dim, int vocab)
{
    size_t n = (size_t)m * (size_t)k;
    int32_t *ids = malloc(n * sizeof *ids), *uniq = malloc(n * sizeof *uniq);
    int32_t *work = malloc(KOPS_EMB_WORK(n) * sizeof *work), nu = -1;
    float *dy = malloc(n * (size_t)dim * sizeof *dy);
    float *dW = malloc((size_t)vocab * (size_t)dim * sizeof *dW);
    float *rows = malloc(n * (size_t)dim * sizeof *rows);
    strata__rng_t rng;
    strata__rng_seed(&rng, 5, (uint64_t)m);
    for (size_t i = 0; i < n; i++)
        ids[i] = (int32_t)strata__rng_below(&rng, (uint64_t)vocab + 1) - 1;
    for (size_t i = 0; i < n * (size_t)dim; i++)
        dy[i] = (float)strata__rng_uniform(&rng) - 0.5f;
    for (int comb = KOPS_EMB_NONE; comb <= KOPS_EMB_MEAN; comb++) {
        kc_emb_bwd(m, k, dim, vocab, comb, ids, dy, dW, work);
        kc_emb_sparse(m, k, dim, vocab, comb, ids, dy, uniq, rows, &nu, work);
        int ok = nu > 0 && nu <= vocab;
        for (int u = 0; ok && u < nu; u++)
            ok = (u == 0 || uniq[u] > uniq[u - 1]) &&
                 memcmp(rows + (size_t)u * dim, dW + (size_t)uniq[u] * dim,
                        (size_t)dim * sizeof(float)) == 0;
        CHECKF(ok, "%d x %d ids, combiner %d: sparse rows differ", m, k,
               comb);
    }
    free(ids), free(uniq), free(work), free(dy), free(dW), free(rows);
}

/* ---- the layer in a graph ------------------------------------------------ */

static void test_gradients(void)
{
    static const char *const g[] = {
        "e = embedding vocab=7 dim=4 <- ids",
        "s = embedding vocab=7 dim=4 combiner=sum <- ids",
        "a = embedding vocab=9 dim=3 combiner=mean <- ids",
        "h = dense 6 tanh <- input",
        "c = concat <- e, s, a, h",
        "t = dense 8 tanh",
        "out = dense 5",
        NULL };
    static net_t n, half;
    CHECK(make(&n, g) == 0 && make(&half, g) == 0);
    const strata__model_t *m = &n.m;
    CHECK(m->ids_k == K && m->ids_vocab == VOCAB);
    CHECK(m->layers[0].out.c == K * DIM && m->layers[1].out.c == DIM &&
          m->layers[2].out.c == 3);
    CHECK(strcmp(m->vars[0].name, "e/embeddings") == 0 &&
          m->vars[0].ndim == 2 && m->vars[0].shape[0] == VOCAB &&
          m->vars[0].shape[1] == DIM);
    CHECK(strcmp(m->vars[1].name, "s/embeddings") == 0 &&
          strcmp(m->vars[3].name, "h/kernel") == 0);
    /* Keras's uniform(-0.05, 0.05), not Glorot's wider limit */
    float lo = 1, hi = -1;
    for (size_t j = 0; j < m->vars[0].count; j++) {
        float v = n.flat[m->vars[0].offset + j];
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    CHECKF(lo >= -0.05f && hi <= 0.05f && hi - lo > 0.05f,
           "table drawn in [%g, %g]", lo, hi);
    /* The tables are tiny: rows a value of 0.05 hardly moves; scale them
     * so that the finite differences see them. */
    for (int v = 0; v < 3; v++)
        for (size_t j = 0; j < m->vars[v].count; j++)
            n.flat[m->vars[v].offset + j] *= 20.0f;
    float *grads = calloc(m->count, sizeof(float));
    double loss = net_check_gradients(&n, "embedding graph", 150, grads);
    /* the table's rows no sample names get no gradient (row 7, 8 of a) */
    const strata_var_t *a = &m->vars[2];
    for (size_t j = 7 * 3; j < a->count; j++)
        CHECK(grads[a->offset + j] == 0.0f);
    /* two replicas of half the batch each */
    memcpy(half.flat, n.flat, m->count * sizeof(float));
    float *g2 = calloc(m->count, sizeof(float));
    float *sum = calloc(m->count, sizeof(float));
    double total = 0.0;
    for (int part = 0; part < 2; part++) {
        size_t rows = ROWS / 2, dim = half.w.dim;
        memcpy(half.w.x, n.w.x + part * rows * dim, rows * dim * sizeof(float));
        memcpy(half.w.y, (int32_t *)n.w.y + part * rows,
               rows * sizeof(int32_t));
        memcpy(half.w.ids, k_ids + part * rows * K,
               rows * K * sizeof(int32_t));
        double l = 0.0, cc = 0.0;
        CHECK(strata__model_step(&half.m, 0, &half.w, (int)rows, g2, 1.0f, &l,
                                 &cc) == 0);
        total += l;
        for (size_t i = 0; i < m->count; i++)
            sum[i] += g2[i];
    }
    double d2 = 0, n2 = 0;
    for (size_t i = 0; i < m->count; i++) {
        d2 += (sum[i] - grads[i]) * (double)(sum[i] - grads[i]);
        n2 += (double)grads[i] * grads[i];
    }
    CHECKF(fabs(total - loss) < 1e-5 * loss && sqrt(d2 / n2) < 1e-5,
           "halves: loss %g vs %g, gradients rel L2 %g", total, loss,
           sqrt(d2 / n2));
    free(g2);
    free(sum);
    free(grads);
    /* the summary names the id input */
    char path[] = "/tmp/strata-emb-sumXXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w+");
    strata__model_summary(m, f);
    rewind(f);
    char text[4096] = "";
    size_t got = fread(text, 1, sizeof text - 1, f);
    text[got] = '\0';
    fclose(f);
    unlink(path);
    CHECKF(strstr(text, " ids ") && strstr(text, "(12)") &&
               strstr(text, "e, s, a, h"), "summary:\n%s", text);
    net_free(&n);
    net_free(&half);
}

/* ---- refusals ------------------------------------------------------------ */

static void error_is(const char *const *lines, int ids_k, const char *want)
{
    static strata__model_t m;
    char err[2048];
    emb_graph_t g = { lines, ids_k };
    int rc = net_capture(build_lines, &g, &m, err, sizeof err);
    CHECKF(rc == STRATA_ECONFIG, "'%s' gave %d", want, rc);
    CHECKF(strstr(err, want) != NULL, "got '%s', wanted '%s'", err, want);
    CHECKF(strchr(err, '\n') == err + strlen(err) - 1 && m.nlayers == 0,
           "one line, no model: '%s'", err);
}

static void test_errors(void)
{
    error_is((const char *const[]){ "d = dense 4 <- ids", "out = dense 5",
                                    NULL }, K,
             "g.ini:2: [graph] d = dense 4 <- ids: dense reads 'ids', the id "
             "features, which only an embedding reads");
    error_is((const char *const[]){ "e = embedding vocab=4 dim=2 <- input",
                                    "out = dense 5", NULL }, K,
             "g.ini:2: [graph] e = embedding vocab=4 dim=2 <- input: "
             "embedding reads the id features and only them: 'embedding "
             "vocab=V dim=D [combiner=sum|mean] <- ids'");
    error_is((const char *const[]){ "e = embedding vocab=4 dim=2 <- ids",
                                    "out = dense 5", NULL }, 0,
             "reads 'ids', the id features, but the data has none: [data] "
             "train_ids, test_ids and validation_ids name them (strata "
             "predict: --ids)");
    error_is((const char *const[]){ "e = embedding dim=2 <- ids",
                                    "out = dense 5", NULL }, K,
             "needs vocab= and dim=");
    error_is((const char *const[]){ "e = embedding vocab=4 dim=2 "
                                    "combiner=max <- ids", "out = dense 5",
                                    NULL }, K,
             "combiner 'max': expected sum or mean");
    error_is((const char *const[]){ "ids = dense 4", "out = dense 5", NULL },
             K, "'ids' names the id features, not a layer");
    /* a chain reads the dense features: no embedding there */
    static strata__model_t m;
    char err[1024];
    int rc = net_capture(build_chain, "embedding vocab=4 dim=2, dense 5", &m,
                         err, sizeof err);
    CHECKF(rc == STRATA_ECONFIG && strstr(err, "in a [graph] section"),
           "chain: %d '%s'", rc, err);
}

int main(void)
{
    test_kernels();
    test_sparse_large(300, 7, 5, 50);
    test_sparse_large(1000, 3, 2, 4000);
    test_gradients();
    test_errors();
    return CHECK_DONE();
}
