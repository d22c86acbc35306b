/* libstrata finds the plugins installed beside it (<dir of libstrata.so>/
 * strata/plugins) for any program that loads it: this one runs from a
 * directory where the executable-relative dir (<exe dir>/../lib/strata/
 * plugins) does not exist, with STRATA_PLUGIN_PATH unset, as python does
 * when it imports the package. Public API only.
 *
 * argv[1]: the directory the plugins must come from. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <strata/strata.h>

#include "check.h"

struct seen {
    const char *dir;
    int total, beside;   /* plugins listed; of them, in dir */
    int mirrored_ok;
};

static void on_plugin(void *user, const char *name, const char *kind,
                      int abi_major, int abi_minor, const char *version,
                      const char *description, const char *path, int status)
{
    struct seen *s = user;
    size_t n = strlen(s->dir);
    s->total++;
    if (strncmp(path, s->dir, n) == 0 && path[n] == '/')
        s->beside++;
    if (strcmp(name, "mirrored") == 0 && status == 0 && path[n] == '/' &&
        strncmp(path, s->dir, n) == 0)
        s->mirrored_ok = 1;
}

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    if (argc != 2)
        return CHECK_DONE();
    CHECK(getenv("STRATA_PLUGIN_PATH") == NULL);

    /* The layout: exe-relative lookup finds nothing here. */
    char exe[PATH_MAX], rel[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    CHECK(n > 0);
    exe[n > 0 ? n : 0] = '\0';
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = '\0';
    }
    snprintf(rel, sizeof rel, "%s/lib/strata/plugins", exe);
    struct stat st;
    CHECKF(stat(rel, &st) != 0, "%s exists: the test proves nothing", rel);

    char dir[PATH_MAX];
    CHECK(realpath(argv[1], dir) != NULL);
    strata_ctx_t *ctx = NULL;
    CHECK(strata_ctx_create(NULL, &ctx) == 0);
    struct seen s = { .dir = dir };
    CHECK(strata_plugins_list(ctx, on_plugin, &s) == 0);
    CHECKF(s.total > 0 && s.beside == s.total,
           "%d plugins listed, %d from %s", s.total, s.beside, dir);
    CHECK(s.mirrored_ok);
    /* and a plugin is usable by name through that path */
    uint32_t caps = 0;
    char text[128];
    CHECK(strata_plugin_caps(ctx, "local", &caps, text, sizeof text) == 0);
    strata_ctx_destroy(ctx);
    return CHECK_DONE();
}
