/* Helpers shared by the unit tests, header-only: a temp dir, whole files,
 * the `<tests dir> <etc dir>` arguments, and capturing what a call logs on
 * stderr. Each test uses some of them.
 * Nothing here calls malloc between capture_begin and capture_end, so tests
 * that wrap malloc (test_data_idx, test_ckpt) count only the call under test. */
#ifndef STRATA_TESTS_TESTUTIL_H
#define STRATA_TESTS_TESTUTIL_H

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TESTUTIL static __attribute__((unused))

/* ---- temp dir ------------------------------------------------------------ */

TESTUTIL char tmpdir_[256];   /* set by tmp_make */

/* Creates $TMPDIR (or /tmp) /strata-<tag>-XXXXXX into tmpdir_; exits 2 on failure. */
TESTUTIL const char *tmp_make(const char *tag)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir_, sizeof tmpdir_, "%s/strata-%s-XXXXXX",
             base && *base ? base : "/tmp", tag);
    if (!mkdtemp(tmpdir_)) {
        perror("mkdtemp");
        exit(2);
    }
    return tmpdir_;
}

/* Path of `name` inside the temp dir (32 static slots, rotated). */
TESTUTIL const char *tmp_path(const char *name)
{
    static char slots[32][512];
    static int next;
    char *p = slots[next++ % 32];
    snprintf(p, sizeof slots[0], "%s/%s", tmpdir_, name);
    return p;
}

/* "KEY=" and the path of `name` inside the temp dir, for --set (8 static
 * slots, rotated). */
TESTUTIL char *set_path(const char *key, const char *name)
{
    static char slots[8][800];
    static int next;
    char *p = slots[next++ % 8];
    snprintf(p, sizeof slots[0], "%s=%s", key, tmp_path(name));
    return p;
}

/* "KEY=VALUE", for --set (16 static slots, rotated). */
TESTUTIL char *set_value(const char *key, const char *value)
{
    static char slots[16][800];
    static int next;
    char *p = slots[next++ % 16];
    snprintf(p, sizeof slots[0], "%s=%s", key, value);
    return p;
}

/* How many times `what` occurs in `text`. */
TESTUTIL int count_of(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p++)
        n++;
    return n;
}

/* Removes `dir` and everything below it (best effort, no links followed). */
TESTUTIL void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        if (unlink(p) != 0)
            rm_tree(p);
    }
    closedir(d);
    rmdir(dir);
}

/* Removes the temp dir made by tmp_make and all it holds. */
TESTUTIL void tmp_cleanup(void)
{
    rm_tree(tmpdir_);
}

/* ---- files ----------------------------------------------------------------- */

/* Writes `n` bytes of `buf` to `path` (replacing it); exits 2 on failure. */
TESTUTIL void write_file(const char *path, const void *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(buf, 1, n, f) != n) || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
}

/* Whole file, malloc'd, NUL-terminated; its size in *n (n may be NULL); NULL when unreadable. */
TESTUTIL void *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    long len = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    unsigned char *p = len >= 0 && fseek(f, 0, SEEK_SET) == 0
                           ? malloc((size_t)len + 1) : NULL;
    size_t got = p ? fread(p, 1, (size_t)len, f) : 0;
    fclose(f);
    if (p)
        p[got] = '\0';
    if (n)
        *n = got;
    return p;
}

/* 1 when `path` exists, else 0. */
TESTUTIL int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Size of `path` in bytes, -1 when missing. */
TESTUTIL long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* 1 when both files exist and hold the same bytes, else 0. */
TESTUTIL int same_file(const char *a, const char *b)
{
    FILE *f = fopen(a, "rb"), *g = fopen(b, "rb");
    int same = f && g;
    while (same) {
        int x = fgetc(f), y = fgetc(g);
        same = x == y;
        if (x == EOF || y == EOF)
            break;
    }
    if (f)
        fclose(f);
    if (g)
        fclose(g);
    return same;
}

/* ---- arguments ------------------------------------------------------------ */

/* `test <tests/AREA dir> <etc dir>`: etc's real path into etc[PATH_MAX], then
 * chdir to the tests dir (so origins read "x.ini:4"); exits 2 on bad arguments. */
TESTUTIL void enter_test_dir(int argc, char **argv, const char *area, char *etc)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s <tests/%s dir> <etc dir>\n", argv[0], area);
        exit(2);
    }
    if (!realpath(argv[2], etc)) {
        perror(argv[2]);
        exit(2);
    }
    if (chdir(argv[1]) != 0) {
        perror(argv[1]);
        exit(2);
    }
}

/* ---- stderr capture: run a call, count its lines, match words ---------- */

TESTUTIL char captured_[65536];   /* text of the last capture (first 64 KiB) */
TESTUTIL int cap_saved_fd_ = -1;
TESTUTIL FILE *cap_file_;

/* Sends stderr (fd 2) to a temp file until capture_end; exits 2 on failure. */
TESTUTIL void capture_begin(void)
{
    fflush(stderr);
    cap_file_ = tmpfile();
    cap_saved_fd_ = dup(2);
    if (!cap_file_ || cap_saved_fd_ < 0 || dup2(fileno(cap_file_), 2) < 0) {
        fprintf(stderr, "cannot capture stderr\n");
        exit(2);
    }
}

/* Restores stderr; returns captured_ (echoed on stdout if STRATA_TEST_VERBOSE is set). */
TESTUTIL const char *capture_end(void)
{
    fflush(stderr);
    dup2(cap_saved_fd_, 2);
    close(cap_saved_fd_);
    rewind(cap_file_);
    size_t n = fread(captured_, 1, sizeof captured_ - 1, cap_file_);
    captured_[n] = '\0';
    fclose(cap_file_);
    if (getenv("STRATA_TEST_VERBOSE"))   /* show the messages themselves */
        printf("%s", captured_);
    return captured_;
}

/* Number of '\n' in `s` (0 for NULL). */
TESTUTIL int count_lines(const char *s)
{
    int n = 0;
    for (; s && *s; s++)
        n += *s == '\n';
    return n;
}

#endif
