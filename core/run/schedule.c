/* Learning-rate schedules (schedule.h): the [optimizer] keys checked, and
 * the rate of a global step. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

static const double k_pi = 3.14159265358979323846;

static const char *const k_sched_names[] = { "constant", "step",
                                              "exponential", "cosine" };

/* Where the value of [optimizer] `key` came from, for messages. */
static const char *origin(const strata__cfg_t *c, const char *key)
{
    const char *o = c ? strata__cfg_origin(c, "optimizer", key) : NULL;
    return o ? o : "default";
}

/* The next item of a list "a, b c": *p moves past it and its separators;
 * the item is copied (NUL-terminated) into item. 0: no more items; -1: an
 * item longer than the buffer. */
static int next_item(const char **p, char *item, size_t len)
{
    const char *s = *p + strspn(*p, " \t,");
    size_t n = strcspn(s, " \t,");
    if (n == 0)
        return 0;
    if (n >= len)
        return -1;
    memcpy(item, s, n);
    item[n] = '\0';
    *p = s + n;
    return 1;
}

/* [optimizer] boundaries: strictly increasing non-negative integers. */
static int parse_boundaries(const strata__cfg_t *c, const char *text,
                            int64_t *out, int *n)
{
    char item[64];
    int r;
    *n = 0;
    for (const char *p = text; (r = next_item(&p, item, sizeof item)) != 0;) {
        char *end = NULL;
        errno = 0;
        long long v = r > 0 ? strtoll(item, &end, 10) : -1;
        if (r < 0 || *end || errno || v < 0) {
            strata__log(STRATA_LOG_ERROR, "config", "%s: [optimizer] "
                        "boundaries = '%s': '%s' is not a step (a "
                        "non-negative integer)", origin(c, "boundaries"),
                        text, r < 0 ? "(too long)" : item);
            return STRATA_ECONFIG;
        }
        if (*n > 0 && v <= out[*n - 1]) {
            strata__log(STRATA_LOG_ERROR, "config", "%s: [optimizer] "
                        "boundaries = '%s': the steps must increase (%lld "
                        "comes after %lld)", origin(c, "boundaries"), text,
                        v, (long long)out[*n - 1]);
            return STRATA_ECONFIG;
        }
        if (*n == STRATA__MAX_BOUNDARIES) {
            strata__log(STRATA_LOG_ERROR, "config", "%s: [optimizer] "
                        "boundaries: more than %d steps",
                        origin(c, "boundaries"), STRATA__MAX_BOUNDARIES);
            return STRATA_ECONFIG;
        }
        out[(*n)++] = v;
    }
    return STRATA_OK;
}

/* [optimizer] values: positive learning rates, one per piece. */
static int parse_values(const strata__cfg_t *c, const char *text, int want,
                        double *out)
{
    char item[64];
    int n = 0, r;
    for (const char *p = text; (r = next_item(&p, item, sizeof item)) != 0;) {
        char *end = NULL;
        double v = r > 0 ? strtod(item, &end) : -1.0;
        if (r < 0 || *end || !isfinite(v) || v < 1e-12) {
            strata__log(STRATA_LOG_ERROR, "config", "%s: [optimizer] values "
                        "= '%s': '%s' is not a learning rate (a number >= "
                        "1e-12)", origin(c, "values"), text,
                        r < 0 ? "(too long)" : item);
            return STRATA_ECONFIG;
        }
        if (n <= want)
            out[n] = v;
        n++;
    }
    if (n != want + 1) {
        strata__log(STRATA_LOG_ERROR, "config", "%s: [optimizer] values = "
                    "'%s': %d learning rate%s for %d boundar%s; expected %d "
                    "(one before the first boundary, one after each)",
                    origin(c, "values"), text, n, n == 1 ? "" : "s", want,
                    want == 1 ? "y" : "ies", want + 1);
        return STRATA_ECONFIG;
    }
    return STRATA_OK;
}

/* Boundaries and the (unscaled) lr of each piece of a step schedule. */
static int parse_step(const strata__cfg_t *c, const strata__optimizer_cfg_t *o,
                      int64_t *bounds, int *nb, double *piece)
{
    int rc = parse_boundaries(c, o->boundaries, bounds, nb);
    if (rc == STRATA_OK && *nb == 0) {
        strata__log(STRATA_LOG_ERROR, "config", "%s: [optimizer] schedule = "
                    "step needs [optimizer] boundaries (the global steps "
                    "after which the learning rate changes, e.g. 1000, "
                    "2000)", origin(c, "schedule"));
        rc = STRATA_ECONFIG;
    }
    if (rc != STRATA_OK)
        return rc;
    if (o->values && o->values[strspn(o->values, " \t,")])
        return parse_values(c, o->values, *nb, piece);
    piece[0] = o->lr;
    for (int i = 1; i <= *nb; i++)
        piece[i] = piece[i - 1] * o->factor;
    return STRATA_OK;
}

int strata__schedule_check(const strata__cfg_t *c,
                           const strata__optimizer_cfg_t *o)
{
    int64_t bounds[STRATA__MAX_BOUNDARIES];
    double piece[STRATA__MAX_BOUNDARIES + 1];
    int nb;
    /* A typo in boundaries is one, whatever the schedule. */
    if (o->schedule != STRATA__SCHED_STEP && o->boundaries &&
        parse_boundaries(c, o->boundaries, bounds, &nb) != STRATA_OK)
        return STRATA_ECONFIG;
    switch (o->schedule) {
    case STRATA__SCHED_STEP:
        return parse_step(c, o, bounds, &nb, piece);
    case STRATA__SCHED_EXPONENTIAL:
    case STRATA__SCHED_COSINE:
        if (o->decay_steps > 0)
            return STRATA_OK;
        strata__log(STRATA_LOG_ERROR, "config", "%s: [optimizer] schedule = "
                    "%s needs [optimizer] decay_steps > 0 (%s)",
                    origin(c, "schedule"), k_sched_names[o->schedule],
                    o->schedule == STRATA__SCHED_COSINE
                        ? "the steps to reach alpha x lr"
                        : "the steps per factor decay_rate");
        return STRATA_ECONFIG;
    default:
        return STRATA_OK;
    }
}

int strata__schedule_init(strata__schedule_t *s,
                          const strata__optimizer_cfg_t *o, double scale,
                          int64_t warmup_steps)
{
    memset(s, 0, sizeof *s);
    s->kind = o->schedule;
    s->scale = scale;
    s->lr = o->lr * scale;
    s->warmup = warmup_steps > 0 ? warmup_steps : 0;
    s->decay_steps = o->decay_steps;
    s->decay_rate = o->decay_rate;
    s->staircase = o->staircase;
    s->alpha = o->alpha;
    if (s->kind != STRATA__SCHED_STEP)
        return strata__schedule_check(NULL, o);
    int rc = parse_step(NULL, o, s->boundary, &s->nb, s->piece);
    for (int i = 0; rc == STRATA_OK && i <= s->nb; i++)
        s->piece[i] *= scale;
    return rc;
}

double strata__schedule_lr(const strata__schedule_t *s, int64_t step)
{
    double lr = s->lr;
    if (step < 0)
        step = 0;
    switch (s->kind) {
    case STRATA__SCHED_STEP: {
        int i = 0;
        while (i < s->nb && step > s->boundary[i])
            i++;
        lr = s->piece[i];
        break;
    }
    case STRATA__SCHED_EXPONENTIAL: {
        double p = (double)step / (double)s->decay_steps;
        lr *= pow(s->decay_rate, s->staircase ? floor(p) : p);
        break;
    }
    case STRATA__SCHED_COSINE: {
        double done = (double)(step < s->decay_steps ? step : s->decay_steps);
        double cosine = 0.5 * (1.0 + cos(k_pi * done / (double)s->decay_steps));
        lr *= (1.0 - s->alpha) * cosine + s->alpha;
        break;
    }
    default:
        break;
    }
    if (step < s->warmup)
        lr *= (double)(step + 1) / (double)s->warmup;
    return lr;
}

double strata__schedule_initial(const strata__schedule_t *s)
{
    return s->kind == STRATA__SCHED_STEP ? s->piece[0] : s->lr;
}

void strata__schedule_describe(const strata__schedule_t *s, char *buf,
                               size_t len)
{
    int n = 0;
    buf[0] = '\0';
    switch (s->kind) {
    case STRATA__SCHED_STEP:
        n = snprintf(buf, len, ", kept to step %lld, then",
                     (long long)s->boundary[0]);
        for (int i = 1; i <= s->nb && n >= 0 && (size_t)n < len; i++)
            n += i == s->nb
                     ? snprintf(buf + n, len - (size_t)n, " %g",
                                s->piece[i])
                     : snprintf(buf + n, len - (size_t)n, " %g to step %lld,",
                                s->piece[i], (long long)s->boundary[i]);
        break;
    case STRATA__SCHED_EXPONENTIAL:
        snprintf(buf, len, ", then x %g every %lld steps (exponential decay%s)",
                 s->decay_rate, (long long)s->decay_steps,
                 s->staircase ? ", staircase" : "");
        break;
    case STRATA__SCHED_COSINE:
        snprintf(buf, len, ", then cosine decay to %g over %lld steps",
                 s->lr * s->alpha, (long long)s->decay_steps);
        break;
    default:
        break;
    }
}
