/* strata compare: the seeds' practical test ("run both on your hardware
 * and compare wall-clock time per epoch and final convergence quality").
 * Runs one job under each strategy of a list, one after another, and
 * prints a table; writes it as CSV, the epochs as CSV, and a plot (SVG) of
 * test accuracy against wall-clock seconds and training loss against
 * epochs. The runs themselves are in compare_run.c, the plot in svg.c. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <strata/plugin.h>

#include "cli.h"
#include "compare.h"
#include "base/createfile.h"
#include "svg.h"

#define MAX_RUNS  16
#define MAX_TASKS 64 /* as strata launch */
#define DEFAULT_STRATEGIES "mirrored,central,mwms:2,ps:2x2"

static const char *const k_usage =
    "usage: strata compare [-c FILE] [--strategies LIST] [--epochs N]\n"
    "                      [--out DIR] [--straggler TASK=DELAY] [--link RATE]\n"
    "                      [--timeout S] [--set SECTION.KEY=VALUE]...\n"
    "\n"
    "Run the same job under each strategy of LIST on this machine, one after\n"
    "another, and compare: a table (s/epoch, samples/s, time to reach the\n"
    "final test accuracy of the slowest run, final test accuracy, peak RSS),\n"
    "DIR/compare.csv (the table), DIR/compare-epochs.csv (every epoch of\n"
    "every run) and DIR/compare.svg (test accuracy against wall-clock\n"
    "seconds, training loss against epochs; open it in a browser). Each\n"
    "run's output is in DIR/NAME.log and its metrics in DIR/NAME.metrics.csv;\n"
    "a run that fails is a row of the table and the others go on.\n"
    "\n"
    "  -c, --config FILE      the job (default: the compiled-in defaults)\n"
    "      --strategies LIST  comma-separated, of (NAME: an installed strategy\n"
    "                         plugin, e.g. mirrored, central, mwms, ps):\n"
    "                           NAME          one process, the job's devices\n"
    "                           NAME:W        strata launch -n W (a strategy\n"
    "                                         that trains across processes,\n"
    "                                         e.g. mwms:W)\n"
    "                           NAME:PxW      strata launch --ps P --workers W\n"
    "                                         --chief (one that hands out\n"
    "                                         steps, e.g. ps:PxW)\n"
    "                         a launched task has one replica (train.devices =\n"
    "                         cpu:0) unless --set says otherwise\n"
    "                         (default " DEFAULT_STRATEGIES ")\n"
    "      --epochs N         train N epochs (default: the job's)\n"
    "      --out DIR          the directory of it all (default strata-compare)\n"
    "      --straggler T=D    task T (e.g. worker:1) sleeps D (e.g. 10ms, 1s) in\n"
    "                         every step (debug.step_delay_ms); a job without T\n"
    "                         runs as usual, and its row says so\n"
    "      --link RATE        run each launched job in a network namespace of\n"
    "                         its own, whose loopback tc htb limits to RATE\n"
    "                         (e.g. 500mbit): all of its tasks share one link,\n"
    "                         over tcp (no shared memory). Needs root\n"
    "      --timeout S        stop a run after S seconds: a failed row\n"
    "                         (default 3600)\n"
    "  -s, --set S.K=V        passed to every run, e.g. data.limit_train=10000\n"
    "\n"
    "exit codes: 0 every run succeeded; 1 a run failed (the table says which);\n"
    "            2 bad command line or job\n";

/* ---- options ----------------------------------------------------------- */

/* A count: digits only, in [1, max]. */
static int count(const char *s, const char **end, int max, int *out)
{
    long v = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9' && v <= max; p++)
        v = v * 10 + (*p - '0');
    *end = p;
    if (p == s || *s == '0' || v < 1 || v > max)
        return -1;
    *out = (int)v;
    return 0;
}

/* NAME | NAME:W | NAME:PxW (what NAME can do is checked against its
 * plugin later, in check_strategies) */
static int parse_spec(const char *s, size_t len, cmp_run_t *r)
{
    char spec[sizeof r->spec];
    const char *end;
    if (len == 0 || len >= sizeof spec)
        return -1;
    memcpy(spec, s, len);
    spec[len] = '\0';
    memset(r, 0, sizeof *r);
    memcpy(r->spec, spec, len + 1);
    size_t nlen = strcspn(spec, ":");
    if (nlen == 0 || nlen >= sizeof r->plugin ||
        strspn(spec, "abcdefghijklmnopqrstuvwxyz0123456789_-") != nlen)
        return -1;
    memcpy(r->plugin, spec, nlen);
    const char *topo = spec[nlen] ? spec + nlen + 1 : NULL;
    if (!topo) {
        r->kind = CMP_ONE;
        r->ntasks = 1;
        snprintf(r->stem, sizeof r->stem, "%s", r->plugin);
        return 0;
    }
    if (count(topo, &end, MAX_TASKS, &r->workers) != 0)
        return -1;
    if (!*end) {
        r->kind = CMP_WORKERS;
        r->ntasks = r->workers;
        snprintf(r->stem, sizeof r->stem, "%s-%d", r->plugin, r->workers);
        return 0;
    }
    r->ps = r->workers;
    if (*end != 'x' || count(end + 1, &end, MAX_TASKS, &r->workers) != 0 ||
        *end || r->ps + r->workers + 1 > MAX_TASKS)
        return -1;
    r->kind = CMP_PS;
    r->ntasks = r->ps + r->workers + 1; /* + the chief (coordinator) */
    snprintf(r->stem, sizeof r->stem, "%s-%dx%d", r->plugin, r->ps,
             r->workers);
    return 0;
}

static int parse_strategies(const char *list, cmp_run_t *runs, int *n)
{
    *n = 0;
    for (const char *p = list;; p++) {
        size_t len = strcspn(p, ",");
        if (*n == MAX_RUNS) {
            fprintf(stderr, "strata: compare: --strategies: at most %d\n",
                    MAX_RUNS);
            return -1;
        }
        if (parse_spec(p, len, &runs[*n]) != 0) {
            fprintf(stderr, "strata: compare: --strategies: '%.*s' is not a "
                    "strategy: expected NAME, NAME:W or NAME:PxW, e.g. "
                    "mirrored, central, mwms:W or ps:PxW (W workers, P ps "
                    "tasks; at most %d tasks in a job, the chief of ps "
                    "included)\n", (int)(len > 40 ? 40 : len), p,
                    MAX_TASKS);
            return -1;
        }
        for (int i = 0; i < *n; i++)
            if (!strcmp(runs[i].spec, runs[*n].spec)) {
                fprintf(stderr, "strata: compare: --strategies: %s given "
                        "twice\n", runs[i].spec);
                return -1;
            }
        (*n)++;
        p += len;
        if (!*p)
            return 0;
    }
}

/* TYPE:INDEX=Nms | Ns */
static int parse_straggler(const char *v, cmp_opts_t *o)
{
    const char *eq = strchr(v, '='), *colon = strchr(v, ':'), *digits;
    size_t tlen = colon ? (size_t)(colon - v) : 0;
    if (!eq || !colon || colon > eq ||
        (size_t)(eq - v) >= sizeof o->straggler ||
        !((tlen == 5 && !strncmp(v, "chief", 5)) ||
          (tlen == 6 && !strncmp(v, "worker", 6)) ||
          (tlen == 2 && !strncmp(v, "ps", 2))))
        return -1;
    for (digits = colon + 1; *digits >= '0' && *digits <= '9'; digits++)
        ;
    if (digits == colon + 1 || digits != eq || digits - colon > 3)
        return -1; /* an index of 1 or 2 digits: at most 64 tasks */
    const char *unit;
    int n;
    if (count(eq + 1, &unit, 600000, &n) != 0)
        return -1;
    if (!strcmp(unit, "s") && n <= 600)
        n *= 1000;
    else if (strcmp(unit, "ms") != 0)
        return -1;
    memcpy(o->straggler, v, (size_t)(eq - v));
    o->straggler[eq - v] = '\0';
    o->straggler_ms = n;
    return 0;
}

/* N(kbit|mbit|gbit), as tc writes rates; bits/s. */
static int parse_rate(const char *v, double *bps)
{
    static const struct { const char *unit; double mult; } k_units[] = {
        { "kbit", 1e3 }, { "mbit", 1e6 }, { "gbit", 1e9 },
    };
    const char *unit;
    int n;
    if (count(v, &unit, 1000000, &n) != 0)
        return -1;
    for (size_t i = 0; i < sizeof k_units / sizeof k_units[0]; i++)
        if (!strcmp(unit, k_units[i].unit)) {
            *bps = n * k_units[i].mult;
            return *bps >= 8e3 && *bps <= 1e11 ? 0 : -1;
        }
    return -1;
}

typedef struct parsed {
    cmp_opts_t o;
    cmp_run_t  runs[MAX_RUNS];
    int        nruns;
    double     link_bps;
} parsed_t;

/* 0, -1 after --help, or 2 after one error line. */
static int parse(int argc, char **argv, parsed_t *p)
{
    const char *strategies = NULL, *epochs = NULL, *timeout = NULL,
               *straggler = NULL;
    cmp_opts_t *o = &p->o;
    o->sets = calloc((size_t)argc + 1, sizeof *o->sets);
    if (!o->sets)
        return 1;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i], *val = NULL;
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            fputs(k_usage, stdout);
            return -1;
        }
        static const char *const k_valued[] = {
            "-c", "--config", "--strategies", "--epochs", "--out",
            "--straggler", "--link", "--timeout", "-s", "--set",
        };
        const char *name = NULL;
        for (size_t k = 0; k < sizeof k_valued / sizeof *k_valued; k++) {
            size_t n = strlen(k_valued[k]);
            if (!strcmp(arg, k_valued[k])) {
                name = k_valued[k];
                if (i + 1 >= argc) {
                    fprintf(stderr, "strata: compare: %s needs a value\n",
                            arg);
                    return 2;
                }
                val = argv[++i];
            } else if (arg[0] == '-' && arg[1] == '-' &&
                       !strncmp(arg, k_valued[k], n) &&
                       arg[n] == '=') {
                name = k_valued[k];
                val = arg + n + 1;
            }
            if (name)
                break;
        }
        if (!name) {
            fprintf(stderr, "strata: compare: unknown argument '%s' "
                    "(strata compare --help)\n", arg);
            return 2;
        }
        const char **slot = !strcmp(name, "-c") || !strcmp(name, "--config")
                                ? &o->config
                            : !strcmp(name, "--strategies") ? &strategies
                            : !strcmp(name, "--epochs")     ? &epochs
                            : !strcmp(name, "--out")        ? &o->out
                            : !strcmp(name, "--straggler")  ? &straggler
                            : !strcmp(name, "--link")       ? &o->link
                            : !strcmp(name, "--timeout")    ? &timeout
                                                            : NULL;
        if (!slot) { /* --set: repeated */
            o->sets[o->nsets++] = val;
            continue;
        }
        if (*slot) {
            fprintf(stderr, "strata: compare: %s given twice\n", name);
            return 2;
        }
        *slot = val;
    }
    const char *end;
    if (parse_strategies(strategies ? strategies : DEFAULT_STRATEGIES,
                         p->runs, &p->nruns) != 0)
        return 2;
    if (epochs && (count(epochs, &end, 1000000, &o->epochs) != 0 || *end)) {
        fprintf(stderr, "strata: compare: --epochs '%s': a count in [1, "
                "1000000]\n", epochs);
        return 2;
    }
    o->timeout_s = 3600;
    if (timeout && (count(timeout, &end, 1000000, &o->timeout_s) != 0 ||
                    *end)) {
        fprintf(stderr, "strata: compare: --timeout '%s': seconds in [1, "
                "1000000]\n", timeout);
        return 2;
    }
    if (straggler && parse_straggler(straggler, o) != 0) {
        fprintf(stderr, "strata: compare: --straggler '%s': expected "
                "TYPE:INDEX=DELAY, e.g. worker:1=10ms (TYPE chief, worker "
                "or ps; DELAY up to 600000ms or 600s)\n", straggler);
        return 2;
    }
    if (o->link && parse_rate(o->link, &p->link_bps) != 0) {
        fprintf(stderr, "strata: compare: --link '%s': expected a rate as "
                "tc writes it, e.g. 500mbit (kbit, mbit or gbit; 8kbit to "
                "100gbit)\n", o->link);
        return 2;
    }
    if (!o->out)
        o->out = "strata-compare";
    if (!o->out[0] || strlen(o->out) > 4000) {
        fprintf(stderr, "strata: compare: --out needs a directory (a path "
                "of at most 4000 bytes)\n");
        return 2;
    }
    return 0;
}

/* Is plugin `name` of the search path a strategy? (strata_plugins_list) */
struct kind_of {
    const char *name;
    char        kind[16];
};

static void kind_cb(void *user, const char *name, const char *kind,
                    int major, int minor, const char *version,
                    const char *description, const char *path, int status)
{
    struct kind_of *k = user;
    (void)major, (void)minor, (void)version, (void)description, (void)path;
    if (!strcmp(name, k->name) && !k->kind[0] && status == 0)
        snprintf(k->kind, sizeof k->kind, "%s", kind ? kind : "");
}

/* Each strategy of the list is an installed strategy plugin that can run
 * as asked, by its capability word: NAME:PxW needs one that hands out
 * steps (STRATA_CAP_NEXT_STEP, a coordinator: ps), NAME:W one that trains
 * across processes (STRATA_CAP_WORLD_SUM), NAME one that trains in one
 * process (not a coordinator). */
static int check_strategies(strata_ctx_t *ctx, const cmp_run_t *runs, int n)
{
    for (int i = 0; i < n; i++) {
        const cmp_run_t *r = &runs[i];
        struct kind_of k = { .name = r->plugin };
        uint32_t caps = 0;
        char text[128] = "-";
        int rc = strata_plugins_list(ctx, kind_cb, &k);
        if (rc != STRATA_OK)
            return -1; /* the library said why */
        const char *why = NULL;
        if (!k.kind[0])
            why = "no working plugin of that name on the search path "
                  "(`strata plugins` lists them)";
        else if (strcmp(k.kind, "strategy") != 0)
            why = "a transport plugin, not a strategy";
        else if ((rc = strata_plugin_caps(ctx, r->plugin, &caps, text,
                                          sizeof text)) != STRATA_OK)
            return -1; /* the library said why */
        else if (r->kind != CMP_PS && (caps & STRATA_CAP_NEXT_STEP))
            why = "its plugin runs with ps tasks and a coordinator: write "
                  "NAME:PxW";
        else if (r->kind == CMP_PS && !(caps & STRATA_CAP_NEXT_STEP))
            why = "its plugin does not hand out steps (NAME:PxW needs a "
                  "strategy with the next_step capability, e.g. ps)";
        else if (r->kind == CMP_WORKERS && !(caps & STRATA_CAP_WORLD_SUM))
            why = "its plugin does not train across processes (NAME:W needs "
                  "a strategy with the world_sum capability, e.g. mwms)";
        if (why) {
            fprintf(stderr, "strata: compare: --strategies: '%s' is not a "
                    "strategy: %s%s%s%s\n", r->spec, why,
                    caps ? " (its capabilities: " : "", caps ? text : "",
                    caps ? ")" : "");
            return -1;
        }
    }
    return 0;
}

/* The job file and the --set assignments, read once before any run: a
 * missing file or a malformed line is one error here. (The values are
 * checked by each run as it starts: a bad one fails every run, exit 2.)
 * Then the strategies, with the job's plugin path. */
static int check_job(const cmp_opts_t *o, const cmp_run_t *runs, int n)
{
    strata_ctx_t *ctx = NULL;
    int rc = strata_ctx_create(o->config, &ctx);
    for (int i = 0; rc == STRATA_OK && i < o->nsets; i++)
        rc = strata_ctx_set(ctx, o->sets[i]);
    if (rc != STRATA_OK)
        fprintf(stderr, "strata: compare: the job cannot be read (%s): "
                "nothing was run\n", strata_err_name(rc));
    int bad = rc != STRATA_OK || check_strategies(ctx, runs, n) != 0;
    strata_ctx_destroy(ctx);
    return bad ? -1 : 0;
}

/* ---- results ----------------------------------------------------------- */

static int succeeded(const cmp_run_t *r)
{
    return r->ran && r->code == 0 && r->nep > 0;
}

static const cmp_epoch_t *last(const cmp_run_t *r)
{
    return r->nep > 0 ? &r->ep[r->nep - 1] : NULL;
}

typedef struct summary {
    double s_per_epoch, samples_per_s;
} summary_t;

/* Mean training seconds per epoch (evaluation excluded) and samples/s
 * over all epochs, from the runs' own measurements. */
static summary_t summarise(const cmp_run_t *r)
{
    double secs = 0, samples = 0;
    for (int i = 0; i < r->nep; i++) {
        secs += r->ep[i].seconds;
        samples += r->ep[i].samples_per_s * r->ep[i].seconds;
    }
    summary_t s = { NAN, NAN };
    if (r->nep > 0 && secs > 0) {
        s.s_per_epoch = secs / r->nep;
        s.samples_per_s = samples / secs;
    }
    return s;
}

/* The slowest successful run that evaluated (the latest end of its last
 * epoch): its final test accuracy is the target every run is timed to. */
static const cmp_run_t *slowest(const cmp_run_t *runs, int n)
{
    const cmp_run_t *s = NULL;
    for (int i = 0; i < n; i++)
        if (succeeded(&runs[i]) && last(&runs[i])->has_test &&
            (!s || last(&runs[i])->wall_s > last(s)->wall_s))
            s = &runs[i];
    return s;
}

/* Wall-clock seconds to the end of the first epoch that reached `target`;
 * NAN: never. */
static double time_to(const cmp_run_t *r, double target)
{
    for (int i = 0; i < r->nep; i++)
        if (r->ep[i].has_test && r->ep[i].test_acc >= target)
            return r->ep[i].wall_s;
    return NAN;
}

/* Text in columns: widths in characters (UTF-8: "—" is one). */
static size_t chars_n(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len && s[i]; i++)
        n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

static size_t chars(const char *s)
{
    return chars_n(s, strlen(s));
}

static void cell(const char *s, int width, int left)
{
    int pad = width - (int)chars(s);
    if (!left)
        printf("%*s", pad > 0 ? pad : 0, "");
    fputs(s, stdout);
    if (left)
        printf("%*s", pad > 0 ? pad : 0, "");
}

#define DASH "\xe2\x80\x94" /* — */

static void fmt(char *buf, size_t cap, const char *f, double v)
{
    if (isfinite(v))
        snprintf(buf, cap, f, v);
    else
        snprintf(buf, cap, DASH);
}

/* A paragraph in lines of at most 78 characters. */
static void wrap(const char *text)
{
    int col = 0;
    while (*text) {
        size_t word = strcspn(text, " ");
        if (col > 0 && col + 1 + (int)chars_n(text, word) > 78) {
            putchar('\n');
            col = 0;
        } else if (col > 0) {
            putchar(' ');
            col++;
        }
        fwrite(text, 1, word, stdout);
        col += (int)chars_n(text, word);
        text += word;
        text += strspn(text, " ");
    }
    putchar('\n');
}

static void print_table(const cmp_run_t *runs, int n, const cmp_run_t *slow)
{
    double target = slow ? last(slow)->test_acc : NAN;
    char to[48];
    if (slow)
        snprintf(to, sizeof to, "to %.2f %%", target * 100);
    else
        snprintf(to, sizeof to, "to target");
    static const int w[] = { 10, 6, 8, 10, 11, 9, 9, 8 };
    const char *hdr[] = { "strategy", "tasks", "s/epoch", "samples/s", to,
                          "test acc", "peak RSS", "wall" };
    printf("\n");
    for (int c = 0; c < 8; c++) {
        cell(hdr[c], w[c], c == 0);
        fputs(c < 7 ? "  " : "\n", stdout);
    }
    for (int i = 0; i < n; i++) {
        const cmp_run_t *r = &runs[i];
        if (!r->ran)
            continue;
        char v[8][48];
        snprintf(v[0], sizeof v[0], "%s", r->spec);
        snprintf(v[1], sizeof v[1], "%d", r->ntasks);
        if (!succeeded(r)) {
            cell(v[0], w[0], 1);
            printf("  failed (exit %d): see %s\n", r->code, r->log);
            if (r->why[0])
                printf("%*s  %s\n", w[0], "", r->why);
            continue;
        }
        summary_t s = summarise(r);
        fmt(v[2], sizeof v[2], "%.3f", s.s_per_epoch);
        fmt(v[3], sizeof v[3], "%.0f", s.samples_per_s);
        fmt(v[4], sizeof v[4], "%.1f s", time_to(r, target));
        fmt(v[5], sizeof v[5], "%.2f %%",
            last(r)->has_test ? last(r)->test_acc * 100 : NAN);
        snprintf(v[6], sizeof v[6], "%.0f MiB", r->maxrss_kib / 1024.0);
        snprintf(v[7], sizeof v[7], "%.1f s", r->wall_s);
        for (int c = 0; c < 8; c++) {
            cell(v[c], w[c], c == 0);
            fputs(c < 7 ? "  " : "\n", stdout);
        }
    }
    for (int i = 0; i < n; i++)
        if (runs[i].ran && runs[i].note[0])
            printf("%s: %s\n", runs[i].spec, runs[i].note);
    char text[1024];
    printf("\n");
    wrap("s/epoch: mean wall time of an epoch's training steps (evaluation "
         "excluded); samples/s: samples trained / those seconds; both from "
         "each run's metrics.");
    if (slow)
        snprintf(text, sizeof text, "%s: wall-clock seconds from the start "
                 "of a run to the end of its first epoch (evaluation "
                 "included) whose test accuracy reached %.2f %%, the final "
                 "test accuracy of the slowest run (%s, %.1f s); " DASH
                 ": never.", to, target * 100, slow->spec,
                 last(slow)->wall_s);
    else
        snprintf(text, sizeof text, "to target: no run evaluated on the "
                 "test set ([train] eval).");
    wrap(text);
    wrap("test acc: after the last epoch. peak RSS: the job's largest "
         "process (wait4's ru_maxrss covers the child and every descendant "
         "it reaped, as a maximum, not a sum). tasks: the job's processes, "
         "strata launch not counted. wall: the whole command, start-up "
         "included.");
}

/* ---- files ------------------------------------------------------------- */

/* Replace `path` with what `write` puts in a stream: a new temporary file
 * (strata__create_temp: never one that was there), fsync, rename; nothing
 * half-written. 0, or -1 after a message. */
static int write_file(const char *path, int (*write)(FILE *, void *),
                      void *user)
{
    char *buf = NULL, tmp[4200];
    size_t len = 0;
    errno = 0;
    FILE *m = open_memstream(&buf, &len);
    int rc = m ? write(m, user) : -1;
    if (m && fclose(m) != 0)
        rc = -1;
    FILE *f = NULL;
    int fd = rc == 0 ? strata__create_temp(path, tmp, sizeof tmp, 0644) : -1;
    if (rc == 0 && fd < 0) {
        errno = -fd;
        rc = -1;
    }
    if (fd >= 0 && !(f = fdopen(fd, "w")))
        close(fd);
    if (fd >= 0 && (!f || fwrite(buf, 1, len, f) != len || fflush(f) != 0 ||
                    fsync(fileno(f)) != 0))
        rc = -1;
    if (f && fclose(f) != 0)
        rc = -1;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -1;
    if (rc != 0) {
        fprintf(stderr, "strata: compare: cannot write %s: %s\n", path,
                errno ? strerror(errno) : "out of memory");
        if (fd >= 0)
            unlink(tmp);
    }
    free(buf);
    return rc;
}

typedef struct report {
    const cmp_run_t *runs;
    int              n;
    const cmp_run_t *slow;
    const char      *title, *subtitle;
} report_t;

static void csv_num(FILE *f, const char *fmt, double v, int last_col)
{
    if (isfinite(v))
        fprintf(f, fmt, v);
    fputc(last_col ? '\n' : ',', f);
}

static int write_table_csv(FILE *f, void *user)
{
    const report_t *rp = user;
    double target = rp->slow ? last(rp->slow)->test_acc : NAN;
    fprintf(f, "strategy,status,exit_code,tasks,epochs,s_per_epoch,"
            "samples_per_s,target_test_acc,time_to_target_s,final_test_acc,"
            "final_train_loss,peak_rss_mib,wall_s,log\n");
    for (int i = 0; i < rp->n; i++) {
        const cmp_run_t *r = &rp->runs[i];
        if (!r->ran)
            continue;
        int ok = succeeded(r);
        summary_t s = summarise(r);
        const cmp_epoch_t *e = last(r);
        fprintf(f, "%s,%s,%d,%d,%d,", r->spec, ok ? "ok" : "failed", r->code,
                r->ntasks, r->nep);
        csv_num(f, "%.4f", ok ? s.s_per_epoch : NAN, 0);
        csv_num(f, "%.1f", ok ? s.samples_per_s : NAN, 0);
        csv_num(f, "%.6f", target, 0);
        csv_num(f, "%.3f", ok ? time_to(r, target) : NAN, 0);
        csv_num(f, "%.6f", ok && e->has_test ? e->test_acc : NAN, 0);
        csv_num(f, "%.6f", ok ? e->train_loss : NAN, 0);
        csv_num(f, "%.1f", r->maxrss_kib / 1024.0, 0);
        csv_num(f, "%.3f", r->wall_s, 0);
        fprintf(f, "%s\n", r->log); /* ours: no comma (checked at start) */
    }
    return 0;
}

static int write_epochs_csv(FILE *f, void *user)
{
    const report_t *rp = user;
    fprintf(f, "strategy,epoch,wall_s,seconds,samples_per_s,train_loss,"
            "train_acc,test_loss,test_acc\n");
    for (int i = 0; i < rp->n; i++)
        for (int k = 0; k < rp->runs[i].nep; k++) {
            const cmp_epoch_t *e = &rp->runs[i].ep[k];
            fprintf(f, "%s,%d,%.3f,%.4f,%.1f,%.6f,%.6f,", rp->runs[i].spec,
                    e->epoch, e->wall_s, e->seconds, e->samples_per_s,
                    e->train_loss, e->train_acc);
            csv_num(f, "%.6f", e->has_test ? e->test_loss : NAN, 0);
            csv_num(f, "%.6f", e->has_test ? e->test_acc : NAN, 1);
        }
    return 0;
}

/* The plot: one line per run that has epochs, in both panels. */
static int write_svg(FILE *f, void *user)
{
    const report_t *rp = user;
    cli_series_t acc[MAX_RUNS], loss[MAX_RUNS];
    double *buf[MAX_RUNS] = { 0 };
    char names[MAX_RUNS][48];
    int ns = 0, rc = 0;
    for (int i = 0; i < rp->n; i++) {
        const cmp_run_t *r = &rp->runs[i];
        if (!r->ran)
            continue;
        /* A run that failed before its first epoch: a name, no line. */
        double *b = buf[ns] = malloc((4 * (size_t)r->nep + 1) * sizeof *b);
        if (!b) {
            rc = -1;
            break;
        }
        for (int k = 0; k < r->nep; k++) {
            b[k] = r->ep[k].wall_s;
            b[r->nep + k] = r->ep[k].has_test ? r->ep[k].test_acc * 100 : NAN;
            b[2 * r->nep + k] = r->ep[k].epoch;
            b[3 * r->nep + k] = r->ep[k].train_loss;
        }
        snprintf(names[ns], sizeof names[ns], "%s%s", r->spec,
                 succeeded(r) ? "" : " (failed)");
        acc[ns] = (cli_series_t){ names[ns], b, b + r->nep, r->nep };
        loss[ns] = (cli_series_t){ names[ns], b + 2 * r->nep, b + 3 * r->nep,
                                   r->nep };
        ns++;
    }
    const cli_panel_t panels[2] = {
        { .id = "accuracy", .title = "Test accuracy",
          .xlabel = "wall-clock seconds since the run started",
          .ylabel = "test accuracy (%)", .series = acc, .nseries = ns,
          .x_from_zero = 1 },
        { .id = "loss", .title = "Training loss",
          .xlabel = "epoch", .ylabel = "training loss (mean of the epoch)",
          .series = loss, .nseries = ns, .x_integer = 1 },
    };
    if (rc == 0)
        rc = cli_svg_write(f, rp->title, rp->subtitle, panels, 2);
    for (int i = 0; i < MAX_RUNS; i++)
        free(buf[i]);
    return rc;
}

/* ---- the command ------------------------------------------------------- */

static volatile sig_atomic_t g_stop;

static void on_stop(int sig)
{
    g_stop = sig;
}

static int make_dir(const char *dir)
{
    struct stat st;
    if (mkdir(dir, 0755) == 0 || (errno == EEXIST && stat(dir, &st) == 0 &&
                                  S_ISDIR(st.st_mode)))
        return 0;
    fprintf(stderr, "strata: compare: --out %s: %s\n", dir,
            errno == EEXIST ? "exists and is not a directory" : strerror(errno));
    return -1;
}

/* "a.ini, 3 epochs, 2 CPUs; straggler worker:1 +10 ms every step; ..." */
static void describe(const parsed_t *p, char *buf, size_t cap)
{
    const cmp_opts_t *o = &p->o;
    int epochs = 0, failed = 0;
    for (int i = 0; i < p->nruns; i++) {
        if (p->runs[i].nep > epochs)
            epochs = p->runs[i].nep;
        failed += p->runs[i].ran && !succeeded(&p->runs[i]);
    }
    const char *job = o->config ? strrchr(o->config, '/') : NULL;
    job = job ? job + 1 : o->config ? o->config : "the default job";
    size_t at = (size_t)snprintf(buf, cap, "%s, %d epoch%s, %ld CPUs", job,
                                 epochs, epochs == 1 ? "" : "s",
                                 sysconf(_SC_NPROCESSORS_ONLN));
    if (o->straggler[0] && at < cap)
        at += (size_t)snprintf(buf + at, cap - at, "; straggler %s +%d ms "
                               "every step", o->straggler, o->straggler_ms);
    if (o->link && at < cap)
        at += (size_t)snprintf(buf + at, cap - at, "; launched jobs on one "
                               "%s link", o->link);
    if (failed && at < cap)
        at += (size_t)snprintf(buf + at, cap - at, "; %d run%s failed",
                               failed, failed == 1 ? "" : "s");
    time_t now = time(NULL);
    struct tm tm;
    if (at < cap && localtime_r(&now, &tm))
        strftime(buf + at, cap - at, "; %Y-%m-%d %H:%M", &tm);
}

static int report(const parsed_t *p)
{
    char subtitle[512];
    describe(p, subtitle, sizeof subtitle);
    const cmp_run_t *slow = slowest(p->runs, p->nruns);
    printf("\n%s\n", subtitle);
    print_table(p->runs, p->nruns, slow);
    report_t rp = { p->runs, p->nruns, slow, "strata compare", subtitle };
    char path[3][4200];
    static const char *const k_names[3] = { "compare.csv",
                                            "compare-epochs.csv",
                                            "compare.svg" };
    int (*const k_write[3])(FILE *, void *) = { write_table_csv,
                                                write_epochs_csv, write_svg };
    int rc = 0;
    for (int i = 0; i < 3; i++) {
        snprintf(path[i], sizeof path[i], "%s/%s", p->o.out, k_names[i]);
        rc |= write_file(path[i], k_write[i], &rp);
    }
    if (rc == 0)
        printf("\nwrote %s, %s, %s\n", path[0], path[1], path[2]);
    return rc;
}

/* The exit code of a comparison that ran: 0 when every run succeeded; 2
 * when every one failed on its configuration (the job itself is wrong);
 * else 1. */
static int outcome(const parsed_t *p)
{
    int failed = 0, config = 0;
    for (int i = 0; i < p->nruns; i++)
        if (!succeeded(&p->runs[i])) {
            failed++;
            config += p->runs[i].code == 2;
        }
    return failed == 0 ? 0 : config == p->nruns ? 2 : 1;
}

int cli_compare(int argc, char **argv)
{
    parsed_t *p = calloc(1, sizeof *p);
    if (!p)
        return 1;
    int code = parse(argc, argv, p);
    if (code == 0 && strchr(p->o.out, ',')) { /* it goes into a CSV column */
        fprintf(stderr, "strata: compare: --out %s: no commas, please\n",
                p->o.out);
        code = 2;
    }
    if (code == 0 && check_job(&p->o, p->runs, p->nruns) != 0)
        code = 2;
    double link_bps = 0;
    if (code == 0 && p->o.link) {
        if (cli_compare_link_probe(p->o.link, p->link_bps, &link_bps) != 0) {
            fprintf(stderr, "strata: compare: --link %s cannot be made on "
                    "this machine (see above): nothing was run\n", p->o.link);
            code = 1;
        } else {
            printf("link: %s, tc htb on the loopback of a network namespace "
                   "per launched job; measured %.0f Mbit/s (one tcp stream)"
                   "\n", p->o.link, link_bps * 1e-6);
        }
    }
    if (code == 0 && make_dir(p->o.out) != 0)
        code = 1;
    if (code == 0) {
        printf("strata compare: %s, %d strateg%s, one after another; "
               "everything in %s/\n", p->o.config ? p->o.config
                                                 : "the default job",
               p->nruns, p->nruns == 1 ? "y" : "ies", p->o.out);
        fflush(stdout);
        struct sigaction sa = { .sa_handler = on_stop };
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        /* A job whose launch was killed leaves orphans: they come to us. */
        prctl(PR_SET_CHILD_SUBREAPER, 1);
    }
    for (int i = 0; code == 0 && i < p->nruns && !g_stop; i++) {
        cmp_run_t *r = &p->runs[i];
        char stem[sizeof r->stem]; /* gcc -O0 sees r->log and r->stem overlap */
        memcpy(stem, r->stem, sizeof stem);
        snprintf(r->log, sizeof r->log, "%s/%s.log", p->o.out, stem);
        snprintf(r->csv, sizeof r->csv, "%s/%s.metrics.csv", p->o.out, stem);
        if (p->o.straggler[0] && !cli_compare_has_task(r, p->o.straggler))
            snprintf(r->note, sizeof r->note, "no task %s in this job: no "
                     "straggler", p->o.straggler);
        else if (p->o.link && r->kind == CMP_ONE)
            snprintf(r->note, sizeof r->note, "one process: no link to "
                     "limit");
        printf("[compare] %d/%d %s: log %s\n", i + 1, p->nruns, r->spec,
               r->log);
        fflush(stdout);
        if (cli_compare_run(&p->o, r, &g_stop) != 0) {
            code = 1;
            break;
        }
        if (succeeded(r))
            printf("[compare] %s: done in %.1f s\n", r->spec, r->wall_s);
        else if (g_stop)
            printf("[compare] %s: stopped (exit %d) after %.1f s\n", r->spec,
                   r->code, r->wall_s);
        else
            printf("[compare] %s: FAILED (exit %d) after %.1f s: see %s\n",
                   r->spec, r->code, r->wall_s, r->log);
        fflush(stdout);
    }
    if (code == 0 && g_stop) {
        fprintf(stderr, "strata: compare: interrupted (signal %d); the logs "
                "so far are in %s/\n", (int)g_stop, p->o.out);
        code = 128 + (int)g_stop;
    }
    if (code == 0)
        code = report(p) != 0 ? 1 : outcome(p);
    for (int i = 0; i < MAX_RUNS; i++)
        free(p->runs[i].ep);
    free(p->o.sets);
    free(p);
    return code < 0 ? 0 : code;
}
