/* [train] precision: see precision.h. */
#include <stdio.h>
#include <string.h>

#include "kernels_cpu.h"
#include "run/precision.h"
#include "runtime.h"

#define KEY "[train] precision = mixed_bfloat16"

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
    for (int r = 0; r < n; r++)
        if (STRATA_DEVICE_TYPE(dev[r]) != STRATA_DEV_CPU) {
            char one[32];
            strata__log(STRATA_LOG_ERROR, "config", "%s: " KEY " runs on CPU "
                        "replicas only (the CUDA kernels have no bf16 ops "
                        "yet), and [train] devices names %s: train on cpu:N "
                        "or with precision = float32", origin,
                        strata__device_str(dev[r], one, sizeof one));
            return STRATA_ECONFIG;
        }
    if (!kc_bf16_usable()) {
        strata__log(STRATA_LOG_ERROR, "config", "%s: " KEY " needs "
                    "AVX512_BF16 (bf16 dot products), which this CPU lacks: "
                    "train with precision = float32", origin);
        return STRATA_ECONFIG;
    }
    return STRATA_OK;
}

void strata__precision_apply(const strata__settings_t *s, strata__model_t *m)
{
    int bf16 = s->train.precision == STRATA__PREC_MIXED_BFLOAT16;
    for (int i = 0; i < m->nlayers; i++) {
        strata__layer_t *l = &m->layers[i];
        l->bf16 = bf16 && (l->kind == &strata__layer_conv2d ||
                           l->kind == &strata__layer_dense);
    }
}

/* The bf16 kernels multiply on AMX tiles (else VDPBF16PS vectors). */
static int on_tiles(void)
{
    return strcmp(kc_bf16_engine(), "AMX-BF16") == 0;
}

const char *strata__precision_name(const strata__settings_t *s)
{
    if (s->train.precision != STRATA__PREC_MIXED_BFLOAT16)
        return "float32";
    return on_tiles() ? "mixed_bfloat16 (AMX-BF16)"
                      : "mixed_bfloat16 (AVX512_BF16)";
}

const char *strata__precision_conv(void)
{
    return on_tiles() ? "direct, bf16 inputs, fp32 sums (AMX-BF16 tiles)"
                      : "direct, bf16 inputs, fp32 sums (AVX512_BF16)";
}
