/* Checkpoint directories: DIR/ckpt-<step>.safetensors naming, rotation,
 * finding the newest good checkpoint, and `strata inspect`. */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "base/fault.h"

#define WHO "ckpt"
#define PREFIX "ckpt-"
#define SUFFIX ".safetensors"
#define TMPTAG ".tmp."

int strata__ckpt_path(const char *dir, int64_t step, char *buf, size_t len)
{
    if (!dir || !buf || step < 0) {
        strata__log(STRATA_LOG_ERROR, WHO, "checkpoint path: invalid arguments");
        return STRATA_EINVAL;
    }
    int n = snprintf(buf, len, "%s/" PREFIX "%010" PRId64 SUFFIX, dir, step);
    if (n < 0 || (size_t)n >= len) {
        strata__log(STRATA_LOG_ERROR, WHO, "checkpoint path in %s: longer than %zu "
                    "bytes", dir, len);
        return STRATA_EINVAL;
    }
    return 0;
}

/* Decimal digits [s, s+n) -> *v (no sign, no overflow). */
static int parse_digits(const char *s, size_t n, int64_t *v)
{
    int64_t x = 0;
    if (n == 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9' || x > (INT64_MAX - (s[i] - '0')) / 10)
            return -1;
        x = x * 10 + (s[i] - '0');
    }
    *v = x;
    return 0;
}

/* "ckpt-<10+ digits>.safetensors" -> step, *part 0; a part of one
 * (parts.c), "ckpt-<digits>.part-<j>-of-<n>.safetensors" -> step, *part
 * 1; with tmp_pid, also the temp name of either, "<that>.tmp.<pid>" or
 * "<that>.tmp.<pid>.<n>" (strata__create_temp) -> step and pid. 0 when
 * the name matches. */
static int parse_name(const char *name, int64_t *step, int *part,
                      int64_t *tmp_pid)
{
    size_t plen = strlen(PREFIX), slen = strlen(SUFFIX);
    if (strncmp(name, PREFIX, plen) != 0)
        return -1;
    const char *d = name + plen, *dot = strchr(d, '.');
    if (!dot || dot - d < 10 || parse_digits(d, (size_t)(dot - d), step) < 0)
        return -1;
    *part = strncmp(dot, ".part-", 6) == 0;
    if (*part) { /* .part-<j>-of-<n> */
        const char *j = dot + 6, *of = strstr(j, "-of-"), *n, *e;
        int64_t x;
        if (!of || parse_digits(j, (size_t)(of - j), &x) < 0)
            return -1;
        n = of + 4;
        e = strchr(n, '.');
        if (!e || parse_digits(n, (size_t)(e - n), &x) < 0)
            return -1;
        dot = e;
    }
    if (strncmp(dot, SUFFIX, slen) != 0)
        return -1;
    const char *rest = dot + slen;
    if (!tmp_pid)
        return *rest ? -1 : 0;
    if (strncmp(rest, TMPTAG, strlen(TMPTAG)) != 0)
        return -1;
    rest += strlen(TMPTAG);
    const char *nth = strchr(rest, '.');
    int64_t n;
    if (nth && parse_digits(nth + 1, strlen(nth + 1), &n) < 0)
        return -1;
    return parse_digits(rest, nth ? (size_t)(nth - rest) : strlen(rest),
                        tmp_pid);
}

struct ent { int64_t step; char *name; };

static int cmp_newest_first(const void *a, const void *b)
{
    const struct ent *x = a, *y = b;
    if (x->step != y->step)
        return x->step > y->step ? -1 : 1;
    return strcmp(x->name, y->name);
}

static void ents_free(struct ent *e, int n)
{
    for (int i = 0; i < n; i++)
        free(e[i].name);
    free(e);
}

enum { MAINS, STALE_TEMPS, PARTS };

/* The checkpoints of dir, newest first; STALE_TEMPS: the temp files of
 * dead writers instead (of checkpoints and of parts); PARTS: the part
 * files. Missing dir: STRATA_ENOENT (not logged). */
static int list_dir(const char *dir, int what, struct ent **out, int *count)
{
    *out = NULL;
    *count = 0;
    DIR *d = STRATA_FAULT(IO) ? NULL : opendir(dir);
    if (!d) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR)
            return STRATA_ENOENT;
        strata__log(STRATA_LOG_ERROR, WHO, "cannot open directory %s: %s", dir,
                    strerror(e));
        return STRATA_EIO;
    }
    struct ent *v = NULL;
    int n = 0, cap = 0, rc = 0;
    struct dirent *de;
    /* readdir's end and its error look alike but for errno. */
    for (;;) {
        errno = 0;
        if (STRATA_FAULT(IO) || !(de = readdir(d))) {
            if (errno)
                rc = STRATA_EIO;
            break;
        }
        int64_t step, pid = 0;
        int part, want_tmp = what == STALE_TEMPS;
        if (parse_name(de->d_name, &step, &part, want_tmp ? &pid : NULL) != 0
            || (what == MAINS && part) || (what == PARTS && !part))
            continue;
        /* A temp file is stale when its writer is gone: not us, and no
         * process has its pid (EPERM: one exists, owned by someone else). */
        if (want_tmp && (pid <= 0 || pid > INT32_MAX || pid == (int64_t)getpid()
                         || kill((pid_t)pid, 0) == 0 || errno != ESRCH))
            continue;
        if (n == cap) {
            int ncap = cap ? 2 * cap : 16;
            struct ent *nv = STRATA_FAULT(ALLOC) ? NULL
                                                 : realloc(v, sizeof *v * (size_t)ncap);
            if (!nv) {
                rc = STRATA_ENOMEM;
                break;
            }
            v = nv;
            cap = ncap;
        }
        v[n].step = step;
        if (STRATA_FAULT(ALLOC) || !(v[n].name = strdup(de->d_name))) {
            rc = STRATA_ENOMEM;
            break;
        }
        n++;
    }
    int e = errno;
    closedir(d);
    if (rc) {
        strata__log(STRATA_LOG_ERROR, WHO, "listing %s: %s", dir,
                    rc == STRATA_EIO ? strerror(e) : "out of memory");
        ents_free(v, n);
        return rc;
    }
    if (n)
        qsort(v, (size_t)n, sizeof *v, cmp_newest_first);
    *out = v;
    *count = n;
    return 0;
}

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = STRATA_FAULT(ALLOC) ? NULL : malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int remove_all(const char *dir, const struct ent *v, int from, int n,
                      const char *what)
{
    int rc = 0;
    assert(from >= 0 && from <= n);
    for (int i = from; i < n; i++) {
        char *p = join(dir, v[i].name);
        if (!p) {
            strata__log(STRATA_LOG_ERROR, WHO, "removing %s %s/%s: out of "
                        "memory", what, dir, v[i].name);
            return STRATA_ENOMEM;
        }
        if ((STRATA_FAULT(IO) || unlink(p) != 0) && errno != ENOENT) {
            strata__log(STRATA_LOG_ERROR, WHO, "cannot remove %s %s: %s", what, p,
                        strerror(errno));
            rc = STRATA_EIO;
        } else
            strata__log(STRATA_LOG_DEBUG, WHO, "removed %s %s", what, p);
        free(p);
    }
    return rc;
}

int strata__ckpt_rotate(const char *dir, int keep)
{
    if (!dir || keep < 0) {
        strata__log(STRATA_LOG_ERROR, WHO, "rotate: invalid arguments (keep %d)", keep);
        return STRATA_EINVAL;
    }
    struct ent *v;
    int n, rc = list_dir(dir, MAINS, &v, &n);
    if (rc == STRATA_ENOENT)
        strata__log(STRATA_LOG_ERROR, WHO, "rotate: no directory %s", dir);
    if (rc)
        return rc;
    if (keep > 0 && n > keep)
        rc = remove_all(dir, v, keep, n, "old checkpoint");
    /* The parts of a checkpoint go with it; parts without one (a writer
     * stopped between its parts and its main file) are stale. */
    int kept = keep > 0 && n > keep ? keep : n;
    struct ent *pv;
    int np, rc3 = list_dir(dir, PARTS, &pv, &np);
    for (int i = 0; i < np && !rc3; i++) {
        int live = 0;
        for (int k = 0; k < kept && !live; k++)
            live = v[k].step == pv[i].step;
        if (!live)
            rc3 = remove_all(dir, pv, i, i + 1, "part of no checkpoint");
    }
    ents_free(pv, np);
    ents_free(v, n);
    if (!rc)
        rc = rc3;
    int rc2 = list_dir(dir, STALE_TEMPS, &v, &n);
    if (!rc2)
        rc2 = remove_all(dir, v, 0, n, "stale temp file");
    ents_free(v, n);
    return rc ? rc : rc2;
}

int strata__ckpt_newest_step(const char *dir, int64_t *step)
{
    struct ent *v;
    int n, rc = list_dir(dir, MAINS, &v, &n);
    if (rc == STRATA_OK && n == 0)
        rc = STRATA_ENOENT;
    if (rc == STRATA_OK)
        *step = v[0].step;
    ents_free(v, n);
    return rc;
}

int strata__ckpt_latest(const char *dir, strata__ckpt_t **out, char *path_out,
                        size_t len)
{
    if (!out)
        return STRATA_EINVAL;
    *out = NULL;
    if (!dir) {
        strata__log(STRATA_LOG_ERROR, WHO, "latest: no directory");
        return STRATA_EINVAL;
    }
    struct ent *v;
    int n, rc = list_dir(dir, MAINS, &v, &n);
    if (rc)
        return rc;
    rc = STRATA_ENOENT;
    for (int i = 0; i < n && rc == STRATA_ENOENT; i++) {
        char *p = join(dir, v[i].name), why[512];
        if (!p) {
            strata__log(STRATA_LOG_ERROR, WHO, "latest in %s: out of memory",
                        dir);
            rc = STRATA_ENOMEM;
            break;
        }
        int r = strata__ckpt_load_quiet(p, out, why, sizeof why);
        if (r == STRATA_ENOMEM) {
            /* Says nothing about the file: not a reason to resume from an
             * older one. */
            strata__log(STRATA_LOG_ERROR, WHO, "%s: %s", p, why);
            rc = r;
        } else if (r == 0 && path_out && strlen(p) >= len) {
            strata__log(STRATA_LOG_ERROR, WHO, "latest: path %s longer than %zu "
                        "bytes", p, len);
            strata__ckpt_free(*out);
            *out = NULL;
            rc = STRATA_EINVAL;
        } else if (r == 0) {
            if (path_out)
                memcpy(path_out, p, strlen(p) + 1);
            rc = 0;
        } else
            strata__log(STRATA_LOG_WARN, WHO, "skipping checkpoint %s: %s; %s", p,
                        why, i + 1 < n ? "trying the previous one"
                                       : "no older checkpoint");
        free(p);
    }
    ents_free(v, n);
    /* Checkpoints there, and none of them valid: not a fresh start. */
    return rc == STRATA_ENOENT && n > 0 ? STRATA_EDATA : rc;
}

/* ---- inspect ------------------------------------------------------------ */

static void put_clean(FILE *f, const char *s)
{
    for (; *s; s++)
        fputc((unsigned char)*s < 0x20 || *s == 0x7F ? '?' : *s, f);
}

static double f16_value(uint16_t h)
{
    int e = (h >> 10) & 0x1F, m = h & 0x3FF;
    double v = e == 0 ? ldexp(m, -24)
             : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
}

/* Element i of a float tensor as a double (data is little-endian, as is
 * every host strata runs on). */
static double element(const strata__tensor_t *x, size_t i)
{
    const unsigned char *p = x->data;
    if (strcmp(x->dtype, "F32") == 0) {
        float v;
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    if (strcmp(x->dtype, "F64") == 0) {
        double v;
        memcpy(&v, p + 8 * i, 8);
        return v;
    }
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    if (strcmp(x->dtype, "F16") == 0)
        return f16_value(h);
    uint32_t u = (uint32_t)h << 16;     /* BF16: the top half of an F32 */
    float v;
    memcpy(&v, &u, 4);
    return v;
}

static void print_stats(FILE *f, const strata__tensor_t *x)
{
    const char *d = x->dtype;
    if (strcmp(d, "F32") && strcmp(d, "F64") && strcmp(d, "F16") && strcmp(d, "BF16"))
        return;
    size_t n = x->nbytes / strata__ckpt_dtype_size(d), nan = 0, inf = 0, fin = 0;
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (size_t i = 0; i < n; i++) {
        double v = element(x, i);
        if (isnan(v))
            nan++;
        else if (isinf(v))
            inf++;
        else {
            fin++;
            sum += v;
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
    }
    if (fin)
        fprintf(f, "  min %.6g max %.6g mean %.6g", lo, hi, sum / (double)fin);
    if (nan)
        fprintf(f, "  %zu nan", nan);
    if (inf)
        fprintf(f, "  %zu inf", inf);
}

int strata__ckpt_inspect(const char *path, FILE *f)
{
    strata__ckpt_t *c;
    int rc = strata__ckpt_read(path, &c);
    if (rc)
        return rc;
    int nt = strata__ckpt_ntensors(c), nm = strata__ckpt_nmeta(c), w = 4;
    for (int i = 0; i < nt; i++) {
        int l = (int)strlen(strata__ckpt_tensor(c, i)->name);
        w = l > w ? (l < 40 ? l : 40) : w;
    }
    fprintf(f, "%s: %d tensor%s, %" PRIu64 " data bytes, header %" PRIu64
            " bytes\n", path, nt, nt == 1 ? "" : "s", strata__ckpt_data_len(c),
            strata__ckpt_header_len(c));
    const char *parts = strata__ckpt_meta(c, "strata.part_count");
    if (parts && !strata__ckpt_meta(c, "strata.part_index"))
        fprintf(f, "its variables and optimizer slots: joined from the %s "
                "part files beside it (ckpt-<step>.part-<i>-of-%s"
                ".safetensors)\n", parts, parts);
    if (nt)
        fprintf(f, "  %-*s  %-7s  %-20s  %12s\n", w, "name", "dtype", "shape", "bytes");
    for (int i = 0; i < nt; i++) {
        const strata__tensor_t *x = strata__ckpt_tensor(c, i);
        char shape[128];
        int k = snprintf(shape, sizeof shape, "[");
        for (int d = 0; d < x->ndim; d++)
            k += snprintf(shape + k, sizeof shape - (size_t)k, "%s%" PRId64,
                          d ? ", " : "", x->shape[d]);
        snprintf(shape + k, sizeof shape - (size_t)k, "]");
        fputs("  ", f);
        put_clean(f, x->name);
        int pad = w - (int)strlen(x->name);
        fprintf(f, "%*s  %-7s  %-20s  %12zu", pad > 0 ? pad : 0, "", x->dtype, shape,
                x->nbytes);
        print_stats(f, x);
        fputc('\n', f);
    }
    fprintf(f, "metadata:%s\n", nm ? "" : " (none)");
    for (int i = 0; i < nm; i++) {
        const strata__meta_t *m = strata__ckpt_meta_at(c, i);
        fputs("  ", f);
        put_clean(f, m->key);
        fputs(" = ", f);
        put_clean(f, m->value);
        fputc('\n', f);
    }
    strata__ckpt_free(c);
    if (fflush(f) != 0 || ferror(f)) {
        strata__log(STRATA_LOG_ERROR, WHO, "inspect %s: cannot write the output", path);
        return STRATA_EIO;
    }
    return 0;
}
