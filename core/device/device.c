/* Devices: parsing "cpu:0, gpu:1" and memory on them. CPU memory is
 * 64-byte aligned and zeroed, committed where written (hostmem.c); GPU
 * memory (a CUDA build) comes from the GPU's kernel table (the CUDA
 * module, cuda_load.c) and is zeroed too. A replica set is all CPUs or
 * all GPUs. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime.h"

const char *strata__device_str(int32_t dev, char *buf, size_t len)
{
    snprintf(buf, len, "%s:%d",
             STRATA_DEVICE_TYPE(dev) == STRATA_DEV_GPU ? "gpu" : "cpu",
             (int)STRATA_DEVICE_INDEX(dev));
    return buf;
}

static int parse_one(const char *s, size_t len, int32_t *dev)
{
    char word[32];
    if (len == 0 || len >= sizeof word)
        return STRATA_ECONFIG;
    memcpy(word, s, len);
    word[len] = '\0';
    int type;
    const char *num;
    if (strncmp(word, "cpu:", 4) == 0)
        type = STRATA_DEV_CPU, num = word + 4;
    else if (strncmp(word, "gpu:", 4) == 0)
        type = STRATA_DEV_GPU, num = word + 4;
    else
        return STRATA_ECONFIG;
    char *end;
    long idx = strtol(num, &end, 10);
    if (!*num || *end || idx < 0 || idx > 4095)
        return STRATA_ECONFIG;
    *dev = STRATA_DEVICE(type, idx);
    return STRATA_OK;
}

/* gpu:N needs a CUDA build and a GPU N on this machine. */
static int check_gpu(int32_t dev)
{
    char word[32];
    int len = (int)strlen(strata__device_str(dev, word, sizeof word));
    int n = 0;
    const char *why;
    int rc = strata__gpu_count(&n, &why);
    int idx = (int)STRATA_DEVICE_INDEX(dev);
    if (rc != STRATA_OK)
        strata__log(STRATA_LOG_ERROR, "devices", "[train] devices: '%.*s': %s",
                    len, word, why);
    else if (n == 0) { /* the driver's and runtime's answer: debug */
        strata__log(STRATA_LOG_DEBUG, "devices", "CUDA device count: %s", why);
        strata__log(STRATA_LOG_ERROR, "devices", "[train] devices: '%.*s': "
                    "no CUDA device found on this host (a GPU and the NVIDIA "
                    "driver are needed; [log] level = debug says what CUDA "
                    "answered)", len, word);
    }
    else if (idx >= n) {
        char last[24] = "";
        if (n > 1)
            snprintf(last, sizeof last, " to gpu:%d", n - 1);
        strata__log(STRATA_LOG_ERROR, "devices", "[train] devices: '%.*s': "
                    "no such GPU; this machine has %d (gpu:0%s)", len, word,
                    n, last);
    } else
        return STRATA_OK;
    return STRATA_ECONFIG;
}

int strata__devices_parse(const char *spec, int32_t *out, int max, int *n)
{
    *n = 0;
    const char *p = spec ? spec : "";
    while (isspace((unsigned char)*p))
        p++;
    if (!*p) {
        /* Every GPU when this build and machine have any, else one CPU
         * replica per core. Without an NVIDIA driver the CUDA module is
         * not even loaded. */
        int gpus = 0;
        const char *why;
        if (strata__gpu_present() &&
            strata__gpu_count(&gpus, &why) != STRATA_OK)
            strata__log(STRATA_LOG_WARN, "devices", "[train] devices is "
                        "empty and this machine has an NVIDIA driver, but "
                        "%s: training on CPUs", why);
        if (gpus > 0) {
            for (int i = 0; i < gpus && i < max; i++)
                out[(*n)++] = STRATA_DEVICE(STRATA_DEV_GPU, i);
            return STRATA_OK;
        }
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        if (cores < 1)
            cores = 1;
        if (cores > max)
            cores = max;
        for (long i = 0; i < cores; i++)
            out[(*n)++] = STRATA_DEVICE(STRATA_DEV_CPU, i);
        return STRATA_OK;
    }
    while (*p) {
        while (isspace((unsigned char)*p) || *p == ',')
            p++;
        if (!*p)
            break;
        const char *e = p;
        while (*e && *e != ',' && !isspace((unsigned char)*e))
            e++;
        int32_t dev;
        if (parse_one(p, (size_t)(e - p), &dev) != STRATA_OK) {
            strata__log(STRATA_LOG_ERROR, "devices",
                        "[train] devices: '%.*s': expected cpu:N or gpu:N",
                        (int)(e - p), p);
            return STRATA_ECONFIG;
        }
        for (int i = 0; i < *n; i++)
            if (out[i] == dev) {
                strata__log(STRATA_LOG_ERROR, "devices",
                            "[train] devices: '%.*s' is listed twice",
                            (int)(e - p), p);
                return STRATA_ECONFIG;
            }
        if (*n == max) {
            strata__log(STRATA_LOG_ERROR, "devices",
                        "[train] devices: more than %d devices", max);
            return STRATA_ECONFIG;
        }
        out[(*n)++] = dev;
        p = e;
    }
    for (int i = 1; i < *n; i++)
        if (STRATA_DEVICE_TYPE(out[i]) != STRATA_DEVICE_TYPE(out[0])) {
            strata__log(STRATA_LOG_ERROR, "devices",
                        "[train] devices = %s: mixes CPU and GPU replicas; "
                        "list CPUs only or GPUs only", spec);
            return STRATA_ECONFIG;
        }
    for (int i = 0; i < *n; i++)
        if (STRATA_DEVICE_TYPE(out[i]) == STRATA_DEV_GPU &&
            check_gpu(out[i]) != STRATA_OK)
            return STRATA_ECONFIG;
    return STRATA_OK;
}

/* The kernel table of a non-CPU device (logs when there is none). */
static strata__kdev_t *gpu(int32_t device)
{
    strata__kdev_t *k;
    return strata__kdev_get(device, &k) == STRATA_OK ? k : NULL;
}

static int is_cpu(int32_t device)
{
    return STRATA_DEVICE_TYPE(device) == STRATA_DEV_CPU;
}

void *strata__dev_alloc(int32_t device, size_t bytes)
{
    if (!is_cpu(device)) {
        strata__kdev_t *k = gpu(device);
        return k ? k->ops->alloc(k, bytes) : NULL;
    }
    return strata__host_alloc(bytes);
}

void strata__dev_free(int32_t device, void *p)
{
    if (p && !is_cpu(device)) {
        strata__kdev_t *k = gpu(device);
        if (k)
            k->ops->free(k, p);
        return;
    }
    strata__host_free(p);
}

/* Between two GPUs: through host memory, a slice at a time (setup only). */
static int copy_gpus(strata__kdev_t *dk, void *dst, strata__kdev_t *sk,
                     const void *src, size_t bytes)
{
    enum { SLICE = 4 << 20 };
    size_t cap = bytes < SLICE ? bytes : SLICE;
    char *bounce = malloc(cap ? cap : 1);
    if (!bounce)
        return STRATA_ENOMEM;
    int rc = STRATA_OK;
    for (size_t at = 0; rc == STRATA_OK && at < bytes; at += cap) {
        size_t len = bytes - at < cap ? bytes - at : cap;
        rc = sk->ops->copy(sk, STRATA__D2H, bounce, (const char *)src + at, len);
        if (rc == STRATA_OK)
            rc = sk->ops->sync(sk);
        if (rc == STRATA_OK)
            rc = dk->ops->copy(dk, STRATA__H2D, (char *)dst + at, bounce, len);
        if (rc == STRATA_OK)
            rc = dk->ops->sync(dk);
    }
    free(bounce);
    return rc;
}

/* Done when it returns, on any pair of devices: plugins (and run.c) read or
 * reuse the buffers at once. A copy on a GPU is ordered after the work
 * already enqueued on that GPU's stream (the optimizer's last step). */
int strata__dev_copy(int32_t dst_dev, void *dst, int32_t src_dev,
                     const void *src, size_t bytes)
{
    if (is_cpu(dst_dev) && is_cpu(src_dev)) {
        if (bytes)
            memmove(dst, src, bytes);
        return STRATA_OK;
    }
    if (bytes == 0)
        return STRATA_OK;
    strata__kdev_t *dk = is_cpu(dst_dev) ? NULL : gpu(dst_dev);
    strata__kdev_t *sk = is_cpu(src_dev) ? NULL : gpu(src_dev);
    if ((!is_cpu(dst_dev) && !dk) || (!is_cpu(src_dev) && !sk))
        return STRATA_EDEVICE;
    if (dk && sk && dk != sk)
        return copy_gpus(dk, dst, sk, src, bytes);
    strata__kdev_t *k = dk ? dk : sk;
    int dir = !dk ? STRATA__D2H : !sk ? STRATA__H2D : STRATA__D2D;
    int rc = k->ops->copy(k, dir, dst, src, bytes);
    return rc == STRATA_OK ? k->ops->sync(k) : rc;
}

int strata__dev_equal(int32_t dev_a, const void *a, int32_t dev_b,
                      const void *b, size_t bytes)
{
    if (is_cpu(dev_a) && is_cpu(dev_b))
        return memcmp(a, b, bytes) == 0;
    int32_t cpu = STRATA_DEVICE(STRATA_DEV_CPU, 0);
    char *ha = malloc(bytes ? bytes : 1), *hb = malloc(bytes ? bytes : 1);
    int rc = ha && hb ? STRATA_OK : STRATA_ENOMEM;
    if (rc == STRATA_OK)
        rc = strata__dev_copy(cpu, ha, dev_a, a, bytes);
    if (rc == STRATA_OK)
        rc = strata__dev_copy(cpu, hb, dev_b, b, bytes);
    if (rc == STRATA_OK)
        rc = memcmp(ha, hb, bytes) == 0;
    free(ha);
    free(hb);
    return rc;
}
