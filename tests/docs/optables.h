/* Every option table strata ships, in one list: the core's sections (from
 * core/config/settings.c and core/cluster/cluster.c, compiled into the test) and the
 * plugins built in every configuration (their exported option tables,
 * dlopen'ed from the build's plugin directory). nccl.so exists only in a
 * CUDA build, so it is not listed: its README's table is kept by its own
 * GPU test. */
#ifndef STRATA_TESTS_DOCS_OPTABLES_H
#define STRATA_TESTS_DOCS_OPTABLES_H

#include <strata/plugin.h>

#define OPTABLES_MAX 32

typedef struct optable {
    char                   section[64]; /* "train", "strategy.mirrored" */
    const char            *plugin;      /* NULL for a core section       */
    const char            *kind;        /* "strategy" | "transport"       */
    const strata_option_t *opts;        /* { .key = NULL }-terminated     */
} optable_t;

typedef struct optables {
    optable_t t[OPTABLES_MAX];
    int       n;
    void     *dl[OPTABLES_MAX];
    int       ndl;
} optables_t;

/* Fill `ts` from the core and from the plugins in `plugin_dir`. Returns 0,
 * or -1 after printing which plugin could not be read. */
int optables_load(optables_t *ts, const char *plugin_dir);
void optables_free(optables_t *ts);

/* The table of `section` ("train", "strategy.ps"), or NULL. */
const optable_t *optables_find(const optables_t *ts, const char *section);

/* Option `key` of `t`, or NULL. */
const strata_option_t *optable_key(const optable_t *t, const char *key);

#endif
