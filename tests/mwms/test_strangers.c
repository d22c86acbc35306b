/* Strangers cannot shake an mwms job. Two workers train (started by hand,
 * so that their ports are known) while a hostile peer, from this host,
 * sends to both workers' ports: raw garbage, an HTTP request, a ZeroMQ
 * client's junk frames, a CURVE client whose key is not the job's, and a
 * flood of 2000 idle connections. Each is dropped (and counted, with a
 * warning); the job finishes with the variables of an undisturbed run,
 * bit for bit, and the flood costs the worker a bounded amount of memory.
 * Once with the job secured (the default, keys from strata keygen) and once
 * with [security] mode = off, where the transport drops what is not its
 * protocol on its own. Each worker's end-of-run "strangers:" line (the
 * core's, from zmq.so's counts: plugin ABI 2.7) counts every one of them,
 * and the chief's TensorBoard has the strangers/ scalars at each epoch. */
#include <signal.h>
#include <unistd.h>

#include "check.h"
#include "hostile.h"
#include "mwms_job.h"
#include "spawn.h"
#include "testutil.h"

#define FLOOD 2000
#define FLOOD_MAX_KIB (64 * 1024) /* RSS the flood may add to a worker */

static char *k_sets[] = { "strategy.plugin=mwms", "transport.plugin=zmq",
                          "transport.timeout_s=30", "train.batch_size=24",
                          "train.max_steps=600", "train.eval=false",
                          "train.devices=cpu:0", "train.progress=none",
                          "data.limit_train=9600", "debug.hash_vars=true",
                          /* slow enough for the peer to act mid-training;
                           * the results do not depend on it */
                          "debug.step_delay_ms=15", NULL, NULL, NULL };

/* The delay is for the peer's sake: the undisturbed run goes without it
 * (the results do not depend on it). */
#define DELAY_SET 10

static int run_quiet(int nsets, char hash[2][17])
{
    job_t j;
    char *delay = k_sets[DELAY_SET];
    k_sets[DELAY_SET] = "debug.step_delay_ms=0";
    start_job(&j, 2, k_sets, nsets);
    k_sets[DELAY_SET] = delay;
    wait_job(&j, 180);
    int ok = 1;
    for (int i = 0; i < 2; i++) {
        CHECKF(j.child[i].code == 0, "undisturbed worker %d exit %d: %s", i,
               j.child[i].code, g_err[i]);
        ok &= j.child[i].code == 0 && hash_of(g_out[i], hash[i]) == 0;
    }
    return ok ? 0 : -1;
}

/* The core's end-of-run line (plugin ABI 2.7) in `out`: 1 with its four
 * counts, 0 when there is none. */
static int core_line(const char *out, long long k[4])
{
    const char *line = strstr(out, "strangers: ");
    return line && sscanf(line, "strangers: %lld refused by key, %lld closed "
                          "before a handshake, %lld not the transport's "
                          "protocol, %lld bad messages", &k[0], &k[1], &k[2],
                          &k[3]) == 4;
}

/* The chief's TensorBoard: the strangers/ scalars at each of `epochs`
 * epochs, the last at most the end line's counts (strangers still came
 * after that epoch's end). */
static void check_tensorboard(const char *mode, const char *tb, int epochs,
                              const long long k[4])
{
    const char *src = getenv("STRATA_SRC"), *py = getenv("STRATA_PYTHON");
    char script[600], ep[16], ks[4][32];
    snprintf(script, sizeof script, "%s/tests/ps/strangers_tb.py",
             src ? src : ".");
    snprintf(ep, sizeof ep, "%d", epochs);
    for (int i = 0; i < 4; i++)
        snprintf(ks[i], sizeof ks[i], "<=%lld", k[i]);
    char *pargv[] = { "/usr/bin/env", py && *py ? (char *)py : "python3",
                      script, (char *)tb, ep, ks[0], ks[1], ks[2], ks[3],
                      NULL };
    spawn_result_t *P = malloc(sizeof *P);
    CHECK(P && spawn_run(pargv, 120, P) == 0);
    if (P && P->code != 77) {
        printf("%s: %s%s", mode, P->out, P->err);
        CHECKF(P->code == 0, "%s: strangers_tb.py exit %d", mode, P->code);
    }
    free(P);
}

static void under_attack(int secure)
{
    int nsets = 11;
    if (!secure)
        k_sets[nsets++] = "security.mode=off";
    char want[2][17], got[17];
    if (run_quiet(nsets, want) != 0)
        return;

    /* the attacked run writes TensorBoard (the chief: worker 0) */
    tmp_make(secure ? "strangers-tb" : "strangers-tb-off");
    char tb[600], tbset[700];
    snprintf(tb, sizeof tb, "%s/tb", tmpdir_);
    snprintf(tbset, sizeof tbset, "train.tensorboard=%s", tb);
    k_sets[nsets] = tbset;
    job_t j;
    start_job(&j, 2, k_sets, nsets + 1);
    k_sets[nsets] = NULL;
    usleep(1500 * 1000); /* past the rendezvous */
    long rss0 = hostile_rss_kib(j.child[0].pid);
    static const char garbage[] = "\x01\xff\x00\x7fnot a greeting at all";
    static const char http[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    char key[41], path[128];
    snprintf(path, sizeof path, "%s/worker-0.key", spawn_keys_dir_);
    int have_key = hostile_cert_key(path, key) == 0;
    for (int w = 0; w < 2; w++) {
        CHECK(hostile_raw(j.port[w], garbage, sizeof garbage - 1) == 0);
        CHECK(hostile_raw(j.port[w], http, sizeof http - 1) == 0);
        CHECK(hostile_zmq(j.port[w], NULL) == 0);
        if (have_key)
            CHECK(hostile_zmq(j.port[w], key) == 0);
    }
    static int fds[FLOOD];
    int opened = hostile_flood(j.port[0], fds, FLOOD);
    usleep(1000 * 1000);
    long rss1 = hostile_rss_kib(j.child[0].pid);
    hostile_flood_end(fds, FLOOD);
    wait_job(&j, 180);

    const char *mode = secure ? "secured" : "plaintext";
    printf("%s: %d idle connections to worker 0: RSS %ld -> %ld KiB\n", mode,
           opened, rss0, rss1);
    CHECKF(opened >= FLOOD / 2, "%s: only %d connections opened", mode, opened);
    CHECKF(rss0 > 0 && rss1 > 0 && rss1 - rss0 < FLOOD_MAX_KIB,
           "%s: the flood took worker 0 from %ld to %ld KiB", mode, rss0, rss1);
    for (int i = 0; i < 2; i++) {
        CHECKF(j.child[i].code == 0, "%s: worker %d exit %d under attack: %s",
               mode, i, j.child[i].code, g_err[i]);
        CHECKF(hash_of(g_out[i], got) == 0 && strcmp(got, want[i]) == 0,
               "%s: worker %d ended with %s, undisturbed %s", mode, i, got,
               want[i]);
        CHECKF(strstr(g_err[i], "so far; the job goes on"),
               "%s: worker %d reported no stranger:\n%s", mode, i, g_err[i]);
    }
    if (secure)
        CHECKF(strstr(g_err[0], "refused by ZAP") &&
               strstr(g_err[0], "127.0.0.1"),
               "secured: the foreign CURVE key was not reported:\n%s",
               g_err[0]);
    else
        CHECKF(strstr(g_err[0], "[security] mode = off"),
               "plaintext: no warning at start:\n%s", g_err[0]);
    /* The core's line (ABI 2.7): the flood's connections are strangers
     * closed before a handshake (not all of them: those the kernel's
     * accept queue dropped never reached the worker -- 1331 of 2000 in
     * one secured run, 327 in another on a busy 2-core machine, so the
     * bound is zmq's listen backlog, ZMQ_BACKLOG's 100, which the kernel
     * queues whatever the load); the foreign key is refused by key. */
    long long k[4] = { -1, -1, -1, -1 };
    int have = core_line(g_out[0], k);
    printf("%s: worker 0's strangers line: %lld refused by key, %lld closed "
           "early, %lld not the protocol, %lld bad messages\n", mode, k[0],
           k[1], k[2], k[3]);
    CHECKF(have && k[1] >= 100 && k[0] + k[2] + k[3] >= 2 &&
               (!secure || k[0] >= 1),
           "%s: worker 0's strangers line: %s", mode,
           have ? strstr(g_out[0], "strangers: ") : "none");
    CHECKF(core_line(g_out[1], k) ? k[0] + k[1] + k[2] + k[3] >= 3 : 0,
           "%s: worker 1 printed no strangers line:\n%s", mode, g_out[1]);
    if (have) {
        core_line(g_out[0], k);
        /* 9600 samples of 24: 400 steps an epoch, 600 steps: 2 epochs */
        check_tensorboard(mode, tb, 2, k);
    }
    tmp_cleanup();
}

int main(void)
{
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
               R_OK) != 0)
        CHECK_SKIP("Fashion-MNIST not installed");
    signal(SIGPIPE, SIG_IGN);
    CHECK(spawn_job_keys() == 0);
    under_attack(1);
    under_attack(0);
    return CHECK_DONE();
}
