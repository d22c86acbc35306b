/* Embedding gradients as rows (plugin ABI 2.9, STRATA_CAP_SPARSE) through
 * the strata binary, 50 steps of an embedding model (a table of 400 rows,
 * up to 3 ids per sample) on synthetic ids:
 *  - mirrored with 2 replicas: the rows, read in place (sparse_threshold
 *    high), give bitwise the variables of the dense all-reduce
 *    (sparse_as_dense = true), the replicas bitwise equal after every step
 *    (debug.check_sync), and the strategy says how each table-step went;
 *  - the threshold both ways: 0 sends every step dense, a high one every
 *    step as rows, the same bits; with shard_optimizer (auto: the
 *    default) too, each replica adding the rows that fall in its shard,
 *    also with 3 replicas and rows of 5 floats that the shards cut;
 *  - mwms with 2 workers (strata launch): rows and dense the same bits,
 *    and those of mirrored's 2 replicas, also with the overlap thread
 *    (rows densified as buckets are handed over) and with 2 replicas per
 *    worker (densified); with 3 workers over zmq's TCP ring, whose dense
 *    sums run in another order, within 1e-6;
 *  - a strategy that declares the bit but was built for 2.8 (the loader
 *    drops it) only ever sees the dense form; one built for 2.9 sees rows;
 *    both train to mirrored's single-replica bits. */
#include <stdint.h>

#include "check.h"
#include "npy_write.h"
#include "dumps.h"
#include "spawn.h"

enum { NTRAIN = 1600, NF = 4, K = 3, VOCAB = 400, NCLS = 4, STEPS = 50 };

static char g_dir[] = "/tmp/strata-sparseXXXXXX";
static char g_job[700];
static spawn_result_t g_r;

/* emb, feat (kernel, bias), logits (kernel, bias) */
static const size_t k_counts[] = { VOCAB * 8, NF * 8, 8, 16 * 4, 4 };
#define NVARS ((int)(sizeof k_counts / sizeof k_counts[0]))

static void write_npy(const char *name, const char *descr, size_t n,
                      size_t k, const void *data, size_t elem)
{
    npy_write_nk(g_dir, name, descr, n, k, data, elem);
}

static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd(uint32_t below)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng % below);
}

/* The class of a sample is its first id modulo NCLS; 1..3 ids, then -1. */
static void make_data(void)
{
    static float x[NTRAIN * NF];
    static int64_t y[NTRAIN], ids[NTRAIN * K];
    for (int i = 0; i < NTRAIN; i++) {
        int real = 1 + (int)rnd(K);
        for (int j = 0; j < K; j++)
            ids[i * K + j] = j < real ? (int64_t)rnd(VOCAB) : -1;
        y[i] = ids[i * K] % NCLS;
        for (int f = 0; f < NF; f++)
            x[i * NF + f] = (float)rnd(1000) / 1000.0f;
    }
    write_npy("x.npy", "<f4", NTRAIN, NF, x, sizeof *x);
    write_npy("y.npy", "<i8", NTRAIN, 0, y, sizeof *y);
    write_npy("ids.npy", "<i8", NTRAIN, K, ids, sizeof *ids);
    char text[1000];
    snprintf(text, sizeof text,
             "[data]\ndir = %s\n"
             "train_images = x.npy\ntrain_labels = y.npy\n"
             "train_ids = ids.npy\n"
             "test_images = x.npy\ntest_labels = y.npy\ntest_ids = ids.npy\n"
             "[graph]\n"
             "emb = embedding vocab=%d dim=8 combiner=mean <- ids\n"
             "feat = dense 8 tanh <- input\n"
             "both = concat <- emb, feat\n"
             "logits = dense 4\n", g_dir, VOCAB);
    snprintf(g_job, sizeof g_job, "%s/job.ini", g_dir);
    FILE *f = fopen(g_job, "w");
    CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0);
}

/* `strata CMD` of the job with `more` settings, dumping to NAME. */
static int run(const char *cmd, const char *name, const char *const *more)
{
    static char dump[400];
    snprintf(dump, sizeof dump, "debug.dump_vars=%s/%s", g_dir, name);
    const char *common[] = {
        "train.batch_size=32", "train.progress=none", "train.eval=false",
        "train.max_steps=50", "optimizer.name=adam", "optimizer.lr=0.01",
        "debug.check_sync=true", dump, NULL };
    return spawn_strata_job(cmd, g_job, common, more, 120, &g_r);
}

/* strata launch -n 3 of the job with `more`, dumping to NAME. */
static int spawn_3(const char *name, const char *const *more)
{
    char dump[400];
    snprintf(dump, sizeof dump, "debug.dump_vars=%s/%s", g_dir, name);
    const char *common[] = {
        "train.progress=none", "train.eval=false", "train.max_steps=50",
        "optimizer.name=adam", "optimizer.lr=0.01", dump, NULL };
    char *args[40];
    int a = 0;
    args[a++] = "-n";
    args[a++] = "3";
    args[a++] = "-c";
    args[a++] = g_job;
    for (const char *const *l = common; l; l = l == common ? more : NULL)
        for (int i = 0; l[i] && a < 37; i++) {
            args[a++] = "--set";
            args[a++] = (char *)l[i];
        }
    args[a] = NULL;
    return spawn_strata("launch", args, 120, &g_r);
}

static void same(const char *a, const char *b, const char *what)
{
    char pa[300], pb[300];
    snprintf(pa, sizeof pa, "%s/%s", g_dir, a);
    snprintf(pb, sizeof pb, "%s/%s", g_dir, b);
    dump_compare_model(pa, pb, what, 0.0, k_counts, NVARS);
}

/* The strategy's line at the end: `want` table-steps as rows. */
static void said(const char *who, int rows)
{
    char want[160];
    snprintf(want, sizeof want, "%s: embedding gradients: %d table-steps as "
             "rows, %d dense", who, rows, STEPS - rows);
    CHECKF(strstr(g_r.err, want) != NULL, "wanted '%s' in:\n%s", want,
           g_r.err);
}

static void mirrored(void)
{
    const char *dense[] = { "train.devices=cpu:0,cpu:1",
                            "strategy.mirrored.shard_optimizer=false",
                            "strategy.mirrored.sparse_as_dense=true", NULL };
    CHECK(run("train", "m_dense.bin", dense) == 0);
    said("mirrored", 0);
    const char *rows[] = { "train.devices=cpu:0,cpu:1",
                           "strategy.mirrored.shard_optimizer=false",
                           "strategy.mirrored.sparse_threshold=1000", NULL };
    CHECK(run("train", "m_rows.bin", rows) == 0);
    said("mirrored", STEPS);
    same("m_dense.bin", "m_rows.bin", "mirrored 2 replicas: rows vs dense");
    /* the threshold the other way: no table-step is that sparse */
    const char *none[] = { "train.devices=cpu:0,cpu:1",
                           "strategy.mirrored.shard_optimizer=false",
                           "strategy.mirrored.sparse_threshold=0", NULL };
    CHECK(run("train", "m_zero.bin", none) == 0);
    said("mirrored", 0);
    same("m_dense.bin", "m_zero.bin", "mirrored 2 replicas: threshold 0");
    /* sharded optimizer state (shard_optimizer = auto, the default on CPU
     * replicas): each replica adds every replica's rows that fall in its
     * shard, the same bits; and dense */
    const char *shard[] = { "train.devices=cpu:0,cpu:1",
                            "strategy.mirrored.sparse_threshold=1000", NULL };
    CHECK(run("train", "m_shard.bin", shard) == 0);
    said("mirrored", STEPS);
    same("m_dense.bin", "m_shard.bin", "mirrored sharded: rows");
    shard[1] = "strategy.mirrored.sparse_threshold=0";
    CHECK(run("train", "m_shard0.bin", shard) == 0);
    said("mirrored", 0);
    same("m_dense.bin", "m_shard0.bin", "mirrored sharded: threshold 0");
}

/* 3 sharded replicas and rows of 5 floats, which the shards' 16-float
 * lines cut in the middle (2096 floats, 131 lines: replica 1's shard
 * starts at element 688, inside row 137, replica 2's at 1392, inside row
 * 278): the bits of the unsharded dense all-reduce. */
static void mirrored_cut_rows(void)
{
    static const size_t counts[] = { VOCAB * 5, NF * 8, 8, 13 * 4, 4 };
    const char *emb = "graph.emb=embedding vocab=400 dim=5 combiner=mean "
                      "<- ids";
    const char *dense[] = { "train.devices=cpu:0,cpu:1,cpu:2",
                            "train.batch_size=30", emb,
                            "strategy.mirrored.shard_optimizer=false",
                            "strategy.mirrored.sparse_as_dense=true", NULL,
                            NULL };
    CHECK(run("train", "m3_dense.bin", dense) == 0);
    const char *rows[] = { "train.devices=cpu:0,cpu:1,cpu:2",
                           "train.batch_size=30", emb,
                           "strategy.mirrored.shard_optimizer=true",
                           "strategy.mirrored.sparse_threshold=1000", NULL,
                           NULL };
    CHECK(run("train", "m3_shard.bin", rows) == 0);
    said("mirrored", STEPS);
    char pa[300], pb[300];
    snprintf(pa, sizeof pa, "%s/m3_dense.bin", g_dir);
    snprintf(pb, sizeof pb, "%s/m3_shard.bin", g_dir);
    dump_compare_model(pa, pb, "mirrored 3 sharded, rows of 5: vs dense",
                       0.0, counts, 5);
    /* reduce_op = sum: no scaling of the rows */
    dense[5] = rows[5] = "strategy.mirrored.reduce_op=sum";
    CHECK(run("train", "m3s_dense.bin", dense) == 0);
    CHECK(run("train", "m3s_shard.bin", rows) == 0);
    said("mirrored", STEPS);
    snprintf(pa, sizeof pa, "%s/m3s_dense.bin", g_dir);
    snprintf(pb, sizeof pb, "%s/m3s_shard.bin", g_dir);
    dump_compare_model(pa, pb, "mirrored 3 sharded, sum: vs dense", 0.0,
                       counts, 5);
}

static void mwms(void)
{
    const char *dense[] = { "strategy.plugin=mwms", "train.devices=cpu:0",
                            "strategy.mwms.sparse_as_dense=true", NULL };
    CHECK(run("launch", "w_dense.bin", dense) == 0);
    said("mwms", 0);
    const char *rows[] = { "strategy.plugin=mwms", "train.devices=cpu:0",
                           "strategy.mwms.sparse_threshold=1000", NULL };
    CHECK(run("launch", "w_rows.bin", rows) == 0);
    said("mwms", STEPS);
    same("w_dense.bin", "w_rows.bin", "mwms 2 workers: rows vs dense");
    same("m_dense.bin", "w_rows.bin", "mwms 2 workers vs mirrored 2");
    /* with the overlap thread the rows are densified as each table's
     * bucket is handed over, never again while it is being reduced */
    const char *ovl[] = { "strategy.plugin=mwms", "train.devices=cpu:0",
                          "strategy.mwms.overlap=true",
                          "strategy.mwms.bucket_bytes=256",
                          "strategy.mwms.sparse_threshold=1000", NULL };
    CHECK(run("launch", "w_overlap.bin", ovl) == 0);
    CHECKF(strstr(g_r.err, "overlapped with the backward pass") != NULL,
           "overlap (%d):\n%s\n%s", g_r.code, g_r.out, g_r.err);
    same("m_dense.bin", "w_overlap.bin", "mwms 2 workers, overlap: rows");
    /* 2 replicas per worker: densified, all-reduced locally then across */
    const char *two[] = { "strategy.plugin=mwms", "train.devices=cpu:0,cpu:1",
                          "train.batch_size=64",
                          "strategy.mwms.sparse_threshold=1000", NULL };
    CHECK(run("launch", "w2_rows.bin", two) == 0);
    two[3] = "strategy.mwms.sparse_as_dense=true";
    CHECK(run("launch", "w2_dense.bin", two) == 0);
    same("w2_dense.bin", "w2_rows.bin", "mwms 2 workers x 2 replicas: rows");
}

/* 3 workers over zmq's TCP ring (small_bytes = 0: never its gather): the
 * dense all-reduce sums each chunk starting from another worker, the rows
 * in rank order, so the two differ within rounding only; the rows' table
 * is summed in rank order like 3 mirrored replicas' dense one. */
static void mwms_ring(void)
{
    const char *ring[] = { "strategy.plugin=mwms", "train.devices=cpu:0",
                           "train.batch_size=48", "transport.zmq.shm=off",
                           "transport.zmq.small_bytes=0", NULL, NULL };
    ring[5] = "strategy.mwms.sparse_as_dense=true";
    CHECK(spawn_3("r3_dense.bin", ring) == 0);
    ring[5] = "strategy.mwms.sparse_threshold=1000";
    CHECK(spawn_3("r3_rows.bin", ring) == 0);
    said("mwms", STEPS);
    char pa[300], pb[300];
    snprintf(pa, sizeof pa, "%s/r3_dense.bin", g_dir);
    snprintf(pb, sizeof pb, "%s/r3_rows.bin", g_dir);
    dump_compare_model(pa, pb, "mwms 3 workers, TCP ring: rows vs dense",
                       1e-6, k_counts, NVARS);
}

/* The probes' line: `rows` steps with rows, the others dense. */
static void probe(const char *name, const char *dump, int rows)
{
    char plugin[80], path[400], want[120];
    snprintf(plugin, sizeof plugin, "strategy.plugin=%s", name);
    snprintf(path, sizeof path, "plugins.path=%s", PROBE_DIR);
    const char *a[] = { plugin, path, "train.devices=cpu:0", NULL };
    CHECK(run("train", dump, a) == 0);
    snprintf(want, sizeof want, "sparse_probe: %d steps with rows, %d dense",
             rows, STEPS - rows);
    CHECKF(strstr(g_r.err, want) != NULL, "%s: wanted '%s' in:\n%s", name,
           want, g_r.err);
}

static void older_plugin(void)
{
    const char *one[] = { "train.devices=cpu:0", NULL };
    CHECK(run("train", "m_one.bin", one) == 0);
    probe("sparse_probe28", "p28.bin", 0);
    same("m_one.bin", "p28.bin", "a 2.8 strategy (dense) vs mirrored");
    probe("sparse_probe29", "p29.bin", STEPS);
    same("m_one.bin", "p29.bin", "a 2.9 strategy (rows) vs mirrored");
}

int main(void)
{
    if (!mkdtemp(g_dir) || spawn_job_keys() != 0)
        return 1;
    make_data();
    mirrored();
    mirrored_cut_rows();
    mwms();
    mwms_ring();
    older_plugin();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    return CHECK_DONE();
}
