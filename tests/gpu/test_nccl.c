/* nccl.so against its contract, loaded with dlopen like the core does.
 *
 * Everywhere: the header and option table, and init declining groups that
 * are not NCCL's (CPU members, a WORLD group with two members in one
 * process, and any GPU group on a machine without one). With a CUDA
 * device: LOCAL groups of one GPU and of every GPU (one thread per member):
 * SUM exact on integer-valued data, MEAN, broadcast, barrier, members
 * bitwise equal; a WORLD group of one process (also reducing a host
 * buffer, staged through the GPU); where two GPUs exist, a
 * WORLD group of two processes (this program again, `--world RANK PORT`),
 * the unique id travelling over ZeroMQ, and a WORLD group whose second
 * rank never comes: init fails within the timeout naming it.
 * Without a device the GPU part is skipped (exit 77) with the reason. */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include <strata/kit.h>

#include "check.h"
#include "spawn.h"
#include "cuda/kernels_cuda.h"

static const strata_plugin_v2_t *g_vt;
static pthread_mutex_t g_log_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_last_error[2048];

/* ---- the host: the kit's (include/strata/kit.h), scale on a GPU -------- */

static void h_log(void *user, int level, const char *who, const char *line)
{
    (void)user;
    fprintf(stderr, "test_nccl: %s: %s%s\n", who,
            level == STRATA_LOG_ERROR ? "error: " : "", line);
    if (level == STRATA_LOG_ERROR) {
        pthread_mutex_lock(&g_log_lock);
        snprintf(g_last_error, sizeof g_last_error, "%s", line);
        pthread_mutex_unlock(&g_log_lock);
    }
}

/* nccl.so's only arithmetic: MEAN's scale, on the member's GPU. */
static int h_scale(void *user, int32_t d, size_t n, float a, float *x)
{
    (void)user;
    if (STRATA_DEVICE_TYPE(d) != STRATA_DEV_GPU ||
        kg_set_device(STRATA_DEVICE_INDEX(d)) || kg_scale(n, a, x, NULL) ||
        kg_stream_sync(NULL))
        return STRATA_EDEVICE;
    return STRATA_OK;
}

static strata_kit_t *g_kit;

static int make_host(void)
{
    static const strata_kit_device_t dev = { .scale = h_scale };
    strata_kit_config_t kc = STRATA_KIT_CONFIG_INIT;
    kc.log = h_log;
    kc.device = &dev;
    return strata_kit_host(&kc, &g_kit);
}

/* ---- loading and instances ------------------------------------------------ */

typedef struct cfg { double timeout_s; } cfg_t; /* nccl.so's option struct */
static cfg_t g_cfg = { 60.0 };

static int load(void)
{
    const char *dir = getenv("STRATA_PLUGIN_PATH");
    char path[4096];
    snprintf(path, sizeof path, "%s/nccl.so", dir && *dir ? dir : ".");
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        fprintf(stderr, "test_nccl: %s\n", dlerror());
        return -1;
    }
    g_vt = dlsym(dl, STRATA_PLUGIN_SYMBOL);
    return g_vt && make_host() == STRATA_OK ? 0 : -1;
}

static const char *const *g_keys; /* public_keys of the next group */

static int open_group(int scope, int size, int rank, int nlocal,
                      const int32_t *devices, const char *const *addrs,
                      const char *const *names, int timeout_ms, void **pctx)
{
    static strata_group_t g;
    static strata_env_t env;
    g = (strata_group_t){ .struct_size = sizeof g, .scope = scope,
                          .size = size, .rank = rank, .nlocal = nlocal,
                          .timeout_ms = timeout_ms, .devices = devices,
                          .addrs = addrs, .names = names, .tag = "test",
                          .public_keys = g_keys,
                          .secret_key = g_keys ? g_keys[rank] : NULL };
    env = (strata_env_t){ .struct_size = sizeof env,
                          .kind = STRATA_KIND_TRANSPORT, .cfg = &g_cfg,
                          .section = "transport", .group = &g,
                          .nreplicas = nlocal, .devices = devices };
    return g_vt->init(strata_kit_table(g_kit), strata_kit_hctx(g_kit), &env,
                      pctx);
}

/* ---- data and checks ---------------------------------------------------- */

/* Integer-valued in [-511, 511]: sums of a few are exact in float32. */
static float value(int rank, size_t i)
{
    uint64_t x = (uint64_t)i * 2654435761u + (uint64_t)rank * 977u + 12345u;
    return (float)((int)((x >> 7) % 1023u) - 511);
}

typedef struct member {
    void    *pctx;
    int      slot, rank, size, dev;
    size_t   count;
    float   *d;        /* device buffer */
    float   *h;        /* host copy of the result */
    int      rc;
    int      bad;      /* elements off */
} member_t;

static int to_dev(member_t *m)
{
    float *h = malloc(m->count ? m->count * sizeof *h : 1);
    for (size_t i = 0; h && i < m->count; i++)
        h[i] = value(m->rank, i);
    int rc = !h || kg_set_device(m->dev) ||
             kg_memcpy_h2d(m->d, h, m->count * sizeof *h, NULL) ||
             kg_stream_sync(NULL);
    free(h);
    return rc ? -1 : 0;
}

static int to_host(member_t *m)
{
    return kg_set_device(m->dev) ||
           kg_memcpy_d2h(m->h, m->d, m->count * sizeof *m->h, NULL) ||
           kg_stream_sync(NULL) ? -1 : 0;
}

/* One member's turn: SUM, MEAN, broadcast from the last rank, barrier;
 * each result checked against plain arithmetic on the host. */
static void *member_main(void *arg)
{
    member_t *m = arg;
    strata_op_t op = { .struct_size = sizeof op, .slot = m->slot, .buf = m->d,
                       .count = m->count,
                       .device = STRATA_DEVICE(STRATA_DEV_GPU, m->dev) };
    m->rc = kg_set_device(m->dev) ? STRATA_EDEVICE : STRATA_OK;
    for (int pass = 0; pass < 3 && m->rc == STRATA_OK; pass++) {
        if (to_dev(m) != 0) {
            m->rc = STRATA_EDEVICE;
            break;
        }
        op.reduce_op = pass == 1 ? STRATA_REDUCE_MEAN : STRATA_REDUCE_SUM;
        op.root = m->size - 1;
        m->rc = pass < 2 ? g_vt->reduce(m->pctx, &op)
                         : g_vt->update(m->pctx, &op);
        if (m->rc != STRATA_OK || to_host(m) != 0)
            break;
        for (size_t i = 0; i < m->count; i++) {
            double want = 0;
            for (int r = 0; r < m->size; r++)
                want += value(r, i);
            if (pass == 1)
                want /= m->size;
            if (pass == 2)
                want = value(m->size - 1, i);
            double tol = pass == 1 ? 1e-6 * (1.0 + (want < 0 ? -want : want)) : 0;
            double d = m->h[i] - want;
            m->bad += (d < 0 ? -d : d) > tol;
        }
    }
    if (m->rc == STRATA_OK) {
        int slot = m->slot;
        m->rc = g_vt->ctl(m->pctx, STRATA_CTL_BARRIER, &slot);
    }
    return NULL;
}

/* A LOCAL group of `n` GPUs (0..n-1), one thread per member. */
static void local_group(int n, size_t count)
{
    int32_t devs[64] = { 0 };
    member_t m[64];
    pthread_t th[64];
    void *pctx = NULL;
    for (int i = 0; i < n; i++)
        devs[i] = STRATA_DEVICE(STRATA_DEV_GPU, i);
    int rc = open_group(STRATA_SCOPE_LOCAL, n, 0, n, devs, NULL, NULL, 0,
                        &pctx);
    CHECKF(rc == STRATA_OK, "LOCAL group of %d GPUs: init: %d", n, rc);
    if (rc != STRATA_OK)
        return;
    for (int i = 0; i < n; i++) {
        m[i] = (member_t){ .pctx = pctx, .slot = i, .rank = i, .size = n,
                           .dev = i, .count = count };
        m[i].h = malloc(count ? count * sizeof(float) : 1);
        CHECK(kg_set_device(i) == 0 &&
              kg_malloc((void **)&m[i].d, count * sizeof(float), NULL) == 0 &&
              kg_stream_sync(NULL) == 0);
    }
    for (int i = 0; i < n; i++)
        pthread_create(&th[i], NULL, member_main, &m[i]);
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < n; i++) {
        CHECKF(m[i].rc == STRATA_OK, "LOCAL %d GPUs, member %d: rc %d", n, i,
               m[i].rc);
        CHECKF(m[i].bad == 0, "LOCAL %d GPUs, member %d: %d wrong elements",
               n, i, m[i].bad);
        CHECKF(memcmp(m[i].h, m[0].h, count * sizeof(float)) == 0,
               "LOCAL %d GPUs: member %d differs from member 0", n, i);
    }
    g_vt->fini(pctx);
    for (int i = 0; i < n; i++) {
        kg_set_device(i);
        kg_free(m[i].d, NULL);
        kg_stream_sync(NULL);
        free(m[i].h);
    }
    printf("LOCAL group of %d GPU(s), %zu floats: done\n", n, count);
}

/* One rank of a WORLD group of `size` processes on 127.0.0.1:port.. */
static int world_rank(int rank, int size, int port, int timeout_ms)
{
    char a[8][64];
    const char *addrs[8], *names[8];
    for (int r = 0; r < size && r < 8; r++) {
        snprintf(a[r], sizeof a[r], "127.0.0.1:%d", port + 2 * r);
        addrs[r] = a[r];
        names[r] = r == 0 ? "chief:0" : "worker:1";
    }
    int32_t dev = STRATA_DEVICE(STRATA_DEV_GPU, rank);
    void *pctx = NULL;
    int rc = open_group(STRATA_SCOPE_WORLD, size, rank, 1, &dev, addrs, names,
                        timeout_ms, &pctx);
    if (rc != STRATA_OK)
        return rc;
    member_t m = { .pctx = pctx, .slot = 0, .rank = rank, .size = size,
                   .dev = rank, .count = 100003 };
    m.h = malloc(m.count * sizeof(float));
    if (kg_set_device(rank) ||
        kg_malloc((void **)&m.d, m.count * sizeof(float), NULL) ||
        kg_stream_sync(NULL))
        m.rc = STRATA_EDEVICE;
    else
        member_main(&m);
    /* A host buffer (mwms's metric sums) is staged through the GPU. */
    float hb[3] = { (float)rank + 1, 2, -1 };
    strata_op_t op = { .struct_size = sizeof op, .buf = hb, .count = 3,
                       .device = STRATA_DEVICE(STRATA_DEV_CPU, 0),
                       .reduce_op = STRATA_REDUCE_SUM };
    int hrc = g_vt->reduce(pctx, &op);
    float want0 = (float)(size * (size + 1) / 2);
    if (m.rc == STRATA_OK && (hrc != STRATA_OK || hb[0] != want0 ||
                              hb[1] != 2.0f * (float)size ||
                              hb[2] != -(float)size)) {
        fprintf(stderr, "host buffer: rc %d, %g %g %g\n", hrc, hb[0], hb[1],
                hb[2]);
        m.bad++;
    }
    g_vt->fini(pctx);
    kg_free(m.d, NULL);
    free(m.h);
    return m.rc != STRATA_OK ? m.rc : m.bad ? 1 : 0;
}

/* ---- without a GPU too ------------------------------------------------------- */

/* The README's option table lists exactly the plugin's keys. */
static void check_readme(void)
{
    const char *src = getenv("STRATA_SRC");
    char path[4096];
    if (!src)
        return;
    snprintf(path, sizeof path, "%s/plugins/transport/nccl/README.md", src);
    FILE *f = fopen(path, "rb");
    static char readme[65536];
    size_t n = f ? fread(readme, 1, sizeof readme - 1, f) : 0;
    if (f)
        fclose(f);
    readme[n] = '\0';
    CHECKF(n > 0, "%s: unreadable", path);
    int nkeys = 0, nrows = 0;
    for (const strata_option_t *o = g_vt->options; o && o->key; o++, nkeys++) {
        char want[128];
        snprintf(want, sizeof want, "| `%s` |", o->key);
        CHECKF(strstr(readme, want) != NULL, "README lacks a row for %s",
               o->key);
    }
    char *sec = strstr(readme, "\n## Options"), *end;
    if (sec && (end = strstr(sec + 1, "\n## ")) != NULL)
        *end = '\0';
    for (char *q = sec; q && (q = strstr(q + 1, "\n| `")) != NULL;)
        nrows++;
    CHECKF(nrows == nkeys, "README has %d option rows, the table %d keys",
           nrows, nkeys);
}

static void declines(int gpus)
{
    CHECK(g_vt->hdr.kind == STRATA_KIND_TRANSPORT);
    CHECK(strcmp(g_vt->hdr.name, "nccl") == 0);
    CHECK(g_vt->options && g_vt->options[0].key &&
          strcmp(g_vt->options[0].key, "timeout_s") == 0 &&
          g_vt->options[0].type == STRATA_OPT_FLOAT &&
          strcmp(g_vt->options[0].def, "60") == 0 && !g_vt->options[1].key);
    CHECK(g_vt->cfg_size == sizeof(cfg_t));
    check_readme();

    void *pctx = NULL;
    int32_t cpus[2] = { STRATA_DEVICE(STRATA_DEV_CPU, 0),
                        STRATA_DEVICE(STRATA_DEV_CPU, 1) };
    CHECK(open_group(STRATA_SCOPE_LOCAL, 2, 0, 2, cpus, NULL, NULL, 0,
                     &pctx) == STRATA_EDECLINE && pctx == NULL);
    int32_t gpu2[2] = { STRATA_DEVICE(STRATA_DEV_GPU, 0),
                        STRATA_DEVICE(STRATA_DEV_GPU, 1) };
    const char *addrs[2] = { "127.0.0.1:1", "127.0.0.1:2" };
    CHECK(open_group(STRATA_SCOPE_WORLD, 2, 0, 2, gpu2, addrs, NULL, 0,
                     &pctx) == STRATA_EDECLINE && pctx == NULL);
    /* A secured group (the core handed it keys): NCCL cannot authenticate
     * its connections, so it declines before touching a GPU. */
    static const char *const keys[2] = {
        "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7", /* any 40 Z85 chars */
        "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID" };
    g_keys = keys;
    CHECK(open_group(STRATA_SCOPE_WORLD, 2, 0, 1, gpu2, addrs, NULL, 0,
                     &pctx) == STRATA_EDECLINE && pctx == NULL);
    g_keys = NULL;
    if (gpus == 0)
        CHECK(open_group(STRATA_SCOPE_LOCAL, 1, 0, 1, gpu2, NULL, NULL, 0,
                         &pctx) == STRATA_EDECLINE && pctx == NULL);
}

int main(int argc, char **argv)
{
    if (load() != 0) {
        fprintf(stderr, "test_nccl: cannot load nccl.so\n");
        return 1;
    }
    if (argc == 4 && strcmp(argv[1], "--world") == 0)
        return world_rank(atoi(argv[2]), 2, atoi(argv[3]), 30000);

    int gpus = 0;
    if (kg_device_count(&gpus) != 0)
        gpus = 0;
    declines(gpus);
    if (gpus == 0) {
        if (check_failed_)
            return CHECK_DONE();
        printf("%d passed, 0 failed (without a GPU)\n", check_passed_);
        CHECK_SKIP("no CUDA device: %s", kg_last_error());
    }

    local_group(1, 1000);
    local_group(1, 0);
    local_group(gpus < 8 ? gpus : 8, 1 << 20);

    int port = spawn_free_port();
    CHECKF(world_rank(0, 1, port, 30000) == 0, "WORLD group of one process");

    if (gpus < 2) {
        printf("SKIPPED part: WORLD groups of two processes need two GPUs\n");
        return CHECK_DONE();
    }
    /* Two processes, one GPU each. */
    char ps[16];
    snprintf(ps, sizeof ps, "%d", spawn_free_port());
    spawn_child_t kid[2];
    for (int r = 0; r < 2; r++) {
        char rs[8];
        snprintf(rs, sizeof rs, "%d", r);
        char *av[] = { argv[0], "--world", rs, ps, NULL };
        CHECK(spawn_start(av, NULL, &kid[r]) == 0);
    }
    for (int r = 0; r < 2; r++) {
        static char out[65536], err[65536];
        spawn_wait(&kid[r], 90);
        spawn_collect(&kid[r], out, sizeof out, err, sizeof err);
        CHECKF(kid[r].code == 0, "WORLD rank %d exited %d:\n%s", r,
               kid[r].code, err);
    }
    /* Rank 1 never comes: rank 0 gives up within its 2 s, naming it. */
    double t0 = (double)time(NULL);
    int rc = world_rank(0, 2, spawn_free_port(), 2000);
    double took = (double)time(NULL) - t0;
    CHECKF(rc == STRATA_ETIMEDOUT, "lonely rank 0: rc %d", rc);
    CHECKF(took < 10, "lonely rank 0 took %.0f s", took);
    CHECKF(strstr(g_last_error, "worker:1") != NULL, "error names no peer: %s",
           g_last_error);
    return CHECK_DONE();
}
