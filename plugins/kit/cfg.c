/* strata_kit_cfg: a plugin's option struct from its own table, defaults
 * then "key=value" overrides, as the core fills it before init(). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <strata/kit.h>

static int bad(const strata_plugin_v2_t *vt, const char *key,
               const char *text, const char *why)
{
    if (text)
        fprintf(stderr, "kit: [%s] %s = '%s': %s\n", vt->hdr.name, key, text,
                why);
    else
        fprintf(stderr, "kit: [%s] %s: %s\n", vt->hdr.name, key, why);
    return STRATA_ECONFIG;
}

/* Refused before any conversion, as the core refuses them: a value that
 * is not finite (strtod reads "nan" and "inf"), outside the option's
 * bounds, or for an integer option, not a whole number that int64_t holds
 * (an unbounded INT of 1e300 reached an undefined conversion). */
static int in_bounds(const strata_option_t *o, double v)
{
    int bounded = !(o->min > o->max) && !(o->min == 0 && o->max == 0);
    if (!isfinite(v) || (bounded && !(v >= o->min && v <= o->max)))
        return 0;
    return o->type == STRATA_OPT_FLOAT ||
           (v == trunc(v) && v >= -0x1p63 && v < 0x1p63);
}

static int parse(const strata_plugin_v2_t *vt, const strata_option_t *o,
                 const char *text, void *cfg)
{
    char *end = NULL, *dst = (char *)cfg + o->offset;
    switch (o->type) {
    case STRATA_OPT_INT:
    case STRATA_OPT_SIZE: {
        double v = strtod(text, &end);
        if (o->type == STRATA_OPT_SIZE && end != text && *end) {
            const char *at = strchr("KMG", *end & ~0x20);
            for (const char *q = "KMG"; at && q <= at; q++)
                v *= 1024;
            end += at != NULL;
        }
        if (end == text || *end || !in_bounds(o, v))
            return bad(vt, o->key, text, "not a number in its bounds");
        int64_t i = (int64_t)v;
        memcpy(dst, &i, sizeof i);
        return STRATA_OK;
    }
    case STRATA_OPT_FLOAT: {
        double v = strtod(text, &end);
        if (end == text || *end || !in_bounds(o, v))
            return bad(vt, o->key, text, "not a number in its bounds");
        memcpy(dst, &v, sizeof v);
        return STRATA_OK;
    }
    case STRATA_OPT_BOOL: {
        static const char *const yes[] = { "true", "yes", "1", "on" };
        static const char *const no[] = { "false", "no", "0", "off" };
        int v = -1;
        for (int i = 0; i < 4; i++) {
            if (!strcasecmp(text, yes[i]))
                v = 1;
            if (!strcasecmp(text, no[i]))
                v = 0;
        }
        if (v < 0)
            return bad(vt, o->key, text, "not true/false/yes/no/1/0");
        memcpy(dst, &v, sizeof v);
        return STRATA_OK;
    }
    case STRATA_OPT_STRING:
        memcpy(dst, &text, sizeof text);
        return STRATA_OK;
    case STRATA_OPT_ENUM: {
        const char *ch = o->choices;
        size_t tl = strlen(text);
        for (int k = 0; ch && *ch; k++) {
            size_t l = strcspn(ch, "|");
            if (l == tl && strncmp(ch, text, l) == 0) {
                memcpy(dst, &k, sizeof k);
                return STRATA_OK;
            }
            ch += l + (ch[l] == '|');
        }
        return bad(vt, o->key, text, "not one of its choices");
    }
    default:
        return bad(vt, o->key, text, "an option type the kit does not know");
    }
}

/* The override of `key`, or NULL. */
static const char *override(const char *const *over, int nover,
                            const char *key)
{
    size_t kl = strlen(key);
    const char *text = NULL;
    for (int i = 0; i < nover; i++)
        if (strncmp(over[i], key, kl) == 0 && over[i][kl] == '=')
            text = over[i] + kl + 1;   /* the last one wins */
    return text;
}

int strata_kit_cfg(const strata_plugin_v2_t *vt, const char *const *over,
                   int nover, void **out)
{
    if (!out || !vt || (nover > 0 && !over))
        return STRATA_EINVAL;
    *out = NULL;
    for (int i = 0; i < nover; i++) {
        const strata_option_t *o = vt->options;
        size_t kl = strcspn(over[i], "=");
        while (o && o->key && (strlen(o->key) != kl ||
                               strncmp(over[i], o->key, kl) != 0))
            o++;
        if (!over[i][kl] || !o || !o->key)
            return bad(vt, over[i], NULL, over[i][kl]
                       ? "the plugin has no such option" : "not key=value");
    }
    void *cfg = calloc(1, vt->cfg_size ? vt->cfg_size : 1);
    if (!cfg)
        return STRATA_ENOMEM;
    for (const strata_option_t *o = vt->options; o && o->key; o++) {
        const char *text = override(over, nover, o->key);
        int rc = text ? parse(vt, o, text, cfg)
                 : o->def ? parse(vt, o, o->def, cfg)
                          : bad(vt, o->key, NULL, "required, and not given");
        if (rc != STRATA_OK) {
            free(cfg);
            return rc;
        }
    }
    *out = cfg;
    return STRATA_OK;
}
