/* Helpers for the data tests: a temp dir, IDX files written raw or through
 * zlib, and capturing the one log line a failing call must print. */
#ifndef STRATA_TESTS_DATA_UTIL_H
#define STRATA_TESTS_DATA_UTIL_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

/* Each test uses some of these helpers. */
#define UTIL static __attribute__((unused))

static char tmpdir_[256];

UTIL const char *tmp_make(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir_, sizeof tmpdir_, "%s/strata-data-XXXXXX",
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

/* Removes every file written through write_bytes, then the dir. */
static char written_[128][512];
static int nwritten_;

UTIL void tmp_cleanup(void)
{
    for (int i = 0; i < nwritten_; i++)
        unlink(written_[i]);
    rmdir(tmpdir_);
}

UTIL void remember(const char *path)
{
    for (int i = 0; i < nwritten_; i++)
        if (strcmp(written_[i], path) == 0)
            return;
    if (nwritten_ < 128)
        snprintf(written_[nwritten_++], sizeof written_[0], "%s", path);
}

/* Write `n` bytes to `path`, raw or gzip-compressed (zlib gzopen "wb"). */
UTIL void write_bytes(const char *path, const void *buf, size_t n, int gz)
{
    remember(path);
    if (gz) {
        gzFile g = gzopen(path, "wb");
        if (!g || (n && gzwrite(g, buf, (unsigned)n) != (int)n)
            || gzclose(g) != Z_OK) {
            fprintf(stderr, "cannot write %s\n", path);
            exit(2);
        }
        return;
    }
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
}

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

/* An IDX image: header (type, dims) + payload + `extra` junk bytes; payload
 * may be shorter than the dims say (truncation tests). Returns the size. */
UTIL size_t idx_build(unsigned char *buf, uint8_t type, int ndim,
                        const uint32_t *dims, const uint8_t *payload,
                        size_t npayload, size_t extra)
{
    size_t k = 0;
    buf[k++] = 0;
    buf[k++] = 0;
    buf[k++] = type;
    buf[k++] = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++) {
        buf[k++] = (uint8_t)(dims[i] >> 24);
        buf[k++] = (uint8_t)(dims[i] >> 16);
        buf[k++] = (uint8_t)(dims[i] >> 8);
        buf[k++] = (uint8_t)dims[i];
    }
    memcpy(buf + k, payload, npayload);
    k += npayload;
    for (size_t i = 0; i < extra; i++)
        buf[k++] = 0xAB;
    return k;
}

/* Write a well-formed u8 IDX file with dims and payload (count = product). */
UTIL void write_idx(const char *path, int ndim, const uint32_t *dims,
                      const uint8_t *payload, int gz)
{
    size_t count = 1;
    for (int i = 0; i < ndim; i++)
        count *= dims[i];
    unsigned char *buf = malloc(4 + 4 * (size_t)ndim + count);
    size_t n = idx_build(buf, 0x08, ndim, dims, payload, count, 0);
    write_bytes(path, buf, n, gz);
    free(buf);
}

/* ---- stderr capture: run a call, count its lines, match words ---------- */

static char captured_[4096];
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
    return lines;
}

#endif
