/* The one limit of the ABI 1 adapter: ABI 1 host calls carry no context, so
 * one context per process may hold ABI 1 plugin instances at a time. While
 * a context trains with the v1 build of localsgd, a second context that asks
 * for it is refused at once with one line that says why and what to do
 * (and fails cleanly: STRATA_EAGAIN, nothing else disturbed); the first
 * finishes its job, and once it is done a new context can use the plugin
 * again. argv[1]: the directory of the v1 build. Public API only. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <strata/strata.h>

#include "check.h"

static const char *g_dir;
static char g_log2[8192];
static int g_rc2 = 1, g_epochs;

static void on_log(void *user, int level, const char *line)
{
    char *buf = user;
    size_t n = strlen(buf);
    (void)level;
    snprintf(buf + n, 8192 - n, "%s\n", line);
}

static strata_ctx_t *v1_job(char *log, int epochs)
{
    strata_ctx_t *ctx = NULL;
    char path[4200], ep[32];
    snprintf(path, sizeof path, "plugins.path=%s", g_dir);
    snprintf(ep, sizeof ep, "train.epochs=%d", epochs);
    const char *sets[] = { "strategy.plugin=localsgd", path, ep,
                           "train.devices=cpu:0,cpu:1", "train.batch_size=32",
                           "data.limit_train=1280", "data.limit_test=200",
                           "train.progress=none" };
    CHECK(strata_ctx_create(NULL, &ctx) == 0);
    for (size_t i = 0; ctx && i < sizeof sets / sizeof *sets; i++)
        CHECK(strata_ctx_set(ctx, sets[i]) == 0);
    strata_callbacks_t cb = { .struct_size = sizeof cb, .user = log,
                              .log = on_log };
    CHECK(ctx && strata_ctx_set_callbacks(ctx, &cb) == 0);
    return ctx;
}

/* After the first context's first epoch, while it still holds its v1
 * instance: a second context wants the same v1 plugin. */
static void on_epoch(void *user, const strata_epoch_report_t *r)
{
    (void)user;
    if (g_epochs++ > 0 || r->epoch != 0)
        return;
    strata_ctx_t *ctx = v1_job(g_log2, 1);
    g_rc2 = ctx ? strata_train(ctx) : -1;
    strata_ctx_destroy(ctx);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    g_dir = argv[1];
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
               R_OK) != 0)
        CHECK_SKIP("Fashion-MNIST not installed");
    static char log1[8192], log3[8192];
    strata_ctx_t *ctx = v1_job(log1, 2);
    strata_callbacks_t cb = { .struct_size = sizeof cb, .user = log1,
                              .epoch = on_epoch, .log = on_log };
    CHECK(strata_ctx_set_callbacks(ctx, &cb) == 0);
    int rc = strata_train(ctx);
    strata_ctx_destroy(ctx);
    CHECKF(rc == 0, "the first context: %s\n%s", strata_strerror(rc), log1);
    CHECKF(g_epochs == 2, "%d epochs reported", g_epochs);
    CHECKF(g_rc2 == STRATA_EAGAIN, "the second context: %s",
           strata_strerror(g_rc2));
    CHECKF(strstr(g_log2, "strategy plugin 'localsgd'") &&
           strstr(g_log2, "is built for plugin ABI 1, whose host calls carry "
                          "no context") &&
           strstr(g_log2, "rebuild it against this strata's"),
           "the second context's log:\n%s", g_log2);
    CHECKF(!strstr(log1, "ABI 1"), "the refusal reached the first "
           "context's log:\n%s", log1);

    /* The first is done: the plugin is free for another context. */
    ctx = v1_job(log3, 1);
    rc = strata_train(ctx);
    strata_ctx_destroy(ctx);
    CHECKF(rc == 0, "a context after the first: %s\n%s", strata_strerror(rc),
           log3);
    return CHECK_DONE();
}
