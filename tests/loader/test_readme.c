/* Every plugin folder's README lists exactly the plugin's INI keys: the
 * rows of its "| key | type | default | meaning |" table against the
 * option table the built plugin exports (rule 12 of the style guide). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata/plugin.h>

#include "check.h"

/* The keys of the README's option table, "\n"-joined into keys. */
static int readme_keys(const char *path, char *keys, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[2048];
    int in_table = 0;
    keys[0] = '\0';
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "| key |", 7)) {
            in_table = 1;
            continue;
        }
        if (!in_table || !strncmp(line, "| ---", 5))
            continue;
        if (strncmp(line, "| `", 3) != 0)
            break;
        const char *end = strchr(line + 3, '`');
        if (!end)
            break;
        snprintf(keys + strlen(keys), cap - strlen(keys), "%.*s\n",
                 (int)(end - line - 3), line + 3);
    }
    fclose(f);
    return 0;
}

static void check_plugin(const char *bin, const char *src, const char *kind,
                         const char *name)
{
    char so[1024], readme[1024], want[4096] = "", got[4096];
    snprintf(so, sizeof so, "%s/%s.so", bin, name);
    snprintf(readme, sizeof readme, "%s/plugins/%s/%s/README.md", src, kind,
             name);
    void *dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    CHECKF(dl != NULL, "%s: %s", so, dlerror());
    if (!dl)
        return;
    const strata_plugin_v2_t *p = dlsym(dl, STRATA_PLUGIN_SYMBOL);
    CHECKF(p != NULL, "%s: no " STRATA_PLUGIN_SYMBOL "", so);
    for (const strata_option_t *o = p ? p->options : NULL; o && o->key; o++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s\n",
                 o->key);
    CHECKF(readme_keys(readme, got, sizeof got) == 0, "%s missing", readme);
    CHECKF(strcmp(want, got) == 0, "%s lists keys\n%s-- but %s.so has\n%s",
           readme, got, name, want);
    dlclose(dl);
}

int main(void)
{
    const char *bin = getenv("STRATA_PLUGIN_PATH");
    const char *src = getenv("STRATA_SRC");
    if (!bin || !src)
        CHECK_SKIP("STRATA_PLUGIN_PATH and STRATA_SRC not set (run by ctest)");
    static const char *const strategies[] = { "mirrored", "central", "mwms",
                                              "ps" };
    for (size_t i = 0; i < sizeof strategies / sizeof *strategies; i++)
        check_plugin(bin, src, "strategy", strategies[i]);
    static const char *const transports[] = { "local", "zmq" };
    for (size_t i = 0; i < sizeof transports / sizeof *transports; i++)
        check_plugin(bin, src, "transport", transports[i]);
    /* nccl.so exists only in a CUDA build. */
    char nccl[1024];
    snprintf(nccl, sizeof nccl, "%s/nccl.so", bin);
    FILE *f = fopen(nccl, "r");
    if (f) {
        fclose(f);
        check_plugin(bin, src, "transport", "nccl");
    }
    return CHECK_DONE();
}
