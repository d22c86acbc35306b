/* The run's data cursor (cursor.h): its one writer. */
#include <stdlib.h>

#include "cursor.h"
#include "data/data.h"
#include "strata/errno.h"

int strata__cursor_init(strata__cursor_t *c, size_t n)
{
    *c = (strata__cursor_t){ .n = n, .ordered = -1 };
    c->perm = malloc((n ? n : 1) * sizeof *c->perm);
    return c->perm ? STRATA_OK : STRATA_ENOMEM;
}

void strata__cursor_free(strata__cursor_t *c)
{
    free(c->perm);
    c->perm = NULL;
}

void strata__cursor_order(strata__cursor_t *c, int e, uint64_t seed,
                          int shuffle)
{
    if (c->ordered == e)
        return;
    strata__epoch_order(c->perm, c->n, seed, (uint64_t)e, shuffle);
    c->ordered = e;
}

void strata__cursor_enter(strata__cursor_t *c, int e, int64_t b0,
                          int64_t pos0)
{
    c->epoch = e;
    c->b0 = b0;
    c->pos0 = pos0;
}

void strata__cursor_begin(strata__cursor_t *c, int64_t first, int64_t step,
                          int fresh)
{
    if (fresh)
        c->first = first;
    c->step0 = step - first;
}

void strata__cursor_segment(strata__cursor_t *c, int64_t lo, int64_t hi)
{
    c->lo = lo;
    c->hi = hi;
}

void strata__cursor_step(strata__cursor_t *c, int epoch, int64_t batch,
                         int64_t id)
{
    c->epoch = epoch;
    c->lo = batch;
    c->hi = batch + 1;
    c->step = id;
}

void strata__cursor_applied(strata__cursor_t *c, int64_t b, int gbatch)
{
    c->done_epoch = c->epoch;
    c->done_batch = b + 1;
    c->done_pos = strata__cursor_sample(c, b + 1, gbatch);
}

void strata__cursor_closed(strata__cursor_t *c, int e)
{
    c->done_epoch = e + 1;
    c->done_batch = c->done_pos = 0;
}

void strata__cursor_at(strata__cursor_t *c, int e, int64_t batch,
                       int64_t sample)
{
    c->done_epoch = e;
    c->done_batch = batch;
    c->done_pos = sample;
}
