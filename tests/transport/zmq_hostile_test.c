/* zmq_hostile_test -- a hostile proxy on the bulk channel of a secured
 * group: zmq.so with bulk_cipher = aes256gcm carries the all-reduce's
 * chunks as AES-256-GCM records on its direct data connections (aead.c).
 *
 *   zmq_hostile_test PATH/zmq.so
 *
 * Two ranks (forked; each dlopen()s zmq.so with the plugin kit as host,
 * CURVE keys as a secured job has them, loopback tcp, shm = off) run
 * ITERS all-reduces (SUM, 1 MiB of non-integer floats, 64 KiB chunks).
 * In rank 0 this program's own connect() (exported: zmq.so's call
 * resolves to it) sends the data connection to rank 1 through a proxy
 * thread, which parses the records (intro, then header record + payload
 * record per message) and, in each scenario, does one thing to message
 * ATTACK_AT: flips a payload bit, flips a header bit, replays it, swaps
 * it with the next, cuts 20 bytes off and goes on, drops it, injects a
 * forged header record before it, or cuts the connection in its middle;
 * or, before the real connection, a stranger connects to rank 1's data
 * port and presents a forged intro.
 *
 * Checked: without an attack (and through an honest proxy) every call
 * succeeds with the exact sum, bitwise equal to the same all-reduces in
 * plaintext (direct sockets) and with bulk_cipher = curve (CURVE links);
 * with an attack, every call that succeeds on a rank has the exact sum,
 * the call hit fails on at least one rank with an error, and (but for
 * the cut) rank 1 reports the record that failed authentication and
 * counts it (the strangers entry's bad_message); the stranger is counted
 * and closed, and the job goes on with the exact sums.
 * Loopback only, free ports, bounded waits, ranks reaped. Skips (77) on
 * a CPU without AES-NI/PCLMULQDQ (zmq.so then keeps data on CURVE). */

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>
#include <strata/kit.h>
#include <zmq.h>

#define N          2
#define COUNT      (256 * 1024) /* floats: 1 MiB */
#define ITERS      5
#define ATTACK_AT  37           /* mid-way through the third all-reduce */
#define HDR        48
#define TAG        16
#define INTRO      (20 + TAG)

enum { A_NONE, A_FLIP, A_FLIP_HDR, A_REPLAY, A_REORDER, A_TRUNCATE, A_DROP,
       A_INJECT, A_CUT, A_STRANGER, A_N };
static const char *k_attack[A_N] = { "none", "flip", "flip-header", "replay",
                                     "reorder", "truncate", "drop", "inject",
                                     "cut", "stranger" };

typedef struct rank_out {
    int      rc[ITERS];
    uint64_t hash[ITERS];
    int      wrong;      /* calls that succeeded with a wrong sum        */
    int      auth_logs;  /* log lines "failed authentication"            */
    int      sealed_log; /* "travel as AES-256-GCM records" was said     */
    uint64_t bad_message; /* the strangers entry's count at the end      */
    int      init_rc;
} rank_out_t;

static int g_rank, g_ports[N];
static rank_out_t *g_out;

/* ---- the host's log --------------------------------------------------- */

static void h_log(void *user, int level, const char *who, const char *line)
{
    (void)user;
    if (strstr(line, "failed authentication"))
        g_out->auth_logs++;
    if (strstr(line, "AES-256-GCM records"))
        g_out->sealed_log = 1;
    if (level <= STRATA_LOG_WARN)
        fprintf(stderr, "  rank %d: %s: %s\n", g_rank, who, line);
}

/* ---- the proxy ---------------------------------------------------------- */

static int g_intercept = -1;  /* attack in this process, -1: none       */
static int g_proxied;

static int (*real_connect(void))(int, const struct sockaddr *, socklen_t)
{
    static int (*real)(int, const struct sockaddr *, socklen_t);
    if (real == NULL)
        *(void **)&real = dlsym(RTLD_NEXT, "connect");
    return real;
}

static int write_all(int fd, const unsigned char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

typedef struct proxy {
    int listen_fd, attack;
    struct sockaddr_in dest;
} proxy_t;

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16
           | (uint32_t)p[3] << 24;
}

/* One forwarded message, whole in buf[0..len): pass it, or attack it.
 * 1: stop relaying (cut). */
static int forward(proxy_t *px, int to, unsigned char *buf, size_t len,
                   uint32_t plen, long k, unsigned char **held,
                   size_t *held_len)
{
    int hit = k >= ATTACK_AT && !*held_len && px->attack != A_NONE
              && px->attack != A_STRANGER;
    static int done;
    if (*held_len) { /* reorder: the next one first, then the held */
        int rc = write_all(to, buf, len) || write_all(to, *held, *held_len);
        free(*held);
        *held = NULL;
        *held_len = 0;
        return rc;
    }
    /* the payload attacks want a message that has one */
    if (hit && !done && (plen > 0 || (px->attack != A_FLIP
                                      && px->attack != A_TRUNCATE))) {
        done = 1;
        switch (px->attack) {
        case A_FLIP: buf[HDR + TAG + plen / 2] ^= 0x01; break;
        case A_FLIP_HDR: buf[24] ^= 0x01; break; /* the offset: another chunk */
        case A_REPLAY:
            if (write_all(to, buf, len))
                return 1;
            break;
        case A_REORDER:
            if ((*held = malloc(len)) == NULL)
                return 1;
            memcpy(*held, buf, len);
            *held_len = len;
            return 0;
        case A_TRUNCATE: return write_all(to, buf, len - 20);
        case A_DROP: return 0;
        case A_INJECT: {
            unsigned char forged[HDR + TAG];
            memcpy(forged, buf, HDR);
            randombytes_buf(forged + HDR, TAG);
            if (write_all(to, forged, sizeof forged))
                return 1;
            break;
        }
        case A_CUT:
            (void)write_all(to, buf, len / 2);
            return 1;
        }
    }
    return write_all(to, buf, len);
}

static void *proxy_main(void *arg)
{
    proxy_t *px = arg;
    struct pollfd lp = { .fd = px->listen_fd, .events = POLLIN };
    if (poll(&lp, 1, 20000) != 1)
        return NULL;
    int from = accept(px->listen_fd, NULL, NULL);
    if (px->attack == A_STRANGER) {
        /* first in the queue of rank 1's data port: a forged intro */
        int s = socket(AF_INET, SOCK_STREAM, 0);
        unsigned char junk[INTRO];
        randombytes_buf(junk, sizeof junk);
        if (s >= 0
            && real_connect()(s, (struct sockaddr *)&px->dest,
                              sizeof px->dest) == 0)
            (void)write_all(s, junk, sizeof junk);
        /* left open: rank 1 closes it */
    }
    int to = socket(AF_INET, SOCK_STREAM, 0);
    if (from < 0 || to < 0
        || real_connect()(to, (struct sockaddr *)&px->dest, sizeof px->dest))
        return NULL;
    size_t cap = 4u << 20, have = 0, held_len = 0;
    unsigned char *fb = malloc(cap), *held = NULL, back[4096];
    int intro = 0, stop = 0;
    long k = 0;
    time_t end = time(NULL) + 120;
    while (fb && !stop && time(NULL) < end) {
        struct pollfd p[2] = { { .fd = from, .events = POLLIN },
                               { .fd = to, .events = POLLIN } };
        if (poll(p, 2, 100) <= 0)
            continue;
        if (p[1].revents) { /* backwards: ABORTs, relayed as they are */
            ssize_t r = recv(to, back, sizeof back, 0);
            if (r <= 0 || write_all(from, back, (size_t)r))
                break;
        }
        if (!p[0].revents)
            continue;
        ssize_t r = recv(from, fb + have, cap - have, 0);
        if (r <= 0)
            break;
        have += (size_t)r;
        for (;;) {
            size_t need = intro ? HDR + TAG : INTRO;
            uint32_t plen = 0;
            if (have < need)
                break;
            if (intro) {
                plen = le32(fb + 32);
                need += plen ? plen + TAG : 0;
                if (need > cap) {
                    stop = 1;
                    break;
                }
                if (have < need)
                    break;
                stop = forward(px, to, fb, need, plen, k++, &held, &held_len);
            } else {
                stop = write_all(to, fb, need);
                intro = 1;
            }
            memmove(fb, fb + need, have - need);
            have -= need;
            if (stop)
                break;
        }
    }
    free(fb);
    free(held);
    close(from);
    close(to);
    return NULL;
}

/* zmq.so's data connection from rank 0 to rank 1 goes through the proxy;
 * every other connect (libzmq's, the proxy's own) is left alone. */
__attribute__((visibility("default")))
int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
    if (g_intercept >= 0 && !g_proxied && sa && sa->sa_family == AF_INET
        && len >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        int port = ntohs(in->sin_port), ring = 0;
        for (int r = 0; r < N; r++)
            ring |= port == g_ports[r];
        if (!ring) {
            static proxy_t px;
            struct sockaddr_in a = { .sin_family = AF_INET,
                                     .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
            socklen_t al = sizeof a;
            pthread_t t;
            px.attack = g_intercept;
            px.dest = *in;
            px.listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (px.listen_fd >= 0
                && bind(px.listen_fd, (struct sockaddr *)&a, sizeof a) == 0
                && listen(px.listen_fd, 1) == 0
                && getsockname(px.listen_fd, (struct sockaddr *)&a, &al) == 0
                && pthread_create(&t, NULL, proxy_main, &px) == 0) {
                pthread_detach(t);
                g_proxied = 1;
                return real_connect()(fd, (struct sockaddr *)&a, sizeof a);
            }
        }
    }
    return real_connect()(fd, sa, len);
}

/* ---- one rank ------------------------------------------------------------ */

static float value(int rank, int it, size_t i)
{
    /* not integers: the sum's bits depend on how it is computed */
    uint32_t x = (uint32_t)(i * 2654435761u) ^ (uint32_t)(rank * 40503 + it);
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    return (float)(x % 100000) / 977.0f - 50.0f;
}

static uint64_t fnv1a(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static char g_pub[N][41], g_sec[N][41];
static const char *g_pubv[N];

static int curve_keys(void)
{
    for (int r = 0; r < N; r++) {
        if (zmq_curve_keypair(g_pub[r], g_sec[r]) != 0)
            return -1;
        g_pubv[r] = g_pub[r];
    }
    return 0;
}

static void run_rank(const strata_plugin_v2_t *vt, int secure,
                     const char *cipher, char **addrs)
{
    char over0[64], *over[4] = { "shm=off", "timeout_s=10", "chunk_bytes=64K",
                                 over0 };
    const char *namev[N] = { "rank:0", "rank:1" };
    strata_kit_t *kit = NULL;
    strata_kit_config_t kc = STRATA_KIT_CONFIG_INIT;
    void *cfg = NULL, *pctx = NULL;

    snprintf(over0, sizeof over0, "bulk_cipher=%s", cipher);
    kc.log = h_log;
    if (strata_kit_cfg(vt, (const char *const *)over, 4, &cfg) != 0
        || strata_kit_host(&kc, &kit) != 0) {
        g_out->init_rc = -1000;
        return;
    }
    strata_group_t g = { .struct_size = sizeof g, .scope = STRATA_SCOPE_WORLD,
                         .size = N, .rank = g_rank, .nlocal = 1,
                         .addrs = (const char *const *)addrs, .names = namev,
                         .tag = "hostile-test",
                         .public_keys = secure ? g_pubv : NULL,
                         .secret_key = secure ? g_sec[g_rank] : NULL };
    strata_env_t env = { .struct_size = sizeof env,
                         .kind = STRATA_KIND_TRANSPORT, .cfg = cfg,
                         .section = "transport", .group = &g };
    g_out->init_rc = vt->init(strata_kit_table(kit), strata_kit_hctx(kit),
                              &env, &pctx);
    float *buf = malloc(COUNT * sizeof(float));
    for (int it = 0; it < ITERS && g_out->init_rc == 0 && buf; it++) {
        for (size_t i = 0; i < COUNT; i++)
            buf[i] = value(g_rank, it, i);
        strata_op_t o = { .struct_size = sizeof o, .buf = buf, .count = COUNT,
                          .device = STRATA_DEVICE(STRATA_DEV_CPU, 0),
                          .reduce_op = STRATA_REDUCE_SUM };
        g_out->rc[it] = vt->reduce(pctx, &o);
        if (g_out->rc[it] != 0)
            continue;
        for (size_t i = 0; i < COUNT; i++) /* a + b == b + a, exactly */
            g_out->wrong += buf[i] != value(0, it, i) + value(1, it, i);
        g_out->hash[it] = fnv1a(buf, COUNT * sizeof(float));
    }
    free(buf);
    if (pctx && vt->strangers) {
        strata_strangers_t st = { .struct_size = sizeof st };
        if (vt->strangers(pctx, &st, 1) == 0)
            g_out->bad_message = st.bad_message;
    }
    if (pctx)
        vt->fini(pctx);
    free(cfg);
    strata_kit_free(kit);
}

/* ---- main ------------------------------------------------------------------ */

static int free_ports(int *port)
{
    int fd[N];
    for (int i = 0; i < N; i++) {
        struct sockaddr_in a = { .sin_family = AF_INET,
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof a;
        fd[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (fd[i] < 0 || bind(fd[i], (struct sockaddr *)&a, sizeof a) != 0
            || getsockname(fd[i], (struct sockaddr *)&a, &len) != 0)
            return -1;
        port[i] = ntohs(a.sin_port);
    }
    for (int i = 0; i < N; i++)
        close(fd[i]);
    return 0;
}

/* One job of N ranks: 0, or -1 when a rank could not report. */
static int job(const strata_plugin_v2_t *vt, int secure, const char *cipher,
               int attack, rank_out_t out[N])
{
    char abuf[N][64], *addrs[N];
    int pipes[N][2];
    pid_t pid[N];
    if (free_ports(g_ports) != 0)
        return -1;
    for (int r = 0; r < N; r++) {
        snprintf(abuf[r], sizeof abuf[r], "127.0.0.1:%d", g_ports[r]);
        addrs[r] = abuf[r];
    }
    for (int r = 0; r < N; r++) {
        if (pipe(pipes[r]) != 0 || (pid[r] = fork()) < 0)
            return -1;
        if (pid[r] == 0) {
            static rank_out_t o;
            g_rank = r;
            g_out = &o;
            g_intercept = r == 0 && attack >= 0 ? attack : -1;
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            alarm(120); /* a rank that hangs fails the test */
            run_rank(vt, secure, cipher, addrs);
            ssize_t w = write(pipes[r][1], &o, sizeof o);
            _exit(w == (ssize_t)sizeof o ? 0 : 3);
        }
        close(pipes[r][1]);
    }
    int bad = 0;
    for (int r = 0; r < N; r++) {
        if (read(pipes[r][0], &out[r], sizeof out[r]) != (ssize_t)sizeof out[r])
            bad = -1;
        close(pipes[r][0]);
    }
    for (int r = 0; r < N; r++) {
        int st;
        while (waitpid(pid[r], &st, 0) < 0 && errno == EINTR) {
        }
    }
    return bad;
}

static int all_ok(const rank_out_t out[N])
{
    for (int r = 0; r < N; r++) {
        if (out[r].init_rc || out[r].wrong)
            return 0;
        for (int it = 0; it < ITERS; it++)
            if (out[r].rc[it] || out[r].hash[it] != out[0].hash[it])
                return 0;
    }
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: zmq_hostile_test PATH/zmq.so\n");
        return 2;
    }
    if (sodium_init() < 0 || !crypto_aead_aes256gcm_is_available()) {
        printf("SKIPPED: no AES-NI/PCLMULQDQ: zmq.so keeps data on CURVE\n");
        return 77;
    }
    void *dl = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    const strata_plugin_v2_t *vt = dl ? dlsym(dl, STRATA_PLUGIN_SYMBOL) : NULL;
    if (vt == NULL || curve_keys() != 0) {
        fprintf(stderr, "zmq_hostile_test: %s: %s\n", argv[1],
                dl ? "not a plugin, or no CURVE" : dlerror());
        return 2;
    }
    int fails = 0;
    rank_out_t plain[N], sealed[N], curve[N], out[N];

    /* the reference runs: plaintext, sealed through an honest proxy,
     * curve; the same bits everywhere */
    if (job(vt, 0, "aes256gcm", -1, plain) || !all_ok(plain)) {
        fprintf(stderr, "FAIL plaintext run\n");
        fails++;
    }
    if (job(vt, 1, "aes256gcm", A_NONE, sealed) || !all_ok(sealed)
        || !sealed[0].sealed_log || sealed[1].bad_message) {
        fprintf(stderr, "FAIL sealed run (honest proxy)%s\n",
                sealed[0].sealed_log ? "" : ": the data were not sealed");
        fails++;
    }
    if (job(vt, 1, "curve", -1, curve) || !all_ok(curve)
        || curve[0].sealed_log) {
        fprintf(stderr, "FAIL curve run\n");
        fails++;
    }
    for (int it = 0; it < ITERS; it++)
        if (plain[0].hash[it] != sealed[0].hash[it]
            || plain[0].hash[it] != curve[0].hash[it]) {
            fprintf(stderr, "FAIL all-reduce %d: plaintext, sealed and "
                    "curve differ\n", it);
            fails++;
        }
    printf("plaintext = aes256gcm = curve, bitwise: %s\n",
           fails ? "no" : "yes");

    for (int a = A_FLIP; a < A_N; a++) {
        memset(out, 0, sizeof out);
        int rc = job(vt, 1, "aes256gcm", a, out);
        if (a == A_STRANGER) { /* dropped, counted; the job goes on */
            int ok = rc == 0 && all_ok(out)
                     && out[0].hash[ITERS - 1] == plain[0].hash[ITERS - 1]
                     && out[1].bad_message > 0;
            printf("%-12s every call exact: %s, counted by rank 1: %llu: "
                   "%s\n", k_attack[a], all_ok(out) ? "yes" : "no",
                   (unsigned long long)out[1].bad_message,
                   ok ? "ok" : "FAIL");
            fails += !ok;
            continue;
        }
        int failed = 0, wrong = 0;
        for (int r = 0; r < N; r++) {
            wrong += out[r].wrong;
            for (int it = 0; it < ITERS; it++) {
                failed += out[r].rc[it] != 0;
                /* a call that succeeded holds the exact sum (checked in
                 * the rank) and the reference's bits */
                if (out[r].rc[it] == 0 && out[r].hash[it] != plain[0].hash[it])
                    wrong++;
            }
        }
        /* refused with one error line and counted with the strangers */
        int detected = a == A_CUT
                       || (out[1].auth_logs > 0 && out[1].bad_message > 0);
        int ok = rc == 0 && out[0].init_rc == 0 && out[1].init_rc == 0
                 && failed > 0 && wrong == 0 && detected;
        printf("%-12s rank 0 rc %d %d %d %d %d, rank 1 rc %d %d %d %d %d, "
               "refused by rank 1: %d (counted %llu), wrong results: %d: "
               "%s\n",
               k_attack[a], out[0].rc[0], out[0].rc[1], out[0].rc[2],
               out[0].rc[3], out[0].rc[4], out[1].rc[0], out[1].rc[1],
               out[1].rc[2], out[1].rc[3], out[1].rc[4], out[1].auth_logs,
               (unsigned long long)out[1].bad_message, wrong,
               ok ? "ok" : "FAIL");
        fails += !ok;
    }
    printf("zmq_hostile_test: %s\n", fails ? "FAILED" : "ok");
    return fails ? 1 : 0;
}
