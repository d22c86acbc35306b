/* The rendezvous (core/member/rendezvous.h) in one process: tasks are threads,
 * rank 0 serves on a free loopback port, and hostile peers are this test's
 * own sockets. Each case checks what every task returns and the lines it
 * logs (stderr is captured):
 *   wire       messages built and parsed, every limit and malformation
 *   four       4 tasks, rank 0 last: one table, the same everywhere
 *   mpi_local  Open MPI on one node: the abstract Unix socket
 *   hostile    garbage, HTTP, silence, a byte and silence, a huge length,
 *              another version: dropped or refused, the job's tasks meet
 *   world      a task of another world size: refused, the others meet
 *   duplicate  a second rank 1: every task, rank 0 and one that comes
 *              later end within seconds with one error naming both
 *   keys       authenticated with the job's keys: they meet; a stranger's
 *              REGISTER (its own key) and a replay (another connection's
 *              nonce) are dropped, counted and named, and told REFUSED
 *   token      plaintext mode's token: a task with another token cannot
 *              verify rank 0's REFUSED (it is tagged for nobody: it could
 *              be anybody's), drops it, and ends at its timeout naming
 *              it; the job's meet
 *   late       rank 1 claimed again after the table (the job's keys): rank
 *              0's and rank 1's watchers (rdzv_late.c) stop their runs,
 *              and all three name both addresses; a stranger after the
 *              table is dropped and named, and ends nothing
 *   mismatch   rank 0 with keys, a task without: the task names both
 *   forged_tag a fake rank 0 hands an authenticated task a table without
 *              its tag: refused
 *   timeout    a rank that never comes: every task names it
 *   no_rank0   nobody serves: the task says so
 *   forged     rank 0 answers garbage, a wrong table, another address for
 *              us, duplicate addresses, a huge length, nothing: one error
 *   stop       a stop request ends a waiting task and rank 0
 *   bind       rank 0 not on the rendezvous host; its own name that does
 *              not resolve: tried again until the timeout; the port in use
 * Every wait is bounded by the rendezvous's own timeout (short here). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "check.h"
#include "member/rendezvous.h"
#include "spawn.h"
#include "testutil.h"

/* ---- tasks as threads -------------------------------------------------------- */

typedef struct task {
    strata__cluster_t   c;
    strata__rdzv_opts_t o;
    strata__rdzv_auth_t auth;
    atomic_int          stop;
    int                 rc;
    pthread_t           th;
} task_t;

static void *task_main(void *arg)
{
    task_t *t = arg;
    t->rc = strata__rendezvous(&t->c, &t->o);
    return NULL;
}

/* A task of torchrun's variables, addresses unknown: rank of world at
 * 127.0.0.1:port. */
static task_t *task_new(int world, int rank, int port, double timeout_s)
{
    task_t *t = calloc(1, sizeof *t);
    char e[4][48];
    snprintf(e[0], sizeof e[0], "RANK=%d", rank);
    snprintf(e[1], sizeof e[1], "WORLD_SIZE=%d", world);
    snprintf(e[2], sizeof e[2], "MASTER_ADDR=127.0.0.1");
    snprintf(e[3], sizeof e[3], "MASTER_PORT=%d", port);
    char *env[] = { e[0], e[1], e[2], e[3], NULL };
    if (!t || strata__cluster_resolve(NULL, NULL, env, &t->c) != 0) {
        fprintf(stderr, "task_new: cannot resolve\n");
        exit(2);
    }
    t->o = (strata__rdzv_opts_t){ .timeout_s = timeout_s, .hello_s = 0.3,
                                  .stop = &t->stop };
    return t;
}

static void task_start(task_t *t)
{
    if (pthread_create(&t->th, NULL, task_main, t) != 0)
        exit(2);
}

/* A task whose thread has ended or never started. */
static int task_free(task_t *t)
{
    int rc = t->rc;
    strata__cluster_free(&t->c);
    strata__rdzv_auth_free(&t->auth);
    free(t);
    return rc;
}

static int task_end(task_t *t)
{
    pthread_join(t->th, NULL);
    return task_free(t);
}

/* ---- the job's keys, as rdzv_auth.c derives them from its certificates -- */

#define NKEYS 4
static unsigned char g_pk[NKEYS][32], g_sk[NKEYS][32];

static void make_keys(void)
{
    CHECK(sodium_init() >= 0);
    for (int r = 0; r < NKEYS; r++)
        crypto_box_keypair(g_pk[r], g_sk[r]);
}

/* Task rank `self` of `world` authenticates with the job's keys; `sk`: its
 * secret key (another's: a stranger). */
static void use_keys(task_t *t, int world, int self, const unsigned char *sk)
{
    strata__rdzv_auth_t *a = &t->auth;
    a->kind = STRATA_RDZV_AUTH_KEYS;
    a->world = (uint32_t)world;
    a->key = calloc((size_t)world, sizeof *a->key);
    for (int r = 0; r < world; r++)
        if ((self == 0 && r > 0) || (self > 0 && r == 0))
            CHECK(crypto_box_beforenm(a->key[r], g_pk[r], sk) == 0);
    t->o.auth = a;
}

static void use_token(task_t *t, int world, const char *token)
{
    CHECK(strata__rdzv_auth_token(&t->auth, (uint32_t)world, token) == 0);
    t->o.auth = &t->auth;
}

static void nap(double s)
{
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    nanosleep(&ts, NULL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int has(const char *log, const char *what)
{
    return log && strstr(log, what) != NULL;
}

static int errors(const char *log)
{
    int n = 0;
    for (const char *p = log; p && (p = strstr(p, "error: ")); p++)
        n++;
    return n;
}

/* ---- raw peers ------------------------------------------------------------------ */

static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    for (int i = 0; fd >= 0 && i < 100; i++) {
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
            return fd;
        nap(0.05);
    }
    if (fd >= 0)
        close(fd);
    return -1;
}

/* Raw bytes on a fresh connection, then close. */
static int raw(int port, const void *bytes, size_t len)
{
    int fd = dial(port);
    ssize_t n = fd >= 0 ? write(fd, bytes, len) : -1;
    if (fd >= 0)
        close(fd);
    return n == (ssize_t)len ? 0 : -1;
}

/* Reads until EOF or `s` seconds; the bytes read, -1 on error. */
static ssize_t drain(int fd, uint8_t *buf, size_t cap, int s)
{
    struct timeval tv = { s, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    size_t at = 0;
    for (;;) {
        ssize_t n = read(fd, buf + at, cap - at);
        if (n <= 0)
            return n < 0 && at == 0 ? -1 : (ssize_t)at;
        at += (size_t)n;
        if (at == cap)
            return (ssize_t)at;
    }
}

/* ---- wire -------------------------------------------------------------------- */

static void test_wire(void)
{
    uint8_t m[STRATA_RDZV_HDR + STRATA_RDZV_REG_MAX];
    strata__rdzv_hdr_t h;
    size_t n = strata__rdzv_register(m, 4, 3, "10.0.0.2:40000");
    CHECK(n == STRATA_RDZV_HDR + 10 + 14);
    CHECK(strata__rdzv_get_hdr(m, 4, &h) == 0 && h.type == STRATA_RDZV_REGISTER
          && h.len == n - STRATA_RDZV_HDR);
    uint32_t w, r;
    char addr[STRATA_RDZV_MAX_ADDR + 1], why[256];
    CHECK(strata__rdzv_register_parse(m + STRATA_RDZV_HDR, h.len, &w, &r, addr,
                                      why, sizeof why) == 0
          && w == 4 && r == 3 && strcmp(addr, "10.0.0.2:40000") == 0);
    /* a length that disagrees with the address's own */
    CHECK(strata__rdzv_register_parse(m + STRATA_RDZV_HDR, h.len - 1, &w, &r,
                                      addr, why, sizeof why) == -1);
    CHECK(strata__rdzv_register_parse(m + STRATA_RDZV_HDR, 9, &w, &r, addr, why,
                                      sizeof why) == -1);
    /* not an address, a control byte */
    n = strata__rdzv_register(m, 4, 3, "no-port");
    CHECK(strata__rdzv_register_parse(m + STRATA_RDZV_HDR, n - STRATA_RDZV_HDR,
                                      &w, &r, addr, why, sizeof why) == -1
          && strstr(why, "expected host:port"));
    n = strata__rdzv_register(m, 4, 3, "a\tb:1");
    CHECK(strata__rdzv_register_parse(m + STRATA_RDZV_HDR, n - STRATA_RDZV_HDR,
                                      &w, &r, addr, why, sizeof why) == -1
          && strstr(why, "byte 0x09"));
    char big[400];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK(strata__rdzv_register(m, 4, 3, big) == 0);

    /* headers: magic, version, type, the length limit per type */
    strata__rdzv_put_hdr(m, STRATA_RDZV_REGISTER, STRATA_RDZV_REG_MAX);
    CHECK(strata__rdzv_get_hdr(m, 2, &h) == 0);
    strata__rdzv_put_hdr(m, STRATA_RDZV_REGISTER, STRATA_RDZV_REG_MAX + 1);
    CHECK(strata__rdzv_get_hdr(m, 2, &h) == -4);
    strata__rdzv_put_hdr(m, STRATA_RDZV_TABLE, 4 + 2 * (2 + 263));
    CHECK(strata__rdzv_get_hdr(m, 2, &h) == 0);
    CHECK(strata__rdzv_get_hdr(m, 1, &h) == -4);
    strata__rdzv_put_hdr(m, 9, 0);
    CHECK(strata__rdzv_get_hdr(m, 2, &h) == -3);
    strata__rdzv_put_hdr(m, STRATA_RDZV_REGISTER, 10);
    m[4] = 1; /* the version before the challenge */
    CHECK(strata__rdzv_get_hdr(m, 2, &h) == -2 && h.version == 1);
    memcpy(m, "GET ", 4);
    CHECK(strata__rdzv_get_hdr(m, 2, &h) == -1);

    /* tables */
    char *in[3] = { "10.0.0.1:1", "10.0.0.2:2", "[fd00::3]:3" }, *out[3];
    size_t len;
    uint8_t *t = strata__rdzv_table(in, 3, &len);
    CHECK(t && strata__rdzv_get_hdr(t, 3, &h) == 0 && h.len == len - 12);
    CHECK(strata__rdzv_table_parse(t + 12, h.len, 3, out, why, sizeof why)
          == 0);
    for (int i = 0; i < 3; i++) {
        CHECK(strcmp(in[i], out[i]) == 0);
        free(out[i]);
    }
    CHECK(strata__rdzv_table_parse(t + 12, h.len, 2, out, why, sizeof why)
          == -1 && strstr(why, "a table of 3 tasks, this job has 2"));
    for (size_t cut = 0; cut < h.len; cut += 7)
        CHECKF(strata__rdzv_table_parse(t + 12, cut, 3, out, why, sizeof why)
               == -1 && !out[0], "cut at %zu", cut);
    uint8_t longer[1024];
    memcpy(longer, t + 12, h.len);
    longer[h.len] = 0;
    CHECK(strata__rdzv_table_parse(longer, h.len + 1, 3, out, why, sizeof why)
          == -1 && strstr(why, "1 bytes after the table"));
    free(t);
    char *dup[2] = { "10.0.0.1:1", "10.0.0.1:1" };
    t = strata__rdzv_table(dup, 2, &len);
    CHECK(strata__rdzv_table_parse(t + 12, len - 12, 2, out, why, sizeof why)
          == -1 && strstr(why, "ranks 0 and 1 both have address 10.0.0.1:1"));
    free(t);

    uint8_t ref[STRATA_RDZV_HDR + 1 + STRATA_RDZV_MAX_REASON];
    char reason[1000];
    memset(reason, 'x', sizeof reason - 1);
    reason[sizeof reason - 1] = '\0';
    n = strata__rdzv_refused(ref, STRATA_RDZV_WHY_TIMEOUT, reason);
    CHECK(n == sizeof ref && strata__rdzv_get_hdr(ref, 1, &h) == 0
          && h.type == STRATA_RDZV_REFUSED && ref[12] == STRATA_RDZV_WHY_TIMEOUT);
}

/* ---- tasks that meet ------------------------------------------------------------ */

/* Every task holds the same table, rank r's address on 127.0.0.1, all
 * different. */
static void check_tables(task_t **t, int n)
{
    for (int r = 0; r < n; r++) {
        const strata__cluster_t *c = &t[r]->c;
        CHECKF(t[r]->rc == 0, "rank %d: rc %d", r, t[r]->rc);
        for (int i = 0; t[r]->rc == 0 && i < n; i++) {
            const char *a = c->tasks[i].address, *b = t[0]->c.tasks[i].address;
            CHECKF(a && b && strcmp(a, b) == 0, "rank %d's table, entry %d: "
                   "%s vs %s", r, i, a ? a : "NULL", b ? b : "NULL");
            CHECKF(a && strncmp(a, "127.0.0.1:", 10) == 0, "%s", a ? a : "");
            for (int j = 0; a && j < i; j++)
                CHECK(strcmp(a, c->tasks[j].address) != 0);
        }
    }
}

static void test_four(void)
{
    int port = spawn_task_port();
    task_t *t[4];
    for (int r = 0; r < 4; r++)
        t[r] = task_new(4, r, port, 20);
    capture_begin();
    for (int r = 3; r >= 1; r--)
        task_start(t[r]);
    nap(0.5); /* the others retry until rank 0 is up */
    task_start(t[0]);
    for (int r = 0; r < 4; r++)
        pthread_join(t[r]->th, NULL);
    const char *log = capture_end();
    check_tables(t, 4);
    CHECKF(has(log, "4 tasks registered") && !errors(log), "%s", log);
    for (int r = 0; r < 4; r++) {
        strata__cluster_free(&t[r]->c);
        free(t[r]);
    }
}

static void test_mpi_local(void)
{
    char ns[64];
    snprintf(ns, sizeof ns, "PMIX_NAMESPACE=test-rdzv-%ld", (long)getpid());
    task_t *t[3];
    for (int r = 0; r < 3; r++) {
        t[r] = calloc(1, sizeof *t[r]);
        char e[3][48];
        snprintf(e[0], sizeof e[0], "OMPI_COMM_WORLD_RANK=%d", r);
        snprintf(e[1], sizeof e[1], "OMPI_COMM_WORLD_SIZE=3");
        snprintf(e[2], sizeof e[2], "OMPI_COMM_WORLD_LOCAL_SIZE=3");
        char *env[] = { e[0], e[1], e[2], ns, NULL };
        CHECK(strata__cluster_resolve(NULL, NULL, env, &t[r]->c) == 0);
        CHECK(strncmp(t[r]->c.pub.rendezvous, "unix:@strata-", 13) == 0);
        t[r]->o = (strata__rdzv_opts_t){ .timeout_s = 20, .hello_s = 1 };
    }
    capture_begin();
    for (int r = 2; r >= 0; r--)
        task_start(t[r]);
    for (int r = 0; r < 3; r++)
        pthread_join(t[r]->th, NULL);
    const char *log = capture_end();
    check_tables(t, 3);
    CHECKF(has(log, "3 tasks registered") && !errors(log), "%s", log);
    for (int r = 0; r < 3; r++) {
        strata__cluster_free(&t[r]->c);
        free(t[r]);
    }
}

/* ---- hostile peers ---------------------------------------------------------------- */

static void test_hostile(void)
{
    int port = spawn_task_port();
    task_t *r0 = task_new(2, 0, port, 20), *r1 = task_new(2, 1, port, 20);
    capture_begin();
    task_start(r0);
    static const char http[] = "GET / HTTP/1.0\r\n\r\n";
    CHECK(raw(port, http, sizeof http - 1) == 0);
    uint8_t junk[256];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)(i * 37 + 11);
    CHECK(raw(port, junk, sizeof junk) == 0);
    int silent = dial(port), one = dial(port), huge = dial(port),
        old = dial(port);
    CHECK(silent >= 0 && one >= 0 && huge >= 0 && old >= 0);
    CHECK(write(one, "S", 1) == 1);
    uint8_t m[STRATA_RDZV_HDR + STRATA_RDZV_REG_MAX];
    strata__rdzv_put_hdr(m, STRATA_RDZV_REGISTER, 0xffffffffu);
    CHECK(write(huge, m, STRATA_RDZV_HDR) == STRATA_RDZV_HDR);
    size_t n = strata__rdzv_register(m, 2, 1, "127.0.0.1:9");
    m[4] = 7; /* a version from the future */
    CHECK(write(old, m, n) == (ssize_t)n);
    uint8_t back[1024];
    ssize_t got = drain(old, back, sizeof back, 3);
    strata__rdzv_hdr_t h;
    /* every connection begins with rank 0's challenge */
    enum { CH = STRATA_RDZV_HDR + 1 + STRATA_RDZV_NONCE };
    CHECKF(got > CH + STRATA_RDZV_HDR && strata__rdzv_get_hdr(back, 2, &h) == 0
           && h.type == STRATA_RDZV_CHALLENGE
           && strata__rdzv_get_hdr(back + CH, 2, &h) == 0
           && h.type == STRATA_RDZV_REFUSED
           && memmem(back, (size_t)got, "version 7", 9), "got %zd", got);
    /* rank 0 closes the silent ones after hello_s (0.3 s) */
    CHECK(drain(silent, back, sizeof back, 3) == CH);
    CHECK(drain(one, back, sizeof back, 3) == CH);
    CHECK(drain(huge, back, sizeof back, 3) == CH);
    close(silent);
    close(one);
    close(huge);
    close(old);
    task_start(r1);
    int rc0 = task_end(r0), rc1 = task_end(r1);
    const char *log = capture_end();
    CHECKF(rc0 == 0 && rc1 == 0, "rc %d %d", rc0, rc1);
    CHECKF(has(log, "not a strata rendezvous message (it began 47 45 54 20)")
           && has(log, "sent nothing in 0.3 s")
           && has(log, "sent 1 byte of a message in 0.3 s")
           && has(log, "a body of 4294967295 bytes announced")
           && has(log, "rendezvous protocol version 7; rank 0 speaks 3")
           && has(log, "the rendezvous goes on") && !errors(log),
           "%s", log);
}

static void test_world(void)
{
    int port = spawn_task_port();
    task_t *r0 = task_new(2, 0, port, 20), *bad = task_new(3, 1, port, 20);
    capture_begin();
    task_start(r0);
    task_start(bad);
    int rcb = task_end(bad);
    task_t *r1 = task_new(2, 1, port, 20);
    task_start(r1);
    int rc0 = task_end(r0), rc1 = task_end(r1);
    const char *log = capture_end();
    CHECKF(rcb == STRATA_ECONFIG && rc0 == 0 && rc1 == 0, "rc %d %d %d", rcb,
           rc0, rc1);
    CHECKF(errors(log) == 1
           && has(log, "error: at 127.0.0.1:")
           && has(log, "rank 0 refused rank 1: it registered as rank 1 of 3 "
                       "tasks, but this job has 2"), "%s", log);
}

static void test_duplicate(void)
{
    int port = spawn_task_port();
    task_t *r0 = task_new(3, 0, port, 20), *a = task_new(3, 1, port, 20),
           *b = task_new(3, 1, port, 20), *r2 = task_new(3, 2, port, 20);
    capture_begin();
    double t0 = now_s();
    task_start(r0);
    task_start(a);
    nap(0.5); /* a has registered */
    task_start(b);
    int rcb = task_end(b);
    task_start(r2); /* comes after: told too */
    int rc2 = task_end(r2), rca = task_end(a);
    double ta = now_s() - t0;
    int rc0 = task_end(r0);
    const char *log = capture_end();
    CHECKF(rcb == STRATA_ECONFIG && rc0 == STRATA_ECONFIG &&
           rca == STRATA_ECONFIG && rc2 == STRATA_ECONFIG,
           "rc %d %d %d %d", rcb, rc0, rca, rc2);
    CHECKF(ta < 3.0, "rank 1's first claimer ended after %.1f s", ta);
    /* rank 0 says it once, and each of the three tasks repeats it */
    const char *what = "rank 1 is claimed twice: by 127.0.0.1:";
    int n = 0;
    for (const char *p = log; (p = strstr(p, what)); p++)
        n++;
    CHECKF(errors(log) == 4 && n == 4 && has(log, ") and by 127.0.0.1:")
           && has(log, "rank 0 refused rank 2: rank 1 is claimed twice"),
           "%d claims: %s", n, log);
}

/* ---- authenticated --------------------------------------------------------------- */

/* A peer of the test: reads rank 0's CHALLENGE, sends a REGISTER of rank
 * `rank` tagged under `a` with `nonce` (NULL: the challenge's), returns
 * the answer's why byte (REFUSED), or -1. */
static int register_as(int port, strata__rdzv_auth_t *a, uint32_t rank,
                       const uint8_t *nonce)
{
    int fd = dial(port);
    uint8_t ch[STRATA_RDZV_HDR + 1 + STRATA_RDZV_NONCE], m[1024];
    ssize_t got = fd >= 0 ? drain(fd, ch, sizeof ch, 3) : -1;
    CHECK(got == (ssize_t)sizeof ch && ch[5] == STRATA_RDZV_CHALLENGE);
    size_t n = strata__rdzv_register(m, 2, rank, "127.0.0.1:7");
    strata__rdzv_put_hdr(m, STRATA_RDZV_REGISTER,
                         (uint32_t)(n - STRATA_RDZV_HDR + STRATA_RDZV_TAG));
    strata__rdzv_tag(a, 0, STRATA_RDZV_REGISTER,
                     nonce ? nonce : ch + STRATA_RDZV_HDR + 1,
                     m + STRATA_RDZV_HDR, n - STRATA_RDZV_HDR, m + n);
    n += STRATA_RDZV_TAG;
    CHECK(write(fd, m, n) == (ssize_t)n);
    got = drain(fd, m, sizeof m, 3);
    close(fd);
    return got > STRATA_RDZV_HDR && m[5] == STRATA_RDZV_REFUSED
               ? m[STRATA_RDZV_HDR] : -1;
}

static void test_keys(void)
{
    int port = spawn_task_port();
    task_t *t[3];
    for (int r = 0; r < 3; r++) {
        t[r] = task_new(3, r, port, 20);
        use_keys(t[r], 3, r, g_sk[r]);
    }
    task_t *r0 = task_new(2, 0, port, 20), *r1 = task_new(2, 1, port, 20);
    use_keys(r0, 2, 0, g_sk[0]);
    use_keys(r1, 2, 1, g_sk[1]);
    /* a stranger with a key pair of its own; a replay: rank 1's key, but a
     * tag made for another connection's nonce */
    task_t *s = task_new(2, 1, port, 20), *rp = task_new(2, 1, port, 20);
    use_keys(s, 2, 1, g_sk[3]);
    use_keys(rp, 2, 1, g_sk[1]);
    capture_begin();
    for (int r = 2; r >= 0; r--)
        task_start(t[r]);
    for (int r = 0; r < 3; r++)
        pthread_join(t[r]->th, NULL);
    const char *log = capture_end();
    check_tables(t, 3);
    CHECKF(has(log, "3 tasks registered") && !errors(log), "%s", log);
    for (int r = 0; r < 3; r++)
        task_free(t[r]);

    capture_begin();
    task_start(r0);
    uint8_t other[STRATA_RDZV_NONCE] = { 1 };
    int w1 = register_as(port, &s->auth, 1, NULL);
    int w2 = register_as(port, &rp->auth, 1, other);
    task_start(r1);
    pthread_join(r0->th, NULL);
    pthread_join(r1->th, NULL);
    log = capture_end();
    CHECKF(w1 == STRATA_RDZV_WHY_AUTH && w2 == STRATA_RDZV_WHY_AUTH,
           "the strangers were told %d %d", w1, w2);
    CHECKF(r0->rc == 0 && r1->rc == 0 && !errors(log), "rc %d %d: %s",
           r0->rc, r1->rc, log);
    const char *a1 = r0->c.tasks[1].address;
    CHECKF(a1 && strcmp(a1, "127.0.0.1:7") && r1->c.tasks[1].address &&
           !strcmp(a1, r1->c.tasks[1].address), "rank 1 is %s",
           a1 ? a1 : "NULL");
    const char *what = "its REGISTER as rank 1 is not authenticated with "
                       "the job's keys";
    const char *p = strstr(log, what);
    CHECKF(p && strstr(p + 1, what) && has(log, "dropped 127.0.0.1:")
           && has(log, "(2 so far; the rendezvous goes on)"), "%s", log);
    task_free(r0); /* joined above */
    task_free(r1);
    task_free(s);  /* never started: their keys only */
    task_free(rp);
}

static void test_token(void)
{
    int port = spawn_task_port();
    task_t *r0 = task_new(2, 0, port, 20), *r1 = task_new(2, 1, port, 20),
           *bad = task_new(2, 1, port, 1);
    use_token(r0, 2, "the job's own token, 16+");
    use_token(r1, 2, "the job's own token, 16+");
    use_token(bad, 2, "another token, also 16+");
    capture_begin();
    task_start(r0);
    task_start(bad);
    int rcb = task_end(bad);
    task_start(r1);
    int rc0 = task_end(r0), rc1 = task_end(r1);
    const char *log = capture_end();
    CHECKF(rcb == STRATA_ETIMEDOUT && rc0 == 0 && rc1 == 0, "rc %d %d %d",
           rcb, rc0, rc1);
    CHECKF(errors(log) == 1 && has(log, "no table within 1 s") &&
           has(log, "REFUSED not authenticated with [security] token were "
               "dropped (the last: \"its REGISTER as rank 1 is not authenticated with "
               "[security] token") &&
           has(log, "dropped a REFUSED from 127.0.0.1:") &&
           !has(log, "(11 so far; not rank 0's"), "%s", log);
}

static void test_late(void)
{
    int port = spawn_task_port();
    task_t *r0 = task_new(2, 0, port, 20), *r1 = task_new(2, 1, port, 20),
           *again = task_new(2, 1, port, 20), *s = task_new(2, 1, port, 20);
    use_keys(r0, 2, 0, g_sk[0]);
    use_keys(r1, 2, 1, g_sk[1]);
    use_keys(again, 2, 1, g_sk[1]);
    use_keys(s, 2, 1, g_sk[3]);
    strata__rdzv_late_t *l0 = NULL, *l1 = NULL;
    atomic_int stop0 = 0, stop1 = 0;
    r0->o.late = &l0;
    r1->o.late = &l1;
    capture_begin();
    task_start(r0);
    task_start(r1);
    pthread_join(r0->th, NULL);
    pthread_join(r1->th, NULL);
    CHECKF(r0->rc == 0 && r1->rc == 0 && l0 && l1, "rc %d %d", r0->rc,
           r1->rc);
    CHECK(strata__rdzv_late_start(l0, &stop0) == 0 &&
          strata__rdzv_late_start(l1, &stop1) == 0);
    /* a stranger after the table: dropped, nobody stops */
    int w = register_as(port, &s->auth, 1, NULL);
    nap(0.3);
    int calm = !atomic_load(&stop0) && !atomic_load(&stop1);
    task_start(again);
    int rca = task_end(again);
    for (int i = 0; i < 500 && !(atomic_load(&stop0) &&
                                 atomic_load(&stop1)); i++)
        nap(0.01); /* 5 s */
    int f0 = strata__rdzv_late_failed(l0, 1), f1 = strata__rdzv_late_failed(l1, 1);
    strata__rdzv_late_end(l0);
    strata__rdzv_late_end(l1);
    const char *log = capture_end();
    CHECKF(w == -1 && calm, "the stranger was told %d; stopped %d", w, !calm);
    CHECKF(rca == STRATA_ECONFIG && f0 && f1 && atomic_load(&stop0) &&
           atomic_load(&stop1), "rc %d, failed %d %d", rca, f0, f1);
    const char *what = "rank 1 is claimed twice: by 127.0.0.1:";
    int n = 0;
    for (const char *p = log; (p = strstr(p, what)); p++)
        n++;
    CHECKF(n == 3 && errors(log) == 3 && has(log, "after the job had formed")
           && has(log, "dropped 127.0.0.1:") && has(log, "after the table: its "
           "REGISTER as rank 1 is not authenticated"), "%d lines: %s", n, log);
    task_free(r0);
    task_free(r1);
    task_free(s);
}

static void test_mismatch(void)
{
    int port = spawn_task_port();
    task_t *r0 = task_new(2, 0, port, 20), *r1 = task_new(2, 1, port, 20);
    use_keys(r0, 2, 0, g_sk[0]);
    capture_begin();
    task_start(r0);
    task_start(r1);
    int rc1 = task_end(r1);
    atomic_store(&r0->stop, 1);
    int rc0 = task_end(r0);
    const char *log = capture_end();
    CHECKF(rc1 == STRATA_ECONFIG && rc0 == STRATA_ESTOPPED && errors(log) == 1
           && has(log, "rank 0 authenticates the rendezvous with the job's "
                       "keys, this task with no authentication"),
           "rc %d %d: %s", rc1, rc0, log);
}

static void test_timeout(void)
{
    int port = spawn_task_port();
    task_t *r0 = task_new(4, 0, port, 1.5), *r1 = task_new(4, 1, port, 1.5);
    capture_begin();
    task_start(r0);
    task_start(r1);
    int rc0 = task_end(r0), rc1 = task_end(r1);
    const char *log = capture_end();
    CHECKF(rc0 == STRATA_ETIMEDOUT && rc1 == STRATA_ETIMEDOUT, "rc %d %d",
           rc0, rc1);
    /* rank 0 says it, and rank 1 repeats rank 0's verdict */
    const char *what = "ranks 2-3 (2 of 4 tasks) did not register within "
                       "1.5 s ([cluster] rendezvous_timeout_s)";
    const char *first = strstr(log, what);
    CHECKF(errors(log) == 2 && first && strstr(first + 1, what)
           && has(log, "rank 0 refused rank 1"), "%s", log);
}

static void test_no_rank0(void)
{
    int port = spawn_task_port();
    task_t *r1 = task_new(2, 1, port, 0.5);
    capture_begin();
    task_start(r1);
    int rc = task_end(r1);
    const char *log = capture_end();
    CHECKF(rc == STRATA_ETIMEDOUT && errors(log) == 1
           && has(log, "no table within 0.5 s ([cluster] rendezvous_timeout_s"
                       " + 5): rank 0 did not answer: Connection refused"),
           "rc %d: %s", rc, log);
}

/* ---- rank 0 is hostile --------------------------------------------------------- */

typedef struct fake {
    int      lfd, kind, auth;
    char     registered[STRATA_RDZV_MAX_ADDR + 1];
    pthread_t th;
} fake_t;

enum { F_GARBAGE, F_WORLD, F_NOT_US, F_DUP, F_HUGE, F_SILENT, F_TRUNCATED };

static void *fake_main(void *arg)
{
    fake_t *f = arg;
    int fd = accept(f->lfd, NULL, NULL);
    uint8_t in[STRATA_RDZV_HDR + STRATA_RDZV_REG_MAX], out[2048];
    uint8_t nonce[STRATA_RDZV_NONCE] = { 0 };
    size_t cl = strata__member_challenge_encode(out, f->auth, nonce);
    ssize_t n = fd >= 0 && write(fd, out, cl) == (ssize_t)cl
                    ? read(fd, in, sizeof in) : -1;
    if (f->auth && n > STRATA_RDZV_HDR + STRATA_RDZV_TAG)
        n -= STRATA_RDZV_TAG;
    uint32_t w, r;
    char why[256];
    if (n > STRATA_RDZV_HDR)
        strata__rdzv_register_parse(in + 12, (size_t)n - 12, &w, &r,
                                    f->registered, why, sizeof why);
    char *t3[3] = { "127.0.0.1:1", f->registered, "127.0.0.1:3" };
    char *t2[2] = { "127.0.0.1:1", "127.0.0.1:2" };
    char *td[2] = { f->registered, f->registered };
    uint8_t *t = NULL;
    size_t len = 0;
    switch (f->kind) {
    case F_GARBAGE: t = (uint8_t *)strdup("HTTP/1.1 400 Bad Request\r\n\r\n");
                    len = strlen((char *)t); break;
    case F_WORLD: t = strata__rdzv_table(t3, 3, &len); break;
    case F_NOT_US: t = strata__rdzv_table(t2, 2, &len); break;
    case F_DUP: t = strata__rdzv_table(td, 2, &len); break;
    case F_HUGE: t = malloc(12); len = 12;
                 strata__rdzv_put_hdr(t, STRATA_RDZV_TABLE, 100u << 20); break;
    case F_TRUNCATED: t = strata__rdzv_table(t2, 2, &len); len -= 3; break;
    default: break; /* F_SILENT: nothing */
    }
    if (fd >= 0 && t && write(fd, t, len) != (ssize_t)len)
        perror("fake rank 0");
    free(t);
    if (fd >= 0) {
        drain(fd, out, sizeof out, 10); /* until the task hangs up */
        close(fd);
    }
    return NULL;
}

static void forged_as(int kind, int auth, int want, const char *what)
{
    int port = spawn_free_port();
    fake_t f = { .kind = kind, .auth = auth,
                 .lfd = socket(AF_INET, SOCK_STREAM, 0) };
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int one = 1;
    setsockopt(f.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(f.lfd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(f.lfd, 4) != 0)
        exit(2);
    task_t *r1 = task_new(2, 1, port, 0.5);
    if (auth)
        use_keys(r1, 2, 1, g_sk[1]);
    capture_begin();
    pthread_create(&f.th, NULL, fake_main, &f);
    task_start(r1);
    int rc = task_end(r1);
    shutdown(f.lfd, SHUT_RDWR);
    pthread_join(f.th, NULL);
    close(f.lfd);
    const char *log = capture_end();
    CHECKF(rc == want && errors(log) == 1 && has(log, what),
           "kind %d: rc %d, want %d and '%s': %s", kind, rc, want, what, log);
}

static void forged(int kind, int want, const char *what)
{
    forged_as(kind, STRATA_RDZV_AUTH_NONE, want, what);
}

static void test_forged(void)
{
    forged(F_GARBAGE, STRATA_EPROTO, "this is not a strata rendezvous (it "
                                     "answered 48 54 54 50)");
    forged(F_WORLD, STRATA_EPROTO, "rank 0 sent a malformed table: a table "
                                   "of 3 tasks, this job has 2");
    forged(F_NOT_US, STRATA_EPROTO, "the table gives rank 1 the address "
                                    "127.0.0.1:2, but it registered");
    forged(F_DUP, STRATA_EPROTO, "malformed table: ranks 0 and 1 both have");
    forged(F_HUGE, STRATA_EPROTO, "rank 0 sent an oversized message");
    forged(F_SILENT, STRATA_ETIMEDOUT, "registered as 127.0.0.1:");
    forged(F_TRUNCATED, STRATA_ETIMEDOUT, "rank 0's answer stopped after its "
                                          "header");
}

static void test_forged_tag(void)
{
    /* a well-formed table for us, untagged: anyone could have sent it */
    forged_as(F_NOT_US, STRATA_RDZV_AUTH_KEYS, STRATA_EPROTO,
              "the table is not authenticated with the job's keys: not rank "
              "0's, refused");
}

/* ---- stop, bind ------------------------------------------------------------------ */

static void test_stop(void)
{
    int port = spawn_task_port();
    task_t *r1 = task_new(2, 1, port, 60), *r0 = task_new(3, 0, port, 60);
    capture_begin();
    task_start(r1); /* nobody serves yet: it retries */
    nap(0.3);
    atomic_store(&r1->stop, 1);
    int rc1 = task_end(r1);
    task_start(r0); /* serves; nobody comes */
    nap(0.3);
    atomic_store(&r0->stop, 1);
    int rc0 = task_end(r0);
    const char *log = capture_end();
    CHECKF(rc1 == STRATA_ESTOPPED && rc0 == STRATA_ESTOPPED && !errors(log)
           && has(log, "stopped on request while waiting for the table")
           && has(log, "stopped on request while waiting for the tasks"),
           "rc %d %d: %s", rc1, rc0, log);
}

static void test_bind(void)
{
    /* 203.0.113.0/24 (TEST-NET-3) is no interface's */
    task_t *t = calloc(1, sizeof *t);
    char *env[] = { "RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=203.0.113.77",
                    "MASTER_PORT=29400", NULL };
    CHECK(strata__cluster_resolve(NULL, NULL, env, &t->c) == 0);
    t->o = (strata__rdzv_opts_t){ .timeout_s = 5, .hello_s = 1 };
    capture_begin();
    int rc = strata__rendezvous(&t->c, &t->o);
    const char *log = capture_end();
    CHECKF(rc == STRATA_ECONFIG && errors(log) == 1
           && has(log, "'203.0.113.77' (203.0.113.77) is not an address of "
                       "this machine"), "rc %d: %s", rc, log);
    strata__cluster_free(&t->c);
    free(t);

    /* its own name does not resolve (yet): again, bounded by the timeout
     * (a pod whose DNS record comes late), then one error naming it */
    t = calloc(1, sizeof *t);
    char *late[] = { "RANK=0", "WORLD_SIZE=2",
                     "MASTER_ADDR=strata-test-no-such-pod.invalid",
                     "MASTER_PORT=29400", NULL };
    CHECK(strata__cluster_resolve(NULL, NULL, late, &t->c) == 0);
    t->o = (strata__rdzv_opts_t){ .timeout_s = 1.5, .hello_s = 1 };
    capture_begin();
    double t0 = now_s();
    rc = strata__rendezvous(&t->c, &t->o);
    double took = now_s() - t0;
    log = capture_end();
    CHECKF(rc == STRATA_ECONFIG && errors(log) == 1 && took > 1.0 &&
           took < 5.0 && has(log, "rank 0 cannot resolve its own name "
                                  "'strata-test-no-such-pod.invalid' yet")
           && has(log, "cannot resolve 'strata-test-no-such-pod.invalid' "
                       "within the rendezvous timeout"),
           "rc %d after %.1f s: %s", rc, took, log);
    strata__cluster_free(&t->c);
    free(t);

    int port = spawn_free_port();
    int hold = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    CHECK(bind(hold, (struct sockaddr *)&a, sizeof a) == 0
          && listen(hold, 1) == 0);
    t = task_new(2, 0, port, 5);
    capture_begin();
    rc = strata__rendezvous(&t->c, &t->o);
    log = capture_end();
    CHECKF(rc == STRATA_EIO && errors(log) == 1
           && has(log, "is in use on 127.0.0.1: choose a free port"),
           "rc %d: %s", rc, log);
    close(hold);
    strata__cluster_free(&t->c);
    free(t);
}

int main(void)
{
    strata__log_set_level(STRATA_LOG_INFO);
    test_wire();
    test_four();
    test_mpi_local();
    test_hostile();
    test_world();
    test_duplicate();
    make_keys();
    test_keys();
    test_token();
    test_late();
    test_mismatch();
    test_forged_tag();
    test_timeout();
    test_no_rank0();
    test_forged();
    test_stop();
    test_bind();
    return CHECK_DONE();
}
