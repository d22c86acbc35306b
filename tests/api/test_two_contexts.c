/* Contexts are independent: two strata_ctx_t of one process train two
 * different jobs at the same time, in two threads, each to the result it
 * reaches alone (bitwise: the variables hash and every epoch's figures),
 * each with its own callbacks and [log] level -- and a third one, failing in
 * its strategy's init, gets that plugin's error line in its own log only.
 * Nothing reaches stderr: every line went to a log callback. Public API
 * only (<strata/strata.h>), as an embedding program sees it. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <strata/strata.h>

#include "check.h"

typedef struct job {
    const char *name;
    const char *const *sets;
    int rc;
    char text[1 << 15], log[1 << 15];
    strata_epoch_report_t reports[4];
    int nreports;
} job_t;

static void on_text(void *user, const char *text)
{
    job_t *j = user;
    size_t n = strlen(j->text);
    snprintf(j->text + n, sizeof j->text - n, "%s", text);
}

static void on_epoch(void *user, const strata_epoch_report_t *r)
{
    job_t *j = user;
    if (j->nreports < 4)
        j->reports[j->nreports++] = *r;
}

static void on_log(void *user, int level, const char *line)
{
    job_t *j = user;
    size_t n = strlen(j->log);
    snprintf(j->log + n, sizeof j->log - n, "%d %s\n", level, line);
}

static void *run_job(void *arg)
{
    job_t *j = arg;
    j->text[0] = j->log[0] = '\0';
    j->nreports = 0;
    strata_ctx_t *ctx = NULL;
    j->rc = strata_ctx_create(NULL, &ctx);
    for (int i = 0; j->rc == 0 && j->sets[i]; i++)
        j->rc = strata_ctx_set(ctx, j->sets[i]);
    strata_callbacks_t cb = { .struct_size = sizeof cb, .user = j,
                              .text = on_text, .epoch = on_epoch,
                              .log = on_log };
    if (j->rc == 0)
        j->rc = strata_ctx_set_callbacks(ctx, &cb);
    if (j->rc == 0)
        j->rc = strata_train(ctx);
    strata_ctx_destroy(ctx);
    return NULL;
}

/* The "variables hash" line of a job's text, or "". */
static const char *hash_of(const job_t *j, char *buf, size_t cap)
{
    const char *p = strstr(j->text, "variables hash (rank 0): ");
    snprintf(buf, cap, "%.*s", p ? (int)strcspn(p, "\n") : 0, p ? p : "");
    return buf;
}

static void same_result(const job_t *alone, const job_t *side)
{
    char a[128], b[128];
    CHECKF(side->rc == 0, "%s beside another: %s", side->name,
           strata_strerror(side->rc));
    CHECKF(hash_of(alone, a, sizeof a)[0] != '\0', "%s: no hash line in: %s",
           alone->name, alone->text);
    CHECKF(strcmp(hash_of(alone, a, sizeof a), hash_of(side, b, sizeof b)) == 0,
           "%s: alone '%s', beside another '%s'", side->name, a, b);
    CHECKF(alone->nreports == side->nreports && alone->nreports == 2,
           "%s: %d and %d epoch reports", side->name, alone->nreports,
           side->nreports);
    for (int e = 0; e < alone->nreports && e < side->nreports; e++) {
        const strata_epoch_report_t *x = &alone->reports[e], *y = &side->reports[e];
        CHECKF(x->loss == y->loss && x->accuracy == y->accuracy &&
               x->val_loss == y->val_loss && x->val_accuracy == y->val_accuracy,
               "%s epoch %d: loss %.9g/%.9g acc %.9g/%.9g", side->name, e,
               x->loss, y->loss, x->accuracy, y->accuracy);
    }
    /* The banner's placed bytes are the context's own, not the process's. */
    const char *pa = strstr(alone->text, "placed"), *pb = strstr(side->text, "placed");
    CHECKF(pa && pb && strcspn(pa, "\n") == strcspn(pb, "\n") &&
           strncmp(pa, pb, strcspn(pa, "\n")) == 0,
           "%s: banner's placed bytes differ: '%.60s' vs '%.60s'", side->name,
           pa ? pa : "", pb ? pb : "");
}

static const char *const k_mirrored[] = {
    "strategy.plugin=mirrored", "train.devices=cpu:0,cpu:1",
    "train.batch_size=32", "train.epochs=2", "train.seed=1",
    "data.limit_train=2560", "data.limit_test=500", "train.progress=line",
    "debug.hash_vars=true", "log.level=debug", NULL };
static const char *const k_central[] = {
    "strategy.plugin=central", "train.devices=cpu:0,cpu:1,cpu:2",
    "train.batch_size=48", "train.epochs=2", "train.seed=7",
    "optimizer.name=momentum", "optimizer.lr=0.01",
    "model.layers=dense 64 tanh, dense 10 softmax",
    "data.limit_train=2400", "data.limit_test=500", "train.progress=line",
    "debug.hash_vars=true", "log.level=debug", NULL };
static const char *const k_broken[] = {
    "strategy.plugin=central", "strategy.central.parameter_device=gpu:0",
    "train.devices=cpu:0", "data.limit_train=320", "data.limit_test=100",
    "train.progress=none", NULL };

int main(void)
{
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
               R_OK) != 0)
        CHECK_SKIP("Fashion-MNIST not installed");
    static job_t a1 = { "mirrored", k_mirrored, 0, "", "", {{0}}, 0 },
                 b1 = { "central", k_central, 0, "", "", {{0}}, 0 },
                 a2 = { "mirrored", k_mirrored, 0, "", "", {{0}}, 0 },
                 b2 = { "central", k_central, 0, "", "", {{0}}, 0 },
                 c2 = { "broken", k_broken, 0, "", "", {{0}}, 0 };

    /* Each alone first: the expected results. */
    run_job(&a1);
    run_job(&b1);
    CHECKF(a1.rc == 0, "mirrored alone: %s\n%s", strata_strerror(a1.rc), a1.log);
    CHECKF(b1.rc == 0, "central alone: %s\n%s", strata_strerror(b1.rc), b1.log);

    /* Then the three side by side, stderr captured. */
    char path[] = "/tmp/strata-2ctxXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    pthread_t ta, tb, tc;
    int started = pthread_create(&ta, NULL, run_job, &a2) == 0;
    started += pthread_create(&tb, NULL, run_job, &b2) == 0;
    started += pthread_create(&tc, NULL, run_job, &c2) == 0;
    CHECK(started == 3);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_join(tc, NULL);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    struct stat st;
    CHECK(fstat(fd, &st) == 0);
    close(fd);
    unlink(path);

    same_result(&a1, &a2);
    same_result(&b1, &b2);
    CHECKF(st.st_size == 0, "%lld bytes reached stderr though every context "
           "has a log callback", (long long)st.st_size);

    /* Each log holds its own lines: the debug line of its own strategy's
     * loading, never the other's; the broken job's plugin error (logged by
     * central.so through its hc) is in its log only. */
    CHECKF(strstr(a2.log, "loaded strategy mirrored") &&
           !strstr(a2.log, "loaded strategy central"), "mirrored's log:\n%s",
           a2.log);
    CHECKF(strstr(b2.log, "loaded strategy central") &&
           !strstr(b2.log, "loaded strategy mirrored"), "central's log:\n%s",
           b2.log);
    CHECKF(c2.rc == STRATA_EINVAL, "broken job: %s", strata_strerror(c2.rc));
    CHECKF(strstr(c2.log, "0 strata: central: error: [strategy] "
                          "parameter_device = 'gpu:0'") != NULL,
           "broken job's log:\n%s", c2.log);
    CHECKF(!strstr(a2.log, "parameter_device") &&
           !strstr(b2.log, "parameter_device"), "the broken job's error "
           "leaked into another context's log");
    /* [log] level is per context: the broken job runs at info, so the
     * loader's debug lines are not in its log. */
    CHECKF(!strstr(c2.log, "loaded strategy"), "broken job's log has debug "
           "lines:\n%s", c2.log);
    return CHECK_DONE();
}
