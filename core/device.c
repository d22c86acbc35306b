/* Devices: parsing "cpu:0, gpu:1" and memory on them. CPU memory is
 * 64-byte aligned and zeroed. */
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

int strata__devices_parse(const char *spec, int32_t *out, int max, int *n)
{
    *n = 0;
    const char *p = spec ? spec : "";
    while (isspace((unsigned char)*p))
        p++;
    if (!*p) {
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
        if (STRATA_DEVICE_TYPE(dev) == STRATA_DEV_GPU) {
            strata__log(STRATA_LOG_ERROR, "devices",
                        "[train] devices: '%.*s': this build has no CUDA "
                        "support (configure with -DSTRATA_CUDA=ON)",
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
    return STRATA_OK;
}

void *strata__dev_alloc(int32_t device, size_t bytes)
{
    if (STRATA_DEVICE_TYPE(device) != STRATA_DEV_CPU)
        return NULL;
    size_t n = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, n ? n : 64);
    if (p)
        memset(p, 0, n ? n : 64);
    return p;
}

void strata__dev_free(int32_t device, void *p)
{
    (void)device;
    free(p);
}

int strata__dev_copy(int32_t dst_dev, void *dst, int32_t src_dev,
                     const void *src, size_t bytes)
{
    if (STRATA_DEVICE_TYPE(dst_dev) != STRATA_DEV_CPU ||
        STRATA_DEVICE_TYPE(src_dev) != STRATA_DEV_CPU)
        return STRATA_ENOTSUP;
    if (bytes)
        memmove(dst, src, bytes);
    return STRATA_OK;
}
