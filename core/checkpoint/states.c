/* The model's state tensors in checkpoints (states.h). */
#include "states.h"

void strata__ckpt_state_tensors(const strata__model_t *m, const float *state,
                                strata__tensor_t *t)
{
    for (int i = 0; i < m->nstates; i++) {
        const strata_var_t *v = &m->states[i];
        t[i] = (strata__tensor_t){ .name = v->name, .dtype = "F32",
                                   .ndim = (int)v->ndim,
                                   .shape = { v->shape[0] },
                                   .data = state + v->offset,
                                   .nbytes = v->count * sizeof(float) };
    }
}

int strata__ckpt_take_states(const strata__ckpt_t *ck, const char *who,
                             const char *what, const strata__model_t *m,
                             float *state)
{
    int rc = STRATA_OK;
    for (int i = 0; rc == STRATA_OK && i < m->nstates; i++) {
        const strata_var_t *v = &m->states[i];
        rc = strata__ckpt_take_f32(ck, who, what, v->name, v->shape,
                                   (int)v->ndim, state + v->offset);
    }
    return rc;
}
