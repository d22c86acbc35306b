/* strata_allreduce -- the strata side of the all-reduce benchmarks: forks N
 * ranks, each dlopen()s zmq.so (nothing of strata's core is linked) and
 * times its all-reduce (float32, SUM, in place) for the sizes given.
 *
 *   strata_allreduce -p PATH/zmq.so -n N [-t tcp|ipc] [-o key=value]...
 *                    [-l LABEL] [-k curve] [-N NSPREFIX] [-a NET] [-P PORT]
 *                    [-T SECONDS] [-w SECONDS] BYTES...
 *
 *   -N NSPREFIX  rank r joins the network namespace NSPREFIX-t<r>
 *                (/run/netns, made by the caller) before it starts: every
 *                rank on a "host" of its own, behind its own link (the
 *                scaling study, contrib/bench/scaling)
 *   -a NET       rank r's address is NET<r+1>:PORT (e.g. -a 10.201.3.);
 *                without it 127.0.0.1 and free ports
 *   -P PORT      the port with -a (29600)
 *   -T SECONDS   time each size for about that long: after a first call
 *                (connections) and 2 pilot calls, rank 0's pilot time sets
 *                the iterations (3..2000), agreed by one more all-reduce;
 *                without it, bench_iters.h's counts after a warm-up and a
 *                barrier (the all-reduce table's, shared with MPI and gloo)
 *   -w SECONDS   watchdog: a rank still running after this is killed
 *                (SIGALRM) and the run fails (600)
 *
 * The time per call is the slowest rank's mean (as nccl-tests and
 * mpi_allreduce.c do). Output, per size: "RESULT <label> <n> <bytes>
 * <seconds per call> <iterations> <cpu per call: mean over ranks> <max>
 * <sum over ranks>" -- the CPU time each rank's process (all its threads:
 * zmq's I/O threads too) spent in the timed calls; per rank at the end:
 * "RANKCPU <label> <n> <rank> <user s> <sys s> <wall s>" (getrusage of
 * the whole rank). Every rank also checks the last result against the
 * exact sum (the data are small integers) and that all ranks hold the same
 * bits: a wrong or unequal result fails the run (exit 1). */
#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <strata/kit.h>
#include <zmq.h>

#include "bench_iters.h"

#define MAXN 16
#define MAXSIZES 16

static int g_rank;

/* The host: the plugin kit's (include/strata/kit.h, libstrata_kit.a);
 * warnings and errors to stderr, with the rank. */
static strata_kit_t *g_kit;

static void h_log(void *user, int level, const char *who, const char *line)
{
    (void)user;
    if (level <= STRATA_LOG_WARN)
        fprintf(stderr, "strata_allreduce[%d]: %s: %s\n", g_rank, who, line);
}

/* ---- one rank --------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t fnv1a(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

typedef struct rank_out {
    double   t[MAXSIZES], cpu[MAXSIZES];
    double   user, sys, wall;
    int      iters[MAXSIZES];
    uint64_t hash[MAXSIZES];
    int      rc, wrong;
} rank_out_t;

/* A gradient all-reduce, as training's: with -o compression=fp16|bf16 it
 * travels in 16 bits. The data (integers 0..10, sums up to 10 n) are exact
 * in fp16 and bf16 too, so the exact check below holds either way. */
static int reduce(const strata_plugin_v2_t *vt, void *pctx, float *buf,
                  size_t count)
{
    strata_op_t o = { .struct_size = sizeof o, .buf = buf, .count = count,
                      .device = STRATA_DEVICE(STRATA_DEV_CPU, 0),
                      .reduce_op = STRATA_REDUCE_SUM,
                      .flags = STRATA_OP_GRADIENT };
    return vt->reduce(pctx, &o);
}

/* -k: the group secured as the core secures a job's (CURVE keys on every
 * link). Every rank derives every key pair from the rank alone, which is
 * fine for a benchmark and nothing else: secret = 32 bytes of a seeded
 * generator, public = zmq_curve_public(secret). */
static int g_curve;
static const char *g_nsprefix, *g_net;
static double g_target = 0; /* -T: seconds per size; 0: bench_iters.h */
static char g_pub[MAXN][41], g_sec[MAXN][41];
static const char *g_pubv[MAXN];

static int curve_keys(int n)
{
    for (int r = 0; r < n; r++) {
        uint8_t raw[32];
        uint64_t x = 0x243f6a8885a308d3ull * (uint64_t)(r + 1);
        for (int i = 0; i < 32; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            raw[i] = (uint8_t)(x >> 24);
        }
        if (!zmq_z85_encode(g_sec[r], raw, 32) ||
            zmq_curve_public(g_pub[r], g_sec[r]) != 0)
            return -1;
        g_pubv[r] = g_pub[r];
    }
    return 0;
}

static void run_rank(const strata_plugin_v2_t *vt, void *cfg, int rank, int n,
                     char **addrs, const size_t *bytes, int nsizes,
                     rank_out_t *out)
{
    char names[MAXN][16];
    const char *namev[MAXN];
    void *pctx = NULL;

    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "rank:%d", i);
        namev[i] = names[i];
    }
    strata_group_t g = { .struct_size = sizeof g, .scope = STRATA_SCOPE_WORLD,
                         .size = n, .rank = rank, .nlocal = 1,
                         .addrs = (const char *const *)addrs, .names = namev,
                         .tag = "allreduce-bench",
                         .public_keys = g_curve ? g_pubv : NULL,
                         .secret_key = g_curve ? g_sec[rank] : NULL };
    strata_env_t env = { .struct_size = sizeof env,
                         .kind = STRATA_KIND_TRANSPORT, .cfg = cfg,
                         .section = "transport", .group = &g };
    if (g_nsprefix) {
        char path[256];
        snprintf(path, sizeof path, "/run/netns/%s-t%d", g_nsprefix, rank);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
            fprintf(stderr, "strata_allreduce[%d]: %s: cannot join\n", rank,
                    path);
            out->rc = -3000;
            return;
        }
        close(fd);
    }
    if ((out->rc = vt->init(strata_kit_table(g_kit), strata_kit_hctx(g_kit),
                            &env, &pctx)) != 0)
        return;
    for (int s = 0; s < nsizes && out->rc == 0; s++) {
        size_t count = bytes[s] / sizeof(float);
        float *buf = aligned_alloc(64, (count * sizeof(float) + 63) / 64 * 64);
        int iters, warm, slot = 0;
        if (buf == NULL) {
            out->rc = STRATA_ENOMEM;
            break;
        }
        /* small integers: every partial sum is exact, whatever the order */
        for (size_t i = 0; i < count; i++)
            buf[i] = (float)((i * 7 + (size_t)rank * 3) % 11);
        if (g_target > 0) {
            /* one call for the connections, two pilots timed */
            if (out->rc == 0)
                out->rc = reduce(vt, pctx, buf, count);
            double p0 = now_s();
            for (int k = 0; k < 2 && out->rc == 0; k++)
                out->rc = reduce(vt, pctx, buf, count);
            double pilot = (now_s() - p0) / 2;
            /* rank 0's choice, summed with the others' zeros: all agree */
            float agree = 0.0f;
            if (rank == 0) {
                double want = g_target / (pilot > 1e-7 ? pilot : 1e-7);
                agree = (float)(want < 3 ? 3 : want > 2000 ? 2000 : (int)want);
            }
            if (out->rc == 0)
                out->rc = reduce(vt, pctx, &agree, 1);
            iters = (int)agree;
            if (out->rc == 0 && (iters < 3 || iters > 2000))
                out->rc = -2000;
        } else {
            bench_iters(bytes[s], n, &iters, &warm);
            for (int k = 0; k < warm && out->rc == 0; k++)
                out->rc = reduce(vt, pctx, buf, count);
            if (out->rc == 0)
                out->rc = vt->ctl(pctx, STRATA_CTL_BARRIER, &slot);
        }
        double t0 = now_s(), c0 = cpu_s();
        for (int k = 0; k < iters && out->rc == 0; k++)
            out->rc = reduce(vt, pctx, buf, count);
        out->t[s] = (now_s() - t0) / iters;
        out->cpu[s] = (cpu_s() - c0) / iters;
        out->iters[s] = iters;
        /* the last call's input, reduced once more, checked exactly */
        for (size_t i = 0; i < count && out->rc == 0; i++)
            buf[i] = (float)((i * 7 + (size_t)rank * 3) % 11);
        if (out->rc == 0 && (out->rc = reduce(vt, pctx, buf, count)) == 0) {
            for (size_t i = 0; i < count; i++) {
                float want = 0;
                for (int r = 0; r < n; r++)
                    want += (float)((i * 7 + (size_t)r * 3) % 11);
                out->wrong += buf[i] != want;
            }
            out->hash[s] = fnv1a(buf, count * sizeof(float));
        }
        free(buf);
    }
    vt->fini(pctx);
}

static void rank_usage(rank_out_t *out, double t_start)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    out->user = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6;
    out->sys = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
    out->wall = now_s() - t_start;
}

/* ---- main: fork the ranks, collect, print ------------------------------ */

static int free_ports(int n, int *port)
{
    int fd[MAXN];
    for (int i = 0; i < n; i++) {
        struct sockaddr_in a = { .sin_family = AF_INET,
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof a;
        fd[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (fd[i] < 0 || bind(fd[i], (struct sockaddr *)&a, sizeof a) != 0
            || getsockname(fd[i], (struct sockaddr *)&a, &len) != 0)
            return -1;
        port[i] = ntohs(a.sin_port);
    }
    for (int i = 0; i < n; i++)
        close(fd[i]);
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: strata_allreduce -p zmq.so -n N [-t tcp|ipc] "
            "[-o key=value]... [-l label] [-k curve] [-N nsprefix] "
            "[-a net] [-P port] [-T seconds] [-w seconds] BYTES...\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *plugin = NULL, *proto = "tcp", *label = "strata";
    char *over[32];
    int nover = 0, n = 2, nsizes = 0, i, port0 = 29600, watchdog = 600;
    size_t bytes[MAXSIZES];

    for (i = 1; i < argc && argv[i][0] == '-'; i += 2) {
        if (i + 1 >= argc)
            usage();
        const char *o = argv[i], *v = argv[i + 1];
        if (strcmp(o, "-p") == 0) plugin = v;
        else if (strcmp(o, "-n") == 0) n = atoi(v);
        else if (strcmp(o, "-t") == 0) proto = v;
        else if (strcmp(o, "-l") == 0) label = v;
        else if (strcmp(o, "-k") == 0 && strcmp(v, "curve") == 0) g_curve = 1;
        else if (strcmp(o, "-N") == 0) g_nsprefix = v;
        else if (strcmp(o, "-a") == 0) g_net = v;
        else if (strcmp(o, "-P") == 0) port0 = atoi(v);
        else if (strcmp(o, "-T") == 0) g_target = atof(v);
        else if (strcmp(o, "-w") == 0) watchdog = atoi(v);
        else if (strcmp(o, "-o") == 0 && nover < 32) over[nover++] = (char *)v;
        else usage();
    }
    for (; i < argc && nsizes < MAXSIZES; i++)
        if ((bytes[nsizes++] = (size_t)strtoull(argv[i], NULL, 10)) < 4)
            usage();
    if (plugin == NULL || n < 2 || n > MAXN || nsizes == 0 ||
        !(g_target >= 0 && g_target <= 60) || watchdog < 1 ||
        port0 < 1 || port0 > 65535 || (g_net && strcmp(proto, "tcp") != 0))
        usage();
    if (g_curve && curve_keys(n) != 0) {
        fprintf(stderr, "strata_allreduce: no CURVE in this libzmq\n");
        return 2;
    }
    void *dl = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
    const strata_plugin_v2_t *vt = dl ? dlsym(dl, STRATA_PLUGIN_SYMBOL)
                                      : NULL;
    if (vt == NULL || vt->hdr.kind != STRATA_KIND_TRANSPORT) {
        fprintf(stderr, "strata_allreduce: %s: %s\n", plugin,
                dl ? "not a transport plugin" : dlerror());
        return 2;
    }
    /* its table's defaults, then -o (as the core does) */
    void *cfg = NULL;
    strata_kit_config_t kc = STRATA_KIT_CONFIG_INIT;
    kc.log = h_log;
    if (strata_kit_cfg(vt, (const char *const *)over, nover, &cfg) != 0 ||
        strata_kit_host(&kc, &g_kit) != 0)
        return 2;

    char addr_buf[MAXN][128], *addrs[MAXN];
    int port[MAXN];
    if (!g_net && strcmp(proto, "tcp") == 0 && free_ports(n, port) != 0)
        return 2;
    for (int r = 0; r < n; r++) {
        if (g_net)
            snprintf(addr_buf[r], sizeof addr_buf[r], "%s%d:%d", g_net, r + 1,
                     port0);
        else if (strcmp(proto, "tcp") == 0)
            snprintf(addr_buf[r], sizeof addr_buf[r], "127.0.0.1:%d", port[r]);
        else
            snprintf(addr_buf[r], sizeof addr_buf[r],
                     "ipc:///tmp/strata-bench-%ld-%d", (long)getpid(), r);
        addrs[r] = addr_buf[r];
    }

    int pipes[MAXN][2];
    pid_t pid[MAXN];
    for (int r = 0; r < n; r++) {
        if (pipe(pipes[r]) != 0 || (pid[r] = fork()) < 0)
            return 2;
        if (pid[r] == 0) {
            rank_out_t out = { .rc = 0 };
            double t_start = now_s();
            g_rank = r;
            signal(SIGALRM, SIG_DFL);
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* the driver gone: stop */
            if (getppid() == 1)
                _exit(3);
            alarm((unsigned)watchdog);
            run_rank(vt, cfg, r, n, addrs, bytes, nsizes, &out);
            rank_usage(&out, t_start);
            ssize_t w = write(pipes[r][1], &out, sizeof out);
            _exit(w == (ssize_t)sizeof out ? 0 : 3);
        }
        close(pipes[r][1]);
    }
    rank_out_t out[MAXN];
    int bad = 0;
    for (int r = 0; r < n; r++) {
        if (read(pipes[r][0], &out[r], sizeof out[r]) != (ssize_t)sizeof out[r]) {
            memset(&out[r], 0, sizeof out[r]);
            out[r].rc = -1000;
        }
        close(pipes[r][0]);
    }
    for (int r = 0; r < n; r++) {
        int st = 0;
        waitpid(pid[r], &st, 0);
        if (out[r].rc || out[r].wrong) {
            fprintf(stderr, "strata_allreduce: rank %d: rc %d, %d wrong "
                    "elements\n", r, out[r].rc, out[r].wrong);
            bad = 1;
        }
    }
    for (int s = 0; s < nsizes && !bad; s++) {
        double t = 0, cmax = 0, csum = 0;
        for (int r = 0; r < n; r++) {
            t = out[r].t[s] > t ? out[r].t[s] : t;
            cmax = out[r].cpu[s] > cmax ? out[r].cpu[s] : cmax;
            csum += out[r].cpu[s];
            if (out[r].hash[s] != out[0].hash[s]) {
                fprintf(stderr, "strata_allreduce: %zu bytes: rank %d's result"
                        " differs from rank 0's\n", bytes[s], r);
                bad = 1;
            }
        }
        printf("RESULT %s %d %zu %.9f %d %.9f %.9f %.9f\n", label, n,
               bytes[s], t, out[0].iters[s], csum / n, cmax, csum);
    }
    for (int r = 0; r < n && !bad; r++)
        printf("RANKCPU %s %d %d %.3f %.3f %.3f\n", label, n, r, out[r].user,
               out[r].sys, out[r].wall);
    if (strcmp(proto, "ipc") == 0)
        for (int r = 0; r < n; r++)
            unlink(addrs[r] + 6);
    free(cfg);
    strata_kit_free(g_kit);
    return bad;
}
