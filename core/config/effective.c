/* strata_config_list: every key of a job with its effective value and the
 * source that won (`strata config`), after the checks strata_train()
 * makes of them: the core sections (strata__settings_load), [cluster]'s
 * keys, the strategy's and the transports' own tables (strata__plugin_cfg).
 * Nothing here decides a value: the store keeps the winner of each key,
 * and a plugin key's section follows strata__plugin_cfg's rule. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster.h"
#include "runtime.h"

#define WHO "config"

/* The plugins whose keys are listed: the strategy, then the transports. */
typedef struct shown {
    const strata__plugin_t *p[STRATA_MAX_PLUGINS];
    int n;
} shown_t;

typedef void (*visit_fn)(void *arg, const char *key, const char *value,
                         const char *origin);

/* The option table of a core section; [cluster]'s is cluster.c's. */
static const strata_option_t *section_opts(const strata__section_t *s)
{
    return s->opts ? s->opts
           : strcmp(s->name, "cluster") == 0 ? strata__cluster_options : NULL;
}

/* Check a transport of `list` (a scope's) as a group of that scope would
 * load it; one not installed is the next one's turn, as there. */
static int check_transports(strata_ctx_t *ctx, int32_t scope, shown_t *sh)
{
    char list[512], name[64];
    strata__transport_list(ctx, scope, list, sizeof list);
    for (const char *q = list; *q;) {
        q += strspn(q, " ,");
        size_t len = strcspn(q, " ,");
        if (len == 0)
            break;
        snprintf(name, sizeof name, "%.*s", (int)len, q);
        q += len;
        strata__plugin_t *p;
        int rc = strata__ctx_plugin(ctx, name, STRATA_KIND_TRANSPORT,
                                    STRATA_LOG_DEBUG, &p);
        if (rc == STRATA_ENOPLUGIN)
            continue;
        void *cfg = NULL;
        if (rc == STRATA_OK)
            rc = strata__plugin_cfg(ctx, p, "transport",
                                    strata__transport_flat(list, name), &cfg);
        free(cfg);
        if (rc != STRATA_OK)
            return rc;
        int i = 0;
        while (i < sh->n && sh->p[i] != p)
            i++;
        if (i == sh->n)
            sh->p[sh->n++] = p;
    }
    return STRATA_OK;
}

/* What strata_train() checks of the values before it trains. */
static int check(strata_ctx_t *ctx, shown_t *sh)
{
    int rc = strata__ctx_resolve(ctx);
    strata__cluster_cfg_t k;
    if (rc == STRATA_OK)
        rc = strata__cfg_apply(ctx->cfg, "cluster", strata__cluster_options,
                               &k, NULL);
    strata__plugin_t *p = NULL;
    void *cfg = NULL;
    if (rc == STRATA_OK)
        rc = strata__ctx_plugin(ctx, ctx->s.strategy, STRATA_KIND_STRATEGY,
                                STRATA_LOG_ERROR, &p);
    if (rc == STRATA_OK)
        rc = strata__plugin_cfg(ctx, p, "strategy", STRATA__CFG_FLAT_STRICT,
                                &cfg);
    free(cfg);
    if (rc == STRATA_OK)
        sh->p[sh->n++] = p;
    if (rc == STRATA_OK)
        rc = check_transports(ctx, STRATA_SCOPE_LOCAL, sh);
    return rc == STRATA_OK ? check_transports(ctx, STRATA_SCOPE_WORLD, sh)
                           : rc;
}

/* NAME.KEY of option `o`: its value in section `from` when set there,
 * else its default. */
static void visit(const strata__cfg_t *c, const char *name_prefix,
                  const char *from, const strata_option_t *o, visit_fn fn,
                  void *arg)
{
    char name[192];
    snprintf(name, sizeof name, "%s.%s", name_prefix, o->key);
    const char *v = strata__cfg_get(c, from, o->key);
    fn(arg, name, v ? v : o->def ? o->def : "",
       v ? strata__cfg_origin(c, from, o->key) : "default");
}

/* A plugin's keys: its own section's value, unless the shared section's
 * (deprecated) comes from a source of higher precedence or is the only
 * one set (strata__plugin_cfg's order). */
static void visit_plugin(const strata__cfg_t *c, const char *section,
                         const strata__plugin_t *p, visit_fn fn, void *arg)
{
    char own[96];
    snprintf(own, sizeof own, "%s.%s", section, p->name);
    for (const strata_option_t *o = p->vt->options; o && o->key; o++) {
        int shared = strata__cfg_get(c, section, o->key) &&
                     (!strata__cfg_get(c, own, o->key) ||
                      strata__cfg_outranks(c, section, own, o->key));
        visit(c, own, shared ? section : own, o, fn, arg);
    }
}

/* Every key, in the order of strata__sections; a plugin's after its
 * section's core keys, [graph]'s layer lines in file order. */
static void walk(const strata_ctx_t *ctx, const shown_t *sh, visit_fn fn,
                 void *arg)
{
    const strata__cfg_t *c = ctx->cfg;
    for (const strata__section_t *s = strata__sections; s->name; s++) {
        for (const strata_option_t *o = section_opts(s); o && o->key; o++)
            visit(c, s->name, s->name, o, fn, arg);
        for (int i = 0; i < sh->n; i++)
            if (!strcmp(strata__kind_name(sh->p[i]->vt->hdr.kind), s->name))
                visit_plugin(c, s->name, sh->p[i], fn, arg);
        const char *key, *value, *origin;
        char name[192];
        for (size_t i = 0; !section_opts(s) &&
             strata__cfg_entry(c, s->name, i, &key, &value, &origin); i++) {
            snprintf(name, sizeof name, "%s.%s", s->name, key);
            fn(arg, name, value, origin);
        }
    }
}

/* One KEY asked for: report it (cb set) or find the nearest key. */
typedef struct match {
    const char *want;
    int found, bestd;
    char best[192];
    strata_config_cb cb;
    void *user;
} match_t;

static void match_key(void *arg, const char *key, const char *value,
                      const char *origin)
{
    match_t *m = arg;
    if (!strcmp(key, m->want)) {
        m->found = 1;
        if (m->cb)
            m->cb(m->user, key, value, origin);
        return;
    }
    /* "epochs" is nearest to train.epochs: a name without a section is
     * compared with the keys' last part. */
    int d = strata__edit_distance(m->want, strchr(m->want, '.')
                                               ? key : strrchr(key, '.') + 1);
    if (!m->best[0] || d < m->bestd) {
        snprintf(m->best, sizeof m->best, "%s", key);
        m->bestd = d;
    }
}

int strata_config_list(strata_ctx_t *ctx, const char *const *keys,
                       strata_config_cb cb, void *user)
{
    if (!ctx || !cb)
        return STRATA_EINVAL;
    strata_ctx_t *prev = strata__log_bind(ctx);
    shown_t sh = { .n = 0 };
    int rc = check(ctx, &sh);
    for (size_t i = 0; rc == STRATA_OK && keys && keys[i]; i++) {
        match_t m = { .want = keys[i] };
        walk(ctx, &sh, match_key, &m);
        if (!m.found) {
            strata__log(STRATA_LOG_ERROR, WHO, "unknown key '%s'; did you "
                        "mean '%s'?", keys[i], m.best);
            rc = STRATA_ECONFIG;
        }
    }
    if (rc == STRATA_OK && !keys)
        walk(ctx, &sh, cb, user);
    for (size_t i = 0; rc == STRATA_OK && keys && keys[i]; i++) {
        match_t m = { .want = keys[i], .cb = cb, .user = user };
        walk(ctx, &sh, match_key, &m);
    }
    strata__log_bind(prev);
    return rc;
}
