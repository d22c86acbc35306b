/* [train] precision: see precision.h. */
#include <stdio.h>
#include <string.h>

#include "device/kops.h"
#include "kernels_cpu.h"
#include "run/precision.h"
#include "runtime.h"

#define KEY "[train] precision = mixed_bfloat16"

/* The replicas' device kind: STRATA__BF16_GPU when [train] devices names
 * GPUs, else STRATA__BF16_CPU (strata__devices_parse refuses a list that
 * mixes them). */
static int replica_kind(const strata__settings_t *s)
{
    int32_t dev[STRATA_MAX_REPLICAS];
    int n = 0;
    if (strata__devices_parse(s->train.devices, dev, STRATA_MAX_REPLICAS,
                              &n) != STRATA_OK || n == 0)
        return STRATA__BF16_CPU;
    return STRATA_DEVICE_TYPE(dev[0]) == STRATA_DEV_GPU ? STRATA__BF16_GPU
                                                        : STRATA__BF16_CPU;
}

/* GPUs: compute capability 8.0 or newer (bf16 tensor cores). One that
 * cannot be asked (no module, no such GPU) is left to the run, which names
 * what is missing when it makes the device. */
static int check_gpus(const char *origin, const int32_t *dev, int n)
{
    for (int r = 0; r < n; r++) {
        int index = STRATA_DEVICE_INDEX(dev[r]), major = 0, minor = 0;
        if (strata__gpu_arch(index, &major, &minor) != STRATA_OK ||
            major >= 8)
            continue;
        strata__log(STRATA_LOG_ERROR, "config", "%s: " KEY " needs GPUs of "
                    "compute capability 8.0 or newer (bf16 tensor cores), "
                    "and gpu:%d has %d.%d: train with precision = float32",
                    origin, index, major, minor);
        return STRATA_ECONFIG;
    }
    return STRATA_OK;
}

int strata__precision_check(const strata__cfg_t *c,
                            const strata__settings_t *s)
{
    if (s->train.precision != STRATA__PREC_MIXED_BFLOAT16)
        return STRATA_OK;
    const char *origin = strata__cfg_origin(c, "train", "precision");
    if (!origin)
        origin = "config";
    int32_t dev[STRATA_MAX_REPLICAS];
    int n = 0;
    int rc = strata__devices_parse(s->train.devices, dev, STRATA_MAX_REPLICAS,
                                   &n);
    if (rc != STRATA_OK)
        return rc;       /* the run says what is wrong with the devices */
    /* (the devices are of one kind: strata__devices_parse refuses a mix) */
    if (n > 0 && STRATA_DEVICE_TYPE(dev[0]) == STRATA_DEV_GPU)
        return check_gpus(origin, dev, n);
    if (!kc_bf16_usable()) {
        strata__log(STRATA_LOG_ERROR, "config", "%s: " KEY " needs "
                    "AVX512_BF16 (bf16 dot products), which this CPU lacks: "
                    "train with precision = float32", origin);
        return STRATA_ECONFIG;
    }
    return STRATA_OK;
}

/* A conv2d that reads one channel (the first layer on grey images)
 * stays float32: its bf16 pairs run along the channels, so each would be
 * half zeros -- no product saved, only rounding added (the seeds' CNN's
 * first layer, batch 128 on a Zen 5: 5.1 ms a step in bf16, 1.9 in
 * float32). */
static int keeps_float32(const strata__layer_t *l)
{
    return l->kind == &strata__layer_conv2d && l->in.c == 1;
}

void strata__precision_apply(const strata__settings_t *s, strata__model_t *m)
{
    int bf16 = s->train.precision == STRATA__PREC_MIXED_BFLOAT16
                   ? replica_kind(s) : STRATA__BF16_OFF;
    for (int i = 0; i < m->nlayers; i++) {
        strata__layer_t *l = &m->layers[i];
        l->bf16 = l->kind == &strata__layer_conv2d ||
                  l->kind == &strata__layer_dense ? bf16 : STRATA__BF16_OFF;
        if (keeps_float32(l))
            l->bf16 = STRATA__BF16_OFF;
    }
}

const char *strata__precision_kept(const strata__model_t *m, char *buf,
                                   size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < m->nlayers && at < len; i++) {
        const strata__layer_t *l = &m->layers[i];
        if (!keeps_float32(l))
            continue;
        int w = snprintf(buf + at, len - at, "%s%s", at ? ", " : "",
                         l->name);
        at += w > 0 ? (size_t)w : 0;
    }
    return buf;
}

/* The CPU's bf16 kernels multiply on AMX tiles (else VDPBF16PS vectors). */
static int on_tiles(void)
{
    return strcmp(kc_bf16_engine(), "AMX-BF16") == 0;
}

const char *strata__precision_name(const strata__settings_t *s)
{
    if (s->train.precision != STRATA__PREC_MIXED_BFLOAT16)
        return "float32";
    if (replica_kind(s) == STRATA__BF16_GPU)
        return "mixed_bfloat16 (cuBLAS bf16 GEMMs, fp32 sums)";
    return on_tiles() ? "mixed_bfloat16 (AMX-BF16)"
                      : "mixed_bfloat16 (AVX512_BF16)";
}

const char *strata__precision_conv(void)
{
    return on_tiles() ? "direct, bf16 inputs, fp32 sums (AMX-BF16 tiles)"
                      : "direct, bf16 inputs, fp32 sums (AVX512_BF16)";
}
