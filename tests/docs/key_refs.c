/* Every key the documentation names exists. A reference is "[SECTION] KEY"
 * (`[train] lr_scaling`, `[strategy.mwms] overlap`): in the comments of
 * the INI files of etc/ anywhere, in README.md, the Markdown of docs/ and
 * the plugins' READMEs
 * inside inline code spans (fenced blocks hold error messages such as
 * "[train] unknown key 'batch_sise'", which name no key). Sections that
 * are no table of ours ([launch] of a log line, a third-party plugin's)
 * are not checked.
 *
 *   key_refs SRC PLUGIN_DIR */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "optables.h"

static const optables_t *g_ts;
static int g_refs;

/* "the [cluster] section", "[strategy] and [transport]": a word after the
 * bracket that is no key of any table and has no '_' is prose, not a
 * reference (a misspelt key_with_underscores is still caught). */
static int is_prose(const char *word)
{
    if (strchr(word, '_'))
        return 0;
    for (int i = 0; i < g_ts->n; i++)
        if (optable_key(&g_ts->t[i], word))
            return 0;
    return 1;
}

/* Check every "[sec] key" in text[0, n); `where` names the file:line. */
static void scan(const char *text, size_t n, const char *where)
{
    for (size_t i = 0; i < n; i++) {
        if (text[i] != '[')
            continue;
        size_t j = i + 1;
        while (j < n && (islower((unsigned char)text[j]) || text[j] == '_' ||
                         text[j] == '.' || isdigit((unsigned char)text[j])))
            j++;
        if (j == i + 1 || j + 2 >= n || text[j] != ']' || text[j + 1] != ' ')
            continue;
        size_t k = j + 2, e = k;
        while (e < n && (islower((unsigned char)text[e]) || text[e] == '_' ||
                         isdigit((unsigned char)text[e])))
            e++;
        if (e == k)
            continue;
        char sec[64], key[64];
        snprintf(sec, sizeof sec, "%.*s", (int)(j - i - 1), text + i + 1);
        snprintf(key, sizeof key, "%.*s", (int)(e - k), text + k);
        const optable_t *t = optables_find(g_ts, sec);
        if (!t || !t->opts || is_prose(key))
            continue;
        g_refs++;
        CHECKF(optable_key(t, key) != NULL, "%s: [%s] %s: no such key", where,
               sec, key);
    }
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = len >= 0 ? malloc((size_t)len + 1) : NULL;
    size_t got = s ? fread(s, 1, (size_t)len, f) : 0;
    fclose(f);
    if (s)
        s[got] = '\0';
    return s;
}

/* INI: comment lines only (';' or '#' first). */
static void scan_ini(const char *path)
{
    char *text = read_all(path);
    CHECKF(text != NULL, "%s: cannot read", path);
    int line = 1;
    for (char *p = text; p && *p; line++) {
        size_t len = strcspn(p, "\n");
        if (*p == ';' || *p == '#') {
            char where[2200];
            snprintf(where, sizeof where, "%s:%d", path, line);
            scan(p, len, where);
        }
        p += len + (p[len] == '\n');
    }
    free(text);
}

/* Markdown: inline code spans outside fenced blocks. A span may wrap to
 * the next line, as the docs' filled paragraphs do. */
static void scan_md(const char *path)
{
    char *text = read_all(path);
    if (!text)
        return; /* optional files (a plugin without README) */
    int line = 1, fenced = 0;
    for (char *p = text; *p;) {
        int bol = p == text || p[-1] == '\n';
        if (bol && strncmp(p, "```", 3) == 0) {
            fenced = !fenced;
            p += strcspn(p, "\n");
            continue;
        }
        if (*p == '\n') {
            line++;
            p++;
            continue;
        }
        if (fenced || *p != '`') {
            p++;
            continue;
        }
        char *end = strchr(p + 1, '`');
        if (!end)
            break;
        char where[2200];
        snprintf(where, sizeof where, "%s:%d", path, line);
        /* a span's line break reads as the space it stands for */
        char span[512];
        size_t n = (size_t)(end - p - 1) < sizeof span - 1
                       ? (size_t)(end - p - 1) : sizeof span - 1;
        for (size_t i = 0; i < n; i++)
            span[i] = p[1 + i] == '\n' ? ' ' : p[1 + i];
        scan(span, n, where);
        for (char *q = p + 1; q < end; q++)
            line += *q == '\n';
        p = end + 1;
    }
    free(text);
}

static void scan_dir(const char *dir, const char *suffix, int ini)
{
    DIR *d = opendir(dir);
    CHECKF(d != NULL, "%s: cannot list", dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name), ls = strlen(suffix);
        if (l <= ls || strcmp(e->d_name + l - ls, suffix) != 0)
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%.1000s/%.1000s", dir, e->d_name);
        if (ini)
            scan_ini(path);
        else
            scan_md(path);
    }
    if (d)
        closedir(d);
}

int main(int argc, char **argv)
{
    const char *src = argc > 1 ? argv[1] : getenv("STRATA_SRC");
    const char *dir = argc > 2 ? argv[2] : getenv("STRATA_PLUGIN_PATH");
    if (!src || !dir)
        CHECK_SKIP("usage: key_refs SRC PLUGIN_DIR");
    optables_t ts;
    CHECK(optables_load(&ts, dir) == 0);
    g_ts = &ts;
    char path[2048];
    snprintf(path, sizeof path, "%s/etc", src);
    scan_dir(path, ".ini", 1);
    snprintf(path, sizeof path, "%s/README.md", src);
    scan_md(path);
    snprintf(path, sizeof path, "%s/docs", src);
    scan_dir(path, ".md", 0);
    static const char *const plugins[] = {
        "strategy/mirrored", "strategy/central", "strategy/mwms",
        "strategy/ps", "transport/local", "transport/zmq", "transport/nccl"
    };
    for (size_t i = 0; i < sizeof plugins / sizeof *plugins; i++) {
        snprintf(path, sizeof path, "%s/plugins/%s/README.md", src,
                 plugins[i]);
        scan_md(path);
    }
    /* the scan must see references, or it checks nothing */
    CHECKF(g_refs > 50, "only %d key references found", g_refs);
    printf("%d key references checked\n", g_refs);
    optables_free(&ts);
    return CHECK_DONE();
}
