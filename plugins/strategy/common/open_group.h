/* The strategies' one way to a transport: the core chooses it (ABI 1.4). */
#ifndef STRATA_STRATEGY_OPEN_GROUP_H
#define STRATA_STRATEGY_OPEN_GROUP_H

#include <strata/plugin.h>

/* The transport the core's configuration prefers for `group`
 * (host->t_open_group); `who` names the strategy in messages. */
static inline int open_group(const strata_host_v1_t *host, const char *who,
                             const strata_group_t *group,
                             strata_transport_t **out)
{
    if (!STRATA_HAS_FIELD(strata_host_v1_t, host, t_open_group) ||
        !host->t_open_group) {
        host->log(STRATA_LOG_ERROR, who, "this core (plugin ABI 1.%u) does "
                  "not choose transports for strategies: %s needs ABI 1.4",
                  (unsigned)host->abi_minor, who);
        return STRATA_EABI;
    }
    return host->t_open_group(group, out);
}

#endif
