/* compress_train_test -- [transport.zmq] compression in a training job, run
 * the way users run it: `strata launch -n 2` with mwms over zmq, 2 epochs of
 * the MLP on Fashion-MNIST, seed 42.
 *
 *  - none, fp16 and bf16 (shared memory, the default on one host), and
 *    fp16 with shm = off (the ring over zmq, CURVE-secured as launch's
 *    jobs are): every run exits 0, both workers end with bitwise-equal
 *    variables (equal hashes), rank 0 says the gradients travel in 16
 *    bits, the variables differ from the uncompressed run's (compression
 *    is in effect), and the test accuracy stays within 1.5 points of
 *    none's (measured over seeds 1-3: at most 0.6 points apart);
 *  - a bad value of the key: one error line naming it and the choices,
 *    non-zero exit. */
#include <unistd.h>

#include "check.h"
#include "spawn.h"

#define TOLERANCE 0.015 /* test accuracy, absolute */

typedef struct run {
    int    code;
    double acc;
    char   hash[2][17];
    int    says_comp;
} run_t;

static spawn_result_t g_r;

static void hash_of(const char *out, int rank, char h[17])
{
    char key[64];
    snprintf(key, sizeof key, "variables hash (rank %d): ", rank);
    const char *p = strstr(out, key);
    snprintf(h, 17, "%s", p ? p + strlen(key) : "?");
}

static run_t job(const char *comp, const char *shm)
{
    char c[96], s[64];
    snprintf(c, sizeof c, "transport.zmq.compression=%s", comp);
    snprintf(s, sizeof s, "transport.zmq.shm=%s", shm);
    char *argv[] = { (char *)spawn_strata_bin(), "launch", "-n", "2",
                     "--set", "strategy.plugin=mwms", "--set",
                     "transport.plugin=zmq", "--set", c, "--set", s,
                     "--set", "train.devices=cpu:0", "--set",
                     "train.epochs=2", "--set", "train.seed=42", "--set",
                     "train.progress=none", "--set", "debug.hash_vars=true",
                     "--set", "transport.zmq.timeout_s=60", NULL };
    run_t r = { .code = -1, .acc = -1 };
    spawn_run(argv, 600, &g_r);
    r.code = g_r.code;
    const char *p = strstr(g_r.out, "test accuracy ");
    if (p)
        r.acc = atof(p + strlen("test accuracy "));
    hash_of(g_r.out, 0, r.hash[0]);
    hash_of(g_r.out, 1, r.hash[1]);
    char says[96];
    snprintf(says, sizeof says, "gradient all-reduces travel as %s", comp);
    r.says_comp = strstr(g_r.out, says) || strstr(g_r.err, says);
    printf("compression %s, shm %s: exit %d, test accuracy %.4f, hashes "
           "%s %s\n", comp, shm, r.code, r.acc, r.hash[0], r.hash[1]);
    if (r.code != 0)
        fprintf(stderr, "%s\n%s\n", g_r.out, g_r.err);
    return r;
}

int main(void)
{
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
               R_OK) != 0)
        CHECK_SKIP("Fashion-MNIST not installed (apt-get install "
                   "dataset-fashion-mnist)");
    run_t none = job("none", "auto");
    CHECK(none.code == 0 && none.acc > 0.80);
    CHECK(strcmp(none.hash[0], none.hash[1]) == 0 && none.hash[0][0] != '?');
    static const char *const cases[][2] = { { "fp16", "auto" },
                                            { "bf16", "auto" },
                                            { "fp16", "off" } };
    for (int i = 0; i < 3; i++) {
        const char *comp = cases[i][0], *shm = cases[i][1];
        run_t r = job(comp, shm);
        CHECKF(r.code == 0, "%s shm=%s: exit %d", comp, shm, r.code);
        CHECKF(strcmp(r.hash[0], r.hash[1]) == 0 && r.hash[0][0] != '?',
               "%s shm=%s: workers differ: %s vs %s", comp, shm, r.hash[0],
               r.hash[1]);
        CHECKF(r.says_comp, "%s shm=%s: rank 0 does not say the gradients "
               "travel as %s", comp, shm, comp);
        CHECKF(strcmp(r.hash[0], none.hash[0]) != 0, "%s shm=%s: the same "
               "variables as without compression", comp, shm);
        CHECKF(r.acc >= none.acc - TOLERANCE && r.acc <= none.acc + TOLERANCE,
               "%s shm=%s: test accuracy %.4f, none %.4f (tolerance %.3f)",
               comp, shm, r.acc, none.acc, TOLERANCE);
    }

    char *bad[] = { (char *)spawn_strata_bin(), "launch", "-n", "2", "--set",
                    "strategy.plugin=mwms", "--set", "transport.plugin=zmq",
                    "--set", "transport.zmq.compression=fp8", "--set",
                    "train.devices=cpu:0", "--set", "train.max_steps=5", NULL };
    spawn_run(bad, 120, &g_r);
    const char *want = "[transport.zmq] compression = 'fp8': expected one "
                       "of: none, fp16, bf16";
    CHECKF(g_r.code != 0 && (strstr(g_r.out, want) || strstr(g_r.err, want)),
           "bad value: exit %d:\n%s\n%s", g_r.code, g_r.out, g_r.err);
    return CHECK_DONE();
}
