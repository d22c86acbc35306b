/* [data] augment_flip and augment_crop_padding checked against the run
 * (data.h, strata__augment_init): what cannot be augmented is refused
 * before anything trains. */
#include <stdio.h>
#include <string.h>

#include "data.h"

int strata__augment_init(strata__augment_t *a, const strata__cfg_t *c,
                         const strata__data_cfg_t *dc, uint64_t seed,
                         const int *epoch, const strata__dataset_t *train)
{
    *a = (strata__augment_t){ .flip = dc->augment_flip, .seed = seed,
                              .epoch = epoch };
    if (!dc->augment_flip && dc->augment_crop_padding <= 0)
        return STRATA_OK;
    const char *key = dc->augment_crop_padding > 0 ? "augment_crop_padding"
                                                   : "augment_flip";
    const char *o = strata__cfg_origin(c, "data", key);
    char what[64];
    if (dc->augment_crop_padding > 0)
        snprintf(what, sizeof what, "augment_crop_padding = %lld",
                 (long long)dc->augment_crop_padding);
    else
        snprintf(what, sizeof what, "augment_flip = true");
    if (!train->channels) {
        strata__log(STRATA_LOG_ERROR, "data", "%s: [data] %s needs images "
                    "(n, h, w) or (n, h, w, c); the training samples are flat "
                    "(n, %zu): save them with their image shape",
                    o ? o : "config", what, train->dim);
        return STRATA_ECONFIG;
    }
    if (dc->augment_crop_padding >= train->rows ||
        dc->augment_crop_padding >= train->cols) {
        strata__log(STRATA_LOG_ERROR, "data", "%s: [data] %s: the padding "
                    "must be less than the images' height and width (%u x "
                    "%u)", o ? o : "config", what, train->rows, train->cols);
        return STRATA_ECONFIG;
    }
    a->pad = (uint32_t)dc->augment_crop_padding;
    return STRATA_OK;
}
