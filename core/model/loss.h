/* strata core -- [model] loss and metric (loss_cfg.c). Internal. */
#ifndef STRATA_CORE_MODEL_LOSS_H
#define STRATA_CORE_MODEL_LOSS_H

#include "internal.h"
#include "device/kops.h"

/* Keras's names: "mse"; "accuracy", "mae", "sparse_top_k_categorical_
 * accuracy" (a resolved STRATA__METRIC_*). */
const char *strata__loss_name(int loss);
const char *strata__metric_name(int metric);
/* Resolves metric = auto by the loss, then refuses a metric that does not
 * go with the loss (one line naming the key's file:line): STRATA_ECONFIG. */
int strata__loss_check(const strata__cfg_t *c, strata__model_cfg_t *m);
/* How the loss's labels are read: STRATA__LABELS_* of data/data.h. */
int strata__loss_labels(int loss);
/* The kernel table's description of the loss and metric. */
strata__lossfn_t strata__lossfn(const strata__model_cfg_t *m);

#endif
