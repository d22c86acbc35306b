/* Embeddings end to end through the strata binary, on synthetic data
 * whose class is a hidden function of the ids: each sample has a class,
 * a bag of up to 3 ids drawn from that class's ids (-1: padding, the bag's
 * length varies) and 4 dense features of noise.
 *  - a [graph] model (embedding with combiner=mean <- ids, concat with a
 *    dense layer on the features, an MLP on top) learns: test accuracy
 *    far above chance (0.25);
 *  - mirrored with 2 replicas follows 1 replica within 1e-5 relative L2
 *    per variable after an epoch, the replicas bitwise equal after every
 *    step (debug.check_sync), and mwms with 2 workers through `strata
 *    launch` gives the 2 replicas' bits (each worker's rows take their
 *    ids); a validation_split carries the ids with their samples;
 *  - under ps with 2 tasks the table is split by rows over both (its
 *    gradient pushed as the rows each step touched: test_ps_sparse.c)
 *    and every step is applied exactly once;
 *  - the checkpoint holds the table as emb/embeddings [40, 8], and
 *    `strata eval` scores it on the test ids (and `eval --data --labels
 *    --ids` the same); `strata predict --ids`
 *    gives the test samples' probabilities (their argmax as accurate),
 *    and without --ids the model is refused with the reason;
 *  - refusals, one line each, exit 1 (bad data), nothing written: an id
 *    outside the table or below -1 (file, sample, column), float ids, a
 *    missing ids file, ids of another row count than the features, ids
 *    the test set lacks. */
#include <stdint.h>
#include <sys/stat.h>

#include "check.h"
#include "dumps.h"
#include "npy_write.h"
#include "spawn.h"

enum { NTRAIN = 2000, NTEST = 400, NF = 4, K = 3, VOCAB = 40, NCLS = 4 };

static char g_dir[] = "/tmp/strata-embXXXXXX";
static char g_job[700];
static spawn_result_t g_r;

/* A .npy file of `descr` ("<f4", "<i8", "<i4") and shape (n, k) (k 0:
 * (n,)) holding `data`. */
static void write_npy(const char *name, const char *descr, size_t n,
                      size_t k, const void *data, size_t elem)
{
    npy_write_nk(g_dir, name, descr, n, k, data, elem);
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(uint32_t below)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng % below);
}

/* n samples: features, labels, ids; the class of id v is v % NCLS hidden
 * behind a fixed shuffle of the ids. */
static void make_set(const char *prefix, size_t n, const int64_t *perm)
{
    float *x = malloc(n * NF * sizeof *x);
    int64_t *y = malloc(n * sizeof *y), *ids = malloc(n * K * sizeof *ids);
    for (size_t i = 0; i < n; i++) {
        int c = (int)rnd(NCLS);
        y[i] = c;
        for (int f = 0; f < NF; f++)
            x[i * NF + f] = (float)rnd(1000) / 1000.0f;
        int real = 1 + (int)rnd(K);           /* 1..3 ids, then padding */
        for (int j = 0; j < K; j++)
            ids[i * K + j] = j < real
                ? perm[(int)rnd(VOCAB / NCLS) * NCLS + c] : -1;
    }
    char name[64];
    snprintf(name, sizeof name, "%s_x.npy", prefix);
    write_npy(name, "<f4", n, NF, x, sizeof *x);
    snprintf(name, sizeof name, "%s_y.npy", prefix);
    write_npy(name, "<i8", n, 0, y, sizeof *y);
    snprintf(name, sizeof name, "%s_ids.npy", prefix);
    write_npy(name, "<i8", n, K, ids, sizeof *ids);
    free(x);
    free(y);
    free(ids);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0);
}

static void make_data(void)
{
    int64_t perm[VOCAB];
    for (int i = 0; i < VOCAB; i++)
        perm[i] = i;
    for (int i = VOCAB - 1; i > 0; i--) {
        int j = (int)rnd((uint32_t)i + 1);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    make_set("train", NTRAIN, perm);
    make_set("test", NTEST, perm);
    char text[1400];
    snprintf(text, sizeof text,
             "[data]\n"
             "dir = %s\n"
             "train_images = train_x.npy\n"
             "train_labels = train_y.npy\n"
             "train_ids = train_ids.npy\n"
             "test_images = test_x.npy\n"
             "test_labels = test_y.npy\n"
             "test_ids = test_ids.npy\n"
             "[graph]\n"
             "emb = embedding vocab=40 dim=8 combiner=mean <- ids\n"
             "feat = dense 8 tanh <- input\n"
             "both = concat <- emb, feat\n"
             "hidden = dense 16 tanh\n"
             "logits = dense 4\n", g_dir);
    snprintf(g_job, sizeof g_job, "%s/emb.ini", g_dir);
    write_file(g_job, text);
}

/* emb, feat, hidden, logits */
static const size_t k_counts[] = { VOCAB * 8, NF * 8, 8, 16 * 16, 16,
                                   16 * 4, 4 };

static int run(const char *cmd, const char *job, const char *const *more)
{
    static const char *const common[] = {
        "train.batch_size=32", "train.progress=none",
        "optimizer.name=adam", "optimizer.lr=0.01", NULL };
    return spawn_strata_job(cmd, job, common, more, 300, &g_r);
}

static void path_in(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", g_dir, name);
}

static void learns(void)
{
    const char *a[] = { "train.epochs=4", "train.devices=cpu:0", NULL };
    CHECK(run("train", g_job, a) == 0);
    const char *done = strstr(g_r.out, "test accuracy ");
    double acc = done ? atof(done + strlen("test accuracy ")) : 0.0;
    printf("embedding model: test accuracy %.4f (chance 0.25)\n", acc);
    CHECKF(acc >= 0.9, "test accuracy %.4f < 0.9:\n%s", acc, g_r.out);
    CHECKF(strstr(g_r.out, "emb ") && strstr(g_r.out, " ids ") &&
               strstr(g_r.out, "emb, feat"), "banner:\n%s", g_r.out);
}

static void equivalence(void)
{
    char one[400], two[400], mw[400], p1[300], p2[300], pm[300];
    path_in(p1, sizeof p1, "one.bin");
    path_in(p2, sizeof p2, "two.bin");
    path_in(pm, sizeof pm, "mwms.bin");
    snprintf(one, sizeof one, "debug.dump_vars=%s", p1);
    snprintf(two, sizeof two, "debug.dump_vars=%s", p2);
    snprintf(mw, sizeof mw, "debug.dump_vars=%s", pm);
    const char *a[] = { "train.epochs=1", "train.eval=false",
                        "train.devices=cpu:0", one, NULL };
    CHECK(run("train", g_job, a) == 0);
    const char *b[] = { "train.epochs=1", "train.eval=false",
                        "train.devices=cpu:0,cpu:1", "debug.check_sync=true",
                        two, NULL };
    CHECK(run("train", g_job, b) == 0);
    int nvars = (int)(sizeof k_counts / sizeof k_counts[0]);
    dump_compare_model(p1, p2, "embedding: 2 replicas vs 1", 1e-5, k_counts,
                       nvars);
    const char *c2[] = { "train.epochs=1", "train.eval=false",
                         "strategy.plugin=mwms", "train.devices=cpu:0", mw,
                         NULL };
    CHECK(run("launch", g_job, c2) == 0);
    dump_compare_model(p2, pm, "embedding: mwms 2 workers vs 2 replicas",
                       0.0, k_counts, nvars);
    /* the held-out samples take their ids along */
    const char *c[] = { "train.epochs=1", "data.validation_split=0.1",
                        "train.devices=cpu:0,cpu:1", NULL };
    CHECK(run("train", g_job, c) == 0);
    CHECKF(strstr(g_r.out, "val_accuracy") != NULL, "split:\n%s", g_r.out);
}

static void parameter_servers(void)
{
    char *a[] = { "--ps", "2", "--workers", "2", "--chief", "-c", g_job,
                  "--set", "strategy.plugin=ps", "--set",
                  "transport.plugin=zmq", "--set", "train.devices=cpu:0",
                  "--set", "strategy.partitioner=fixed:2", "--set",
                  "train.epochs=1", "--set", "train.eval=false", "--set",
                  "train.progress=none", NULL };
    CHECK(spawn_strata("launch", a, 240, &g_r) == 0);
    CHECKF(strstr(g_r.err, "exactly once: each of the 2 ps tasks applied "
                  "every one of the") != NULL, "ps:\n%s", g_r.err);
}

static void checkpoint(void)
{
    char dir[300], set_dir[400], file[400];
    path_in(dir, sizeof dir, "ckpt");
    snprintf(set_dir, sizeof set_dir, "checkpoint.dir=%s", dir);
    snprintf(file, sizeof file, "%s/ckpt-0000000150.safetensors", dir);
    const char *a[] = { "train.max_steps=150", "train.eval=false",
                        "train.devices=cpu:0", set_dir, NULL };
    CHECK(run("train", g_job, a) == 0);
    char *argv[] = { (char *)spawn_strata_bin(), "inspect", file, NULL };
    spawn_run(argv, 60, &g_r);
    CHECKF(g_r.code == 0 && strstr(g_r.out, "  emb/embeddings ") &&
               strstr(g_r.out, "[40, 8]") && !strstr(g_r.out, "emb/bias"),
           "inspect %s (%d):\n%s%s", file, g_r.code, g_r.out, g_r.err);
    char *ev[] = { "-c", g_job, "--checkpoint", file, NULL };
    CHECK(spawn_strata("eval", ev, 120, &g_r) == 0);
    const char *at = strstr(g_r.out, "test accuracy ");
    double acc = at ? atof(at + strlen("test accuracy ")) : -1.0;
    CHECKF(acc > 0.5, "eval:\n%s", g_r.out);
    /* the same samples named on the command line, with their ids */
    char x[300], y[300], ids[300];
    path_in(x, sizeof x, "test_x.npy");
    path_in(y, sizeof y, "test_y.npy");
    path_in(ids, sizeof ids, "test_ids.npy");
    char *ed[] = { "-c", g_job, "--checkpoint", file, "--data", x,
                   "--labels", y, "--ids", ids, NULL };
    CHECK(spawn_strata("eval", ed, 120, &g_r) == 0);
    at = strstr(g_r.out, "test accuracy ");
    CHECKF(at && atof(at + strlen("test accuracy ")) == acc,
           "eval --ids:\n%s", g_r.out);
}

/* The payload of a version 1.0 .npy file `name` of g_dir: n elements of
 * elem bytes, malloc'd; NULL when it is shorter. */
static void *npy_payload(const char *name, size_t n, size_t elem)
{
    char path[300];
    path_in(path, sizeof path, name);
    FILE *f = fopen(path, "rb");
    unsigned char pre[10];
    void *data = malloc(n * elem);
    int ok = f && data && fread(pre, 1, 10, f) == 10 &&
             fseek(f, 10 + (long)(pre[8] | pre[9] << 8), SEEK_SET) == 0 &&
             fread(data, elem, n, f) == n;
    if (f)
        fclose(f);
    if (!ok)
        free(data);
    return ok ? data : NULL;
}

static void predict(void)
{
    char out[300], ids[300], data[300], file[300];
    path_in(out, sizeof out, "pred.npy");
    path_in(ids, sizeof ids, "test_ids.npy");
    path_in(data, sizeof data, "test_x.npy");
    path_in(file, sizeof file, "ckpt/ckpt-0000000150.safetensors");
    char *a[] = { "-c", g_job, "--checkpoint", file, "--data", data, "--ids",
                  ids, "--out", out, NULL };
    CHECK(spawn_strata("predict", a, 120, &g_r) == 0);
    float *p = npy_payload("pred.npy", NTEST * NCLS, sizeof(float));
    int64_t *y = npy_payload("test_y.npy", NTEST, sizeof(int64_t));
    CHECK(p && y);
    int right = 0;
    for (int i = 0; p && y && i < NTEST; i++) {
        int best = 0;
        for (int c = 1; c < NCLS; c++)
            best = p[i * NCLS + c] > p[i * NCLS + best] ? c : best;
        right += best == y[i];
    }
    printf("predict: %d of %d right\n", right, NTEST);
    CHECKF(right >= NTEST / 2, "predict: %d of %d right", right, NTEST);
    free(p);
    free(y);
    /* without the ids: refused with the reason, nothing written */
    unlink(out);
    char *b[] = { "-c", g_job, "--checkpoint", file, "--data", data, "--out",
                  out, NULL };
    spawn_strata("predict", b, 120, &g_r);
    struct stat st;
    CHECKF(g_r.code != 0 && strstr(g_r.err, "(strata predict: --ids)") &&
               stat(out, &st) != 0, "predict without ids (%d):\n%s",
           g_r.code, g_r.err);
}

/* The job with [data] `key` set to `value`: refused with `want` on stderr,
 * exit 1 (bad data), no dump written. */
static void refused(const char *name, const char *key, const char *value,
                    const char *want)
{
    char set[300], dump[400], path[300];
    snprintf(set, sizeof set, "data.%s=%s", key, value);
    path_in(path, sizeof path, name);
    snprintf(dump, sizeof dump, "debug.dump_vars=%s", path);
    const char *a[] = { "train.epochs=1", "train.devices=cpu:0", set, dump,
                        NULL };
    CHECK(run("train", g_job, a) == 1);
    CHECKF(strstr(g_r.err, want) != NULL, "%s: wanted '%s' in:\n%s", name,
           want, g_r.err);
    struct stat st;
    CHECKF(stat(path, &st) != 0, "%s: %s written", name, path);
}

static void refusals(void)
{
    char want[1200];
    /* an id at the table's size, in sample 17, column 1 */
    int64_t ids[NTRAIN * K];
    for (int i = 0; i < NTRAIN * K; i++)
        ids[i] = i % VOCAB;
    ids[17 * K + 1] = VOCAB;
    write_npy("big_ids.npy", "<i8", NTRAIN, K, ids, sizeof *ids);
    snprintf(want, sizeof want, "%s/big_ids.npy: id 40 of sample 17 (column "
             "1) is outside the embedding's table of 40 rows", g_dir);
    refused("big", "train_ids", "big_ids.npy", want);
    ids[17 * K + 1] = -2;
    write_npy("neg_ids.npy", "<i8", NTRAIN, K, ids, sizeof *ids);
    snprintf(want, sizeof want, "%s/neg_ids.npy: id -2 of sample 17 (column "
             "1) is out of range", g_dir);
    refused("neg", "train_ids", "neg_ids.npy", want);
    float f[NTRAIN * K] = { 0 };
    write_npy("float_ids.npy", "<f4", NTRAIN, K, f, sizeof *f);
    refused("float", "train_ids", "float_ids.npy",
            "float_ids.npy: ids of dtype float32; expected int32 or int64");
    refused("missing", "train_ids", "nope.npy", "nope.npy");
    write_npy("short_ids.npy", "<i8", NTRAIN - 1, K, ids, sizeof *ids);
    refused("short", "train_ids", "short_ids.npy",
            "short_ids.npy holds ids of 1999 samples but the images beside "
            "it hold 2000 samples");
    refused("no_test", "test_ids", "",
            "the test set has no id features, which the model reads ('ids'): "
            "name them in [data] test_ids");
}

int main(void)
{
    if (!mkdtemp(g_dir) || spawn_job_keys() != 0)
        return 1;
    make_data();
    learns();
    equivalence();
    parameter_servers();
    checkpoint();
    predict();
    refusals();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    return CHECK_DONE();
}
