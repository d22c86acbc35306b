/* Embeds strata through <strata/strata.h>: prints the library version and
 * the plugins found in the package's STRATA_PLUGIN_INSTALL_DIR. */
#include <stdio.h>
#include <string.h>

#include <strata/strata.h>

static void on_plugin(void *user, const char *name, const char *kind,
                      int abi_major, int abi_minor, const char *version,
                      const char *description, const char *path, int status)
{
    (void)user; (void)abi_major; (void)abi_minor; (void)version;
    (void)description;
    printf("plugin %s %s %s %s\n", name, kind, status == 0 ? "ok" : "broken",
           path);
}

int main(void)
{
    strata_ctx_t *ctx = NULL;
    int rc = strata_ctx_create(NULL, &ctx);
    if (rc == STRATA_OK)
        rc = strata_ctx_set(ctx, "plugins.path=" APP_PLUGIN_DIR);
    if (rc == STRATA_OK) {
        printf("strata %s, plugin dir %s\n", strata_version(), APP_PLUGIN_DIR);
        rc = strata_plugins_list(ctx, on_plugin, NULL);
    }
    strata_ctx_destroy(ctx);
    if (rc != STRATA_OK)
        fprintf(stderr, "app: %s (%s)\n", strata_strerror(rc), strata_err_name(rc));
    return rc == STRATA_OK ? 0 : 1;
}
