/* `[train] devices` with GPUs where they cannot be had: one clear error line
 * and exit 2 (invalid configuration), in every build. Without CUDA the line
 * says the build has no CUDA support; in a CUDA build on a machine without
 * a GPU it says "no CUDA device found" (CUDA's own answer, e.g. "CUDA
 * driver version is insufficient", only at debug level); with GPUs, gpu:4095 is "no such
 * GPU". CPUs and GPUs mixed are refused everywhere. etc/gpu-mirrored.ini
 * reaches the device check (the rest of it is valid) where it cannot run. */
#include "check.h"
#include "spawn.h"

#ifdef STRATA_TEST_CUDA
#include "cuda/kernels_cuda.h"
#endif

static spawn_result_t g_r;

/* devices NULL: the ones of etc/gpu-mirrored.ini. */
static int train(const char *devices)
{
    char dev[128], ini[600];
    const char *src = getenv("STRATA_SRC");
    snprintf(dev, sizeof dev, "train.devices=%s", devices ? devices : "");
    snprintf(ini, sizeof ini, "%s/etc/gpu-mirrored.ini", src ? src : ".");
    char *argv[] = { (char *)spawn_strata_bin(), "train",
                     "--set", "train.max_steps=2", "--set", "train.epochs=1",
                     "--set", "train.eval=false", "--set", "train.progress=none",
                     "--set", "data.limit_train=256",
                     devices ? "--set" : "-c", devices ? dev : ini, NULL };
    spawn_run(argv, 60, &g_r);
    return g_r.code;
}

/* Lines of stderr that report an error. */
static int error_lines(const char *err)
{
    int n = 0;
    for (const char *p = err; (p = strstr(p, "error:")) != NULL; p++)
        n++;
    return n;
}

/* Exit 2, exactly one error line, and it contains every `want`. */
static void refused(const char *devices, const char *want1, const char *want2)
{
    int code = train(devices);
    if (!devices)
        devices = "(etc/gpu-mirrored.ini)";
    printf("devices = %s: exit %d\n%s", devices, code, g_r.err);
    CHECKF(code == 2, "devices = %s: exit %d, expected 2", devices, code);
    CHECKF(error_lines(g_r.err) == 1, "devices = %s: %d error lines",
           devices, error_lines(g_r.err));
    CHECKF(strstr(g_r.err, want1) != NULL, "devices = %s: no '%s'", devices,
           want1);
    CHECKF(!want2 || strstr(g_r.err, want2) != NULL, "devices = %s: no '%s'",
           devices, want2);
}

int main(void)
{
    int gpus = 0;
#ifdef STRATA_TEST_CUDA
    if (kg_device_count(&gpus) != 0)
        gpus = 0;
#endif
    /* The data set must be there for the run to reach the devices. */
    if (train("cpu:0") != 0)
        CHECK_SKIP("a CPU run fails here (exit %d), so refusals cannot be "
                   "told apart: %s", g_r.code, g_r.err);

    refused("cpu:0, gpu:0", "mixes CPU and GPU replicas", NULL);
    if (gpus == 0) {
#ifdef STRATA_TEST_CUDA
        refused("gpu:0", "'gpu:0': no CUDA device found on this host", NULL);
        refused(NULL, "'gpu:0': no CUDA device found on this host", NULL);
        CHECKF(!strstr(g_r.err, "insufficient"), "CUDA's words in the error "
               "line: %s", g_r.err);
#else
        refused("gpu:0", "'gpu:0': this build has no CUDA support",
                "STRATA_CUDA=ON");
        refused(NULL, "'gpu:0': this build has no CUDA support", NULL);
#endif
    } else {
        refused("gpu:4095", "'gpu:4095': no such GPU; this machine has", NULL);
        if (gpus == 1) /* the example wants two (tests/gpu/gpu_train runs it) */
            refused(NULL, "'gpu:1': no such GPU; this machine has 1", NULL);
    }
    return CHECK_DONE();
}
