/* strata config: every key of a job, its value and where it came from
 * (strata_config_list), one aligned line each, as `git config
 * --show-origin` shows them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char *const k_config_usage =
    "usage: strata config [-c FILE] [--set SECTION.KEY=VALUE]... [KEY]...\n"
    "\n"
    "Print every key of the job (or only each KEY named, SECTION.KEY: e.g.\n"
    "train.epochs, strategy.mirrored.shard_optimizer), its value and the\n"
    "source that won: FILE:LINE, env STRATA_SECTION_KEY, --set, or default.\n"
    "The keys: the core sections', the strategy's and the installed\n"
    "transports' of [transport]'s lists, and the [graph] layer lines. The\n"
    "values are checked first as `strata train` checks them.\n"
    "\n"
    "  -c, --config FILE        the INI file\n"
    "  -s, --set SECTION.KEY=V  override one key, as for strata train\n"
    "  -h, --help               this text\n";

/* The "KEY = VALUE" part is padded to the longest, up to this. */
#define CONFIG_COLUMN 56

typedef struct line {
    char       *key;
    const char *value, *origin; /* valid while the context lives */
} line_t;

typedef struct lines {
    line_t *l;
    size_t  n, cap;
    int     nomem;
} lines_t;

static void collect(void *user, const char *key, const char *value,
                    const char *origin)
{
    lines_t *ls = user;
    if (ls->n == ls->cap) {
        size_t cap = ls->cap ? 2 * ls->cap : 64;
        line_t *l = realloc(ls->l, cap * sizeof *l);
        if (!l) {
            ls->nomem = 1;
            return;
        }
        ls->l = l;
        ls->cap = cap;
    }
    char *k = strdup(key);
    if (!k) {
        ls->nomem = 1;
        return;
    }
    ls->l[ls->n++] = (line_t){ k, value, origin };
}

static void print_lines(const lines_t *ls)
{
    int width = 0;
    for (size_t i = 0; i < ls->n; i++) {
        size_t w = strlen(ls->l[i].key) + 3 + strlen(ls->l[i].value);
        if (w <= CONFIG_COLUMN && (int)w > width)
            width = (int)w;
    }
    for (size_t i = 0; i < ls->n; i++) {
        const line_t *l = &ls->l[i];
        int w = printf("%s =%s%s", l->key, l->value[0] ? " " : "", l->value);
        printf("%*s%s\n", w < width ? width - w + 2 : 2, "", l->origin);
    }
}

/* -c FILE, --set A (also --config=FILE, --set=A) and the KEYs; 1 after
 * printing the help, 0, or STRATA_EINVAL after a message. */
static int parse(int argc, char **argv, const char **config, const char **sets,
                 int *nsets, const char **keys, int *nkeys)
{
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            fputs(k_config_usage, stdout);
            return 1;
        }
        int is_c = !strcmp(arg, "-c") || !strcmp(arg, "--config");
        int is_s = !strcmp(arg, "-s") || !strcmp(arg, "--set");
        const char *val = NULL;
        if ((is_c || is_s) && i + 1 < argc)
            val = argv[++i];
        else if (!strncmp(arg, "--config=", 9))
            is_c = 1, val = arg + 9;
        else if (!strncmp(arg, "--set=", 6))
            is_s = 1, val = arg + 6;
        if ((is_c || is_s) && !val) {
            fprintf(stderr, "strata: %s needs a value\n%s", arg,
                    k_config_usage);
            return STRATA_EINVAL;
        }
        if (is_c && *config) {
            fprintf(stderr, "strata: -c given twice ('%s', '%s')\n", *config,
                    val);
            return STRATA_EINVAL;
        }
        if (is_c)
            *config = val;
        else if (is_s)
            sets[(*nsets)++] = val;
        else if (arg[0] == '-') {
            fprintf(stderr, "strata: unknown argument '%s'\n%s", arg,
                    k_config_usage);
            return STRATA_EINVAL;
        } else
            keys[(*nkeys)++] = arg;
    }
    return 0;
}

int cli_config(int argc, char **argv)
{
    const char *config = NULL;
    const char **sets = calloc((size_t)argc + 1, sizeof *sets);
    const char **keys = calloc((size_t)argc + 1, sizeof *keys);
    int nsets = 0, nkeys = 0;
    lines_t ls = { .nomem = !sets || !keys };
    int rc = ls.nomem ? STRATA_ENOMEM
                      : parse(argc, argv, &config, sets, &nsets, keys, &nkeys);
    strata_ctx_t *ctx = NULL;
    if (rc == 0) {
        rc = strata_ctx_create(config, &ctx);
        if (rc == STRATA_ENOENT) /* a missing file: a usage error */
            rc = STRATA_ECONFIG;
    }
    for (int i = 0; rc == 0 && i < nsets; i++)
        rc = strata_ctx_set(ctx, sets[i]);
    if (rc == 0)
        rc = strata_config_list(ctx, nkeys ? keys : NULL, collect, &ls);
    if (ls.nomem) {
        fprintf(stderr, "strata: config: out of memory\n");
        rc = STRATA_ENOMEM;
    }
    if (rc == 0)
        print_lines(&ls);
    for (size_t i = 0; i < ls.n; i++)
        free(ls.l[i].key);
    free(ls.l);
    strata_ctx_destroy(ctx);
    free(sets);
    free(keys);
    return rc == 1 ? STRATA_OK : rc;
}
