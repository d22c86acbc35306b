/* The rendezvous (rendezvous.h): which side this task is. The socket
 * helpers both sides use are rdzv_util.c's (rdzv_net.h); rdzv_serve.c is rank 0,
 * rdzv_join.c every other task; what a peer sends is checked by
 * rdzv_wire.c before it is used. */
#include <stdio.h>
#include <string.h>

#include "rdzv_net.h"

#define ERR(...) strata__log(STRATA_LOG_ERROR, RDZV_WHO, __VA_ARGS__)

/* "unix:@NAME", "host:port" or "[v6]:port". */
static int parse_endpoint(const char *text, strata__rdzv_ep_t *ep)
{
    memset(ep, 0, sizeof *ep);
    ep->text = text;
    size_t pre = strlen(STRATA_RDZV_UNIX);
    if (strncmp(text, STRATA_RDZV_UNIX, pre) == 0) {
        const char *name = text + pre;
        if (!*name || strlen(name) >= sizeof ep->name)
            return -1;
        ep->local = 1;
        snprintf(ep->name, sizeof ep->name, "%s", name);
        return 0;
    }
    const char *colon = strrchr(text, ':'), *h = text;
    size_t hl = colon ? (size_t)(colon - text) : 0;
    if (hl >= 2 && text[0] == '[' && text[hl - 1] == ']')
        h++, hl -= 2;
    if (!colon || !hl || hl >= sizeof ep->host ||
        strlen(colon + 1) >= sizeof ep->port)
        return -1;
    memcpy(ep->host, h, hl);
    snprintf(ep->port, sizeof ep->port, "%s", colon + 1);
    return 0;
}

int strata__rendezvous_wanted(const strata__cluster_t *c)
{
    int unknown = 0;
    for (int i = 0; i < c->pub.ntasks; i++)
        unknown |= c->tasks[i].address == NULL;
    return c->pub.ntasks >= 2 && unknown && c->pub.rendezvous;
}

int strata__rendezvous(strata__cluster_t *c, const strata__rdzv_opts_t *o)
{
    if (!strata__rendezvous_wanted(c))
        return 0;
    strata__rdzv_ep_t ep;
    if (parse_endpoint(c->pub.rendezvous, &ep) != 0) {
        ERR("'%s' is not host:port", c->pub.rendezvous);
        return STRATA_ECONFIG;
    }
    return c->pub.self == 0 ? strata__rdzv_serve(c, &ep, o)
                            : strata__rdzv_join(c, &ep, o);
}
