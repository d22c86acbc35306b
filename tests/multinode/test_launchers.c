/* Jobs whose tasks learn the cluster from another launcher's variables and
 * meet through the rendezvous, on this host (loopback). One case per run:
 *   torchrun   RANK, WORLD_SIZE, MASTER_ADDR/PORT, LOCAL_WORLD_SIZE=1 < 2:
 *              the job that died with "address of worker:0: '(null)'".
 *              Both workers finish with bitwise-equal variables, equal to
 *              a one-process run of the same global batch.
 *   mpirun     Open MPI's mpirun -np 2 (its zero-config rendezvous on one
 *              node), then again through [cluster] rendezvous = host:port.
 *   torchrun_real  torchrun itself (Debian's python3-torch) with two agents
 *              (--nnodes 2, static rendezvous: its agent's store holds
 *              MASTER_PORT, so strata's rendezvous is at MASTER_PORT+1).
 *   launch_args  strata launch --nnodes with flags that do not go together,
 *              without shared keys, an elastic job across machines without
 *              a shared token or every worker's secret key, --tasks that
 *              are not the job's or go with -n: exit 2, one line, nothing
 *              started;
 *              node 0 alone: every task names the ranks that never came.
 *   forged     a rendezvous that hands a task a table naming a listener of
 *              the test's: a CURVE task refuses it (not tagged with the
 *              job's keys) and never connects there; with [security] mode
 *              = off and no token it asks there for ZMTP's NULL mechanism.
 *   rdzv_trust strata launch --nnodes as users run it, with the job's keys:
 *              a stranger's well-formed REGISTER for rank 1 is dropped and
 *              named, and the job's own node 1 then takes rank 1 (the
 *              squatter took it before); two nodes given --node-rank 1 of
 *              3: every node ends within seconds naming both addresses.
 *   rdzv_late  the same two claims, the second after the job formed (rank 0
 *              had sent the table): all four nodes end within seconds with
 *              one error naming both addresses (before, the late node failed
 *              at its timeout and the job went on).
 *   rdzv_refused  a hostile "rank 0" at the rendezvous port answers node 1
 *              with a REFUSED instead of a challenge, then with an untagged
 *              REFUSED to its REGISTER: node 1 drops both, names them, and
 *              forms the job with the real node 0 started afterwards
 *              (before, the first forged REFUSED ended it).
 * A case whose launcher is not installed is skipped with the reason.
 * usage: test_launchers CASE */
#include <arpa/inet.h>
#include <poll.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "member/rendezvous.h"
#include "spawn.h"
#include "testutil.h"

static char g_out[2][65536], g_err[2][65536];

/* The job: 2 workers x 1 replica of mwms through zmq, 30 steps. */
static const char *const k_sets[] = {
    "strategy.plugin=mwms", "transport.plugin=zmq", "transport.zmq.timeout_s=60",
    "train.devices=cpu:0", "train.batch_size=32", "train.max_steps=30",
    "data.limit_train=3200", "train.eval=false", "debug.hash_vars=true",
    "train.progress=none", "cluster.rendezvous_timeout_s=60", NULL };

/* strata train with k_sets and `extra` (NULL-ended --set values). */
static int train_argv(char **argv, int cap, char *const *extra)
{
    int a = 0;
    argv[a++] = (char *)spawn_strata_bin();
    argv[a++] = "train";
    for (int k = 0; k_sets[k] && a + 2 < cap; k++) {
        argv[a++] = "--set";
        argv[a++] = (char *)k_sets[k];
    }
    for (int k = 0; extra && extra[k] && a + 2 < cap; k++) {
        argv[a++] = "--set";
        argv[a++] = extra[k];
    }
    argv[a] = NULL;
    return a;
}

static int hash_of(const char *out, int rank, char hash[17])
{
    char key[48];
    snprintf(key, sizeof key, "variables hash (rank %d): ", rank);
    const char *p = strstr(out, key);
    if (!p)
        return -1;
    memcpy(hash, p + strlen(key), 16);
    hash[16] = '\0';
    return 0;
}

/* The variables one process reaches with the same global batch on two
 * replicas: the workers must hold exactly these. */
static int reference_dump(const char *path)
{
    char set[600];
    snprintf(set, sizeof set, "debug.dump_vars=%s", path);
    char *extra[] = { "strategy.plugin=mirrored", "train.devices=cpu:0,cpu:1",
                      set, NULL };
    char *argv[64];
    train_argv(argv, 64, extra);
    spawn_result_t *r = malloc(sizeof *r);
    int ok = r && spawn_run(argv, 300, r) == 0 && r->code == 0;
    if (!ok)
        fprintf(stderr, "reference run failed: %s\n", r ? r->err : "");
    free(r);
    return ok ? 0 : -1;
}

/* Both workers exited 0 with one hash, rank 0's dump is the reference. */
static void check_job(int code0, int code1, const char *dump, const char *ref)
{
    char h0[17] = "", h1[17] = "";
    CHECKF(code0 == 0 && code1 == 0, "exit %d %d; stderr:\n%s\n---\n%s",
           code0, code1, g_err[0], g_err[1]);
    CHECK(hash_of(g_out[0], 0, h0) == 0 && hash_of(g_out[1], 1, h1) == 0);
    CHECKF(h0[0] && strcmp(h0, h1) == 0, "hashes '%s' '%s'", h0, h1);
    size_t na = 0, nb = 0;
    char *a = read_all(dump, &na), *b = read_all(ref, &nb);
    CHECKF(a && b && na == nb && na > 0 && memcmp(a, b, na) == 0,
           "rank 0's variables differ from one process's (%zu vs %zu bytes)",
           na, nb);
    free(a);
    free(b);
    for (int i = 0; i < 2; i++)
        CHECKF(!strstr(g_err[i], "(null)"), "%s", g_err[i]);
}

/* ---- torchrun's variables ------------------------------------------------------ */

static void case_torchrun(const char *ref)
{
    int port = spawn_free_port();
    spawn_child_t ch[2];
    char e[2][5][64], set[600];
    snprintf(set, sizeof set, "debug.dump_vars=%s", tmp_path("rank0.bin"));
    for (int r = 0; r < 2; r++) {
        snprintf(e[r][0], 64, "RANK=%d", r);
        snprintf(e[r][1], 64, "WORLD_SIZE=2");
        snprintf(e[r][2], 64, "LOCAL_WORLD_SIZE=1");
        snprintf(e[r][3], 64, "MASTER_ADDR=127.0.0.1");
        snprintf(e[r][4], 64, "MASTER_PORT=%d", port);
        char *env[] = { e[r][0], e[r][1], e[r][2], e[r][3], e[r][4], NULL };
        char *extra[] = { set, NULL }, *argv[64];
        train_argv(argv, 64, extra);
        CHECK(spawn_start(argv, env, &ch[r]) == 0);
    }
    for (int r = 0; r < 2; r++) {
        spawn_wait(&ch[r], 300);
        spawn_collect(&ch[r], g_out[r], sizeof g_out[r], g_err[r],
                      sizeof g_err[r]);
    }
    check_job(ch[0].code, ch[1].code, tmp_path("rank0.bin"), ref);
    CHECKF(strstr(g_err[0], "rendezvous: at 127.0.0.1:"), "%s", g_err[0]);
}

/* ---- mpirun ---------------------------------------------------------------------- */

static int mpirun_job(const char *extra_env, const char *ref)
{
    char dump[600], keys[700], *argv[96];
    snprintf(dump, sizeof dump, "debug.dump_vars=%s", tmp_path("mpi0.bin"));
    snprintf(keys, sizeof keys, "STRATA_SECURITY_KEYS=%s",
             getenv("STRATA_SECURITY_KEYS"));
    int a = 0;
    argv[a++] = "/usr/bin/mpirun";
    argv[a++] = "--allow-run-as-root";
    argv[a++] = "--oversubscribe";
    argv[a++] = "-np";
    argv[a++] = "2";
    argv[a++] = "-x";
    argv[a++] = keys;
    if (extra_env) {
        argv[a++] = "-x";
        argv[a++] = (char *)extra_env;
    }
    char *extra[] = { dump, "train.progress=none", NULL };
    train_argv(argv + a, 96 - a, extra);
    spawn_result_t *r = malloc(sizeof *r);
    if (!r || spawn_run(argv, 300, r) != 0)
        return -1;
    /* mpirun interleaves both ranks' output: the hashes are told apart by
     * their rank. */
    snprintf(g_out[0], sizeof g_out[0], "%s", r->out);
    snprintf(g_out[1], sizeof g_out[1], "%s", r->out);
    snprintf(g_err[0], sizeof g_err[0], "%s", r->err);
    g_err[1][0] = '\0';
    int code = r->code;
    free(r);
    check_job(code, code, tmp_path("mpi0.bin"), ref);
    unlink(tmp_path("mpi0.bin"));
    return 0;
}

static void case_mpirun(const char *ref)
{
    /* one node: the abstract socket named after the job */
    CHECK(mpirun_job(NULL, ref) == 0);
    CHECKF(strstr(g_err[0], "rendezvous: at unix:@strata-"), "%s", g_err[0]);
    /* [cluster] rendezvous, as on several nodes */
    char env[64];
    int port = spawn_free_port();
    snprintf(env, sizeof env, "STRATA_CLUSTER_RENDEZVOUS=127.0.0.1:%d", port);
    CHECK(mpirun_job(env, ref) == 0);
    char want[64];
    snprintf(want, sizeof want, "rendezvous: at 127.0.0.1:%d:", port);
    CHECKF(strstr(g_err[0], want), "%s", g_err[0]);
}

/* ---- torchrun itself ------------------------------------------------------------- */

/* A port P with P+1 free too: torchrun's agent takes P, strata's rendezvous
 * P+1 (on a busy host a free P alone is not enough). */
static int free_port_pair(void)
{
    for (int i = 0; i < 200; i++) {
        int p = spawn_free_port(), fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = { .sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)(p + 1)),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int ok = p > 0 && p < 65535 && fd >= 0 &&
                 bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
        if (fd >= 0)
            close(fd);
        if (ok)
            return p;
    }
    return -1;
}

static void case_torchrun_real(const char *ref)
{
    int port = free_port_pair();
    char mp[32], dump[600], logs[2][640];
    snprintf(mp, sizeof mp, "--master_port=%d", port);
    snprintf(dump, sizeof dump, "debug.dump_vars=%s", tmp_path("torch0.bin"));
    spawn_child_t ch[2];
    for (int node = 0; node < 2; node++) {
        /* --redirects/--tee 1: Debian's torch 1.13 under Python 3.11 turns
         * their default, 0, into None and fails (Std.from_str); with 1 the
         * workers' stdout is still tee'd to torchrun's. */
        snprintf(logs[node], sizeof logs[node], "--log_dir=%s",
                 tmp_path(node ? "torchlog1" : "torchlog0"));
        char *argv[96] = { "/usr/bin/python3", "-m", "torch.distributed.run",
                           "--nnodes=2", node ? "--node_rank=1"
                                              : "--node_rank=0",
                           "--nproc_per_node=1", "--master_addr=127.0.0.1",
                           mp, "--redirects=1", "--tee=1", logs[node],
                           "--no_python" };
        char *extra[] = { dump, NULL };
        train_argv(argv + 12, 96 - 12, extra);
        CHECK(spawn_start(argv, NULL, &ch[node]) == 0);
    }
    for (int node = 0; node < 2; node++) {
        spawn_wait(&ch[node], 300);
        spawn_collect(&ch[node], g_out[node], sizeof g_out[node],
                      g_err[node], sizeof g_err[node]);
    }
    check_job(ch[0].code, ch[1].code, tmp_path("torch0.bin"), ref);
    char want[64];
    snprintf(want, sizeof want, "rendezvous: at 127.0.0.1:%d:", port + 1);
    CHECKF(strstr(g_err[0], want), "want '%s': %s", want, g_err[0]);
}

/* ---- a forged table --------------------------------------------------------------- */

typedef struct forger {
    int       rdzv, evil;     /* listeners */
    int       evil_port, auth;
    char      mechanism[21];  /* what the task asked for at `evil` */
    pthread_t th;
} forger_t;

static int listen_on(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 8) != 0)
        exit(2);
    return fd;
}

static ssize_t read_full(int fd, uint8_t *buf, size_t n)
{
    struct timeval tv = { 30, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    size_t at = 0;
    while (at < n) {
        ssize_t k = read(fd, buf + at, n - at);
        if (k <= 0)
            return (ssize_t)at;
        at += (size_t)k;
    }
    return (ssize_t)at;
}

/* Rank 0 as an attacker plays it: the task's REGISTER is answered with a
 * table whose rank 0 is the attacker's listener, where the task's
 * greeting is read. It claims to authenticate as the task does, but
 * cannot tag the table. */
static void *forger_main(void *arg)
{
    forger_t *f = arg;
    uint8_t in[512], nonce[STRATA_RDZV_NONCE] = { 0 };
    int fd = accept(f->rdzv, NULL, NULL);
    size_t cl = strata__member_challenge_encode(in, f->auth, nonce);
    ssize_t n = fd >= 0 && write(fd, in, cl) == (ssize_t)cl
                    ? read(fd, in, sizeof in) : -1;
    n -= f->auth && n > STRATA_RDZV_TAG ? STRATA_RDZV_TAG : 0;
    uint32_t w, r;
    char mine[STRATA_RDZV_MAX_ADDR + 1], why[256], evil[64];
    if (n > STRATA_RDZV_HDR &&
        strata__rdzv_register_parse(in + 12, (size_t)n - 12, &w, &r, mine,
                                    why, sizeof why) == 0) {
        snprintf(evil, sizeof evil, "127.0.0.1:%d", f->evil_port);
        char *table[2] = { evil, mine };
        size_t len;
        uint8_t *t = strata__rdzv_table(table, 2, &len);
        if (!t || write(fd, t, len) != (ssize_t)len)
            perror("forger");
        free(t);
    }
    if (fd >= 0)
        close(fd);
    /* ZMTP 3: our signature and major version only, so that the task
     * sends the rest of its greeting -- the mechanism it insists on --
     * before it can see that we would not match it. */
    int k = accept(f->evil, NULL, NULL);
    static const uint8_t sig[11] = { 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 3 };
    if (k >= 0 && write(k, sig, sizeof sig) == sizeof sig &&
        read_full(k, in, 64) == 64)
        memcpy(f->mechanism, in + 12, 20);
    if (k >= 0)
        close(k);
    return NULL;
}

/* The mechanism the task asked the forged rank 0 for. */
static void forged_job(const char *mode, char mechanism[21])
{
    forger_t f = { .evil_port = spawn_free_port(),
                   .auth = strcmp(mode, "off") ? STRATA_RDZV_AUTH_KEYS
                                               : STRATA_RDZV_AUTH_NONE };
    int port = spawn_free_port();
    f.rdzv = listen_on(port);
    f.evil = listen_on(f.evil_port);
    pthread_create(&f.th, NULL, forger_main, &f);
    char e[4][64], m[64];
    snprintf(e[0], 64, "RANK=1");
    snprintf(e[1], 64, "WORLD_SIZE=2");
    snprintf(e[2], 64, "MASTER_ADDR=127.0.0.1");
    snprintf(e[3], 64, "MASTER_PORT=%d", port);
    snprintf(m, sizeof m, "security.mode=%s", mode);
    char *env[] = { e[0], e[1], e[2], e[3], NULL };
    char *extra[] = { m, "transport.zmq.timeout_s=3", NULL }, *argv[64];
    train_argv(argv, 64, extra);
    spawn_child_t ch;
    CHECK(spawn_start(argv, env, &ch) == 0);
    spawn_wait(&ch, 120);
    spawn_collect(&ch, g_out[0], sizeof g_out[0], g_err[0], sizeof g_err[0]);
    shutdown(f.rdzv, SHUT_RDWR);
    shutdown(f.evil, SHUT_RDWR);
    pthread_join(f.th, NULL);
    close(f.rdzv);
    close(f.evil);
    CHECKF(ch.code != 0, "the task exited 0 with a forged rank 0");
    memcpy(mechanism, f.mechanism, 21);
}

static void case_forged(void)
{
    char mech[21] = "";
    /* with the job's keys the forged table is refused at the rendezvous:
     * the task never reaches the forger's listener */
    forged_job("curve", mech);
    CHECKF(mech[0] == '\0' && strstr(g_err[0], "the table is not "
           "authenticated with the job's keys: not rank 0's, refused"),
           "a CURVE task took the forged table (mechanism '%s'); stderr: %s",
           mech, g_err[0]);
    forged_job("off", mech);
    CHECKF(strcmp(mech, "NULL") == 0, "mode off: mechanism '%s'", mech);
}

/* ---- strata launch --nnodes: what it refuses --------------------------------- */

static void launch_refuses(const char *what, char **args)
{
    char *argv[32] = { (char *)spawn_strata_bin(), "launch" };
    int a = 2;
    for (int i = 0; args[i] && a < 31; i++)
        argv[a++] = args[i];
    argv[a] = NULL;
    spawn_result_t *r = malloc(sizeof *r);
    CHECK(r && spawn_run(argv, 60, r) == 0);
    if (!r)
        return;
    CHECKF(r->code == 2 && count_lines(r->err) == 1 && strstr(r->err, what)
               && !strstr(r->out, "[launch]"),
           "want exit 2 and one line with '%s'; got %d: %s%s", what, r->code,
           r->err, r->out);
    free(r);
}

static void case_launch_args(void)
{
    launch_refuses("--nnodes 2 needs --node-rank K (0..1: this machine) and "
                   "--rendezvous HOST:PORT",
                   (char *[]){ "--nnodes", "2", NULL });
    launch_refuses("--node-rank and --rendezvous go with --nnodes",
                   (char *[]){ "--node-rank", "0", "--rendezvous", "h:1",
                               NULL });
    launch_refuses("--node-rank 2 is out of range for --nnodes 2 (0..1)",
                   (char *[]){ "--nnodes", "2", "--node-rank", "2",
                               "--rendezvous", "h:1", NULL });
    launch_refuses("--nnodes needs an integer in [1, 1024], got '0'",
                   (char *[]){ "--nnodes", "0", NULL });
    launch_refuses("--rendezvous needs HOST:PORT",
                   (char *[]){ "--nnodes", "2", "--node-rank", "0",
                               "--rendezvous", "h:99999", NULL });
    launch_refuses("--nnodes starts workers only",
                   (char *[]){ "--nnodes", "2", "--node-rank", "0",
                               "--rendezvous", "h:1", "--ps", "1", NULL });
    launch_refuses("a separate chief across machines",
                   (char *[]){ "--nnodes", "2", "--node-rank", "0",
                               "--rendezvous", "h:1", "--chief", NULL });
    /* launch's own keys are per machine */
    char *keys = strdup(getenv("STRATA_SECURITY_KEYS"));
    unsetenv("STRATA_SECURITY_KEYS");
    launch_refuses("a job on 2 machines needs one set of keys for all of them",
                   (char *[]){ "--nnodes", "2", "--node-rank", "1",
                               "--rendezvous", "h:1", "-n", "2", NULL });
    /* An elastic job across machines: the service's token is every
     * launch's, from STRATA_ELASTIC_TOKEN or every worker's secret key. */
    launch_refuses("an elastic job on 2 machines needs a secret that every "
                   "machine's launch shares",
                   (char *[]){ "--nnodes", "2", "--node-rank", "1",
                               "--rendezvous", "127.0.0.1:1", "-n", "2",
                               "--elastic", "2:4", "--set",
                               "strategy.plugin=mwms", "--set",
                               "security.mode=off", NULL });
    setenv("STRATA_SECURITY_KEYS", keys, 1);
    setenv("STRATA_ELASTIC_TOKEN", "too short", 1);
    launch_refuses("STRATA_ELASTIC_TOKEN must be 16 to 79 printable "
                   "characters without blanks",
                   (char *[]){ "--nnodes", "2", "--node-rank", "1",
                               "--rendezvous", "127.0.0.1:1", "-n", "2",
                               "--elastic", "2:4", "--set",
                               "strategy.plugin=mwms", NULL });
    unsetenv("STRATA_ELASTIC_TOKEN");
    char two[600], *kg[] = { (char *)spawn_strata_bin(), "keygen", two,
                             "worker:0-1", NULL };
    snprintf(two, sizeof two, "%s", tmp_path("two-keys"));
    spawn_result_t *k = malloc(sizeof *k);
    CHECK(k && spawn_run(kg, 60, k) == 0 && k->code == 0);
    free(k);
    setenv("STRATA_SECURITY_KEYS", two, 1);
    launch_refuses("worker-2.key_secret for the elastic job's membership "
                   "token: No such file or directory",
                   (char *[]){ "--nnodes", "2", "--node-rank", "1",
                               "--rendezvous", "127.0.0.1:1", "-n", "2",
                               "--elastic", "2:4", "--set",
                               "strategy.plugin=mwms", NULL });
    launch_refuses("--elastic 2:4 starts 2 to 4 workers in all (-n on each "
                   "machine, given with --nnodes)",
                   (char *[]){ "--nnodes", "2", "--node-rank", "1",
                               "--rendezvous", "127.0.0.1:1", "--elastic",
                               "2:4", "--set", "strategy.plugin=mwms", NULL });
    /* --tasks: this machine's part of a static [cluster] */
    launch_refuses("--tasks needs TYPE:INDEX,... (TYPE chief, worker, ps or "
                   "evaluator; at most 64 tasks), got 'worker:1,'",
                   (char *[]){ "--tasks", "worker:1,", NULL });
    launch_refuses("--tasks names worker:1 twice",
                   (char *[]){ "--tasks", "worker:1,ps:0,worker:1", NULL });
    launch_refuses("--tasks runs tasks of the job's [cluster] as they are "
                   "listed there: no -n",
                   (char *[]){ "--tasks", "worker:0", "-n", "2", NULL });
    launch_refuses("--tasks ps:1: the job's [cluster] ps lists 1 address",
                   (char *[]){ "--tasks", "worker:0,ps:1", "--set",
                               "cluster.worker=127.0.0.1:1", "--set",
                               "cluster.ps=127.0.0.1:2", NULL });
    unsetenv("STRATA_SECURITY_KEYS");
    launch_refuses("--tasks runs a part of a job on several machines, which "
                   "needs one set of keys for all of them",
                   (char *[]){ "--tasks", "worker:0", "--set",
                               "cluster.worker=127.0.0.1:1", NULL });
    setenv("STRATA_SECURITY_KEYS", keys, 1);
    free(keys);

    /* node 0 alone: its tasks wait, then name the ranks of node 1 */
    char rdzv[32];
    snprintf(rdzv, sizeof rdzv, "127.0.0.1:%d", spawn_task_port());
    char *argv[] = { (char *)spawn_strata_bin(), "launch", "--nnodes", "2",
                     "--node-rank", "0", "--rendezvous", rdzv, "-n", "2",
                     "--set", "cluster.rendezvous_timeout_s=2", "--set",
                     "train.eval=false", NULL };
    spawn_result_t *r = malloc(sizeof *r);
    CHECK(r && spawn_run(argv, 120, r) == 0);
    const char *what = "ranks 2-3 (2 of 4 tasks) did not register within 2 s";
    const char *w0 = r ? strstr(r->err, "[worker:0] strata: rendezvous: "
                                        "error: at ") : NULL;
    const char *w1 = r ? strstr(r->err, "[worker:1] strata: rendezvous: "
                                        "error: at ") : NULL;
    CHECKF(r && r->code == 1 && w0 && w1 && strstr(w0, what)
               && strstr(w1, what),
           "exit %d: %s", r ? r->code : -1, r ? r->err : "");
    free(r);
}

/* ---- the rendezvous through strata launch --nnodes ---------------------------- */

static char **node_argv_x(char **argv, int nnodes, int rank,
                          const char *rdzv, char *const *extra);

static char **node_argv(char **argv, int nnodes, int rank, const char *rdzv)
{
    return node_argv_x(argv, nnodes, rank, rdzv, NULL);
}

/* node_argv with more "--set K=V" (NULL-ended values; a later one wins). */
static char **node_argv_x(char **argv, int nnodes, int rank,
                          const char *rdzv, char *const *extra)
{
    static char nn[8][8], nr[8][8];
    static int k;
    k = (k + 1) % 8;
    snprintf(nn[k], sizeof nn[k], "%d", nnodes);
    snprintf(nr[k], sizeof nr[k], "%d", rank);
    char *a[] = { (char *)spawn_strata_bin(), "launch", "--nnodes", nn[k],
                  "--node-rank", nr[k], "--rendezvous", (char *)rdzv, "-n",
                  "1", "--set", "cluster.rendezvous_timeout_s=30", "--set",
                  "train.eval=false", "--set", "train.max_steps=4", "--set",
                  "data.limit_train=512", "--set", "train.progress=none", "--set",
                  "train.batch_size=48",
                  NULL };
    memcpy(argv, a, sizeof a);
    int n = (int)(sizeof a / sizeof *a) - 1;
    for (int i = 0; extra && extra[i] && n + 3 < 32; i++) {
        argv[n++] = "--set";
        argv[n++] = extra[i];
    }
    argv[n] = NULL;
    return argv;
}

/* Connected to port once someone listens there, else -1. */
static int dial_when_up(int port)
{
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    for (int i = 0; i < 600; i++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
            return fd;
        if (fd >= 0)
            close(fd);
        usleep(50000);
    }
    return -1;
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void case_rdzv_trust(void)
{
    /* a squatter first: a well-formed REGISTER for rank 1 of 2, with a tag
     * it cannot compute */
    int port = spawn_task_port();
    char rdzv[32], *argv[32];
    snprintf(rdzv, sizeof rdzv, "127.0.0.1:%d", port);
    spawn_child_t n0, n1;
    CHECK(spawn_start(node_argv(argv, 2, 0, rdzv), NULL, &n0) == 0);
    int fd = dial_when_up(port);
    uint8_t m[1024];
    ssize_t got = fd >= 0 ? read_full(fd, m, STRATA_RDZV_HDR + 1 +
                                               STRATA_RDZV_NONCE) : -1;
    CHECK(got == STRATA_RDZV_HDR + 1 + STRATA_RDZV_NONCE &&
          m[5] == STRATA_RDZV_CHALLENGE);
    size_t n = strata__rdzv_register(m, 2, 1, "127.0.0.1:9");
    strata__rdzv_put_hdr(m, STRATA_RDZV_REGISTER,
                         (uint32_t)(n - STRATA_RDZV_HDR + STRATA_RDZV_TAG));
    memset(m + n, 0x5a, STRATA_RDZV_TAG);
    n += STRATA_RDZV_TAG;
    CHECK(fd >= 0 && write(fd, m, n) == (ssize_t)n);
    got = fd >= 0 ? read_full(fd, m, STRATA_RDZV_HDR + 1) : -1;
    CHECKF(got == STRATA_RDZV_HDR + 1 && m[5] == STRATA_RDZV_REFUSED &&
           m[STRATA_RDZV_HDR] == STRATA_RDZV_WHY_AUTH, "got %zd", got);
    if (fd >= 0)
        close(fd);
    CHECK(spawn_start(node_argv(argv, 2, 1, rdzv), NULL, &n1) == 0);
    spawn_wait(&n0, 300);
    spawn_wait(&n1, 300);
    spawn_collect(&n0, g_out[0], sizeof g_out[0], g_err[0], sizeof g_err[0]);
    spawn_collect(&n1, g_out[1], sizeof g_out[1], g_err[1], sizeof g_err[1]);
    CHECKF(n0.code == 0 && n1.code == 0, "exit %d %d: %s\n---\n%s", n0.code,
           n1.code, g_err[0], g_err[1]);
    CHECKF(strstr(g_err[0], "rendezvous: warning: at 127.0.0.1:") &&
           strstr(g_err[0], ": dropped 127.0.0.1:") &&
           strstr(g_err[0], "its REGISTER as rank 1 is not authenticated "
                            "with the job's keys"), "%s", g_err[0]);

    /* two nodes given --node-rank 1 of 3 */
    port = spawn_task_port();
    snprintf(rdzv, sizeof rdzv, "127.0.0.1:%d", port);
    spawn_child_t ch[3];
    double t0 = mono_s();
    CHECK(spawn_start(node_argv(argv, 3, 0, rdzv), NULL, &ch[0]) == 0);
    CHECK(spawn_start(node_argv(argv, 3, 1, rdzv), NULL, &ch[1]) == 0);
    CHECK(spawn_start(node_argv(argv, 3, 1, rdzv), NULL, &ch[2]) == 0);
    static char err[3][65536];
    for (int i = 0; i < 3; i++) {
        spawn_wait(&ch[i], 120);
        spawn_collect(&ch[i], g_out[0], sizeof g_out[0], err[i],
                      sizeof err[i]);
    }
    double took = mono_s() - t0;
    for (int i = 0; i < 3; i++) {
        const char *e = strstr(err[i], "rank 1 is claimed twice: by 127.0.0.1:");
        int lines = 0;
        for (const char *p = err[i]; (p = strstr(p, "error: ")); p++)
            lines++;
        CHECKF(ch[i].code != 0 && e && strstr(e, ") and by 127.0.0.1:") &&
               lines == 1, "node %d: exit %d, %d error lines: %s", i,
               ch[i].code, lines, err[i]);
    }
    CHECKF(took < 20, "the nodes ended after %.1f s", took);
}

/* Waits (bounded) until `c`'s stderr holds `what`: 1, else 0. */
static int stderr_says(const spawn_child_t *c, const char *what)
{
    static char buf[65536];
    for (int i = 0; i < 1200; i++) { /* 60 s */
        spawn_read_file_(c->errp, buf, sizeof buf);
        if (strstr(buf, what))
            return 1;
        siginfo_t si = { 0 }; /* ended? (left for spawn_wait to reap) */
        if (waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT)
            == 0 && si.si_pid == c->pid)
            return 0;
        usleep(50000);
    }
    return 0;
}

static void case_rdzv_late(void)
{
    int port = spawn_task_port();
    char rdzv[32], *argv[4][40];
    snprintf(rdzv, sizeof rdzv, "127.0.0.1:%d", port);
    /* a job that would train for minutes: it must end at the late claim */
    char *longer[] = { "train.max_steps=3000", "debug.step_delay_ms=20", NULL };
    spawn_child_t ch[4];
    for (int r = 0; r < 3; r++)
        CHECK(spawn_start(node_argv_x(argv[r], 3, r, rdzv, longer), NULL,
                          &ch[r]) == 0);
    CHECKF(stderr_says(&ch[0], "3 tasks registered"),
           "the job did not form");
    double t0 = mono_s();
    CHECK(spawn_start(node_argv_x(argv[3], 3, 1, rdzv, longer), NULL,
                      &ch[3]) == 0);
    static char err[4][65536];
    for (int i = 0; i < 4; i++) {
        spawn_wait(&ch[i], 120);
        spawn_collect(&ch[i], g_out[0], sizeof g_out[0], err[i],
                      sizeof err[i]);
    }
    double took = mono_s() - t0;
    for (int i = 0; i < 4; i++) {
        const char *e = strstr(err[i], "rank 1 is claimed twice: by 127.0.0.1:");
        int lines = 0;
        for (const char *p = err[i]; (p = strstr(p, "error: ")); p++)
            lines++;
        CHECKF(ch[i].code != 0 && e && strstr(e, ") and by 127.0.0.1:") &&
               strstr(e, "after the job had formed") && lines == 1,
               "node %d: exit %d, %d error lines: %s", i, ch[i].code, lines,
               err[i]);
    }
    fprintf(stderr, "rdzv_late: every node ended %.1f s after the late "
            "claim\n", took);
    CHECKF(took < 20, "the nodes ended %.1f s after the late claim", took);
}

/* Accepts one connection on lfd within 60 s: its fd, or -1. */
static int accept_within(int lfd)
{
    struct pollfd p = { .fd = lfd, .events = POLLIN };
    return poll(&p, 1, 60000) == 1 ? accept(lfd, NULL, NULL) : -1;
}

static void case_rdzv_refused(void)
{
    int port = spawn_free_port();
    char rdzv[32], *argv[2][40];
    snprintf(rdzv, sizeof rdzv, "127.0.0.1:%d", port);
    int lfd = listen_on(port);
    spawn_child_t n0, n1;
    CHECK(spawn_start(node_argv(argv[1], 2, 1, rdzv), NULL, &n1) == 0);
    /* first: a REFUSED where the challenge belongs */
    uint8_t m[1024];
    int fd = accept_within(lfd);
    size_t n = strata__rdzv_refused(m, STRATA_RDZV_WHY_CONFIG,
                                    "forged before the challenge");
    CHECK(fd >= 0 && write(fd, m, n) == (ssize_t)n);
    if (fd >= 0)
        close(fd);
    /* then: a challenge, the task's REGISTER, an untagged REFUSED */
    fd = accept_within(lfd);
    uint8_t nonce[STRATA_RDZV_NONCE] = { 7 };
    n = strata__member_challenge_encode(m, STRATA_RDZV_AUTH_KEYS, nonce);
    CHECK(fd >= 0 && write(fd, m, n) == (ssize_t)n);
    ssize_t got = fd >= 0 ? read_full(fd, m, STRATA_RDZV_HDR) : -1;
    CHECKF(got == STRATA_RDZV_HDR && m[5] == STRATA_RDZV_REGISTER,
           "got %zd bytes", got);
    n = strata__rdzv_refused(m, STRATA_RDZV_WHY_TIMEOUT,
                             "forged after the REGISTER");
    CHECK(fd >= 0 && write(fd, m, n) == (ssize_t)n);
    if (fd >= 0)
        close(fd);
    close(lfd);
    /* the real node 0 now: node 1 must still be there to meet it */
    CHECK(spawn_start(node_argv(argv[0], 2, 0, rdzv), NULL, &n0) == 0);
    spawn_wait(&n0, 300);
    spawn_wait(&n1, 300);
    spawn_collect(&n0, g_out[0], sizeof g_out[0], g_err[0], sizeof g_err[0]);
    spawn_collect(&n1, g_out[1], sizeof g_out[1], g_err[1], sizeof g_err[1]);
    CHECKF(n0.code == 0 && n1.code == 0, "exit %d %d: %s\n---\n%s", n0.code,
           n1.code, g_err[0], g_err[1]);
    const char *d = strstr(g_err[1], "dropped a REFUSED from 127.0.0.1:");
    CHECKF(d && strstr(d, "that is not authenticated with the job's keys "
                          "(1 so far") &&
           strstr(d, "forged before the challenge") &&
           strstr(d, "(2 so far") && strstr(d, "forged after the REGISTER"),
           "%s", g_err[1]);
}

/* Why `which` cannot run here, or NULL. */
static const char *missing(const char *which)
{
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
               R_OK) != 0)
        return "Fashion-MNIST not installed";
    if (!strcmp(which, "mpirun") && access("/usr/bin/mpirun", X_OK) != 0)
        return "Open MPI's mpirun not installed (Debian openmpi-bin)";
    if (!strcmp(which, "torchrun_real")) {
        char *probe[] = { "/usr/bin/python3", "-c",
                          "import torch.distributed.run", NULL };
        spawn_result_t *r = malloc(sizeof *r);
        int ok = r && spawn_run(probe, 120, r) == 0 && r->code == 0;
        free(r);
        if (!ok)
            return "torchrun not installed (Debian python3-torch: "
                   "/usr/bin/python3 -m torch.distributed.run)";
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "";
    if (strcmp(which, "torchrun") && strcmp(which, "mpirun") &&
        strcmp(which, "torchrun_real") && strcmp(which, "forged") &&
        strcmp(which, "launch_args") && strcmp(which, "rdzv_trust") &&
        strcmp(which, "rdzv_late") && strcmp(which, "rdzv_refused")) {
        fprintf(stderr, "usage: test_launchers torchrun|mpirun|"
                "torchrun_real|forged|launch_args|rdzv_trust|rdzv_late|"
                "rdzv_refused\n");
        return 2;
    }
    const char *why = missing(which);
    if (why)
        CHECK_SKIP("%s", why);
    CHECK(spawn_job_keys() == 0);
    tmp_make("launchers");
    const char *ref = tmp_path("reference.bin");
    if (!strcmp(which, "forged"))
        case_forged();
    else if (!strcmp(which, "launch_args"))
        case_launch_args();
    else if (!strcmp(which, "rdzv_trust"))
        case_rdzv_trust();
    else if (!strcmp(which, "rdzv_late"))
        case_rdzv_late();
    else if (!strcmp(which, "rdzv_refused"))
        case_rdzv_refused();
    else if (reference_dump(ref) != 0)
        CHECK(!"the reference run");
    else if (!strcmp(which, "torchrun"))
        case_torchrun(ref);
    else if (!strcmp(which, "mpirun"))
        case_mpirun(ref);
    else
        case_torchrun_real(ref);
    tmp_cleanup();
    return CHECK_DONE();
}
