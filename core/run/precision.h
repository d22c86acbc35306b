/* strata core -- [train] precision: the arithmetic of conv2d and dense.
 * Internal.
 *
 * float32 (the default) or mixed_bfloat16 (Keras's policy): conv2d and
 * dense round their inputs to bf16 and sum the products in fp32 through
 * the device table's *_bf16 ops (kernels/cpu: AMX tiles or VDPBF16PS;
 * kernels/cuda: cuBLAS GemmEx on bf16 copies).
 * Only the layers' arithmetic changes: the variables (fp32 master
 * weights), the gradients the strategy reduces, the optimizer's slots and
 * the checkpoints are fp32 as before, so every strategy, transport and
 * checkpoint is unchanged.
 * Replicas stay bitwise equal: they run the same kernels in the same order
 * (each output element one fixed chain). */
#ifndef STRATA_CORE_PRECISION_H
#define STRATA_CORE_PRECISION_H

#include "internal.h"
#include "model/model.h"

/* Whether this process can run `s`'s precision on its replica devices
 * ([train] devices): mixed_bfloat16 needs replicas of one kind, CPUs with
 * AVX512_BF16 or GPUs of compute capability 8.0 or newer. Else one line
 * naming the key, where it was set and what is missing, and
 * STRATA_ECONFIG. Before anything is written. */
int strata__precision_check(const strata__cfg_t *c,
                            const strata__settings_t *s);

/* Marks the model's conv2d and dense layers for the precision and the
 * replicas' device kind (before any work is allocated: their workspace
 * depends on both); a conv2d reading one channel stays float32. */
void strata__precision_apply(const strata__settings_t *s,
                             strata__model_t *m);

/* The layers that mixed_bfloat16 keeps in float32 (conv2d reading one
 * channel: strata__precision_apply), their names comma-separated in buf
 * ("" when none; cut at len). Returns buf. */
const char *strata__precision_kept(const strata__model_t *m, char *buf,
                                   size_t len);

/* The banner's words: "float32", "mixed_bfloat16 (AMX-BF16)" (tiles),
 * "mixed_bfloat16 (AVX512_BF16)" (vectors), "mixed_bfloat16 (cuBLAS bf16
 * GEMMs, fp32 sums)" (GPUs); and its conv line in mixed_bfloat16 on CPUs. */
const char *strata__precision_name(const strata__settings_t *s);
const char *strata__precision_conv(void);

#endif /* STRATA_CORE_PRECISION_H */
