/* Embedding gradients as rows (plugin ABI 2.9): for a strategy that takes
 * them (STRATA_CAP_SPARSE), each embedding table's backward gives the
 * distinct ids of the replica's slice and their gradient rows (the
 * kernel emb_sparse: the dense gradient's rows bit for bit) instead of
 * scattering them into the dense [V x D] gradient, whose range it leaves
 * 0. The step's strata_op_t then points at work->grad_rows. CPU replicas
 * only: the rows are host memory, where a strategy reads them. */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "strata/errno.h"

struct strata__row_buf {
    int32_t *uniq;  /* rows * ids_k distinct ids (the kernel's output)     */
    int64_t *ids;   /* the same, as the ABI's int64                        */
    float   *vals;  /* rows * ids_k * dim                                  */
    int32_t  n;
};

static int gives_rows(const strata__layer_t *l)
{
    return l->kind->reads_ids && l->kind->nvars == 1;
}

int strata__work_rows_alloc(const strata__model_t *m, strata__work_t *w)
{
    int n = 0;
    for (int i = 0; i < m->nlayers; i++)
        n += gives_rows(&m->layers[i]);
    if (!n || STRATA_DEVICE_TYPE(w->device) != STRATA_DEV_CPU)
        return STRATA_OK; /* nothing to give, or not in host memory */
    w->grad_rows = calloc((size_t)n, sizeof *w->grad_rows);
    w->row_buf = calloc((size_t)n, sizeof *w->row_buf);
    w->ntables = n;
    int ok = w->grad_rows && w->row_buf;
    size_t r = (size_t)(w->rows > 0 ? w->rows : 1);
    for (int i = 0, j = 0; ok && i < m->nlayers; i++) {
        const strata__layer_t *l = &m->layers[i];
        if (!gives_rows(l))
            continue;
        const strata_var_t *v = &m->vars[l->var0];
        size_t most = r * (size_t)l->in.c, dim = (size_t)l->units;
        struct strata__row_buf *b = &w->row_buf[j];
        b->uniq = malloc(most * sizeof *b->uniq);
        b->ids = malloc(most * sizeof *b->ids);
        b->vals = malloc(most * dim * sizeof *b->vals);
        ok = b->uniq && b->ids && b->vals;
        w->grad_rows[j] = (strata_sparse_t){
            .var = v->index, .offset = v->offset, .count = v->count,
            .row_len = dim, .rows = b->ids, .values = b->vals };
        w->row_slot[i] = ++j;
    }
    if (!ok) {
        strata__work_rows_free(w);
        return STRATA_ENOMEM;
    }
    return STRATA_OK;
}

void strata__work_rows_free(strata__work_t *w)
{
    for (int j = 0; w->row_buf && j < w->ntables; j++) {
        free(w->row_buf[j].uniq);
        free(w->row_buf[j].ids);
        free(w->row_buf[j].vals);
    }
    free(w->row_buf);
    free(w->grad_rows);
    w->row_buf = NULL;
    w->grad_rows = NULL;
    w->ntables = 0;
    memset(w->row_slot, 0, sizeof w->row_slot);
}

void strata__work_rows_reset(strata__work_t *w)
{
    for (int j = 0; w->grad_rows && j < w->ntables; j++) {
        w->grad_rows[j].nrows = 0;
        w->row_buf[j].n = 0;
    }
}

void strata__work_rows_pass(strata__work_t *w, int i, strata__pass_t *p)
{
    if (!w->grad_rows || !w->row_slot[i])
        return;
    struct strata__row_buf *b = &w->row_buf[w->row_slot[i] - 1];
    p->row_uniq = b->uniq;
    p->row_vals = b->vals;
    p->row_n = &b->n;
    p->row_dW_zero = w->rows_apart;
}

void strata__work_rows_done(strata__work_t *w, int i)
{
    if (!w->grad_rows || !w->row_slot[i])
        return;
    int j = w->row_slot[i] - 1;
    struct strata__row_buf *b = &w->row_buf[j];
    for (int32_t q = 0; q < b->n; q++)
        b->ids[q] = b->uniq[q];
    w->grad_rows[j].nrows = (size_t)b->n;
}
