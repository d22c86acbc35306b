/* zmq.so's point to point (send/recv on STRATA_GROUP_P2P groups, and on an
 * ABI 1.2 opener's "p2p:" ones), members as
 * instances of the plugin in this one process on loopback tcp:
 *  - any member to any member, itself included, header and data intact;
 *  - a receive times out on time; a message longer than the buffer is
 *    refused (EPROTO) and the next one arrives;
 *  - malformed messages from a raw zmq socket are dropped and counted in
 *    the log, never delivered;
 *  - a peer that went away is named within the send's timeout, and is
 *    reached again once it restarts on its address;
 *  - ctl(ABORT) wakes a blocked receive; collectives refused on p2p
 *    groups, send/recv on ring groups;
 *  - data longer than STRZ_P2P_CHUNK travel in frames of at most that
 *    (seen by a raw ROUTER) and arrive whole; raw messages whose data
 *    frames disagree with their header (too long or too short in all, one
 *    frame too long, too many frames) are dropped and counted, never
 *    delivered nor written past the buffer, and the next one arrives. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <time.h>

#include <zmq.h>

#include <strata/kit.h>

#include "check.h"
#include "spawn.h"
#include "../../plugins/transport/zmq/p2p.h"

static pthread_mutex_t g_log_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_log[1 << 16];
static size_t g_log_len;

/* The kit's host (include/strata/kit.h) logs through this: every line
 * kept for log_count, warnings and errors also on stderr. */
static void h_log(void *user, int level, const char *who, const char *msg)
{
    char line[1024];
    (void)user;
    snprintf(line, sizeof line, "[%d] %s: %s", level, who, msg);
    pthread_mutex_lock(&g_log_lock);
    size_t l = strlen(line);
    if (g_log_len + l + 2 < sizeof g_log) {
        memcpy(g_log + g_log_len, line, l);
        g_log_len += l;
        g_log[g_log_len++] = '\n';
        g_log[g_log_len] = '\0';
    }
    pthread_mutex_unlock(&g_log_lock);
    if (level <= STRATA_LOG_WARN)
        fprintf(stderr, "%s\n", line);
}

static int log_count(const char *what)
{
    pthread_mutex_lock(&g_log_lock);
    int n = 0;
    for (const char *p = g_log; (p = strstr(p, what)) != NULL; p++)
        n++;
    pthread_mutex_unlock(&g_log_lock);
    return n;
}

static strata_kit_t *g_kit;

static const strata_plugin_v2_t *g_vt;
static strz_cfg_t g_cfg;

static int load(void)
{
    const char *dir = getenv("STRATA_PLUGIN_PATH");
    char path[4096];
    snprintf(path, sizeof path, "%s/zmq.so", dir && *dir ? dir : ".");
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        fprintf(stderr, "%s\n", dlerror());
        return -1;
    }
    g_vt = dlsym(dl, STRATA_PLUGIN_SYMBOL);
    if (!g_vt || !STRATA_HAS(g_vt, send) || !STRATA_HAS(g_vt, recv))
        return -1;
    strata_kit_config_t kc = STRATA_KIT_CONFIG_INIT;
    kc.log = h_log;
    if (strata_kit_host(&kc, &g_kit) != STRATA_OK)
        return -1;
    /* the plugin's defaults, then what these tests need */
    g_cfg = (strz_cfg_t){ .chunk_bytes = 256 << 10, .timeout_s = 5,
                          .heartbeat_ms = 200, .linger_ms = 0,
                          .window_bytes = 1 << 20, .io_threads = 1 };
    return 0;
}

static const char *g_names[4] = { "m0", "m1", "m2", "m3" };
static char g_addr[4][64];
static const char *g_addrs[4];

/* Flags of the groups open_member makes: an ABI 1.3 opener asks for point
 * to point with STRATA_GROUP_P2P; with 0, a "p2p:" tag is an ABI 1.2
 * opener's way (a shorter struct, no flags), any other tag a ring. */
static uint32_t g_flags;

static void *open_member(int rank, int n, const char *tag)
{
    int32_t cpu = STRATA_DEVICE(STRATA_DEV_CPU, 0);
    int legacy = !g_flags && strncmp(tag, "p2p:", 4) == 0;
    strata_group_t g = { .struct_size = legacy ? offsetof(strata_group_t, flags)
                                               : sizeof g,
                         .scope = STRATA_SCOPE_WORLD,
                         .size = n, .rank = rank, .nlocal = 1,
                         .timeout_ms = 2000, .devices = &cpu, .addrs = g_addrs,
                         .names = g_names, .tag = tag,
                         .flags = g_flags };
    strata_env_t env = { .struct_size = sizeof env,
                         .kind = STRATA_KIND_TRANSPORT, .cfg = &g_cfg,
                         .section = "transport", .group = &g,
                         .nreplicas = 1, .devices = &cpu };
    void *ctx = NULL;
    int rc = g_vt->init(strata_kit_table(g_kit), strata_kit_hctx(g_kit), &env,
                         &ctx);
    CHECKF(rc == 0, "init member %d: %d", rank, rc);
    return rc == 0 ? ctx : NULL;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Receive one message and check who sent it and what it says. */
static void expect(void *m, int from, const char *hdr, const char *data)
{
    char buf[4096];
    int peer = -2;
    size_t len = 0;
    int rc = g_vt->recv(m, &peer, buf, sizeof buf, &len, 3000);
    size_t hl = strlen(hdr), dl = strlen(data);
    CHECKF(rc == 0 && peer == from && len == hl + dl
           && memcmp(buf, hdr, hl) == 0 && memcmp(buf + hl, data, dl) == 0,
           "recv: rc %d, peer %d (want %d), len %zu", rc, peer, from, len);
}

static void any_to_any(void **m)
{
    CHECK(g_vt->send(m[0], 1, "H01", 3, "data 0 to 1", 11, 0) == 0);
    CHECK(g_vt->send(m[1], 0, "H10", 3, "data 1 to 0", 11, 0) == 0);
    CHECK(g_vt->send(m[2], 0, "H20", 3, "", 0, 0) == 0);
    CHECK(g_vt->send(m[0], 0, "", 0, "to myself", 9, 0) == 0);
    CHECK(g_vt->send(m[0], 2, "H02", 3, "x", 1, 0) == 0);
    expect(m[1], 0, "H01", "data 0 to 1");
    expect(m[2], 0, "H02", "x");
    /* m0 gets three, in some order between senders */
    int seen = 0;
    for (int i = 0; i < 3; i++) {
        char buf[64];
        int peer = -1;
        size_t len = 0;
        CHECK(g_vt->recv(m[0], &peer, buf, sizeof buf, &len, 3000) == 0);
        seen |= peer >= 0 && peer < 3 ? 1 << peer : 8;
    }
    CHECK(seen == 7);
    /* a large payload in order after a small one */
    static char big[200000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (char)(i * 7);
    CHECK(g_vt->send(m[1], 2, "B", 1, big, sizeof big, 0) == 0);
    char *buf = malloc(sizeof big + 1);
    int peer = -1;
    size_t len = 0;
    CHECK(g_vt->recv(m[2], &peer, buf, sizeof big + 1, &len, 3000) == 0);
    CHECK(peer == 1 && len == sizeof big + 1 && buf[0] == 'B'
          && memcmp(buf + 1, big, sizeof big) == 0);
    free(buf);
    /* members outside the group, NULL buffers */
    CHECK(g_vt->send(m[0], 3, "x", 1, NULL, 0, 0) == STRATA_EINVAL);
    CHECK(g_vt->send(m[0], -1, "x", 1, NULL, 0, 0) == STRATA_EINVAL);
    CHECK(g_vt->send(m[0], 1, NULL, 4, NULL, 0, 0) == STRATA_EINVAL);
}

static void timeouts_and_caps(void **m)
{
    char buf[64];
    int peer = 5;
    size_t len = 5;
    double t0 = now_ms();
    CHECK(g_vt->recv(m[2], &peer, buf, sizeof buf, &len, 300) == STRATA_ETIMEDOUT);
    double dt = now_ms() - t0;
    CHECKF(dt >= 250 && dt < 1500, "recv timeout took %.0f ms", dt);
    CHECK(g_vt->send(m[0], 1, "0123456789", 10, "0123456789", 10, 0) == 0);
    CHECK(g_vt->recv(m[1], &peer, buf, 8, &len, 3000) == STRATA_EPROTO);
    CHECK(peer == 0);
    CHECK(g_vt->send(m[0], 1, "ok", 2, "", 0, 0) == 0);
    expect(m[1], 0, "ok", "");
    /* longer than window_bytes: refused at the sender */
    char *huge = calloc(1, (size_t)g_cfg.window_bytes);
    CHECK(g_vt->send(m[0], 1, "h", 1, huge, (size_t)g_cfg.window_bytes, 0)
          == STRATA_EINVAL);
    free(huge);
}

static uint32_t tag_hash(const char *tag)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *s = (const unsigned char *)tag; *s; s++)
        h = (h ^ *s) * 16777619u;
    return h & 0x7fffffffu;
}

static void raw_send(void *s, const void *h, size_t hl, const char *a,
                     const char *b, int frames)
{
    zmq_send(s, h, hl, frames > 1 ? ZMQ_SNDMORE : 0);
    if (frames > 1)
        zmq_send(s, a, strlen(a), frames > 2 ? ZMQ_SNDMORE : 0);
    if (frames > 2)
        zmq_send(s, b, strlen(b), 0);
}

static void malformed(void **m, const char *tag)
{
    void *zc = zmq_ctx_new(), *s = zmq_socket(zc, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    char ep[96];
    snprintf(ep, sizeof ep, "tcp://%s", g_addrs[1]);
    CHECK(zmq_connect(s, ep) == 0);
    int before = log_count("dropped a malformed message");
    unsigned char hb[STRZ_HDR_SIZE];
    strz_hdr_t h = { .type = STRZ_DATA, .flags = STRZ_P2P_FLAG, .sender = 2,
                     .offset = 3, .length = 6, .aux = (int32_t)tag_hash(tag) };
    raw_send(s, "garbage", 7, NULL, NULL, 1);              /* one frame */
    memset(hb, 0x5a, sizeof hb);
    raw_send(s, hb, sizeof hb, "abc", "def", 3);           /* bad magic */
    strz_hdr_t x = h;
    x.aux ^= 1;                                            /* other job */
    strz_wire_pack(&x, hb);
    raw_send(s, hb, sizeof hb, "abc", "def", 3);
    x = h;
    x.sender = 9;                                          /* no member */
    strz_wire_pack(&x, hb);
    raw_send(s, hb, sizeof hb, "abc", "def", 3);
    x = h;
    x.length = 7;                                          /* length lies */
    strz_wire_pack(&x, hb);
    raw_send(s, hb, sizeof hb, "abc", "def", 3);
    x = h;
    x.flags = 0;                                           /* a ring DATA */
    strz_wire_pack(&x, hb);
    raw_send(s, hb, sizeof hb, "abc", "def", 3);
    strz_wire_pack(&h, hb);                                /* well-formed */
    raw_send(s, hb, sizeof hb, "abc", "def", 3);
    expect(m[1], 2, "abc", "def");
    int dropped = log_count("dropped a malformed message") - before;
    CHECKF(dropped == 6, "%d malformed messages logged, want 6", dropped);
    zmq_close(s);
    zmq_ctx_term(zc);
}

static void dead_peer(void **m, int n, const char *tag)
{
    CHECK(g_vt->send(m[0], 2, "hi", 2, "", 0, 0) == 0);
    expect(m[2], 0, "hi", "");
    g_vt->fini(m[2]);
    m[2] = NULL;
    usleep(300000); /* the connection's drop reaches m0 */
    double t0 = now_ms();
    int rc = g_vt->send(m[0], 2, "lost", 4, "", 0, 500);
    double dt = now_ms() - t0;
    CHECKF(rc == STRATA_ETIMEDOUT, "send to a closed peer: %d", rc);
    CHECKF(dt >= 400 && dt < 2000, "took %.0f ms", dt);
    CHECKF(log_count("p2p: m2 (") >= 1, "the lost peer is not named:\n%s",
           g_log);
    /* it restarts on the same address: reached again */
    m[2] = open_member(2, n, tag);
    CHECK(g_vt->send(m[0], 2, "again", 5, "", 0, 3000) == 0);
    if (m[2])
        expect(m[2], 0, "again", "");
}

static void *recv_blocked(void *arg)
{
    char buf[16];
    int peer;
    size_t len;
    static int rc;
    rc = g_vt->recv(arg, &peer, buf, sizeof buf, &len, 10000);
    return &rc;
}

static void abort_and_refusals(void **m)
{
    pthread_t t;
    double t0 = now_ms();
    pthread_create(&t, NULL, recv_blocked, m[1]);
    usleep(200000);
    CHECK(g_vt->ctl(m[1], STRATA_CTL_ABORT, NULL) == 0);
    void *res;
    pthread_join(t, &res);
    CHECK(*(int *)res == STRATA_ECANCELED);
    CHECK(now_ms() - t0 < 3000);
    CHECK(g_vt->send(m[1], 0, "x", 1, "", 0, 0) == STRATA_ECANCELED);
    /* no collectives on a p2p group */
    float v = 1;
    strata_op_t op = { .struct_size = sizeof op, .buf = &v, .count = 1,
                       .device = STRATA_DEVICE(STRATA_DEV_CPU, 0) };
    CHECK(g_vt->reduce(m[0], &op) == STRATA_ENOTSUP);
    CHECK(g_vt->update(m[0], &op) == STRATA_ENOTSUP);
    CHECK(g_vt->ctl(m[0], STRATA_CTL_BARRIER, NULL) == STRATA_ENOTSUP);
    /* no point to point on a ring group (one member: no rendezvous) */
    uint32_t flags = g_flags;
    g_flags = 0;
    void *ring = open_member(0, 1, "ring");
    if (ring) {
        CHECK(g_vt->send(ring, 0, "x", 1, "", 0, 0) == STRATA_ENOTSUP);
        g_vt->fini(ring);
    }
    /* a p2p group of one talks to itself in process */
    g_flags = flags;
    void *solo = open_member(0, 1, "solo");
    if (solo) {
        CHECK(g_vt->send(solo, 0, "me", 2, "", 0, 0) == 0);
        expect(solo, 0, "me", "");
        g_vt->fini(solo);
    }
}

static void pick_ports(int *port);

/* ---- messages of several chunks ------------------------------------- */

#define MIB (1u << 20)

static unsigned char pattern(size_t i)
{
    return (unsigned char)(i ^ (i >> 11) * 31u ^ (i >> 19) * 7u);
}

/* One raw p2p message from member `sender`: header "hdr" (3 bytes) and
 * data frames of the sizes in fr[0..k) cut from pattern(), whatever the
 * length field `dl` says of the data. */
static void raw_chunks(void *s, const char *tag, int sender, size_t dl,
                       const size_t *fr, int k)
{
    strz_hdr_t h = { .type = STRZ_DATA, .flags = STRZ_P2P_FLAG,
                     .sender = sender, .offset = 3,
                     .length = (uint32_t)(3 + dl),
                     .aux = (int32_t)tag_hash(tag) };
    unsigned char hb[STRZ_HDR_SIZE];
    strz_wire_pack(&h, hb);
    zmq_send(s, hb, sizeof hb, ZMQ_SNDMORE);
    zmq_send(s, "hdr", 3, k ? ZMQ_SNDMORE : 0);
    size_t off = 0;
    for (int i = 0; i < k; i++) {
        unsigned char *b = malloc(fr[i] ? fr[i] : 1);
        for (size_t j = 0; j < fr[i]; j++)
            b[j] = pattern(off + j);
        zmq_send(s, b, fr[i], i + 1 < k ? ZMQ_SNDMORE : 0);
        free(b);
        off += fr[i];
    }
}

/* The frames member 0 puts on the wire for `dl` bytes of data with a
 * 1-byte header, as a raw ROUTER (member 2's address) receives them:
 * routing id, zmq.so header, user header, then the data in frames of
 * STRZ_P2P_CHUNK, the last shorter; no data: one empty frame. */
static void wire_frames(void *m0, void *router, size_t dl, const char *data)
{
    CHECK(g_vt->send(m0, 2, "H", 1, data, dl, 0) == 0);
    size_t want = dl ? (dl + MIB - 1) / MIB : 1, got = 0, bad = 0;
    int frames = 0, more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, router, 0) < 0) {
            zmq_msg_close(&m);
            break;
        }
        more = zmq_msg_more(&m);
        size_t n = zmq_msg_size(&m);
        if (frames == 1)
            bad += n != STRZ_HDR_SIZE;
        else if (frames == 2)
            bad += n != 1;
        else if (frames > 2) {
            /* full chunks but the last */
            bad += more ? n != STRZ_P2P_CHUNK : n > STRZ_P2P_CHUNK;
            bad += got + n > dl || memcmp(zmq_msg_data(&m), data + got, n);
            got += n;
        }
        frames++;
        zmq_msg_close(&m);
    }
    CHECKF(frames == 3 + (int)want && got == dl && !bad,
           "%zu bytes of data: %d frames (want %zu), %zu bytes, %zu bad",
           dl, frames, 3 + want, got, bad);
}

static void chunked(void)
{
    const char *tag = "ps-chunks";
    int64_t window = g_cfg.window_bytes;
    g_cfg.window_bytes = 8 * MIB;
    int port[4];
    pick_ports(port);
    /* members 0 and 1; member 2's address is a raw ROUTER's */
    void *zc = zmq_ctx_new(), *router = zmq_socket(zc, ZMQ_ROUTER),
         *dealer = zmq_socket(zc, ZMQ_DEALER);
    int zero = 0, ms = 3000;
    zmq_setsockopt(router, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(router, ZMQ_RCVTIMEO, &ms, sizeof ms);
    zmq_setsockopt(dealer, ZMQ_LINGER, &zero, sizeof zero);
    char ep[96];
    snprintf(ep, sizeof ep, "tcp://%s", g_addrs[2]);
    CHECK(zmq_bind(router, ep) == 0);
    void *m[2] = { open_member(0, 3, tag), open_member(1, 3, tag) };
    size_t big = 3 * MIB + MIB / 2, cap = 3 + big;
    char *data = malloc(big), *buf = malloc(cap + 4096);
    for (size_t i = 0; i < big; i++)
        data[i] = (char)pattern(i);
    if (!m[0] || !m[1] || !data || !buf)
        goto out;

    /* on the wire: a message of at most one chunk is the 3 frames it
     * always was; longer data are cut */
    wire_frames(m[0], router, 0, "");
    wire_frames(m[0], router, 1000, data);
    wire_frames(m[0], router, MIB, data);
    wire_frames(m[0], router, MIB + 1, data);
    wire_frames(m[0], router, big, data);

    /* 3.5 MiB with a header, member 0 to member 1: arrives whole */
    CHECK(g_vt->send(m[0], 1, "hdr", 3, data, big, 0) == 0);
    int peer = -1;
    size_t len = 0;
    memset(buf, 0, cap);
    CHECK(g_vt->recv(m[1], &peer, buf, cap, &len, 5000) == 0);
    CHECKF(peer == 0 && len == cap && memcmp(buf, "hdr", 3) == 0
           && memcmp(buf + 3, data, big) == 0,
           "3.5 MiB: peer %d, len %zu (want %zu)", peer, len, cap);
    /* longer than the buffer: refused, all its frames drained, and the
     * next message arrives */
    CHECK(g_vt->send(m[0], 1, "hdr", 3, data, 2 * MIB + 5, 0) == 0);
    CHECK(g_vt->send(m[0], 1, "hdr", 3, data, MIB + 7, 0) == 0);
    CHECK(g_vt->recv(m[1], &peer, buf, 2 * MIB, &len, 5000) == STRATA_EPROTO);
    CHECK(g_vt->recv(m[1], &peer, buf, 2 * MIB, &len, 5000) == 0);
    CHECK(peer == 0 && len == 3 + MIB + 7
          && memcmp(buf + 3, data, MIB + 7) == 0);

    /* hostile: a raw DEALER speaks for member 0 */
    snprintf(ep, sizeof ep, "tcp://%s", g_addrs[1]);
    CHECK(zmq_connect(dealer, ep) == 0);
    static const struct {
        size_t dl, fr[4];
        int k;
        const char *why;
    } bad[] = {
        { 3 * MIB / 2, { MIB, MIB }, 2,
          "data frames longer than the length field says" },
        { 3 * MIB / 2, { MIB, MIB / 4 }, 2,
          "data frames shorter than the length field says" },
        { 2 * MIB, { MIB + 1, MIB - 1 }, 2,
          "a data frame longer than STRZ_P2P_CHUNK" },
        { 3, { 1, 1, 1 }, 3, "more data frames than its length needs" },
        { 2 * MIB, { MIB, MIB / 2, MIB / 2 }, 3,
          "more data frames than its length needs" },
        { 3, { 0 }, 0, "fewer than 3 frames" },
    };
    int nbad = (int)(sizeof bad / sizeof bad[0]), before[8];
    for (int i = 0; i < nbad; i++)
        before[i] = log_count(bad[i].why);
    for (int i = 0; i < nbad; i++)
        raw_chunks(dealer, tag, 0, bad[i].dl, bad[i].fr, bad[i].k);
    /* then a well-formed one cut differently from a member's: the data
     * go where their offsets say */
    size_t half = 3 * MIB / 4, good[2] = { half, half };
    raw_chunks(dealer, tag, 0, 2 * half, good, 2);
    /* the buffer holds the longest that is not too long; a guard after */
    size_t bcap = 3 + 2 * half;
    memset(buf, 0, bcap);
    memset(buf + bcap, 0x77, 4096);
    CHECK(g_vt->recv(m[1], &peer, buf, bcap, &len, 5000) == 0);
    CHECKF(peer == 0 && len == bcap && memcmp(buf, "hdr", 3) == 0
           && memcmp(buf + 3, data, 2 * half) == 0,
           "after the hostile ones: peer %d, len %zu (want %zu)", peer, len,
           bcap);
    int guard = 1;
    for (size_t i = 0; i < 4096; i++)
        guard &= (unsigned char)buf[bcap + i] == 0x77;
    CHECK(guard);
    /* each for its reason (the first 10 drops are logged one by one) */
    for (int i = 0; i < nbad; i++) {
        int same = 0;
        for (int j = 0; j < nbad; j++)
            same += strcmp(bad[j].why, bad[i].why) == 0;
        int n = log_count(bad[i].why) - before[i];
        CHECKF(n == same, "'%s' logged %d times, want %d", bad[i].why, n,
               same);
    }
    if (STRATA_HAS(g_vt, strangers)) {
        strata_strangers_t st = { .struct_size = sizeof st };
        CHECK(g_vt->strangers(m[1], &st, 1) == 0);
        /* the malformed ones and the one longer than the buffer */
        CHECKF(st.bad_message == (uint64_t)nbad + 1, "%llu counted, want %d",
               (unsigned long long)st.bad_message, nbad + 1);
    }
    /* and a member's message after them */
    CHECK(g_vt->send(m[0], 1, "hdr", 3, data, big, 0) == 0);
    CHECK(g_vt->recv(m[1], &peer, buf, cap, &len, 5000) == 0);
    CHECK(peer == 0 && len == cap && memcmp(buf + 3, data, big) == 0);
out:
    for (int i = 0; i < 2; i++)
        if (m[i])
            g_vt->fini(m[i]);
    free(data);
    free(buf);
    zmq_close(dealer);
    zmq_close(router);
    zmq_ctx_term(zc);
    g_cfg.window_bytes = window;
}

static void pick_ports(int *port)
{
    for (int i = 0; i < 4; i++) {
        port[i] = spawn_task_port();
        snprintf(g_addr[i], sizeof g_addr[i], "127.0.0.1:%d", port[i]);
        g_addrs[i] = g_addr[i];
    }
}

int main(void)
{
    if (load() != 0)
        CHECK_SKIP("zmq.so with send/recv not found in $STRATA_PLUGIN_PATH");
    const int n = 3;
    int port[4];
    pick_ports(port);
    const char *tag = "ps-test";
    g_flags = STRATA_GROUP_P2P;
    void *m[3];
    for (int i = 0; i < n; i++)
        m[i] = open_member(i, n, tag);
    if (m[0] && m[1] && m[2]) {
        any_to_any(m);
        timeouts_and_caps(m);
        malformed(m, tag);
        dead_peer(m, n, tag);
        abort_and_refusals(m);
    }
    for (int i = 0; i < n; i++)
        if (m[i])
            g_vt->fini(m[i]);
    g_flags = STRATA_GROUP_P2P;
    chunked();
    /* An ABI 1.2 opener's group, marked by its tag: point to point too. */
    pick_ports(port);
    g_flags = 0;
    for (int i = 0; i < n; i++)
        m[i] = open_member(i, n, "p2p:legacy");
    if (m[0] && m[1] && m[2])
        any_to_any(m);
    for (int i = 0; i < n; i++)
        if (m[i])
            g_vt->fini(m[i]);
    strata_kit_free(g_kit);
    return CHECK_DONE();
}
