/* The transport conformance suite (plugin ABI 2.5): what any transport
 * must do, driven through the HOST entries a strategy calls (t_reduce,
 * t_update, t_reduce_scatter, t_all_gather, t_barrier, t_caps, and the
 * frozen t_ctl road of 2.4), so the host's argument checks are part of it.
 *
 *   all-reduce SUM and MEAN on 0, 1, 3, 17 and 4099 elements, exact (the
 *     values are small integers and the member count a power of two);
 *   broadcast from every root;
 *   reduce-scatter then all-gather over uneven shards, some empty, where
 *     t_caps says STRATA_CAP_SHARDS; else both give STRATA_ENOTSUP;
 *   barrier, through the entry and through the 2.4 ctl op;
 *   the refusals -- bad reduce_op, root out of range, bounds not
 *     ascending / not ending at the count / NULL, NULL buf, NULL op, a
 *     slot that is not a member -- each exactly STRATA_EINVAL, the same on
 *     every transport, and the group still works afterwards.
 *
 * Usage: transport_conformance local | zmq | zmq-shm | nccl | nccl-fake |
 *                              nccl-fake-world
 *   local:   4 replica threads of this process, one LOCAL group;
 *   zmq:     2 processes (fork), a WORLD group over 127.0.0.1, shm off;
 *   zmq-shm: the same through shared memory (no shards: ENOTSUP);
 *   zmq-secured: zmq's group secured as a job's is (CURVE keys), with
 *            its default bulk_cipher = aes256gcm: the collectives' data
 *            as AES-256-GCM records on the direct sockets;
 *   nccl:    needs nccl.so and a GPU: else SKIPPED, exit 77;
 *   nccl-fake: the nccl.so that STRATA_PLUGIN_PATH finds first, on 4
 *            GPUs, one LOCAL group; it must open (no skip). ctest points
 *            it at the real plugin's sources linked against
 *            tests/transport/fake_nccl.c (CPU "GPUs", real collectives);
 *   nccl-fake-world: the same plugin, a WORLD group of 2 members, each a
 *            thread of this process with its own context (so the fake's
 *            ranks meet), the NCCL id handed out over ZeroMQ. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <zmq.h>
#include <unistd.h>

#include "runtime.h"

#define H strata__host_v2
#define MAXN 8

static atomic_int g_pass, g_fail;

typedef struct member {
    strata_ctx_t       *ctx;
    strata_transport_t *t;
    int n;      /* group size                             */
    int rank;   /* member index in the group              */
    int slot;   /* op->slot: the rank in a LOCAL group, 0 */
    int nslot;  /* members that call from this process    */
    const char *name;
} member_t;

static void check(const member_t *m, int ok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void check(const member_t *m, int ok, const char *fmt, ...)
{
    atomic_fetch_add(ok ? &g_pass : &g_fail, 1);
    if (ok && m->rank != 0)
        return; /* one line per check: member 0's */
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("%s - %s [member %d]: %s\n", ok ? "ok" : "not ok", m->name,
           m->rank, msg);
    fflush(stdout);
}

static float value(int member, size_t i) { return (float)((member + 1) * (int)(i % 7 + 1)); }

static strata_op_t op_of(const member_t *m, float *buf, size_t count)
{
    return (strata_op_t){ .struct_size = sizeof(strata_op_t), .slot = m->slot,
                          .buf = buf, .count = count,
                          .device = STRATA_DEVICE(STRATA_DEV_CPU, 0) };
}

static void allreduce(member_t *m, size_t count, int mean)
{
    float *buf = malloc((count ? count : 1) * sizeof *buf);
    for (size_t i = 0; i < count; i++)
        buf[i] = value(m->rank, i);
    strata_op_t op = op_of(m, count ? buf : NULL, count);
    op.reduce_op = mean ? STRATA_REDUCE_MEAN : STRATA_REDUCE_SUM;
    int rc = H.t_reduce(&m->ctx->hc, m->t, &op);
    size_t bad = 0;
    float tri = (float)(m->n * (m->n + 1) / 2);
    for (size_t i = 0; rc == STRATA_OK && i < count; i++) {
        float want = (float)(i % 7 + 1) * tri;
        if (mean)
            want /= (float)m->n;
        bad += buf[i] != want;
    }
    check(m, rc == STRATA_OK && bad == 0, "all-reduce %s of %zu: rc %d, "
          "%zu wrong", mean ? "MEAN" : "SUM", count, rc, bad);
    free(buf);
}

static void broadcast(member_t *m, size_t count, int root)
{
    float *buf = malloc((count ? count : 1) * sizeof *buf);
    for (size_t i = 0; i < count; i++)
        buf[i] = m->rank == root ? value(root, i) : -1.0f;
    strata_op_t op = op_of(m, count ? buf : NULL, count);
    op.root = root;
    int rc = H.t_update(&m->ctx->hc, m->t, &op);
    size_t bad = 0;
    for (size_t i = 0; rc == STRATA_OK && i < count; i++)
        bad += buf[i] != value(root, i);
    check(m, rc == STRATA_OK && bad == 0, "broadcast of %zu from root %d: "
          "rc %d, %zu wrong", count, root, rc, bad);
    free(buf);
}

/* Member k owns [count k^2 / n^2, count (k+1)^2 / n^2): uneven, and empty
 * for the first members when count is small. */
static void uneven(size_t count, int n, size_t *bounds)
{
    for (int k = 0; k <= n; k++)
        bounds[k] = count * (size_t)(k * k) / (size_t)(n * n);
}

static void halves(member_t *m, size_t count, int shards)
{
    size_t bounds[MAXN + 1];
    uneven(count, m->n, bounds);
    float *buf = malloc((count ? count : 1) * sizeof *buf);
    for (size_t i = 0; i < count; i++)
        buf[i] = value(m->rank, i);
    strata_op_t op = op_of(m, count ? buf : NULL, count);
    op.reduce_op = STRATA_REDUCE_SUM;
    int rc = H.t_reduce_scatter(&m->ctx->hc, m->t, &op, bounds);
    if (!shards) {
        check(m, rc == STRATA_ENOTSUP, "reduce-scatter without "
              "STRATA_CAP_SHARDS: rc %d, want STRATA_ENOTSUP", rc);
        rc = H.t_all_gather(&m->ctx->hc, m->t, &op, bounds);
        check(m, rc == STRATA_ENOTSUP, "all-gather without "
              "STRATA_CAP_SHARDS: rc %d, want STRATA_ENOTSUP", rc);
        free(buf);
        return;
    }
    size_t lo = bounds[m->rank], hi = bounds[m->rank + 1], bad = 0;
    float tri = (float)(m->n * (m->n + 1) / 2);
    for (size_t i = lo; rc == STRATA_OK && i < hi; i++)
        bad += buf[i] != (float)(i % 7 + 1) * tri;
    check(m, rc == STRATA_OK && bad == 0, "reduce-scatter of %zu (shard "
          "[%zu, %zu)): rc %d, %zu wrong", count, lo, hi, rc, bad);
    /* Each member's shard holds its value; the rest is garbage to fill. */
    for (size_t i = 0; i < count; i++)
        buf[i] = i >= lo && i < hi ? (float)i : -7.0f;
    rc = H.t_all_gather(&m->ctx->hc, m->t, &op, bounds);
    bad = 0;
    for (size_t i = 0; rc == STRATA_OK && i < count; i++)
        bad += buf[i] != (float)i;
    check(m, rc == STRATA_OK && bad == 0, "all-gather of %zu: rc %d, %zu "
          "wrong", count, rc, bad);
    free(buf);
}

/* Every refusal is the host's, before any transport call: no collective
 * starts, so the members need not agree on the order. */
static void refusals(member_t *m)
{
    strata_hctx_t *hc = &m->ctx->hc;
    float x[8] = { 0 };
    size_t bounds[MAXN + 1];
    strata_op_t op = op_of(m, x, 8);
    int rc;

    op.reduce_op = 7;
    rc = H.t_reduce(hc, m->t, &op);
    check(m, rc == STRATA_EINVAL, "all-reduce with reduce_op 7: rc %d", rc);
    rc = H.t_reduce_scatter(hc, m->t, &op, (uneven(8, m->n, bounds), bounds));
    check(m, rc == STRATA_EINVAL, "reduce-scatter with reduce_op 7: rc %d",
          rc);
    op.reduce_op = -1;
    rc = H.t_reduce(hc, m->t, &op);
    check(m, rc == STRATA_EINVAL, "all-reduce with reduce_op -1: rc %d", rc);
    op.reduce_op = STRATA_REDUCE_SUM;

    op.buf = NULL;
    rc = H.t_reduce(hc, m->t, &op);
    check(m, rc == STRATA_EINVAL, "all-reduce of 8 from a NULL buf: rc %d",
          rc);
    rc = H.t_update(hc, m->t, &op);
    check(m, rc == STRATA_EINVAL, "broadcast of 8 from a NULL buf: rc %d", rc);
    op.buf = x;
    rc = H.t_reduce(hc, m->t, NULL);
    check(m, rc == STRATA_EINVAL, "all-reduce of a NULL op: rc %d", rc);

    for (int root = -1; root <= m->n; root += m->n + 1) {
        op.root = root;
        rc = H.t_update(hc, m->t, &op);
        check(m, rc == STRATA_EINVAL, "broadcast from root %d of %d: rc %d",
              root, m->n, rc);
    }
    op.root = 0;

    uneven(8, m->n, bounds);
    bounds[m->n] = 9; /* past the count */
    rc = H.t_reduce_scatter(hc, m->t, &op, bounds);
    check(m, rc == STRATA_EINVAL, "reduce-scatter, bounds end at 9 of 8: "
          "rc %d", rc);
    rc = H.t_all_gather(hc, m->t, &op, bounds);
    check(m, rc == STRATA_EINVAL, "all-gather, bounds end at 9 of 8: rc %d",
          rc);
    uneven(8, m->n, bounds);
    bounds[1] = 9; /* > bounds[2], while bounds[n] is 8 (n > 1) */
    rc = H.t_all_gather(hc, m->t, &op, bounds);
    check(m, rc == STRATA_EINVAL, "all-gather, bounds not ascending: rc %d",
          rc);
    rc = H.t_reduce_scatter(hc, m->t, &op, NULL);
    check(m, rc == STRATA_EINVAL, "reduce-scatter, bounds NULL: rc %d", rc);
    /* The frozen 2.4 road takes the same checks. */
    strata_shards_t sh = { .struct_size = sizeof sh, .op = &op,
                           .bounds = bounds };
    rc = H.t_ctl(hc, m->t, STRATA_CTL_ALL_GATHER, &sh);
    check(m, rc == STRATA_EINVAL, "ctl ALL_GATHER (2.4), bounds not "
          "ascending: rc %d", rc);

    rc = H.t_barrier(hc, m->t, m->nslot);
    check(m, rc == STRATA_EINVAL, "barrier of slot %d (members here: %d): "
          "rc %d", m->nslot, m->nslot, rc);
    if (m->nslot > 1) {
        op.slot = m->nslot;
        rc = H.t_reduce(hc, m->t, &op);
        check(m, rc == STRATA_EINVAL, "all-reduce from slot %d: rc %d",
              m->nslot, rc);
    }
}

static void suite(member_t *m)
{
    static const size_t k_sizes[] = { 0, 1, 3, 17, 4099 };
    uint32_t caps = H.t_caps(&m->ctx->hc, m->t);
    refusals(m);
    for (size_t k = 0; k < sizeof k_sizes / sizeof k_sizes[0]; k++) {
        allreduce(m, k_sizes[k], 0);
        allreduce(m, k_sizes[k], 1);
    }
    for (int root = 0; root < m->n; root++) {
        broadcast(m, 17, root);
        broadcast(m, root == 0 ? 0 : 1, root);
    }
    for (size_t k = 0; k < sizeof k_sizes / sizeof k_sizes[0]; k++)
        halves(m, k_sizes[k], (caps & STRATA_CAP_SHARDS) != 0);
    int rc = H.t_barrier(&m->ctx->hc, m->t, m->slot);
    check(m, rc == STRATA_OK, "barrier: rc %d", rc);
    int slot = m->slot;
    rc = H.t_ctl(&m->ctx->hc, m->t, STRATA_CTL_BARRIER, &slot);
    check(m, rc == STRATA_OK, "ctl BARRIER (2.4): rc %d", rc);
    strata_shards_t ask = { .struct_size = sizeof ask };
    rc = H.t_ctl(&m->ctx->hc, m->t, STRATA_CTL_REDUCE_SCATTER, &ask);
    check(m, rc == ((caps & STRATA_CAP_SHARDS) ? STRATA_OK : STRATA_ENOTSUP),
          "ctl REDUCE_SCATTER ask (2.4) agrees with t_caps: rc %d", rc);
    allreduce(m, 17, 0); /* still a working group after all the refusals */
}

/* ---- a context and a group ---------------------------------------------- */

static int make_ctx(const char *const *sets, strata_ctx_t **out)
{
    int rc = strata_ctx_create(NULL, out);
    for (int i = 0; rc == STRATA_OK && sets[i]; i++)
        rc = strata_ctx_set(*out, sets[i]);
    return rc == STRATA_OK ? strata__ctx_resolve(*out) : rc;
}

static void *local_thread(void *arg)
{
    suite(arg);
    return NULL;
}

/* n replica threads of this process, one LOCAL group of `plugin` on
 * devices of `devtype`. STRATA_EDECLINE / STRATA_ENOPLUGIN: not here. */
static int run_local(const char *plugin, int32_t devtype, int n)
{
    char list[64];
    snprintf(list, sizeof list, "transport.local=%s", plugin);
    const char *sets[] = { list, "log.level=error", NULL };
    strata_ctx_t *ctx;
    int rc = make_ctx(sets, &ctx);
    int32_t devs[MAXN];
    for (int i = 0; i < n; i++)
        devs[i] = STRATA_DEVICE(devtype, devtype == STRATA_DEV_CPU ? 0 : i);
    strata_group_t g = { .struct_size = sizeof g, .scope = STRATA_SCOPE_LOCAL,
                         .size = n, .nlocal = n, .timeout_ms = 20000,
                         .devices = devs, .tag = "conformance" };
    strata_transport_t *t = NULL;
    if (rc == STRATA_OK)
        rc = H.t_open(&ctx->hc, &g, &t);
    if (rc != STRATA_OK) {
        strata_ctx_destroy(ctx);
        return rc;
    }
    member_t m[MAXN];
    pthread_t th[MAXN];
    for (int i = 0; i < n; i++) {
        m[i] = (member_t){ .ctx = ctx, .t = t, .n = n, .rank = i, .slot = i,
                           .nslot = n, .name = plugin };
        pthread_create(&th[i], NULL, local_thread, &m[i]);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    H.t_close(&ctx->hc, t);
    strata_ctx_destroy(ctx);
    return STRATA_OK;
}

static int free_ports(int n, int *port)
{
    int fd[MAXN];
    for (int i = 0; i < n; i++) {
        struct sockaddr_in a = { .sin_family = AF_INET,
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof a;
        fd[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (fd[i] < 0 || bind(fd[i], (struct sockaddr *)&a, sizeof a) != 0 ||
            getsockname(fd[i], (struct sockaddr *)&a, &len) != 0)
            return -1;
        port[i] = ntohs(a.sin_port);
    }
    for (int i = 0; i < n; i++)
        close(fd[i]);
    return 0;
}

/* One member of the WORLD group (a process, or a thread for nccl-fake-
 * world): its failures as the exit status. */
/* zmq-secured: the members' CURVE keys (made before the fork). */
static char g_pub[MAXN][41], g_sec[MAXN][41];
static const char *g_pubv[MAXN];
static int g_secured;

static int world_member(const char *name, const char *plugin, int rank,
                        int n, char **addrs, const char *extra, int32_t dev)
{
    alarm(60); /* bounded, whatever a peer does */
    char list[64];
    snprintf(list, sizeof list, "transport.world=%s", plugin);
    const char *sets[] = { list, "log.level=error", extra, NULL };
    strata_ctx_t *ctx = NULL;
    int rc = make_ctx(sets, &ctx);
    char names[MAXN][24]; /* "worker:" and any int */
    const char *pn[MAXN];
    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "worker:%d", i);
        pn[i] = names[i];
    }
    strata_group_t g = { .struct_size = sizeof g, .scope = STRATA_SCOPE_WORLD,
                         .size = n, .rank = rank, .nlocal = 1,
                         .timeout_ms = 20000, .devices = &dev,
                         .addrs = (const char *const *)addrs, .names = pn,
                         .tag = "conformance",
                         .public_keys = g_secured ? g_pubv : NULL,
                         .secret_key = g_secured ? g_sec[rank] : NULL };
    strata_transport_t *t = NULL;
    if (rc == STRATA_OK)
        rc = H.t_open(&ctx->hc, &g, &t);
    if (rc != STRATA_OK) {
        printf("not ok - %s [member %d]: cannot open the group: %s\n", name,
               rank, strata_strerror(rc));
        atomic_fetch_add(&g_fail, 1);
        if (ctx)
            strata_ctx_destroy(ctx);
        return 1;
    }
    member_t m = { .ctx = ctx, .t = t, .n = n, .rank = rank, .slot = 0,
                   .nslot = 1, .name = name };
    suite(&m);
    H.t_close(&ctx->hc, t);
    strata_ctx_destroy(ctx);
    return atomic_load(&g_fail) > 0;
}

static int run_zmq(const char *name, int shm)
{
    enum { N = 2 };
    int port[N];
    char buf[N][32], *addrs[N];
    if (free_ports(N, port) != 0)
        return 1;
    for (int i = 0; i < N; i++) {
        snprintf(buf[i], sizeof buf[i], "127.0.0.1:%d", port[i]);
        addrs[i] = buf[i];
        if (g_secured && zmq_curve_keypair(g_pub[i], g_sec[i]) != 0)
            return 1;
        g_pubv[i] = g_pub[i];
    }
    fflush(stdout);
    pid_t pid[N];
    for (int i = 0; i < N; i++) {
        pid[i] = fork();
        if (pid[i] == 0)
            _exit(world_member(name, "zmq", i, N, addrs,
                               shm ? "transport.zmq.shm=auto"
                                   : "transport.zmq.shm=off",
                               STRATA_DEVICE(STRATA_DEV_CPU, 0)));
        if (pid[i] < 0)
            return 1;
    }
    int failed = 0;
    for (int i = 0; i < N; i++) {
        int st = 0;
        waitpid(pid[i], &st, 0); /* the child's alarm bounds it */
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            printf("not ok - %s: member %d %s %d\n", name, i,
                   WIFEXITED(st) ? "exited" : "died of signal",
                   WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            failed++;
        }
    }
    /* The members' passes and failures are theirs: count the processes. */
    atomic_fetch_add(failed ? &g_fail : &g_pass, 1);
    return failed;
}

typedef struct world_arg {
    const char *name;
    int rank, n;
    char **addrs;
} world_arg_t;

static void *world_thread(void *arg)
{
    world_arg_t *a = arg;
    world_member(a->name, "nccl", a->rank, a->n, a->addrs, NULL,
                 STRATA_DEVICE(STRATA_DEV_GPU, a->rank));
    return NULL;
}

/* nccl's WORLD group, its members threads of this process (so that the
 * fake NCCL's ranks meet): rank 0 hands out the id at port + 1 of its
 * address, so both must be free. */
static int run_nccl_world(const char *name)
{
    enum { N = 2 };
    int port[N], tries = 0;
    for (;; tries++) {
        if (tries == 20 || free_ports(N, port) != 0)
            return 1;
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = { .sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)(port[0] + 1)),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int ok = fd >= 0 && port[0] + 1 != port[1] &&
                 bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
        if (fd >= 0)
            close(fd);
        if (ok)
            break;
    }
    char buf[N][32], *addrs[N];
    for (int i = 0; i < N; i++) {
        snprintf(buf[i], sizeof buf[i], "127.0.0.1:%d", port[i]);
        addrs[i] = buf[i];
    }
    world_arg_t arg[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        arg[i] = (world_arg_t){ .name = name, .rank = i, .n = N,
                                .addrs = addrs };
        pthread_create(&th[i], NULL, world_thread, &arg[i]);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *which = argc > 1 ? argv[1] : "";
    if (!strcmp(which, "local")) {
        int rc = run_local("local", STRATA_DEV_CPU, 4);
        if (rc != STRATA_OK) {
            printf("not ok - local: cannot open the group: %s\n",
                   strata_strerror(rc));
            return 1;
        }
    } else if (!strcmp(which, "zmq") || !strcmp(which, "zmq-shm")
               || !strcmp(which, "zmq-secured")) {
        g_secured = !strcmp(which, "zmq-secured");
        run_zmq(which, !strcmp(which, "zmq-shm"));
    } else if (!strcmp(which, "nccl")) {
        /* Host buffers (staged through each member's GPU); two GPUs, else
         * one. nccl.so declines without a GPU, and is absent from a build
         * without CUDA and NCCL. */
        int rc = run_local("nccl", STRATA_DEV_GPU, 2);
        if (rc == STRATA_EDECLINE || rc == STRATA_EDEVICE) /* one GPU */
            rc = run_local("nccl", STRATA_DEV_GPU, 1);
        if (rc == STRATA_EDECLINE || rc == STRATA_ENOPLUGIN) {
            printf("SKIPPED: nccl: %s (it needs nccl.so, built with "
                   "STRATA_CUDA and NCCL, and a GPU)\n",
                   rc == STRATA_ENOPLUGIN ? "nccl.so is not in this build"
                                          : "nccl.so declined: no GPU here");
            return 77;
        }
        if (rc != STRATA_OK) {
            printf("not ok - nccl: cannot open the group: %s\n",
                   strata_strerror(rc));
            return 1;
        }
    } else if (!strcmp(which, "nccl-fake")) {
        int rc = run_local("nccl", STRATA_DEV_GPU, 4);
        if (rc != STRATA_OK) {
            printf("not ok - nccl-fake: cannot open the group: %s\n",
                   strata_strerror(rc));
            return 1;
        }
    } else if (!strcmp(which, "nccl-fake-world")) {
        if (run_nccl_world(which) != 0) {
            printf("not ok - nccl-fake-world: no free ports\n");
            return 1;
        }
    } else {
        fprintf(stderr, "usage: transport_conformance local|zmq|zmq-shm|"
                "zmq-secured|nccl|nccl-fake|nccl-fake-world\n");
        return 2;
    }
    printf("%s: %d passed, %d failed\n", which, atomic_load(&g_pass),
           atomic_load(&g_fail));
    return atomic_load(&g_fail) > 0;
}
