/* [strategy.mirrored] and [strategy.mwms] shard_optimizer (ZeRO stage 1),
 * end to end through the strata binary (mwms through strata launch):
 *  - 2 and 3 replicas (Adam, AdamW, momentum; mean and sum; the MLP and a
 *    CNN): after 50 steps the sharded run's variables are bitwise equal to
 *    the unsharded run's (so within 1e-6 relative L2 too), with
 *    debug.check_sync comparing every replica's copy after every step;
 *  - with [optimizer] clip_norm (every replica measures the whole summed
 *    gradient): bitwise equal to the unsharded run, within 1e-6 relative
 *    L2 of central's (which sums the norm chunk by chunk), and clipping
 *    did change the result;
 *  - the banner's placed bytes: n x (1 + slots) model sizes unsharded,
 *    n + slots sharded;
 *  - central.so, whose optimizer state is partitioned over the replica
 *    threads by construction, gives the same bits and places no more;
 *  - checkpoints: a sharded run's file is byte for byte the unsharded
 *    run's, and a checkpoint of either resumes in the other mode to the
 *    bits of an uninterrupted run;
 *  - mwms, 2 workers of 1 and of 2 replicas (Adam; momentum with
 *    clip_norm): bitwise equal to unsharded, worker 0 places its shard's
 *    slots only, the checkpoint is the same file and resumes in the other
 *    mode to the uninterrupted run's bits; elastic refuses it;
 *  - mwms over the zmq ring (shm = off): reduce-scatter, step, all-gather;
 *    2 workers bitwise, 3 within 1e-6 of unsharded; with clip_norm the
 *    all-reduce path;
 *  - shard_optimizer = true with a bad value: one config error. */
#include <unistd.h>

#include "check.h"
#include "dumps.h"
#include "spawn.h"
#include "testutil.h"

static char g_dir[] = "/tmp/strata-shardXXXXXX";
static spawn_result_t g_r;
static long g_model_bytes; /* the banner's "the model's N bytes" */

/* strata CMD (train, or launch -n 2 for mwms) with the common settings,
 * `sets` (NULL-ended) and a dump of the final variables to DIR/name.bin;
 * returns the placed bytes (0 on failure, which is checked). */
static long run_n(const char *cmd, const char *nw, const char *name,
                  const char *const *sets)
{
    char dump[600];
    snprintf(dump, sizeof dump, "debug.dump_vars=%s/%s.bin", g_dir, name);
    int two = !strcmp(cmd, "launch");
    char *argv[64] = { (char *)spawn_strata_bin(), (char *)cmd, "-n",
                       (char *)nw,
                       "--set", "train.progress=none", "--set",
                       "train.eval=false", "--set", "data.limit_train=3200",
                       "--set", "debug.check_sync=true", "--set", dump };
    if (!two)
        for (int i = 2; i < 14; i++)
            argv[i] = argv[i + 2];
    int a = two ? 14 : 12;
    for (int i = 0; sets[i] && a < 62; i++) {
        argv[a++] = "--set";
        argv[a++] = (char *)sets[i];
    }
    spawn_run(argv, 300, &g_r);
    CHECKF(g_r.code == 0, "%s: exit %d:\n%s", name, g_r.code, g_r.err);
    const char *p = strstr(g_r.out, " placed ");
    const char *m = strstr(g_r.out, "the model's ");
    g_model_bytes = m ? atol(m + strlen("the model's ")) : 0;
    return g_r.code == 0 && p ? atol(p + strlen(" placed ")) : 0;
}

static long run(const char *cmd, const char *name, const char *const *sets)
{
    return run_n(cmd, "2", name, sets);
}

static long train(const char *name, const char *const *sets)
{
    return run("train", name, sets);
}

static void path(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s.bin", g_dir, name);
}

/* Sharded against unsharded: bitwise, the placed bytes as predicted. */
static void equivalence(const char *what, const char *const *sets, int n,
                        int slots, const size_t *counts, int nvars,
                        int bitwise)
{
    const char *s[24];
    int k = 0;
    for (; sets[k] && k < 20; k++)
        s[k] = sets[k];
    char a[64], b[64], pa[700], pb[700];
    snprintf(a, sizeof a, "%s-full", what);
    snprintf(b, sizeof b, "%s-shard", what);
    s[k] = "strategy.mirrored.shard_optimizer=false";
    s[k + 1] = NULL;
    long full = train(a, s);
    s[k] = "strategy.mirrored.shard_optimizer=true";
    long shard = train(b, s);
    path(pa, sizeof pa, a);
    path(pb, sizeof pb, b);
    CHECKF(!bitwise || same_file(pa, pb), "%s: sharded variables differ "
           "from unsharded", what);
    dump_compare_model(pa, pb, what, 1e-6, counts, nvars);
    printf("%s: placed %ld bytes unsharded, %ld sharded (%.2f x)\n", what,
           full, shard, full ? (double)shard / (double)full : 0.0);
    long model = g_model_bytes;
    CHECKF(model > 0 && full == n * (1 + slots) * model,
           "%s: unsharded placed %ld, model %ld", what, full, model);
    CHECKF(model > 0 && shard == (n + slots) * model,
           "%s: sharded placed %ld, want %ld", what, shard,
           (n + slots) * model);
}

static void equivalences(void)
{
    static const char *const two[] = { "train.max_steps=50",
                                       "train.devices=cpu:0, cpu:1", NULL };
    equivalence("adam-2", two, 2, 2, dump_counts, DUMP_NVARS, 1);
    static const char *const adamw[] = { "train.max_steps=50",
                                         "train.devices=cpu:0, cpu:1",
                                         "optimizer.weight_decay=0.05", NULL };
    equivalence("adamw-2", adamw, 2, 2, dump_counts, DUMP_NVARS, 1);
    static const char *const three[] = { "train.max_steps=50",
                                         "train.devices=cpu:0, cpu:1, cpu:2",
                                         "train.batch_size=30",
                                         "optimizer.name=momentum",
                                         "optimizer.lr=0.01",
                                         "strategy.mirrored.reduce_op=sum",
                                         NULL };
    equivalence("momentum-3-sum", three, 3, 1, dump_counts, DUMP_NVARS, 1);
    /* a CNN with dropout: 3x3x1x8 + 8, 13*13*8*10 + 10 */
    static const size_t cnn_counts[] = { 72, 8, 13520, 10 };
    static const char *const cnn[] = {
        "train.max_steps=50", "train.devices=cpu:0, cpu:1",
        "model.layers=conv2d 8 3 relu, maxpool2d 2, flatten, dropout 0.25, "
        "dense 10", NULL };
    equivalence("cnn-2", cnn, 2, 2, cnn_counts, 4, 1);

    /* central: the optimizer state is already one partitioned copy */
    static const char *const central[] = { "train.max_steps=50",
                                           "train.devices=cpu:0, cpu:1",
                                           "strategy.plugin=central", NULL };
    long placed = train("central-2", central);
    char pa[700], pb[700];
    path(pa, sizeof pa, "central-2");
    path(pb, sizeof pb, "adam-2-shard");
    CHECKF(same_file(pa, pb), "central differs from mirrored sharded");
    CHECKF(placed == 3 * g_model_bytes, "central placed %ld", placed);

    /* clip_norm: every replica measures the whole summed gradient in one
     * pass, as unsharded: the same bits */
    static const char *const clip[] = { "train.max_steps=50",
                                        "train.devices=cpu:0, cpu:1",
                                        "optimizer.clip_norm=0.05", NULL };
    equivalence("clip-2", clip, 2, 2, dump_counts, DUMP_NVARS, 1);
    static const char *const clip_central[] = { "train.max_steps=50",
                                                "train.devices=cpu:0, cpu:1",
                                                "optimizer.clip_norm=0.05",
                                                "strategy.plugin=central",
                                                NULL };
    train("clip-central-2", clip_central);
    /* central adds its chunks' sums of squares: the same norm to rounding */
    path(pa, sizeof pa, "clip-central-2");
    path(pb, sizeof pb, "clip-2-shard");
    dump_compare_model(pa, pb, "clip_norm: central vs mirrored sharded", 1e-6,
                       dump_counts, DUMP_NVARS);
    path(pa, sizeof pa, "adam-2-full");
    path(pb, sizeof pb, "clip-2-full");
    CHECKF(!same_file(pa, pb), "clip_norm = 0.05 changed nothing");
}

/* mwms, 2 workers (strata launch): worker w keeps the optimizer state of
 * its 1/2 of the variables; the bits of the unsharded run (clip_norm too:
 * each worker holds the whole reduced gradient, so the norm is the same
 * sum), and the banner's placed bytes: n variable copies and the slots of
 * worker 0's shard. `n` replicas per worker, `slots` optimizer slots. */
static void mwms_equivalence(const char *what, const char *const *sets,
                             int n, int slots)
{
    const char *s[24] = { "strategy.plugin=mwms" };
    int k = 1;
    for (; sets[k - 1] && k < 20; k++)
        s[k] = sets[k - 1];
    char a[64], b[64], pa[700], pb[700];
    snprintf(a, sizeof a, "%s-full", what);
    snprintf(b, sizeof b, "%s-shard", what);
    s[k] = "strategy.mwms.shard_optimizer=false";
    s[k + 1] = NULL;
    long full = run("launch", a, s);
    s[k] = "strategy.mwms.shard_optimizer=true";
    long shard = run("launch", b, s);
    path(pa, sizeof pa, a);
    path(pb, sizeof pb, b);
    CHECKF(same_file(pa, pb), "%s: sharded variables differ from unsharded",
           what);
    long model = g_model_bytes, count = model / 4;
    long lines = (count + 15) / 16, own = lines / 2 * 16; /* worker 0's */
    printf("%s: placed %ld bytes unsharded, %ld sharded (%.2f x)\n", what,
           full, shard, full ? (double)shard / (double)full : 0.0);
    CHECKF(model > 0 && full == n * (1 + slots) * model,
           "%s: unsharded placed %ld, model %ld", what, full, model);
    CHECKF(shard == n * model + slots * own * 4, "%s: sharded placed %ld, "
           "want %ld", what, shard, n * model + slots * own * 4);
}

/* mwms over the zmq ring (shm = off): shard_optimizer takes the ring's
 * halves -- reduce-scatter, step the shard, all-gather -- where no
 * clip_norm needs the whole gradient: 2 workers give the unsharded bits
 * (a sum of two is the same either way), 3 workers the unsharded run
 * within 1e-6 relative L2 (the sums go in the shards' order); with
 * clip_norm it all-reduces as on one host's shared memory. */
static void mwms_halves(void)
{
    static const char *const halves_line =
        "shard_optimizer: reduce-scatter, step the shard, all-gather";
    static const char *const cases[][2] = { { "2", "mwms-tcp-2" },
                                            { "3", "mwms-tcp-3" } };
    for (int c = 0; c < 2; c++) {
        const char *nw = cases[c][0], *what = cases[c][1];
        const char *s[] = { "strategy.plugin=mwms", "transport.zmq.shm=off",
                            "train.max_steps=50", "train.devices=cpu:0",
                            "train.batch_size=48",
                            "strategy.mwms.shard_optimizer=false", NULL };
        char a[64], b[64], pa[700], pb[700];
        snprintf(a, sizeof a, "%s-full", what);
        snprintf(b, sizeof b, "%s-shard", what);
        run_n("launch", nw, a, s);
        s[5] = "strategy.mwms.shard_optimizer=true";
        run_n("launch", nw, b, s);
        CHECKF(strstr(g_r.err, halves_line), "%s: no \"%s\":\n%s", what,
               halves_line, g_r.err);
        path(pa, sizeof pa, a);
        path(pb, sizeof pb, b);
        CHECKF(c == 1 || same_file(pa, pb), "%s: the reduce-scatter run "
               "differs from the unsharded run", what);
        dump_compare(pa, pb, what, 1e-6);
    }
    /* the reduce-scatter in buckets overlapped with the backward pass: the
     * bits of one whole reduce-scatter after it */
    const char *ov[] = { "strategy.plugin=mwms", "transport.zmq.shm=off",
                         "train.max_steps=50", "train.devices=cpu:0",
                         "train.batch_size=48",
                         "strategy.mwms.shard_optimizer=true",
                         "strategy.mwms.overlap=true",
                         "strategy.mwms.bucket_bytes=4K", NULL };
    run_n("launch", "3", "mwms-tcp-3-overlap", ov);
    CHECKF(strstr(g_r.err, "reduce-scatter in 2 buckets of about 4096 bytes, "
                           "overlapped with the backward pass"),
           "no overlapped reduce-scatter:\n%s", g_r.err);
    char pa[700], pb[700];
    path(pa, sizeof pa, "mwms-tcp-3-shard");
    path(pb, sizeof pb, "mwms-tcp-3-overlap");
    CHECKF(same_file(pa, pb), "the overlapped reduce-scatter in buckets "
           "differs from one reduce-scatter after the backward pass");
    const char *clip[] = { "strategy.plugin=mwms", "transport.zmq.shm=off",
                           "train.max_steps=20", "train.devices=cpu:0",
                           "optimizer.clip_norm=0.05",
                           "strategy.mwms.shard_optimizer=true", NULL };
    run("launch", "mwms-tcp-clip", clip);
    CHECKF(strstr(g_r.err, "shard_optimizer: all-reduce, step the shard, one "
                  "broadcast per worker"),
           "clip_norm: the whole gradient is needed, yet:\n%s", g_r.err);
}

static void mwms_cases(void)
{
    static const char *const adam[] = { "train.max_steps=50",
                                        "train.devices=cpu:0", NULL };
    mwms_equivalence("mwms-adam", adam, 1, 2);
    static const char *const clip[] = { "train.max_steps=50",
                                        "train.devices=cpu:0, cpu:1",
                                        "optimizer.name=momentum",
                                        "optimizer.lr=0.01",
                                        "optimizer.clip_norm=0.05", NULL };
    mwms_equivalence("mwms-2x2-momentum-clip", clip, 2, 1);
    /* checkpoints: the same file either way, and each resumes the other */
    static const char *const mode[2] = { "strategy.mwms.shard_optimizer=false",
                                         "strategy.mwms.shard_optimizer=true" };
    static const char *const ref[] = { "strategy.plugin=mwms",
                                       "train.epochs=2",
                                       "train.devices=cpu:0", NULL };
    run("launch", "mwms-ref", ref);
    char set_ck[2][700], f[2][700];
    for (int m = 0; m < 2; m++) {
        snprintf(set_ck[m], sizeof set_ck[m], "checkpoint.dir=%s/mwms-ck%d",
                 g_dir, m);
        const char *first[] = { "strategy.plugin=mwms", "train.epochs=1",
                                "train.devices=cpu:0", set_ck[m], mode[m],
                                NULL };
        run("launch", m ? "mwms-e1-shard" : "mwms-e1-full", first);
        snprintf(f[m], sizeof f[m], "%s/mwms-ck%d/ckpt-0000000100.safetensors",
                 g_dir, m);
    }
    CHECKF(same_file(f[0], f[1]), "mwms: the sharded run's checkpoint "
           "differs from the unsharded run's");
    for (int m = 0; m < 2; m++) {
        const char *second[] = { "strategy.plugin=mwms", "train.epochs=2",
                                 "train.devices=cpu:0", set_ck[m], mode[!m],
                                 NULL };
        const char *name = m ? "mwms-shard-to-full" : "mwms-full-to-shard";
        run("launch", name, second);
        char pa[700], pb[700];
        path(pa, sizeof pa, "mwms-ref");
        path(pb, sizeof pb, name);
        CHECKF(strstr(g_r.out, "resumed from ") && same_file(pa, pb),
               "%s: not resumed, or differs from the uninterrupted run", name);
    }
    /* elastic: a lost worker would take its shard of the state along */
    char *bad[] = { (char *)spawn_strata_bin(), "launch", "--elastic", "2:2",
                    "--set", "strategy.plugin=mwms", "--set",
                    "strategy.mwms.shard_optimizer=true", "--set",
                    "data.limit_train=320", NULL };
    spawn_run(bad, 120, &g_r);
    CHECKF(g_r.code != 0 && strstr(g_r.err, "shard_optimizer = true with "
                                   "elastic = true"),
           "elastic + shard_optimizer: exit %d\n%s", g_r.code, g_r.err);
}

/* A checkpoint written after epoch 1 by one mode, resumed for epoch 2 by
 * the other: the bits of an uninterrupted 2-epoch run. */
static void cross_resume(void)
{
    static const char *const ref[] = { "train.epochs=2",
                                       "train.devices=cpu:0, cpu:1", NULL };
    static const char *const mode[2] = {
        "strategy.mirrored.shard_optimizer=false",
        "strategy.mirrored.shard_optimizer=true" };
    char set_ck[2][700], f[2][700];
    train("resume-ref", ref);
    for (int m = 0; m < 2; m++) {
        snprintf(set_ck[m], sizeof set_ck[m], "checkpoint.dir=%s/ck%d", g_dir,
                 m);
        const char *first[] = { "train.epochs=1", "train.devices=cpu:0, cpu:1",
                                set_ck[m], mode[m], NULL };
        train(m ? "epoch1-shard" : "epoch1-full", first);
        snprintf(f[m], sizeof f[m], "%s/ck%d/ckpt-0000000100.safetensors",
                 g_dir, m);
        CHECKF(access(f[m], R_OK) == 0, "no checkpoint %s", f[m]);
    }
    /* the format: the same bytes, whichever mode wrote them */
    CHECKF(same_file(f[0], f[1]), "the sharded run's checkpoint differs from "
           "the unsharded run's");
    for (int m = 0; m < 2; m++) {
        const char *second[] = { "train.epochs=2", "train.devices=cpu:0, cpu:1",
                                 set_ck[m], mode[!m], NULL };
        const char *name = m ? "resumed-shard-to-full" : "resumed-full-to-shard";
        train(name, second);
        CHECKF(strstr(g_r.out, "resumed from ") != NULL, "%s: not resumed:\n%s",
               name, g_r.out);
        char pa[700], pb[700];
        path(pa, sizeof pa, "resume-ref");
        path(pb, sizeof pb, name);
        CHECKF(same_file(pa, pb), "%s: differs from the uninterrupted run",
               name);
        printf("%s: bitwise equal to the uninterrupted run\n", name);
    }
}

/* argv[1]: "mirrored" (one process: mirrored and central, the resumes
 * across, a bad value) or "mwms" (strata launch); none: both. ctest runs
 * the halves as two tests, side by side (they are long under TSan). */
int main(int argc, char **argv)
{
    const char *part = argc > 1 ? argv[1] : "";
    int one = !*part || !strcmp(part, "mirrored");
    int multi = !*part || !strcmp(part, "mwms");
    if (!one && !multi) {
        fprintf(stderr, "usage: %s [mirrored|mwms]\n", argv[0]);
        return 2;
    }
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
               R_OK) != 0)
        CHECK_SKIP("Fashion-MNIST not installed (apt-get install "
                   "dataset-fashion-mnist)");
    if (mkdtemp(g_dir) == NULL)
        return 2;
    if (one) {
        equivalences();
        cross_resume();
    }
    if (multi) {
        mwms_cases();
        mwms_halves();
    }

    char *bad[] = { (char *)spawn_strata_bin(), "train", "--set",
                    "strategy.mirrored.shard_optimizer=maybe", "--set",
                    "train.max_steps=2", NULL };
    spawn_run(bad, 60, &g_r);
    CHECKF(g_r.code != 0 && strstr(g_r.err, "shard_optimizer"),
           "bad value: exit %d:\n%s", g_r.code, g_r.err);

    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    return CHECK_DONE();
}
