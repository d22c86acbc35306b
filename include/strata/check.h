/* strata -- the arguments of a transport collective, as every host checks
 * them (plugin ABI 2.5): the core's host (core/plugin/host.c) and the
 * plugin kit's fake host (plugins/kit) call this one function, so a
 * transport meets the same refusals under both. A transport may call it too.
 *
 * Include <strata/plugin.h> first. */
#ifndef STRATA_CHECK_H
#define STRATA_CHECK_H

#include <stdint.h>
#include <stdio.h>

#include "strata/plugin.h"

/* What a collective needs besides op (buf, count, slot): */
#define STRATA_CHECK_REDUCE_OP 1 /* op->reduce_op SUM or MEAN (all-reduce, */
                                 /* reduce-scatter)                        */
#define STRATA_CHECK_ROOT      2 /* op->root a member (broadcast)          */
#define STRATA_CHECK_BOUNDS    4 /* bounds: size + 1 ascending offsets     */
                                 /* from 0 to op->count (the shards)       */

/* 0, or STRATA_EINVAL with the field and why in why[cap] ("op->root 4 is
 * not a member (0..3)"). g: the transport's group. */
static inline int strata_check_collective(const strata_group_t *g,
                                          const strata_op_t *op,
                                          const size_t *bounds, int need,
                                          char *why, size_t cap)
{
#define STRATA_CHECK_FAIL_(...)                                             \
    do {                                                                    \
        snprintf(why, cap, __VA_ARGS__);                                    \
        return STRATA_EINVAL;                                               \
    } while (0)
    if (!op)
        STRATA_CHECK_FAIL_("op is NULL");
    if (op->count > SIZE_MAX / sizeof(float))
        STRATA_CHECK_FAIL_("op->count %zu is beyond any buffer", op->count);
    if (!op->buf && op->count > 0)
        STRATA_CHECK_FAIL_("op->buf is NULL for %zu elements", op->count);
    if (g->scope == STRATA_SCOPE_LOCAL && (op->slot < 0 ||
                                           op->slot >= g->nlocal))
        STRATA_CHECK_FAIL_("op->slot %d is not a member here (0..%d)",
                           (int)op->slot, (int)g->nlocal - 1);
    if ((need & STRATA_CHECK_REDUCE_OP) &&
        op->reduce_op != STRATA_REDUCE_SUM &&
        op->reduce_op != STRATA_REDUCE_MEAN)
        STRATA_CHECK_FAIL_("op->reduce_op %d is neither STRATA_REDUCE_SUM (0) "
                           "nor STRATA_REDUCE_MEAN (1)", (int)op->reduce_op);
    if ((need & STRATA_CHECK_ROOT) && (op->root < 0 || op->root >= g->size))
        STRATA_CHECK_FAIL_("op->root %d is not a member (0..%d)",
                           (int)op->root, (int)g->size - 1);
    if (need & STRATA_CHECK_BOUNDS) {
        if (!bounds)
            STRATA_CHECK_FAIL_("bounds is NULL");
        if (bounds[0] != 0 || bounds[g->size] != op->count)
            STRATA_CHECK_FAIL_("bounds run from %zu to %zu, not from 0 to "
                               "op->count %zu", bounds[0], bounds[g->size],
                               op->count);
        for (int m = 0; m < g->size; m++)
            if (bounds[m] > bounds[m + 1])
                STRATA_CHECK_FAIL_("bounds[%d] %zu > bounds[%d] %zu: not "
                                   "ascending", m, bounds[m], m + 1,
                                   bounds[m + 1]);
    }
    return STRATA_OK;
#undef STRATA_CHECK_FAIL_
}

/* 0, or STRATA_EINVAL with why: `slot` is not a member that calls the
 * group's barrier here (a LOCAL group's slots, one caller in a WORLD one). */
static inline int strata_check_barrier(const strata_group_t *g, int slot,
                                       char *why, size_t cap)
{
    int nslot = g->scope == STRATA_SCOPE_LOCAL ? g->nlocal : 1;
    if (slot >= 0 && slot < nslot)
        return STRATA_OK;
    snprintf(why, cap, "slot %d is not a member here (0..%d)", slot,
             nslot - 1);
    return STRATA_EINVAL;
}

/* A transport's reduce-scatter (gather 0) or all-gather (gather 1) and
 * barrier, its arguments checked: through the entries of 2.5, else the
 * frozen ctl ops of 2.4, else STRATA_ENOTSUP. Every host takes this road. */
static inline int strata_transport_shards(const strata_plugin_v2_t *vt,
                                          void *pctx, int gather,
                                          strata_op_t *op,
                                          const size_t *bounds)
{
    if (gather && STRATA_HAS(vt, all_gather))
        return vt->all_gather(pctx, op, bounds);
    if (!gather && STRATA_HAS(vt, reduce_scatter))
        return vt->reduce_scatter(pctx, op, bounds);
    strata_shards_t sh = { .struct_size = sizeof sh, .op = op,
                           .bounds = bounds };
    return vt->ctl ? vt->ctl(pctx, gather ? STRATA_CTL_ALL_GATHER
                                          : STRATA_CTL_REDUCE_SCATTER, &sh)
                   : STRATA_ENOTSUP;
}

static inline int strata_transport_barrier(const strata_plugin_v2_t *vt,
                                           void *pctx, int slot)
{
    if (STRATA_HAS(vt, barrier))
        return vt->barrier(pctx, slot);
    return vt->ctl ? vt->ctl(pctx, STRATA_CTL_BARRIER, &slot)
                   : STRATA_ENOTSUP;
}

#endif /* STRATA_CHECK_H */
