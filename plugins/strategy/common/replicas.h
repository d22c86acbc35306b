/* The shipped strategies' short names for the kit's replica helpers
 * (include/strata/kit.h, plugins/kit/replicas.c and shards.c): the code
 * lives once, in libstrata_kit.a, which third-party strategies link too. */
#ifndef STRATA_PLUGINS_REPLICAS_H
#define STRATA_PLUGINS_REPLICAS_H

#include <strata/kit.h>

typedef strata_kit_replicas_t replicas_t;

#define replicas_init          strata_kit_replicas_init
#define replicas_init_sharded  strata_kit_replicas_init_sharded
#define replicas_init_bare     strata_kit_replicas_init_bare
#define replicas_shard_lo      strata_kit_replicas_shard_lo
#define replicas_fini          strata_kit_replicas_fini
#define replicas_create_var    strata_kit_replicas_create_var
#define replicas_update        strata_kit_replicas_update
#define replicas_clip          strata_kit_replicas_clip
#define replicas_clip_range    strata_kit_replicas_clip_range
#define replicas_state         strata_kit_replicas_state
#define replicas_shard_reduce_rows strata_kit_replicas_shard_reduce_rows
#define replicas_shard_update  strata_kit_replicas_shard_update

#endif
