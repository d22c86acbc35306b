/* GPUs through the CUDA module, loaded on demand. strata_cuda.so (cudart,
 * cuBLAS and kernels/cuda behind kops.h, see cuda_module.h) is dlopen()ed
 * the first time the GPUs are counted or one is used, that is when a gpu:N
 * device is named, or when [train] devices is empty and the machine shows
 * an NVIDIA driver (strata__gpu_present, which only looks at a few paths).
 * A CPU run of a CUDA build thus maps none of CUDA: its peak memory is
 * that of a build without CUDA.
 *
 * The module is found as the plugins are: beside libstrata first,
 * <dir of libstrata.so>/strata/ (the Python package, any embedder), then
 * relative to the binary, <exe>/../STRATA_CUDA_RELDIR/, which is the build
 * tree and a relocated install, then STRATA_CUDA_DIR, the install dir
 * (none in a relocatable build). A build without CUDA (no
 * STRATA_HAVE_CUDA) looks for nothing and refuses GPUs with the reason. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "runtime.h"

#ifdef STRATA_HAVE_CUDA

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "cuda_module.h"

#ifndef STRATA_CUDA_MODULE
#error "STRATA_CUDA_MODULE (strata_cuda.so) comes from core/CMakeLists.txt"
#endif
#ifndef STRATA_CUDA_RELDIR
#error "STRATA_CUDA_RELDIR (lib/strata) comes from core/CMakeLists.txt"
#endif
#ifndef STRATA_CUDA_DIR
#error "STRATA_CUDA_DIR (the install dir of the module) comes from core/CMakeLists.txt"
#endif
/* Any of these says an NVIDIA driver is there (WSL2: /dev/dxg). */
#ifndef STRATA_GPU_NODES
#define STRATA_GPU_NODES "/dev/nvidiactl", "/proc/driver/nvidia/gpus", "/dev/dxg"
#endif

static pthread_once_t          g_once = PTHREAD_ONCE_INIT;
static const strata_cuda_v1_t *g_cuda;     /* NULL: no usable module */
static char                    g_tried[1536]; /* each place: why not */
static char                    g_why[2048];

/* Append "; <what>" (or "<what>" first) to g_tried, truncated at worst. */
static void why_add(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void why_add(const char *fmt, ...)
{
    size_t len = strlen(g_tried);
    if (len > 0 && len + 2 < sizeof g_tried) {
        memcpy(g_tried + len, "; ", 3);
        len += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_tried + len, sizeof g_tried - len, fmt, ap);
    va_end(ap);
}

/* dlopen one candidate and take its table when it is of this build. */
static int try_module(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        why_add("%s", e ? e : path);
        return -1;
    }
    const strata_cuda_v1_t *t = dlsym(h, STRATA_CUDA_SYMBOL);
    if (!t) {
        why_add("%s: no symbol %s", path, STRATA_CUDA_SYMBOL);
    } else if (t->struct_size != sizeof *t ||
               t->kops_size != sizeof(strata__kops_t) || !t->version ||
               strcmp(t->version, STRATA_VERSION_STRING) != 0 || !t->init ||
               !t->gpu_count || !t->kdev_gpu || !t->gpu_arch) {
        if (t->struct_size == sizeof *t && t->version &&
            strcmp(t->version, STRATA_VERSION_STRING) != 0)
            why_add("%s: not the CUDA module of this build (it comes from "
                    "strata %s, this core is %s)", path, t->version,
                    STRATA_VERSION_STRING);
        else
            why_add("%s: not the CUDA module of this build (its table "
                    "differs from this core's)", path);
    } else {
        t->init(strata__vlog);
        g_cuda = t;           /* the handle stays open for the process */
        return 0;
    }
    dlclose(h);
    return -1;
}

/* <dir of the binary>/../STRATA_CUDA_RELDIR/STRATA_CUDA_MODULE. */
static int exe_relative(char *buf, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    for (int up = 0; up < 2; up++) {        /* drop the file, then its dir */
        char *slash = strrchr(exe, '/');
        if (!slash)
            return -1;
        *slash = '\0';
    }
    int w = snprintf(buf, len, "%s/%s/%s", exe, STRATA_CUDA_RELDIR,
                     STRATA_CUDA_MODULE);
    return w > 0 && (size_t)w < len ? 0 : -1;
}

/* <dir of libstrata.so>/strata/STRATA_CUDA_MODULE (dladdr; linked
 * statically, the executable's dir, where it is simply absent). */
static int lib_relative(char *buf, size_t len)
{
    Dl_info info;
    char lib[PATH_MAX];
    if (dladdr((void *)(uintptr_t)&lib_relative, &info) == 0 ||
        !info.dli_fname || !realpath(info.dli_fname, lib))
        return -1;
    *strrchr(lib, '/') = '\0';
    int w = snprintf(buf, len, "%s/strata/%s", lib, STRATA_CUDA_MODULE);
    return w > 0 && (size_t)w < len ? 0 : -1;
}

static void load(void)
{
    static const char installed[] = STRATA_CUDA_DIR "/" STRATA_CUDA_MODULE;
    char rel[PATH_MAX + 64], beside[PATH_MAX + 64] = "";
    if (lib_relative(beside, sizeof beside) == 0 && access(beside, F_OK) == 0
        && try_module(beside) == 0)
        return;
    int have_rel = exe_relative(rel, sizeof rel) == 0;
    if (have_rel && strcmp(rel, beside) != 0 && try_module(rel) == 0)
        return;
    if (sizeof STRATA_CUDA_DIR > 1 &&   /* "": a relocatable build */
        (!have_rel || strcmp(rel, installed) != 0) &&
        try_module(installed) == 0)
        return;
    /* Each place's dlerror() names the file. */
    snprintf(g_why, sizeof g_why, "cannot load the CUDA module %s (%s)",
             STRATA_CUDA_MODULE, g_tried);
}

int strata__gpu_present(void)
{
    static const char *const nodes[] = { STRATA_GPU_NODES };
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++)
        if (access(nodes[i], F_OK) == 0)
            return 1;
    return 0;
}

int strata__gpu_count(int *n, const char **why)
{
    pthread_once(&g_once, load);
    if (!g_cuda) {
        *n = 0;
        *why = g_why;
        return STRATA_ENOTSUP;
    }
    return g_cuda->gpu_count(n, why);
}

int strata__kdev_gpu(int index, strata__kdev_t **out)
{
    pthread_once(&g_once, load);
    if (!g_cuda) {
        *out = NULL;
        strata__log(STRATA_LOG_ERROR, "device", "gpu:%d: %s", index, g_why);
        return STRATA_ENOTSUP;
    }
    return g_cuda->kdev_gpu(index, out);
}

int strata__gpu_arch(int index, int *major, int *minor)
{
    pthread_once(&g_once, load);
    return g_cuda ? g_cuda->gpu_arch(index, major, minor) : STRATA_ENOTSUP;
}

#else /* !STRATA_HAVE_CUDA */

#define NO_CUDA "this build has no CUDA support (configure with -DSTRATA_CUDA=ON)"

int strata__gpu_present(void)
{
    return 0;
}

int strata__gpu_count(int *n, const char **why)
{
    *n = 0;
    *why = NO_CUDA;
    return STRATA_ENOTSUP;
}

int strata__kdev_gpu(int index, strata__kdev_t **out)
{
    *out = NULL;
    strata__log(STRATA_LOG_ERROR, "device", "gpu:%d: %s", index, NO_CUDA);
    return STRATA_ENOTSUP;
}

int strata__gpu_arch(int index, int *major, int *minor)
{
    (void)index, (void)major, (void)minor;
    return STRATA_ENOTSUP;
}

#endif /* STRATA_HAVE_CUDA */
