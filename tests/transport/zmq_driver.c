/* zmq_driver -- runs as one rank of a zmq.so group and checks collectives.
 *
 *   zmq_driver [-p zmq.so] -r RANK -n SIZE -a ADDR0,ADDR1,... [-o key=val]...
 *              [-t group_timeout_ms] [-k SIGNAL:MS] [-c MS] [-g TAG]
 *              ACTION...
 *   zmq_driver [-p zmq.so] --list-options
 *
 * The plugin is dlopen()ed from -p, else $STRATA_PLUGIN_PATH/zmq.so. Its
 * options are filled from its own table's defaults, then -o overrides (the
 * core does this in real runs). -k: a thread sends SIGNAL (KILL, STOP) to
 * this process after MS ms. -c: a thread calls ctl(STRATA_CTL_ABORT) MS ms
 * after init. -g: the group's job tag ("" = none). Actions, in order:
 *
 *   sum:COUNT  mean:COUNT   all-reduce of integer-valued data derived from
 *                           (rank, index), checked exactly against a plain sum
 *   gsum:COUNT gmean:COUNT  the same as gradients (STRATA_OP_GRADIENT) of
 *                           fractional data over 2^-20..2^4 (the first four
 *                           elements: NaN, inf, 70000, 1e-6), checked against
 *                           the exact sum within the bound of the -o
 *                           compression given (none: float32 rounding only);
 *                           with compression some element must show it
 *   xsum:COUNT              not a gradient: integers up to 2^21 (beyond 16
 *                           bits), so the sum must stay exact whatever the
 *                           compression
 *   bcast:ROOT:COUNT        broadcast, checked against the root's data
 *   shards:COUNT mshards:COUNT  ctl REDUCE_SCATTER (sum, mean) of sum:'s
 *                           data over uneven shards (member m owns
 *                           [COUNT m^2/n^2, COUNT (m+1)^2/n^2): some empty
 *                           for tiny COUNTs), this member's shard checked
 *                           exactly, the rest overwritten; then ctl
 *                           ALL_GATHER, every element checked; the group
 *                           must offer them (shm=off)
 *   badshards:COUNT         the same with bounds that do not end at COUNT:
 *                           both ops must refuse (STRATA_EINVAL) at once,
 *                           without a collective
 *   barrier                 ctl(STRATA_CTL_BARRIER)
 *   sleep:MS
 *   rep:COUNT:ITERS         sum:COUNT ITERS times, each checked
 *   loop:COUNT              sum:COUNT until an error (for failure tests)
 *   bench:COUNT:ITERS       median time of ITERS all-reduces, to stderr
 *
 * Each checked action prints "<action> <hash of the result>" on stdout, so
 * every rank's stdout must be identical. Exit: 0 ok, 1 wrong result,
 * 2 usage or load error, 100 + (-rc) when the plugin returns rc < 0. */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <strata/kit.h>

static int g_rank;

/* ---- the host: the kit's (include/strata/kit.h), every line to stderr -- */

static void h_log(void *user, int level, const char *who, const char *line)
{
    static const char *lv[] = { "error: ", "warning: ", "", "debug: " };
    (void)user;
    fprintf(stderr, "zmq_driver[%d]: %s: %s%s\n", g_rank, who,
            level >= 0 && level <= 3 ? lv[level] : "", line);
}

/* ---- data and checks -------------------------------------------------- */

/* Integer-valued in [-511, 511]: any sum of a few is exact in float32. */
static float value(int rank, size_t i)
{
    uint64_t x = (uint64_t)i * 2654435761u + (uint64_t)rank * 977u + 12345u;
    return (float)((int)((x >> 7) % 1023u) - 511);
}

/* Gradient-like data: sign, 24-bit significand, magnitude 2^-20..2^4. */
static float grad_value(int rank, size_t i)
{
    uint64_t x = ((uint64_t)i + 1) * 0x9e3779b97f4a7c15ull
                 ^ ((uint64_t)rank + 7) * 0xc2b2ae3d27d4eb4full;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    float m = (float)(x & 0xffffff) / 16777216.0f + 0.5f;
    int e = (int)((x >> 24) % 25) - 20;
    float v = ldexpf(m, e);
    return (x >> 60) & 1 ? -v : v;
}

/* What a rank contributes to a gradient all-reduce: grad_value, but the
 * first four elements are NaN (rank 0), +inf (the last rank), 70000 (above
 * fp16's range) and 1e-6 (an fp16 subnormal). */
static int g_size;
static float grad_input(int rank, size_t i)
{
    return i == 0 ? (rank == 0 ? NAN : 1.0f)
         : i == 1 ? (rank == g_size - 1 ? INFINITY : 1.0f)
         : i == 2 ? 70000.0f : i == 3 ? 1e-6f : grad_value(rank, i);
}

static float big_value(int rank, size_t i)
{
    return value(rank, i) * 4099.0f;
}

/* The [transport.zmq] compression this rank was given (-o), for the
 * bound: 0 none, else the unit roundoff of the 16-bit format and half its
 * smallest subnormal step. */
static const char *g_comp = "none";

static uint64_t fnv1a(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct run {
    const strata_plugin_v2_t *vt;
    void *pctx;
    int rank, n;
} run_t;

static int allreduce_of(run_t *r, float *buf, size_t count, int op,
                        float (*fill)(int, size_t), uint32_t flags)
{
    for (size_t i = 0; i < count; i++)
        buf[i] = fill(r->rank, i);
    strata_op_t o = { .struct_size = sizeof o, .buf = buf, .count = count,
                      .device = STRATA_DEVICE(STRATA_DEV_CPU, 0),
                      .reduce_op = op, .flags = flags };
    return r->vt->reduce(r->pctx, &o);
}

static int allreduce(run_t *r, float *buf, size_t count, int op)
{
    return allreduce_of(r, buf, count, op, value, 0);
}

/* A gradient all-reduce against the exact sum. Each of the n - 1 hops of
 * a ring rounds a partial sum to 16 bits (relative error u), the owner
 * rounds the result (after MEAN's 1/n) once more; every float32 addition
 * adds 2^-24; below fp16's normal range a rounding costs up to 2^-25
 * absolutely, whatever the scale. So |error| <= (n + 1) (u S / d + tiny)
 * + n 2^-23 S / d, S = sum of |x_k|, d = n for MEAN, else 1. The
 * first four elements: NaN, +inf (one rank), 70000 (inf in fp16),
 * 1e-6 (an fp16 subnormal). */
static int check_grad(run_t *r, const float *buf, size_t count, int op)
{
    int fp16 = strcmp(g_comp, "fp16") == 0, bf16 = strcmp(g_comp, "bf16") == 0;
    double u = fp16 ? 0x1p-11 : bf16 ? 0x1p-8 : 0.0;
    double tiny = fp16 ? 0x1p-25 : 0.0;
    double n = r->n, div = op == STRATA_REDUCE_MEAN ? n : 1.0, worst = 0.0;
    size_t shown = 0;
    int rc = 0;

    for (size_t i = 0; i < count; i++) {
        double exact = 0.0, mag = 0.0;
        for (int k = 0; k < r->n; k++) {
            float x = grad_input(k, i);
            exact += x;
            mag += fabs(x);
        }
        exact /= div;
        double f32 = (n * 0x1p-23 * mag + 0x1p-149) / div;
        double bound = (n + 1) * (u * mag / div + tiny) + f32;
        double err = fabs((double)buf[i] - exact);
        int ok = i == 0 ? isnan(buf[i])
                 : i == 1 ? isinf(buf[i]) && buf[i] > 0
                 : i == 2 && fp16 ? isinf(buf[i]) && buf[i] > 0
                 : err <= bound;
        if (!ok && shown++ < 5) {
            fprintf(stderr, "zmq_driver[%d]: gradient element %zu of %zu: "
                    "%.9g, exact %.9g, error %.3g > bound %.3g (%s)\n",
                    r->rank, i, count, buf[i], exact, err, bound, g_comp);
            rc = 1;
        }
        if (i >= 4 && err / (f32 + 1e-300) > worst)
            worst = err / (f32 + 1e-300);
    }
    /* compression must show: some error beyond float32's own */
    if ((fp16 || bf16) && count >= 64 && worst <= 1.0) {
        fprintf(stderr, "zmq_driver[%d]: %s: no element rounded beyond "
                "float32 (%.2f): not compressed?\n", r->rank, g_comp, worst);
        rc = 1;
    }
    return rc;
}

static int check_exact(run_t *r, const float *buf, size_t count,
                       float (*fill)(int, size_t))
{
    for (size_t i = 0; i < count; i++) {
        float want = 0.0f;
        for (int k = 0; k < r->n; k++)
            want += fill(k, i);
        if (buf[i] != want) {
            fprintf(stderr, "zmq_driver[%d]: element %zu of %zu: %.9g, want "
                    "%.9g\n", r->rank, i, count, buf[i], want);
            return 1;
        }
    }
    return 0;
}

static int check_sum(run_t *r, const float *buf, size_t count, int op)
{
    for (size_t i = 0; i < count; i++) {
        float want = 0.0f;
        for (int k = 0; k < r->n; k++)
            want += value(k, i);
        if (op == STRATA_REDUCE_MEAN)
            want *= 1.0f / (float)r->n;
        if (buf[i] != want) {
            fprintf(stderr, "zmq_driver[%d]: element %zu of %zu: %g, want %g\n",
                    r->rank, i, count, buf[i], want);
            return 1;
        }
    }
    return 0;
}

/* shards:COUNT / mshards:COUNT (see the top). */
static int shards(run_t *r, const char *a, size_t count, int op)
{
    size_t *bounds = malloc(((size_t)r->n + 1) * sizeof *bounds);
    float *buf = malloc(count * sizeof(float));
    float *want = malloc(count * sizeof(float));
    int rc = buf && want && bounds ? 0 : -98;
    size_t n2 = (size_t)r->n * (size_t)r->n;
    for (int m = 0; bounds && m <= r->n; m++)
        bounds[m] = count * (size_t)m * (size_t)m / n2;
    for (size_t i = 0; rc == 0 && i < count; i++)
        buf[i] = value(r->rank, i);
    if (rc == 0) /* the all-reduce's values, from check_sum's arithmetic */
        for (size_t i = 0; i < count; i++) {
            float w = 0.0f;
            for (int k = 0; k < r->n; k++)
                w += value(k, i);
            want[i] = op == STRATA_REDUCE_MEAN ? w * (1.0f / (float)r->n) : w;
        }
    strata_op_t o = { .struct_size = sizeof o, .buf = buf, .count = count,
                      .device = STRATA_DEVICE(STRATA_DEV_CPU, 0),
                      .reduce_op = op };
    strata_shards_t sh = { .struct_size = sizeof sh, .op = &o,
                           .bounds = bounds };
    if (rc == 0)
        rc = r->vt->ctl(r->pctx, STRATA_CTL_REDUCE_SCATTER, &sh);
    size_t lo = bounds[r->rank], hi = bounds[r->rank + 1];
    for (size_t i = lo; rc == 0 && i < hi; i++)
        if (buf[i] != want[i]) {
            fprintf(stderr, "zmq_driver[%d]: %s: reduce-scatter element %zu "
                    "of shard [%zu, %zu): %g, want %g\n", r->rank, a, i, lo,
                    hi, buf[i], want[i]);
            rc = 1;
        }
    for (size_t i = 0; rc == 0 && i < count; i++)
        if (i < lo || i >= hi)
            buf[i] = -12345.0f; /* the gather must bring every other shard */
    if (rc == 0)
        rc = r->vt->ctl(r->pctx, STRATA_CTL_ALL_GATHER, &sh);
    for (size_t i = 0; rc == 0 && i < count; i++)
        if (buf[i] != want[i]) {
            fprintf(stderr, "zmq_driver[%d]: %s: all-gather element %zu: %g, "
                    "want %g\n", r->rank, a, i, buf[i], want[i]);
            rc = 1;
        }
    if (rc == 0)
        printf("%s %016llx\n", a,
               (unsigned long long)fnv1a(buf, count * sizeof(float)));
    free(buf);
    free(want);
    free(bounds);
    return rc;
}

static int do_action(run_t *r, const char *a)
{
    unsigned long long count = 0, iters = 0, ms = 0;
    int root = 0, rc = 0, op = STRATA_REDUCE_SUM;
    float *buf = NULL;

    if (strcmp(a, "barrier") == 0) {
        int slot = 0;
        rc = r->vt->ctl(r->pctx, STRATA_CTL_BARRIER, &slot);
        if (rc == 0)
            printf("barrier ok\n");
        return rc;
    }
    if (sscanf(a, "sleep:%llu", &ms) == 1) {
        usleep((useconds_t)(ms * 1000));
        return 0;
    }
    if (sscanf(a, "bench:%llu:%llu", &count, &iters) == 2 && count && iters) {
        double *t = calloc(iters, sizeof *t);
        buf = malloc(count * sizeof(float));
        for (unsigned long long k = 0; buf && t && k < iters + 2 && !rc; k++) {
            double t0 = now_s();
            rc = allreduce(r, buf, count, op);
            if (k >= 2)
                t[k - 2] = now_s() - t0;
        }
        if (!rc && t) {
            qsort(t, iters, sizeof *t, cmp_double);
            fprintf(stderr, "bench %llu bytes: median %.1f us (min %.1f)\n",
                    count * 4, t[iters / 2] * 1e6, t[0] * 1e6);
        }
        free(t);
        free(buf);
        return rc;
    }
    if (sscanf(a, "loop:%llu", &count) == 1 && count) {
        buf = malloc(count * sizeof(float));
        while (buf && rc == 0)
            rc = allreduce(r, buf, count, op);
        free(buf);
        return rc;
    }
    if (sscanf(a, "rep:%llu:%llu", &count, &iters) == 2 && count && iters) {
        buf = malloc(count * sizeof(float));
        for (unsigned long long k = 0; buf && k < iters && rc == 0; k++)
            if ((rc = allreduce(r, buf, count, op)) == 0
                && check_sum(r, buf, count, op))
                rc = 1;
        if (rc == 0 && buf)
            printf("%s %016llx\n", a,
                   (unsigned long long)fnv1a(buf, count * sizeof(float)));
        free(buf);
        return buf ? rc : -98;
    }
    int grad = strncmp(a, "gsum:", 5) == 0 || strncmp(a, "gmean:", 6) == 0;
    if ((grad || strncmp(a, "xsum:", 5) == 0)
        && sscanf(strchr(a, ':') + 1, "%llu", &count) == 1 && count
        && (buf = malloc(count * sizeof(float))) != NULL) {
        op = strncmp(a, "gmean:", 6) == 0 ? STRATA_REDUCE_MEAN
                                          : STRATA_REDUCE_SUM;
        rc = grad ? allreduce_of(r, buf, count, op, grad_input,
                                 STRATA_OP_GRADIENT)
                  : allreduce_of(r, buf, count, op, big_value, 0);
        if (rc == 0 && (grad ? check_grad(r, buf, count, op)
                             : check_exact(r, buf, count, big_value)))
            rc = 1;
        if (rc == 0)
            printf("%s %016llx\n", a,
                   (unsigned long long)fnv1a(buf, count * sizeof(float)));
        free(buf);
        return rc;
    }
    if (sscanf(a, "shards:%llu", &count) == 1 && count)
        return shards(r, a, count, STRATA_REDUCE_SUM);
    if (sscanf(a, "mshards:%llu", &count) == 1 && count)
        return shards(r, a, count, STRATA_REDUCE_MEAN);
    if (sscanf(a, "badshards:%llu", &count) == 1 && count) {
        size_t bounds[65] = { 0 };
        float x[1] = { 0 };
        for (int m = 1; m <= r->n && m < 65; m++)
            bounds[m] = count + 1; /* past the buffer's end */
        strata_op_t o = { .struct_size = sizeof o, .buf = x, .count = count,
                          .device = STRATA_DEVICE(STRATA_DEV_CPU, 0) };
        strata_shards_t sh = { .struct_size = sizeof sh, .op = &o,
                               .bounds = bounds };
        int e1 = r->vt->ctl(r->pctx, STRATA_CTL_REDUCE_SCATTER, &sh);
        int e2 = r->vt->ctl(r->pctx, STRATA_CTL_ALL_GATHER, &sh);
        if (e1 != STRATA_EINVAL || e2 != STRATA_EINVAL) {
            fprintf(stderr, "zmq_driver[%d]: %s: %d and %d, want EINVAL\n",
                    r->rank, a, e1, e2);
            return 1;
        }
        printf("%s refused\n", a);
        return 0;
    }
    int kind = 0;
    if (sscanf(a, "sum:%llu", &count) == 1)
        kind = 1;
    else if (sscanf(a, "mean:%llu", &count) == 1)
        kind = 1, op = STRATA_REDUCE_MEAN;
    else if (sscanf(a, "bcast:%d:%llu", &root, &count) == 2)
        kind = 2;
    if (!kind || count == 0 || (buf = malloc(count * sizeof(float))) == NULL) {
        fprintf(stderr, "zmq_driver: bad action '%s'\n", a);
        return -98; /* exit 198 */
    }
    if (kind == 1) {
        rc = allreduce(r, buf, count, op);
        if (rc == 0 && check_sum(r, buf, count, op))
            rc = 1;
    } else {
        for (size_t i = 0; i < count; i++)
            buf[i] = r->rank == root ? value(root, i) : -1.0f;
        strata_op_t o = { .struct_size = sizeof o, .buf = buf, .count = count,
                          .device = STRATA_DEVICE(STRATA_DEV_CPU, 0),
                          .root = root };
        rc = r->vt->update(r->pctx, &o);
        for (size_t i = 0; rc == 0 && i < count; i++)
            if (buf[i] != value(root, i)) {
                fprintf(stderr, "zmq_driver[%d]: bcast element %zu wrong\n",
                        r->rank, i);
                rc = 1;
            }
    }
    if (rc == 0)
        printf("%s %016llx\n", a,
               (unsigned long long)fnv1a(buf, count * sizeof(float)));
    free(buf);
    return rc;
}

/* ---- main -------------------------------------------------------------- */

static int g_die_sig, g_die_ms, g_cancel_ms = -1;

static void *cancel_later(void *arg)
{
    run_t *r = arg;
    usleep((useconds_t)g_cancel_ms * 1000);
    r->vt->ctl(r->pctx, STRATA_CTL_ABORT, NULL);
    return NULL;
}

static void *die_later(void *arg)
{
    usleep((useconds_t)g_die_ms * 1000);
    kill(getpid(), g_die_sig);
    return NULL;
}

static char **split(char *s, int *n)
{
    char **v = calloc(strlen(s) + 2, sizeof *v);
    *n = 0;
    for (char *tok = strtok(s, ","); v && tok; tok = strtok(NULL, ","))
        v[(*n)++] = tok;
    return v;
}

static const char *plugin_path(const char *arg, char *buf, size_t len)
{
    const char *dir = getenv("STRATA_PLUGIN_PATH");
    if (arg)
        return arg;
    if (dir == NULL)
        return "zmq.so";
    snprintf(buf, len, "%.*s/zmq.so", (int)strcspn(dir, ":"), dir);
    return buf;
}

int main(int argc, char **argv)
{
    const char *plugin = NULL;
    char *addrs = NULL, *over[32], pbuf[4096];
    const char *tag = "zmq-driver-job";
    int nover = 0, list = 0, group_timeout = 0, i;
    run_t r = { 0 };

    r.n = 1;
    for (i = 1; i < argc && argv[i][0] == '-'; i++) {
        const char *o = argv[i];
        if (strcmp(o, "--list-options") == 0) { list = 1; continue; }
        if (i + 1 >= argc)
            break;
        const char *v = argv[++i];
        if (strcmp(o, "-p") == 0) plugin = v;
        else if (strcmp(o, "-r") == 0) r.rank = atoi(v);
        else if (strcmp(o, "-n") == 0) r.n = atoi(v);
        else if (strcmp(o, "-a") == 0) addrs = (char *)v;
        else if (strcmp(o, "-o") == 0 && nover < 32) over[nover++] = (char *)v;
        else if (strcmp(o, "-t") == 0) group_timeout = atoi(v);
        else if (strcmp(o, "-c") == 0) g_cancel_ms = atoi(v);
        else if (strcmp(o, "-g") == 0) tag = v[0] ? v : NULL;
        else if (strcmp(o, "-k") == 0) {
            char sig[16] = "";
            if (sscanf(v, "%15[A-Z]:%d", sig, &g_die_ms) != 2) break;
            g_die_sig = strcmp(sig, "STOP") == 0 ? SIGSTOP : SIGKILL;
        } else break;
    }
    g_rank = r.rank;
    g_size = r.n;
    for (int k = 0; k < nover; k++)
        if (strncmp(over[k], "compression=", 12) == 0)
            g_comp = over[k] + 12;
    const char *path = plugin_path(plugin, pbuf, sizeof pbuf);
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (dl == NULL) {
        fprintf(stderr, "zmq_driver: %s\n", dlerror());
        return 2;
    }
    r.vt = dlsym(dl, STRATA_PLUGIN_SYMBOL);
    if (r.vt == NULL || r.vt->hdr.abi_major != STRATA_ABI_MAJOR
        || r.vt->hdr.kind != STRATA_KIND_TRANSPORT) {
        fprintf(stderr, "zmq_driver: %s: not a v2 transport plugin\n", path);
        return 2;
    }
    if (list) {
        for (const strata_option_t *o = r.vt->options; o && o->key; o++)
            printf("%s\n", o->key);
        return 0;
    }
    int naddr = 0;
    char **addr = addrs ? split(addrs, &naddr) : NULL;
    if (naddr != r.n || r.rank < 0 || r.rank >= r.n || i > argc) {
        fprintf(stderr, "usage: see the comment at the top of zmq_driver.c\n");
        return 2;
    }
    char **names = calloc((size_t)r.n, sizeof *names);
    for (int k = 0; names && k < r.n; k++) {
        names[k] = malloc(32);
        snprintf(names[k], 32, "worker:%d", k);
    }
    /* the plugin's options: its table's defaults, then -o (as the core) */
    void *cfg = NULL;
    strata_kit_t *kit = NULL;
    strata_kit_config_t kc = STRATA_KIT_CONFIG_INIT;
    kc.log = h_log;
    if (strata_kit_cfg(r.vt, (const char *const *)over, nover, &cfg) != 0 ||
        strata_kit_host(&kc, &kit) != 0 || names == NULL)
        return 2;
    strata_group_t g = { .struct_size = sizeof g, .scope = STRATA_SCOPE_WORLD,
                         .size = r.n, .rank = r.rank, .nlocal = 1,
                         .timeout_ms = group_timeout,
                         .addrs = (const char *const *)addr,
                         .names = (const char *const *)names,
                         .tag = tag };
    strata_env_t env = { .struct_size = sizeof env,
                         .kind = STRATA_KIND_TRANSPORT, .cfg = cfg,
                         .section = "transport", .group = &g };
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (g_die_sig) {
        pthread_t th;
        pthread_create(&th, NULL, die_later, NULL);
        pthread_detach(th);
    }
    int rc = r.vt->init(strata_kit_table(kit), strata_kit_hctx(kit), &env,
                        &r.pctx);
    pthread_t canceler;
    int canceling = rc == 0 && g_cancel_ms >= 0
                    && pthread_create(&canceler, NULL, cancel_later, &r) == 0;
    for (; rc == 0 && i < argc; i++)
        rc = do_action(&r, argv[i]);
    if (canceling)
        pthread_join(canceler, NULL);
    if (r.pctx)
        r.vt->fini(r.pctx);
    for (int k = 0; k < r.n; k++)
        free(names[k]);
    free(names);
    free(addr);
    free(cfg);
    strata_kit_free(kit);
    dlclose(dl);
    if (rc < 0)
        fprintf(stderr, "zmq_driver[%d]: exit with code %d\n", r.rank, rc);
    return rc < 0 ? 100 - rc : rc;
}
