/* The rendezvous's messages (format in rendezvous.h): building them and
 * parsing what a peer sent, every length checked before it is used. No
 * sockets here. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "rendezvous.h"

static const uint8_t k_magic[4] = { 'S', 'R', 'D', 'V' };

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
           (uint32_t)p[2] << 8 | p[3];
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

void strata__rdzv_put_hdr(uint8_t *p, int type, uint32_t len)
{
    memcpy(p, k_magic, 4);
    p[4] = STRATA_RDZV_VERSION;
    p[5] = (uint8_t)type;
    p[6] = p[7] = 0;
    put32(p + 8, len);
}

size_t strata__rdzv_body_max(int type, uint32_t world)
{
    switch (type) {
    case STRATA_RDZV_REGISTER: return STRATA_RDZV_REG_MAX;
    case STRATA_RDZV_TABLE:
        return 4 + (size_t)world * (2 + STRATA_RDZV_MAX_ADDR);
    case STRATA_RDZV_REFUSED: return 1 + STRATA_RDZV_MAX_REASON;
    default: return 0;
    }
}

int strata__rdzv_get_hdr(const uint8_t *p, uint32_t world,
                         strata__rdzv_hdr_t *h)
{
    if (memcmp(p, k_magic, 4) != 0)
        return -1;
    h->version = p[4];
    h->type = p[5];
    h->len = get32(p + 8);
    if (h->version != STRATA_RDZV_VERSION)
        return -2;
    if (h->type < STRATA_RDZV_REGISTER || h->type > STRATA_RDZV_REFUSED)
        return -3;
    return h->len > strata__rdzv_body_max(h->type, world) ? -4 : 0;
}

/* An address field of n bytes at p: printable, a valid host:port. */
static int take_addr(const uint8_t *p, size_t n, char *out, char *why,
                     size_t whylen)
{
    if (n == 0 || n > STRATA_RDZV_MAX_ADDR) {
        snprintf(why, whylen, "address of %zu bytes", n);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (p[i] < 0x21 || p[i] > 0x7e) {
            snprintf(why, whylen, "byte 0x%02x in an address", p[i]);
            return -1;
        }
    memcpy(out, p, n);
    out[n] = '\0';
    char bad[160];
    if (strata__cluster_check_addr(out, bad, sizeof bad) != 0) {
        snprintf(why, whylen, "address '%s': %s", out, bad);
        return -1;
    }
    return 0;
}

size_t strata__rdzv_register(uint8_t *out, uint32_t world, uint32_t rank,
                             const char *addr)
{
    size_t n = strlen(addr);
    if (n > STRATA_RDZV_MAX_ADDR)
        return 0;
    assert(10 + n <= STRATA_RDZV_REG_MAX);
    strata__rdzv_put_hdr(out, STRATA_RDZV_REGISTER, (uint32_t)(10 + n));
    uint8_t *b = out + STRATA_RDZV_HDR;
    put32(b, world);
    put32(b + 4, rank);
    put16(b + 8, (uint16_t)n);
    memcpy(b + 10, addr, n);
    return STRATA_RDZV_HDR + 10 + n;
}

int strata__rdzv_register_parse(const uint8_t *body, size_t len,
                                uint32_t *world, uint32_t *rank, char *addr,
                                char *why, size_t whylen)
{
    if (len < 10 || len != 10 + (size_t)get16(body + 8)) {
        snprintf(why, whylen, "REGISTER of %zu bytes does not match its "
                 "address length", len);
        return -1;
    }
    *world = get32(body);
    *rank = get32(body + 4);
    return take_addr(body + 10, len - 10, addr, why, whylen);
}

uint8_t *strata__rdzv_table(char *const *addrs, uint32_t world, size_t *len)
{
    size_t n = STRATA_RDZV_HDR + 4;
    for (uint32_t i = 0; i < world; i++)
        n += 2 + strlen(addrs[i]);
    uint8_t *m = STRATA_FAULT(ALLOC) ? NULL : malloc(n), *p = m;
    if (!m)
        return NULL;
    strata__rdzv_put_hdr(p, STRATA_RDZV_TABLE,
                         (uint32_t)(n - STRATA_RDZV_HDR));
    p += STRATA_RDZV_HDR;
    put32(p, world);
    p += 4;
    for (uint32_t i = 0; i < world; i++) {
        size_t a = strlen(addrs[i]);
        put16(p, (uint16_t)a);
        memcpy(p + 2, addrs[i], a);
        p += 2 + a;
    }
    assert((size_t)(p - m) == n);   /* sized by the loop above */
    *len = n;
    return m;
}

int strata__rdzv_table_parse(const uint8_t *body, size_t len, uint32_t world,
                             char **addrs, char *why, size_t whylen)
{
    char one[STRATA_RDZV_MAX_ADDR + 1];
    uint32_t i = 0;
    size_t at = 4;
    int rc = -1;
    memset(addrs, 0, world * sizeof *addrs);
    if (len < 4 || get32(body) != world) {
        snprintf(why, whylen, "a table of %u tasks, this job has %u",
                 len < 4 ? 0 : get32(body), world);
        return -1;
    }
    for (; i < world; i++) {
        size_t n = at + 2 <= len ? get16(body + at) : 0;
        if (at + 2 > len || at + 2 + n > len) {
            snprintf(why, whylen, "the table ends inside rank %u's address",
                     i);
            goto fail;
        }
        if (take_addr(body + at + 2, n, one, why, whylen) != 0)
            goto fail;
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(addrs[j], one) == 0) {
                snprintf(why, whylen, "ranks %u and %u both have address %s",
                         j, i, one);
                goto fail;
            }
        if (STRATA_FAULT(ALLOC) || !(addrs[i] = strdup(one))) {
            snprintf(why, whylen, "out of memory for rank %u's address", i);
            rc = STRATA_ENOMEM;
            goto fail;
        }
        at += 2 + n;
    }
    if (at == len)
        return 0;
    snprintf(why, whylen, "%zu bytes after the table", len - at);
fail:
    for (uint32_t j = 0; j < world; j++) {
        free(addrs[j]);
        addrs[j] = NULL;
    }
    return rc;
}

size_t strata__rdzv_refused(uint8_t *out, int why, const char *reason)
{
    size_t n = strlen(reason);
    if (n > STRATA_RDZV_MAX_REASON)
        n = STRATA_RDZV_MAX_REASON;
    strata__rdzv_put_hdr(out, STRATA_RDZV_REFUSED, (uint32_t)(1 + n));
    out[STRATA_RDZV_HDR] = (uint8_t)why;
    memcpy(out + STRATA_RDZV_HDR + 1, reason, n);
    return STRATA_RDZV_HDR + 1 + n;
}
