/* libstrata is silent: an embedding program that sets no callbacks gets
 * nothing on stdout from a whole training run; one that sets them gets the
 * banner, progress and result as text and one report per epoch, matching
 * what the run computed. Public API only (<strata/strata.h>). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <strata/strata.h>

#include "check.h"

static char g_text[1 << 16];
static strata_epoch_report_t g_reports[8];
static int g_nreports;

static void on_text(void *user, const char *text)
{
    CHECK(user == g_text);
    size_t n = strlen(g_text);
    snprintf(g_text + n, sizeof g_text - n, "%s", text);
}

static void on_epoch(void *user, const strata_epoch_report_t *r)
{
    CHECK(user == g_text);
    if (g_nreports < 8)
        g_reports[g_nreports++] = *r;
}

static strata_ctx_t *small_job(void)
{
    strata_ctx_t *ctx = NULL;
    CHECK(strata_ctx_create(NULL, &ctx) == 0);
    const char *sets[] = { "train.epochs=2", "train.batch_size=32",
                           "train.devices=cpu:0", "data.limit_train=640",
                           "data.limit_test=200", "train.progress=line" };
    for (size_t i = 0; ctx && i < sizeof sets / sizeof *sets; i++)
        CHECK(strata_ctx_set(ctx, sets[i]) == 0);
    return ctx;
}

int main(void)
{
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
               R_OK) != 0)
        CHECK_SKIP("Fashion-MNIST not installed");

    /* No callbacks: not one byte on stdout. */
    char path[] = "/tmp/strata-silentXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    strata_ctx_t *ctx = small_job();
    int rc = ctx ? strata_train(ctx) : -1;
    strata_ctx_destroy(ctx);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    struct stat st;
    CHECK(fstat(fd, &st) == 0);
    close(fd);
    unlink(path);
    CHECKF(rc == 0, "silent run: %s", strata_strerror(rc));
    CHECKF(st.st_size == 0, "a run without callbacks wrote %lld bytes to "
           "stdout", (long long)st.st_size);

    /* Callbacks: the text a terminal would show, and the epochs. */
    ctx = small_job();
    strata_callbacks_t cb = { .struct_size = sizeof cb, .user = g_text,
                              .text = on_text, .epoch = on_epoch };
    CHECK(strata_ctx_set_callbacks(ctx, &cb) == 0);
    strata_callbacks_t bad = { .struct_size = 4 };
    CHECK(strata_ctx_set_callbacks(ctx, &bad) == STRATA_EINVAL);
    CHECK(strata_ctx_set_callbacks(NULL, &cb) == STRATA_EINVAL);
    rc = strata_train(ctx);
    CHECKF(rc == 0, "run with callbacks: %s", strata_strerror(rc));
    CHECKF(strstr(g_text, "num_replicas_in_sync: 1 (strategy mirrored") &&
               strstr(g_text, " total: 101770 parameters\n") &&
               strstr(g_text, "Epoch 2/2 - 20 steps - ") &&
               strstr(g_text, "done: 2 epochs, test accuracy ") &&
               strstr(g_text, "optimizer: adam, learning rate 0.001\n"),
           "text:\n%s", g_text);
    CHECKF(g_nreports == 2, "%d epoch reports", g_nreports);
    for (int e = 0; e < g_nreports; e++) {
        const strata_epoch_report_t *r = &g_reports[e];
        CHECK(r->epoch == e && r->epochs == 2 && r->steps == 20);
        CHECK(r->has_val == 1 && r->val_accuracy > 0.1 &&
              r->val_accuracy <= 1.0 && r->accuracy > 0.1);
        CHECK(r->loss > 0 && r->seconds > 0 && r->samples_per_s > 0);
    }
    /* The last report is what the closing line says. */
    char want[64];
    snprintf(want, sizeof want, "test accuracy %.4f",
             g_reports[g_nreports > 0 ? g_nreports - 1 : 0].val_accuracy);
    CHECKF(strstr(g_text, want) != NULL, "'%s' not in:\n%s", want, g_text);
    /* The learning rate the steps use is shown after scaling and with its
     * warm-up; the result line comes even with progress = none, and says
     * "1 epoch". */
    strata_ctx_t *scaled = small_job();
    const char *more[] = { "train.devices=cpu:0,cpu:1", "train.epochs=1",
                           "train.lr_scaling=linear", "train.warmup_epochs=0.5",
                           "train.progress=none" };
    for (size_t i = 0; scaled && i < sizeof more / sizeof *more; i++)
        CHECK(strata_ctx_set(scaled, more[i]) == 0);
    g_text[0] = '\0';
    g_nreports = 0;
    CHECK(scaled && strata_ctx_set_callbacks(scaled, &cb) == 0);
    CHECK(scaled && strata_train(scaled) == 0);
    CHECKF(strstr(g_text, "optimizer: adam, learning rate 0.002 (0.001 x 2 "
                          "replicas: [train] lr_scaling = linear), reached "
                          "linearly over the first 10 steps (warm-up)\n") &&
               strstr(g_text, "done: 1 epoch, test accuracy ") &&
               !strstr(g_text, "Epoch 1/1"),
           "scaled run's text:\n%s", g_text);
    strata_ctx_destroy(scaled);

    /* Cleared: silent again. */
    CHECK(strata_ctx_set_callbacks(ctx, NULL) == 0);
    strata_ctx_destroy(ctx);

    /* The metric's name, resolved from the loss; NULL for a bad pair. */
    strata_ctx_t *named = NULL;
    CHECK(strata_ctx_create(NULL, &named) == 0);
    const char *name = strata_metric_name(named);
    CHECK(name && strcmp(name, "accuracy") == 0);
    strata_ctx_destroy(named);
    named = NULL;
    CHECK(strata_ctx_create(NULL, &named) == 0 &&
          strata_ctx_set(named, "model.loss=mse") == 0);
    CHECK((name = strata_metric_name(named)) && strcmp(name, "mae") == 0);
    strata_ctx_destroy(named);
    named = NULL;
    CHECK(strata_ctx_create(NULL, &named) == 0 &&
          strata_ctx_set(named, "model.loss=mse") == 0 &&
          strata_ctx_set(named, "model.metric=accuracy") == 0);
    CHECK(strata_metric_name(named) == NULL);
    strata_ctx_destroy(named);
    CHECK(strata_metric_name(NULL) == NULL);
    return CHECK_DONE();
}
