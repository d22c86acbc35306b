/* strata core -- evaluating checkpoints on the test set: the model and the
 * test set are loaded once, then any number of checkpoints are scored
 * (`strata eval`, the sidecar evaluator; `strata predict` runs the same
 * model on a set without labels). One thread, no strategy: a
 * checkpoint holds the variables. Internal. */
#ifndef STRATA_CORE_EVAL_H
#define STRATA_CORE_EVAL_H

#include "checkpoint/checkpoint.h"
#include "runtime.h"

typedef struct strata__scorer {
    strata__dataset_t test;      /* the set scored: test or validation     */
    const char       *name;      /* of the set, in messages               */
    const char       *who;       /* the log's WHO ("eval")                 */
    strata__model_t  *model;
    float            *flat;      /* the variables, model->count floats     */
    strata__work_t    work;      /* of the rows scored at a time           */
} strata__scorer_t;

/* Load ctx's test set (which: STRATA__SET_TEST) or validation set
 * (STRATA__SET_VAL: [data] names one) and build its model. On failure
 * everything is freed (strata__scorer_close is still safe) and the detail
 * logged. */
int  strata__scorer_open(strata_ctx_t *ctx, unsigned which,
                         strata__scorer_t *s);
/* The same for the samples of `set`, which the scorer takes (*set is
 * zeroed, also on failure): `name` says which in messages, `who` is their
 * log's WHO ("eval"), `rows` are scored at a time. A set without labels
 * (nclasses 0) fits any model's last layer. */
int  strata__scorer_open_set(strata_ctx_t *ctx, const char *who,
                             strata__dataset_t *set, const char *name,
                             int rows, strata__scorer_t *s);
/* The variables and the layers' state of checkpoint `ck` (read from
 * `path`, named in errors) into the model and its work: STRATA_EDATA when
 * the checkpoint does not fit it (its strata.input_dim, a tensor's name,
 * dtype or shape). */
int  strata__scorer_load(strata__scorer_t *s, const strata__ckpt_t *ck,
                         const char *path);
/* Test loss and accuracy of checkpoint `ck` (strata__scorer_load, then
 * every sample of the set). */
int  strata__scorer_run(strata__scorer_t *s, const strata__ckpt_t *ck,
                        const char *path, double *loss, double *acc);
void strata__scorer_close(strata__scorer_t *s);

#endif
