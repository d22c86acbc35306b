/* Helpers for the checkpoint tests: a temp dir, raw files, hand-made
 * safetensors images, and capturing the log lines a call prints. */
#ifndef STRATA_TESTS_CKPT_UTIL_H
#define STRATA_TESTS_CKPT_UTIL_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define UTIL static __attribute__((unused))

static char tmpdir_[256];

UTIL const char *tmp_make(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir_, sizeof tmpdir_, "%s/strata-ckpt-XXXXXX",
             base && *base ? base : "/tmp");
    if (!mkdtemp(tmpdir_)) {
        perror("mkdtemp");
        exit(2);
    }
    return tmpdir_;
}

/* Path of `name` inside the temp dir (32 static slots, rotated). */
UTIL const char *tmp_path(const char *name)
{
    static char slots[32][512];
    static int next;
    char *p = slots[next++ % 32];
    snprintf(p, sizeof slots[0], "%s/%s", tmpdir_, name);
    return p;
}

/* Removes everything in `dir` (one level of subdirectories), then dir. */
UTIL void rm_tree(const char *dir)
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

UTIL void write_bytes(const char *path, const void *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(buf, 1, n, f) != n) || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
}

/* Whole file into a malloc'd buffer (NULL when missing). */
UTIL unsigned char *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc(len > 0 ? (size_t)len : 1);
    *n = fread(p, 1, (size_t)len, f);
    fclose(f);
    return p;
}

UTIL int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

UTIL long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* A safetensors image: u64 `hlen` (the header's real length unless
 * hlen_lie != 0), the header text, `ndata` bytes of data (0, 1, 2, ...). */
UTIL size_t st_image(unsigned char *buf, const char *header, uint64_t hlen_lie,
                     size_t ndata)
{
    size_t h = strlen(header);
    uint64_t n = hlen_lie ? hlen_lie : h;
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(n >> (8 * i));
    memcpy(buf + 8, header, h);
    for (size_t i = 0; i < ndata; i++)
        buf[8 + h + i] = (unsigned char)i;
    return 8 + h + ndata;
}

/* ---- stderr capture: run a call, count its lines, match words ---------- */

static char captured_[8192];
static int saved_fd_ = -1;
static FILE *cap_file_;

UTIL void capture_begin(void)
{
    fflush(stderr);
    cap_file_ = tmpfile();
    saved_fd_ = dup(2);
    dup2(fileno(cap_file_), 2);
}

/* Returns the number of lines captured; text in captured_. */
UTIL int capture_end(void)
{
    fflush(stderr);
    dup2(saved_fd_, 2);
    close(saved_fd_);
    rewind(cap_file_);
    size_t n = fread(captured_, 1, sizeof captured_ - 1, cap_file_);
    captured_[n] = 0;
    fclose(cap_file_);
    int lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += captured_[i] == '\n';
    if (getenv("STRATA_TEST_VERBOSE"))   /* show the messages themselves */
        printf("%s", captured_);
    return lines;
}

#endif
