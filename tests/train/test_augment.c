/* [data] augment_flip and augment_crop_padding end to end through the
 * strata binary (Fashion-MNIST, 50 steps of 32, sgd: Adam divides the
 * gradient of a pixel that a crop's zero border leaves near 0 in most
 * samples by its own tiny scale, and so magnifies the rounding in which a
 * split batch's sums differ, to 2e-4 here):
 *  - 2 mirrored replicas follow 1 within 1e-5 relative L2 per variable
 *    (the equivalence invariant; replicas bitwise equal at every step,
 *    debug.check_sync), and central on 2 replicas and mwms on 2 workers of
 *    1 replica (strata launch), which split the same global batch
 *    otherwise, end on mirrored's variables bit for bit: every sample is
 *    drawn the same wherever it is filled;
 *  - augmentation changes the training, flips other than crops;
 *  - hostile: flat samples, a padding of the image's size, a negative
 *    padding: one error each, exit 2. */
#include "check.h"
#include "dumps.h"
#include "spawn.h"
#include "testutil.h"

#define COMMON "--set", "train.epochs=1", "--set", "data.limit_train=1600",  \
    "--set", "train.batch_size=32", "--set", "train.eval=false", "--set",    \
    "train.progress=none", "--set", "optimizer.name=sgd", "--set",           \
    "optimizer.lr=0.05"
#define AUG "--set", "data.augment_flip=true", "--set",                      \
    "data.augment_crop_padding=4"

static spawn_result_t g_r;

static int run_(const char *cmd, char *const *args)
{
    return spawn_strata(cmd, args, 120, &g_r);
}
#define train(...) run_("train", (char *const[]){ COMMON, __VA_ARGS__, NULL })
#define launch(...) run_("launch", (char *const[]){ __VA_ARGS__, COMMON, NULL })

static char *dump(const char *name)
{
    return set_path("debug.dump_vars", name);
}

/* An IDX file of u8 values: dims (big-endian), then the bytes. */
static void write_idx(const char *name, int ndim, const uint32_t *dims,
                      const uint8_t *data, size_t n)
{
    uint8_t *buf = malloc(4 + 4 * (size_t)ndim + n);
    size_t k = 0;
    buf[k++] = 0;
    buf[k++] = 0;
    buf[k++] = 0x08;
    buf[k++] = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++)
        for (int b = 3; b >= 0; b--)
            buf[k++] = (uint8_t)(dims[i] >> (8 * b));
    memcpy(buf + k, data, n);
    write_file(tmp_path(name), buf, k + n);
    free(buf);
}

int main(void)
{
    tmp_make("augment");

    CHECK(train(AUG, "--set", "train.devices=cpu:0", "--set",
                dump("one.bin")) == 0);
    CHECKF(strstr(g_r.out, "augmentation: random horizontal flips, pad 4 + "
                           "random 28 x 28 crops, training samples only\n"),
           "%s", g_r.out);
    CHECK(train(AUG, "--set", "train.devices=cpu:0, cpu:1", "--set",
                "debug.check_sync=true", "--set", dump("two.bin")) == 0);
    dump_compare(tmp_path("one.bin"), tmp_path("two.bin"),
                 "augmentation: 2 replicas vs 1", 1e-5);
    CHECK(train(AUG, "--set", "train.devices=cpu:0, cpu:1", "--set",
                "strategy.plugin=central", "--set", dump("central.bin")) == 0);
    CHECKF(same_file(tmp_path("two.bin"), tmp_path("central.bin")),
           "central differs from mirrored");
    CHECK(launch("-n", "2", AUG, "--set", "strategy.plugin=mwms", "--set",
                 "train.devices=cpu:0", "--set", dump("mwms.bin")) == 0);
    CHECKF(same_file(tmp_path("two.bin"), tmp_path("mwms.bin")),
           "mwms (2 workers) differs from mirrored (2 replicas)");

    /* it does something, and each key its own */
    CHECK(train("--set", "train.devices=cpu:0", "--set",
                dump("plain.bin")) == 0);
    CHECK(!strstr(g_r.out, "augmentation:"));
    CHECK(train("--set", "train.devices=cpu:0", "--set",
                "data.augment_flip=true", "--set", dump("flip.bin")) == 0);
    CHECK(train("--set", "train.devices=cpu:0", "--set",
                "data.augment_crop_padding=4", "--set", dump("crop.bin")) == 0);
    CHECK(!same_file(tmp_path("plain.bin"), tmp_path("one.bin")) &&
          !same_file(tmp_path("plain.bin"), tmp_path("flip.bin")) &&
          !same_file(tmp_path("plain.bin"), tmp_path("crop.bin")) &&
          !same_file(tmp_path("flip.bin"), tmp_path("crop.bin")));

    /* hostile: flat samples (n, 20) */
    enum { N = 64, DIM = 20 };
    uint8_t x[N * DIM], y[N];
    for (int i = 0; i < N * DIM; i++)
        x[i] = (uint8_t)(i * 13);
    for (int i = 0; i < N; i++)
        y[i] = (uint8_t)(i % 10);
    write_idx("flat-x", 2, (const uint32_t[]){ N, DIM }, x, sizeof x);
    write_idx("flat-y", 1, (const uint32_t[]){ N }, y, sizeof y);
    char dir[600];
    snprintf(dir, sizeof dir, "data.dir=%s", tmp_path(""));
    CHECK(train("--set", dir, "--set", "data.train_images=flat-x", "--set",
                "data.train_labels=flat-y", "--set", "data.test_images=flat-x",
                "--set", "data.test_labels=flat-y", "--set",
                "data.augment_flip=true") == 2);
    CHECKF(strstr(g_r.err, "--set: [data] augment_flip = true needs images "
                           "(n, h, w) or (n, h, w, c); the training samples "
                           "are flat (n, 20)") &&
           count_of(g_r.err, "error") == 1, "%s", g_r.err);
    /* a padding of the image's size, a negative one */
    CHECK(train("--set", "data.augment_crop_padding=28") == 2);
    CHECKF(strstr(g_r.err, "[data] augment_crop_padding = 28: the padding "
                           "must be less than the images' height and width "
                           "(28 x 28)") && count_of(g_r.err, "error") == 1, "%s",
           g_r.err);
    CHECK(train("--set", "data.augment_crop_padding=-1") == 2);
    CHECKF(strstr(g_r.err, "[data] augment_crop_padding = '-1': expected an "
                           "integer in [0, 1000000]") &&
           count_of(g_r.err, "error") == 1, "%s", g_r.err);

    tmp_cleanup();
    return CHECK_DONE();
}
