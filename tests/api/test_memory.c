/* In-memory data (strata_ctx_set_array): a job whose [data] names
 * "mem:NAME" arrays trains to the same bits as the same job on the same
 * arrays saved as .npy files (the checkpoint's bytes, every epoch's loss
 * and accuracy), and strata_eval_data / strata_predict on arrays give what
 * they give on the files. Each bad input is one error naming it and a
 * non-zero code. Public API only; the data are generated here (seconds).
 * Labels are int64 in one set and uint8 in the other, images uint8 and
 * float32, so that every reader path of both sources is crossed. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <strata/strata.h>

#include "check.h"

#define NTRAIN 320
#define NTEST  96
#define H 8
#define W 8

static uint8_t  g_img[NTRAIN][H][W], g_timg[NTEST][H][W];
static float    g_fimg[NTRAIN][H * W], g_tfimg[NTEST][H * W];
static int64_t  g_lab[NTRAIN];
static uint8_t  g_tlab[NTEST];
static char     g_dir[64];
static const char *g_extra = "";   /* one more --set of the jobs, or "" */

/* A learnable 3-class set: class k lights rows 2k and 2k + 1. */
static void make_data(void)
{
    uint64_t s = 12345;
    for (int i = 0; i < NTRAIN + NTEST; i++) {
        int k = (int)((s = s * 6364136223846793005u + 1442695040888963407u)
                      >> 33) % 3;
        uint8_t (*img)[W] = i < NTRAIN ? g_img[i] : g_timg[i - NTRAIN];
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                s = s * 6364136223846793005u + 1442695040888963407u;
                int v = (int)(s >> 58) + ((y >> 1) == k ? 150 : 0);
                img[y][x] = (uint8_t)v;
                float *f = i < NTRAIN ? g_fimg[i] : g_tfimg[i - NTRAIN];
                f[y * W + x] = (float)v / 97.0f;
            }
        if (i < NTRAIN)
            g_lab[i] = k;
        else
            g_tlab[i - NTRAIN] = (uint8_t)k;
    }
}

/* numpy.save's format 1.0: magic, header dict padded to 64 bytes, data. */
static void save_npy(const char *name, const char *descr, const char *shape,
                     const void *data, size_t bytes)
{
    char path[256], hdr[128];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': "
                     "False, 'shape': %s, }", descr, shape);
    int total = (10 + n + 1 + 63) / 64 * 64;
    memset(hdr + n, ' ', (size_t)(total - 10 - n - 1));
    hdr[total - 11] = '\n';
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    unsigned char pre[10] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                              (unsigned char)(total - 10), 0 };
    CHECK(fwrite(pre, 1, 10, f) == 10);
    CHECK(fwrite(hdr, 1, (size_t)(total - 10), f) == (size_t)(total - 10));
    CHECK(fwrite(data, 1, bytes, f) == bytes);
    CHECK(fclose(f) == 0);
}

static struct {
    strata_event_t ev[32];
    int n;
    char log[4096];
} g_seen;

static void on_event(void *user, const strata_event_t *ev)
{
    if ((ev->kind == STRATA_EVENT_EPOCH_END || ev->kind == STRATA_EVENT_EVAL)
        && g_seen.n < 32)
        g_seen.ev[g_seen.n++] = *ev;
}

static void on_log(void *user, int level, const char *line)
{
    size_t n = strlen(g_seen.log);
    snprintf(g_seen.log + n, sizeof g_seen.log - n, "%s\n", line);
}

/* A job on the data named by `p` (a prefix: "mem:" or g_dir + "/"),
 * images `img` and `timg`, checkpoints in g_dir/ck. */
static strata_ctx_t *job_test(const char *p, const char *img,
                              const char *timg, const char *ck)
{
    strata_ctx_t *ctx = NULL;
    CHECK(strata_ctx_create(NULL, &ctx) == 0);
    if (!ctx)
        return NULL;
    char sets[6][512];
    snprintf(sets[0], sizeof sets[0], "data.train_images=%s%s", p, img);
    snprintf(sets[1], sizeof sets[1], "data.train_labels=%strain_labels%s",
             p, p[0] == 'm' ? "" : ".npy");
    snprintf(sets[2], sizeof sets[2], "data.test_images=%s%s%s", p, timg,
             p[0] == 'm' ? "" : ".npy");
    snprintf(sets[3], sizeof sets[3], "data.test_labels=%stest_labels%s", p,
             p[0] == 'm' ? "" : ".npy");
    snprintf(sets[4], sizeof sets[4], "checkpoint.dir=%s/%s", g_dir, ck);
    snprintf(sets[5], sizeof sets[5], "data.dir=/nonexistent");
    const char *fixed[] = { "train.epochs=2", "train.batch_size=32",
                            "train.devices=cpu:0", "train.progress=none",
                            "model.layers=dense 16 relu, dense 3",
                            "optimizer.lr=0.01", "data.validation_split=0.25" };
    for (int i = 0; i < 6; i++)
        CHECK(strata_ctx_set(ctx, sets[i]) == 0);
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
        CHECK(strata_ctx_set(ctx, fixed[i]) == 0);
    if (g_extra[0])
        CHECK(strata_ctx_set(ctx, g_extra) == 0);
    strata_callbacks_t cb = { .struct_size = sizeof cb, .event = on_event,
                              .log = on_log };
    CHECK(strata_ctx_set_callbacks(ctx, &cb) == 0);
    return ctx;
}

static strata_ctx_t *job(const char *p, const char *img, const char *ck)
{
    return job_test(p, img, strstr(img, "f32") ? "test_f32" : "test_images",
                    ck);
}

static void register_all(strata_ctx_t *ctx)
{
    const int64_t img[] = { NTRAIN, H, W }, timg[] = { NTEST, H, W },
                  fimg[] = { NTRAIN, H * W }, tfimg[] = { NTEST, H * W },
                  lab[] = { NTRAIN },
                  tlab[] = { NTEST };
    CHECK(strata_ctx_set_array(ctx, "train_images", g_img,
                               STRATA_DTYPE_UINT8, 3, img) == 0);
    CHECK(strata_ctx_set_array(ctx, "train_f32", g_fimg,
                               STRATA_DTYPE_FLOAT32, 2, fimg) == 0);
    CHECK(strata_ctx_set_array(ctx, "test_f32", g_tfimg,
                               STRATA_DTYPE_FLOAT32, 2, tfimg) == 0);
    CHECK(strata_ctx_set_array(ctx, "train_labels", g_lab,
                               STRATA_DTYPE_INT64, 1, lab) == 0);
    CHECK(strata_ctx_set_array(ctx, "test_images", g_timg,
                               STRATA_DTYPE_UINT8, 3, timg) == 0);
    CHECK(strata_ctx_set_array(ctx, "test_labels", g_tlab,
                               STRATA_DTYPE_UINT8, 1, tlab) == 0);
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char *buf = malloc(1 << 20);
    *len = buf ? fread(buf, 1, 1 << 20, f) : 0;
    fclose(f);
    return buf;
}

/* The last checkpoint of g_dir/sub into buf. */
static void last_ckpt(const char *sub, char *buf, size_t cap)
{
    char dir[128], best[256] = "";
    snprintf(dir, sizeof dir, "%s/%.60s", g_dir, sub);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (strncmp(e->d_name, "ckpt-", 5) == 0 && strcmp(e->d_name, best) > 0)
            snprintf(best, sizeof best, "%s", e->d_name);
    if (d)
        closedir(d);
    snprintf(buf, cap, "%s/%.100s", dir, best);
}

static int same_file(const char *a, const char *b)
{
    size_t la = 0, lb = 0;
    unsigned char *x = slurp(a, &la), *y = slurp(b, &lb);
    int same = x && y && la == lb && la > 0 && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

/* Train on files and on arrays with images `img`; compare. */
static void train_both(const char *img_file, const char *img_mem,
                       const char *tag)
{
    char fa[64], fb[64];
    snprintf(fa, sizeof fa, "file-%s", tag);
    snprintf(fb, sizeof fb, "mem-%s", tag);
    char pfx[80];
    snprintf(pfx, sizeof pfx, "%s/", g_dir);

    g_seen.n = 0;
    strata_ctx_t *ctx = job(pfx, img_file, fa);
    CHECK(ctx && strata_train(ctx) == 0);
    strata_ctx_destroy(ctx);
    strata_event_t files[32];
    int nf = g_seen.n;
    memcpy(files, g_seen.ev, sizeof files);

    g_seen.n = 0;
    ctx = job("mem:", img_mem, fb);
    if (ctx)
        register_all(ctx);
    int rc = ctx ? strata_train(ctx) : -1;
    CHECKF(rc == 0, "%s: %s\n%s", tag, strata_strerror(rc), g_seen.log);
    strata_ctx_destroy(ctx);

    /* per epoch: the run's evaluation, then its end (with val_*) */
    CHECKF(nf == 4 && g_seen.n == nf, "%s: %d and %d events", tag, nf,
           g_seen.n);
    for (int i = 0; i < nf && i < g_seen.n; i++) {
        const strata_event_t *a = &files[i], *b = &g_seen.ev[i];
        CHECKF(a->kind == b->kind && a->loss == b->loss &&
               a->accuracy == b->accuracy && a->has_val == b->has_val &&
               a->val_loss == b->val_loss &&
               a->val_accuracy == b->val_accuracy &&
               (a->kind != STRATA_EVENT_EPOCH_END || a->has_val),
               "%s event %d: loss %.17g / %.17g, val_loss %.17g / %.17g",
               tag, i, a->loss, b->loss, a->val_loss, b->val_loss);
    }
    char ca[256], cb[256];
    last_ckpt(fa, ca, sizeof ca);
    last_ckpt(fb, cb, sizeof cb);
    CHECKF(same_file(ca, cb), "%s: %s and %s differ (or are missing)", tag,
           ca, cb);
}

/* eval_data and predict on the arrays give what they give on the files. */
static void score_both(void)
{
    char ck[256], tf[256], tl[256], out_f[256], out_m[256];
    last_ckpt("file-u8", ck, sizeof ck);
    snprintf(tf, sizeof tf, "%s/test_images.npy", g_dir);
    snprintf(tl, sizeof tl, "%s/test_labels.npy", g_dir);
    snprintf(out_f, sizeof out_f, "%s/pred_file.npy", g_dir);
    snprintf(out_m, sizeof out_m, "%s/pred_mem.npy", g_dir);
    char pfx[80];
    snprintf(pfx, sizeof pfx, "%s/", g_dir);
    strata_ctx_t *ctx = job(pfx, "train_images.npy", "unused");
    if (!ctx)
        return;
    register_all(ctx);
    g_seen.n = 0;
    CHECK(strata_eval_data(ctx, ck, tf, tl) == 0);
    CHECK(strata_eval_data(ctx, ck, "mem:test_images", "mem:test_labels")
          == 0);
    CHECKF(g_seen.n == 2 && g_seen.ev[0].kind == STRATA_EVENT_EVAL &&
           g_seen.ev[0].steps == NTEST &&
           g_seen.ev[0].loss == g_seen.ev[1].loss &&
           g_seen.ev[0].accuracy == g_seen.ev[1].accuracy,
           "%d EVAL events", g_seen.n);
    CHECK(strata_predict(ctx, ck, tf, out_f, 0, 0) == 0);
    CHECK(strata_predict(ctx, ck, "mem:test_images", out_m, 0, 0) == 0);
    CHECK(same_file(out_f, out_m));
    strata_ctx_destroy(ctx);
}

/* rc, and one error line naming `what`. */
static void expect_error(strata_ctx_t *ctx, int rc, int want,
                         const char *what)
{
    CHECKF(rc == want, "%s: %s, expected %s", what, strata_err_name(rc),
           strata_err_name(want));
    CHECKF(strstr(g_seen.log, what) != NULL, "no error naming '%s' in:\n%s",
           what, g_seen.log);
    g_seen.log[0] = '\0';
}

static void bad_inputs(void)
{
    strata_ctx_t *ctx = job("mem:", "train_images", "bad");
    if (!ctx)
        return;
    register_all(ctx);
    const int64_t d1[] = { NTRAIN }, d0[] = { 0 }, d5[] = { 1, 1, 1, 1, 1 },
                  fewer[] = { NTRAIN - 1 }, wide[] = { NTRAIN, 2 };
    g_seen.log[0] = '\0';
    expect_error(ctx, strata_ctx_set_array(ctx, "bad/name", g_lab,
                                           STRATA_DTYPE_INT64, 1, d1),
                 STRATA_EINVAL, "bad/name");
    expect_error(ctx, strata_ctx_set_array(ctx, "x", g_lab, 42, 1, d1),
                 STRATA_EINVAL, "unknown dtype 42");
    expect_error(ctx, strata_ctx_set_array(ctx, "x", g_lab,
                                           STRATA_DTYPE_INT64, 1, d0),
                 STRATA_EINVAL, "dimension 1 is 0");
    expect_error(ctx, strata_ctx_set_array(ctx, "x", g_lab,
                                           STRATA_DTYPE_INT64, 5, d5),
                 STRATA_EINVAL, "5 dimensions");
    /* cleared, and an unknown name is found by the run */
    CHECK(strata_ctx_set_array(ctx, "train_labels", NULL, 0, 0, NULL) == 0);
    CHECK(strata_ctx_set_array(ctx, "never_set", NULL, 0, 0, NULL) == 0);
    expect_error(ctx, strata_train(ctx), STRATA_ENOENT,
                 "mem:train_labels: no array 'train_labels'");
    /* images and labels disagree in count */
    CHECK(strata_ctx_set_array(ctx, "train_labels", g_lab,
                               STRATA_DTYPE_INT64, 1, fewer) == 0);
    expect_error(ctx, strata_train(ctx), STRATA_EDATA,
                 "mem:train_images holds 320 images but mem:train_labels "
                 "holds 319 labels");
    /* float32 labels, labels of rank 2, images of int64 */
    CHECK(strata_ctx_set_array(ctx, "train_labels", g_fimg,
                               STRATA_DTYPE_FLOAT32, 1, d1) == 0);
    expect_error(ctx, strata_train(ctx), STRATA_EDATA,
                 "mem:train_labels: labels of dtype float32");
    CHECK(strata_ctx_set_array(ctx, "train_labels", g_lab,
                               STRATA_DTYPE_INT64, 2, wide) == 0);
    expect_error(ctx, strata_train(ctx), STRATA_EDATA,
                 "mem:train_labels: labels of shape (320, 2)");
    CHECK(strata_ctx_set_array(ctx, "train_labels", g_lab,
                               STRATA_DTYPE_INT64, 1, d1) == 0);
    CHECK(strata_ctx_set_array(ctx, "train_images", g_lab,
                               STRATA_DTYPE_INT64, 1, d1) == 0);
    expect_error(ctx, strata_train(ctx), STRATA_EDATA,
                 "mem:train_images: images of dtype int64");
    strata_ctx_destroy(ctx);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/strata-memoryXXXXXX");
    CHECK(mkdtemp(g_dir) != NULL);
    make_data();
    save_npy("train_images.npy", "|u1", "(320, 8, 8)", g_img, sizeof g_img);
    save_npy("train_f32.npy", "<f4", "(320, 64)", g_fimg, sizeof g_fimg);
    save_npy("train_labels.npy", "<i8", "(320,)", g_lab, sizeof g_lab);
    save_npy("test_f32.npy", "<f4", "(96, 64)", g_tfimg, sizeof g_tfimg);
    save_npy("test_images.npy", "|u1", "(96, 8, 8)", g_timg, sizeof g_timg);
    save_npy("test_labels.npy", "|u1", "(96,)", g_tlab, sizeof g_tlab);

    train_both("train_images.npy", "train_images", "u8");
    g_extra = "data.limit_train=200";   /* the first items only */
    train_both("train_f32.npy", "train_f32", "f32");
    g_extra = "";
    score_both();
    bad_inputs();

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    CHECK(system(cmd) == 0);
    return CHECK_DONE();
}
