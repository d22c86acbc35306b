/* The flags a subcommand takes besides -c/--set/--task (eval's
 * --checkpoint, predict's --data ...), taken out of its arguments before
 * the common ones are parsed. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* f's flag that `arg` is ("--name" or, for a value, "--name=V"); *eq:
 * the value after '='. NULL: none. */
static const cli_flag_t *match(const char *arg, const cli_flag_t *f, int nf,
                               const char **eq)
{
    for (int i = 0; i < nf; i++) {
        size_t n = strlen(f[i].name);
        if (strncmp(arg, f[i].name, n) != 0)
            continue;
        if (arg[n] == '\0') {
            *eq = NULL;
            return &f[i];
        }
        if (arg[n] == '=' && f[i].value) {
            *eq = arg + n + 1;
            return &f[i];
        }
    }
    return NULL;
}

int cli_take_flags(int argc, char **argv, const cli_flag_t *f, int nf,
                   const char *usage, char **rest, int *nrest)
{
    *nrest = 0;
    for (int i = 0; i < argc; i++) {
        const char *eq;
        const cli_flag_t *g = match(argv[i], f, nf, &eq);
        if (!g) {
            rest[(*nrest)++] = argv[i];
            continue;
        }
        if (!g->value) {
            *g->on = 1;
            continue;
        }
        const char *v = eq ? eq : i + 1 < argc ? argv[++i] : NULL;
        if (!v || !v[0]) {
            fprintf(stderr, "strata: %s needs a value\n%s", g->name, usage);
            return 2;
        }
        if (*g->value) {
            fprintf(stderr, "strata: %s given twice ('%s', '%s')\n%s",
                    g->name, *g->value, v, usage);
            return 2;
        }
        *g->value = v;
    }
    rest[*nrest] = NULL;
    return 0;
}
