/* [strategy.mwms] overlap and bucket_bytes, end to end through strata
 * launch:
 *  - 3 workers (where the order of a sum matters), the MLP and a CNN, Adam:
 *    after 15 steps the overlapped run's variables are bitwise equal to
 *    the run that all-reduces the same buckets after the backward pass,
 *    and the log says how many buckets there were and that they were
 *    overlapped (and not when overlap = false);
 *  - with shard_optimizer, fp16 compression on the wire, and 2 replicas
 *    per worker (no overlap there: the buckets alone): the same bits with
 *    overlap on and off;
 *  - 2 workers: buckets of any size give the bits of one whole-gradient
 *    all-reduce (a sum of two is the same in either order);
 *  - an elastic job (launch --elastic) trains overlapped;
 *  - overlap = auto, the default, does not overlap when every worker is on
 *    this host (they share its cores) -- the same bits;
 *  - bucket_bytes out of range: one config error naming the key. */
#include <unistd.h>

#include "check.h"
#include "spawn.h"
#include "testutil.h"

static char g_dir[] = "/tmp/strata-overlapXXXXXX";
static spawn_result_t g_r;

static const char *const k_cnn =
    "model.layers=conv2d 8 3 relu, maxpool2d 2, conv2d 16 3 relu, "
    "maxpool2d 2, flatten, dense 32 relu, dense 10 softmax";

/* strata launch -n N with the common settings and `sets` (NULL-ended),
 * the final variables dumped to DIR/name.bin. Returns the exit code. */
static int launch(int n, const char *name, const char *const *sets)
{
    char dump[600], nw[8];
    snprintf(dump, sizeof dump, "debug.dump_vars=%s/%s.bin", g_dir, name);
    snprintf(nw, sizeof nw, "%d", n);
    char *argv[64] = { (char *)spawn_strata_bin(), "launch", "-n", nw,
                       "--set", "strategy.plugin=mwms",
                       "--set", "transport.plugin=zmq",
                       "--set", "train.progress=none", "--set",
                       "train.eval=false", "--set", "data.limit_train=3200",
                       "--set", "train.max_steps=15", "--set",
                       "train.batch_size=48", "--set", dump };
    int a = 20;
    for (int i = 0; sets[i] && a < 62; i++) {
        argv[a++] = "--set";
        argv[a++] = (char *)sets[i];
    }
    spawn_run(argv, 300, &g_r);
    CHECKF(g_r.code == 0, "%s: exit %d:\n%s", name, g_r.code, g_r.err);
    return g_r.code;
}

static void path(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s.bin", g_dir, name);
}

/* overlap = true and false with `sets`: the same bits; `buckets` > 0: the
 * log's bucket count (worker 0), and whether it said "overlapped". */
static void same_bits(const char *what, int n, const char *const *sets,
                      int buckets, int overlapped)
{
    const char *s[24];
    int k = 0;
    for (; sets[k] && k < 20; k++)
        s[k] = sets[k];
    char a[64], b[64], pa[700], pb[700], want[80];
    snprintf(a, sizeof a, "%s-on", what);
    snprintf(b, sizeof b, "%s-off", what);
    s[k] = "strategy.mwms.overlap=true";
    s[k + 1] = NULL;
    launch(n, a, s);
    snprintf(want, sizeof want, "all-reduce in %d buckets of about", buckets);
    const char *line = strstr(g_r.err, want);
    CHECKF(buckets <= 0 || line, "%s: no \"%s\" in\n%s", what, want, g_r.err);
    const char *eol = line ? strchr(line, '\n') : NULL;
    const char *ov = line ? strstr(line, "overlapped with the backward pass")
                          : NULL;
    CHECKF(!line || (overlapped == (ov && ov < eol)),
           "%s: overlapped should be %d:\n%s", what, overlapped, g_r.err);
    s[k] = "strategy.mwms.overlap=false";
    launch(n, b, s);
    CHECKF(!strstr(g_r.err, "overlapped with the backward pass"),
           "%s: overlap = false overlapped:\n%s", what, g_r.err);
    path(pa, sizeof pa, a);
    path(pb, sizeof pb, b);
    int same = same_file(pa, pb);
    CHECKF(same, "%s: the overlapped run's variables differ from the run "
           "without overlap", what);
    if (same)
        printf("%s: %d workers, overlap on and off bitwise equal\n", what, n);
}

int main(void)
{
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
               R_OK) != 0)
        CHECK_SKIP("Fashion-MNIST not installed (apt-get install "
                   "dataset-fashion-mnist)");
    if (mkdtemp(g_dir) == NULL)
        return 2;

    /* The MLP: 4 variables of 401 408, 512, 5 120 and 40 bytes. */
    const char *mlp[] = { "train.devices=cpu:0",
                          "strategy.mwms.bucket_bytes=4096", NULL };
    same_bits("mlp-3", 3, mlp, 2, 1);
    const char *cnn[] = { "train.devices=cpu:0", k_cnn,
                          "strategy.mwms.bucket_bytes=1000", NULL };
    same_bits("cnn-3", 3, cnn, 4, 1);
    const char *shard[] = { "train.devices=cpu:0", k_cnn,
                            "strategy.mwms.bucket_bytes=1000",
                            "strategy.mwms.shard_optimizer=true", NULL };
    same_bits("cnn-3-shard", 3, shard, 4, 1);
    const char *f16[] = { "train.devices=cpu:0", k_cnn,
                          "strategy.mwms.bucket_bytes=1000",
                          "transport.zmq.compression=fp16", NULL };
    same_bits("cnn-3-fp16", 3, f16, 4, 1);
    const char *two[] = { "train.devices=cpu:0, cpu:1", k_cnn,
                          "strategy.mwms.bucket_bytes=1000", NULL };
    same_bits("cnn-2x2", 2, two, 4, 0);

    /* 2 workers: the buckets change nothing. */
    const char *whole[] = { "train.devices=cpu:0", k_cnn,
                            "strategy.mwms.bucket_bytes=0", NULL };
    launch(2, "cnn-2-whole", whole);
    CHECKF(strstr(g_r.err, "all-reduce in 1 bucket of about 0 bytes") &&
           !strstr(g_r.err, "overlapped"),
           "bucket_bytes = 0: not one bucket:\n%s", g_r.err);
    const char *small[] = { "train.devices=cpu:0", k_cnn,
                            "strategy.mwms.bucket_bytes=1000", NULL };
    launch(2, "cnn-2-buckets", small);
    char pa[700], pb[700];
    path(pa, sizeof pa, "cnn-2-whole");
    path(pb, sizeof pb, "cnn-2-buckets");
    CHECKF(same_file(pa, pb), "2 workers: the bucketed run differs from one "
           "whole-gradient all-reduce");

    /* elastic jobs overlap too */
    char *el[] = { (char *)spawn_strata_bin(), "launch", "-n", "2",
                   "--elastic", "2:2", "--set", "strategy.plugin=mwms",
                   "--set", "strategy.mwms.overlap=true",
                   "--set", "train.devices=cpu:0",
                   "--set", "data.limit_train=640", "--set",
                   "train.eval=false", "--set", "train.progress=none",
                   "--set", "strategy.mwms.bucket_bytes=4096", NULL };
    spawn_run(el, 300, &g_r);
    CHECKF(g_r.code == 0 && strstr(g_r.err, "all-reduce in 2 buckets of about "
                                   "4096 bytes, overlapped"),
           "elastic: exit %d\n%s", g_r.code, g_r.err);

    /* overlap = auto (the default) with every worker on this host: off */
    const char *autos[] = { "train.devices=cpu:0", k_cnn,
                            "strategy.mwms.bucket_bytes=1K", NULL };
    launch(2, "cnn-2-auto", autos);
    CHECKF(strstr(g_r.err, "all-reduce in 4 buckets of about 1024 bytes "
                           "(overlap = auto: every worker on this host)"),
           "overlap = auto on one host:\n%s", g_r.err);
    path(pa, sizeof pa, "cnn-2-auto");
    CHECKF(same_file(pa, pb), "overlap = auto: differs from the bucketed run");

    /* a bad value: one error naming the key */
    const char *bad[] = { "strategy.mwms.bucket_bytes=-1", NULL };
    char *argv[] = { (char *)spawn_strata_bin(), "launch", "-n", "2", "--set",
                     "strategy.plugin=mwms", "--set", (char *)bad[0], NULL };
    spawn_run(argv, 120, &g_r);
    CHECKF(g_r.code != 0 && strstr(g_r.err, "bucket_bytes"),
           "bucket_bytes = -1: exit %d\n%s", g_r.code, g_r.err);

    rm_tree(g_dir);
    return CHECK_DONE();
}
