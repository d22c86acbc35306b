/* embedding vocab=V dim=D [combiner=sum|mean] <- ids: rows of a table
 * `<layer>/embeddings` [V x D] (Keras's Embedding) picked by the job's id
 * input, a [graph] layer reading 'ids' (build.c). A sample's k ids give
 * its k rows side by side (k * D outputs: Keras's Embedding then Flatten),
 * or with a combiner their sum or mean (D outputs: TF's
 * embedding_lookup_sparse); an id of -1 is padding, no row, and a mean
 * divides by the real ids only. The table starts uniform in [-0.05, 0.05]
 * (Keras's default initializer). Its gradient is dense [V x D], or, for a
 * strategy that takes them (STRATA_CAP_SPARSE, core/model/rows.c), the
 * rows of the distinct ids with the table's range of the gradients 0. */
#include <stdio.h>
#include <string.h>

#include "layer.h"
#include "strata/errno.h"

static int emb_parse(strata__layer_t *l, char *const *w, int n, char *why,
                     size_t len)
{
    l->combiner = KOPS_EMB_NONE;
    for (int i = 0; i < n; i++) {
        const char *v;
        if ((v = strata__layer_opt(w[i], "vocab"))) {
            if (strata__layer_int(v, 1, STRATA__EMB_MAX_VOCAB, &l->vocab)) {
                snprintf(why, len, "vocab '%s': expected an integer in "
                         "[1, %d]", v, STRATA__EMB_MAX_VOCAB);
                return -1;
            }
        } else if ((v = strata__layer_opt(w[i], "dim"))) {
            if (strata__layer_int(v, 1, 65536, &l->units)) {
                snprintf(why, len, "dim '%s': expected an integer in "
                         "[1, 65536]", v);
                return -1;
            }
        } else if ((v = strata__layer_opt(w[i], "combiner"))) {
            if (!strcmp(v, "sum")) {
                l->combiner = KOPS_EMB_SUM;
            } else if (!strcmp(v, "mean")) {
                l->combiner = KOPS_EMB_MEAN;
            } else {
                snprintf(why, len, "combiner '%s': expected sum or mean", v);
                return -1;
            }
        } else {
            snprintf(why, len, "unknown word '%s'", w[i]);
            return -1;
        }
    }
    if (!l->vocab || !l->units) {
        snprintf(why, len, "needs vocab= and dim=");
        return -1;
    }
    return 0;
}

static int emb_infer(strata__layer_t *l, char *why, size_t len)
{
    int k = l->in.c;
    if (l->combiner == KOPS_EMB_NONE && (int64_t)k * l->units > (1 << 28)) {
        snprintf(why, len, "%d ids of %d values side by side: over 2^28 "
                 "outputs per sample (a combiner gives %d)", k, l->units,
                 l->units);
        return -1;
    }
    l->out = (strata__shape_t){ 1, 1,
        l->combiner == KOPS_EMB_NONE ? k * l->units : l->units, 0 };
    return 0;
}

static int emb_kernel_shape(const strata__layer_t *l, int64_t *dims,
                            size_t *bias, double *fan_in, double *fan_out)
{
    dims[0] = l->vocab;
    dims[1] = l->units;
    *bias = 0;
    *fan_in = (double)l->vocab;
    *fan_out = (double)l->units;
    return 2;
}

/* The sort of the ids that a GPU's backward does (kops_list.h). */
static size_t emb_aux_bytes(const strata__layer_t *l, int rows)
{
    return KOPS_EMB_WORK((size_t)rows * (size_t)l->in.c) * sizeof(int32_t);
}

static int emb_forward(const strata__layer_t *l, const strata__pass_t *p)
{
    return p->k->ops->emb_fwd(p->k, p->rows, l->in.c, l->units, l->vocab,
                              l->combiner, p->ids, p->W, p->y);
}

static int emb_backward(const strata__layer_t *l, const strata__pass_t *p)
{
    if (p->row_vals) {
        /* The table's range is 0 for the strategy: cleared here when it
         * wrote the combined gradient there last step (mirrored), left
         * alone when it never writes it (ps: the range then takes no
         * memory, CPU memory being committed where written). */
        int rc = p->row_dW_zero ? 0
                 : p->k->ops->fill_const(p->k, (size_t)l->vocab *
                                                   (size_t)l->units,
                                         p->dW, 0.0f);
        return rc != 0 ? rc
             : p->k->ops->emb_sparse(p->k, p->rows, l->in.c, l->units,
                                     l->vocab, l->combiner, p->ids, p->dy,
                                     p->row_uniq, p->row_vals, p->row_n,
                                     p->aux);
    }
    return p->k->ops->emb_bwd(p->k, p->rows, l->in.c, l->units, l->vocab,
                              l->combiner, p->ids, p->dy, p->dW, p->aux);
}

const strata__layer_kind_t strata__layer_embedding = {
    .name = "embedding",
    .usage = "embedding vocab=V dim=D [combiner=sum|mean] <- ids",
    .nvars = 1, .var_names = { "embeddings", NULL }, .init_uniform = 0.05,
    .reads_ids = 1,
    .parse = emb_parse, .infer = emb_infer,
    .kernel_shape = emb_kernel_shape, .aux_bytes = emb_aux_bytes,
    .forward = emb_forward, .backward = emb_backward,
};
