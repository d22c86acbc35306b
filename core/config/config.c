/* Configuration: inih glue, the value store and typed options.
 *
 * Every value is stored as text with its origin ("etc/a.ini:7", "--set",
 * "env STRATA_TRAIN_EPOCHS") and a precedence (default < file < env < CLI).
 * Typed parsing happens late, in strata__cfg_apply, so a message can always
 * name where the offending text came from.
 *
 * Strings handed out (cfg_get, cfg_origin, STRING options) stay valid until
 * cfg_free: a replaced value is parked, not freed. */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/fault.h"
#include "internal.h"

#define WHO "config"

#ifndef STRATA_CFG_MAX_ENTRIES
#define STRATA_CFG_MAX_ENTRIES 4096 /* values in one store, and per file */
#endif

/* Bounds at or beyond this magnitude mean "no bound" in messages. */
#define NO_BOUND 1e18

typedef struct entry {
    char *section, *key, *value, *origin;
    int   prec;
} entry_t;

struct strata__cfg {
    entry_t     *e;
    size_t       n, cap;
    char       **parked;    /* replaced values and origins, freed at the end */
    size_t       nparked, capparked;
    const char **sections;  /* NULL-terminated, point into entries          */
    size_t       nsections, capsections;
};

/* ---- small helpers -------------------------------------------------------- */

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 8;
    while (ncap < need)
        ncap *= 2;
    void *q = STRATA_FAULT(ALLOC) ? NULL : realloc(*p, ncap * elem);
    if (!q)
        return STRATA_ENOMEM;
    *p = q;
    *cap = ncap;
    return 0;
}

static int is_name(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!(islower((unsigned char)*s) || isdigit((unsigned char)*s)
              || *s == '_'))
            return 0;
    return 1;
}

int strata__cfg_section_name(const char *s)
{
    const char *dot = strchr(s, '.');
    if (!dot)
        return is_name(s);
    char head[64];
    size_t n = (size_t)(dot - s);
    if (n == 0 || n >= sizeof head || strchr(dot + 1, '.'))
        return 0;
    memcpy(head, s, n);
    head[n] = '\0';
    /* the plugin part is a plugin name: a-z, 0-9, '_' and '-' */
    for (const char *p = dot + 1; *p; p++)
        if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) ||
              *p == '_' || *p == '-'))
            return 0;
    return is_name(head) && dot[1] != '\0';
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

static entry_t *find(const strata__cfg_t *c, const char *section,
                     const char *key)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->e[i].section, section) == 0
            && strcmp(c->e[i].key, key) == 0)
            return &c->e[i];
    return NULL;
}

static char *dup(const char *s)
{
    return STRATA_FAULT(ALLOC) ? NULL : strdup(s);
}

/* Room for `more` new entries, the values of `more` replaced ones and
 * `more` new sections: what commit() then takes cannot fail. */
static int reserve(strata__cfg_t *c, size_t more)
{
    if (grow((void **)&c->e, &c->cap, c->n + more, sizeof *c->e) != 0 ||
        grow((void **)&c->parked, &c->capparked, c->nparked + 2 * more,
             sizeof *c->parked) != 0 ||
        grow((void **)&c->sections, &c->capsections, c->nsections + more + 1,
             sizeof *c->sections) != 0) {
        strata__log(STRATA_LOG_ERROR, WHO, "out of memory");
        return STRATA_ENOMEM;
    }
    return 0;
}

/* section.key = value, every string malloc'd and now the store's (or
 * freed). The room is reserved (reserve()): this cannot fail. */
static void commit(strata__cfg_t *c, char *section, char *key, char *value,
                   char *origin, int prec)
{
    entry_t *e = find(c, section, key);
    if (e) {
        free(section);
        free(key);
        if (prec < e->prec) {   /* a value of higher precedence stays */
            free(value);
            free(origin);
            return;
        }
        assert(c->nparked + 2 <= c->capparked);
        c->parked[c->nparked++] = e->value;
        c->parked[c->nparked++] = e->origin;
        e->value = value;
        e->origin = origin;
        e->prec = prec;
        return;
    }
    assert(c->n < c->cap && c->nsections + 1 < c->capsections);
    c->e[c->n++] = (entry_t){ section, key, value, origin, prec };
    for (size_t i = 0; i < c->nsections; i++)
        if (strcmp(c->sections[i], section) == 0)
            return;
    c->sections[c->nsections++] = section;
    c->sections[c->nsections] = NULL;
}

/* Record section.key = value unless a value of higher precedence is there.
 * A failure changes nothing. */
static int store(strata__cfg_t *c, const char *section, const char *key,
                 const char *value, const char *origin, int prec)
{
    entry_t *e = find(c, section, key);
    if (e && prec < e->prec)
        return 0;
    if (!e && c->n >= STRATA_CFG_MAX_ENTRIES) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: more than %d keys in all",
                    origin, STRATA_CFG_MAX_ENTRIES);
        return STRATA_ECONFIG;
    }
    if (reserve(c, 1) != 0)
        return STRATA_ENOMEM;
    char *sc = dup(section), *k = dup(key), *v = dup(value), *o = dup(origin);
    if (!sc || !k || !v || !o) {
        free(sc);
        free(k);
        free(v);
        free(o);
        strata__log(STRATA_LOG_ERROR, WHO, "%s: out of memory", origin);
        return STRATA_ENOMEM;
    }
    commit(c, sc, k, v, o, prec);
    return 0;
}

/* ---- the store ------------------------------------------------------------ */

int strata__cfg_new(strata__cfg_t **out)
{
    *out = NULL;
    strata__cfg_t *c = STRATA_FAULT(ALLOC) ? NULL : calloc(1, sizeof *c);
    if (!c || grow((void **)&c->sections, &c->capsections, 1,
                   sizeof *c->sections) != 0) {
        free(c);
        strata__log(STRATA_LOG_ERROR, WHO, "out of memory");
        return STRATA_ENOMEM;
    }
    c->sections[0] = NULL;
    *out = c;
    return 0;
}

void strata__cfg_free(strata__cfg_t *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++) {
        free(c->e[i].section);
        free(c->e[i].key);
        free(c->e[i].value);
        free(c->e[i].origin);
    }
    for (size_t i = 0; i < c->nparked; i++)
        free(c->parked[i]);
    free(c->e);
    free(c->parked);
    free(c->sections);
    free(c);
}

const char *strata__cfg_get(const strata__cfg_t *c, const char *section,
                            const char *key)
{
    const entry_t *e = c && section && key ? find(c, section, key) : NULL;
    return e ? e->value : NULL;
}

/* key NULL: the origin of the section's first value (for "unknown
 * section" messages). */
const char *strata__cfg_origin(const strata__cfg_t *c, const char *section,
                               const char *key)
{
    if (!c || !section)
        return NULL;
    if (key) {
        const entry_t *e = find(c, section, key);
        return e ? e->origin : NULL;
    }
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->e[i].section, section) == 0)
            return c->e[i].origin;
    return NULL;
}

int strata__cfg_entry(const strata__cfg_t *c, const char *section, size_t i,
                      const char **key, const char **value,
                      const char **origin)
{
    for (size_t j = 0; c && j < c->n; j++) {
        const entry_t *e = &c->e[j];
        if (strcmp(e->section, section) != 0 || i-- > 0)
            continue;
        *key = e->key;
        *value = e->value;
        *origin = e->origin;
        return 1;
    }
    return 0;
}

const char *const *strata__cfg_sections(const strata__cfg_t *c)
{
    return c->sections;
}

/* ---- INI files ------------------------------------------------------------ */

/* One key = value of the file being parsed. The whole file is staged and
 * committed only when it parsed cleanly, so a bad file changes nothing. */
typedef struct staged {
    char *section, *key, *value;
    int   line;
} staged_t;

typedef struct parse {
    const char *path;
    FILE       *f;
    int         line;          /* lines read = the line inih is parsing   */
    int         err_line;      /* first error found by reader or handler  */
    char        err[512];
    int         hint_line;     /* first line that looks malformed          */
    const char *hint;
    int         rc;            /* ENOMEM / EIO: stop                       */
    staged_t   *kv;
    size_t      nkv, capkv;
    staged_t   *sec;           /* section headers seen (key, value unused) */
    size_t      nsec, capsec;
} parse_t;

static void parse_error(parse_t *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void parse_error(parse_t *st, const char *fmt, ...)
{
    if (st->err_line)
        return;
    st->err_line = st->line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->err, sizeof st->err, fmt, ap);
    va_end(ap);
}

/* Guess why inih will reject a line; used only to explain its syntax error. */
static const char *syntax_hint(const char *s, int indented)
{
    if (*s == '\0' || *s == '\n' || *s == ';' || *s == '#')
        return NULL;
    if (*s == '[')
        return strchr(s, ']') ? NULL : "missing ']' in section header";
    if (!strpbrk(s, "=:"))
        return indented ? "expected 'key = value' (multi-line values are not "
                          "supported)"
                        : "expected 'key = value'";
    return NULL;
}

/* A section has one header: a second [train] is refused, not merged. */
static void section_header(parse_t *st, const char *line)
{
    const char *end = strchr(line, ']');
    if (!end || st->rc)
        return; /* inih's syntax error, explained by syntax_hint */
    size_t n = (size_t)(end - line - 1);
    for (size_t i = 0; i < st->nsec; i++)
        if (strlen(st->sec[i].section) == n &&
            !strncmp(st->sec[i].section, line + 1, n)) {
            parse_error(st, "[%.*s] again (first at line %d): one header per "
                        "section", (int)n, line + 1, st->sec[i].line);
            return;
        }
    char *name = grow((void **)&st->sec, &st->capsec, st->nsec + 1,
                      sizeof *st->sec) == 0 && !STRATA_FAULT(ALLOC)
                     ? strndup(line + 1, n) : NULL;
    if (!name) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s:%d: out of memory", st->path,
                    st->line);
        st->rc = STRATA_ENOMEM;
        return;
    }
    st->sec[st->nsec++] = (staged_t){ .section = name, .line = st->line };
}

/* fgets for inih that counts lines and never splits one: an overlong line is
 * an error of its own, not two lines. Leading blanks are removed, so an
 * indented "key = value" is a key (inih would read it as a continuation of
 * the previous value). */
static char *read_line(char *str, int num, void *stream)
{
    parse_t *st = stream;
    if (st->rc || num < 3)
        return NULL;
    int ch, any = 0, too_long = 0;
    size_t n = 0, room = (size_t)num - 3; /* as inih: '\r', '\n', NUL */
    if (STRATA_FAULT(IO)) {   /* one point per line read */
        strata__log(STRATA_LOG_ERROR, WHO, "%s: cannot read: %s", st->path,
                    strerror(errno));
        st->rc = STRATA_EIO;
        return NULL;
    }
    size_t nul = 0;  /* column of the first NUL byte + 1 */
    while ((ch = getc(st->f)) != EOF) {
        any = 1;
        if (ch == '\n')
            break;
        if (ch == '\0' && !nul)
            nul = n + 1;
        if (n < room)
            str[n++] = (char)ch;
        else
            too_long = 1;
    }
    if (ferror(st->f)) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: cannot read: %s", st->path,
                    strerror(errno));
        st->rc = STRATA_EIO;
        return NULL;
    }
    if (!any)
        return NULL;
    st->line++;
    str[n] = '\0';
    char *s = str;
    if (st->line == 1 && strncmp(s, "\xEF\xBB\xBF", 3) == 0)
        s += 3; /* UTF-8 byte order mark */
    char *t = s;
    while (*t == ' ' || *t == '\t' || *t == '\r' || *t == '\f' || *t == '\v')
        t++;
    memmove(str, t, strlen(t) + 1);
    if (too_long) {
        parse_error(st, "line too long (more than %d characters)", num - 3);
        str[0] = '\0';
    }
    if (nul) { /* it would end the value there, silently */
        parse_error(st, "a NUL byte at column %zu: not a text file?", nul);
        str[0] = '\0';
    }
    if (str[0] == '[')
        section_header(st, str);
    if (!st->hint_line) {
        const char *h = syntax_hint(str, t != s);
        if (h) {
            st->hint_line = st->line;
            st->hint = h;
        }
    }
    n = strlen(str);
    str[n] = '\n';
    str[n + 1] = '\0';
    return str;
}

static int on_value(void *user, const char *section, const char *name,
                    const char *value)
{
    parse_t *st = user;
    if (st->rc)
        return 0;
    if (!*section) {
        parse_error(st, "key '%s' is outside of any [section]", name);
        return 0;
    }
    if (!*name) {
        parse_error(st, "[%s] missing key name before '='", section);
        return 0;
    }
    for (size_t i = 0; i < st->nkv; i++)
        if (strcmp(st->kv[i].section, section) == 0
            && strcmp(st->kv[i].key, name) == 0) {
            parse_error(st, "[%s] duplicate key '%s' (first set at line %d)",
                        section, name, st->kv[i].line);
            return 0;
        }
    if (st->nkv >= STRATA_CFG_MAX_ENTRIES) {
        parse_error(st, "more than %d keys in one file",
                    STRATA_CFG_MAX_ENTRIES);
        return 0;
    }
    if (grow((void **)&st->kv, &st->capkv, st->nkv + 1, sizeof *st->kv) != 0)
        goto nomem;
    staged_t kv = { dup(section), dup(name), dup(value), st->line };
    if (!kv.section || !kv.key || !kv.value) {
        free(kv.section);
        free(kv.key);
        free(kv.value);
        goto nomem;
    }
    st->kv[st->nkv++] = kv;
    return 1;
nomem:
    strata__log(STRATA_LOG_ERROR, WHO, "%s:%d: out of memory", st->path,
                st->line);
    st->rc = STRATA_ENOMEM;
    return 0;
}

int strata__cfg_load_file(strata__cfg_t *c, const char *path)
{
    parse_t st = { .path = path };
    st.f = STRATA_FAULT(IO) ? NULL : fopen(path, "r");
    if (!st.f) {
        int e = errno;
        strata__log(STRATA_LOG_ERROR, WHO, "%s: cannot open: %s", path,
                    strerror(e));
        return e == ENOENT || e == ENOTDIR ? STRATA_ENOENT : STRATA_EIO;
    }
    int first = ini_parse_stream(read_line, &st, on_value, &st);
    fclose(st.f);

    int rc = st.rc;
    if (rc == 0 && first < 0) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: out of memory", path);
        rc = STRATA_ENOMEM;
    }
    if (rc == 0 && (first > 0 || st.err_line > 0)) {
        if (st.err_line > 0 && (first <= 0 || st.err_line <= first))
            strata__log(STRATA_LOG_ERROR, WHO, "%s:%d: %s", path, st.err_line,
                        st.err);
        else
            strata__log(STRATA_LOG_ERROR, WHO, "%s:%d: syntax error%s%s", path,
                        first, st.hint_line == first ? ": " : "",
                        st.hint_line == first ? st.hint : "");
        rc = STRATA_ECONFIG;
    }
    /* Commit: every allocation first, then nothing that can fail, so that
     * a failure leaves the store as it was. */
    char **origins = NULL;
    size_t fresh = 0;
    for (size_t i = 0; i < st.nkv && rc == 0; i++)
        fresh += !find(c, st.kv[i].section, st.kv[i].key);
    if (rc == 0 && c->n + fresh > STRATA_CFG_MAX_ENTRIES) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: more than %d keys in all",
                    path, STRATA_CFG_MAX_ENTRIES);
        rc = STRATA_ECONFIG;
    }
    if (rc == 0 && st.nkv)
        rc = reserve(c, st.nkv);               /* logs its failure */
    if (rc == 0 && st.nkv) {
        int ok = !STRATA_FAULT(ALLOC) &&
                 (origins = calloc(st.nkv, sizeof *origins)) != NULL;
        for (size_t i = 0; ok && i < st.nkv; i++) {
            char origin[4096 + 16];
            snprintf(origin, sizeof origin, "%s:%d", path, st.kv[i].line);
            ok = (origins[i] = dup(origin)) != NULL;
        }
        if (!ok) {
            strata__log(STRATA_LOG_ERROR, WHO, "%s: out of memory", path);
            rc = STRATA_ENOMEM;
        }
    }
    for (size_t i = 0; i < st.nkv && rc == 0; i++) {
        commit(c, st.kv[i].section, st.kv[i].key, st.kv[i].value, origins[i],
               STRATA__CFG_FILE);
        st.kv[i].section = st.kv[i].key = st.kv[i].value = origins[i] = NULL;
    }
    for (size_t i = 0; origins && i < st.nkv; i++)
        free(origins[i]);
    free(origins);
    for (size_t i = 0; i < st.nkv; i++) {
        free(st.kv[i].section);
        free(st.kv[i].key);
        free(st.kv[i].value);
    }
    free(st.kv);
    for (size_t i = 0; i < st.nsec; i++)
        free(st.sec[i].section);
    free(st.sec);
    return rc;
}

/* ---- environment and command line ----------------------------------------- */

int strata__cfg_load_env_in(strata__cfg_t *c, char *const *envp,
                            const strata__section_t *sections)
{
    for (; envp && *envp; envp++) {
        const char *ent = *envp, *eq = strchr(ent, '=');
        if (!eq || strncmp(ent, "STRATA_", 7) != 0)
            continue;
        const char *rest = ent + 7;
        size_t nlen = (size_t)(eq - rest);
        for (const strata__section_t *s = sections; s->name; s++) {
            size_t sl = strlen(s->name);
            if (nlen <= sl + 1 || rest[sl] != '_'
                || strncasecmp(rest, s->name, sl) != 0)
                continue;
            char name[256], key[256];
            size_t kl = nlen - sl - 1;
            snprintf(name, sizeof name, "env %.*s", (int)(eq - ent), ent);
            if (kl >= sizeof key) {
                strata__log(STRATA_LOG_ERROR, WHO, "%s: key name too long",
                            name);
                return STRATA_ECONFIG;
            }
            for (size_t i = 0; i < kl; i++)
                key[i] = (char)tolower((unsigned char)rest[sl + 1 + i]);
            key[kl] = '\0';
            if (!is_name(key)) {
                strata__log(STRATA_LOG_ERROR, WHO,
                            "%s: [%s] invalid key name '%s' (use letters, "
                            "digits and '_')", name, s->name, key);
                return STRATA_ECONFIG;
            }
            char *value = dup(eq + 1);
            if (!value) {
                strata__log(STRATA_LOG_ERROR, WHO, "%s: out of memory", name);
                return STRATA_ENOMEM;
            }
            int rc = store(c, s->name, key, trim(value), name,
                           STRATA__CFG_ENV);
            free(value);
            if (rc != 0)
                return rc;
            break;
        }
    }
    return 0;
}

int strata__cfg_set(strata__cfg_t *c, const char *assignment, int prec,
                    const char *origin)
{
    if (!origin)
        origin = "--set";
    if (!assignment) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: no assignment", origin);
        return STRATA_EINVAL;
    }
    char *buf = dup(assignment);
    if (!buf) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: out of memory", origin);
        return STRATA_ENOMEM;
    }
    char *eq = strchr(buf, '=');
    char *lhs = buf, *dot = NULL, *value = NULL;
    if (eq) {
        *eq = '\0';
        value = trim(eq + 1);
        lhs = trim(buf);
        dot = strrchr(lhs, '.');   /* the key follows the last dot */
    }
    if (dot)
        *dot = '\0';
    if (!eq || !dot || !strata__cfg_section_name(lhs) || !is_name(dot + 1)) {
        strata__log(STRATA_LOG_ERROR, WHO,
                    "%s: invalid assignment '%s': expected section.key=value "
                    "or section.plugin.key=value (names of lower-case "
                    "letters, digits and '_')", origin, assignment);
        free(buf);
        return STRATA_ECONFIG;
    }
    int rc = store(c, lhs, dot + 1, value, origin, prec);
    free(buf);
    return rc;
}

/* ---- typed options ---------------------------------------------------------- */

/* Shortest text that reads back as v ("0.001", "1e-12", "1000000"). */
static void fmt_num(double v, char *buf, size_t n)
{
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(buf, n, "%.0f", v);
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

/* An option is bounded unless min > max or both are 0 (the value a
 * designated initializer leaves): [min, max] inclusive. */
static int bounded(const strata_option_t *o)
{
    return o->min < o->max || (o->min == o->max && o->min != 0.0);
}

/* " in [a, b]", " >= a", " <= b" or "". */
static void fmt_range(const strata_option_t *o, char *buf, size_t n)
{
    char lo[40], hi[40];
    buf[0] = '\0';
    if (!bounded(o))
        return;
    int has_lo = o->min > -NO_BOUND, has_hi = o->max < NO_BOUND;
    fmt_num(o->min, lo, sizeof lo);
    fmt_num(o->max, hi, sizeof hi);
    if (has_lo && has_hi)
        snprintf(buf, n, " in [%s, %s]", lo, hi);
    else if (has_lo)
        snprintf(buf, n, " >= %s", lo);
    else if (has_hi)
        snprintf(buf, n, " <= %s", hi);
}

static int out_of_range(const strata_option_t *o, double v)
{
    return bounded(o) && (v < o->min || v > o->max);
}

static int parse_int(const char *s, int64_t *out)
{
    if (!(isdigit((unsigned char)*s)
          || ((*s == '-' || *s == '+') && isdigit((unsigned char)s[1]))))
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE || *end != '\0')
        return -1;
    *out = (int64_t)v;
    return 0;
}

/* "4096", "64K", "64KiB", "4M", "1GB": powers of 1024. */
static int parse_size(const char *s, int64_t *out)
{
    static const struct { const char *sfx; int64_t mul; } k_sfx[] = {
        { "", 1 },           { "b", 1 },
        { "k", 1 << 10 },    { "kb", 1 << 10 },    { "kib", 1 << 10 },
        { "m", 1 << 20 },    { "mb", 1 << 20 },    { "mib", 1 << 20 },
        { "g", 1 << 30 },    { "gb", 1 << 30 },    { "gib", 1 << 30 },
    };
    if (!isdigit((unsigned char)*s))
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE)
        return -1;
    while (*end == ' ' || *end == '\t')
        end++;
    for (size_t i = 0; i < sizeof k_sfx / sizeof *k_sfx; i++)
        if (strcasecmp(end, k_sfx[i].sfx) == 0) {
            if (v > INT64_MAX / k_sfx[i].mul)
                return -1;
            *out = (int64_t)v * k_sfx[i].mul;
            return 0;
        }
    return -1;
}

static int parse_bool(const char *s, int *out)
{
    static const char *const k_true[] = { "true", "yes", "on", "1" };
    static const char *const k_false[] = { "false", "no", "off", "0" };
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(s, k_true[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcasecmp(s, k_false[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    return -1;
}

/* Index of s in "a|b|c", or -1. */
static int parse_enum(const char *choices, const char *s)
{
    size_t len = strlen(s);
    int i = 0;
    for (const char *p = choices; p; i++) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && strncmp(p, s, n) == 0)
            return i;
        p = bar ? bar + 1 : NULL;
    }
    return -1;
}

/* What a value of option `o` must look like: "expected an integer in [1, 5]". */
static void expectation(const strata_option_t *o, char *why, size_t whylen)
{
    char range[100];
    fmt_range(o, range, sizeof range);
    switch (o->type) {
    case STRATA_OPT_INT:
        snprintf(why, whylen, "expected an integer%s", range);
        break;
    case STRATA_OPT_FLOAT:
        snprintf(why, whylen, "expected a number%s", range);
        break;
    case STRATA_OPT_BOOL:
        snprintf(why, whylen,
                 "expected a boolean (true/false, yes/no, on/off, 1/0)");
        break;
    case STRATA_OPT_STRING:
        snprintf(why, whylen, "expected a string");
        break;
    case STRATA_OPT_ENUM: {
        int n = snprintf(why, whylen, "expected one of: ");
        for (const char *p = o->choices ? o->choices : "";
             *p && n >= 0 && (size_t)n + 3 < whylen; p++)
            n += *p == '|' ? snprintf(why + n, whylen - (size_t)n, ", ")
                           : snprintf(why + n, whylen - (size_t)n, "%c", *p);
        break;
    }
    case STRATA_OPT_SIZE:
        snprintf(why, whylen,
                 "expected a size%s, in bytes or with a K, M or G suffix",
                 range);
        break;
    default:
        snprintf(why, whylen, "option '%s' has unknown type %u",
                 o->key ? o->key : "?", (unsigned)o->type);
    }
}

/* Writes the value at `dst`, the member itself (struct + o->offset). STRING
 * stores `text` itself: it must outlive the struct. On error `why` says what
 * was expected and dst is unchanged. */
int strata__opt_parse(const strata_option_t *o, const char *text, void *dst,
                      char *why, size_t whylen)
{
    int64_t i64;
    double f;
    int i;
    switch (o->type) {
    case STRATA_OPT_INT:
        if (parse_int(text, &i64) != 0 || out_of_range(o, (double)i64))
            break;
        memcpy(dst, &i64, sizeof i64);
        return 0;
    case STRATA_OPT_FLOAT: {
        char *end = NULL;
        f = *text ? strtod(text, &end) : NAN;
        if (!*text || *end != '\0' || !isfinite(f) || out_of_range(o, f))
            break;
        memcpy(dst, &f, sizeof f);
        return 0;
    }
    case STRATA_OPT_BOOL:
        if (parse_bool(text, &i) != 0)
            break;
        memcpy(dst, &i, sizeof i);
        return 0;
    case STRATA_OPT_STRING:
        memcpy(dst, &text, sizeof text);
        return 0;
    case STRATA_OPT_ENUM:
        if ((i = o->choices ? parse_enum(o->choices, text) : -1) < 0)
            break;
        memcpy(dst, &i, sizeof i);
        return 0;
    case STRATA_OPT_SIZE:
        if (parse_size(text, &i64) != 0 || out_of_range(o, (double)i64))
            break;
        memcpy(dst, &i64, sizeof i64);
        return 0;
    default:
        expectation(o, why, whylen);
        return STRATA_EINVAL;
    }
    expectation(o, why, whylen);
    return STRATA_ECONFIG;
}

/* "*" in also_valid: every key is valid here (see strata__cfg_apply). */
static int listed(const char *const *list, const char *key)
{
    for (; list && *list; list++)
        if (strcmp(*list, "*") == 0 || strcmp(*list, key) == 0)
            return 1;
    return 0;
}

static void unknown_key(const entry_t *e, const strata_option_t *opts,
                        const char *const *also_valid)
{
    const char *best = NULL;
    int bestd = 0;
    size_t len = strlen(e->key);
    int limit = len / 3 > 2 ? (int)(len / 3) : 2;
    char valid[1024];
    size_t n = 0;
    valid[0] = '\0';
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0;; i++) {
            const char *k = pass == 0 ? (opts ? opts[i].key : NULL)
                                      : (also_valid ? also_valid[i] : NULL);
            if (!k)
                break;
            int d = strata__edit_distance(e->key, k);
            if (d <= limit && (!best || d < bestd)) {
                best = k;
                bestd = d;
            }
            if (n < sizeof valid - 1) {
                int w = snprintf(valid + n, sizeof valid - n, "%s%s",
                                 n ? ", " : "", k);
                n = w < 0 ? sizeof valid - 1 : n + (size_t)w;
            }
        }
    }
    if (best)
        strata__log(STRATA_LOG_ERROR, WHO,
                    "%s: [%s] unknown key '%s'; did you mean '%s'?", e->origin,
                    e->section, e->key, best);
    else if (n)
        strata__log(STRATA_LOG_ERROR, WHO,
                    "%s: [%s] unknown key '%s'; valid keys: %s", e->origin,
                    e->section, e->key, valid);
    else
        strata__log(STRATA_LOG_ERROR, WHO,
                    "%s: [%s] unknown key '%s'; this section takes no keys",
                    e->origin, e->section, e->key);
}

/* also_valid may hold "*": then any key without an option is accepted, for
 * sections whose other keys belong to a plugin and are checked later
 * against its own table ([strategy], [transport]). */
int strata__cfg_apply(const strata__cfg_t *c, const char *section,
                      const strata_option_t *opts, void *dst,
                      const char *const *also_valid)
{
    char why[512];
    for (const strata_option_t *o = opts; o && o->key; o++)
        if (o->def && strata__opt_parse(o, o->def, (char *)dst + o->offset,
                                        why, sizeof why) != 0) {
            strata__log(STRATA_LOG_ERROR, WHO,
                        "[%s] %s: invalid built-in default '%s': %s", section,
                        o->key, o->def, why);
            return STRATA_EINTERNAL;
        }
    int rc = strata__cfg_apply_keys(c, section, opts, dst, also_valid, 1);
    for (const strata_option_t *o = opts; rc == 0 && o && o->key; o++)
        if (!o->def && !find(c, section, o->key)) {
            expectation(o, why, sizeof why);
            strata__log(STRATA_LOG_ERROR, WHO,
                        "[%s] missing required key '%s' (%s)", section, o->key,
                        why);
            return STRATA_ECONFIG;
        }
    return rc;
}

void strata__cfg_deprecated(const strata__cfg_t *c, const char *section,
                            const char *const *keep, const char *where)
{
    for (size_t i = 0; i < c->n; i++) {
        const entry_t *e = &c->e[i];
        if (strcmp(e->section, section) == 0 && !listed(keep, e->key))
            strata__log(STRATA_LOG_WARN, WHO,
                        "%s: [%s] %s: plugin keys in [%s] are deprecated; "
                        "write them in %s", e->origin, section, e->key,
                        section, where);
    }
}

int strata__cfg_outranks(const strata__cfg_t *c, const char *section,
                         const char *other, const char *key)
{
    const entry_t *e = find(c, section, key), *f = find(c, other, key);
    return e && f && e->prec > f->prec;
}

int strata__cfg_apply_outranking(const strata__cfg_t *c, const char *section,
                                 const char *other,
                                 const strata_option_t *opts, void *dst)
{
    char why[512];
    for (const strata_option_t *o = opts; o && o->key; o++) {
        if (!strata__cfg_outranks(c, section, other, o->key))
            continue;
        const entry_t *e = find(c, section, o->key);
        if (strata__opt_parse(o, e->value, (char *)dst + o->offset, why,
                              sizeof why) != 0) {
            strata__log(STRATA_LOG_ERROR, WHO, "%s: [%s] %s = '%s': %s",
                        e->origin, section, e->key, e->value, why);
            return STRATA_ECONFIG;
        }
    }
    return STRATA_OK;
}

int strata__cfg_apply_keys(const strata__cfg_t *c, const char *section,
                           const strata_option_t *opts, void *dst,
                           const char *const *also_valid, int strict)
{
    char why[512];
    for (size_t i = 0; i < c->n; i++) {
        const entry_t *e = &c->e[i];
        if (strcmp(e->section, section) != 0)
            continue;
        const strata_option_t *o = opts;
        while (o && o->key && strcmp(o->key, e->key) != 0)
            o++;
        if (o && o->key) {
            if (strata__opt_parse(o, e->value, (char *)dst + o->offset, why,
                                  sizeof why) != 0) {
                strata__log(STRATA_LOG_ERROR, WHO, "%s: [%s] %s = '%s': %s",
                            e->origin, section, e->key, e->value, why);
                return STRATA_ECONFIG;
            }
        } else if (strict && !listed(also_valid, e->key)) {
            unknown_key(e, opts, also_valid);
            return STRATA_ECONFIG;
        }
    }
    return 0;
}
