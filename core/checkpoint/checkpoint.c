/* Checkpoint files: safetensors written atomically, read with every field
 * checked before any of it is trusted (see checkpoint.h for the format).
 *
 * The header is parsed with cJSON. It is also built with cJSON, but every
 * number goes in as raw text: cJSON prints doubles with "%1.15g", which
 * turns 10^15 into "1e+15", and safetensors' reader wants integers. */
#include <assert.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "base/createfile.h"
#include "base/fault.h"

#define WHO "ckpt"
#define SLOT_ALIGN 16          /* each loaded tensor's data is aligned so */
#define MAX_EXACT  (1ull << 53) /* JSON numbers above this are not exact doubles */
#define IO_CHUNK   (1u << 30)

static const struct { const char *name; size_t size; } k_dtypes[] = {
    { "BOOL", 1 }, { "U8", 1 }, { "I8", 1 }, { "F8_E4M3", 1 }, { "F8_E5M2", 1 },
    { "U16", 2 }, { "I16", 2 }, { "F16", 2 }, { "BF16", 2 },
    { "U32", 4 }, { "I32", 4 }, { "F32", 4 },
    { "U64", 8 }, { "I64", 8 }, { "F64", 8 },
};

struct strata__ckpt {
    cJSON            *root;     /* owns names, metadata strings */
    strata__tensor_t *t;        /* header order */
    int               nt;
    int              *by_name;  /* indices of t sorted by name */
    strata__meta_t   *m;
    int               nm;
    unsigned char    *arena;    /* every tensor's data */
    uint64_t          hdr_len, data_len;
    /* tensors joined from part files (parts.c): their names and data */
    char             *joined_names;
    unsigned char    *joined;
};

/* ---- small helpers ------------------------------------------------------ */

static const char *dtype_canon(const char *d)
{
    if (!d)
        return NULL;
    for (size_t i = 0; i < sizeof k_dtypes / sizeof k_dtypes[0]; i++)
        if (strcmp(d, k_dtypes[i].name) == 0)
            return k_dtypes[i].name;
    return NULL;
}

size_t strata__ckpt_dtype_size(const char *dtype)
{
    if (!dtype)
        return 0;
    for (size_t i = 0; i < sizeof k_dtypes / sizeof k_dtypes[0]; i++)
        if (strcmp(dtype, k_dtypes[i].name) == 0)
            return k_dtypes[i].size;
    return 0;
}

/* Strict UTF-8 (no overlongs, surrogates or > U+10FFFF) without NUL bytes.
 * Returns the offset of the first bad byte, or n when all is well. */
static size_t utf8_check(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t k;
        unsigned lo = 0x80, hi = 0xBF;
        if (c == 0)
            return i;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF)
            k = 1;
        else if (c >= 0xE0 && c <= 0xEF) {
            k = 2;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            k = 3;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else
            return i;
        if (n - i <= k)
            return i;
        for (size_t j = 1; j <= k; j++) {
            unsigned b = s[i + j];
            if (b < (j == 1 ? lo : 0x80) || b > (j == 1 ? hi : 0xBF))
                return i;
        }
        i += k + 1;
    }
    return n;
}

static int utf8_ok(const char *s)
{
    size_t n = strlen(s);
    return utf8_check((const unsigned char *)s, n) == n;
}

/* A name as it may appear in a log line: printable ASCII, at most 64 bytes. */
static const char *shown(const char *s, char buf[72])
{
    size_t k = 0;
    for (; s[k] && k < 64; k++)
        buf[k] = (s[k] >= 0x20 && s[k] < 0x7F) ? s[k] : '?';
    if (s[k]) {
        memcpy(buf + 61, "...", 3);
        k = 64;
    }
    buf[k] = '\0';
    return buf;
}

/* prod(shape) * size, 0 on success, -1 on overflow. */
static int tensor_bytes(const int64_t *shape, int ndim, size_t size, uint64_t *out)
{
    uint64_t n = size;
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0 || __builtin_mul_overflow(n, (uint64_t)shape[i], &n))
            return -1;
    *out = n;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Index of the first duplicate among sorted pointers `v`, or -1. */
static int first_dup(const char **v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_str);
    for (int i = 1; i < n; i++)
        if (strcmp(v[i - 1], v[i]) == 0)
            return i;
    return -1;
}

static const char *reserved_keys[] = { "strata.format", "strata.crc32c",
                                       "strata.header_crc32c" };

static int cmp_meta_idx(const void *a, const void *b, void *arg)
{
    const strata__meta_t *m = arg;
    return strcmp(m[*(const int *)a].key, m[*(const int *)b].key);
}

static int cmp_tensor_idx(const void *a, const void *b, void *arg)
{
    const strata__tensor_t *t = arg;
    return strcmp(t[*(const int *)a].name, t[*(const int *)b].name);
}

/* CRC-32C of what the header says, in one canonical order: the metadata by
 * key (without the two checksums), then the tensors by name with dtype,
 * shape and data offsets. An edit of the header that leaves valid JSON (an
 * epoch changed, two names swapped) then fails like a flipped data byte.
 * begin[i]: tensor i's first data byte. */
static int header_crc(const strata__meta_t *m, int nm, const strata__tensor_t *t,
                      const uint64_t *begin, int nt, uint32_t *out)
{
    int *mi = STRATA_FAULT(ALLOC) ? NULL : malloc(sizeof *mi * ((size_t)nm + 1));
    int *ti = STRATA_FAULT(ALLOC) ? NULL : malloc(sizeof *ti * ((size_t)nt + 1));
    if (!mi || !ti) {
        free(mi);
        free(ti);
        return STRATA_ENOMEM;
    }
    for (int i = 0; i < nm; i++)
        mi[i] = i;
    for (int i = 0; i < nt; i++)
        ti[i] = i;
    qsort_r(mi, (size_t)nm, sizeof *mi, cmp_meta_idx, (void *)m);
    qsort_r(ti, (size_t)nt, sizeof *ti, cmp_tensor_idx, (void *)t);
    uint32_t crc = 0;
    for (int k = 0; k < nm; k++) {
        const strata__meta_t *x = &m[mi[k]];
        if (!strcmp(x->key, "strata.crc32c") ||
            !strcmp(x->key, "strata.header_crc32c"))
            continue;
        crc = strata__crc32c(crc, x->key, strlen(x->key) + 1);
        crc = strata__crc32c(crc, x->value, strlen(x->value) + 1);
    }
    for (int k = 0; k < nt; k++) {
        const strata__tensor_t *x = &t[ti[k]];
        char rec[64 + 21 * STRATA_CKPT_MAX_NDIM];
        size_t at = (size_t)snprintf(rec, sizeof rec, "%s|%" PRIu64 "|%" PRIu64
                                     "|", dtype_canon(x->dtype), begin[ti[k]],
                                     begin[ti[k]] + (uint64_t)x->nbytes);
        for (int d = 0; d < x->ndim && at < sizeof rec; d++)
            at += (size_t)snprintf(rec + at, sizeof rec - at, "%" PRIu64 ",",
                                   (uint64_t)x->shape[d]);
        crc = strata__crc32c(crc, x->name, strlen(x->name) + 1);
        crc = strata__crc32c(crc, rec, at < sizeof rec ? at : sizeof rec);
    }
    free(mi);
    free(ti);
    *out = crc;
    return STRATA_OK;
}

/* ---- write -------------------------------------------------------------- */

static int check_args(const char *path, const strata__tensor_t *t, int nt,
                      const strata__meta_t *m, int nm, uint64_t *data_len)
{
    char b1[72];
    if (!path || !*path || nt < 0 || nm < 0 || (nt && !t) || (nm && !m)) {
        strata__log(STRATA_LOG_ERROR, WHO, "write: invalid arguments");
        return STRATA_EINVAL;
    }
    uint64_t total = 0;
    for (int i = 0; i < nt; i++) {
        const strata__tensor_t *x = &t[i];
        uint64_t need = 0;
        size_t size = strata__ckpt_dtype_size(x->dtype);
        const char *why = NULL;
        if (!x->name)
            why = "tensor without a name";
        else if (!utf8_ok(x->name))
            why = "name is not valid UTF-8";
        else if (strcmp(x->name, "__metadata__") == 0)
            why = "name '__metadata__' is reserved";
        else if (!size)
            why = "unknown dtype";
        else if (x->ndim < 0 || x->ndim > STRATA_CKPT_MAX_NDIM)
            why = "rank out of 0..4";
        else if (tensor_bytes(x->shape, x->ndim, size, &need) < 0)
            why = "negative or overflowing shape";
        else if (need != x->nbytes)
            why = "nbytes != prod(shape) * dtype size";
        else if (x->nbytes && !x->data)
            why = "no data";
        else if (__builtin_add_overflow(total, need, &total))
            why = "total size overflows";
        if (why) {
            strata__log(STRATA_LOG_ERROR, WHO, "write %s: tensor %d '%s': %s",
                        path, i, x->name ? shown(x->name, b1) : "", why);
            return STRATA_EINVAL;
        }
    }
    for (int i = 0; i < nm; i++) {
        const char *why = NULL;
        if (!m[i].key || !m[i].value)
            why = "NULL key or value";
        else if (!utf8_ok(m[i].key) || !utf8_ok(m[i].value))
            why = "not valid UTF-8";
        else
            for (size_t r = 0; r < sizeof reserved_keys / sizeof *reserved_keys;
                 r++)
                if (strcmp(m[i].key, reserved_keys[r]) == 0)
                    why = "key is reserved for the writer";
        if (why) {
            strata__log(STRATA_LOG_ERROR, WHO, "write %s: metadata %d '%s': %s",
                        path, i, m[i].key ? shown(m[i].key, b1) : "", why);
            return STRATA_EINVAL;
        }
    }
    int n = nt > nm ? nt : nm;
    const char **v = STRATA_FAULT(ALLOC) ? NULL
                                         : malloc(sizeof *v * (size_t)(n ? n : 1));
    if (!v) {
        strata__log(STRATA_LOG_ERROR, WHO, "write %s: out of memory", path);
        return STRATA_ENOMEM;
    }
    int rc = 0;
    for (int pass = 0; pass < 2 && !rc; pass++) {
        int k = pass ? nm : nt;
        for (int i = 0; i < k; i++)
            v[i] = pass ? m[i].key : t[i].name;
        int d = first_dup(v, k);
        if (d >= 0) {
            strata__log(STRATA_LOG_ERROR, WHO, "write %s: duplicate %s '%s'", path,
                        pass ? "metadata key" : "tensor name", shown(v[d], b1));
            rc = STRATA_EINVAL;
        }
    }
    free(v);
    *data_len = total;
    return rc;
}

static cJSON *raw_u64(uint64_t v)
{
    char num[24];
    snprintf(num, sizeof num, "%" PRIu64, v);
    return cJSON_CreateRaw(num);
}

/* The header JSON, padded with spaces to a multiple of 8 bytes. */
static char *build_header(const strata__tensor_t *t, int nt,
                          const strata__meta_t *m, int nm, uint32_t crc,
                          uint32_t hcrc, size_t *len)
{
    char hex[9], hhex[9];
    snprintf(hex, sizeof hex, "%08" PRIx32, crc);
    snprintf(hhex, sizeof hhex, "%08" PRIx32, hcrc);
    /* cJSON allocates through malloc: one point for the tree, one for the
     * text (its hooks are the process's, not ours to change). */
    cJSON *root = STRATA_FAULT(ALLOC) ? NULL : cJSON_CreateObject();
    cJSON *md = root ? cJSON_AddObjectToObject(root, "__metadata__") : NULL;
    int ok = md && cJSON_AddStringToObject(md, "strata.format", "1")
             && cJSON_AddStringToObject(md, "strata.crc32c", hex)
             && cJSON_AddStringToObject(md, "strata.header_crc32c", hhex);
    for (int i = 0; ok && i < nm; i++)
        ok = cJSON_AddStringToObject(md, m[i].key, m[i].value) != NULL;
    uint64_t off = 0;
    for (int i = 0; ok && i < nt; i++) {
        cJSON *o = cJSON_AddObjectToObject(root, t[i].name);
        cJSON *shape = o ? cJSON_AddArrayToObject(o, "shape") : NULL;
        ok = o && shape && cJSON_AddStringToObject(o, "dtype", dtype_canon(t[i].dtype));
        for (int d = 0; ok && d < t[i].ndim; d++)
            ok = cJSON_AddItemToArray(shape, raw_u64((uint64_t)t[i].shape[d]));
        cJSON *offs = ok ? cJSON_AddArrayToObject(o, "data_offsets") : NULL;
        ok = offs && cJSON_AddItemToArray(offs, raw_u64(off))
             && cJSON_AddItemToArray(offs, raw_u64(off + t[i].nbytes));
        off += t[i].nbytes;
    }
    char *json = ok && !STRATA_FAULT(ALLOC) ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!json)
        return NULL;
    size_t n = strlen(json), padded = (n + 7) & ~(size_t)7;
    char *h = STRATA_FAULT(ALLOC) ? NULL : malloc(padded + 1);
    if (h) {
        memcpy(h, json, n);
        memset(h + n, ' ', padded - n);
        h[padded] = '\0';
        *len = padded;
    }
    cJSON_free(json);
    return h;
}

struct writer {
    int      fd;
    uint64_t done;
    uint64_t crash_at;   /* test hook: _exit(99) once this many bytes are out */
};

static int put(struct writer *w, const void *p, size_t n)
{
    const char *b = p;
    while (n > 0) {
        size_t k = n > IO_CHUNK ? IO_CHUNK : n;
        if (k > w->crash_at - w->done)
            k = (size_t)(w->crash_at - w->done);
        if (k == 0)
            _exit(99);                         /* STRATA_TEST_CKPT_CRASH=mid_write */
        assert(w->done < w->crash_at);
        ssize_t r = STRATA_FAULT(IO) ? -1 : write(w->fd, b, k);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        b += r;
        n -= (size_t)r;
        w->done += (uint64_t)r;
    }
    if (w->done == w->crash_at)
        _exit(99);
    return 0;
}

static int fsync_dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = STRATA_FAULT(ALLOC) ? NULL
              : slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path))
                      : strdup(".");
    if (!dir)
        return -1;
    int fd = STRATA_FAULT(IO) ? -1 : open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (fd < 0)
        return -1;
    int rc = STRATA_FAULT(IO) ? -1 : fsync(fd);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

int strata__ckpt_write(const char *path, const strata__tensor_t *t, int nt,
                       const strata__meta_t *m, int nm)
{
    uint64_t data_len = 0;
    int rc = check_args(path, t, nt, m, nm, &data_len);
    if (rc)
        return rc;

    uint32_t crc = 0, hcrc = 0;
    for (int i = 0; i < nt; i++)
        crc = strata__crc32c(crc, t[i].data, t[i].nbytes);
    /* The header's own checksum covers strata.format too. */
    strata__meta_t *all = STRATA_FAULT(ALLOC) ? NULL
                                              : malloc(sizeof *all * ((size_t)nm + 1));
    uint64_t *begin = STRATA_FAULT(ALLOC) ? NULL
                                          : malloc(sizeof *begin * ((size_t)nt + 1));
    if (all && begin) {
        all[0] = (strata__meta_t){ "strata.format", "1" };
        if (nm > 0)
            memcpy(all + 1, m, sizeof *m * (size_t)nm);
        for (int i = 0; i < nt; i++)
            begin[i] = i ? begin[i - 1] + t[i - 1].nbytes : 0;
        rc = header_crc(all, nm + 1, t, begin, nt, &hcrc);
    } else {
        rc = STRATA_ENOMEM;
    }
    free(all);
    free(begin);
    size_t hlen = 0;
    char *hdr = rc == STRATA_OK ? build_header(t, nt, m, nm, crc, hcrc, &hlen)
                                : NULL;
    size_t tlen = strlen(path) + 48;   /* ".tmp.<pid>.<try>" */
    char *tmp = STRATA_FAULT(ALLOC) ? NULL : malloc(tlen);
    if (!hdr || !tmp) {
        free(hdr);
        free(tmp);
        strata__log(STRATA_LOG_ERROR, WHO, "write %s: out of memory", path);
        return STRATA_ENOMEM;
    }

    const char *crash = getenv("STRATA_TEST_CKPT_CRASH");   /* test only */
    uint64_t total = 8 + (uint64_t)hlen + data_len;
    struct writer w = { -1, 0, UINT64_MAX };
    if (crash && strcmp(crash, "mid_write") == 0)
        w.crash_at = total / 2;

    /* A new temp file (never one that was there: a link planted at its
     * name in a shared directory is skipped, not written through). */
    w.fd = strata__create_temp(path, tmp, tlen, 0644);
    if (w.fd < 0) {
        int e = -w.fd;
        strata__log(STRATA_LOG_ERROR, WHO, "cannot create %s: %s", tmp, strerror(e));
        free(hdr);
        free(tmp);
        return e == ENOENT || e == ENOTDIR ? STRATA_ENOENT : STRATA_EIO;
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    const char *what = NULL;
    int e = 0, bad = put(&w, len8, 8) || put(&w, hdr, hlen);
    for (int i = 0; !bad && i < nt; i++)
        bad = put(&w, t[i].data, t[i].nbytes);
    if (bad) {
        e = errno;
        what = "write";
    } else if (STRATA_FAULT(IO) || fsync(w.fd) != 0) {
        e = errno;
        what = "fsync";
    }
    if (!what && crash && strcmp(crash, "before_rename") == 0)
        _exit(99);                                  /* test hook, see header */
    if (STRATA_CLOSE_POINT(w.fd) != 0 && !what) {
        e = errno;
        what = "close";
    }
    if (!what && (STRATA_FAULT(IO) || rename(tmp, path) != 0)) {
        e = errno;
        what = "rename";
    }
    if (what) {
        strata__log(STRATA_LOG_ERROR, WHO, "cannot %s %s%s%s: %s", what, tmp,
                    strcmp(what, "rename") == 0 ? " to " : "",
                    strcmp(what, "rename") == 0 ? path : "", strerror(e));
        unlink(tmp);
        rc = STRATA_EIO;
    } else if (fsync_dir_of(path) != 0) {
        /* The file is complete and in place; only its durability across a
         * power loss is in doubt. */
        strata__log(STRATA_LOG_WARN, WHO, "%s: cannot fsync its directory: %s", path,
                    strerror(errno));
    }
    free(hdr);
    free(tmp);
    return rc;
}

/* ---- read --------------------------------------------------------------- */

/* msg: why the file was refused. weights: read for its tensors only
 * (strata__ckpt_read_weights), where a failed check of strata's own
 * metadata goes to soft (the first one) instead of refusing the file. */
struct why { char msg[512]; int weights; char soft[512]; int header_only,
             part; };

__attribute__((format(printf, 3, 4)))
static int fail(struct why *w, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg, sizeof w->msg, fmt, ap);
    va_end(ap);
    return code;
}

/* A check of strata's own metadata (format, checksums): STRATA_EDATA for a
 * checkpoint; 0 for a weights file, the reason kept for one warning. */
__attribute__((format(printf, 2, 3)))
static int strata_fail(struct why *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (!w->weights)
        vsnprintf(w->msg, sizeof w->msg, fmt, ap);
    else if (!w->soft[0])
        vsnprintf(w->soft, sizeof w->soft, fmt, ap);
    va_end(ap);
    return w->weights ? 0 : STRATA_EDATA;
}

/* pread exactly n bytes: 0, 1 at end of file, -1 on error (errno). */
static int pread_full(int fd, void *buf, size_t n, uint64_t off)
{
    unsigned char *p = buf;
    while (n > 0) {
        size_t k = n > IO_CHUNK ? IO_CHUNK : n;
        ssize_t r = STRATA_FAULT(IO) ? -1 : pread(fd, p, k, (off_t)off);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            return 1;
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

/* A JSON number that is an exact non-negative integer below 2^53. */
static int json_u53(const cJSON *j, uint64_t *out)
{
    if (!cJSON_IsNumber(j))
        return -1;
    double d = j->valuedouble;
    if (!isfinite(d) || d < 0 || d >= (double)MAX_EXACT || d != floor(d))
        return -1;
    *out = (uint64_t)d;
    return 0;
}

struct span { uint64_t begin, end; int i; };

static int cmp_span(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return x->i - y->i;
}

static void fmt_shape(const strata__tensor_t *x, char *buf, size_t len)
{
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < x->ndim && k < len; d++)
        k += (size_t)snprintf(buf + k, len - k, "%s%" PRId64, d ? ", " : "", x->shape[d]);
    if (k < len)
        snprintf(buf + k, len - k, "]");
}

/* One tensor entry of the header -> x and its offsets. */
static int parse_tensor(const cJSON *e, uint64_t data_len, strata__tensor_t *x,
                        struct span *s, struct why *w)
{
    char b1[72], sh[128];
    const char *nm = shown(x->name, b1);
    const cJSON *dtype = NULL, *shape = NULL, *offs = NULL, *k;
    if (!cJSON_IsObject(e))
        return fail(w, STRATA_EDATA, "tensor '%s': entry is not an object", nm);
    cJSON_ArrayForEach(k, e) {
        const cJSON **slot = strcmp(k->string, "dtype") == 0 ? &dtype
                           : strcmp(k->string, "shape") == 0 ? &shape
                           : strcmp(k->string, "data_offsets") == 0 ? &offs : NULL;
        if (!slot)
            return fail(w, STRATA_EDATA, "tensor '%s': unknown key '%s'", nm,
                        shown(k->string, sh));
        if (*slot)
            return fail(w, STRATA_EDATA, "tensor '%s': duplicate key '%s'", nm, k->string);
        *slot = k;
    }
    if (!dtype || !shape || !offs)
        return fail(w, STRATA_EDATA, "tensor '%s': missing '%s'", nm,
                    !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
    x->dtype = cJSON_IsString(dtype) ? dtype_canon(dtype->valuestring) : NULL;
    if (!x->dtype)
        return fail(w, STRATA_EDATA, "tensor '%s': unknown dtype %s%s%s", nm,
                    cJSON_IsString(dtype) ? "'" : "(not a string)",
                    cJSON_IsString(dtype) ? shown(dtype->valuestring, sh) : "",
                    cJSON_IsString(dtype) ? "'" : "");
    if (!cJSON_IsArray(shape))
        return fail(w, STRATA_EDATA, "tensor '%s': shape is not an array", nm);
    int nd = cJSON_GetArraySize(shape);
    if (nd > STRATA_CKPT_MAX_NDIM)
        return fail(w, STRATA_EDATA, "tensor '%s': rank %d (at most %d supported)",
                    nm, nd, STRATA_CKPT_MAX_NDIM);
    x->ndim = 0;
    cJSON_ArrayForEach(k, shape) {
        uint64_t v;
        if (json_u53(k, &v) < 0)
            return fail(w, STRATA_EDATA, "tensor '%s': shape[%d] is not a "
                        "non-negative integer", nm, x->ndim);
        x->shape[x->ndim++] = (int64_t)v;
    }
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2
        || json_u53(offs->child, &s->begin) < 0
        || json_u53(offs->child->next, &s->end) < 0)
        return fail(w, STRATA_EDATA, "tensor '%s': data_offsets is not "
                    "[begin, end] of non-negative integers", nm);
    fmt_shape(x, sh, sizeof sh);
    uint64_t need;
    if (tensor_bytes(x->shape, x->ndim, strata__ckpt_dtype_size(x->dtype), &need) < 0)
        return fail(w, STRATA_EDATA, "tensor '%s': shape %s of %s overflows",
                    nm, sh, x->dtype);
    if (s->end < s->begin)
        return fail(w, STRATA_EDATA, "tensor '%s': data_offsets [%" PRIu64 ", %"
                    PRIu64 "] end before begin", nm, s->begin, s->end);
    if (s->end - s->begin != need)
        return fail(w, STRATA_EDATA, "tensor '%s': shape %s of %s needs %" PRIu64
                    " bytes, data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64,
                    nm, sh, x->dtype, need, s->begin, s->end, s->end - s->begin);
    if (s->end > data_len)
        return fail(w, STRATA_EDATA, "tensor '%s': data_offsets [%" PRIu64 ", %"
                    PRIu64 "] beyond the data section (%" PRIu64 " bytes)",
                    nm, s->begin, s->end, data_len);
    x->nbytes = (size_t)need;
    return 0;
}

/* The tensors must tile [0, data_len): sorted by offsets, each begins where
 * the previous ended (the safetensors rule). */
static int check_tiling(const strata__ckpt_t *c, struct span *s, struct why *w)
{
    char b1[72], b2[72];
    qsort(s, (size_t)c->nt, sizeof *s, cmp_span);
    uint64_t at = 0;
    for (int k = 0; k < c->nt; k++) {
        if (s[k].begin < at)
            return fail(w, STRATA_EDATA, "tensors '%s' and '%s' overlap "
                        "(data_offsets [%" PRIu64 ", %" PRIu64 "] and [%" PRIu64
                        ", %" PRIu64 "])", shown(c->t[s[k - 1].i].name, b1),
                        shown(c->t[s[k].i].name, b2), s[k - 1].begin, s[k - 1].end,
                        s[k].begin, s[k].end);
        if (s[k].begin > at)
            return fail(w, STRATA_EDATA, "gap in the data section: bytes [%" PRIu64
                        ", %" PRIu64 ") belong to no tensor", at, s[k].begin);
        at = s[k].end;
    }
    if (at != c->data_len)
        return fail(w, STRATA_EDATA, "gap in the data section: bytes [%" PRIu64
                    ", %" PRIu64 ") belong to no tensor", at, c->data_len);
    return 0;
}

/* want_crc/has_crc[0]: the data's checksum, [1]: the header's. */
static int parse_meta(strata__ckpt_t *c, const cJSON *md, uint32_t want_crc[2],
                      int has_crc[2], struct why *w)
{
    char b1[72];
    const cJSON *k;
    if (!cJSON_IsObject(md))
        return fail(w, STRATA_EDATA, "__metadata__ is not an object");
    c->nm = cJSON_GetArraySize(md);
    c->m = STRATA_FAULT(ALLOC) ? NULL : calloc((size_t)c->nm + 1, sizeof *c->m);
    if (!c->m)
        return fail(w, STRATA_ENOMEM, "out of memory");
    int i = 0;
    cJSON_ArrayForEach(k, md) {
        if (!cJSON_IsString(k))
            return fail(w, STRATA_EDATA, "metadata '%s' is not a string",
                        shown(k->string, b1));
        c->m[i].key = k->string;
        c->m[i++].value = k->valuestring;
    }
    const char **v = STRATA_FAULT(ALLOC) ? NULL
                                         : malloc(sizeof *v * ((size_t)c->nm + 1));
    if (!v)
        return fail(w, STRATA_ENOMEM, "out of memory");
    for (i = 0; i < c->nm; i++)
        v[i] = c->m[i].key;
    int d = first_dup(v, c->nm);
    if (d >= 0)
        fail(w, STRATA_EDATA, "duplicate metadata key '%s'", shown(v[d], b1));
    free(v);
    if (d >= 0)
        return STRATA_EDATA;
    const char *fmt = strata__ckpt_meta(c, "strata.format");
    if (fmt && strcmp(fmt, "1") != 0)
        /* a weights file: its checksums may mean something else; not read */
        return strata_fail(w, "strata.format '%s' is not supported (this "
                           "build reads \"1\")", shown(fmt, b1));
    /* strata's own file: both checksums must be there */
    for (int r = 0; r < 2; r++) {
        const char *key = reserved_keys[1 + r], *hex = strata__ckpt_meta(c, key);
        int rc;
        if (!hex && fmt && (rc = strata_fail(w, "strata.format is set but %s "
                                             "is missing", key)) != 0)
            return rc;
        if (!hex)
            continue;
        uint32_t v32 = 0;
        size_t len = strlen(hex);
        for (size_t j = 0; j < len && len == 8; j++) {
            int dgt = hex[j] >= '0' && hex[j] <= '9' ? hex[j] - '0'
                    : hex[j] >= 'a' && hex[j] <= 'f' ? hex[j] - 'a' + 10
                    : hex[j] >= 'A' && hex[j] <= 'F' ? hex[j] - 'A' + 10 : -1;
            if (dgt < 0)
                len = 0;
            v32 = v32 << 4 | (uint32_t)(dgt & 15);
        }
        if (len != 8) {
            if ((rc = strata_fail(w, "%s '%s' is not 8 hex digits", key,
                                  shown(hex, b1))) != 0)
                return rc;
            continue;
        }
        want_crc[r] = v32;
        has_crc[r] = 1;
    }
    return 0;
}

static int cmp_by_name(const void *a, const void *b, void *arg)
{
    const strata__tensor_t *t = arg;
    return strcmp(t[*(const int *)a].name, t[*(const int *)b].name);
}

/* Everything after the header length is known: parse, check, read data. */
static int load_fd(int fd, uint64_t size, strata__ckpt_t *c, struct why *w)
{
    char b1[72];
    unsigned char len8[8];
    int r = pread_full(fd, len8, 8, 0);
    if (r)
        return r < 0 ? fail(w, STRATA_EIO, "read error: %s", strerror(errno))
                     : fail(w, STRATA_EDATA, "file shrank while reading");
    uint64_t n = 0;
    for (int i = 0; i < 8; i++)
        n |= (uint64_t)len8[i] << (8 * i);
    if (n > STRATA_CKPT_MAX_HEADER)
        return fail(w, STRATA_EDATA, "header length %" PRIu64 " exceeds the "
                    "safetensors limit of %u bytes", n, STRATA_CKPT_MAX_HEADER);
    if (n > size - 8)
        return fail(w, STRATA_EDATA, "header length %" PRIu64 " exceeds the file "
                    "(%" PRIu64 " bytes): truncated?", n, size);
    if (n < 2)
        return fail(w, STRATA_EDATA, "header length %" PRIu64 " is too short for "
                    "a JSON object", n);
    c->hdr_len = n;
    c->data_len = size - 8 - n;

    /* Zero padding after the text: cJSON 1.7.15 may read a few bytes past a
     * truncated \u escape. */
    char *hdr = STRATA_FAULT(ALLOC) ? NULL : calloc(1, (size_t)n + 16);
    if (!hdr)
        return fail(w, STRATA_ENOMEM, "out of memory for a %" PRIu64 "-byte header", n);
    r = pread_full(fd, hdr, (size_t)n, 8);
    if (r) {
        free(hdr);
        return r < 0 ? fail(w, STRATA_EIO, "read error: %s", strerror(errno))
                     : fail(w, STRATA_EDATA, "file shrank while reading");
    }
    size_t bad = utf8_check((const unsigned char *)hdr, (size_t)n);
    if (bad < n) {
        free(hdr);
        return fail(w, STRATA_EDATA, "header is not valid UTF-8 (byte %zu of the "
                    "header)", bad);
    }
    if (hdr[0] != '{') {
        unsigned first = (unsigned char)hdr[0];
        free(hdr);
        return fail(w, STRATA_EDATA, "header is not a JSON object (starts with "
                    "0x%02x)", first);
    }
    const char *end = NULL;
    /* cJSON tells no allocation failure from bad JSON; the point fails
     * the parse as out of memory. */
    int oom = STRATA_FAULT(ALLOC);
    c->root = oom ? NULL : cJSON_ParseWithLengthOpts(hdr, (size_t)n, &end, 0);
    size_t at = end ? (size_t)(end - hdr) : 0;
    if (c->root)
        while (at < n && (hdr[at] == ' ' || hdr[at] == '\t' || hdr[at] == '\r'
                          || hdr[at] == '\n'))
            at++;
    free(hdr);
    if (oom)
        return fail(w, STRATA_ENOMEM, "out of memory for the parsed header");
    if (!c->root)
        return fail(w, STRATA_EDATA, "header is not valid JSON (near byte %zu of "
                    "the header)", at);
    if (at < n)
        return fail(w, STRATA_EDATA, "header has bytes after the JSON object "
                    "(at byte %zu)", at);
    if (!cJSON_IsObject(c->root))
        return fail(w, STRATA_EDATA, "header is not a JSON object");

    /* Tensors and metadata. */
    const cJSON *e, *md = NULL;
    int nent = cJSON_GetArraySize(c->root);
    c->t = STRATA_FAULT(ALLOC) ? NULL : calloc((size_t)nent + 1, sizeof *c->t);
    c->by_name = STRATA_FAULT(ALLOC) ? NULL
                                     : calloc((size_t)nent + 1, sizeof *c->by_name);
    struct span *s = STRATA_FAULT(ALLOC) ? NULL : calloc((size_t)nent + 1, sizeof *s);
    if (!c->t || !c->by_name || !s) {
        free(s);
        return fail(w, STRATA_ENOMEM, "out of memory");
    }
    int rc = 0;
    cJSON_ArrayForEach(e, c->root) {
        if (strcmp(e->string, "__metadata__") == 0) {
            if (md) {
                rc = fail(w, STRATA_EDATA, "duplicate __metadata__");
                break;
            }
            md = e;
            continue;
        }
        strata__tensor_t *x = &c->t[c->nt];
        x->name = e->string;
        s[c->nt].i = c->nt;
        if ((rc = parse_tensor(e, c->data_len, x, &s[c->nt], w)) != 0)
            break;
        c->by_name[c->nt] = c->nt;
        c->nt++;
    }
    if (!rc) {
        qsort_r(c->by_name, (size_t)c->nt, sizeof *c->by_name, cmp_by_name, c->t);
        for (int i = 1; i < c->nt && !rc; i++)
            if (strcmp(c->t[c->by_name[i - 1]].name, c->t[c->by_name[i]].name) == 0)
                rc = fail(w, STRATA_EDATA, "duplicate tensor name '%s'",
                          shown(c->t[c->by_name[i]].name, b1));
    }
    if (!rc)
        rc = check_tiling(c, s, w);
    uint32_t want_crc[2] = { 0, 0 };
    int has_crc[2] = { 0, 0 };
    if (!rc && md)
        rc = parse_meta(c, md, want_crc, has_crc, w);
    if (!rc && has_crc[1]) {
        uint64_t *begin = STRATA_FAULT(ALLOC) ? NULL
                                              : malloc(sizeof *begin * ((size_t)c->nt + 1));
        uint32_t hcrc = 0;
        rc = begin ? STRATA_OK : STRATA_ENOMEM;
        for (int k = 0; k < c->nt && !rc; k++)
            begin[s[k].i] = s[k].begin;
        if (!rc)
            rc = header_crc(c->m, c->nm, c->t, begin, c->nt, &hcrc);
        free(begin);
        if (rc)
            rc = fail(w, rc, "out of memory");
        else if (hcrc != want_crc[1])
            rc = strata_fail(w, "header crc mismatch: the header's "
                             "CRC-32C is %08" PRIx32 ", strata.header_crc32c "
                             "says %08" PRIx32 " (metadata, names or shapes "
                             "were changed)", hcrc, want_crc[1]);
    }

    if (rc || w->header_only) {
        free(s);
        return rc;
    }
    /* Only now, with every size proven to lie within the file: the data. */
    size_t arena = SLOT_ALIGN;
    for (int i = 0; i < c->nt && !rc; i++)
        arena += (c->t[i].nbytes + SLOT_ALIGN - 1) & ~(size_t)(SLOT_ALIGN - 1);
    if (!rc && (STRATA_FAULT(ALLOC) || !(c->arena = malloc(arena))))
        rc = fail(w, STRATA_ENOMEM, "out of memory for %zu bytes of data", arena);
    uint32_t crc = 0;
    size_t slot = 0;
    for (int k = 0; k < c->nt && !rc; k++) {   /* in file order: one pass */
        strata__tensor_t *x = &c->t[s[k].i];
        /* The arena was sized from these very tensors. */
        assert(slot + x->nbytes <= arena);
        x->data = c->arena + slot;
        r = pread_full(fd, c->arena + slot, x->nbytes, 8 + n + s[k].begin);
        if (r)
            rc = r < 0 ? fail(w, STRATA_EIO, "read error: %s", strerror(errno))
                       : fail(w, STRATA_EDATA, "file shrank while reading");
        else
            crc = strata__crc32c(crc, c->arena + slot, x->nbytes);
        slot += (x->nbytes + SLOT_ALIGN - 1) & ~(size_t)(SLOT_ALIGN - 1);
    }
    free(s);
    if (!rc && has_crc[0] && crc != want_crc[0])
        rc = strata_fail(w, "crc mismatch: the data section's CRC-32C is "
                         "%08" PRIx32 ", strata.crc32c says %08" PRIx32, crc,
                         want_crc[0]);
    return rc;
}

/* Load without logging; the reason goes to w. */
static int ckpt_load(const char *path, strata__ckpt_t **out, struct why *w)
{
    *out = NULL;
    /* O_NONBLOCK: a FIFO at the name is refused below, not waited on (no
     * effect on a regular file's reads). */
    int fd = STRATA_FAULT(IO) ? -1
                              : open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY |
                                               O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return fail(w, e == ENOENT || e == ENOTDIR ? STRATA_ENOENT : STRATA_EIO,
                    "cannot open: %s", strerror(e));
    }
    struct stat st;
    if (STRATA_FAULT(IO) || fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return fail(w, STRATA_EIO, "cannot stat: %s", strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return fail(w, STRATA_EDATA, "not a regular file");
    }
    if (st.st_size < 8) {
        close(fd);
        return fail(w, STRATA_EDATA, "file too short (%lld bytes; a safetensors "
                    "file starts with an 8-byte header length)",
                    (long long)st.st_size);
    }
    strata__ckpt_t *c = STRATA_FAULT(ALLOC) ? NULL : calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return fail(w, STRATA_ENOMEM, "out of memory");
    }
    int rc = load_fd(fd, (uint64_t)st.st_size, c, w);
    close(fd);
    /* A checkpoint written in parts (plugin ABI 2.13): its variables are
     * in the part files beside it. */
    if (!rc && !w->header_only && !w->part
        && strata__ckpt_meta(c, "strata.part_count"))
        rc = strata__ckpt_join(path, c, w->msg, sizeof w->msg);
    if (rc) {
        strata__ckpt_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

int strata__ckpt_read(const char *path, strata__ckpt_t **out)
{
    struct why w = { .msg = "" };
    if (!out)
        return STRATA_EINVAL;
    *out = NULL;
    if (!path) {
        strata__log(STRATA_LOG_ERROR, WHO, "read: no path");
        return STRATA_EINVAL;
    }
    int rc = ckpt_load(path, out, &w);
    if (rc)
        strata__log(STRATA_LOG_ERROR, WHO, "%s: %s", path, w.msg);
    return rc;
}

/* ckpt_load as `w` says, its reason into why[len]. */
static int load_why(const char *path, strata__ckpt_t **out, struct why w,
                    char *why, size_t len)
{
    int rc = ckpt_load(path, out, &w);
    if (why && len)
        snprintf(why, len, "%s", w.msg);
    return rc;
}

int strata__ckpt_load_quiet(const char *path, strata__ckpt_t **out, char *why,
                            size_t len)
{
    return load_why(path, out, (struct why){ .msg = "" }, why, len);
}

int strata__ckpt_read_weights(const char *path, const char *who,
                              const char *what, strata__ckpt_t **out)
{
    struct why w = { .msg = "", .weights = 1 };
    if (!out)
        return STRATA_EINVAL;
    *out = NULL;
    who = who ? who : WHO;
    what = what ? what : path;
    if (!path || !what) {
        strata__log(STRATA_LOG_ERROR, who, "read: no path");
        return STRATA_EINVAL;
    }
    int rc = ckpt_load(path, out, &w);
    if (rc)
        strata__log(STRATA_LOG_ERROR, who, "%s: %s", what, w.msg);
    else if (w.soft[0])
        strata__log(STRATA_LOG_WARN, who, "%s: strata's checksums do not hold "
                    "(%s): changed since strata wrote it (written back by "
                    "another writer with the metadata kept, or damaged); its "
                    "tensors passed every other check and are used", what,
                    w.soft);
    return rc;
}

/* "(3, 3, 1, 32)", "(10,)", "()" as Python prints a shape. */
static void py_shape(const int64_t *shape, int ndim, char *buf, size_t len)
{
    size_t k = (size_t)snprintf(buf, len, "(");
    for (int d = 0; d < ndim && k < len; d++)
        k += (size_t)snprintf(buf + k, len - k, "%s%" PRId64, d ? ", " : "",
                              shape[d]);
    if (k < len)
        snprintf(buf + k, len - k, "%s)", ndim == 1 ? "," : "");
}

int strata__ckpt_take_f32(const strata__ckpt_t *c, const char *who,
                          const char *what, const char *name,
                          const int64_t *shape, int ndim, float *dst)
{
    char b1[72], fs[128], ms[128];
    const strata__tensor_t *t = strata__ckpt_find(c, name);
    who = who ? who : WHO;
    if (!t) {
        strata__log(STRATA_LOG_ERROR, who, "%s: tensor '%s' missing", what,
                    shown(name, b1));
        return STRATA_ENOENT;
    }
    if (strcmp(t->dtype, "F32") != 0) {
        strata__log(STRATA_LOG_ERROR, who, "%s: tensor '%s' is %s; the "
                    "model's variables are F32", what, shown(name, b1),
                    t->dtype);
        return STRATA_EDATA;
    }
    int same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = t->shape[d] == shape[d];
    if (!same) {
        py_shape(t->shape, t->ndim, fs, sizeof fs);
        py_shape(shape, ndim, ms, sizeof ms);
        strata__log(STRATA_LOG_ERROR, who, "%s: tensor '%s' has shape %s in "
                    "the file, %s in the model", what, shown(name, b1), fs, ms);
        return STRATA_EDATA;
    }
    if (t->nbytes)
        memcpy(dst, t->data, t->nbytes);
    return STRATA_OK;
}

void strata__ckpt_free(strata__ckpt_t *c)
{
    if (!c)
        return;
    cJSON_Delete(c->root);
    free(c->t);
    free(c->by_name);
    free(c->m);
    free(c->arena);
    free(c->joined_names);
    free(c->joined);
    free(c);
}

int strata__ckpt_header(const char *path, strata__ckpt_t **out, char *why,
                        size_t len)
{
    return load_why(path, out, (struct why){ .msg = "", .header_only = 1 },
                    why, len);
}

int strata__ckpt_load_part(const char *path, strata__ckpt_t **out,
                           char *why, size_t len)
{
    return load_why(path, out, (struct why){ .msg = "", .part = 1 }, why,
                    len);
}

int strata__ckpt_adopt(strata__ckpt_t *c, const strata__tensor_t *t, int n,
                       char *names, unsigned char *data)
{
    assert(!c->joined_names && !c->joined);
    c->joined_names = names;
    c->joined = data;
    strata__tensor_t *nt = realloc(c->t, sizeof *nt * (size_t)(c->nt + n + 1));
    if (nt)
        c->t = nt;
    int *nb = nt ? realloc(c->by_name, sizeof *nb * (size_t)(c->nt + n + 1))
                 : NULL;
    if (nb)
        c->by_name = nb;
    if (!nt || !nb)
        return STRATA_ENOMEM;
    for (int i = 0; i < n; i++, c->nt++) {
        c->t[c->nt] = t[i];
        c->by_name[c->nt] = c->nt;
    }
    qsort_r(c->by_name, (size_t)c->nt, sizeof *c->by_name, cmp_by_name, c->t);
    for (int i = 1; i < c->nt; i++)
        if (strcmp(c->t[c->by_name[i - 1]].name, c->t[c->by_name[i]].name) == 0)
            return STRATA_EDATA;
    return STRATA_OK;
}

/* ---- accessors ---------------------------------------------------------- */

int strata__ckpt_ntensors(const strata__ckpt_t *c) { return c ? c->nt : 0; }

const strata__tensor_t *strata__ckpt_tensor(const strata__ckpt_t *c, int i)
{
    return c && i >= 0 && i < c->nt ? &c->t[i] : NULL;
}

const strata__tensor_t *strata__ckpt_find(const strata__ckpt_t *c, const char *name)
{
    if (!c || !name)
        return NULL;
    int lo = 0, hi = c->nt - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        assert(c->by_name[mid] >= 0 && c->by_name[mid] < c->nt);
        const strata__tensor_t *x = &c->t[c->by_name[mid]];
        int d = strcmp(name, x->name);
        if (d == 0)
            return x;
        if (d < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return NULL;
}

const char *strata__ckpt_meta(const strata__ckpt_t *c, const char *key)
{
    for (int i = 0; c && key && i < c->nm; i++)
        if (strcmp(c->m[i].key, key) == 0)
            return c->m[i].value;
    return NULL;
}

int strata__ckpt_nmeta(const strata__ckpt_t *c) { return c ? c->nm : 0; }

const strata__meta_t *strata__ckpt_meta_at(const strata__ckpt_t *c, int i)
{
    return c && i >= 0 && i < c->nm ? &c->m[i] : NULL;
}

uint64_t strata__ckpt_header_len(const strata__ckpt_t *c) { return c ? c->hdr_len : 0; }
uint64_t strata__ckpt_data_len(const strata__ckpt_t *c) { return c ? c->data_len : 0; }
