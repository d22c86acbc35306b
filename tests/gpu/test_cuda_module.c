/* The core (cuda_load.c, device.c) when its CUDA module cannot be used.
 * Built twice, for a module name that does not exist (gpu_module_missing)
 * and for bad_module.c, a strata_cuda_v1 of another build
 * (gpu_module_bad). Either way:
 *   - empty devices on a machine without an NVIDIA driver (this build
 *     names device nodes that do not exist) give CPUs and load nothing;
 *   - counting the GPUs is STRATA_ENOTSUP, and the reason names each place
 *     looked in with dlerror()'s words, or says whose module it is;
 *   - gpu:0 is refused as a configuration error, and its memory is NULL. */
#include <dlfcn.h>
#include <string.h>

#include "check.h"
#include "runtime.h"

int main(void)
{
    int32_t d[8];
    int n = -1;
    CHECK(strata__gpu_present() == 0);
    CHECK(strata__devices_parse("", d, 8, &n) == STRATA_OK && n >= 1 &&
          STRATA_DEVICE_TYPE(d[0]) == STRATA_DEV_CPU);
#ifdef STRATA_TEST_MODULE_PATH
    /* The module exists, but nothing has asked for a GPU yet. */
    void *h = dlopen(STRATA_TEST_MODULE_PATH, RTLD_NOW | RTLD_NOLOAD);
    CHECKF(h == NULL, "%s loaded without a GPU asked for",
           STRATA_TEST_MODULE_PATH);
    if (h)
        dlclose(h);
#endif

    const char *why = NULL;
    n = -1;
    CHECK(strata__gpu_count(&n, &why) == STRATA_ENOTSUP && n == 0 && why);
    printf("why: %s\n", why ? why : "(null)");
    if (why) {
        CHECK(strstr(why, "cannot load the CUDA module " STRATA_CUDA_MODULE));
        CHECK(strstr(why, "/" STRATA_CUDA_RELDIR "/" STRATA_CUDA_MODULE));
#ifdef STRATA_TEST_MODULE_PATH
        CHECK(strstr(why, "not the CUDA module of this build"));
#else
        CHECK(strstr(why, STRATA_CUDA_DIR "/" STRATA_CUDA_MODULE));
        CHECK(strstr(why, "cannot open shared object file"));
#endif
    }
    CHECK(strata__devices_parse("gpu:0", d, 8, &n) == STRATA_ECONFIG);
    strata__kdev_t *k = (strata__kdev_t *)&n;
    CHECK(strata__kdev_get(STRATA_DEVICE(STRATA_DEV_GPU, 0), &k) ==
              STRATA_ENOTSUP && k == NULL);
    CHECK(strata__dev_alloc(STRATA_DEVICE(STRATA_DEV_GPU, 0), 64) == NULL);
    return CHECK_DONE();
}
