/* The activation layers and global_avgpool2d through the strata binary on
 * Fashion-MNIST, the way users run them:
 *  - a CNN with separate relu and leaky_relu layers and global average
 *    pooling ("conv2d 8 3, relu, conv2d 8 3, leaky_relu, global_avgpool2d,
 *    dense 10"), one epoch of 2000 samples: mirrored with 2 replicas
 *    follows 1 replica within 1e-5 relative L2 per variable, the replicas
 *    bitwise equal after every step (debug.check_sync); the banner shows
 *    each layer's output shape and 0 parameters for the new ones;
 *  - an MLP with gelu and sigmoid layers ("dense 64, gelu, dense 64,
 *    sigmoid, dense 10"): its training loss falls epoch after epoch, from
 *    below ln 10 after the first;
 *  - the checkpoint of such a model holds the variables of the layers that
 *    have some (and their Adam slots), nothing for the others, and a run
 *    resumes from it;
 *  - a softmax layer last is refused with the reason. */
#include <math.h>

#include "check.h"
#include "dumps.h"
#include "spawn.h"

#define CNN "conv2d 8 3, relu, conv2d 8 3, leaky_relu, global_avgpool2d, " \
            "dense 10"
static const size_t k_cnn_counts[] = { 3 * 3 * 1 * 8, 8, 3 * 3 * 8 * 8, 8,
                                       8 * 10, 10 };
#define MLP "dense 64, gelu, dense 64, sigmoid, dense 10"

static char g_dir[] = "/tmp/strata-layersXXXXXX";
static spawn_result_t g_r;

/* `strata train` with `layers` on 2000 samples, no evaluation, then the
 * NULL-terminated `more` settings; its output is shown unless it exits
 * `want`. */
static int train(const char *layers, const char *const *more, int want)
{
    char model[300];
    snprintf(model, sizeof model, "model.layers=%s", layers);
    const char *common[] = { model, "data.limit_train=2000",
                             "train.batch_size=32", "train.eval=false",
                             "train.progress=none", NULL };
    char *argv[48] = { (char *)spawn_strata_bin(), "train" };
    int a = 2;
    for (int i = 0; common[i]; i++) {
        argv[a++] = "--set";
        argv[a++] = (char *)common[i];
    }
    for (int i = 0; more[i] && a < 44; i++) {
        argv[a++] = "--set";
        argv[a++] = (char *)more[i];
    }
    argv[a] = NULL;
    spawn_run(argv, 300, &g_r);
    if (g_r.code != want)
        fprintf(stderr, "strata train (%s) exited %d:\n%s\n", layers,
                g_r.code, g_r.err);
    return g_r.code;
}

static void banner_has(const char *name, const char *spec, const char *shape,
                       long params)
{
    char line[160];
    snprintf(line, sizeof line, " %-18s %-36s %-18s %10ld\n", name, spec,
             shape, params);
    CHECKF(strstr(g_r.out, line) != NULL, "banner lacks '%s':\n%s", line,
           g_r.out);
}

static void cnn_equivalence(void)
{
    char one[640], two[640];
    snprintf(one, sizeof one, "debug.dump_vars=%s/one.bin", g_dir);
    snprintf(two, sizeof two, "debug.dump_vars=%s/two.bin", g_dir);
    const char *a[] = { "train.epochs=1", "train.devices=cpu:0", one, NULL };
    CHECK(train(CNN, a, 0) == 0);
    CHECKF(strstr(g_r.out, "total: 754 parameters") != NULL, "%s", g_r.out);
    banner_has("relu_1", "relu", "(26, 26, 8)", 0);
    banner_has("leaky_relu_3", "leaky_relu", "(24, 24, 8)", 0);
    banner_has("global_avgpool2d_4", "global_avgpool2d", "(8)", 0);
    banner_has("dense_5", "dense 10", "(10)", 90);
    CHECKF(strstr(g_r.out, "done: 1 epoch, ") != NULL, "%s", g_r.out);
    const char *b[] = { "train.epochs=1", "train.devices=cpu:0, cpu:1",
                        "debug.check_sync=true", two, NULL };
    CHECK(train(CNN, b, 0) == 0);
    dump_compare_model(one + 16, two + 16,
                       "CNN with relu / leaky_relu / global_avgpool2d layers, "
                       "mirrored 2 replicas vs 1, 1 epoch", 1e-5,
                       k_cnn_counts, 6);
}

/* The loss column of the metrics CSV, one value per epoch. */
static int csv_losses(const char *path, double *loss, int max)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f) && n < max) {
        int epoch;
        long long steps;
        double l;
        if (sscanf(line, "%d,%lld,%lf,", &epoch, &steps, &l) == 3)
            loss[n++] = l;
    }
    fclose(f);
    return n;
}

static void mlp_learns(void)
{
    char csv[640], set_csv[700];
    snprintf(csv, sizeof csv, "%s/mlp.csv", g_dir);
    snprintf(set_csv, sizeof set_csv, "train.metrics_csv=%s", csv);
    const char *a[] = { "train.epochs=3", "train.devices=cpu:0, cpu:1",
                        set_csv, NULL };
    CHECK(train(MLP, a, 0) == 0);
    CHECKF(strstr(g_r.out, "total: 55050 parameters") != NULL, "%s",
           g_r.out);
    double loss[3] = { 0 };
    int n = csv_losses(csv, loss, 3);
    printf("gelu / sigmoid MLP: train loss %.4f, %.4f, %.4f by epoch\n",
           loss[0], loss[1], loss[2]);
    CHECKF(n == 3, "%s: %d epochs of losses", csv, n);
    CHECKF(loss[0] < log(10.0) && loss[1] < loss[0] && loss[2] < loss[1],
           "gelu / sigmoid MLP: loss %.4f, %.4f, %.4f does not fall",
           loss[0], loss[1], loss[2]);
}

/* Checkpoints: the layers without variables leave no tensor, and a second
 * run resumes from the first's checkpoint. */
static void checkpoints(void)
{
    char dir[640], set_dir[700], file[700];
    snprintf(dir, sizeof dir, "%s/ckpt", g_dir);
    snprintf(set_dir, sizeof set_dir, "checkpoint.dir=%s", dir);
    snprintf(file, sizeof file, "%s/ckpt-0000000010.safetensors", dir);
    const char *spec = "conv2d 8 3, relu, conv2d 8 3, leaky_relu alpha=0.1, "
                       "global_avgpool2d, gelu, softmax, dense 10";
    const char *a[] = { "train.epochs=1", "train.max_steps=10", set_dir,
                        NULL };
    CHECK(train(spec, a, 0) == 0);
    char *argv[] = { (char *)spawn_strata_bin(), "inspect", file, NULL };
    spawn_run(argv, 60, &g_r);
    CHECKF(g_r.code == 0 && strstr(g_r.out, ": 18 tensors, ") &&
               strstr(g_r.out, "  conv2d_2/bias ") &&
               strstr(g_r.out, "  dense_7/kernel ") &&
               strstr(g_r.out, "  optimizer/v/dense_7/bias ") &&
               !strstr(g_r.out, "relu_1") &&
               !strstr(g_r.out, "leaky_relu_3") &&
               !strstr(g_r.out, "global_avgpool2d_4") &&
               !strstr(g_r.out, "gelu_5") && !strstr(g_r.out, "softmax_6"),
           "inspect %s (%d):\n%s%s", file, g_r.code, g_r.out, g_r.err);
    const char *b[] = { "train.epochs=1", "train.max_steps=20", set_dir,
                        NULL };
    CHECK(train(spec, b, 0) == 0);
    CHECKF(strstr(g_r.out, "resumed from ") &&
               strstr(g_r.out, "ckpt-0000000010.safetensors: epoch 0, batch "
                      "10, step 10"),
           "%s%s", g_r.out, g_r.err);
}

static void softmax_last_refused(void)
{
    const char *a[] = { "train.epochs=1", NULL };
    CHECK(train("dense 64, softmax, dense 10, softmax", a, 2) == 2);
    CHECKF(strstr(g_r.err, "--set: [model] layers: layer 4 'softmax': a "
                  "softmax layer cannot be the last one") != NULL,
           "%s", g_r.err);
}

int main(void)
{
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
               R_OK) != 0)
        CHECK_SKIP("Fashion-MNIST not installed");
    CHECK(mkdtemp(g_dir) != NULL);
    cnn_equivalence();
    mlp_learns();
    checkpoints();
    softmax_last_refused();
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    CHECK(system(cmd) == 0);
    return CHECK_DONE();
}
