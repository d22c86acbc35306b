/* Loader: search path, open/close of good and broken fake plugins (one log
 * line each, naming the file and both values), first-wins, scan, and the
 * owner/mode checks before dlopen ([plugins] trust_path skips them). */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"
#include "testutil.h"

#define D1 LOADER_DIR1
#define D2 LOADER_DIR2
#define BOTH D1 ":" D2

/* open must fail with `code`, leave *out NULL, and log exactly one line that
 * holds every word of the NULL-terminated list. */
static void expect_fail(const char *name, uint32_t kind, const char *sp, int code, ...)
{
    static strata__plugin_t dummy;
    strata__plugin_t *p = &dummy;
    capture_begin();
    int rc = strata__plugin_open(name, kind, sp, &p);
    const char *log = capture_end();
    const char *who = name ? name : "(null)";
    CHECKF(rc == code, "%s: rc %s, want %s", who, strata_err_name(rc), strata_err_name(code));
    CHECKF(p == NULL, "%s: *out not NULL", who);
    CHECKF(count_lines(log) == 1, "%s: %d log lines: %s", who, count_lines(log), log);
    CHECKF(strstr(log, "loader: error: ") != NULL, "%s: not an error line: %s", who, log);
    va_list ap;
    va_start(ap, code);
    for (const char *w; (w = va_arg(ap, const char *)) != NULL;)
        CHECKF(strstr(log, w) != NULL, "%s: log lacks \"%s\": %s", who, w, log);
    va_end(ap);
    if (rc == 0 && p != &dummy)
        strata__plugin_close(p);
}

/* open must succeed quietly; returns the plugin (caller closes). */
static strata__plugin_t *expect_ok(const char *name, uint32_t kind, const char *sp)
{
    strata__plugin_t *p = NULL;
    capture_begin();
    int rc = strata__plugin_open(name, kind, sp, &p);
    const char *log = capture_end();
    CHECKF(rc == 0, "%s: rc %s: %s", name, strata_err_name(rc), log);
    CHECKF(log[0] == '\0', "%s: logged on success: %s", name, log);
    CHECK(rc != 0 || p != NULL);
    return rc == 0 ? p : NULL;
}

/* ---- tests ----------------------------------------------------------------- */

static void test_kind_name(void)
{
    CHECK(strcmp(strata__kind_name(STRATA_KIND_STRATEGY), "strategy") == 0);
    CHECK(strcmp(strata__kind_name(STRATA_KIND_TRANSPORT), "transport") == 0);
    CHECK(strcmp(strata__kind_name(0), "unknown") == 0);
    CHECK(strcmp(strata__kind_name(77), "unknown") == 0);
}

static void test_search_path(void)
{
    /* The expected library-relative dir (the loader is linked into this
     * executable: dladdr names it) and exe-relative dir, computed
     * independently. */
    char exe[4096], rel[8500], beside[4200];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    CHECK(n > 0);
    exe[n > 0 ? n : 0] = '\0';
    *strrchr(exe, '/') = '\0';
    snprintf(beside, sizeof beside, "%s/strata/plugins", exe);
    *strrchr(exe, '/') = '\0';
    snprintf(rel, sizeof rel, "%s:%s/lib/strata/plugins", beside, exe);

    char want[9000];
    setenv("STRATA_PLUGIN_PATH", "/e1::/e2/:/ini1: /e3 ", 1);
    char *sp = strata__plugin_search_path("/ini1:/ini2:::/ini1/");
    snprintf(want, sizeof want, "/ini1:/ini2:/e1:/e2:/e3:%s:%s", rel,
             "/nonexistent/strata-install/lib/strata/plugins");
    CHECKF(sp && strcmp(sp, want) == 0, "got %s\nwant %s", sp ? sp : "(null)", want);
    free(sp);

    unsetenv("STRATA_PLUGIN_PATH");
    sp = strata__plugin_search_path(NULL);
    snprintf(want, sizeof want, "%s:%s", rel,
             "/nonexistent/strata-install/lib/strata/plugins");
    CHECKF(sp && strcmp(sp, want) == 0, "got %s\nwant %s", sp ? sp : "(null)", want);
    free(sp);

    setenv("STRATA_PLUGIN_PATH", "", 1);
    sp = strata__plugin_search_path("");
    CHECKF(sp && strcmp(sp, want) == 0, "got %s\nwant %s", sp ? sp : "(null)", want);
    free(sp);
}

static void test_open_ok(void)
{
    strata__plugin_t *p = expect_ok("fake_ok", STRATA_KIND_STRATEGY, D1);
    if (p) {
        CHECK(strcmp(p->name, "fake_ok") == 0);
        CHECK(strcmp(p->path, D1 "/fake_ok.so") == 0);
        CHECK(p->dl != NULL);
        CHECK(strcmp(p->vt->hdr.name, "fake_ok") == 0);
        CHECK(p->vt->hdr.kind == STRATA_KIND_STRATEGY);
        CHECK(p->major == 2 && p->v1 == NULL);
        void *ctx = &ctx;
        CHECK(p->vt->init(NULL, NULL, NULL, &ctx) == 0 && ctx == NULL);
        p->vt->fini(ctx);
        CHECK(STRATA_HAS(p->vt, ctl) == 0);   /* sized, but NULL */
    }
    strata__plugin_close(p);

    /* A plugin of ABI 1: its entries at the ABI 2 layout, its own init kept
     * for the adapter. */
    p = expect_ok("fake_v1", STRATA_KIND_STRATEGY, D1);
    if (p) {
        CHECK(p->major == 1 && p->v1 != NULL && p->vt->init == NULL);
        CHECK(p->vt->hdr.abi_major == 1 && p->vt->hdr.abi_minor == 4);
        CHECK(p->vt->hdr.struct_size == sizeof(strata_plugin_v2_t));
        CHECK(p->vt->fini == p->v1->fini && p->vt->reduce == p->v1->reduce &&
              p->vt->update == p->v1->update && p->vt->create_var != NULL);
        CHECK(p->vt->drive == NULL && p->vt->placed == NULL);
        void *ctx = &ctx;
        CHECK(p->v1->init(NULL, NULL, &ctx) == 0 && ctx == NULL);
    }
    strata__plugin_close(p);
    strata__plugin_close(NULL);               /* no-op */

    /* A transport opened as one; empty entries in the path are skipped. */
    p = expect_ok("fake_kind", STRATA_KIND_TRANSPORT, "::/nonexistent:" D1 ":");
    CHECK(p && p->vt->hdr.kind == STRATA_KIND_TRANSPORT);
    strata__plugin_close(p);

    /* Two handles on the same file are independent. */
    strata__plugin_t *a = expect_ok("fake_ok", STRATA_KIND_STRATEGY, D1);
    strata__plugin_t *b = expect_ok("fake_ok", STRATA_KIND_STRATEGY, D1);
    CHECK(a && b && a != b && a->vt != b->vt && a->vt->fini == b->vt->fini);
    strata__plugin_close(a);
    strata__plugin_close(b);
}

static void test_open_broken(void)
{
    char small[160], small1[160];
    snprintf(small, sizeof small, "struct_size %zu is smaller than the ABI 2.0 vtable (%zu",
             offsetof(strata_plugin_v2_t, update),
             offsetof(strata_plugin_v2_t, reduce_ready)); /* 2.0 ends at placed */
    snprintf(small1, sizeof small1, "struct_size %zu is smaller than the ABI 1.0 vtable (%zu",
             offsetof(strata_plugin_v1_t, update),
             offsetof(strata_plugin_v1_t, ctl) + sizeof(void (*)(void)));

    expect_fail("fake_abi3", STRATA_KIND_STRATEGY, BOTH, STRATA_EABI,
                D1 "/fake_abi3.so", "plugin ABI major 3 in the header of its "
                "symbol strata_plugin_v2", "rebuild it", NULL);
    expect_fail("fake_v1abi2", STRATA_KIND_STRATEGY, BOTH, STRATA_EABI,
                D1 "/fake_v1abi2.so", "plugin ABI major 2 in the header of its "
                "symbol strata_plugin_v1", NULL);
    expect_fail("fake_nosym", STRATA_KIND_STRATEGY, BOTH, STRATA_EABI,
                D1 "/fake_nosym.so", "no symbol strata_plugin_v2 or "
                "strata_plugin_v1", "(found: strata_plugin_v3)", NULL);
    expect_fail("fake_v1small", STRATA_KIND_STRATEGY, BOTH, STRATA_EABI,
                D1 "/fake_v1small.so", small1, NULL);
    expect_fail("fake_v1noreduce", STRATA_KIND_STRATEGY, BOTH, STRATA_EABI,
                D1 "/fake_v1noreduce.so", "required entry reduce is NULL", NULL);
    expect_fail("fake_name", STRATA_KIND_STRATEGY, BOTH, STRATA_EABI,
                D1 "/fake_name.so", "'other'", "'fake_name'", NULL);
    expect_fail("fake_kind", STRATA_KIND_STRATEGY, BOTH, STRATA_EABI,
                D1 "/fake_kind.so is a transport plugin, expected a strategy", NULL);
    expect_fail("fake_ok", STRATA_KIND_TRANSPORT, BOTH, STRATA_EABI,
                D1 "/fake_ok.so is a strategy plugin, expected a transport", NULL);
    expect_fail("fake_sig", STRATA_KIND_STRATEGY, BOTH, STRATA_EABI,
                D1 "/fake_sig.so is not binary compatible", "'ptr2-f16-be'",
                "'" STRATA_BUILD_SIG "'", NULL);
    expect_fail("fake_small", STRATA_KIND_STRATEGY, BOTH, STRATA_EABI,
                D1 "/fake_small.so", small, NULL);
    expect_fail("fake_noinit", STRATA_KIND_STRATEGY, BOTH, STRATA_EABI,
                D1 "/fake_noinit.so", "init is NULL", NULL);
    expect_fail("fake_noreduce", STRATA_KIND_STRATEGY, BOTH, STRATA_EABI,
                D1 "/fake_noreduce.so", "required entry reduce is NULL",
                "a strategy needs create_var, reduce and update", NULL);
    expect_fail("fake_tnoreduce", STRATA_KIND_TRANSPORT, BOTH, STRATA_EABI,
                D1 "/fake_tnoreduce.so", "required entry reduce is NULL",
                "a transport needs reduce", NULL);
    expect_fail("fake_undef", STRATA_KIND_STRATEGY, BOTH, STRATA_EABI,
                D1 "/fake_undef.so: cannot load", "strata_no_such_function",
                "perhaps a missing symbol", NULL);
}

static void test_open_bad_args(void)
{
    char longname[80];
    memset(longname, 'a', 64);
    longname[64] = '\0';
    const char *bad[] = { "../fake_ok", "Fake_ok", "fake ok", "fake_ok.so", "", longname };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        expect_fail(bad[i], STRATA_KIND_STRATEGY, BOTH, STRATA_EINVAL,
                    "invalid strategy plugin name", NULL);
    expect_fail(NULL, STRATA_KIND_TRANSPORT, BOTH, STRATA_EINVAL,
                "invalid transport plugin name '(null)'", NULL);
    expect_fail("fake_ok", 3, BOTH, STRATA_EINVAL, "invalid plugin kind 3", NULL);
    CHECK(strata__plugin_open("fake_ok", STRATA_KIND_STRATEGY, D1, NULL) == STRATA_EINVAL);
    longname[63] = '\0';                       /* 63 is fine: only not found */
    expect_fail(longname, STRATA_KIND_STRATEGY, BOTH, STRATA_ENOPLUGIN, "not found", NULL);
}

static void test_not_found(void)
{
    expect_fail("fake_oj", STRATA_KIND_STRATEGY, D1 ":/nonexistent/dir:" D2, STRATA_ENOPLUGIN,
                "strategy plugin 'fake_oj' not found",
                "looked in: " D1 ", /nonexistent/dir, " D2 ";",
                "did you mean 'fake_ok'?", NULL);
    /* Suggestions come from every dir, not only the first. */
    expect_fail("fake_only3", STRATA_KIND_TRANSPORT, "/nonexistent/dir:" D2, STRATA_ENOPLUGIN,
                "transport plugin 'fake_only3' not found", "did you mean 'fake_only2'?", NULL);
    expect_fail("zzzzzzzz", STRATA_KIND_STRATEGY, BOTH, STRATA_ENOPLUGIN,
                "'zzzzzzzz' not found", NULL);
    CHECKF(strstr(captured_, "did you mean") == NULL, "%s", captured_);
    expect_fail("fake_ok", STRATA_KIND_STRATEGY, "", STRATA_ENOPLUGIN,
                "looked in: (no directories)", NULL);
    expect_fail("fake_ok", STRATA_KIND_STRATEGY, NULL, STRATA_ENOPLUGIN,
                "looked in: (no directories)", NULL);
}

static void test_first_wins(void)
{
    strata__plugin_t *p = expect_ok("fake_dup", STRATA_KIND_STRATEGY, BOTH);
    CHECK(p && strcmp(p->vt->hdr.version, "1") == 0 &&
          strcmp(p->path, D1 "/fake_dup.so") == 0);
    strata__plugin_close(p);
    p = expect_ok("fake_dup", STRATA_KIND_STRATEGY, D2 ":" D1);
    CHECK(p && strcmp(p->vt->hdr.version, "2") == 0 &&
          strcmp(p->path, D2 "/fake_dup.so") == 0);
    strata__plugin_close(p);
    p = expect_ok("fake_only2", STRATA_KIND_STRATEGY, BOTH);
    CHECK(p && strcmp(p->path, D2 "/fake_only2.so") == 0);
    strata__plugin_close(p);
    /* A broken file found first is an error, not a reason to look further. */
    expect_fail("fake_nosym", STRATA_KIND_STRATEGY, D1 ":" D2, STRATA_EABI,
                "no symbol", NULL);
}

static void test_env(void)
{
    /* [plugins] path comes before $STRATA_PLUGIN_PATH. */
    setenv("STRATA_PLUGIN_PATH", D2, 1);
    char *sp = strata__plugin_search_path(NULL);
    strata__plugin_t *p = sp ? expect_ok("fake_only2", STRATA_KIND_STRATEGY, sp) : NULL;
    CHECK(p && strcmp(p->path, D2 "/fake_only2.so") == 0);
    strata__plugin_close(p);
    p = sp ? expect_ok("fake_dup", STRATA_KIND_STRATEGY, sp) : NULL;
    CHECK(p && strcmp(p->vt->hdr.version, "2") == 0);
    strata__plugin_close(p);
    free(sp);

    sp = strata__plugin_search_path(D1);
    p = sp ? expect_ok("fake_dup", STRATA_KIND_STRATEGY, sp) : NULL;
    CHECK(p && strcmp(p->vt->hdr.version, "1") == 0);
    strata__plugin_close(p);
    free(sp);
    unsetenv("STRATA_PLUGIN_PATH");
}

/* ---- scan ---------------------------------------------------------------- */

struct rec {
    char name[64], kind[16], version[32], path[4200];
    int major, minor, status, desc;
};
struct recs { struct rec r[64]; int n, overflow; };

static void collect(void *user, const char *name, const char *kind, int abi_major,
                    int abi_minor, const char *version, const char *description,
                    const char *path, int status)
{
    struct recs *rs = user;
    if (rs->n == 64) {
        rs->overflow = 1;
        return;
    }
    struct rec *r = &rs->r[rs->n++];
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->kind, sizeof r->kind, "%s", kind);
    snprintf(r->version, sizeof r->version, "%s", version ? version : "(null)");
    snprintf(r->path, sizeof r->path, "%s", path);
    r->major = abi_major;
    r->minor = abi_minor;
    r->status = status;
    r->desc = description && description[0];
}

static const struct rec *find(const struct recs *rs, const char *name)
{
    const struct rec *hit = NULL;
    int hits = 0;
    for (int i = 0; i < rs->n; i++)
        if (strcmp(rs->r[i].name, name) == 0) {
            hit = &rs->r[i];
            hits++;
        }
    CHECKF(hits == 1, "%s listed %d times", name, hits);
    return hit;
}

static void expect_rec(const struct recs *rs, const char *name, const char *kind,
                       int major, int status, const char *dir)
{
    const struct rec *r = find(rs, name);
    if (!r)
        return;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.so", dir, name);
    CHECKF(strcmp(r->kind, kind) == 0, "%s: kind %s, want %s", name, r->kind, kind);
    CHECKF(r->major == major, "%s: major %d, want %d", name, r->major, major);
    CHECKF(r->status == status, "%s: status %s, want %s", name,
           strata_err_name(r->status), strata_err_name(status));
    CHECKF(strcmp(r->path, path) == 0, "%s: path %s", name, r->path);
}

static void test_scan(void)
{
    static struct recs rs;
    capture_begin();
    int rc = strata__plugin_scan(BOTH ":/nonexistent/dir:" D1, 0, collect, &rs);
    const char *log = capture_end();
    CHECK(rc == 0);
    CHECKF(log[0] == '\0', "scan logged: %s", log);
    CHECK(!rs.overflow);
    CHECKF(rs.n == 17, "listed %d", rs.n);

    expect_rec(&rs, "fake_ok", "strategy", 2, 0, D1);
    expect_rec(&rs, "fake_v1abi2", "unknown", 2, STRATA_EABI, D1);
    expect_rec(&rs, "fake_v1small", "strategy", 1, STRATA_EABI, D1);
    expect_rec(&rs, "fake_v1noreduce", "strategy", 1, STRATA_EABI, D1);
    expect_rec(&rs, "fake_kind", "transport", 2, 0, D1);
    expect_rec(&rs, "fake_dup", "strategy", 2, 0, D1);
    expect_rec(&rs, "fake_only2", "strategy", 2, 0, D2);
    expect_rec(&rs, "fake_abi3", "unknown", 3, STRATA_EABI, D1);
    expect_rec(&rs, "fake_nosym", "unknown", 3, STRATA_EABI, D1);
    expect_rec(&rs, "fake_v1", "strategy", 1, 0, D1);
    expect_rec(&rs, "fake_name", "strategy", 2, STRATA_EABI, D1);
    expect_rec(&rs, "fake_sig", "strategy", 2, STRATA_EABI, D1);
    expect_rec(&rs, "fake_small", "strategy", 2, STRATA_EABI, D1);
    expect_rec(&rs, "fake_noinit", "strategy", 2, STRATA_EABI, D1);
    expect_rec(&rs, "fake_noreduce", "strategy", 2, STRATA_EABI, D1);
    expect_rec(&rs, "fake_tnoreduce", "transport", 2, STRATA_EABI, D1);
    expect_rec(&rs, "fake_undef", "unknown", -1, STRATA_EABI, D1);

    const struct rec *r = find(&rs, "fake_ok");
    CHECK(r && r->minor == STRATA_ABI_MINOR && strcmp(r->version, "1.0.0") == 0 && r->desc);
    r = find(&rs, "fake_dup");
    CHECK(r && strcmp(r->version, "1") == 0);
    r = find(&rs, "fake_undef");
    CHECK(r && r->minor == -1 && strcmp(r->version, "") == 0 && !r->desc);

    /* Sorted by name within a dir, dirs in path order. */
    for (int i = 1; i < rs.n; i++) {
        int same_dir = strncmp(rs.r[i].path, rs.r[i - 1].path, strlen(D1) + 1) == 0;
        if (same_dir)
            CHECKF(strcmp(rs.r[i - 1].name, rs.r[i].name) < 0, "order %s, %s",
                   rs.r[i - 1].name, rs.r[i].name);
    }
    CHECK(rs.n > 0 && strcmp(rs.r[rs.n - 1].name, "fake_only2") == 0);

    /* Debug level shows why each broken one was refused. */
    static struct recs dbg;
    strata__log_set_level(STRATA_LOG_DEBUG);
    capture_begin();
    strata__plugin_scan(D1, 0, collect, &dbg);
    log = capture_end();
    strata__log_set_level(STRATA_LOG_INFO);
    CHECKF(count_lines(log) == 12, "%d debug lines: %s", count_lines(log), log);
    CHECK(strstr(log, "fake_undef.so: cannot load") != NULL);

    CHECK(strata__plugin_scan(BOTH, 0, NULL, NULL) == STRATA_EINVAL);
    static struct recs none;
    CHECK(strata__plugin_scan(NULL, 0, collect, &none) == 0 && none.n == 0);
    CHECK(strata__plugin_scan("/nonexistent/a:/nonexistent/b", 0, collect, &none) == 0
          && none.n == 0);
}

/* A dir with junk: only regular *.so files are listed, and the ones that
 * are not plugins are listed as broken, quietly. */
static void test_scan_junk(void)
{
    char dir[] = "/tmp/strata_loader_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(!"mkdtemp");
        return;
    }
    char p[256];
    const char *files[] = { "Bad.so", "empty.so", ".hidden.so", "readme.txt", "x.so.1" };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        CHECK(fd >= 0);
        if (fd >= 0) {
            CHECK(write(fd, "junk", 4) == 4);
            close(fd);
        }
    }
    snprintf(p, sizeof p, "%s/sub.so", dir);
    CHECK(mkdir(p, 0755) == 0);

    static struct recs rs;
    capture_begin();
    int rc = strata__plugin_scan(dir, 0, collect, &rs);
    const char *log = capture_end();
    CHECK(rc == 0);
    CHECKF(log[0] == '\0', "scan logged: %s", log);
    CHECKF(rs.n == 2, "listed %d", rs.n);
    expect_rec(&rs, "Bad", "unknown", -1, STRATA_EINVAL, dir);
    expect_rec(&rs, "empty", "unknown", -1, STRATA_EABI, dir);

    /* Opening the junk says it cannot be loaded, naming the file. */
    snprintf(p, sizeof p, "%s/empty.so: cannot load", dir);
    expect_fail("empty", STRATA_KIND_STRATEGY, dir, STRATA_EABI, p, NULL);

    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    snprintf(p, sizeof p, "%s/sub.so", dir);
    rmdir(p);
    CHECK(rmdir(dir) == 0);
}

/* ---- trust: files and dirs others could write are refused ----------------- */

/* `src` copied to `dst`, mode 0644 whatever the umask. */
static void copy_file(const char *src, const char *dst)
{
    size_t n = 0;
    void *buf = read_all(src, &n);
    CHECKF(buf != NULL, "cannot read %s", src);
    if (!buf)
        return;
    write_file(dst, buf, n);
    free(buf);
    CHECK(chmod(dst, 0644) == 0);
}

/* The fake plugin opened with [plugins] trust_path: loads, quietly. */
static void expect_trusted_ok(const char *dir)
{
    strata__plugin_t *p = NULL;
    capture_begin();
    int rc = strata__plugin_open_as("fake_ok", STRATA_KIND_STRATEGY, dir,
                                    STRATA_LOG_ERROR,
                                    STRATA__PLUGIN_TRUST_PATH, &p);
    const char *log = capture_end();
    CHECKF(rc == 0 && p != NULL, "trusted: rc %s: %s", strata_err_name(rc),
           log);
    CHECKF(log[0] == '\0', "trusted: logged: %s", log);
    strata__plugin_close(p);
}

/* A scan of `dir` lists fake_ok with `status`; at debug level a refusal
 * says why in one line holding `why`. */
static void expect_scan(const char *dir, unsigned flags, int status,
                        const char *why)
{
    static struct recs rs;
    memset(&rs, 0, sizeof rs);
    strata__log_set_level(STRATA_LOG_DEBUG);
    capture_begin();
    int rc = strata__plugin_scan(dir, flags, collect, &rs);
    const char *log = capture_end();
    strata__log_set_level(STRATA_LOG_INFO);
    CHECK(rc == 0);
    expect_rec(&rs, "fake_ok", status ? "unknown" : "strategy",
               status ? -1 : 2, status, dir);
    if (why)
        CHECKF(count_lines(log) == 1 && strstr(log, why), "scan: %s", log);
    else
        CHECKF(log[0] == '\0', "scan logged: %s", log);
}

static void test_trust(void)
{
    char dir[] = "/tmp/strata_loader_trust_XXXXXX";
    char other[] = "/tmp/strata_loader_other_XXXXXX";
    if (!mkdtemp(dir) || !mkdtemp(other)) {
        CHECK(!"mkdtemp");
        return;
    }
    char so[256], why[512];
    snprintf(so, sizeof so, "%s/fake_ok.so", dir);
    copy_file(D1 "/fake_ok.so", so);

    /* mkdtemp's 0700 dir and a 0644 file of ours: fine. */
    strata__plugin_close(expect_ok("fake_ok", STRATA_KIND_STRATEGY, dir));
    expect_scan(dir, 0, 0, NULL);

    /* A world-writable dir: refused (naming it, its mode and the fixes),
     * listed as broken; trust_path loads it. */
    CHECK(chmod(dir, 0777) == 0);
    snprintf(why, sizeof why, "%s: not loaded: its directory %s is "
             "world-writable (mode 0777)", so, dir);
    char fix[300];
    snprintf(fix, sizeof fix, "chmod go-w %s, or set [plugins] trust_path = "
             "yes to load it anyway", dir);
    expect_fail("fake_ok", STRATA_KIND_STRATEGY, dir, STRATA_EUNTRUSTED, why, fix,
                NULL);
    expect_trusted_ok(dir);
    expect_scan(dir, 0, STRATA_EUNTRUSTED, why);
    expect_scan(dir, STRATA__PLUGIN_TRUST_PATH, 0, NULL);
    /* The sticky bit (/tmp) does not make it safe: anyone may put a
     * fake_ok.so there before you do. */
    CHECK(chmod(dir, 01777) == 0);
    expect_fail("fake_ok", STRATA_KIND_STRATEGY, dir, STRATA_EUNTRUSTED,
                "world-writable (mode 1777)", NULL);
    CHECK(chmod(dir, 0770) == 0);
    expect_fail("fake_ok", STRATA_KIND_STRATEGY, dir, STRATA_EUNTRUSTED,
                "group-writable (mode 0770)", NULL);
    CHECK(chmod(dir, 0755) == 0);

    /* A group-writable file. */
    CHECK(chmod(so, 0664) == 0);
    snprintf(why, sizeof why, "%s: not loaded: it is group-writable (mode "
             "0664)", so);
    snprintf(fix, sizeof fix, "chmod go-w %s,", so);
    expect_fail("fake_ok", STRATA_KIND_STRATEGY, dir, STRATA_EUNTRUSTED, why, fix,
                "trust_path = yes", NULL);
    expect_trusted_ok(dir);
    CHECK(chmod(so, 0644) == 0);

    /* A link to a file in a world-writable dir: that dir counts too. */
    char target[256];
    snprintf(target, sizeof target, "%s/fake_ok.so", other);
    copy_file(D1 "/fake_ok.so", target);
    CHECK(chmod(other, 0777) == 0);
    CHECK(unlink(so) == 0 && symlink(target, so) == 0);
    snprintf(why, sizeof why, "%s: not loaded: the directory of its target "
             "%s is world-writable (mode 0777)", so, other);
    expect_fail("fake_ok", STRATA_KIND_STRATEGY, dir, STRATA_EUNTRUSTED, why, NULL);
    CHECK(chmod(other, 0755) == 0);
    strata__plugin_close(expect_ok("fake_ok", STRATA_KIND_STRATEGY, dir));
    CHECK(unlink(so) == 0);
    copy_file(D1 "/fake_ok.so", so);

    /* Owned by another user than root or us (root only: chown). */
    if (geteuid() == 0) {
        CHECK(chown(so, 65534, 65534) == 0);
        snprintf(why, sizeof why, "%s: not loaded: it is owned by uid 65534, "
                 "neither root nor you (uid 0)", so);
        expect_fail("fake_ok", STRATA_KIND_STRATEGY, dir, STRATA_EUNTRUSTED, why,
                    "trust_path = yes", NULL);
        expect_trusted_ok(dir);
        CHECK(chown(so, 0, 0) == 0 && chown(dir, 65534, 65534) == 0);
        snprintf(why, sizeof why, "%s: not loaded: its directory %s is owned "
                 "by uid 65534", so, dir);
        expect_fail("fake_ok", STRATA_KIND_STRATEGY, dir, STRATA_EUNTRUSTED, why,
                    NULL);
        CHECK(chown(dir, 0, 0) == 0);
        strata__plugin_close(expect_ok("fake_ok", STRATA_KIND_STRATEGY, dir));
    } else {
        printf("skipped: the owner checks need root (chown)\n");
    }

    /* The directories above (OpenSSH's StrictModes): one that others may
     * write is refused, naming it; a sticky one (/tmp) is not, as others
     * may neither rename nor remove what is ours in it. */
    char deep[300], deep_so[330], why2[1024];
    snprintf(deep, sizeof deep, "%s/deep", dir);
    snprintf(deep_so, sizeof deep_so, "%s/fake_ok.so", deep);
    CHECK(mkdir(deep, 0755) == 0);
    copy_file(D1 "/fake_ok.so", deep_so);
    CHECK(chmod(dir, 0777) == 0);
    snprintf(why2, sizeof why2, "%s: not loaded: above its directory: %s "
             "is world-writable (mode 0777), so others could have replaced "
             "what is under it: chmod go-w %s, or set [plugins] trust_path = "
             "yes", deep_so, dir, dir);
    expect_fail("fake_ok", STRATA_KIND_STRATEGY, deep, STRATA_EUNTRUSTED, why2,
                NULL);
    expect_scan(deep, 0, STRATA_EUNTRUSTED, why2);
    expect_trusted_ok(deep);
    CHECK(chmod(dir, 0775) == 0);
    expect_fail("fake_ok", STRATA_KIND_STRATEGY, deep, STRATA_EUNTRUSTED,
                "is group-writable (mode 0775)", NULL);
    CHECK(chmod(dir, 01777) == 0);
    strata__plugin_close(expect_ok("fake_ok", STRATA_KIND_STRATEGY, deep));
    /* ... and above a link's target. */
    CHECK(chmod(dir, 0755) == 0 && chmod(other, 0777) == 0);
    snprintf(target, sizeof target, "%s/deep", other);
    CHECK(mkdir(target, 0755) == 0);
    snprintf(target, sizeof target, "%s/deep/fake_ok.so", other);
    copy_file(D1 "/fake_ok.so", target);
    CHECK(unlink(deep_so) == 0 && symlink(target, deep_so) == 0);
    snprintf(why2, sizeof why2, "%s: not loaded: above the directory of "
             "its target: %s is world-writable", deep_so, other);
    expect_fail("fake_ok", STRATA_KIND_STRATEGY, deep, STRATA_EUNTRUSTED, why2,
                NULL);
    CHECK(chmod(other, 0755) == 0);
    strata__plugin_close(expect_ok("fake_ok", STRATA_KIND_STRATEGY, deep));
    if (geteuid() == 0) {
        CHECK(chown(dir, 65534, 65534) == 0);
        snprintf(why, sizeof why, "above its directory: %s is owned by uid "
                 "65534, neither root nor you (uid 0)", dir);
        expect_fail("fake_ok", STRATA_KIND_STRATEGY, deep, STRATA_EUNTRUSTED,
                    why, NULL);
        CHECK(chown(dir, 0, 0) == 0);
    }
    CHECK(unlink(deep_so) == 0 && unlink(target) == 0 && rmdir(deep) == 0);
    snprintf(target, sizeof target, "%s/deep", other);
    CHECK(rmdir(target) == 0);
    snprintf(target, sizeof target, "%s/fake_ok.so", other);

    unlink(so);
    unlink(target);
    CHECK(rmdir(dir) == 0 && rmdir(other) == 0);
}

/* ABI 2.5: the word a plugin declares, checked against its entries; the
 * word derived for an older one. */
static void test_caps(void)
{
    strata__plugin_t *p = expect_ok("fake_caps", STRATA_KIND_STRATEGY, LOADER_DIR3);
    CHECKF(p && p->caps == (STRATA_CAP_STATE | STRATA_CAP_CLIP), "caps %#x",
           p ? p->caps : 0u);
    strata__plugin_close(p);
    expect_fail("fake_capsentry", STRATA_KIND_STRATEGY, LOADER_DIR3, STRATA_EABI,
                LOADER_DIR3 "/fake_capsentry.so", "hdr.caps and the entries disagree "
                "on next_step", NULL);
    expect_fail("fake_capsnobit", STRATA_KIND_STRATEGY, LOADER_DIR3, STRATA_EABI,
                LOADER_DIR3 "/fake_capsnobit.so", "disagree on next_step", NULL);
    expect_fail("fake_capskind", STRATA_KIND_STRATEGY, LOADER_DIR3, STRATA_EABI,
                LOADER_DIR3 "/fake_capskind.so", "bits that are not a strategy's (p2p)",
                NULL);
    /* 2.4: `reserved` ignored; next_step, ctl (regroup from 2.3), clip. */
    p = expect_ok("fake_caps24", STRATA_KIND_STRATEGY, LOADER_DIR3);
    uint32_t want = STRATA_CAP_NEXT_STEP | STRATA_CAP_CLIP | STRATA_CAP_STATE |
                    STRATA_CAP_WORLD_SUM | STRATA_CAP_ELASTIC;
    CHECKF(p && p->caps == want, "caps %#x, want %#x", p ? p->caps : 0u, want);
    char txt[160];
    strata__caps_str(p ? p->caps : 0, txt, sizeof txt);
    CHECKF(!strcmp(txt, "elastic,next_step,state,clip,world_sum"), "%s", txt);
    strata__plugin_close(p);
    /* 1.4, no ctl: clipping was asked of every strategy, nothing else. */
    p = expect_ok("fake_v1", STRATA_KIND_STRATEGY, D1);
    CHECKF(p && p->caps == STRATA_CAP_CLIP, "v1 caps %#x", p ? p->caps : 0u);
    strata__plugin_close(p);
    strata__caps_str(0, txt, sizeof txt);
    CHECK(!strcmp(txt, "-"));
}

/* ABI 2.7: a transport's strangers entry is seen where its table has it;
 * a 2.6 table ends before it and loads as ever, the entry absent (the
 * core then reports nothing for it). */
static void test_strangers_entry(void)
{
    strata__plugin_t *p = expect_ok("fake_t27", STRATA_KIND_TRANSPORT,
                                    LOADER_DIR3);
    CHECKF(p && STRATA_HAS(p->vt, strangers), "2.7: no strangers entry");
    if (p && STRATA_HAS(p->vt, strangers)) {
        strata_strangers_t s = { .struct_size = sizeof s };
        CHECK(p->vt->strangers(NULL, &s, 0) == STRATA_OK &&
              s.refused_key == 1 && s.bad_message == 1);
    }
    strata__plugin_close(p);
    p = expect_ok("fake_t26", STRATA_KIND_TRANSPORT, LOADER_DIR3);
    CHECKF(p && p->major == 2 && p->vt->hdr.abi_minor == 6 &&
           !STRATA_HAS(p->vt, strangers) && p->vt->strangers == NULL,
           "2.6 table: loaded %d, strangers entry %s", p != NULL,
           p && p->vt->strangers ? "seen" : "absent");
    strata__plugin_close(p);
}

/* ABI 2.8: STRATA_CAP_LAYER_STATES is a strategy's bit (not refused as
 * unknown) and counts only in a table of 2.8 or newer. */
static void test_layer_states_cap(void)
{
    strata__plugin_t *p = expect_ok("fake_ls28", STRATA_KIND_STRATEGY,
                                    LOADER_DIR3);
    CHECKF(p && p->caps == (STRATA_CAP_LAYER_STATES | STRATA_CAP_STATE),
           "2.8 caps %#x", p ? p->caps : 0u);
    char txt[160];
    strata__caps_str(p ? p->caps : 0, txt, sizeof txt);
    CHECKF(!strcmp(txt, "state,layer_states"), "%s", txt);
    strata__plugin_close(p);
    p = expect_ok("fake_ls27", STRATA_KIND_STRATEGY, LOADER_DIR3);
    CHECKF(p && p->caps == STRATA_CAP_STATE, "2.7 caps %#x, want %#x",
           p ? p->caps : 0u, STRATA_CAP_STATE);
    strata__plugin_close(p);
}

/* ABI 2.9: STRATA_CAP_SPARSE is a strategy's bit and counts only in a
 * table of 2.9 or newer (an older one gets the dense gradients). */
static void test_sparse_cap(void)
{
    strata__plugin_t *p = expect_ok("fake_sp29", STRATA_KIND_STRATEGY,
                                    LOADER_DIR3);
    CHECKF(p && p->caps == (STRATA_CAP_SPARSE | STRATA_CAP_STATE),
           "2.9 caps %#x", p ? p->caps : 0u);
    char txt[160];
    strata__caps_str(p ? p->caps : 0, txt, sizeof txt);
    CHECKF(!strcmp(txt, "state,sparse"), "%s", txt);
    strata__plugin_close(p);
    p = expect_ok("fake_sp28", STRATA_KIND_STRATEGY, LOADER_DIR3);
    CHECKF(p && p->caps == STRATA_CAP_STATE, "2.8 caps %#x, want %#x",
           p ? p->caps : 0u, STRATA_CAP_STATE);
    strata__plugin_close(p);
    /* 2.11 grew the host table only: a 2.10 strategy loads as before */
    p = expect_ok("fake_sp210", STRATA_KIND_STRATEGY, LOADER_DIR3);
    CHECKF(p && p->vt->hdr.abi_minor == 10 &&
               p->caps == (STRATA_CAP_SPARSE | STRATA_CAP_STATE),
           "2.10 minor %d caps %#x", p ? (int)p->vt->hdr.abi_minor : -1,
           p ? p->caps : 0u);
    strata__plugin_close(p);
    /* 2.12's lazy_init and rows_apart: kept from 2.12, dropped from 2.11
     * (which keeps its sparse bit) */
    const uint32_t c212 = STRATA_CAP_LAZY_INIT | STRATA_CAP_ROWS_APART |
                          STRATA_CAP_SPARSE | STRATA_CAP_STATE;
    p = expect_ok("fake_li212", STRATA_KIND_STRATEGY, LOADER_DIR3);
    CHECKF(p && p->caps == c212, "2.12 caps %#x, want %#x",
           p ? p->caps : 0u, c212);
    strata__plugin_close(p);
    p = expect_ok("fake_li211", STRATA_KIND_STRATEGY, LOADER_DIR3);
    CHECKF(p && p->caps == (STRATA_CAP_SPARSE | STRATA_CAP_STATE),
           "2.11 caps %#x, want %#x", p ? p->caps : 0u,
           STRATA_CAP_SPARSE | STRATA_CAP_STATE);
    strata__plugin_close(p);
}

/* ABI 2.13: STRATA_CAP_STATE_PARTS, the first bit past 16 (0x10000), is a
 * strategy's bit and counts only in a table of 2.13 or newer (an older
 * one knows no part_step, no host part_write: its state is gathered). */
static void test_state_parts_cap(void)
{
    const uint32_t c213 = STRATA_CAP_STATE_PARTS | STRATA_CAP_STATE;
    strata__plugin_t *p = expect_ok("fake_pt213", STRATA_KIND_STRATEGY,
                                    LOADER_DIR3);
    CHECKF(p && p->vt->hdr.caps == 0x10008u && p->caps == c213,
           "2.13 caps %#x, want %#x", p ? p->caps : 0u, c213);
    char txt[160];
    strata__caps_str(p ? p->caps : 0, txt, sizeof txt);
    CHECKF(!strcmp(txt, "state,state_parts"), "%s", txt);
    strata__plugin_close(p);
    p = expect_ok("fake_pt212", STRATA_KIND_STRATEGY, LOADER_DIR3);
    CHECKF(p && p->vt->hdr.abi_minor == 12 && p->caps == STRATA_CAP_STATE,
           "2.12 caps %#x, want %#x", p ? p->caps : 0u, STRATA_CAP_STATE);
    strata__plugin_close(p);
    /* every strategy bit at once: each named, none lost to a narrower
     * word */
    strata__caps_str(STRATA_CAPS_STRATEGY, txt, sizeof txt);
    CHECKF(!strcmp(txt, "elastic,drives,next_step,state,clip,world_sum,"
                        "overlap,step_sum,layer_states,sparse,lazy_init,"
                        "rows_apart,state_parts"), "%s", txt);
}

int main(void)
{
    strata__log_set_level(STRATA_LOG_INFO);
    test_kind_name();
    test_search_path();
    test_open_ok();
    test_open_broken();
    test_open_bad_args();
    test_not_found();
    test_first_wins();
    test_env();
    test_scan();
    test_scan_junk();
    test_trust();
    test_caps();
    test_strangers_entry();
    test_layer_states_cap();
    test_sparse_cap();
    test_state_parts_cap();
    return CHECK_DONE();
}
