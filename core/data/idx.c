/* IDX reader (LeCun's MNIST format), raw or gzip-compressed.
 *
 * Layout: 0x00 0x00 <type> <ndim>, ndim big-endian uint32 dims, then the
 * elements. Every size is checked against the header before anything is
 * allocated, the payload is read in bounded chunks, and the file must end
 * exactly where the header says (for gzip: and pass zlib's CRC check). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data.h"

#define WHO "data"
#define CHUNK ((size_t)1 << 20)      /* largest single read             */
#define SCRATCH ((size_t)16 << 10)   /* stack buffer for skipped / extra data */
#define EXTRA_CAP ((uint64_t)64 << 20) /* stop counting trailing bytes here */

#define HUGE_PAGE ((uintptr_t)2 << 20)

/* Memory for a payload. Transparent huge pages are asked for over the
 * 2 MiB-aligned inside of a large one (the kernel's default THP mode is
 * madvise): a shuffled batch gathers rows from anywhere in the images, and
 * with 4 KiB pages nearly every row was a TLB miss. Plain malloc, so that
 * free() and the tests' malloc accounting see it as any other block. */
void *strata__data_payload_alloc(size_t n)
{
    unsigned char *p = malloc(n);
#ifdef MADV_HUGEPAGE
    if (p && n >= 2 * HUGE_PAGE) {
        uintptr_t lo = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
        uintptr_t hi = ((uintptr_t)p + n) & ~(HUGE_PAGE - 1);
        if (hi > lo) /* a hint: fine if refused */
            (void)madvise((void *)lo, (size_t)(hi - lo), MADV_HUGEPAGE);
    }
#endif
    return p;
}

/* A byte source: a plain file descriptor or a zlib stream over it. */
typedef struct src {
    const char *path;
    int         fd;     /* owned when g == NULL */
    gzFile      g;      /* owns the descriptor when set */
    int         gz_eof; /* the gzip stream ended early (zlib Z_BUF_ERROR) */
} src_t;

static int src_open(src_t *s, const char *path, int *is_gz, struct stat *st)
{
    s->path = path;
    s->g = NULL;
    s->gz_eof = 0;
    s->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (s->fd < 0) {
        int e = errno;
        strata__log(STRATA_LOG_ERROR, WHO, "%s: cannot open: %s", path,
                    strerror(e));
        return e == ENOENT || e == ENOTDIR ? STRATA_ENOENT : STRATA_EIO;
    }
    unsigned char m[2];
    ssize_t n;
    if (fstat(s->fd, st) != 0 || S_ISDIR(st->st_mode)) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: cannot read: %s", path,
                    S_ISDIR(st->st_mode) ? "is a directory" : strerror(errno));
        close(s->fd);
        return STRATA_EIO;
    }
    do
        n = pread(s->fd, m, 2, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0 && errno != ESPIPE) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: cannot read: %s", path,
                    strerror(errno));
        close(s->fd);
        return STRATA_EIO;
    }
    *is_gz = n == 2 && m[0] == 0x1f && m[1] == 0x8b;
    if (*is_gz) {
        s->g = gzdopen(s->fd, "rb");
        if (!s->g) {
            strata__log(STRATA_LOG_ERROR, WHO, "%s: cannot open gzip stream",
                        path);
            close(s->fd);
            return STRATA_ENOMEM;
        }
        gzbuffer(s->g, 64u << 10);
    }
    return 0;
}

static void src_close(src_t *s)
{
    if (s->g)
        gzclose_r(s->g);
    else if (s->fd >= 0)
        close(s->fd);
    s->g = NULL;
    s->fd = -1;
}

/* zlib's state after a read: 0, or the logged error's code. A stream that
 * ends early is not an error here: it reads as the end of the data, and the
 * caller, who knows how much was expected, says what is missing. */
static int gz_check(src_t *s)
{
    int zerr = Z_OK;
    const char *msg = gzerror(s->g, &zerr);
    /* gzerror says "<fd:3>: what"; the path is ours to print. */
    const char *sep = msg && strncmp(msg, "<fd:", 4) == 0 ? strstr(msg, ": ")
                                                          : NULL;
    if (sep)
        msg = sep + 2;
    switch (zerr) {
    case Z_OK:
        return 0;
    case Z_BUF_ERROR:   /* zlib: "unexpected end of file" */
        s->gz_eof = 1;
        return 0;
    case Z_ERRNO:
        strata__log(STRATA_LOG_ERROR, WHO, "%s: read error: %s", s->path,
                    strerror(errno));
        return STRATA_EIO;
    case Z_MEM_ERROR:
        strata__log(STRATA_LOG_ERROR, WHO, "%s: out of memory in zlib",
                    s->path);
        return STRATA_ENOMEM;
    default:            /* Z_DATA_ERROR: bad deflate data or CRC / length */
        strata__log(STRATA_LOG_ERROR, WHO, "%s: corrupt gzip data (%s)",
                    s->path, msg);
        return STRATA_EDATA;
    }
}

/* Read up to n bytes; *got < n only at the end of the data. */
static int src_read(src_t *s, void *buf, size_t n, size_t *got)
{
    unsigned char *p = buf;
    *got = 0;
    while (*got < n) {
        size_t want = n - *got < CHUNK ? n - *got : CHUNK;
        ssize_t r;
        if (s->g) {
            int gr = gzread(s->g, p + *got, (unsigned)want);
            int rc = gz_check(s);
            if (rc)
                return rc;
            r = gr;
        } else {
            r = read(s->fd, p + *got, want);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0) {
                strata__log(STRATA_LOG_ERROR, WHO, "%s: read error: %s",
                            s->path, strerror(errno));
                return STRATA_EIO;
            }
        }
        if (r <= 0)
            break;
        *got += (size_t)r;
    }
    return 0;
}

/* Read and throw away up to n bytes through scratch; *got as src_read. */
static int src_skip(src_t *s, uint64_t n, unsigned char *scratch,
                    uint64_t *got)
{
    *got = 0;
    while (*got < n) {
        size_t want = n - *got < SCRATCH ? (size_t)(n - *got) : SCRATCH, r;
        int rc = src_read(s, scratch, want, &r);
        if (rc)
            return rc;
        *got += r;
        if (r < want)
            break;
    }
    return 0;
}

static const char *type_name(uint8_t t)
{
    switch (t) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default:   return NULL;
    }
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8
           | (uint32_t)p[3];
}

/* Header -> idx fields and payload size; logs and returns EDATA if bad. */
static int parse_header(src_t *s, strata__idx_t *out, uint64_t *bytes,
                        uint64_t *hdr_len)
{
    unsigned char h[4 + 4 * 4];
    size_t got;
    int rc = src_read(s, h, 4, &got);
    if (rc)
        return rc;
    if (got < 4) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: %s", s->path,
                    got == 0 ? "empty file, expected an IDX header"
                             : "truncated IDX header");
        return STRATA_EDATA;
    }
    if (h[0] != 0 || h[1] != 0) {
        strata__log(STRATA_LOG_ERROR, WHO,
                    "%s: bad magic %02x %02x %02x %02x: not an IDX file "
                    "(expected 00 00 <type> <ndim>)",
                    s->path, h[0], h[1], h[2], h[3]);
        return STRATA_EDATA;
    }
    if (h[2] != STRATA__IDX_U8) {
        const char *tn = type_name(h[2]);
        strata__log(STRATA_LOG_ERROR, WHO,
                    "%s: %s element type 0x%02x%s%s%s; only 0x08 (unsigned "
                    "byte) is supported", s->path, tn ? "unsupported" : "unknown",
                    h[2], tn ? " (" : "", tn ? tn : "", tn ? ")" : "");
        return STRATA_EDATA;
    }
    int ndim = h[3];
    if (ndim < 1 || ndim > 4) {
        strata__log(STRATA_LOG_ERROR, WHO,
                    "%s: %d dimensions; expected 1 to 4", s->path, ndim);
        return STRATA_EDATA;
    }
    rc = src_read(s, h + 4, 4 * (size_t)ndim, &got);
    if (rc)
        return rc;
    if (got < 4 * (size_t)ndim) {
        strata__log(STRATA_LOG_ERROR, WHO,
                    "%s: truncated IDX header (%d dimensions declared, "
                    "file ends after %zu header bytes)", s->path, ndim,
                    4 + got);
        return STRATA_EDATA;
    }
    uint64_t prod = 1;
    int overflow = 0;
    for (int i = 0; i < ndim; i++) {
        uint32_t d = be32(h + 4 + 4 * i);
        if (d == 0) {
            strata__log(STRATA_LOG_ERROR, WHO,
                        "%s: dimension %d of %d is 0", s->path, i + 1, ndim);
            return STRATA_EDATA;
        }
        out->dims[i] = d;
        overflow |= __builtin_mul_overflow(prod, (uint64_t)d, &prod);
    }
    if (overflow || prod > STRATA_DATA_MAX_BYTES) {
        char shape[64], size[32];
        int n = 0;
        for (int i = 0; i < ndim; i++)
            n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%u",
                          i ? " x " : "", out->dims[i]);
        if (overflow)
            snprintf(size, sizeof size, "over 2^64");
        else
            snprintf(size, sizeof size, "%llu", (unsigned long long)prod);
        strata__log(STRATA_LOG_ERROR, WHO,
                    "%s: header declares %s = %s bytes of data, more than "
                    "the limit of %zu MiB", s->path, shape, size,
                    (size_t)STRATA_DATA_MAX_BYTES >> 20);
        return STRATA_EDATA;
    }
    out->type = h[2];
    out->ndim = ndim;
    out->file_items = out->dims[0];
    *bytes = prod;
    *hdr_len = 4 + 4 * (uint64_t)ndim;
    return 0;
}

static int truncated(const char *path, uint64_t want, uint64_t have)
{
    strata__log(STRATA_LOG_ERROR, WHO,
                "%s: truncated: header says %llu bytes of data, file holds %llu",
                path, (unsigned long long)want, (unsigned long long)have);
    return STRATA_EDATA;
}

static int trailing(const char *path, uint64_t want, uint64_t extra, int more)
{
    strata__log(STRATA_LOG_ERROR, WHO,
                "%s: trailing bytes: header says %llu bytes of data, file "
                "holds %s%llu", path, (unsigned long long)want,
                more ? "at least " : "",
                (unsigned long long)(want + extra));
    return STRATA_EDATA;
}

static int read_body(src_t *s, const struct stat *st, strata__idx_t *out,
                     size_t max_items)
{
    uint64_t bytes, hdr_len;
    int rc = parse_header(s, out, &bytes, &hdr_len);
    if (rc)
        return rc;

    /* A raw regular file tells its size: refuse before allocating. */
    if (!s->g && S_ISREG(st->st_mode)) {
        uint64_t size = (uint64_t)st->st_size;
        uint64_t have = size > hdr_len ? size - hdr_len : 0;
        if (have < bytes)
            return truncated(s->path, bytes, have);
        if (have > bytes)
            return trailing(s->path, bytes, have - bytes, 0);
    }

    uint64_t per_item = bytes / out->dims[0];
    uint32_t keep_items = out->dims[0];
    if (max_items > 0 && max_items < keep_items)
        keep_items = (uint32_t)max_items;
    size_t keep = (size_t)(per_item * keep_items);

    /* The only allocation: exactly the kept part of the declared payload. */
    out->data = strata__data_payload_alloc(keep);
    if (!out->data) {
        strata__log(STRATA_LOG_ERROR, WHO,
                    "%s: out of memory for %zu bytes of data", s->path, keep);
        return STRATA_ENOMEM;
    }
    unsigned char scratch[SCRATCH];
    size_t got;
    uint64_t skipped = 0;
    rc = src_read(s, out->data, keep, &got);
    if (!rc && got < keep)
        rc = truncated(s->path, bytes, got);
    if (!rc)
        rc = src_skip(s, bytes - keep, scratch, &skipped);
    if (!rc && skipped < bytes - keep)
        rc = truncated(s->path, bytes, keep + skipped);
    if (!rc) {
        /* Exactly at the end? For gzip this read also checks the CRC. */
        uint64_t extra;
        rc = src_skip(s, EXTRA_CAP, scratch, &extra);
        if (!rc && extra > 0)
            rc = trailing(s->path, bytes, extra, extra >= EXTRA_CAP);
        if (!rc && s->gz_eof) {
            strata__log(STRATA_LOG_ERROR, WHO,
                        "%s: truncated gzip stream: all %llu bytes of data "
                        "are there but the gzip trailer (CRC, length) is "
                        "missing", s->path, (unsigned long long)bytes);
            rc = STRATA_EDATA;
        }
    }
    if (rc)
        return rc;
    out->dims[0] = keep_items;
    out->count = keep;
    return 0;
}

int strata__idx_read_first(const char *path, size_t max_items,
                           strata__idx_t *out)
{
    memset(out, 0, sizeof *out);
    if (!path) {
        strata__log(STRATA_LOG_ERROR, WHO, "no IDX file name given");
        return STRATA_EINVAL;
    }
    src_t s;
    struct stat st;
    int is_gz;
    int rc = src_open(&s, path, &is_gz, &st);
    if (rc)
        return rc;
    rc = read_body(&s, &st, out, max_items);
    src_close(&s);
    if (rc)
        strata__idx_free(out);
    return rc;
}

int strata__idx_read(const char *path, strata__idx_t *out)
{
    return strata__idx_read_first(path, 0, out);
}

void strata__idx_free(strata__idx_t *idx)
{
    if (!idx)
        return;
    free(idx->data);
    memset(idx, 0, sizeof *idx);
}
