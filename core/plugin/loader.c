/* Plugin loader: find <name>.so along a search path, refuse it before
 * dlopen when others could have written it (unless [plugins] trust_path),
 * dlopen it and check its header before the core touches any entry (rules
 * 1-4, 11, 14 of STYLE.md). Every refusal is one log line that names the
 * file and both values. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "base/trustdir.h"

#ifndef STRATA_PLUGIN_DIR
#error "STRATA_PLUGIN_DIR (the install plugin dir) comes from core/CMakeLists.txt"
#endif
#ifndef STRATA_PLUGIN_RELDIR
#error "STRATA_PLUGIN_RELDIR (lib/strata/plugins) comes from core/CMakeLists.txt"
#endif
#ifndef STRATA_PLUGIN_LIBRELDIR
#error "STRATA_PLUGIN_LIBRELDIR (strata/plugins) comes from core/CMakeLists.txt"
#endif

#define WHO "loader"
#define NAME_MAX_LEN (sizeof(((strata__plugin_t *)0)->name) - 1)
/* A directory is input too: bound what one listing may allocate. */
#define MAX_SO_PER_DIR 1024

const char *strata__kind_name(uint32_t kind)
{
    switch (kind) {
    case STRATA_KIND_STRATEGY:  return "strategy";
    case STRATA_KIND_TRANSPORT: return "transport";
    default:                    return "unknown";
    }
}

static int valid_name(const char *s)
{
    size_t n = 0;
    if (!s)
        return 0;
    for (; s[n]; n++)
        if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9')
              || s[n] == '_' || s[n] == '-'))
            return 0;
    return n > 0 && n <= NAME_MAX_LEN;
}

/* ---- a growable string; `oom` sticks once an allocation failed --------- */

struct sbuf { char *s; size_t len, cap; int oom; };

static void sb_add(struct sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 128;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

/* ---- search path ------------------------------------------------------- */

/* Next non-empty entry of a ':'-separated list: its start, length in *n;
 * NULL at the end. */
static const char *path_next(const char **cur, size_t *n)
{
    const char *p = *cur;
    while (p && *p) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        *cur = end ? end + 1 : NULL;
        if (len > 0) {
            *n = len;
            return p;
        }
        p = *cur;
    }
    *cur = NULL;
    return NULL;
}

static int path_has(const char *list, const char *dir, size_t n)
{
    const char *cur = list, *e;
    size_t len;
    while ((e = path_next(&cur, &len)) != NULL)
        if (len == n && memcmp(e, dir, n) == 0)
            return 1;
    return 0;
}

/* Append one dir, trimmed of blanks and trailing '/', unless empty or
 * already present ("a/" and "a" are the same dir). */
static void path_add_dir(struct sbuf *b, const char *dir, size_t n)
{
    while (n > 0 && (*dir == ' ' || *dir == '\t')) {
        dir++;
        n--;
    }
    while (n > 0 && (dir[n - 1] == ' ' || dir[n - 1] == '\t'))
        n--;
    while (n > 1 && dir[n - 1] == '/')
        n--;
    if (n == 0 || path_has(b->s, dir, n))
        return;
    if (b->len > 0)
        sb_add(b, ":", 1);
    sb_add(b, dir, n);
}

static void path_add_list(struct sbuf *b, const char *list)
{
    const char *cur = list, *e;
    size_t n;
    while ((e = path_next(&cur, &n)) != NULL)
        path_add_dir(b, e, n);
}

/* <prefix>/lib/strata/plugins where the binary is <prefix>/<bindir>/exe, so
 * the build tree (which mirrors the install tree) and a relocated install
 * both find their own plugins. */
static void path_add_exe_relative(struct sbuf *b)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return;
    exe[n] = '\0';
    for (int up = 0; up < 2; up++) {        /* drop the file, then its dir */
        char *slash = strrchr(exe, '/');
        if (!slash)
            return;
        *slash = '\0';
    }
    char dir[PATH_MAX + sizeof STRATA_PLUGIN_RELDIR + 1];
    int len = snprintf(dir, sizeof dir, "%s/%s", exe, STRATA_PLUGIN_RELDIR);
    if (len > 0 && (size_t)len < sizeof dir)
        path_add_dir(b, dir, (size_t)len);
}

/* <dir of libstrata>/strata/plugins: the plugins installed with this
 * library, whatever program loaded it (python, an embedder's binary: their
 * own directory says nothing of where libstrata lives). dladdr on a
 * function of the library names the file it was mapped from; linked
 * statically, that is the executable, and the directory is simply absent. */
static void path_add_lib_relative(struct sbuf *b)
{
    Dl_info info;
    char lib[PATH_MAX];
    /* the name dlopen was given, perhaps relative to the cwd of then */
    if (dladdr((void *)(uintptr_t)&path_add_lib_relative, &info) == 0 ||
        !info.dli_fname || !realpath(info.dli_fname, lib))
        return;
    const char *slash = strrchr(lib, '/');
    char dir[PATH_MAX + sizeof STRATA_PLUGIN_LIBRELDIR + 1];
    int len = snprintf(dir, sizeof dir, "%.*s/%s", (int)(slash - lib), lib,
                       STRATA_PLUGIN_LIBRELDIR);
    if (len > 0 && (size_t)len < sizeof dir)
        path_add_dir(b, dir, (size_t)len);
}

char *strata__plugin_search_path(const char *ini_path)
{
    struct sbuf b = { 0 };
    sb_add(&b, "", 0);                       /* never return NULL for "" */
    if (ini_path)
        path_add_list(&b, ini_path);
    const char *env = getenv("STRATA_PLUGIN_PATH");
    if (env)
        path_add_list(&b, env);
    path_add_lib_relative(&b);
    path_add_exe_relative(&b);
    path_add_dir(&b, STRATA_PLUGIN_DIR, strlen(STRATA_PLUGIN_DIR));
    if (b.oom) {
        free(b.s);
        strata__log(STRATA_LOG_ERROR, WHO, "out of memory building the plugin search path");
        return NULL;
    }
    return b.s;
}

/* "<dir>/<stem>.so", malloc'd. */
static char *join_so(const char *dir, size_t n, const char *stem)
{
    size_t len = n + 1 + strlen(stem) + 3 + 1;
    char *p = malloc(len);
    if (p)
        snprintf(p, len, "%.*s/%s.so", (int)n, dir, stem);
    return p;
}

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* ---- directory listing ------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* Stems of the regular *.so files of `dir`, sorted. A missing dir is an
 * empty list. Returns 0 or STRATA_ENOMEM. */
static int list_so(const char *dir, size_t dn, char ***out, size_t *nout)
{
    char path[PATH_MAX];
    char **v = NULL;
    size_t n = 0;
    *out = NULL;
    *nout = 0;
    if (dn >= sizeof path)
        return 0;
    memcpy(path, dir, dn);
    path[dn] = '\0';
    DIR *d = opendir(path);
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len <= 3 || e->d_name[0] == '.' || strcmp(e->d_name + len - 3, ".so") != 0)
            continue;
        if (n == MAX_SO_PER_DIR) {
            strata__log(STRATA_LOG_WARN, WHO, "%s: more than %d plugins, ignoring the rest",
                        path, MAX_SO_PER_DIR);
            break;
        }
        char *stem = strndup(e->d_name, len - 3);
        char *full = stem ? join_so(path, dn, stem) : NULL;
        if (!full) {
            free(stem);
            goto oom;
        }
        int keep = is_file(full);            /* follows links; no dirs */
        free(full);
        if (!keep) {
            free(stem);
            continue;
        }
        if (n % 16 == 0) {
            char **nv = realloc(v, (n + 16) * sizeof *v);
            if (!nv) {
                free(stem);
                goto oom;
            }
            v = nv;
        }
        v[n++] = stem;
    }
    closedir(d);
    if (n > 1)
        qsort(v, n, sizeof *v, cmp_str);
    *out = v;
    *nout = n;
    return 0;
oom:
    closedir(d);
    free_list(v, n);
    strata__log(STRATA_LOG_ERROR, WHO, "out of memory listing %s", path);
    return STRATA_ENOMEM;
}

/* The plugin file along the path whose stem is closest to `name`, if close
 * enough to be a typo; "" otherwise. */
static void suggest(const char *name, const char *search_path, char *best, size_t len)
{
    const char *cur = search_path, *e;
    size_t n;
    int best_d = 3;                          /* suggest at distance 1 or 2 */
    best[0] = '\0';
    while ((e = path_next(&cur, &n)) != NULL) {
        char **v;
        size_t nv;
        if (list_so(e, n, &v, &nv) != 0)
            return;
        for (size_t i = 0; i < nv; i++) {
            int d = strata__edit_distance(name, v[i]);
            if (d > 0 && d < best_d && (size_t)d < strlen(name)) {
                best_d = d;
                snprintf(best, len, "%s", v[i]);
            }
        }
        free_list(v, nv);
    }
}

/* ---- trust: who could have written the file (cf. OpenSSH StrictModes) -- */

/* `p`, the plugin `path` itself (`what` NULL) or the directory `what`
 * names, must be owned by root or the effective uid and writable by no one
 * else. */
static int trusted(const char *path, const char *what, const char *p,
                   int level)
{
    char subj[PATH_MAX + 40];
    if (what)
        snprintf(subj, sizeof subj, "%s %s", what, p);
    else
        snprintf(subj, sizeof subj, "it");
    struct stat st;
    if (stat(p, &st) != 0) {
        strata__log(level, WHO, "%s: not loaded: cannot stat %s: %s", path,
                    subj, strerror(errno));
        return STRATA_EUNTRUSTED;
    }
    uid_t me = geteuid();
    if (st.st_uid != 0 && st.st_uid != me) {
        strata__log(level, WHO, "%s: not loaded: %s is owned by uid %u, "
                    "neither root nor you (uid %u): chown it to one of them, "
                    "or set [plugins] trust_path = yes to load it anyway",
                    path, subj, (unsigned)st.st_uid, (unsigned)me);
        return STRATA_EUNTRUSTED;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        strata__log(level, WHO, "%s: not loaded: %s is %s-writable (mode "
                    "%04o), so others could have replaced it: chmod go-w %s, "
                    "or set [plugins] trust_path = yes to load it anyway",
                    path, subj, st.st_mode & S_IWOTH ? "world" : "group",
                    (unsigned)(st.st_mode & 07777), p);
        return STRATA_EUNTRUSTED;
    }
    return 0;
}

/* Every directory above `dir` up to / (base/trustdir.h; `dir` itself was
 * checked by trusted()): `what` names `dir` for the log line. */
static int trusted_dirs(const char *path, const char *what, const char *dir,
                        int level)
{
    strata__untrusted_t bad;
    if (strata__trust_dirs(dir, &bad) == 0)
        return 0;
    char why[2 * PATH_MAX + 200];
    strata__log(level, WHO, "%s: not loaded: above %s: %s, or set [plugins] "
                "trust_path = yes to load it anyway", path, what,
                strata__untrusted_why(&bad, why, sizeof why));
    return STRATA_EUNTRUSTED;
}

/* The file, the directory that holds it and every one above it and, when
 * it is a symbolic link, the directories of its target too. */
static int check_trust(const char *path, int level)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    const char *d = dirname(dir); /* "." when path has no slash */
    int rc = trusted(path, NULL, path, level);
    if (rc == 0)
        rc = trusted(path, "its directory", d, level);
    if (rc == 0)
        rc = trusted_dirs(path, "its directory", d, level);
    struct stat st;
    if (rc == 0 && lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
        char *real = realpath(path, NULL);
        if (!real) {
            strata__log(level, WHO, "%s: not loaded: cannot resolve the "
                        "link: %s", path, strerror(errno));
            return STRATA_EUNTRUSTED;
        }
        snprintf(dir, sizeof dir, "%s", real);
        free(real);
        d = dirname(dir);
        rc = trusted(path, "the directory of its target", d, level);
        if (rc == 0)
            rc = trusted_dirs(path, "the directory of its target", d, level);
    }
    return rc;
}

/* ---- checking one file -------------------------------------------------- */

/* The vtable as each major first defined it: a plugin that declares less is
 * broken. */
#define V1_0_SIZE (offsetof(strata_plugin_v1_t, ctl) + \
                   sizeof(((strata_plugin_v1_t *)0)->ctl))
#define V2_0_SIZE (offsetof(strata_plugin_v2_t, placed) + \
                   sizeof(((strata_plugin_v2_t *)0)->placed))
/* STRATA_HAS for an ABI 1 table. */
#define V1_HAS(p, m)                                                         \
    ((p)->hdr.struct_size >= offsetof(strata_plugin_v1_t, m) + sizeof((p)->m) \
     && (p)->m != NULL)

struct probe {
    void *dl;                      /* dlopen handle, NULL if it did not load */
    const strata_plugin_header_t *hdr; /* of the symbol found, or NULL       */
    const void *sym;               /* strata_plugin_v2 or strata_plugin_v1   */
    const char *sym_name;
    int sym_major;                 /* 2 or 1: which symbol it exports        */
    int major, minor;              /* ABI the file declares; -1 = unknown   */
    strata_plugin_v2_t table;      /* its entries at the ABI 2 layout        */
};

/* Bytes of the ELF symbol at `addr`, 0 when unknown. */
static size_t symbol_size(const void *addr)
{
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (dladdr1(addr, &info, (void **)&sym, RTLD_DL_SYMENT) && sym)
        return (size_t)sym->st_size;
    return 0;
}

/* dlerror() usually starts with the path again: drop it. */
static const char *strip_path(const char *msg, const char *path)
{
    size_t n = strlen(path);
    if (msg && strncmp(msg, path, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ')
        return msg + n + 2;
    return msg ? msg : "unknown dlopen error";
}

/* The plugin's entries at the ABI 2 layout: a v2 table as far as the plugin
 * declared it, a v1 table member by member (its init stays NULL: the core
 * calls it through the v1 adapter). */
static void normalize(struct probe *pr)
{
    strata_plugin_v2_t *t = &pr->table;
    memset(t, 0, sizeof *t);
    if (pr->sym_major == 2) {
        size_t n = pr->hdr->struct_size < sizeof *t ? pr->hdr->struct_size
                                                    : sizeof *t;
        memcpy(t, pr->sym, n);
    } else {
        const strata_plugin_v1_t *v = pr->sym;
        t->hdr = v->hdr;
        t->options = v->options;
        t->cfg_size = v->cfg_size;
        t->var_state_size = v->var_state_size;
        t->fini = v->fini;
        t->create_var = v->create_var;
        t->reduce = v->reduce;
        t->update = v->update;
        t->ctl = v->ctl;
        t->drive = V1_HAS(v, drive) ? v->drive : NULL;
        t->next_step = V1_HAS(v, next_step) ? v->next_step : NULL;
        t->send = V1_HAS(v, send) ? v->send : NULL;
        t->recv = V1_HAS(v, recv) ? v->recv : NULL;
        t->placed = V1_HAS(v, placed) ? v->placed : NULL;
    }
    t->hdr.struct_size = sizeof *t;
}

/* Find the entry symbol, newest major first. Logs and returns STRATA_EABI
 * when there is none this core speaks, naming the ones there are. */
static int find_symbol(const char *path, int level, struct probe *pr)
{
    static const struct { const char *name; int major; } k_syms[] = {
        { STRATA_PLUGIN_SYMBOL, 2 }, { STRATA_PLUGIN_SYMBOL_V1, 1 },
    };
    for (size_t i = 0; i < sizeof k_syms / sizeof k_syms[0]; i++) {
        pr->sym = dlsym(pr->dl, k_syms[i].name);
        if (pr->sym) {
            pr->sym_name = k_syms[i].name;
            pr->sym_major = k_syms[i].major;
            return 0;
        }
    }
    /* Name the majors it does export (cf. NCCL's vN). */
    char found[160] = "";
    size_t used = 0;
    for (int v = 9; v >= 0; v--) {
        char sym[32];
        snprintf(sym, sizeof sym, "strata_plugin_v%d", v);
        if (v == 1 || v == 2 || !dlsym(pr->dl, sym))
            continue;
        if (pr->major < 0)
            pr->major = v;
        int k = snprintf(found + used, sizeof found - used, "%s%s",
                         used ? ", " : " (found: ", sym);
        if (k > 0 && used + (size_t)k < sizeof found)
            used += (size_t)k;
    }
    if (used > 0)
        snprintf(found + used, sizeof found - used, ")");
    strata__log(level, WHO, "%s: no symbol %s or %s: not a strata plugin, or "
                "built for an ABI major this core does not speak (it speaks "
                "%d and 1)%s", path, STRATA_PLUGIN_SYMBOL,
                STRATA_PLUGIN_SYMBOL_V1, STRATA_ABI_MAJOR, found);
    return STRATA_EABI;
}

/* ---- capabilities (ABI 2.5) --------------------------------------------- */

/* Each bit and the entry it promises (NULL: a ctl op or a host call). */
static const struct cap_bit {
    uint32_t bit;
    const char *name;
    uint32_t kind;
} k_caps[] = {
    { STRATA_CAP_ELASTIC, "elastic", STRATA_KIND_STRATEGY },
    { STRATA_CAP_DRIVES, "drives", STRATA_KIND_STRATEGY },
    { STRATA_CAP_NEXT_STEP, "next_step", STRATA_KIND_STRATEGY },
    { STRATA_CAP_STATE, "state", STRATA_KIND_STRATEGY },
    { STRATA_CAP_CLIP, "clip", STRATA_KIND_STRATEGY },
    { STRATA_CAP_WORLD_SUM, "world_sum", STRATA_KIND_STRATEGY },
    { STRATA_CAP_OVERLAP, "overlap", STRATA_KIND_STRATEGY },
    { STRATA_CAP_STEP_SUM, "step_sum", STRATA_KIND_STRATEGY },
    { STRATA_CAP_LAYER_STATES, "layer_states", STRATA_KIND_STRATEGY },
    { STRATA_CAP_SPARSE, "sparse", STRATA_KIND_STRATEGY },
    { STRATA_CAP_LAZY_INIT, "lazy_init", STRATA_KIND_STRATEGY },
    { STRATA_CAP_ROWS_APART, "rows_apart", STRATA_KIND_STRATEGY },
    { STRATA_CAP_STATE_PARTS, "state_parts", STRATA_KIND_STRATEGY },
    { STRATA_CAP_P2P, "p2p", STRATA_KIND_TRANSPORT },
    { STRATA_CAP_SHARDS, "shards", STRATA_KIND_TRANSPORT },
    { STRATA_CAP_BARRIER, "barrier", STRATA_KIND_TRANSPORT },
    { STRATA_CAP_DEVICE_MEM, "device_mem", STRATA_KIND_TRANSPORT },
};

void strata__caps_str(uint32_t caps, char *buf, size_t cap)
{
    size_t used = 0;
    if (cap == 0)
        return;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof k_caps / sizeof k_caps[0]; i++)
        if ((caps & k_caps[i].bit) && used < cap) {
            int k = snprintf(buf + used, cap - used, "%s%s", used ? "," : "",
                             k_caps[i].name);
            used += k > 0 ? (size_t)k : 0;
        }
    if (used == 0)
        snprintf(buf, cap, "-");
}

/* The entries a bit stands for, present or not. */
static uint32_t entry_caps(const strata_plugin_v2_t *vt)
{
    uint32_t c = 0;
    if (vt->hdr.kind == STRATA_KIND_STRATEGY) {
        c |= STRATA_HAS(vt, drive) ? STRATA_CAP_DRIVES : 0;
        c |= STRATA_HAS(vt, next_step) ? STRATA_CAP_NEXT_STEP : 0;
        c |= STRATA_HAS(vt, reduce_ready) ? STRATA_CAP_OVERLAP : 0;
    } else {
        c |= STRATA_HAS(vt, send) && STRATA_HAS(vt, recv) ? STRATA_CAP_P2P : 0;
    }
    return c;
}
#define ENTRY_CAPS (STRATA_CAP_DRIVES | STRATA_CAP_NEXT_STEP |               \
                    STRATA_CAP_OVERLAP | STRATA_CAP_P2P)

static int declares_caps(int major, const strata_plugin_header_t *h)
{
    return major == 2 && h->abi_minor >= 5;
}

uint32_t strata__plugin_caps(const strata_plugin_v2_t *vt, int major)
{
    /* LAYER_STATES (2.8) promises strata_step_t.states and the host's
     * states_set, SPARSE (2.9) reads strata_op_t.sparse, LAZY_INIT (2.12)
     * calls host init_values, ROWS_APART (2.12) keeps a promise on buf,
     * STATE_PARTS (2.13) reads strata_state_t.part_step and calls host
     * part_write: a table of an older minor knows none of them, whatever
     * its bits 0x1000 / 0x2000 / 0x4000 / 0x8000 / 0x10000 say (it then
     * gets the dense form, var->init, its tables' ranges cleared at every
     * step, a checkpoint's state gathered). */
    if (declares_caps(major, &vt->hdr)) {
        uint32_t c = vt->hdr.caps;
        if (vt->hdr.abi_minor < 8)
            c &= ~STRATA_CAP_LAYER_STATES;
        if (vt->hdr.abi_minor < 9)
            c &= ~STRATA_CAP_SPARSE;
        if (vt->hdr.abi_minor < 12)
            c &= ~(STRATA_CAP_LAZY_INIT | STRATA_CAP_ROWS_APART);
        if (vt->hdr.abi_minor < 13)
            c &= ~STRATA_CAP_STATE_PARTS;
        return c;
    }
    /* Before 2.5: what the core learnt by asking. A strategy with ctl may
     * answer the state ops, the world sum and (built for 2.3 on) regroup --
     * the core calls them and takes STRATA_ENOTSUP as "no"; any strategy
     * was asked for clipping (a warning after the run when it did not). A
     * transport with ctl may offer the barrier and (2.4 on) the shards,
     * asked per group. Device memory was never asked: not derived. */
    uint32_t c = entry_caps(vt);
    int minor = major == 2 ? vt->hdr.abi_minor : -1;
    if (vt->hdr.kind == STRATA_KIND_STRATEGY) {
        c |= STRATA_CAP_CLIP;
        if (vt->ctl)
            c |= STRATA_CAP_STATE | STRATA_CAP_WORLD_SUM |
                 (minor >= 3 ? STRATA_CAP_ELASTIC : 0);
    } else if (vt->ctl) {
        c |= STRATA_CAP_BARRIER | (minor >= 4 ? STRATA_CAP_SHARDS : 0);
    }
    return c;
}

/* A 2.5 header's word must be of its kind and agree with the entries: a
 * bit the core will act on without asking has its entry, and an entry
 * the core would otherwise never call has its bit. */
static int check_caps(const char *path, int level, const struct probe *pr)
{
    const strata_plugin_v2_t *vt = &pr->table;
    if (!declares_caps(pr->sym_major, &vt->hdr))
        return 0;
    uint32_t caps = vt->hdr.caps;
    uint32_t mine = vt->hdr.kind == STRATA_KIND_STRATEGY
                        ? STRATA_CAPS_STRATEGY : STRATA_CAPS_TRANSPORT;
    char txt[160];
    if (caps & ~mine) {
        strata__caps_str(caps & ~mine, txt, sizeof txt);
        strata__log(level, WHO, "%s: hdr.caps %#x has bits that are not a "
                    "%s's (%s%s)", path, caps, strata__kind_name(vt->hdr.kind),
                    txt, caps & ~(STRATA_CAPS_STRATEGY | STRATA_CAPS_TRANSPORT)
                             ? ", or unknown" : "");
        return STRATA_EABI;
    }
    uint32_t have = entry_caps(vt), odd = (caps ^ have) & ENTRY_CAPS;
    if (vt->hdr.kind == STRATA_KIND_TRANSPORT) {
        if ((caps & STRATA_CAP_SHARDS) &&
            !(STRATA_HAS(vt, reduce_scatter) && STRATA_HAS(vt, all_gather)))
            odd |= STRATA_CAP_SHARDS;
        if ((caps & STRATA_CAP_BARRIER) && !STRATA_HAS(vt, barrier))
            odd |= STRATA_CAP_BARRIER;
    }
    if (odd) {
        strata__caps_str(odd, txt, sizeof txt);
        strata__log(level, WHO, "%s: hdr.caps and the entries disagree on "
                    "%s: a capability bit comes with its entry (plugin.h, "
                    "STRATA_CAP_*)", path, txt);
        return STRATA_EABI;
    }
    return 0;
}

/* What the core calls without asking: init and fini; a strategy places,
 * reduces and updates every variable; a transport at least reduces. */
static int check_entries(const char *path, int level, const struct probe *pr)
{
    const strata_plugin_v2_t *vt = &pr->table;
    int has_init = pr->sym_major == 2
                       ? vt->init != NULL
                       : ((const strata_plugin_v1_t *)pr->sym)->init != NULL;
    if (!has_init || !vt->fini) {
        strata__log(level, WHO, "%s: required entry %s is NULL", path,
                    !has_init ? "init" : "fini");
        return STRATA_EABI;
    }
    const char *missing = NULL;
    if (vt->hdr.kind == STRATA_KIND_STRATEGY)
        missing = !vt->create_var ? "create_var"
                  : !vt->reduce   ? "reduce"
                  : !vt->update   ? "update" : NULL;
    else if (!vt->reduce)
        missing = "reduce";
    if (missing) {
        strata__log(level, WHO, "%s: required entry %s is NULL (a %s needs %s)",
                    path, missing, strata__kind_name(vt->hdr.kind),
                    vt->hdr.kind == STRATA_KIND_STRATEGY
                        ? "create_var, reduce and update" : "reduce");
        return STRATA_EABI;
    }
    return 0;
}

/* Check who could have written `path` (unless `flags` trust it), dlopen it
 * and check its header against `want` (0: either kind, the header says
 * which). Logs one line at `level` when refused. pr->dl is left open, also
 * on failure, so that a listing can read the header; the caller closes it. */
static int probe_file(const char *path, const char *stem, uint32_t want, int level,
                      unsigned flags, struct probe *pr)
{
    memset(pr, 0, sizeof *pr);
    pr->major = pr->minor = -1;

    /* dlopen runs the file's constructors: nothing of it before this. */
    int trc = flags & STRATA__PLUGIN_TRUST_PATH ? 0 : check_trust(path, level);
    if (trc != 0)
        return trc;
    dlerror();
    pr->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!pr->dl) {
        strata__log(level, WHO, "%s: cannot load: %s; perhaps a missing symbol, "
                    "or built for another version?", path, strip_path(dlerror(), path));
        return STRATA_EABI;
    }
    if (find_symbol(path, level, pr) != 0)
        return STRATA_EABI;

    /* The header is all the loader may read before it knows the layout. */
    const strata_plugin_header_t *h = pr->sym;
    size_t symsz = symbol_size(pr->sym);
    if (symsz && symsz < sizeof *h) {
        strata__log(level, WHO, "%s: symbol %s is %zu bytes, smaller than its "
                    "header (%zu bytes)", path, pr->sym_name, symsz, sizeof *h);
        return STRATA_EABI;
    }
    pr->major = h->abi_major;
    pr->minor = h->abi_minor;
    if (h->abi_major != pr->sym_major) {
        strata__log(level, WHO, "%s: plugin ABI major %u in the header of its "
                    "symbol %s (plugin %u.%u, core %d.%d, which also loads "
                    "major 1); rebuild it against this strata", path,
                    h->abi_major, pr->sym_name, h->abi_major, h->abi_minor,
                    STRATA_ABI_MAJOR, STRATA_ABI_MINOR);
        return STRATA_EABI;
    }
    pr->hdr = h;
    size_t min = pr->sym_major == 2 ? V2_0_SIZE : V1_0_SIZE;
    if (h->struct_size < min) {
        strata__log(level, WHO, "%s: struct_size %u is smaller than the ABI "
                    "%d.0 vtable (%zu bytes)", path, h->struct_size,
                    pr->sym_major, min);
        return STRATA_EABI;
    }
    if (symsz && symsz < h->struct_size) {
        strata__log(level, WHO, "%s: struct_size %u is larger than its symbol %s "
                    "(%zu bytes)", path, h->struct_size, pr->sym_name, symsz);
        return STRATA_EABI;
    }
    if (!h->build_sig || strcmp(h->build_sig, STRATA_BUILD_SIG) != 0) {
        strata__log(level, WHO, "%s is not binary compatible (plugin build sig "
                    "'%s', core build sig '%s')", path,
                    h->build_sig ? h->build_sig : "(none)", STRATA_BUILD_SIG);
        return STRATA_EABI;
    }
    if (want == 0 && h->kind != STRATA_KIND_STRATEGY && h->kind != STRATA_KIND_TRANSPORT) {
        strata__log(level, WHO, "%s has unknown plugin kind %u (expected %u for a "
                    "strategy or %u for a transport)", path, h->kind,
                    STRATA_KIND_STRATEGY, STRATA_KIND_TRANSPORT);
        return STRATA_EABI;
    }
    if (want != 0 && h->kind != want) {
        if (h->kind == STRATA_KIND_STRATEGY || h->kind == STRATA_KIND_TRANSPORT)
            strata__log(level, WHO, "%s is a %s plugin, expected a %s", path,
                        strata__kind_name(h->kind), strata__kind_name(want));
        else
            strata__log(level, WHO, "%s has unknown plugin kind %u, expected a %s",
                        path, h->kind, strata__kind_name(want));
        return STRATA_EABI;
    }
    if (!h->name || strcmp(h->name, stem) != 0) {
        strata__log(level, WHO, "%s: header name '%s' does not match the file name "
                    "'%s' (they must be equal)", path, h->name ? h->name : "(null)",
                    stem);
        return STRATA_EABI;
    }
    normalize(pr);
    int rc = check_entries(path, level, pr);
    return rc ? rc : check_caps(path, level, pr);
}

/* ---- open / close ------------------------------------------------------ */

static int not_found(const char *name, uint32_t kind, const char *search_path,
                     int level)
{
    struct sbuf dirs = { 0 };
    const char *cur = search_path, *e;
    size_t n;
    while ((e = path_next(&cur, &n)) != NULL) {
        if (dirs.len > 0)
            sb_add(&dirs, ", ", 2);
        sb_add(&dirs, e, n);
    }
    char best[NAME_MAX_LEN + 1 + 256];
    suggest(name, search_path, best, sizeof best);
    strata__log(level, WHO, "%s plugin '%s' not found; looked in: %s%s%s%s",
                strata__kind_name(kind), name,
                dirs.len ? dirs.s : dirs.oom ? "(out of memory)" : "(no directories)",
                best[0] ? "; did you mean '" : "", best, best[0] ? "'?" : "");
    free(dirs.s);
    return STRATA_ENOPLUGIN;
}

int strata__plugin_open(const char *name, uint32_t kind, const char *search_path,
                        strata__plugin_t **out)
{
    return strata__plugin_open_as(name, kind, search_path, STRATA_LOG_ERROR,
                                  0, out);
}

int strata__plugin_open_as(const char *name, uint32_t kind,
                           const char *search_path, int missing_level,
                           unsigned flags, strata__plugin_t **out)
{
    if (!out)
        return STRATA_EINVAL;
    *out = NULL;
    if (kind != STRATA_KIND_STRATEGY && kind != STRATA_KIND_TRANSPORT) {
        strata__log(STRATA_LOG_ERROR, WHO, "invalid plugin kind %u", kind);
        return STRATA_EINVAL;
    }
    if (!valid_name(name)) {
        strata__log(STRATA_LOG_ERROR, WHO, "invalid %s plugin name '%s': use 1 to %zu "
                    "of a-z, 0-9, '_' and '-' (the file is <name>.so)",
                    strata__kind_name(kind), name ? name : "(null)", NAME_MAX_LEN);
        return STRATA_EINVAL;
    }

    /* First dir that has the file wins, even when that file is broken. */
    char *path = NULL;
    const char *cur = search_path, *e;
    size_t n;
    while ((e = path_next(&cur, &n)) != NULL) {
        path = join_so(e, n, name);
        if (!path) {
            strata__log(STRATA_LOG_ERROR, WHO, "out of memory opening plugin '%s'", name);
            return STRATA_ENOMEM;
        }
        if (is_file(path))
            break;
        free(path);
        path = NULL;
    }
    if (!path)
        return not_found(name, kind, search_path, missing_level);

    struct probe pr;
    int rc = probe_file(path, name, kind, STRATA_LOG_ERROR, flags, &pr);
    strata__plugin_t *p = NULL;
    if (rc == 0 && (p = malloc(sizeof *p)) == NULL) {
        strata__log(STRATA_LOG_ERROR, WHO, "out of memory opening %s", path);
        rc = STRATA_ENOMEM;
    }
    if (rc != 0) {
        if (pr.dl)
            dlclose(pr.dl);
        free(path);
        return rc;
    }
    p->table = pr.table;
    p->vt = &p->table;
    p->v1 = pr.sym_major == 1 ? pr.sym : NULL;
    p->major = pr.sym_major;
    p->caps = strata__plugin_caps(&p->table, p->major);
    p->dl = pr.dl;
    p->path = path;
    snprintf(p->name, sizeof p->name, "%s", name);
    *out = p;
    return 0;
}

void strata__plugin_close(strata__plugin_t *p)
{
    if (!p)
        return;
    if (p->dl)
        dlclose(p->dl);
    free(p->path);
    free(p);
}

/* ---- scan --------------------------------------------------------------- */

/* Report one file. Errors are logged at debug level only: a listing shows
 * broken plugins through `status`, it does not spray error lines. */
static void scan_one(const char *path, const char *stem, unsigned flags,
                     strata_plugin_cb cb, void *user)
{
    struct probe pr = { .major = -1, .minor = -1 };
    int rc;
    if (!valid_name(stem)) {
        strata__log(STRATA_LOG_DEBUG, WHO, "%s: '%s' is not a valid plugin name",
                    path, stem);
        rc = STRATA_EINVAL;
    } else {
        rc = probe_file(path, stem, 0, STRATA_LOG_DEBUG, flags, &pr);
    }
    const strata_plugin_header_t *h = pr.hdr;
    cb(user, stem, strata__kind_name(h ? h->kind : 0), pr.major, pr.minor,
       h && h->version ? h->version : "", h && h->description ? h->description : "",
       path, rc);
    if (pr.dl)
        dlclose(pr.dl);               /* after cb: the strings live in the .so */
}

int strata__plugin_scan(const char *search_path, unsigned flags,
                        strata_plugin_cb cb, void *user)
{
    if (!cb)
        return STRATA_EINVAL;
    char **seen = NULL;
    size_t nseen = 0;
    int rc = 0;
    const char *cur = search_path, *e;
    size_t n;
    while (rc == 0 && (e = path_next(&cur, &n)) != NULL) {
        char **v;
        size_t nv;
        rc = list_so(e, n, &v, &nv);
        if (rc != 0)
            break;
        size_t i = 0;
        for (; i < nv; i++) {
            int dup = 0;
            for (size_t j = 0; j < nseen && !dup; j++)
                dup = strcmp(seen[j], v[i]) == 0;
            if (dup)
                continue;                    /* an earlier dir has it: it wins */
            char *path = join_so(e, n, v[i]);
            char **ns = path ? realloc(seen, (nseen + 1) * sizeof *seen) : NULL;
            if (!ns) {
                free(path);
                strata__log(STRATA_LOG_ERROR, WHO, "out of memory listing plugins");
                rc = STRATA_ENOMEM;
                break;
            }
            seen = ns;
            seen[nseen++] = v[i];            /* the list's string moves to seen */
            v[i] = NULL;
            scan_one(path, seen[nseen - 1], flags, cb, user);
            free(path);
        }
        free_list(v, nv);
    }
    free_list(seen, nseen);
    return rc;
}
