/* Fault injection (core/base/fault.h): every allocation and I/O fault point of
 * checkpoint writing and reading, the atomic outputs, config loading, the
 * rendezvous's answer decoder and the elastic membership client's
 * frames. For each operation: run it once counting the points it reaches
 * (it must succeed, silently), then again for k = 1 .. that count with the
 * kth point failing, and check that every run ends in a negative code and
 * exactly one error line (or, where a failure is harmless, success with
 * exactly one warning), with nothing half-written: no temp file, the
 * previous checkpoint or file intact, the config store and the last
 * generation as they were. Leaks show under the ASan build.
 *
 * Also the controller through the environment (a child of this binary):
 * STRATA_FAULT=count reports the points at exit, STRATA_FAULT=N fails one. */
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "checkpoint/checkpoint.h"
#include "member/elastic.h"
#include "base/fault.h"
#include "internal.h"
#include "member/wire.h"
#include "member/rdzv_net.h"

#define MAX_POINTS 400   /* bound of a sweep: more is a runaway count */

static char g_dir[256];  /* this run's scratch directory */

/* ---- one run with stderr captured ------------------------------------- */

typedef struct outcome {
    int  rc, fired, errors, warnings;
    long count;                        /* points reached */
    char where[160], log[2048];
} outcome_t;

/* Run op(arg) with the nth point failing (0: none); stderr goes to a file
 * meanwhile, and its error and warning lines are counted. */
static outcome_t run_op(int (*op)(void *), void *arg, long n)
{
    outcome_t o = { 0 };
    char path[300];
    snprintf(path, sizeof path, "%s/stderr.txt", g_dir);
    fflush(stderr);
    int save = dup(2);
    FILE *f = fopen(path, "w+");
    if (!f || save < 0) {
        o.rc = 1;
        return o;
    }
    dup2(fileno(f), 2);
    strata__fault_arm(n);
    o.rc = op(arg);
    o.count = strata__fault_count();
    o.fired = strata__fault_fired(o.where, sizeof o.where);
    strata__fault_arm(0);
    fflush(stderr);
    dup2(save, 2);
    close(save);
    rewind(f);
    size_t len = fread(o.log, 1, sizeof o.log - 1, f);
    o.log[len] = '\0';
    fclose(f);
    unlink(path);
    for (char *l = o.log; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        char *nl = strchr(l, '\n');
        size_t ll = nl ? (size_t)(nl - l) : strlen(l);
        if (memmem(l, ll, "error: ", 7))
            o.errors++;
        else if (memmem(l, ll, "warning: ", 9))
            o.warnings++;
    }
    return o;
}

typedef struct sweep {
    const char *name;
    void (*setup)(void);               /* before each run, not counted */
    int  (*op)(void *);
    /* The state after a run: 0 when consistent ("nothing half-written").
     * ok: the run succeeded. */
    int  (*state)(int ok);
    void (*teardown)(void);
    int  benign_ok;                    /* a point that fails may leave
                                          success, with at most a warning */
    int  retry_ok;                     /* rc 1 (try again) + silence too  */
} sweep_t;

/* Count, then fail each point in turn. Returns the number of points. */
static long sweep(const sweep_t *s, void *arg)
{
    s->setup();
    outcome_t o = run_op(s->op, arg, 0);
    long n = o.count;
    CHECKF(o.rc == 0 && o.errors == 0 && o.warnings == 0,
           "%s: without faults: rc %d, %d errors, %d warnings:\n%s", s->name,
           o.rc, o.errors, o.warnings, o.log);
    CHECKF(s->state(1) == 0, "%s: without faults: bad state", s->name);
    if (s->teardown)
        s->teardown();
    CHECKF(n > 0 && n <= MAX_POINTS, "%s: %ld points", s->name, n);
    int fired = 0;
    for (long k = 1; k <= n && k <= MAX_POINTS; k++) {
        s->setup();
        o = run_op(s->op, arg, k);
        int ok = o.rc == 0;
        fired += o.fired;
        if (!o.fired)      /* a point reached by chance (recv loops): */
            CHECKF(ok && o.errors == 0, "%s: point %ld not reached, rc %d:"
                   "\n%s", s->name, k, o.rc, o.log);
        else if (ok)
            CHECKF(s->benign_ok && o.errors == 0 && o.warnings <= 1,
                   "%s: point %ld (%s) failed, the operation succeeded with "
                   "%d errors, %d warnings:\n%s", s->name, k, o.where,
                   o.errors, o.warnings, o.log);
        else if (o.rc == 1)
            CHECKF(s->retry_ok && o.errors == 0, "%s: point %ld (%s): rc 1, "
                   "%d errors:\n%s", s->name, k, o.where, o.errors, o.log);
        else
            CHECKF(o.rc < 0 && o.errors == 1 && o.warnings == 0,
                   "%s: point %ld (%s): rc %d, %d error lines, %d warnings "
                   "(want one error line):\n%s", s->name, k, o.where, o.rc,
                   o.errors, o.warnings, o.log);
        CHECKF(s->state(ok) == 0, "%s: point %ld (%s): rc %d: bad state "
               "after it; log:\n%s", s->name, k, o.where, o.rc, o.log);
        if (s->teardown)
            s->teardown();
    }
    /* Most points must fire in the sweep (a few recv calls may vary). */
    CHECKF(fired >= n - 2, "%s: %d of %ld points fired", s->name, fired, n);
    printf("%-22s %3ld fault points, %3d fired\n", s->name, n, fired);
    return n;
}

/* ---- files -------------------------------------------------------------- */

static void rm_rf(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char p[600];
    while (d && (de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* Names in dir other than the listed ones, and temp files: their count. */
static int strangers(const char *dir, const char *const *allowed, int n)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int bad = 0;
    while (d && (de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        int ok = !strstr(de->d_name, ".tmp.");
        int listed = 0;
        for (int i = 0; i < n; i++)
            listed |= !strcmp(de->d_name, allowed[i]);
        if (!ok || !listed) {
            fprintf(stderr, "  unexpected file %s/%s\n", dir, de->d_name);
            bad++;
        }
    }
    if (d)
        closedir(d);
    return bad;
}

static int read_file(const char *path, char *buf, size_t cap, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    *len = fread(buf, 1, cap, f);
    fclose(f);
    return 0;
}

/* ---- checkpoints ------------------------------------------------------- */

static char g_ckdir[290];
static float g_w[64], g_b[8];
static char g_ck1[65536];
static size_t g_ck1_len;

static int write_ckpt(int64_t step, float scale)
{
    for (int i = 0; i < 64; i++)
        g_w[i] = scale * (float)i;
    for (int i = 0; i < 8; i++)
        g_b[i] = -scale * (float)i;
    strata__tensor_t t[2] = {
        { "dense/w", "F32", 2, { 8, 8 }, g_w, sizeof g_w },
        { "dense/b", "F32", 1, { 8 }, g_b, sizeof g_b },
    };
    char e[24], path[400];
    snprintf(e, sizeof e, "%lld", (long long)step);
    strata__meta_t m[2] = { { "strata.step", e }, { "strata.epoch", "1" } };
    int rc = strata__ckpt_path(g_ckdir, step, path, sizeof path);
    return rc ? rc : strata__ckpt_write(path, t, 2, m, 2);
}

/* A checkpoint that reads back whole with the tensors of `scale`. */
static int ckpt_valid(int64_t step, float scale)
{
    char path[400];
    strata__ckpt_path(g_ckdir, step, path, sizeof path);
    strata__ckpt_t *c = NULL;
    strata__fault_arm(0);
    if (strata__ckpt_read(path, &c) != 0)
        return -1;
    const strata__tensor_t *w = strata__ckpt_find(c, "dense/w");
    int ok = w && w->nbytes == sizeof g_w;
    for (int i = 0; ok && i < 64; i++)
        ok = ((const float *)w->data)[i] == scale * (float)i;
    strata__ckpt_free(c);
    return ok ? 0 : -1;
}

static void ckpt_setup(void)
{
    rm_rf(g_ckdir);
    mkdir(g_ckdir, 0755);
    strata__fault_arm(0);
    if (write_ckpt(1, 1.0f) != 0)
        fprintf(stderr, "setup: cannot write the first checkpoint\n");
    char path[400];
    strata__ckpt_path(g_ckdir, 1, path, sizeof path);
    read_file(path, g_ck1, sizeof g_ck1, &g_ck1_len);
}

/* A save as training does it: write step 2, rotate to keep 1. */
static int ckpt_save_op(void *arg)
{
    (void)arg;
    int rc = write_ckpt(2, 2.0f);
    return rc ? rc : strata__ckpt_rotate(g_ckdir, 1);
}

static int ckpt_save_state(int ok)
{
    static const char *const names[] = { "ckpt-0000000001.safetensors",
                                         "ckpt-0000000002.safetensors" };
    int bad = strangers(g_ckdir, names, 2);
    char p1[400], p2[400], buf[65536];
    size_t len = 0;
    strata__ckpt_path(g_ckdir, 1, p1, sizeof p1);
    strata__ckpt_path(g_ckdir, 2, p2, sizeof p2);
    int has1 = access(p1, F_OK) == 0, has2 = access(p2, F_OK) == 0;
    if (ok)   /* saved and rotated */
        return bad || has1 || !has2 || ckpt_valid(2, 2.0f) != 0;
    /* Failed: the new one complete (the rotation failed) or absent; the
     * previous one byte for byte as it was, unless rotated away after the
     * new one was in place. */
    if (has2 && ckpt_valid(2, 2.0f) != 0)
        bad++;
    if (!has2 && (!has1 || read_file(p1, buf, sizeof buf, &len) != 0 ||
                  len != g_ck1_len || memcmp(buf, g_ck1, len) != 0))
        bad++;
    return bad;
}

static int ckpt_read_op(void *arg)
{
    (void)arg;
    char path[400];
    strata__ckpt_path(g_ckdir, 1, path, sizeof path);
    strata__ckpt_t *c = NULL;
    int rc = strata__ckpt_read(path, &c);
    if (rc == 0 && !strata__ckpt_find(c, "dense/b"))
        rc = -1000;
    if (rc != 0 && c)
        rc = -1001;    /* *out must be NULL on failure */
    strata__ckpt_free(c);
    return rc;
}

static int ckpt_read_state(int ok)
{
    (void)ok;
    return ckpt_valid(1, 1.0f);
}

static int ckpt_latest_op(void *arg)
{
    (void)arg;
    char path[400];
    strata__ckpt_t *c = NULL;
    int rc = strata__ckpt_latest(g_ckdir, &c, path, sizeof path);
    strata__ckpt_free(c);
    return rc;
}

/* ---- the atomic outputs (fileio.c) ------------------------------------- */

static char g_out[400];
static const char k_old[] = "old contents\n", k_new[] = "the new contents\n";

static void out_setup(void)
{
    rm_rf(g_ckdir);
    mkdir(g_ckdir, 0755);
    FILE *f = fopen(g_out, "w");
    if (f) {
        fputs(k_old, f);
        fclose(f);
    }
}

static int out_op(void *arg)
{
    (void)arg;
    return strata__write_atomic(g_out, k_new, strlen(k_new));
}

static int out_state(int ok)
{
    static const char *const names[] = { "out.csv" };
    char buf[64];
    size_t len = 0;
    int bad = strangers(g_ckdir, names, 1);
    if (read_file(g_out, buf, sizeof buf, &len) != 0)
        return 1;
    int is_new = len == strlen(k_new) && !memcmp(buf, k_new, len);
    int is_old = len == strlen(k_old) && !memcmp(buf, k_old, len);
    /* A failure after the rename (the directory's fsync) leaves the new
     * file, whole; never anything between. */
    return bad || !(is_new || (!ok && is_old));
}

/* ---- config ------------------------------------------------------------ */

static char g_ini[300];
static strata__cfg_t *g_cfg;

static void cfg_setup(void)
{
    strata__fault_arm(0);
    strata__cfg_new(&g_cfg);
    /* A value of the command line, which the file must not change. */
    strata__cfg_set(g_cfg, "train.epochs=7", STRATA__CFG_CLI, "--set");
}

static int cfg_op(void *arg)
{
    (void)arg;
    strata__settings_t s;
    int rc = strata__cfg_load_file(g_cfg, g_ini);
    if (rc == 0)
        rc = strata__settings_load(g_cfg, &s);
    if (rc == 0 && (s.train.epochs != 7 || s.train.batch_size != 64 ||
                    s.optimizer.lr != 0.01))
        rc = -1000;
    return rc;
}

/* After a failed load the store holds what it held before, nothing of
 * the file. */
static int cfg_state(int ok)
{
    const char *ep = strata__cfg_get(g_cfg, "train", "epochs");
    const char *bs = strata__cfg_get(g_cfg, "train", "batch_size");
    const char *lr = strata__cfg_get(g_cfg, "optimizer", "lr");
    const char *lvl = strata__cfg_get(g_cfg, "log", "level");
    int nsec = 0;
    for (const char *const *s = strata__cfg_sections(g_cfg); *s; s++)
        nsec++;
    if (!ep || strcmp(ep, "7"))
        return 1;
    if (ok)
        return !bs || strcmp(bs, "64") || !lr || strcmp(lr, "0.01") ||
               !lvl || nsec != 3;
    return bs || lr || lvl || nsec != 1;
}

static void cfg_teardown(void)
{
    strata__cfg_free(g_cfg);
    g_cfg = NULL;
}

/* ---- the rendezvous's answer ------------------------------------------ */

static strata__cluster_t g_cl;
static int g_sp[2] = { -1, -1 };
static uint8_t *g_msg;
static size_t g_msg_len;
static const strata__rdzv_ep_t g_ep = { .text = "unix:@fault-test",
                                        .local = 1 };

static void rdzv_setup(void)
{
    for (int r = 0; r < 3; r++) {
        free((char *)g_cl.tasks[r].address);
        g_cl.tasks[r].address = NULL;
    }
    g_cl.pub.ntasks = 3;
    g_cl.pub.self = 1;
    g_cl.pub.tasks = g_cl.tasks;
    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, g_sp);
    /* A socket buffer takes the whole message: written before the read. */
    if (write(g_sp[1], g_msg, g_msg_len) != (ssize_t)g_msg_len)
        fprintf(stderr, "setup: short write to the socket pair\n");
}

static int rdzv_op(void *arg)
{
    (void)arg;
    static const strata__rdzv_opts_t o = { .timeout_s = 5, .hello_s = 5 };
    char why[256];
    strata__rdzv_forged_t forged = { 0 };
    return strata__rdzv_answer(&g_cl, &g_ep, g_sp[0], "127.0.0.1:2002", NULL,
                               strata__rdzv_now() + 5, &o, &forged, why,
                               sizeof why);
}

static int rdzv_table_state(int ok)
{
    static const char *const want[] = { "127.0.0.1:2001", "127.0.0.1:2002",
                                        "127.0.0.1:2003" };
    for (int r = 0; r < 3; r++) {
        const char *a = g_cl.tasks[r].address;
        if (ok ? !a || strcmp(a, want[r]) : a != NULL)
            return 1;
    }
    return 0;
}

static void rdzv_teardown(void)
{
    close(g_sp[0]);
    close(g_sp[1]);
    g_sp[0] = g_sp[1] = -1;
}

/* The REFUSED answer is the task's error: rc ECONFIG and its one line. */
static int rdzv_refused_op(void *arg)
{
    int rc = rdzv_op(arg);
    if (rc == STRATA_ECONFIG)
        return 0;
    return rc == 0 ? -1000 : rc;
}

static int rdzv_refused_state(int ok)
{
    (void)ok;
    return rdzv_table_state(0);
}

/* ---- the elastic membership client ------------------------------------ */

static int g_lfd = -1, g_port;
static atomic_int g_stop;
static strata__elastic_t *g_el;

/* The membership service, as far as this test needs it: answers every
 * JOIN on a connection with the next generation of two members. Its GEN
 * messages are made before the sweeps (service_start), so that the fault
 * points counted are the client's alone. */
#define EL_GENS 4
#define EL_TOKEN "0123456789abcdef0123"
static uint8_t *g_gen_msg[EL_GENS + 1];
static atomic_int g_forge; /* a STOP the service did not tag comes first */
static unsigned char g_el_key[STRATA_MEMBER_KEY];
static const uint8_t g_el_nonce[STRATA_MEMBER_NONCE] = { 1, 2, 3 };
static size_t g_gen_len[EL_GENS + 1];

static int make_gens(void)
{
    for (int gen = 1; gen <= EL_GENS; gen++) {
        char a0[32], a1[32], *names[2] = { "worker:0", "worker:1" };
        char *addrs[2] = { a0, a1 };
        int64_t committed[2] = { 5, 5 };
        snprintf(a0, sizeof a0, "127.0.0.1:%d", 3000 + gen);
        snprintf(a1, sizeof a1, "127.0.0.1:%d", 4000 + gen);
        strata__member_gen_t g = { .generation = gen, .size = 2, .rank = 1,
                                   .resume_step = -1, .names = names,
                                   .addrs = addrs, .committed = committed };
        g_gen_msg[gen] = strata__member_gen_encode(&g, &g_gen_len[gen]);
        uint8_t *m = g_gen_msg[gen] ? realloc(g_gen_msg[gen], g_gen_len[gen]
                                              + STRATA_MEMBER_TAG) : NULL;
        if (!m)
            return -1;
        /* the gen-th frame of its connection, tagged as the service does
         * (wire v3): under the token's key, for the challenge's nonce */
        g_gen_msg[gen] = m;
        g_gen_len[gen] = strata__member_seal(g_el_key, STRATA_MEMBER_DOWN,
                                             (uint64_t)(gen - 1), g_el_nonce,
                                             m, g_gen_len[gen]);
    }
    return 0;
}

static void serve_conn(int fd)
{
    uint8_t in[STRATA_MEMBER_CLIENT_MAX + STRATA_MEMBER_TAG];
    size_t len = 0;
    int gen = 0;
    size_t cl = strata__member_challenge_encode(in, 2, g_el_nonce);
    if (send(fd, in, cl, MSG_NOSIGNAL) != (ssize_t)cl)
        return;
    if (atomic_load(&g_forge)) { /* one on the path: a tag it guessed */
        uint8_t stop[STRATA_MEMBER_HDR + STRATA_MEMBER_MAX_REASON +
                     STRATA_MEMBER_TAG];
        size_t n = strata__member_stop_encode(stop, "forged: give up");
        memset(stop + n, 0x5a, STRATA_MEMBER_TAG);
        strata__member_put_hdr(stop, STRATA_MEMBER_STOP,
                               (uint32_t)(n - STRATA_MEMBER_HDR +
                                          STRATA_MEMBER_TAG));
        if (send(fd, stop, n + STRATA_MEMBER_TAG, MSG_NOSIGNAL) < 0)
            return;
    }
    for (int rounds = 0; rounds < 100 && !atomic_load(&g_stop); rounds++) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = recv(fd, in + len, sizeof in - len, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
        strata__member_hdr_t h;
        while (len >= STRATA_MEMBER_HDR &&
               strata__member_get_hdr(in, 0, &h, NULL, 0) == 0 &&
               len >= STRATA_MEMBER_HDR + h.len) {
            if (h.kind == STRATA_MEMBER_JOIN) {
                if (++gen > EL_GENS ||
                    send(fd, g_gen_msg[gen], g_gen_len[gen], MSG_NOSIGNAL) !=
                        (ssize_t)g_gen_len[gen])
                    return;
            }
            size_t used = STRATA_MEMBER_HDR + h.len;
            memmove(in, in + used, len - used);
            len -= used;
        }
    }
}

static void *service(void *arg)
{
    (void)arg;
    while (!atomic_load(&g_stop)) {
        struct pollfd p = { .fd = g_lfd, .events = POLLIN };
        if (poll(&p, 1, 100) <= 0)
            continue;
        int fd = accept(g_lfd, NULL, NULL);
        if (fd < 0)
            continue;
        serve_conn(fd);
        close(fd);
    }
    return NULL;
}

static int service_start(pthread_t *th)
{
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    g_lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (g_lfd < 0 || bind(g_lfd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(g_lfd, 8) != 0 ||
        getsockname(g_lfd, (struct sockaddr *)&a, &al) != 0)
        return -1;
    g_port = ntohs(a.sin_port);
    if (strata__member_key_token(EL_TOKEN, g_el_key) != 0 ||
        make_gens() != 0)
        return -1;
    char svc[64];
    snprintf(svc, sizeof svc, "127.0.0.1:%d", g_port);
    setenv("STRATA_ELASTIC", svc, 1);
    setenv("STRATA_ELASTIC_TOKEN", EL_TOKEN, 1);
    return pthread_create(th, NULL, service, NULL);
}

/* Joined generation 1 (not counted); the operation joins the next. */
static void el_setup(void)
{
    strata_membership_t m = { .struct_size = sizeof m };
    strata__fault_arm(0);
    if (strata__elastic_open("worker:1", "127.0.0.1", NULL, &g_el) != 0 ||
        !g_el ||
        strata__elastic_join(g_el, 0, 2000, &m) != 0)
        fprintf(stderr, "setup: cannot join the first generation\n");
}

static int el_op(void *arg)
{
    (void)arg;
    strata_membership_t m = { .struct_size = sizeof m };
    int rc = strata__elastic_join(g_el, 3, 2000, &m);
    if (rc == 0 && (m.generation != 2 || m.size != 2 || m.rank != 1 ||
                    strcmp(m.addrs[0], "127.0.0.1:3002")))
        rc = -1000;
    return rc;
}

/* Joined: generation 2; failed: generation 1, whole (its strings read). */
static int el_state(int ok)
{
    const strata_membership_t *m = strata__elastic_current(g_el);
    if (!m || m->size != 2 || m->generation != (ok ? 2 : 1))
        return 1;
    char want[32];
    snprintf(want, sizeof want, "127.0.0.1:%d", 4000 + m->generation);
    return strcmp(m->names[1], "worker:1") || strcmp(m->addrs[1], want) ||
           m->committed[0] != 5;
}

static void el_teardown(void)
{
    strata__elastic_close(g_el);
    g_el = NULL;
}

/* A fresh client joins generation 1 past a forged STOP (g_forge). */
static int el_forged_op(void *arg)
{
    (void)arg;
    strata__elastic_t *e = NULL;
    strata_membership_t m = { .struct_size = sizeof m };
    int rc = strata__elastic_open("worker:1", "127.0.0.1", NULL, &e);
    if (rc == 0)
        rc = e ? strata__elastic_join(e, 0, 2000, &m) : -1000;
    if (rc == 0 && m.generation != 1)
        rc = -1001;
    strata__elastic_close(e);
    return rc;
}

/* Opening the client: its one allocation. */
static int el_open_op(void *arg)
{
    (void)arg;
    strata__elastic_t *e = NULL;
    int rc = strata__elastic_open("worker:1", "127.0.0.1", NULL, &e);
    if (rc == 0 && !e)
        rc = -1000;
    strata__elastic_close(e);
    return rc;
}

static void nothing(void) {}

static int always_ok(int ok)
{
    (void)ok;
    return 0;
}

/* ---- the controller through the environment --------------------------- */

/* A child of this binary writes one checkpoint under STRATA_FAULT=`env`;
 * its exit status, and its stderr into err[cap]. */
static int child(const char *env, char *err, size_t cap)
{
    char path[300];
    snprintf(path, sizeof path, "%s/child.txt", g_dir);
    pid_t pid = fork();
    if (pid == 0) {
        FILE *f = freopen(path, "w", stderr);
        if (!f)
            _exit(3);
        setenv("STRATA_FAULT", env, 1);
        execl("/proc/self/exe", "test_fault", "child", g_ckdir, (char *)NULL);
        _exit(4);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return -1;
    size_t len = 0;
    err[0] = '\0';
    if (read_file(path, err, cap - 1, &len) == 0)
        err[len] = '\0';
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static int child_main(const char *dir)
{
    snprintf(g_ckdir, sizeof g_ckdir, "%s", dir);
    return write_ckpt(9, 1.0f) == 0 ? 0 : 1;
}

/* ------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "child"))
        return child_main(argv[2]);
    if (getenv("STRATA_FAULT"))
        unsetenv("STRATA_FAULT");
    snprintf(g_dir, sizeof g_dir, "/tmp/strata-fault-XXXXXX");
    if (!mkdtemp(g_dir))
        CHECK_SKIP("no temp directory");
    snprintf(g_ckdir, sizeof g_ckdir, "%s/ck", g_dir);
    snprintf(g_out, sizeof g_out, "%s/out.csv", g_ckdir);
    snprintf(g_ini, sizeof g_ini, "%s/job.ini", g_dir);
    FILE *f = fopen(g_ini, "w");
    if (!f)
        CHECK_SKIP("cannot write %s", g_ini);
    fputs("; a job\n[train]\nepochs = 3\nbatch_size = 64\n\n[optimizer]\n"
          "lr = 0.01\nname = sgd\n[log]\nlevel = info\n", f);
    fclose(f);

    /* Checkpoints: a save (write + rotate), a read, the newest valid. */
    sweep(&(sweep_t){ "checkpoint save", ckpt_setup, ckpt_save_op,
                      ckpt_save_state, NULL, 1, 0 }, NULL);
    sweep(&(sweep_t){ "checkpoint read", ckpt_setup, ckpt_read_op,
                      ckpt_read_state, NULL, 0, 0 }, NULL);
    /* ENOMEM is an error there; an unreadable newest one is skipped with
     * one warning (and EDATA: none valid): checked by rc and lines. */
    {
        long n = 0;
        ckpt_setup();
        n = run_op(ckpt_latest_op, NULL, 0).count;
        for (long k = 1; k <= n && k <= MAX_POINTS; k++) {
            ckpt_setup();
            outcome_t o = run_op(ckpt_latest_op, NULL, k);
            CHECKF(o.fired && o.rc < 0 && o.errors + o.warnings == 1,
                   "checkpoint latest: point %ld (%s): rc %d, %d errors, %d "
                   "warnings:\n%s", k, o.where, o.rc, o.errors, o.warnings,
                   o.log);
            CHECK(ckpt_valid(1, 1.0f) == 0);
        }
        printf("%-22s %3ld fault points\n", "checkpoint latest", n);
    }
    sweep(&(sweep_t){ "atomic output", out_setup, out_op, out_state, NULL,
                      0, 0 }, NULL);

    /* Config: load a file, then the settings. */
    sweep(&(sweep_t){ "config load", cfg_setup, cfg_op, cfg_state,
                      cfg_teardown, 0, 0 }, NULL);

    /* The rendezvous: rank 0's TABLE and REFUSED as a task reads them; a
     * REGISTER decodes without a fault point (no allocation, no I/O). */
    {
        char *addrs[3] = { "127.0.0.1:2001", "127.0.0.1:2002",
                           "127.0.0.1:2003" };
        g_msg = strata__rdzv_table(addrs, 3, &g_msg_len);
        CHECK(g_msg != NULL);
        sweep(&(sweep_t){ "rendezvous TABLE", rdzv_setup, rdzv_op,
                          rdzv_table_state, rdzv_teardown, 0, 1 }, NULL);
        free(g_msg);
        static uint8_t refused[STRATA_RDZV_HDR + 1 + STRATA_RDZV_MAX_REASON];
        g_msg = refused;
        g_msg_len = strata__rdzv_refused(refused, STRATA_RDZV_WHY_CONFIG,
                                         "rank 1 is already registered");
        /* The refusal is itself the one error line of a run. */
        rdzv_setup();
        outcome_t o = run_op(rdzv_op, NULL, 0);
        rdzv_teardown();
        long n = o.count;
        CHECKF(o.rc == STRATA_ECONFIG && o.errors == 1 &&
                   strstr(o.log, "already registered"),
               "REFUSED: rc %d:\n%s", o.rc, o.log);
        for (long k = 1; k <= n; k++) {
            rdzv_setup();
            o = run_op(rdzv_refused_op, NULL, k);
            CHECKF(o.fired && ((o.rc < 0 && o.errors == 1) ||
                               (o.rc == 1 && o.errors == 0)),
                   "REFUSED: point %ld (%s): rc %d, %d errors:\n%s", k,
                   o.where, o.rc, o.errors, o.log);
            CHECK(rdzv_refused_state(0) == 0);
            rdzv_teardown();
        }
        printf("%-22s %3ld fault points\n", "rendezvous REFUSED", n);
        uint8_t reg[STRATA_RDZV_HDR + STRATA_RDZV_REG_MAX];
        size_t rl = strata__rdzv_register(reg, 3, 2, "127.0.0.1:2003");
        strata__rdzv_hdr_t h;
        uint32_t world = 0, rank = 0;
        char addr[STRATA_RDZV_MAX_ADDR + 1], why[128];
        strata__fault_arm(0);
        CHECK(rl > STRATA_RDZV_HDR &&
              strata__rdzv_get_hdr(reg, 3, &h) == 0 &&
              h.type == STRATA_RDZV_REGISTER &&
              strata__rdzv_register_parse(reg + STRATA_RDZV_HDR, h.len,
                                          &world, &rank, addr, why,
                                          sizeof why) == 0 &&
              world == 3 && rank == 2 && !strcmp(addr, "127.0.0.1:2003"));
        CHECK(strata__fault_count() == 0);
        for (int r = 0; r < 3; r++)
            free((char *)g_cl.tasks[r].address);
    }

    /* The elastic client's frames, against a service thread. */
    pthread_t th;
    if (service_start(&th) != 0) {
        CHECK(!"cannot start the membership service");
    } else {
        sweep(&(sweep_t){ "elastic open", nothing, el_open_op, always_ok,
                          NULL, 0, 0 }, NULL);
        /* A recv that fails after the whole table came: joined; the next
         * look at the connection finds it gone. */
        sweep(&(sweep_t){ "elastic join", el_setup, el_op, el_state,
                          el_teardown, 1, 0 }, NULL);
        /* A STOP whose tag is not the service's: dropped, counted, named;
         * the join goes on to the service's GEN. */
        atomic_store(&g_forge, 1);
        outcome_t fo = run_op(el_forged_op, NULL, 0);
        atomic_store(&g_forge, 0);
        CHECKF(fo.rc == 0 && fo.errors == 0 && fo.warnings == 1 &&
                   strstr(fo.log, "dropped a STOP of ") &&
                   strstr(fo.log, "not authenticated with the job's token "
                                  "(1 so far)"),
               "forged STOP: rc %d:\n%s", fo.rc, fo.log);
        atomic_store(&g_stop, 1);
        pthread_join(th, NULL);
        close(g_lfd);
        for (int gen = 1; gen <= EL_GENS; gen++)
            free(g_gen_msg[gen]);
    }

    /* The controller through the environment, in a child. */
    char err[2048];
    rm_rf(g_ckdir);
    mkdir(g_ckdir, 0755);
    int st = child("count", err, sizeof err);
    long reached = -1;
    const char *at = strstr(err, "strata: fault: ");
    if (at)
        sscanf(at, "strata: fault: %ld fault points reached", &reached);
    CHECKF(st == 0 && reached > 0, "STRATA_FAULT=count: exit %d:\n%s", st,
           err);
    st = child("3", err, sizeof err);
    CHECKF(st == 1 && strstr(err, "error: "), "STRATA_FAULT=3: exit %d:\n%s",
           st, err);
    st = child("nonsense", err, sizeof err);
    CHECKF(st == 0 && strstr(err, "neither a point number"),
           "STRATA_FAULT=nonsense: exit %d:\n%s", st, err);

    rm_rf(g_ckdir);
    rm_rf(g_dir);
    return CHECK_DONE();
}
