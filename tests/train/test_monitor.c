/* The monitored metric (core/run/monitor.c), unit: early stopping as Keras'
 * EarlyStopping decides it (patience, min_delta, val_loss lower is better,
 * val_accuracy higher), keep_best on strict improvement, the stop line,
 * and the state through checkpoint metadata and back. */
#include <string.h>

#include "check.h"
#include "run/monitor.h"

static void init(strata__monitor_t *m, int metric, int64_t patience,
                 double min_delta, int keep_best)
{
    strata__settings_t s;
    memset(&s, 0, sizeof s);
    s.train.monitor = metric;
    s.train.es_patience = patience;
    s.train.es_min_delta = min_delta;
    s.checkpoint.keep_best = keep_best;
    strata__monitor_init(m, &s);
}

/* Feed losses (or accuracies) one epoch each; the epoch (1-based) that
 * stops, or 0; the epochs that were a new best into `best` (a bit each). */
static int feed(strata__monitor_t *m, const double *v, int n, unsigned *best)
{
    *best = 0;
    for (int e = 1; e <= n; e++) {
        int save, stop;
        strata__monitor_epoch(m, e, v[e - 1], v[e - 1], &save, &stop);
        if (save)
            *best |= 1u << e;
        if (stop)
            return e;
    }
    return 0;
}

static void loss_patience(void)
{
    strata__monitor_t m;
    unsigned best;
    /* best 0.5 at epoch 2; 0.55 and 0.51 do not improve: patience 2 stops
     * after epoch 4 */
    const double v[] = { 0.9, 0.5, 0.55, 0.51, 0.4 };
    init(&m, STRATA__MONITOR_VAL_LOSS, 2, 0.0, 1);
    CHECK(feed(&m, v, 5, &best) == 4);
    CHECK(best == ((1u << 1) | (1u << 2)));
    CHECK(m.best == 0.5 && m.best_epoch == 2 && m.wait == 2);
    char line[512];
    strata__monitor_stop_line(&m, 4, line, sizeof line);
    CHECKF(strstr(line, "early stopping after epoch 4") &&
           strstr(line, "val_loss has not improved for 2 epochs") &&
           strstr(line, "best 0.5000, epoch 2"), "%s", line);
    /* an improvement resets the wait: 0.49 at epoch 4 */
    const double w[] = { 0.9, 0.5, 0.55, 0.49, 0.6, 0.7 };
    init(&m, STRATA__MONITOR_VAL_LOSS, 2, 0.0, 0);
    CHECK(feed(&m, w, 6, &best) == 6);
    CHECK(best == 0); /* keep_best off */
    /* patience 0: never stops */
    init(&m, STRATA__MONITOR_VAL_LOSS, 0, 0.0, 0);
    CHECK(feed(&m, v, 5, &best) == 0);
}

/* min_delta: an improvement by less does not count (Keras: current +
 * min_delta < best for a loss), but keep_best still keeps it. */
static void min_delta(void)
{
    strata__monitor_t m;
    unsigned best;
    const double v[] = { 1.0, 0.95, 0.92, 0.5 };
    init(&m, STRATA__MONITOR_VAL_LOSS, 2, 0.1, 1);
    CHECK(feed(&m, v, 4, &best) == 3);
    CHECK(best == ((1u << 1) | (1u << 2) | (1u << 3)));
    char line[512];
    strata__monitor_stop_line(&m, 3, line, sizeof line);
    CHECKF(strstr(line, "by more than 0.1 for 2 epochs"), "%s", line);
}

static void accuracy(void)
{
    strata__monitor_t m;
    unsigned best;
    /* higher is better; 0.80 after 0.80 is no improvement */
    const double v[] = { 0.7, 0.8, 0.8, 0.79, 0.9 };
    init(&m, STRATA__MONITOR_VAL_ACCURACY, 2, 0.0, 1);
    CHECK(feed(&m, v, 5, &best) == 4);
    CHECK(best == ((1u << 1) | (1u << 2)));
    CHECK(strcmp(strata__monitor_name(&m), "val_accuracy") == 0);
}

/* What a checkpoint's metadata holds comes back into a fresh monitor. */
typedef struct kv { const char *k[STRATA__MONITOR_NMETA]; char (*v)[32]; int n; } kv_t;

static const char *get(const void *ctx, const char *key)
{
    const kv_t *kv = ctx;
    for (int i = 0; i < kv->n; i++)
        if (strcmp(kv->k[i], key) == 0)
            return kv->v[i];
    return NULL;
}

static void metadata(void)
{
    strata__monitor_t a, b;
    unsigned best;
    const double v[] = { 0.9, 0.5, 0.55 };
    init(&a, STRATA__MONITOR_VAL_LOSS, 3, 0.0, 1);
    CHECK(feed(&a, v, 3, &best) == 0);
    char vals[STRATA__MONITOR_NMETA][32];
    kv_t kv = { .v = vals };
    kv.n = strata__monitor_to_meta(&a, kv.k, vals);
    CHECK(kv.n == 6);
    init(&b, STRATA__MONITOR_VAL_LOSS, 3, 0.0, 1);
    strata__monitor_from_meta(&b, get, &kv);
    CHECK(b.has_best && b.best == 0.5 && b.best_epoch == 2 && b.wait == 1);
    CHECK(b.has_kept && b.kept == 0.5 && b.kept_epoch == 2);
    /* both go on alike: 0.6 then 0.7 stop them after epoch 5 */
    const double more[] = { 0.6, 0.7 };
    for (int e = 4; e <= 5; e++) {
        int sa, ta, sb, tb;
        strata__monitor_epoch(&a, e, more[e - 4], 0, &sa, &ta);
        strata__monitor_epoch(&b, e, more[e - 4], 0, &sb, &tb);
        CHECK(sa == sb && ta == tb && ta == (e == 5));
    }
    /* written for another metric: not taken */
    init(&b, STRATA__MONITOR_VAL_ACCURACY, 3, 0.0, 1);
    strata__monitor_from_meta(&b, get, &kv);
    CHECK(!b.has_best && !b.has_kept && b.wait == 0);
    /* hostile numbers: ignored, never converted (1e300 reached an
     * undefined float-to-integer conversion) */
    static const char *const hostile[] = { "1e300", "-1e300", "nan", "inf",
                                           "2.5", "-1", "4294967296" };
    for (size_t h = 0; h < sizeof hostile / sizeof *hostile; h++) {
        for (int i = 0; i < kv.n; i++)
            if (strcmp(kv.k[i], "strata.monitor") != 0)
                snprintf(vals[i], sizeof vals[i], "%s", hostile[h]);
        init(&b, STRATA__MONITOR_VAL_LOSS, 3, 0.0, 1);
        strata__monitor_from_meta(&b, get, &kv);
        CHECKF(!b.has_best && !b.has_kept && b.wait == 0, "%s taken",
               hostile[h]);
    }
}

int main(void)
{
    loss_patience();
    min_delta();
    accuracy();
    metadata();
    return CHECK_DONE();
}
