/* strata core -- evaluating checkpoints on the test set: the model and the
 * test set are loaded once, then any number of checkpoints are scored
 * (`strata eval`, the sidecar evaluator). One thread, no strategy: a
 * checkpoint holds the variables. Internal. */
#ifndef STRATA_CORE_EVAL_H
#define STRATA_CORE_EVAL_H

#include "checkpoint/checkpoint.h"
#include "runtime.h"

typedef struct strata__scorer {
    strata__dataset_t test;      /* the set scored: test or validation     */
    strata__model_t  *model;
    float            *flat;      /* the variables, model->count floats     */
    strata__work_t    work;
} strata__scorer_t;

/* Load ctx's test set (which: STRATA__SET_TEST) or validation set
 * (STRATA__SET_VAL: [data] names one) and build its model. On failure
 * everything is freed (strata__scorer_close is still safe) and the detail
 * logged. */
int  strata__scorer_open(strata_ctx_t *ctx, unsigned which,
                         strata__scorer_t *s);
/* Test loss and accuracy of checkpoint `ck` (read from `path`, named in
 * errors): STRATA_EDATA when it does not fit the configured model. */
int  strata__scorer_run(strata__scorer_t *s, const strata__ckpt_t *ck,
                        const char *path, double *loss, double *acc);
void strata__scorer_close(strata__scorer_t *s);

#endif
