/* Collects the option tables of the core and of the shipped plugins. */
#include "optables.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cluster/cluster.h"
#include "internal.h"

static const char *const k_strategies[] = { "mirrored", "central", "mwms",
                                            "ps" };
static const char *const k_transports[] = { "local", "zmq" };

static int add_plugin(optables_t *ts, const char *dir, const char *kind,
                      const char *name)
{
    char so[1024];
    snprintf(so, sizeof so, "%s/%s.so", dir, name);
    void *dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        printf("%s: %s\n", so, dlerror());
        return -1;
    }
    ts->dl[ts->ndl++] = dl;
    const strata_plugin_v2_t *p = dlsym(dl, STRATA_PLUGIN_SYMBOL);
    if (!p) {
        printf("%s: no symbol %s\n", so, STRATA_PLUGIN_SYMBOL);
        return -1;
    }
    optable_t *t = &ts->t[ts->n++];
    snprintf(t->section, sizeof t->section, "%s.%s", kind, name);
    t->plugin = name;
    t->kind = kind;
    t->opts = p->options;
    return 0;
}

int optables_load(optables_t *ts, const char *plugin_dir)
{
    memset(ts, 0, sizeof *ts);
    for (const strata__section_t *s = strata__sections; s->name; s++) {
        optable_t *t = &ts->t[ts->n++];
        snprintf(t->section, sizeof t->section, "%s", s->name);
        /* [cluster] is applied by cluster.c from its own table. */
        t->opts = s->opts ? s->opts
                  : strcmp(s->name, "cluster") == 0 ? strata__cluster_options
                                                    : NULL;
    }
    for (size_t i = 0; i < sizeof k_strategies / sizeof *k_strategies; i++)
        if (add_plugin(ts, plugin_dir, "strategy", k_strategies[i]) != 0)
            return -1;
    for (size_t i = 0; i < sizeof k_transports / sizeof *k_transports; i++)
        if (add_plugin(ts, plugin_dir, "transport", k_transports[i]) != 0)
            return -1;
    return 0;
}

void optables_free(optables_t *ts)
{
    for (int i = 0; i < ts->ndl; i++)
        dlclose(ts->dl[i]);
    ts->ndl = 0;
}

const optable_t *optables_find(const optables_t *ts, const char *section)
{
    for (int i = 0; i < ts->n; i++)
        if (strcmp(ts->t[i].section, section) == 0)
            return &ts->t[i];
    return NULL;
}

const strata_option_t *optable_key(const optable_t *t, const char *key)
{
    for (const strata_option_t *o = t ? t->opts : NULL; o && o->key; o++)
        if (strcmp(o->key, key) == 0)
            return o;
    return NULL;
}
