/* strata_ctx: a configured run (public API of strata.h) and the plugins it
 * has loaded. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "model/loss.h"

extern char **environ;

int strata_ctx_create(const char *ini_path, strata_ctx_t **out)
{
    *out = NULL;
    strata_ctx_t *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return STRATA_ENOMEM;
    if (pthread_mutex_init(&ctx->log_lock, NULL) != 0) {
        free(ctx);
        return STRATA_ENOMEM;
    }
    if (pthread_mutex_init(&ctx->strangers_lock, NULL) != 0) {
        pthread_mutex_destroy(&ctx->log_lock);
        free(ctx);
        return STRATA_ENOMEM;
    }
    atomic_init(&ctx->log_level, STRATA_LOG_INFO);
    ctx->hc.ctx = ctx;
    strata_ctx_t *prev = strata__log_bind(ctx);
    int rc = strata__cfg_new(&ctx->cfg);
    if (rc == STRATA_OK && ini_path) {
        ctx->config_path = strdup(ini_path);
        rc = ctx->config_path ? strata__cfg_load_file(ctx->cfg, ini_path)
                              : STRATA_ENOMEM;
    }
    if (rc == STRATA_OK)
        rc = strata__cfg_load_env(ctx->cfg, environ);
    strata__log_bind(prev);
    if (rc != STRATA_OK) {
        strata_ctx_destroy(ctx);
        return rc;
    }
    *out = ctx;
    return STRATA_OK;
}

void strata_ctx_destroy(strata_ctx_t *ctx)
{
    if (!ctx)
        return;
    for (int i = ctx->nplugins - 1; i >= 0; i--)
        strata__plugin_close(ctx->plugins[i]);
    strata__cfg_free(ctx->cfg);
    strata__mem_clear(ctx);
    free(ctx->config_path);
    free(ctx->search_path);
    free(ctx->task);
    pthread_mutex_destroy(&ctx->log_lock);
    pthread_mutex_destroy(&ctx->strangers_lock);
    free(ctx);
}

int strata_ctx_set_callbacks(strata_ctx_t *ctx, const strata_callbacks_t *cb)
{
    if (!ctx || (cb && cb->struct_size < offsetof(strata_callbacks_t, epoch)))
        return STRATA_EINVAL;
    memset(&ctx->cb, 0, sizeof ctx->cb);
    if (cb)  /* an application built against a shorter struct: its part */
        memcpy(&ctx->cb, cb, cb->struct_size < sizeof ctx->cb
                                 ? cb->struct_size : sizeof ctx->cb);
    ctx->cb.struct_size = sizeof ctx->cb;
    return STRATA_OK;
}

void strata__out(strata_ctx_t *ctx, const char *fmt, ...)
{
    if (!ctx || !ctx->cb.text)
        return;
    char small[1024], *text = small;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof small) {   /* a long summary: the whole of it */
        text = malloc((size_t)n + 1);
        if (!text)
            return;
        va_start(ap, fmt);
        vsnprintf(text, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    ctx->cb.text(ctx->cb.user, text);
    if (text != small)
        free(text);
}

int strata_ctx_set_task(strata_ctx_t *ctx, const char *task)
{
    if (!ctx || !task)
        return STRATA_EINVAL;
    char *copy = strdup(task);
    if (!copy)
        return STRATA_ENOMEM;
    free(ctx->task);
    ctx->task = copy;
    return STRATA_OK;
}

int strata_ctx_set(strata_ctx_t *ctx, const char *assignment)
{
    if (!ctx || !assignment)
        return STRATA_EINVAL;
    ctx->settings_ok = 0;
    strata_ctx_t *prev = strata__log_bind(ctx);
    int rc = strata__cfg_set(ctx->cfg, assignment, STRATA__CFG_CLI, "--set");
    strata__log_bind(prev);
    return rc;
}

const char *strata_ctx_get(strata_ctx_t *ctx, const char *section,
                           const char *key)
{
    return ctx && section && key ? strata__cfg_get(ctx->cfg, section, key)
                                 : NULL;
}

const char *strata_metric_name(strata_ctx_t *ctx)
{
    if (!ctx)
        return NULL;
    strata_ctx_t *prev = strata__log_bind(ctx);
    int rc = strata__ctx_resolve(ctx);
    strata__log_bind(prev);
    return rc == STRATA_OK ? strata__metric_name(ctx->s.model.metric) : NULL;
}

int strata__ctx_resolve(strata_ctx_t *ctx)
{
    if (ctx->settings_ok)
        return STRATA_OK;
    int rc = strata__settings_load(ctx->cfg, &ctx->s);
    if (rc != STRATA_OK)
        return rc;
    atomic_store(&ctx->log_level, ctx->s.log.level);
    free(ctx->search_path);
    ctx->search_path = strata__plugin_search_path(ctx->s.plugins.path);
    if (!ctx->search_path)
        return STRATA_ENOMEM;
    ctx->settings_ok = 1;
    return STRATA_OK;
}

int strata__ctx_plugin(strata_ctx_t *ctx, const char *name, uint32_t kind,
                       int missing_level, strata__plugin_t **out)
{
    *out = NULL;
    for (int i = 0; i < ctx->nplugins; i++)
        if (strcmp(ctx->plugins[i]->name, name) == 0) {
            if (ctx->plugins[i]->vt->hdr.kind != kind) {
                strata__log(STRATA_LOG_ERROR, "loader",
                            "%s: is a %s plugin, expected a %s",
                            ctx->plugins[i]->path,
                            strata__kind_name(ctx->plugins[i]->vt->hdr.kind),
                            strata__kind_name(kind));
                return STRATA_EABI;
            }
            *out = ctx->plugins[i];
            return STRATA_OK;
        }
    if (ctx->nplugins == STRATA_MAX_PLUGINS) {
        strata__log(STRATA_LOG_ERROR, "loader",
                    "more than %d plugins in one run", STRATA_MAX_PLUGINS);
        return STRATA_ENOMEM;
    }
    int rc = strata__plugin_open_as(name, kind, ctx->search_path,
                                    missing_level,
                                    ctx->s.plugins.trust_path
                                        ? STRATA__PLUGIN_TRUST_PATH : 0u,
                                    out);
    if (rc == STRATA_OK) {
        ctx->plugins[ctx->nplugins++] = *out;
        strata__log(STRATA_LOG_DEBUG, "loader", "loaded %s %s %s from %s",
                    strata__kind_name(kind), name, (*out)->vt->hdr.version,
                    (*out)->path);
    }
    return rc;
}

void strata__ctx_opened(strata_ctx_t *ctx, const char *name)
{
    size_t n = strlen(name), used = strlen(ctx->opened);
    for (const char *p = ctx->opened; (p = strstr(p, name)); p += n)
        if ((p == ctx->opened || p[-1] == ' ') && (!p[n] || p[n] == ','))
            return;
    if (used + n + 3 < sizeof ctx->opened)
        snprintf(ctx->opened + used, sizeof ctx->opened - used, "%s%s",
                 used ? ", " : "", name);
}

/* Defaults of a plugin's option table only. */
static int apply_defaults(const strata_option_t *o, void *dst)
{
    char why[256];
    for (; o && o->key; o++)
        if (o->def && strata__opt_parse(o, o->def, (char *)dst + o->offset,
                                        why, sizeof why) != STRATA_OK) {
            strata__log(STRATA_LOG_ERROR, "config",
                        "plugin default %s = '%s' is invalid: %s", o->key,
                        o->def, why);
            return STRATA_ECONFIG;
        }
    return STRATA_OK;
}

int strata__plugin_cfg(strata_ctx_t *ctx, const strata__plugin_t *p,
                       const char *section, int flat, void **out)
{
    const char *const *also_valid = strcmp(section, "transport") == 0
                                        ? strata__transport_core_keys
                                        : strata__strategy_core_keys;
    const strata_option_t *opts = p->vt->options;
    size_t size = p->vt->cfg_size ? p->vt->cfg_size : 1;
    void *cfg = calloc(1, size);
    if (!cfg)
        return STRATA_ENOMEM;
    char own[96];
    snprintf(own, sizeof own, "%s.%s", section, p->name);
    /* Defaults, then the shared section's keys (deprecated), then the
     * plugin's own section over them, every key of which must be its; a
     * shared key from a source of higher precedence (the environment,
     * --set) still wins over the own section's (docs/configuration.md). */
    int rc = apply_defaults(opts, cfg);
    if (rc == STRATA_OK && flat)
        rc = strata__cfg_apply_keys(ctx->cfg, section, opts, cfg, also_valid,
                                    flat == STRATA__CFG_FLAT_STRICT);
    if (rc == STRATA_OK)
        rc = strata__cfg_apply_keys(ctx->cfg, own, opts, cfg, NULL, 1);
    if (rc == STRATA_OK && flat)
        rc = strata__cfg_apply_outranking(ctx->cfg, section, own, opts, cfg);
    for (const strata_option_t *o = opts; rc == STRATA_OK && o && o->key; o++)
        if (!o->def && !strata__cfg_get(ctx->cfg, own, o->key) &&
            !(flat && strata__cfg_get(ctx->cfg, section, o->key))) {
            strata__log(STRATA_LOG_ERROR, "config", "[%s] missing required "
                        "key '%s' (%s)", own, o->key,
                        o->help ? o->help : "no default");
            rc = STRATA_ECONFIG;
        }
    if (rc != STRATA_OK) {
        free(cfg);
        cfg = NULL;
    }
    *out = cfg;
    return rc;
}

int strata_plugins_list(strata_ctx_t *ctx, strata_plugin_cb cb, void *user)
{
    if (!ctx || !cb)
        return STRATA_EINVAL;
    /* Only [plugins] and [log] level matter here: a listing must work
     * even when other sections of the file are still wrong. At debug level
     * the loader says why a plugin is BROKEN. */
    const char *lv = strata__cfg_get(ctx->cfg, "log", "level");
    int level = lv ? strata__log_level_parse(lv) : -1;
    if (level >= 0)
        atomic_store(&ctx->log_level, level);
    strata_ctx_t *prev = strata__log_bind(ctx);
    const strata__section_t *sec = strata__sections;
    while (sec->name && strcmp(sec->name, "plugins") != 0)
        sec++;
    strata__plugins_cfg_t pc;
    char *path = NULL;
    int rc = strata__cfg_apply(ctx->cfg, "plugins", sec->opts, &pc, NULL);
    if (rc == STRATA_OK && !(path = strata__plugin_search_path(pc.path)))
        rc = STRATA_ENOMEM;
    if (rc == STRATA_OK)
        rc = strata__plugin_scan(path, pc.trust_path ? STRATA__PLUGIN_TRUST_PATH
                                                     : 0u, cb, user);
    free(path);
    strata__log_bind(prev);
    return rc;
}

void strata_request_stop(strata_ctx_t *ctx)
{
    if (ctx)
        atomic_store(&ctx->stop, 1);
}
