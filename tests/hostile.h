/* A hostile peer for network tests: what a port scanner, a stray HTTP
 * client, a ZeroMQ client that is not the job's, or a flood of idle
 * connections does to a task's port. Loopback only. */
#ifndef STRATA_TESTS_HOSTILE_H
#define STRATA_TESTS_HOSTILE_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

/* A TCP connection to 127.0.0.1:port (blocking connect), or -1. */
static inline int hostile_connect(int port, int nonblock)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC |
                                 (nonblock ? SOCK_NONBLOCK : 0), 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0 &&
        !nonblock) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Raw bytes on a fresh connection, then close: garbage, or HTTP. */
static inline int hostile_raw(int port, const void *bytes, size_t len)
{
    int fd = hostile_connect(port, 0);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, bytes, len);
    usleep(100000);
    close(fd);
    return n == (ssize_t)len ? 0 : -1;
}

/* A ZeroMQ DEALER that sends junk frames; with server_key (Z85), a CURVE
 * client with a key pair of its own (it knows the server's public key,
 * which is no secret, but its key is not the job's). */
static inline int hostile_zmq(int port, const char *server_key)
{
    char ep[64], pub[41], sec[41];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 500, rc = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    if (server_key) {
        rc |= zmq_curve_keypair(pub, sec);
        rc |= zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, server_key, 41);
        rc |= zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, pub, 41);
        rc |= zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sec, 41);
    }
    rc |= zmq_connect(s, ep);
    unsigned char junk[64];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)(i * 37 + 11);
    zmq_send(s, "SZMQ", 4, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(s, junk, sizeof junk, ZMQ_DONTWAIT);
    usleep(300000);
    zmq_close(s);
    zmq_ctx_term(ctx);
    return rc ? -1 : 0;
}

/* n idle connections, kept open: fds[0..n) (-1 where one failed). The
 * file limit is raised first. Returns how many connected. */
static inline int hostile_flood(int port, int *fds, int n)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)n + 256) {
        rl.rlim_cur = rl.rlim_max < (rlim_t)n + 256 ? rl.rlim_max
                                                    : (rlim_t)n + 256;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    int ok = 0;
    for (int i = 0; i < n; i++) {
        fds[i] = hostile_connect(port, 1);
        ok += fds[i] >= 0;
    }
    return ok;
}

static inline void hostile_flood_end(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* Resident memory of a process, KiB (VmRSS), or -1. */
static inline long hostile_rss_kib(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
    FILE *f = fopen(path, "r");
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kib = atol(line + 6);
    if (f)
        fclose(f);
    return kib;
}

/* The public-key = "..." of a ZeroMQ certificate file. */
static inline int hostile_cert_key(const char *path, char out[41])
{
    char text[2048];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f)
        fclose(f);
    text[n] = '\0';
    const char *p = strstr(text, "public-key = \"");
    if (!p || strlen(p) < 14 + 41)
        return -1;
    memcpy(out, p + 14, 40);
    out[40] = '\0';
    return 0;
}

#endif
