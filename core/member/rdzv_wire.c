/* The rendezvous's messages: its view of the membership wire
 * (member/wire.h), whose codec they are, with every address checked as a
 * cluster address. No sockets here. */
#include <string.h>

#include "rendezvous.h"

/* The wire's codes, as the rendezvous's callers and tests know them. */
static int old_code(int rc)
{
    return rc == 0 ? 0 : rc == STRATA_ENOMEM ? STRATA_ENOMEM : -1;
}

void strata__rdzv_put_hdr(uint8_t *p, int type, uint32_t len)
{
    strata__member_put_hdr(p, type, len);
}

static int is_rdzv(int type)
{
    return type == STRATA_RDZV_REGISTER || type == STRATA_RDZV_TABLE ||
           type == STRATA_RDZV_REFUSED || type == STRATA_RDZV_CHALLENGE;
}

size_t strata__rdzv_body_max(int type, uint32_t world)
{
    return is_rdzv(type) ? strata__member_body_max(type, world) : 0;
}

int strata__rdzv_get_hdr(const uint8_t *p, uint32_t world,
                         strata__rdzv_hdr_t *h)
{
    strata__member_hdr_t m;
    int rc = strata__member_get_hdr(p, world, &m, NULL, 0);
    h->version = m.version;
    h->type = m.kind;
    h->len = m.len;
    if (rc == 0 && !is_rdzv(m.kind))
        return -3; /* an elastic kind: not this protocol's */
    return rc == 0 ? 0 : -m.bad;
}

size_t strata__rdzv_register(uint8_t *out, uint32_t world, uint32_t rank,
                             const char *addr)
{
    return strata__member_register_encode(out, world, rank, addr);
}

int strata__rdzv_register_parse(const uint8_t *body, size_t len,
                                uint32_t *world, uint32_t *rank, char *addr,
                                char *why, size_t whylen)
{
    return old_code(strata__member_register_decode(
        body, len, world, rank, addr, strata__cluster_check_addr, why,
        whylen));
}

uint8_t *strata__rdzv_table(char *const *addrs, uint32_t world, size_t *len)
{
    return strata__member_table_encode(addrs, world, len);
}

int strata__rdzv_table_parse(const uint8_t *body, size_t len, uint32_t world,
                             char **addrs, char *why, size_t whylen)
{
    return old_code(strata__member_table_decode(
        body, len, world, addrs, strata__cluster_check_addr, why, whylen));
}

size_t strata__rdzv_refused(uint8_t *out, int why, const char *reason)
{
    return strata__member_refused_encode(out, why, reason);
}

int strata__rdzv_refused_parse(const uint8_t *body, size_t len, int *code,
                               char *reason, char *why, size_t whylen)
{
    return old_code(strata__member_refused_decode(body, len, code, reason,
                                                  why, whylen));
}
