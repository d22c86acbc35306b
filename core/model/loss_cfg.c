/* [model] loss and metric: which pairs make sense, the metric's Keras name,
 * and the kernel table's description of them (strata__lossfn_t). */
#include <stdio.h>

#include "model/loss.h"
#include "data/data.h"

static const char *const k_loss[] = {
    "sparse_categorical_crossentropy", "categorical_crossentropy",
    "binary_crossentropy", "mse", "mae",
};

const char *strata__loss_name(int loss)
{
    return loss >= 0 && loss <= KOPS_LOSS_MAE ? k_loss[loss] : "?";
}

const char *strata__metric_name(int metric)
{
    static const char *const names[] = {
        "accuracy", "accuracy", "sparse_top_k_categorical_accuracy",
        "top_k_categorical_accuracy", "mae", "mse", "auc",
    };
    return metric >= 0 && metric <= STRATA__METRIC_AUC ? names[metric] : "?";
}

int strata__loss_check(const strata__cfg_t *c, strata__model_cfg_t *m)
{
    int ce = m->loss != KOPS_LOSS_MSE && m->loss != KOPS_LOSS_MAE;
    if (m->metric == STRATA__METRIC_AUTO)
        m->metric = ce ? STRATA__METRIC_ACCURACY : STRATA__METRIC_MAE;
    /* the top-k accuracy of each cross-entropy over classes: its own name */
    int want_topk = m->loss == STRATA__LOSS_SPARSE ? STRATA__METRIC_SPARSE_TOPK
                                                   : STRATA__METRIC_TOPK;
    const char *why = NULL;
    switch (m->metric) {
    case STRATA__METRIC_ACCURACY:
        why = ce ? NULL : "accuracy is a metric of classes; a regression "
                          "loss takes mae or mse";
        break;
    case STRATA__METRIC_SPARSE_TOPK:
    case STRATA__METRIC_TOPK:
        why = m->loss == KOPS_LOSS_BINARY || !ce
                  ? "a top-k accuracy needs sparse_ or categorical_"
                    "crossentropy (classes that exclude each other)"
              : m->metric != want_topk
                  ? (want_topk == STRATA__METRIC_TOPK
                         ? "categorical_crossentropy's is "
                           "top_k_categorical_accuracy"
                         : "sparse_categorical_crossentropy's is "
                           "sparse_top_k_categorical_accuracy")
                  : NULL;
        break;
    case STRATA__METRIC_AUC:
        why = m->loss == KOPS_LOSS_BINARY ? NULL
              : "auc is binary_crossentropy's (the ROC of per-unit "
                "probabilities)";
        break;
    default:
        why = ce ? "mae and mse are metrics of the regression losses; a "
                   "cross-entropy takes accuracy or a top-k accuracy"
                 : NULL;
        break;
    }
    if (!why)
        return STRATA_OK;
    const char *o = strata__cfg_origin(c, "model", "metric");
    strata__log(STRATA_LOG_ERROR, "config", "%s: [model] metric = %s does not "
                "go with loss = %s: %s", o ? o : "default",
                strata__metric_name(m->metric), strata__loss_name(m->loss),
                why);
    return STRATA_ECONFIG;
}

int strata__loss_labels(int loss)
{
    return loss == STRATA__LOSS_SPARSE ? STRATA__LABELS_IDS
           : loss == KOPS_LOSS_MSE || loss == KOPS_LOSS_MAE
               ? STRATA__LABELS_VALUES
               : STRATA__LABELS_PROBS;
}

strata__lossfn_t strata__lossfn(const strata__model_cfg_t *m)
{
    strata__lossfn_t f = { .kind = m->loss, .metric = KOPS_METRIC_ACCURACY };
    if (m->metric == STRATA__METRIC_MAE)
        f.metric = KOPS_METRIC_MAE;
    else if (m->metric == STRATA__METRIC_MSE)
        f.metric = KOPS_METRIC_MSE;
    else if (m->metric == STRATA__METRIC_AUC)
        f.metric = KOPS_METRIC_AUC;
    else if (m->metric == STRATA__METRIC_SPARSE_TOPK ||
             m->metric == STRATA__METRIC_TOPK)
        f.top_k = m->top_k;
    return f;
}
