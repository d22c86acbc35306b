/* strata's checkpoints against Hugging Face's safetensors (Python): a file
 * strata writes loads in safetensors.numpy.load_file with the same values
 * and metadata, and a file safetensors.numpy.save_file writes reads back in
 * strata. Needs python3 with `pip install safetensors numpy`; without them
 * the test is skipped (exit 77) and says why. argv[1]: interop.py.
 * STRATA_PYTHON overrides the interpreter (default: python3 on PATH). */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "check.h"
#include "checkpoint/checkpoint.h"
#include "ckpt_util.h"

/* Run argv (inheriting stdout/stderr) for at most timeout_s seconds: its
 * exit code, 128+N when killed by signal N, -1 when it cannot run. */
static int run(char *const argv[], int timeout_s)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        execv(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (waitpid(pid, &st, WNOHANG) != pid) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec >= timeout_s) {
            fprintf(stderr, "%s: killed after %d s\n", argv[0], timeout_s);
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            break;
        }
        usleep(10000);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
}


static int py(const char *python, const char *script, const char *verb,
              const char *file)
{
    char *argv[] = { (char *)python, (char *)script, (char *)verb, (char *)file, NULL };
    return run(argv, 60);
}

static void strata_tensors(void)
{
    static const float w[6] = { -1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f };
    static const int64_t ids[4] = { 1000000000000LL, -2000000000000LL,
                                    3000000000000LL, -4000000000000LL };
    static const uint8_t mask[5] = { 0, 1, 254, 255, 7 };
    static const double d[3] = { 3.141592653589793, -2.718281828459045, 1e-300 };
    static const uint16_t h[2] = { 0x3C00, 0xB800 };   /* f16 1.0, -0.5 */
    static const uint32_t u = 4000000000u;
    static const int32_t i32[4] = { -1, 2, -3, 4 };
    strata__tensor_t t[] = {
        { "w", "F32", 2, { 2, 3 }, w, sizeof w },
        { "ids", "I64", 1, { 4 }, ids, sizeof ids },
        { "mask", "U8", 1, { 5 }, mask, sizeof mask },
        { "d", "F64", 1, { 3 }, d, sizeof d },
        { "h", "F16", 1, { 2 }, h, sizeof h },
        { "u", "U32", 0, { 0 }, &u, sizeof u },
        { "e", "F32", 2, { 0, 2 }, NULL, 0 },
        { "i32", "I32", 2, { 2, 2 }, i32, sizeof i32 },
    };
    strata__meta_t m[] = { { "epoch", "3" }, { "unicode", "h\xc3\xa9llo \xe2\x9c\x93" } };
    CHECK(strata__ckpt_write(tmp_path("from_strata.safetensors"), t, 8, m, 2) == 0);
}

static const strata__tensor_t *want_tensor(const strata__ckpt_t *c, const char *name,
                                           const char *dtype, int ndim,
                                           int64_t s0, int64_t s1)
{
    const strata__tensor_t *x = strata__ckpt_find(c, name);
    int ok = x && strcmp(x->dtype, dtype) == 0 && x->ndim == ndim
             && (ndim < 1 || x->shape[0] == s0) && (ndim < 2 || x->shape[1] == s1);
    CHECKF(ok, "tensor %s", name);
    return ok ? x : NULL;
}

static void check_python_file(void)
{
    strata__ckpt_t *c = NULL;
    CHECK(strata__ckpt_read(tmp_path("from_python.safetensors"), &c) == 0);
    if (!c)
        return;
    CHECK(strata__ckpt_ntensors(c) == 5);
    const strata__tensor_t *x;
    if ((x = want_tensor(c, "a", "F32", 2, 3, 2))) {
        const float *a = x->data;
        int ok = 1;
        for (int i = 0; i < 6; i++)
            ok &= a[i] == i * 0.25f;
        CHECK(ok);
    }
    if ((x = want_tensor(c, "b", "I64", 1, 3, 0))) {
        const int64_t *b = x->data;
        CHECK(b[0] == -5 && b[1] == 0 && b[2] == (int64_t)1 << 40);
    }
    if ((x = want_tensor(c, "c", "U8", 1, 4, 0)))
        CHECK(memcmp(x->data, "\x01\x02\x03\xfa", 4) == 0);
    if ((x = want_tensor(c, "z", "F64", 0, 0, 0)))
        CHECK(*(const double *)x->data == 2.5);
    if ((x = want_tensor(c, "f", "F16", 1, 2, 0))) {
        const uint16_t *f = x->data;
        CHECK(f[0] == 0x3C00 && f[1] == 0xB800);
    }
    CHECK(strata__ckpt_nmeta(c) == 2);
    const char *src = strata__ckpt_meta(c, "source"), *step = strata__ckpt_meta(c, "step");
    CHECK(src && strcmp(src, "python") == 0 && step && strcmp(step, "7") == 0);
    CHECK(strata__ckpt_meta(c, "strata.crc32c") == NULL);
    strata__ckpt_free(c);
}

int main(int argc, char **argv)
{
    char python[1024];
    if (argc < 2)
        CHECK_SKIP("usage: test_ckpt_interop interop.py");
    if (find_python(python, sizeof python) != 0)
        CHECK_SKIP("no python3 on PATH (or $STRATA_PYTHON not executable)");
    int rc = py(python, argv[1], "check", "");
    if (rc != 0)
        CHECK_SKIP("%s cannot import safetensors and numpy (exit %d): "
                   "pip install safetensors numpy", python, rc);

    tmp_make("ckpt");
    strata_tensors();
    CHECKF(py(python, argv[1], "verify", tmp_path("from_strata.safetensors")) == 0,
           "safetensors.numpy.load_file disagrees with strata's file");
    CHECK(py(python, argv[1], "write", tmp_path("from_python.safetensors")) == 0);
    check_python_file();
    tmp_cleanup();
    return CHECK_DONE();
}
