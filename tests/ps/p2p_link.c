/* One member of a 2-member point-to-point group of zmq.so (p2p.h), for
 * the shaped-link test (p2p_shaped.sh, one process per network namespace)
 * and for timing a large message on loopback by hand:
 *
 *   p2p_link RANK ADDR0 ADDR1 BYTES [HEARTBEAT_MS [TIMEOUT_S [CURVE]]]
 *
 * Member 1 says "ping" until member 0 answers, then sends BYTES of
 * patterned data (header "big") once, and again every TIMEOUT_S / 3
 * without an "ack" (as a ps worker resends); member 0 checks every byte
 * and answers "ack". Each prints one line and exits 0 when the message
 * went through intact within TIMEOUT_S (default 30), else 1; 77 when
 * zmq.so is not found. heartbeat_ms is HEARTBEAT_MS (default 300: a
 * connection silent for 0.9 s is dead); CURVE 1: a secured group (keys
 * made from fixed seeds: both processes derive the same). window_bytes
 * is BYTES + 1 MiB. Member 1's line: "delivered N bytes in S s (R MB/s)
 * after K sends", the time from the first send to the ack. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zmq.h>

#include <strata/kit.h>

#include "../../plugins/transport/zmq/strz.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static unsigned char pattern(size_t i)
{
    return (unsigned char)(i ^ (i >> 11) * 31u ^ (i >> 19) * 7u);
}

static void h_log(void *user, int level, const char *who, const char *msg)
{
    (void)user;
    if (level <= STRATA_LOG_WARN)
        fprintf(stderr, "%s: %s\n", who, msg);
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: p2p_link RANK ADDR0 ADDR1 BYTES "
                        "[HEARTBEAT_MS [TIMEOUT_S [CURVE]]]\n");
        return 2;
    }
    int rank = atoi(argv[1]);
    size_t bytes = strtoull(argv[4], NULL, 10);
    int hb = argc > 5 ? atoi(argv[5]) : 300;
    double timeout = argc > 6 ? atof(argv[6]) : 30;
    int curve = argc > 7 && atoi(argv[7]);
    if ((rank != 0 && rank != 1) || bytes == 0 || bytes > (1u << 30)
        || hb <= 0 || timeout <= 0)
        return 2;

    const char *dir = getenv("STRATA_PLUGIN_PATH");
    char path[4096];
    snprintf(path, sizeof path, "%s/zmq.so", dir && *dir ? dir : ".");
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    const strata_plugin_v2_t *vt = dl ? dlsym(dl, STRATA_PLUGIN_SYMBOL) : NULL;
    if (!vt || !STRATA_HAS(vt, send) || !STRATA_HAS(vt, recv)) {
        printf("SKIPPED: zmq.so with send/recv not found (%s)\n",
               dl ? path : dlerror());
        return 77;
    }
    strata_kit_config_t kc = STRATA_KIT_CONFIG_INIT;
    kc.log = h_log;
    strata_kit_t *kit;
    if (strata_kit_host(&kc, &kit) != STRATA_OK)
        return 1;
    strz_cfg_t cfg = { .chunk_bytes = 256 << 10, .timeout_s = timeout,
                       .heartbeat_ms = hb, .linger_ms = 2000,
                       .window_bytes = (int64_t)bytes + (1 << 20),
                       .io_threads = 1 };
    /* CURVE keys from fixed seeds: both processes make the same pairs */
    char pub[2][41], sec[2][41];
    const char *pubs[2] = { pub[0], pub[1] };
    for (int i = 0; curve && i < 2; i++) {
        uint8_t seed[32];
        for (int k = 0; k < 32; k++)
            seed[k] = (uint8_t)(0x5a + 17 * i + 3 * k);
        if (!zmq_z85_encode(sec[i], seed, 32)
            || zmq_curve_public(pub[i], sec[i]) != 0) {
            fprintf(stderr, "CURVE keys: %s\n", zmq_strerror(zmq_errno()));
            return 1;
        }
    }
    const char *names[2] = { "m0", "m1" }, *addrs[2] = { argv[2], argv[3] };
    int32_t cpu = STRATA_DEVICE(STRATA_DEV_CPU, 0);
    strata_group_t g = { .struct_size = sizeof g, .scope = STRATA_SCOPE_WORLD,
                         .size = 2, .rank = rank, .nlocal = 1,
                         .timeout_ms = (int32_t)(timeout * 1000),
                         .devices = &cpu, .addrs = addrs, .names = names,
                         .tag = "p2p-link", .flags = STRATA_GROUP_P2P,
                         .public_keys = curve ? pubs : NULL,
                         .secret_key = curve ? sec[rank] : NULL };
    strata_env_t env = { .struct_size = sizeof env,
                         .kind = STRATA_KIND_TRANSPORT, .cfg = &cfg,
                         .section = "transport", .group = &g,
                         .nreplicas = 1, .devices = &cpu };
    void *m = NULL;
    if (vt->init(strata_kit_table(kit), strata_kit_hctx(kit), &env, &m) != 0)
        return 1;

    char *buf = malloc(bytes + 16);
    if (!buf)
        return 1;
    double t_end = now_s() + timeout, t0 = 0;
    int ok = 0, sends = 0, peer;
    size_t len;
    if (rank == 1) {
        /* connected both ways: a "pong" came back */
        while (!ok && now_s() < t_end) {
            if (vt->send(m, 0, "ping", 4, NULL, 0, 1000) != 0)
                continue;
            ok = vt->recv(m, &peer, buf, 16, &len, 1000) == 0 && len == 4
                 && memcmp(buf, "pong", 4) == 0;
        }
        for (size_t i = 0; i < bytes; i++)
            buf[i] = (char)pattern(i);
        t0 = now_s();
        double resend = timeout / 3, next = 0;
        for (ok = ok ? 0 : -1; ok == 0 && now_s() < t_end;) {
            if (now_s() >= next) {
                sends += vt->send(m, 0, "big", 3, buf, bytes, 1000) == 0;
                next = now_s() + resend;
            }
            char ack[16];
            ok = vt->recv(m, &peer, ack, sizeof ack, &len, 200) == 0
                 && len == 3 && memcmp(ack, "ack", 3) == 0;
        }
        double dt = now_s() - t0;
        if (ok > 0)
            printf("member 1: delivered %zu bytes in %.3f s (%.1f MB/s) "
                   "after %d send%s\n", bytes, dt, bytes / dt / 1e6, sends,
                   sends == 1 ? "" : "s");
        else
            printf("member 1: no ack for %zu bytes within %.1f s (%d "
                   "sends)\n", bytes, timeout, sends);
    } else {
        int msgs = 0;
        while (!ok && now_s() < t_end) {
            int left = (int)((t_end - now_s()) * 1000) + 1;
            if (vt->recv(m, &peer, buf, bytes + 3, &len, left) != 0)
                continue;
            msgs++;
            if (len == 4 && memcmp(buf, "ping", 4) == 0) {
                vt->send(m, 1, "pong", 4, NULL, 0, 1000);
                continue;
            }
            int intact = len == bytes + 3 && memcmp(buf, "big", 3) == 0;
            for (size_t i = 0; intact && i < bytes; i++)
                intact = (unsigned char)buf[3 + i] == pattern(i);
            if (intact)
                ok = vt->send(m, 1, "ack", 3, NULL, 0, 5000) == 0;
            else
                fprintf(stderr, "member 0: a message of %zu bytes is not "
                        "the one sent\n", len);
        }
        printf("member 0: %s %zu bytes (%d messages)\n",
               ok ? "received intact" : "did not receive", bytes, msgs);
    }
    fflush(stdout);
    vt->fini(m); /* flushes the ack (linger_ms) */
    free(buf);
    strata_kit_free(kit);
    return ok > 0 ? 0 : 1;
}
