/* NumPy .npy reader (numpy.save's format), strict.
 *
 * Layout: "\x93NUMPY", major, minor; a little-endian header length (uint16
 * for version 1.0, uint32 for 2.0 and 3.0); the header, a Python dict
 * literal {'descr': '<f4', 'fortran_order': False, 'shape': (n, h, w), }
 * padded with spaces and ended by '\n'; then the elements, C order. Every
 * field is checked, and the file size must be exactly the header's end plus
 * the shape's bytes, before anything larger than the header is allocated. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data.h"

#define WHO "data"
#define HEADER_MAX ((size_t)64 << 10)  /* numpy writes < 100 bytes of dict */
#define CHUNK ((size_t)1 << 20)        /* largest single read              */

static const struct {
    const char *name;   /* descr without the byte-order character */
    int         type;   /* STRATA__NPY_*                          */
    size_t      size;
} k_types[] = {
    { "u1", STRATA__NPY_U1, 1 }, { "i1", STRATA__NPY_I1, 1 },
    { "i2", STRATA__NPY_I2, 2 }, { "u2", STRATA__NPY_U2, 2 },
    { "i4", STRATA__NPY_I4, 4 }, { "u4", STRATA__NPY_U4, 4 },
    { "i8", STRATA__NPY_I8, 8 }, { "u8", STRATA__NPY_U8, 8 },
    { "f4", STRATA__NPY_F4, 4 },
};

const char *strata__npy_type_name(int type)
{
    static const char *const names[] = {
        [STRATA__NPY_U1] = "uint8",  [STRATA__NPY_I1] = "int8",
        [STRATA__NPY_I2] = "int16",  [STRATA__NPY_U2] = "uint16",
        [STRATA__NPY_I4] = "int32",  [STRATA__NPY_U4] = "uint32",
        [STRATA__NPY_I8] = "int64",  [STRATA__NPY_U8] = "uint64",
        [STRATA__NPY_F4] = "float32",
    };
    return type >= 0 && type < (int)(sizeof names / sizeof *names) &&
           names[type] ? names[type] : "?";
}

static int bad(const char *path, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* One error line: "<path>: <what>". */
static int bad(const char *path, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    strata__log(STRATA_LOG_ERROR, WHO, "%s: %s", path, msg);
    return STRATA_EDATA;
}

/* Read exactly n bytes at the current offset; *got < n at the end. */
static int read_full(int fd, const char *path, void *buf, size_t n,
                     size_t *got)
{
    unsigned char *p = buf;
    *got = 0;
    while (*got < n) {
        size_t want = n - *got < CHUNK ? n - *got : CHUNK;
        ssize_t r = read(fd, p + *got, want);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            strata__log(STRATA_LOG_ERROR, WHO, "%s: read error: %s", path,
                        strerror(errno));
            return STRATA_EIO;
        }
        if (r == 0)
            break;
        *got += (size_t)r;
    }
    return 0;
}

/* ---- the header dict -------------------------------------------------- */

typedef struct cursor {
    const char *p, *end;
} cursor_t;

static void skip_ws(cursor_t *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
        c->p++;
}

static int eat(cursor_t *c, char ch)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* A quoted Python string without escapes into buf; 0 when not one. */
static int get_string(cursor_t *c, char *buf, size_t cap)
{
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return 0;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || *c->p == '\n' || n + 1 >= cap)
            return 0;
        buf[n++] = *c->p++;
    }
    if (c->p >= c->end)
        return 0;
    c->p++;
    buf[n] = '\0';
    return 1;
}

static int get_word(cursor_t *c, const char *w)
{
    skip_ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, w, n) == 0 &&
        ((size_t)(c->end - c->p) == n ||
         !(c->p[n] == '_' || (c->p[n] >= 'a' && c->p[n] <= 'z') ||
           (c->p[n] >= 'A' && c->p[n] <= 'Z') ||
           (c->p[n] >= '0' && c->p[n] <= '9')))) {
        c->p += n;
        return 1;
    }
    return 0;
}

/* What the text at the cursor looks like, for a message: up to 24 chars. */
static const char *near(const cursor_t *c, char *buf, size_t cap)
{
    size_t n = 0;
    for (const char *q = c->p; q < c->end && n + 1 < cap && n < 24; q++)
        buf[n++] = *q == '\n' ? ' ' : *q;
    while (n > 0 && buf[n - 1] == ' ')
        n--;
    buf[n] = '\0';
    return n ? buf : "(end of header)";
}

/* shape: '(' [int {',' int} [',']] ')'; Python 2's 'L' suffix accepted. */
static int get_shape(cursor_t *c, const char *path, strata__npy_t *out)
{
    char nb[32];
    if (!eat(c, '('))
        return bad(path, "header: 'shape' is not a tuple (at '%s')",
                   near(c, nb, sizeof nb));
    out->ndim = 0;
    for (;;) {
        if (eat(c, ')'))
            return 0;
        if (out->ndim > 0 && !eat(c, ','))
            return bad(path, "header: bad 'shape' tuple (at '%s')",
                       near(c, nb, sizeof nb));
        if (out->ndim > 0 && eat(c, ')'))
            return 0;
        skip_ws(c);
        if (c->p >= c->end || *c->p < '0' || *c->p > '9')
            return bad(path, "header: bad 'shape' entry (at '%s'); expected "
                       "a non-negative integer", near(c, nb, sizeof nb));
        uint64_t v = 0;
        int over = 0;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            over |= __builtin_mul_overflow(v, 10u, &v);
            over |= __builtin_add_overflow(v, (uint64_t)(*c->p - '0'), &v);
            c->p++;
        }
        if (c->p < c->end && *c->p == 'L')
            c->p++;
        if (out->ndim == STRATA__NPY_MAX_DIMS)
            return bad(path, "header: 'shape' has more than %d dimensions",
                       STRATA__NPY_MAX_DIMS);
        if (over)
            return bad(path, "header: 'shape' entry %d is over 2^64",
                       out->ndim + 1);
        out->dims[out->ndim++] = v;
    }
}

static int get_descr(const char *path, const char *d, int *type, size_t *size)
{
    char bo = d[0];
    const char *t = bo == '|' || bo == '<' || bo == '>' || bo == '=' ? d + 1
                                                                     : d;
    for (size_t i = 0; i < sizeof k_types / sizeof *k_types; i++) {
        if (strcmp(t, k_types[i].name) != 0)
            continue;
        /* One byte: any byte order; wider: little-endian only. */
        if (k_types[i].size > 1 && bo != '<') {
            if (bo == '>')
                return bad(path, "big-endian dtype '%s' is not supported; "
                           "save it little-endian (numpy: "
                           "a.astype('<%s'))", d, t);
            return bad(path, "dtype '%s' lacks an explicit byte order; "
                       "expected '<%s'", d, t);
        }
        *type = k_types[i].type;
        *size = k_types[i].size;
        return 0;
    }
    return bad(path, "unsupported dtype '%s'%s; supported: '|u1' (uint8), "
               "'<f4' (float32) and, for labels, '|i1', '<i2', '<u2', "
               "'<i4', '<u4', '<i8', '<u8'", d,
               strstr(d, "f8") ? " (float64: save it as float32, numpy: "
                                 "a.astype('<f4'))" : "");
}

/* The dict: exactly 'descr', 'fortran_order' and 'shape', once each. */
static int parse_dict(const char *path, const char *h, size_t len,
                      strata__npy_t *out)
{
    cursor_t c = { h, h + len };
    char nb[32], key[32], descr[32] = "";
    int seen = 0; /* bit 0 descr, 1 fortran_order, 2 shape */
    if (len == 0 || h[len - 1] != '\n')
        return bad(path, "header does not end with a newline");
    c.end--; /* the '\n' */
    if (!eat(&c, '{'))
        return bad(path, "header is not a dict (starts '%s')",
                   near(&c, nb, sizeof nb));
    for (;;) {
        if (eat(&c, '}'))
            break;
        if (seen && !eat(&c, ','))
            return bad(path, "header: expected ',' or '}' (at '%s')",
                       near(&c, nb, sizeof nb));
        if (seen && eat(&c, '}'))
            break;
        if (!get_string(&c, key, sizeof key))
            return bad(path, "header: expected a quoted key (at '%s')",
                       near(&c, nb, sizeof nb));
        int bit = strcmp(key, "descr") == 0           ? 1
                  : strcmp(key, "fortran_order") == 0 ? 2
                  : strcmp(key, "shape") == 0         ? 4
                                                      : 0;
        if (!bit)
            return bad(path, "header: unknown key '%s'; expected exactly "
                       "'descr', 'fortran_order' and 'shape'", key);
        if (seen & bit)
            return bad(path, "header: key '%s' given twice", key);
        seen |= bit;
        if (!eat(&c, ':'))
            return bad(path, "header: expected ':' after '%s'", key);
        if (bit == 1) {
            if (!get_string(&c, descr, sizeof descr))
                return bad(path, "header: 'descr' is not a simple dtype "
                           "string (structured or object arrays are not "
                           "supported; at '%s')", near(&c, nb, sizeof nb));
        } else if (bit == 2) {
            if (get_word(&c, "True"))
                return bad(path, "fortran_order is True; only C-order "
                           "arrays are supported (numpy: "
                           "np.ascontiguousarray(a))");
            if (!get_word(&c, "False"))
                return bad(path, "header: 'fortran_order' is not True or "
                           "False (at '%s')", near(&c, nb, sizeof nb));
        } else {
            int rc = get_shape(&c, path, out);
            if (rc)
                return rc;
        }
    }
    skip_ws(&c);
    while (c.p < c.end && (*c.p == ' ' || *c.p == '\n'))
        c.p++;
    if (c.p != c.end)
        return bad(path, "header: unexpected text after the dict ('%s')",
                   near(&c, nb, sizeof nb));
    if (seen != 7)
        return bad(path, "header lacks '%s'",
                   !(seen & 1) ? "descr" : !(seen & 2) ? "fortran_order"
                                                       : "shape");
    return get_descr(path, descr, &out->type, &out->elem);
}

/* "(a, b, c)" for messages. */
static const char *shape_str(const strata__npy_t *a, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < a->ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%" PRIu64,
                              i ? ", " : "", a->dims[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, a->ndim == 1 ? ",)" : ")");
    return buf;
}

int strata__npy_check_role(const char *path, int role, const strata__npy_t *a)
{
    char sb[128];
    if (role == STRATA__NPY_IMAGES) {
        if (a->type != STRATA__NPY_U1 && a->type != STRATA__NPY_F4)
            return bad(path, "images of dtype %s; expected uint8 ('|u1') "
                       "or float32 ('<f4')", strata__npy_type_name(a->type));
        if (a->ndim < 2 || a->ndim > 4)
            return bad(path, "images of shape %s; expected (n, h, w), "
                       "(n, h, w, c) or (n, dim)", shape_str(a, sb, sizeof sb));
    } else if (role == STRATA__NPY_TARGETS) {
        if (a->ndim < 1 || a->ndim > 4)
            return bad(path, "labels of shape %s; expected (n,) or (n, ...) "
                       "of at most 4 dimensions", shape_str(a, sb, sizeof sb));
    } else if (role == STRATA__NPY_IDS) {
        if (a->type != STRATA__NPY_I4 && a->type != STRATA__NPY_I8)
            return bad(path, "ids of dtype %s; expected int32 or int64 "
                       "(numpy: ids.astype('int64'))",
                       strata__npy_type_name(a->type));
        if (a->ndim != 1 && a->ndim != 2)
            return bad(path, "ids of shape %s; expected (n,) or (n, k)",
                       shape_str(a, sb, sizeof sb));
    } else if (role == STRATA__NPY_LABELS) {
        if (a->type == STRATA__NPY_F4)
            return bad(path, "labels of dtype float32; expected integers "
                       "(numpy: y.astype('int64'))");
        if (a->ndim != 1)
            return bad(path, "labels of shape %s; expected (n,) (numpy: "
                       "y.reshape(-1))", shape_str(a, sb, sizeof sb));
    }
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] == 0)
            return bad(path, "shape %s holds no data (dimension %d is 0)",
                       shape_str(a, sb, sizeof sb), i + 1);
    if (a->ndim == 0)
        return bad(path, "a scalar (shape ()); expected an array");
    if (a->dims[0] > UINT32_MAX)
        return bad(path, "%" PRIu64 " items; at most %u are supported",
                   a->dims[0], UINT32_MAX);
    return 0;
}

static int read_file(int fd, const char *path, const struct stat *st,
                     int role, size_t max_items, strata__npy_t *out)
{
    unsigned char pre[12];
    size_t got;
    uint64_t size = (uint64_t)st->st_size;
    int rc = read_full(fd, path, pre, 10, &got);
    if (rc)
        return rc;
    if (got < 8 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        if (got >= 6 && memcmp(pre, "\x93NUMPY", 6) != 0)
            return bad(path, "bad magic %02x %02x %02x %02x %02x %02x: not "
                       "a .npy file (expected \\x93NUMPY)", pre[0], pre[1],
                       pre[2], pre[3], pre[4], pre[5]);
        return bad(path, "%s", got == 0 ? "empty file, expected a .npy "
                   "header" : got < 6 ? "not a .npy file (too short for "
                   "the magic \\x93NUMPY)" : "truncated .npy preamble");
    }
    int major = pre[6], minor = pre[7];
    if ((major != 1 && major != 2 && major != 3) || minor != 0)
        return bad(path, "unsupported .npy version %d.%d; expected 1.0, 2.0 "
                   "or 3.0", major, minor);
    size_t pre_len = major == 1 ? 10 : 12;
    if (got < 10 || (pre_len == 12 &&
                     (rc = read_full(fd, path, pre + 10, 2, &got)) == 0 &&
                     got < 2)) {
        if (rc)
            return rc;
        return bad(path, "truncated .npy preamble (file ends before the "
                   "header length)");
    }
    if (rc)
        return rc;
    uint64_t hlen = major == 1
                        ? (uint64_t)pre[8] | (uint64_t)pre[9] << 8
                        : (uint64_t)pre[8] | (uint64_t)pre[9] << 8 |
                              (uint64_t)pre[10] << 16 | (uint64_t)pre[11] << 24;
    if (hlen == 0 || hlen > HEADER_MAX)
        return bad(path, "header length %" PRIu64 " is out of bounds (1 to "
                   "%zu)", hlen, HEADER_MAX);
    if (pre_len + hlen > size)
        return bad(path, "truncated header: header length %" PRIu64 " runs "
                   "past the end of the file (%" PRIu64 " bytes)", hlen, size);
    char *h = malloc(hlen);
    if (!h) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: out of memory", path);
        return STRATA_ENOMEM;
    }
    rc = read_full(fd, path, h, hlen, &got);
    if (!rc && got < hlen)
        rc = bad(path, "truncated header: %zu of %" PRIu64 " bytes", got,
                 hlen);
    for (size_t i = 0; !rc && i < hlen; i++)
        if ((unsigned char)h[i] >= 0x80 || h[i] == '\0')
            rc = bad(path, "header byte %zu is not printable ASCII", i);
    if (!rc)
        rc = parse_dict(path, h, hlen, out);
    free(h);
    if (!rc)
        rc = strata__npy_check_role(path, role, out);
    if (rc)
        return rc;

    /* Exactly the shape's bytes after the header: refuse before allocating. */
    char sb[128];
    uint64_t count = 1, bytes;
    int over = 0;
    for (int i = 0; i < out->ndim; i++)
        over |= __builtin_mul_overflow(count, out->dims[i], &count);
    over |= __builtin_mul_overflow(count, (uint64_t)out->elem, &bytes);
    uint64_t have = size - pre_len - hlen;
    if (over)
        return bad(path, "shape %s of %s declares over 2^64 bytes of data; "
                   "file holds %" PRIu64 " after the header",
                   shape_str(out, sb, sizeof sb),
                   strata__npy_type_name(out->type), have);
    if (bytes != have)
        return bad(path, "%s: shape %s of %s is %" PRIu64 " bytes of data, "
                   "file holds %" PRIu64 " after the header",
                   have < bytes ? "truncated" : "trailing bytes",
                   shape_str(out, sb, sizeof sb),
                   strata__npy_type_name(out->type), bytes, have);
    if (bytes > STRATA_DATA_MAX_BYTES)
        return bad(path, "shape %s of %s is %" PRIu64 " bytes, more than "
                   "the limit of %zu MiB", shape_str(out, sb, sizeof sb),
                   strata__npy_type_name(out->type), bytes,
                   (size_t)STRATA_DATA_MAX_BYTES >> 20);

    out->file_items = out->dims[0];
    uint64_t keep_items = out->dims[0];
    if (max_items > 0 && max_items < keep_items)
        keep_items = max_items;
    size_t keep = (size_t)(bytes / out->dims[0] * keep_items);
    out->data = strata__data_payload_alloc(keep);
    if (!out->data) {
        strata__log(STRATA_LOG_ERROR, WHO,
                    "%s: out of memory for %zu bytes of data", path, keep);
        return STRATA_ENOMEM;
    }
    rc = read_full(fd, path, out->data, keep, &got);
    if (!rc && got < keep)   /* the file shrank under us */
        rc = bad(path, "truncated: %zu of %zu bytes of data", got, keep);
    if (rc)
        return rc;
    out->dims[0] = keep_items;
    out->count = (size_t)(count / out->file_items * keep_items);
    return strata__npy_check_finite(path, out);
}

int strata__npy_check_finite(const char *path, const strata__npy_t *a)
{
    if (a->type != STRATA__NPY_F4 || a->count == 0)
        return 0;
    const float *f = a->data;
    size_t per = a->count / (size_t)a->dims[0];
    for (size_t i = 0; i < a->count; i++)
        if (!isfinite(f[i]))
            return bad(path, "value %g at sample %zu (element %zu) is "
                       "not finite", (double)f[i], i / per, i % per);
    return 0;
}

int strata__npy_read_first(const char *path, int role, size_t max_items,
                           strata__npy_t *out)
{
    memset(out, 0, sizeof *out);
    if (!path) {
        strata__log(STRATA_LOG_ERROR, WHO, "no .npy file name given");
        return STRATA_EINVAL;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        strata__log(STRATA_LOG_ERROR, WHO, "%s: cannot open: %s", path,
                    strerror(e));
        return e == ENOENT || e == ENOTDIR ? STRATA_ENOENT : STRATA_EIO;
    }
    struct stat st;
    int rc;
    if (fstat(fd, &st) != 0) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: cannot read: %s", path,
                    strerror(errno));
        rc = STRATA_EIO;
    } else if (!S_ISREG(st.st_mode)) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: cannot read: %s", path,
                    S_ISDIR(st.st_mode) ? "is a directory"
                                        : "not a regular file");
        rc = STRATA_EIO;
    } else {
        rc = read_file(fd, path, &st, role, max_items, out);
    }
    close(fd);
    if (rc)
        strata__npy_free(out);
    return rc;
}

int strata__npy_read(const char *path, int role, strata__npy_t *out)
{
    return strata__npy_read_first(path, role, 0, out);
}

void strata__npy_free(strata__npy_t *a)
{
    if (!a)
        return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

int strata__data_is_npy(const char *path)
{
    size_t n = path ? strlen(path) : 0;
    return n >= 4 && strcmp(path + n - 4, ".npy") == 0;
}
