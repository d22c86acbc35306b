/* Plugins that others could have written, through the strata binary: a
 * copy of a real strategy in a world-writable directory first on the search
 * path is refused before it is loaded (exit 3, one line naming the
 * directory, its mode and the fixes), listed as BROKEN by `strata plugins`,
 * and loaded once [plugins] trust_path = yes says so; so is one whose
 * directory is safe but a directory above it is not (OpenSSH's
 * StrictModes), while a sticky one above it (/tmp) is fine. */
#include <sys/stat.h>

#include "check.h"
#include "spawn.h"
#include "testutil.h"

static spawn_result_t R;

/* strata with `args` (NULL-terminated, at most 20). */
static int run_(char *const *args)
{
    char *argv[24] = { (char *)spawn_strata_bin() };
    for (int i = 0; args[i] && i < 20; i++)
        argv[i + 1] = args[i];
    spawn_run(argv, 120, &R);
    return R.code;
}
#define run(...) run_((char *const[]){ __VA_ARGS__, NULL })

#define TINY "--set", "data.limit_train=320", "--set", "data.limit_test=100", \
             "--set", "train.epochs=1", "--set", "train.progress=none",       \
             "--set", "train.devices=cpu:0"

int main(void)
{
    const char *built = getenv("STRATA_PLUGIN_PATH");
    if (!built || !*built || !getenv("STRATA_BIN"))
        CHECK_SKIP("STRATA_PLUGIN_PATH or STRATA_BIN not set (run by ctest)");
    char src[600];
    snprintf(src, sizeof src, "%s/mirrored.so", built);
    size_t n = 0;
    void *so = read_all(src, &n);
    if (!so)
        CHECK_SKIP("no %s", src);

    const char *dir = tmp_make("plugins");
    const char *copy = tmp_path("mirrored.so");
    write_file(copy, so, n);
    free(so);
    CHECK(chmod(copy, 0755) == 0 && chmod(dir, 0777) == 0);
    char path_set[600], why[2400];
    snprintf(path_set, sizeof path_set, "plugins.path=%s", dir);

    /* Refused: exit 3, one line that says where, why and what to do. */
    CHECK(run("train", TINY, "--set", path_set, "--set",
              "strategy.plugin=mirrored") == 3);
    snprintf(why, sizeof why, "strata: loader: error: %s: not loaded: its "
             "directory %s is world-writable (mode 0777), so others could "
             "have replaced it: chmod go-w %s, or set [plugins] trust_path = "
             "yes to load it anyway", copy, dir, dir);
    CHECKF(strstr(R.err, why) != NULL, "%s", R.err);

    /* `strata plugins`: listed as BROKEN for the real reason (it said
     * "plugin ABI mismatch"), the detail at debug level. */
    CHECK(run("plugins", "--set", path_set) == 0);
    CHECKF(strstr(R.out, "BROKEN: not trusted: others could have written it") &&
           strstr(R.out, copy) && !strstr(R.out, "ABI mismatch"), "%s", R.out);
    CHECK(run("plugins", "--set", path_set, "--set", "log.level=debug") == 0);
    CHECKF(strstr(R.err, "is world-writable (mode 0777)"), "%s", R.err);

    /* Trusted: the copy loads (the debug line names it) and trains. */
    char loaded[700];
    snprintf(loaded, sizeof loaded, "from %s", copy);
    CHECK(run("train", TINY, "--set", path_set, "--set",
              "strategy.plugin=mirrored", "--set", "plugins.trust_path=yes",
              "--set", "log.level=debug") == 0);
    CHECKF(strstr(R.err, "loaded strategy mirrored") &&
           strstr(R.err, loaded), "%s", R.err);
    CHECK(run("plugins", "--set", path_set, "--set",
              "plugins.trust_path=yes") == 0);
    CHECKF(!strstr(R.out, "BROKEN") && strstr(R.out, copy), "%s", R.out);

    /* chmod go-w, as the line says: loads without trust_path. */
    CHECK(chmod(dir, 0755) == 0);
    CHECK(run("train", TINY, "--set", path_set, "--set",
              "strategy.plugin=mirrored", "--set", "log.level=debug") == 0);
    CHECKF(strstr(R.err, loaded), "%s", R.err);

    /* A world-writable directory above: refused naming it (the checks
     * stopped at the plugin's own directory). */
    const char *deep = tmp_path("deep");
    char deep_so[600], deep_set[620];
    snprintf(deep_so, sizeof deep_so, "%s/mirrored.so", deep);
    snprintf(deep_set, sizeof deep_set, "plugins.path=%s", deep);
    CHECK(mkdir(deep, 0755) == 0 && rename(copy, deep_so) == 0);
    CHECK(chmod(dir, 0777) == 0);
    CHECK(run("train", TINY, "--set", deep_set, "--set",
              "strategy.plugin=mirrored") == 3);
    snprintf(why, sizeof why, "strata: loader: error: %s: not loaded: above "
             "its directory: %s is world-writable (mode 0777), so others "
             "could have replaced what is under it: chmod go-w %s, or set "
             "[plugins] trust_path = yes to load it anyway", deep_so, dir,
             dir);
    CHECKF(strstr(R.err, why) != NULL, "%s", R.err);
    CHECK(run("plugins", "--set", deep_set) == 0);
    CHECKF(strstr(R.out, "BROKEN: not trusted") && strstr(R.out, deep_so),
           "%s", R.out);
    /* Sticky, as /tmp is: others can neither rename nor remove ours. */
    CHECK(chmod(dir, 01777) == 0);
    snprintf(loaded, sizeof loaded, "from %s", deep_so);
    CHECK(run("train", TINY, "--set", deep_set, "--set",
              "strategy.plugin=mirrored", "--set", "log.level=debug") == 0);
    CHECKF(strstr(R.err, loaded), "%s", R.err);
    CHECK(chmod(dir, 0700) == 0);

    tmp_cleanup();
    return CHECK_DONE();
}
