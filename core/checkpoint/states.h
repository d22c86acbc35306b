/* strata core -- the model's state tensors (batchnorm's moving mean and
 * variance) in checkpoints: written beside the variables under their names
 * ("bn1/moving_mean"), read back by resume, eval and init_from. Internal. */
#ifndef STRATA_CORE_CKPT_STATES_H
#define STRATA_CORE_CKPT_STATES_H

#include "checkpoint/checkpoint.h"
#include "model/model.h"

/* t[0 .. m->nstates): the state tensors of `state` (host, state_count). */
void strata__ckpt_state_tensors(const strata__model_t *m, const float *state,
                                strata__tensor_t *t);
/* Every state tensor of m from ck into state (host, m->state_count),
 * with strata__ckpt_take_f32's one error line ("who: what: ...") when one
 * is missing or does not fit. */
int  strata__ckpt_take_states(const strata__ckpt_t *ck, const char *who,
                              const char *what, const strata__model_t *m,
                              float *state);

#endif
