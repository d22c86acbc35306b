/* strata -- the plugin SDK: everything a strategy or transport plugin needs.
 *
 * A plugin is one shared object, <name>.so, that exports exactly one const
 * object `strata_plugin_v2` of type strata_plugin_v2_t and hides everything
 * else (build with -fvisibility=hidden). It includes this header only and
 * never links against the core: the core hands its init() a
 * strata_host_v2_t and the host context to pass to every host call.
 *
 *   #include <strata/plugin.h>
 *   STRATA_EXPORT const strata_plugin_v2_t strata_plugin_v2 = {
 *       STRATA_PLUGIN_HEADER_CAPS(STRATA_KIND_STRATEGY, "mine", "1.0.0",
 *                                 "one line that says what it does",
 *                                 STRATA_CAP_STATE),
 *       .init = mine_init, .fini = mine_fini, .create_var = mine_create_var,
 *       .reduce = mine_reduce, .update = mine_update,
 *   };
 *
 * Plugins built for ABI major 1 (symbol strata_plugin_v1) still load: the
 * core looks for strata_plugin_v2 first, then strata_plugin_v1, and serves
 * a v1 plugin through an adapter (one context per process may use v1
 * plugins at a time: their host calls carry no context).
 *
 * contrib/example-plugin/README.md documents every entry and the ABI rules. */
#ifndef STRATA_PLUGIN_H
#define STRATA_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "strata/errno.h"
#include "strata/version.h"
#include "strata/abi/types.h"
#include "strata/abi/plugin_v1.h"
#include "strata/abi/plugin_v2.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define STRATA_EXPORT __attribute__((visibility("default")))
#else
#define STRATA_EXPORT
#endif

/* hdr.kind */
#define STRATA_KIND_STRATEGY  1u
#define STRATA_KIND_TRANSPORT 2u

/* strata_var_t.dtype */
#define STRATA_DTYPE_F32 1u

/* strata_op_t.reduce_op */
#define STRATA_REDUCE_SUM  0
#define STRATA_REDUCE_MEAN 1

/* host->log levels */
#define STRATA_LOG_ERROR 0
#define STRATA_LOG_WARN  1
#define STRATA_LOG_INFO  2
#define STRATA_LOG_DEBUG 3

/* ctl() ops. Unknown ops return STRATA_ENOTSUP. */
/* The transport ops 1, 7 and 8 are frozen for plugins built before 2.5; a
 * 2.5 transport has the entries barrier, reduce_scatter and all_gather and
 * a 2.5 strategy calls host->t_barrier, t_reduce_scatter, t_all_gather. */
#define STRATA_CTL_BARRIER 1 /* transport: arg = int *slot; all members meet */
/* Any plugin: a member failed; wake every waiter of this instance, which
 * then returns STRATA_ECANCELED. Thread-safe, may be called while other
 * threads are inside reduce/update; arg unused. A strategy forwards it to
 * the transports it opened. */
#define STRATA_CTL_ABORT   2
/* Strategy: sum a small host float buffer across every training process of
 * the job, in place (arg = strata_op_t *, buf on the host). Collective;
 * called from the main thread between epochs (metrics, evaluation). A
 * strategy of one process returns STRATA_ENOTSUP: the core's sum is
 * already global. */
#define STRATA_CTL_WORLD_SUM 3
/* Strategy: copy the model's state (replica 0's variables, its optimizer
 * slots and step count) into the host buffers of arg (strata_state_t *), or
 * install it on every replica. Main thread, between steps. A multi-process
 * strategy makes both collective: GET gathers to the chief (rank 0), SET
 * installs the chief's state everywhere (the other ranks pass buffers that
 * receive it). A strategy that drives the job (drive()) answers them in the
 * task of rank 0: GET at a host->boundary() it called, SET before drive(). */
#define STRATA_CTL_STATE_GET 4
#define STRATA_CTL_STATE_SET 5
/* Strategy, elastic jobs (ABI 2.3): re-form the world. The core calls it
 * on the main thread, between steps, after a collective failed because a
 * member was lost (STRATA_EPEER, STRATA_ETIMEDOUT) or at a step boundary
 * where every member agreed that a resize is due (a worker joins). arg =
 * int64_t *: the steps this process has applied. The strategy closes its
 * groups (bounded), joins the next generation (host->membership) and opens
 * its groups on that generation's members; it moves no state: the core
 * then installs the state of rank 0 (the member that holds the newest
 * step) everywhere with STRATA_CTL_STATE_GET/SET when a member lacks it.
 * STRATA_ENOTSUP: not elastic, the failure ends the job. */
#define STRATA_CTL_REGROUP 6
/* Transport (ABI 2.4): the two halves of an all-reduce over shards the
 * caller chooses (ZeRO: reduce the gradients, step a shard, gather the
 * variables), arg = strata_shards_t *. Member m owns the elements
 * [bounds[m], bounds[m + 1]) of op->buf (bounds: group size + 1 ascending
 * offsets from 0 to op->count, the same on every member; a shard may be
 * empty). REDUCE_SCATTER: on return member m's shard holds the sum (or
 * mean, op->reduce_op) of every member's values there; the rest of op->buf
 * is scratch. ALL_GATHER: member m's shard holds its values; on return
 * every shard holds its owner's, bitwise. Each moves (n-1)/n of the buffer
 * per member, half an all-reduce. Collective, blocks like reduce(); one
 * thread per member. arg->op == NULL asks, without a collective, whether
 * this group offers them: STRATA_OK or STRATA_ENOTSUP (the caller then
 * reduces and broadcasts instead). */
#define STRATA_CTL_REDUCE_SCATTER 7
#define STRATA_CTL_ALL_GATHER     8
/* Strategy (ABI 2.5, STRATA_CAP_STEP_SUM): during a step, sum a small host
 * buffer of doubles across every training process, exactly, adding the
 * processes' values in rank order (the same bits on all of them): arg =
 * strata_op_t *, buf = count doubles (not floats), slot 0. One replica
 * thread of each process calls it while the others wait (batchnorm's
 * statistics, once per layer and pass); collective, bounded by the job's
 * timeout. The core calls it only between a step's forward pass and its
 * reduce, with no reduce in flight. */
#define STRATA_CTL_STEP_SUM       9

/* The entry symbol of each ABI major: the core looks for the newest first. */
#define STRATA_PLUGIN_SYMBOL    "strata_plugin_v2"
#define STRATA_PLUGIN_SYMBOL_V1 "strata_plugin_v1"

/* hdr.caps (ABI 2.5): what the plugin does beyond the required entries.
 * The core asks this word, never a plugin's name, and never probes: an
 * entry or ctl op a bit promises is called without asking first. For a
 * plugin built before 2.5 (caps was `reserved`, 0) the core derives the
 * word from its entries (loader: strata__plugin_caps). */
/* strategy */
#define STRATA_CAP_ELASTIC    0x0001u /* answers STRATA_CTL_REGROUP          */
#define STRATA_CAP_DRIVES     0x0002u /* drive(): runs its part of the job   */
#define STRATA_CAP_NEXT_STEP  0x0004u /* next_step(): hands out steps (ps: a
                                       * coordinator; one worker per step)  */
#define STRATA_CAP_STATE      0x0008u /* STRATA_CTL_STATE_GET/SET: checkpoints */
#define STRATA_CAP_CLIP       0x0010u /* applies [optimizer] clip_norm through
                                       * host grad_sumsq / grad_clip        */
#define STRATA_CAP_WORLD_SUM  0x0020u /* STRATA_CTL_WORLD_SUM across processes */
#define STRATA_CAP_OVERLAP    0x0040u /* reduce_ready(): overlaps backward and
                                       * reduce                              */
#define STRATA_CAP_STEP_SUM   0x0080u /* STRATA_CTL_STEP_SUM across processes */
/* transport */
#define STRATA_CAP_P2P        0x0100u /* send/recv on STRATA_GROUP_P2P groups */
#define STRATA_CAP_SHARDS     0x0200u /* reduce_scatter / all_gather        */
#define STRATA_CAP_BARRIER    0x0400u /* barrier                             */
#define STRATA_CAP_DEVICE_MEM 0x0800u /* buffers on GPUs, not only the host  */
/* strategy, ABI 2.8 (the low byte was full) */
#define STRATA_CAP_LAYER_STATES 0x1000u /* a strategy that hands out steps
                                       * (next_step) carries the workers'
                                       * layer states (strata_step_t.states)
                                       * to the task that evaluates and
                                       * checkpoints (host states_set), so a
                                       * model with batchnorm may run under
                                       * it; ignored from a plugin built
                                       * before 2.8                          */
/* strategy, ABI 2.9 */
#define STRATA_CAP_SPARSE     0x2000u /* reduce() takes an embedding table's
                                       * gradient as rows (strata_op_t
                                       * sparse, nsparse; its range of buf
                                       * zeros) and leaves the combined
                                       * gradient in place for update();
                                       * without it the core hands the dense
                                       * form. Ignored from a plugin built
                                       * before 2.9                          */
/* strategy, ABI 2.12 */
#define STRATA_CAP_LAZY_INIT  0x4000u /* create_var reads initial values
                                       * through host init_values only:
                                       * var->init is NULL and the core
                                       * holds no copy of the model's
                                       * initial values (a task that keeps
                                       * part of the model commits only its
                                       * part). Ignored from a plugin built
                                       * before 2.12                         */
#define STRATA_CAP_ROWS_APART 0x8000u /* with STRATA_CAP_SPARSE: reduce()
                                       * leaves an embedding table's range
                                       * of buf as it found it (zeros): the
                                       * strategy moves the rows elsewhere
                                       * (ps pushes them to the ps tasks),
                                       * so the core clears that range once,
                                       * not at every backward. Ignored
                                       * from a plugin built before 2.12     */
/* strategy, ABI 2.13 */
#define STRATA_CAP_STATE_PARTS 0x10000u /* with STRATA_CAP_STATE: a
                                       * STATE_GET for a checkpoint may
                                       * have the tasks that hold the
                                       * model write it in parts, in
                                       * parallel (host part_write,
                                       * strata_state_t.nparts). Ignored
                                       * from a plugin built before 2.13     */
/* The bits of each kind; a bit of the other kind is refused at load. */
#define STRATA_CAPS_STRATEGY  0x1f0ffu
#define STRATA_CAPS_TRANSPORT 0x0f00u

#define STRATA_PLUGIN_HEADER_CAPS(kind_, name_, version_, description_, caps_) \
    .hdr = { STRATA_ABI_MAJOR, STRATA_ABI_MINOR,                             \
             (uint32_t)sizeof(strata_plugin_v2_t), (kind_), (caps_), (name_), \
             (version_), (description_), STRATA_BUILD_SIG }
/* caps 0: sources written before 2.5 compile unchanged (they declare
 * nothing, so the core asks them for nothing optional). */
#define STRATA_PLUGIN_HEADER(kind_, name_, version_, description_)           \
    STRATA_PLUGIN_HEADER_CAPS(kind_, name_, version_, description_, 0u)

/* True when the plugin was built with member `m` and set it. */
#define STRATA_HAS(p, m)                                                     \
    ((p)->hdr.struct_size >= offsetof(strata_plugin_v2_t, m) + sizeof((p)->m) \
     && (p)->m != NULL)

/* True when a struct that starts with `uint32_t struct_size` carries `m`
 * (a host table or a group from a core of an older minor). */
#define STRATA_HAS_FIELD(type, s, m)                                         \
    ((s)->struct_size >= offsetof(type, m) + sizeof((s)->m))

#ifdef __cplusplus
}
#endif
#endif /* STRATA_PLUGIN_H */
