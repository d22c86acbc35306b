/* host batch_rows (plugin ABI 2.11): the rows of each embedding table that
 * this process's replicas read in one batch, for a strategy that moves a
 * table's rows before the core loads the batch (ps's workers pull only
 * those). The same samples train_step loads: the epoch's order, the
 * batch's first sample, each replica's slice; every embedding layer reads
 * every id column of its samples (core/model/layers/embedding.c). */
#include <stdlib.h>

#include "data/data.h"
#include "model/model.h"
#include "run.h"

int strata__run_batch_rows(strata__run_t *run, int32_t epoch, int64_t batch,
                           strata_sparse_t *out, size_t cap, size_t *n)
{
    const strata__model_t *m = &run->model;
    size_t ntables = 0;
    for (int i = 0; i < m->nlayers; i++)
        ntables += m->layers[i].kind->reads_ids && m->layers[i].kind->nvars == 1;
    *n = ntables;
    if (!out || ntables == 0)
        return STRATA_OK;
    if (cap < ntables || epoch < 0 || epoch >= run->s->train.epochs ||
        batch < 0 || batch >= run->geo.steps_per_epoch || !run->train.ids)
        return STRATA_EINVAL;
    int R = run->nreplicas;
    size_t first[STRATA_MAX_REPLICAS], rows[STRATA_MAX_REPLICAS], most = 0;
    strata__cursor_order(&run->cur, epoch, (uint64_t)run->s->train.seed,
                         run->s->data.shuffle);
    for (int r = 0; r < R; r++) {
        strata__slice_t sl = strata__replica_slice(run, r);
        first[r] = strata__batch_sample(run, batch) + sl.row0;
        rows[r] = sl.rows;
        if (first[r] + rows[r] > run->train.n)
            return STRATA_EINVAL;
        most += rows[r] * run->train.ids_k;
    }
    if (most > run->brows_cap) {
        int64_t *b = realloc(run->brows, (most ? most : 1) * sizeof *b);
        if (!b)
            return STRATA_ENOMEM;
        run->brows = b;
        run->brows_cap = most;
    }
    size_t nrows = 0;
    strata__ids_rows(&run->train, run->cur.perm, first, rows, R, run->brows,
                     &nrows);
    for (int i = 0, j = 0; i < m->nlayers; i++) {
        const strata__layer_t *l = &m->layers[i];
        if (!l->kind->reads_ids || l->kind->nvars != 1)
            continue;
        const strata_var_t *v = &m->vars[l->var0];
        /* the ids were checked below the smallest table (model.c) */
        out[j++] = (strata_sparse_t){
            .var = v->index, .offset = v->offset, .count = v->count,
            .row_len = (size_t)l->units, .nrows = nrows, .rows = run->brows };
    }
    return STRATA_OK;
}
