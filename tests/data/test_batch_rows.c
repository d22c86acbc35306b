/* Host batch_rows (plugin ABI 2.11; core/run/batchrows.c with
 * core/data/ids.c's strata__ids_rows): the rows of each embedding table a
 * batch reads. Against a brute force over the same samples train_step
 * loads (the epoch's order, the batch's first sample, each replica's
 * slice): one and several replicas, a process that holds the second
 * slices of a shared batch, several id columns with bags padded by -1,
 * two tables beside a dense layer; every range refused. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "data/data.h"
#include "model/model.h"
#include "run/run.h"

enum { N = 60, K = 3, VOCAB = 50 };

static strata__dataset_t g_set;
static strata__settings_t g_s;
static const strata__layer_kind_t k_emb = { .name = "embedding",
                                            .nvars = 1, .reads_ids = 1 };
static const strata__layer_kind_t k_dense = { .name = "dense", .nvars = 2 };

/* ids of sample i: a bag of 1..3 (then -1), some shared between samples */
static void make_set(void)
{
    g_set.n = N;
    g_set.ids_k = K;
    g_set.ids = malloc(N * K * sizeof *g_set.ids);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < N; i++) {
        int real = 1 + i % K;
        for (int c = 0; c < K; c++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            g_set.ids[i * K + c] = c < real ? (int32_t)(x % VOCAB) : -1;
        }
    }
}

/* emb (50 x 4), dense, emb2 (60 x 2): two tables beside a dense layer */
static void make_model(strata__model_t *m)
{
    memset(m, 0, sizeof *m);
    m->nlayers = 3;
    m->layers[0] = (strata__layer_t){ .kind = &k_emb, .var0 = 0, .units = 4,
                                      .vocab = VOCAB };
    m->layers[1] = (strata__layer_t){ .kind = &k_dense, .var0 = 1,
                                      .units = 5 };
    m->layers[2] = (strata__layer_t){ .kind = &k_emb, .var0 = 3, .units = 2,
                                      .vocab = 60 };
    size_t counts[4] = { VOCAB * 4, 20, 5, 60 * 2 }, off = 0;
    for (int v = 0; v < 4; v++) {
        m->vars[v] = (strata_var_t){ .index = (uint32_t)v, .offset = off,
                                     .count = counts[v] };
        off += counts[v] + 16;
    }
    m->nvars = 4;
}

/* The distinct ids of samples perm[first .. first + rows) of each slice,
 * by a table of flags. */
static size_t brute(const uint32_t *perm, const size_t *first,
                    const size_t *rows, int R, int64_t *out)
{
    unsigned char seen[VOCAB] = { 0 };
    for (int r = 0; r < R; r++)
        for (size_t i = first[r]; i < first[r] + rows[r]; i++)
            for (int c = 0; c < K; c++) {
                int32_t id = g_set.ids[perm[i] * K + c];
                if (id >= 0)
                    seen[id] = 1;
            }
    size_t n = 0;
    for (int id = 0; id < VOCAB; id++)
        if (seen[id])
            out[n++] = id;
    return n;
}

static void ids_rows(void)
{
    /* one run, no order: samples 0..3 */
    int64_t out[4 * K], want[VOCAB];
    size_t first = 0, m = 4, n = 99;
    uint32_t ident[N];
    for (int i = 0; i < N; i++)
        ident[i] = (uint32_t)i;
    strata__ids_rows(&g_set, NULL, &first, &m, 1, out, &n);
    size_t nw = brute(ident, &first, &m, 1, want);
    CHECKF(n == nw && memcmp(out, want, n * sizeof *out) == 0,
           "samples 0..3: %zu rows, want %zu", n, nw);
    int padded = 0, dup = 0;
    for (int i = 0; i < 4 * K; i++)
        padded += g_set.ids[i] < 0;
    dup = 4 * K - padded - (int)n;
    CHECKF(padded > 0, "no padding in the first samples");
    printf("samples 0..3: %d ids, %d padding, %zu distinct rows (%d "
           "repeated)\n", 4 * K - padded, padded, n, dup);
    /* an empty run gives no rows */
    m = 0;
    strata__ids_rows(&g_set, NULL, &first, &m, 1, out, &n);
    CHECK(n == 0);
}

static void run_rows(void)
{
    static strata__run_t run;
    memset(&run, 0, sizeof run);
    g_s.train.epochs = 3;
    g_s.train.seed = 7;
    g_s.data.shuffle = 1;
    run.s = &g_s;
    run.train = g_set;
    make_model(&run.model);
    CHECK(strata__cursor_init(&run.cur, N) == 0);
    run.geo.gbatch = run.geo.batch = 12;
    run.geo.steps_per_epoch = N / 12;
    strata_sparse_t sp[3];
    size_t n = 0;
    /* who: 1 replica of the whole batch; 2 replicas; the second half of a
     * batch shared by two processes (shard0 = 2 of 4 slices) */
    static const struct { int R, shard0, per; } who[] = {
        { 1, 0, 12 }, { 2, 0, 6 }, { 2, 2, 3 } };
    for (size_t w = 0; w < sizeof who / sizeof *who; w++) {
        run.nreplicas = who[w].R;
        run.geo.shard0 = who[w].shard0;
        run.geo.per_replica = who[w].per;
        CHECK(strata__run_batch_rows(&run, 1, 2, NULL, 0, &n) == STRATA_OK &&
              n == 2);
        CHECK(strata__run_batch_rows(&run, 1, 2, sp, 3, &n) == STRATA_OK &&
              n == 2);
        uint32_t perm[N];
        strata__epoch_order(perm, N, 7, 1, 1);
        size_t first[2], rows[2];
        for (int r = 0; r < who[w].R; r++) {
            first[r] = 2 * 12 + (size_t)(who[w].shard0 + r) * who[w].per;
            rows[r] = (size_t)who[w].per;
        }
        int64_t want[VOCAB];
        size_t nw = brute(perm, first, rows, who[w].R, want);
        int ok = 1;
        for (int t = 0; t < 2; t++) {
            const strata_var_t *v = &run.model.vars[t ? 3 : 0];
            ok &= sp[t].var == v->index && sp[t].offset == v->offset &&
                  sp[t].count == v->count &&
                  sp[t].row_len == (size_t)(t ? 2 : 4) &&
                  sp[t].values == NULL && sp[t].nrows == nw &&
                  memcmp(sp[t].rows, want, nw * sizeof *want) == 0;
        }
        printf("%d replica(s) from slice %d of %d rows: %zu rows of each "
               "table\n", who[w].R, who[w].shard0, who[w].per, nw);
        CHECKF(ok && nw > 0, "%d replicas from slice %d: the rows differ "
               "from the samples'", who[w].R, who[w].shard0);
    }
    /* another epoch's order is taken as asked */
    run.nreplicas = 1;
    run.geo.shard0 = 0;
    run.geo.per_replica = 12;
    CHECK(strata__run_batch_rows(&run, 0, 0, sp, 3, &n) == STRATA_OK);
    uint32_t perm[N];
    strata__epoch_order(perm, N, 7, 0, 1);
    size_t first = 0, rows = 12;
    int64_t want[VOCAB];
    size_t nw = brute(perm, &first, &rows, 1, want);
    CHECK(sp[0].nrows == nw && memcmp(sp[0].rows, want, nw * 8) == 0);
    /* out of range, or too little room */
    CHECK(strata__run_batch_rows(&run, 3, 0, sp, 3, &n) == STRATA_EINVAL);
    CHECK(strata__run_batch_rows(&run, -1, 0, sp, 3, &n) == STRATA_EINVAL);
    CHECK(strata__run_batch_rows(&run, 0, 5, sp, 3, &n) == STRATA_EINVAL);
    CHECK(strata__run_batch_rows(&run, 0, -1, sp, 3, &n) == STRATA_EINVAL);
    CHECK(strata__run_batch_rows(&run, 0, 0, sp, 1, &n) == STRATA_EINVAL &&
          n == 2);
    /* a model without tables has none */
    run.model.nlayers = 2;
    run.model.layers[0].kind = &k_dense;
    CHECK(strata__run_batch_rows(&run, 0, 0, sp, 3, &n) == STRATA_OK &&
          n == 0);
    strata__cursor_free(&run.cur);
    free(run.brows);
}

int main(void)
{
    make_set();
    ids_rows();
    run_rows();
    free(g_set.ids);
    return CHECK_DONE();
}
