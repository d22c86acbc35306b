/* The membership wire (wire.h): frames of both membership protocols,
 * built and parsed with every length checked before it is used. */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata/errno.h>

#include "base/fault.h"
#include "member/wire.h"

static const uint8_t k_magic[4] = { 'S', 'R', 'D', 'V' };

/* The largest body of each elastic kind. */
#define JOIN_MAX   (STRATA_MEMBER_CLIENT_MAX - STRATA_MEMBER_HDR)
#define GEN_ENTRY  (2 + STRATA_MEMBER_MAX_NAME + 2 + STRATA_MEMBER_MAX_ADDR + 8)
#define GEN_MAX    (20 + (size_t)STRATA_MEMBER_MAX_MEMBERS * GEN_ENTRY)

/* every field of a JOIN at its longest fits a client's message */
_Static_assert(6 + STRATA_MEMBER_MAX_TOKEN + STRATA_MEMBER_MAX_NAME +
               STRATA_MEMBER_MAX_ADDR + 12 <= JOIN_MAX, "JOIN bounds");

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void put64(uint8_t *p, int64_t v)
{
    put32(p, (uint32_t)((uint64_t)v >> 32));
    put32(p + 4, (uint32_t)v);
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
           (uint32_t)p[2] << 8 | p[3];
}

static int64_t get64(const uint8_t *p)
{
    return (int64_t)((uint64_t)get32(p) << 32 | get32(p + 4));
}

static int bad(char *why, size_t wn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(char *why, size_t wn, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (why && wn)
        vsnprintf(why, wn, fmt, ap);
    va_end(ap);
    return STRATA_EPROTO;
}

/* ---- the header --------------------------------------------------------- */

const char *strata__member_kind_name(int kind)
{
    switch (kind) {
    case STRATA_MEMBER_REGISTER: return "REGISTER";
    case STRATA_MEMBER_TABLE:    return "TABLE";
    case STRATA_MEMBER_REFUSED:  return "REFUSED";
    case STRATA_MEMBER_CHALLENGE: return "CHALLENGE";
    case STRATA_MEMBER_JOIN:     return "JOIN";
    case STRATA_MEMBER_GEN:      return "GEN";
    case STRATA_MEMBER_RESIZE:   return "RESIZE";
    case STRATA_MEMBER_STOP:     return "STOP";
    case STRATA_MEMBER_END:      return "END";
    case STRATA_MEMBER_DONE:     return "DONE";
    default:                     return "?";
    }
}

void strata__member_put_hdr(uint8_t *p, int kind, uint32_t len)
{
    memcpy(p, k_magic, 4);
    p[4] = STRATA_MEMBER_VERSION;
    p[5] = (uint8_t)kind;
    p[6] = p[7] = 0;
    put32(p + 8, len);
}

size_t strata__member_body_max(int kind, uint32_t world)
{
    switch (kind) {
    case STRATA_MEMBER_REGISTER: return STRATA_MEMBER_REG_MAX;
    case STRATA_MEMBER_TABLE:
        return 4 + (size_t)world * (2 + STRATA_MEMBER_MAX_ADDR) +
               STRATA_MEMBER_TAG;
    case STRATA_MEMBER_REFUSED:
        return 1 + STRATA_MEMBER_MAX_REASON + STRATA_MEMBER_TAG;
    case STRATA_MEMBER_CHALLENGE: return 1 + STRATA_MEMBER_NONCE;
    case STRATA_MEMBER_JOIN:     return JOIN_MAX;
    /* the service's frames and DONE carry a tag (a JOIN's fits JOIN_MAX) */
    case STRATA_MEMBER_GEN:      return GEN_MAX + STRATA_MEMBER_TAG;
    case STRATA_MEMBER_RESIZE:   return 4 + STRATA_MEMBER_TAG;
    case STRATA_MEMBER_STOP:
        return STRATA_MEMBER_MAX_REASON + STRATA_MEMBER_TAG;
    case STRATA_MEMBER_END:      return STRATA_MEMBER_TAG;
    case STRATA_MEMBER_DONE:     return 8 + STRATA_MEMBER_TAG;
    default:                     return 0;
    }
}

int strata__member_get_hdr(const uint8_t *p, uint32_t world,
                           strata__member_hdr_t *h, char *why, size_t wn)
{
    h->version = p[4];
    h->kind = p[5];
    h->len = get32(p + 8);
    h->bad = STRATA_MEMBER_BAD_MAGIC;
    if (memcmp(p, k_magic, 4) != 0)
        return bad(why, wn, "not a strata membership message (it began "
                   "%02x %02x %02x %02x)", p[0], p[1], p[2], p[3]);
    h->bad = STRATA_MEMBER_BAD_VERSION;
    if (h->version != STRATA_MEMBER_VERSION)
        return bad(why, wn, "membership protocol version %d; this strata "
                   "speaks %d", h->version, STRATA_MEMBER_VERSION);
    h->bad = STRATA_MEMBER_BAD_KIND;
    if (!strcmp(strata__member_kind_name(h->kind), "?"))
        return bad(why, wn, "message kind %d, which the membership wire "
                   "does not have", h->kind);
    h->bad = STRATA_MEMBER_BAD_LENGTH;
    size_t max = strata__member_body_max(h->kind, world);
    if (h->len > max)
        return bad(why, wn, "a %s message of %llu bytes, longer than %zu",
                   strata__member_kind_name(h->kind),
                   (unsigned long long)h->len + STRATA_MEMBER_HDR,
                   STRATA_MEMBER_HDR + max);
    h->bad = 0;
    return 0;
}

/* ---- fields --------------------------------------------------------------- */

/* A reader over one body: every take checks what is left first. */
typedef struct rd {
    const uint8_t *p;
    size_t         len, at;
    const char    *msg;          /* "REGISTER": for the messages */
    char          *why;
    size_t         wn;
} rd_t;

static int need(rd_t *r, size_t n, const char *field)
{
    if (r->len - r->at >= n)
        return 0;
    return bad(r->why, r->wn, "the %s ends inside its %s (%zu bytes, %zu "
               "needed)",
               r->msg, field, r->len, r->at + n);
}

static int take32(rd_t *r, const char *field, uint32_t *v)
{
    if (need(r, 4, field))
        return STRATA_EPROTO;
    *v = get32(r->p + r->at);
    r->at += 4;
    return 0;
}

/* An i64 that is -1 or more. */
static int take_step(rd_t *r, const char *field, int64_t *v)
{
    if (need(r, 8, field))
        return STRATA_EPROTO;
    *v = get64(r->p + r->at);
    r->at += 8;
    if (*v < -1)
        return bad(r->why, r->wn, "the %s's %s is %lld, below -1", r->msg,
                   field, (long long)*v);
    return 0;
}

/* A string of 1..max printable bytes (blank allowed or not) into out[max
 * + 1]. */
static int take_str(rd_t *r, const char *field, size_t min, size_t max,
                    int blanks, char *out)
{
    if (need(r, 2, field))
        return STRATA_EPROTO;
    size_t n = get16(r->p + r->at);
    r->at += 2;
    if (need(r, n, field))
        return STRATA_EPROTO;
    if (n < min || n > max)
        return bad(r->why, r->wn, "the %s's %s of %zu bytes (%zu to %zu)",
                   r->msg, field, n, min, max);
    const uint8_t *s = r->p + r->at;
    for (size_t i = 0; i < n; i++)
        if (s[i] < (blanks ? 0x20 : 0x21) || s[i] > 0x7e)
            return bad(r->why, r->wn, "byte 0x%02x in the %s's %s", s[i],
                       r->msg, field);
    memcpy(out, s, n);
    out[n] = '\0';
    r->at += n;
    return 0;
}

static int take_end(rd_t *r)
{
    if (r->at == r->len)
        return 0;
    return bad(r->why, r->wn, "%zu bytes after the %s", r->len - r->at,
               r->msg);
}

/* Text to the end of the body, bytes outside printable ASCII as '?'. */
static void take_text(const uint8_t *p, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = p[i] >= 0x20 && p[i] < 0x7f ? (char)p[i] : '?';
    out[n] = '\0';
}

static size_t put_str(uint8_t *p, const char *s, size_t n)
{
    put16(p, (uint16_t)n);
    memcpy(p + 2, s, n);
    return 2 + n;
}

/* An address field of the rendezvous: 1..MAX_ADDR visible bytes, then the
 * caller's check. */
static int take_addr(rd_t *r, const char *field, char *out,
                     strata__member_addr_check_fn ck)
{
    if (need(r, 2, field))
        return STRATA_EPROTO;
    size_t n = get16(r->p + r->at);
    r->at += 2;
    if (need(r, n, field))
        return STRATA_EPROTO;
    if (n == 0 || n > STRATA_MEMBER_MAX_ADDR)
        return bad(r->why, r->wn, "address of %zu bytes", n);
    const uint8_t *s = r->p + r->at;
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x21 || s[i] > 0x7e)
            return bad(r->why, r->wn, "byte 0x%02x in an address", s[i]);
    memcpy(out, s, n);
    out[n] = '\0';
    r->at += n;
    char ckwhy[160];
    if (ck && ck(out, ckwhy, sizeof ckwhy) != 0)
        return bad(r->why, r->wn, "address '%s': %s", out, ckwhy);
    return 0;
}

/* ---- rendezvous ------------------------------------------------------------ */

size_t strata__member_challenge_encode(uint8_t *out, int auth,
                                       const uint8_t nonce[STRATA_MEMBER_NONCE])
{
    strata__member_put_hdr(out, STRATA_MEMBER_CHALLENGE,
                           1 + STRATA_MEMBER_NONCE);
    out[STRATA_MEMBER_HDR] = (uint8_t)auth;
    memcpy(out + STRATA_MEMBER_HDR + 1, nonce, STRATA_MEMBER_NONCE);
    return STRATA_MEMBER_HDR + 1 + STRATA_MEMBER_NONCE;
}

int strata__member_challenge_decode(const uint8_t *body, size_t len,
                                    int *auth,
                                    uint8_t nonce[STRATA_MEMBER_NONCE],
                                    char *why, size_t wn)
{
    if (len != 1 + STRATA_MEMBER_NONCE)
        return bad(why, wn, "a CHALLENGE of %zu bytes, not %d", len,
                   1 + STRATA_MEMBER_NONCE);
    if (body[0] > 2)
        return bad(why, wn, "a CHALLENGE of authentication kind %d, which "
                   "this strata does not know", body[0]);
    *auth = body[0];
    memcpy(nonce, body + 1, STRATA_MEMBER_NONCE);
    return 0;
}

size_t strata__member_register_encode(uint8_t *out, uint32_t world,
                                      uint32_t rank, const char *addr)
{
    size_t n = strlen(addr);
    if (n > STRATA_MEMBER_MAX_ADDR)
        return 0;
    strata__member_put_hdr(out, STRATA_MEMBER_REGISTER, (uint32_t)(10 + n));
    uint8_t *b = out + STRATA_MEMBER_HDR;
    put32(b, world);
    put32(b + 4, rank);
    put_str(b + 8, addr, n);
    return STRATA_MEMBER_HDR + 10 + n;
}

int strata__member_register_decode(const uint8_t *body, size_t len,
                                   uint32_t *world, uint32_t *rank,
                                   char *addr, strata__member_addr_check_fn ck,
                                   char *why, size_t wn)
{
    if (len < 10 || len != 10 + (size_t)get16(body + 8))
        return bad(why, wn, "REGISTER of %zu bytes does not match its "
                   "address length", len);
    rd_t r = { body, len, 0, "REGISTER", why, wn };
    take32(&r, "world size", world);
    take32(&r, "rank", rank);
    return take_addr(&r, "address", addr, ck);
}

uint8_t *strata__member_table_encode(char *const *addrs, uint32_t world,
                                     size_t *len)
{
    size_t n = STRATA_MEMBER_HDR + 4;
    for (uint32_t i = 0; i < world; i++) {
        size_t a = strlen(addrs[i]);
        if (a > STRATA_MEMBER_MAX_ADDR)
            return NULL;
        n += 2 + a;
    }
    uint8_t *m = STRATA_FAULT(ALLOC) ? NULL : malloc(n), *p = m;
    if (!m)
        return NULL;
    strata__member_put_hdr(p, STRATA_MEMBER_TABLE,
                           (uint32_t)(n - STRATA_MEMBER_HDR));
    p += STRATA_MEMBER_HDR;
    put32(p, world);
    p += 4;
    for (uint32_t i = 0; i < world; i++)
        p += put_str(p, addrs[i], strlen(addrs[i]));
    assert((size_t)(p - m) == n);   /* sized by the loop above */
    *len = n;
    return m;
}

int strata__member_table_decode(const uint8_t *body, size_t len,
                                uint32_t world, char **addrs,
                                strata__member_addr_check_fn ck, char *why,
                                size_t wn)
{
    char one[STRATA_MEMBER_MAX_ADDR + 1], field[48];
    rd_t r = { body, len, 4, "table", why, wn };
    uint32_t i = 0;
    int rc = STRATA_EPROTO;
    memset(addrs, 0, world * sizeof *addrs);
    if (len < 4 || get32(body) != world)
        return bad(why, wn, "a table of %u tasks, this job has %u",
                   len < 4 ? 0 : get32(body), world);
    for (; i < world; i++) {
        snprintf(field, sizeof field, "address of rank %u", i);
        if (take_addr(&r, field, one, ck) != 0)
            goto fail;
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(addrs[j], one) == 0) {
                bad(why, wn, "ranks %u and %u both have address %s", j, i,
                    one);
                goto fail;
            }
        if (STRATA_FAULT(ALLOC) || !(addrs[i] = strdup(one))) {
            snprintf(why, wn, "out of memory for rank %u's address", i);
            rc = STRATA_ENOMEM;
            goto fail;
        }
    }
    if (take_end(&r) == 0)
        return 0;
fail:
    for (uint32_t j = 0; j < world; j++) {
        free(addrs[j]);
        addrs[j] = NULL;
    }
    return rc;
}

size_t strata__member_refused_encode(uint8_t *out, int why,
                                     const char *reason)
{
    size_t n = strlen(reason);
    if (n > STRATA_MEMBER_MAX_REASON)
        n = STRATA_MEMBER_MAX_REASON;
    strata__member_put_hdr(out, STRATA_MEMBER_REFUSED, (uint32_t)(1 + n));
    out[STRATA_MEMBER_HDR] = (uint8_t)why;
    memcpy(out + STRATA_MEMBER_HDR + 1, reason, n);
    return STRATA_MEMBER_HDR + 1 + n;
}

int strata__member_refused_decode(const uint8_t *body, size_t len, int *code,
                                  char *reason, char *why, size_t wn)
{
    if (len > 1 + STRATA_MEMBER_MAX_REASON)
        return bad(why, wn, "a REFUSED reason of %zu bytes, at most %d",
                   len - 1, STRATA_MEMBER_MAX_REASON);
    *code = len ? body[0] : 0;
    take_text(body + (len ? 1 : 0), len ? len - 1 : 0, reason);
    return 0;
}

/* ---- elastic ---------------------------------------------------------------- */

size_t strata__member_join_encode(uint8_t *out, const strata__member_join_t *j)
{
    size_t nt = strlen(j->token), nn = strlen(j->name), na = strlen(j->addr);
    if ((nt && nt < STRATA_MEMBER_MIN_TOKEN) || nt > STRATA_MEMBER_MAX_TOKEN ||
        nn < 1 || nn > STRATA_MEMBER_MAX_NAME || na < 1 ||
        na > STRATA_MEMBER_MAX_ADDR || j->committed < -1 || j->timeout_ms < 1)
        return 0;
    uint8_t *b = out + STRATA_MEMBER_HDR;
    size_t at = put_str(b, j->token, nt);
    at += put_str(b + at, j->name, nn);
    at += put_str(b + at, j->addr, na);
    put64(b + at, j->committed);
    put32(b + at + 8, j->timeout_ms);
    at += 12;
    strata__member_put_hdr(out, STRATA_MEMBER_JOIN, (uint32_t)at);
    return STRATA_MEMBER_HDR + at;
}

int strata__member_join_decode(const uint8_t *body, size_t len,
                               strata__member_join_t *j, char *why, size_t wn)
{
    rd_t r = { body, len, 0, "JOIN", why, wn };
    int rc = take_str(&r, "token", 0, STRATA_MEMBER_MAX_TOKEN, 0, j->token);
    if (!rc && j->token[0] && strlen(j->token) < STRATA_MEMBER_MIN_TOKEN)
        rc = bad(why, wn, "the JOIN's token of %zu bytes (0, or %d to %d)",
                 strlen(j->token), STRATA_MEMBER_MIN_TOKEN,
                 STRATA_MEMBER_MAX_TOKEN);
    if (!rc)
        rc = take_str(&r, "name", 1, STRATA_MEMBER_MAX_NAME, 0, j->name);
    if (!rc)
        rc = take_str(&r, "address", 1, STRATA_MEMBER_MAX_ADDR, 0, j->addr);
    if (!rc)
        rc = take_step(&r, "committed step", &j->committed);
    if (!rc)
        rc = take32(&r, "timeout", &j->timeout_ms);
    if (!rc && j->timeout_ms < 1)
        rc = bad(why, wn, "the JOIN's timeout is 0 ms");
    return rc ? rc : take_end(&r);
}

void strata__member_gen_free(strata__member_gen_t *g)
{
    for (int32_t i = 0; i < g->size; i++) {
        free(g->names ? g->names[i] : NULL);
        free(g->addrs ? g->addrs[i] : NULL);
    }
    free(g->names);
    free(g->addrs);
    free(g->committed);
    *g = (strata__member_gen_t){ 0 };
}

uint8_t *strata__member_gen_encode(const strata__member_gen_t *g, size_t *len)
{
    if (g->generation < 0 || g->size < 1 ||
        g->size > STRATA_MEMBER_MAX_MEMBERS || g->rank < 0 ||
        g->rank >= g->size || g->resume_step < -1)
        return NULL;
    size_t n = STRATA_MEMBER_HDR + 20;
    for (int32_t i = 0; i < g->size; i++) {
        size_t nn = strlen(g->names[i]), na = strlen(g->addrs[i]);
        if (nn < 1 || nn > STRATA_MEMBER_MAX_NAME || na < 1 ||
            na > STRATA_MEMBER_MAX_ADDR || g->committed[i] < -1)
            return NULL;
        n += 2 + nn + 2 + na + 8;
    }
    uint8_t *m = STRATA_FAULT(ALLOC) ? NULL : malloc(n), *p = m;
    if (!m)
        return NULL;
    strata__member_put_hdr(p, STRATA_MEMBER_GEN,
                           (uint32_t)(n - STRATA_MEMBER_HDR));
    p += STRATA_MEMBER_HDR;
    put32(p, (uint32_t)g->generation);
    put32(p + 4, (uint32_t)g->size);
    put32(p + 8, (uint32_t)g->rank);
    put64(p + 12, g->resume_step);
    p += 20;
    for (int32_t i = 0; i < g->size; i++) {
        p += put_str(p, g->names[i], strlen(g->names[i]));
        p += put_str(p, g->addrs[i], strlen(g->addrs[i]));
        put64(p, g->committed[i]);
        p += 8;
    }
    assert((size_t)(p - m) == n);   /* sized by the loop above */
    *len = n;
    return m;
}

int strata__member_gen_decode(const uint8_t *body, size_t len,
                              strata__member_gen_t *g, char *why, size_t wn)
{
    *g = (strata__member_gen_t){ 0 };
    rd_t r = { body, len, 0, "GEN", why, wn };
    uint32_t gen = 0, size = 0, rank = 0;
    int64_t resume = 0;
    int rc = take32(&r, "generation", &gen);
    if (!rc)
        rc = take32(&r, "size", &size);
    if (!rc)
        rc = take32(&r, "rank", &rank);
    if (!rc)
        rc = take_step(&r, "resume step", &resume);
    if (rc)
        return rc;
    if (gen > INT32_MAX)
        return bad(why, wn, "the GEN's generation %u is out of range", gen);
    if (size < 1 || size > STRATA_MEMBER_MAX_MEMBERS)
        return bad(why, wn, "the GEN's size %u (1 to %d)", size,
                   STRATA_MEMBER_MAX_MEMBERS);
    if (rank >= size)
        return bad(why, wn, "the GEN's rank %u of %u members", rank, size);
    /* At least 14 bytes a member: a table cannot claim more than it holds. */
    if ((len - r.at) / 14 < size)
        return bad(why, wn, "a GEN of %u members in %zu bytes", size, len);
    g->names = STRATA_FAULT(ALLOC) ? NULL : calloc(size, sizeof *g->names);
    g->addrs = STRATA_FAULT(ALLOC) ? NULL : calloc(size, sizeof *g->addrs);
    g->committed = STRATA_FAULT(ALLOC) ? NULL
                                       : calloc(size, sizeof *g->committed);
    g->size = (int32_t)size;
    if (!g->names || !g->addrs || !g->committed) {
        strata__member_gen_free(g);
        snprintf(why, wn, "out of memory for a table of %u members", size);
        return STRATA_ENOMEM;
    }
    g->generation = (int32_t)gen;
    g->rank = (int32_t)rank;
    g->resume_step = resume;
    char name[STRATA_MEMBER_MAX_NAME + 1], addr[STRATA_MEMBER_MAX_ADDR + 1];
    for (uint32_t i = 0; i < size && !rc; i++) {
        rc = take_str(&r, "member name", 1, STRATA_MEMBER_MAX_NAME, 0, name);
        if (!rc)
            rc = take_str(&r, "member address", 1, STRATA_MEMBER_MAX_ADDR, 0,
                          addr);
        if (!rc)
            rc = take_step(&r, "member's committed step", &g->committed[i]);
        if (!rc && (STRATA_FAULT(ALLOC) || !(g->names[i] = strdup(name)) ||
                    STRATA_FAULT(ALLOC) || !(g->addrs[i] = strdup(addr)))) {
            snprintf(why, wn, "out of memory for member %u of the GEN", i);
            rc = STRATA_ENOMEM;
        }
    }
    if (!rc)
        rc = take_end(&r);
    if (rc)
        strata__member_gen_free(g);
    return rc;
}

size_t strata__member_resize_encode(uint8_t *out, int32_t generation)
{
    strata__member_put_hdr(out, STRATA_MEMBER_RESIZE, 4);
    put32(out + STRATA_MEMBER_HDR, (uint32_t)generation);
    return STRATA_MEMBER_HDR + 4;
}

int strata__member_resize_decode(const uint8_t *body, size_t len,
                                 int32_t *generation, char *why, size_t wn)
{
    rd_t r = { body, len, 0, "RESIZE", why, wn };
    uint32_t g = 0;
    int rc = take32(&r, "generation", &g);
    if (!rc && g > INT32_MAX)
        rc = bad(why, wn, "the RESIZE's generation %u is out of range", g);
    if (!rc)
        *generation = (int32_t)g;
    return rc ? rc : take_end(&r);
}

size_t strata__member_stop_encode(uint8_t *out, const char *reason)
{
    size_t n = strlen(reason);
    if (n > STRATA_MEMBER_MAX_REASON)
        n = STRATA_MEMBER_MAX_REASON;
    strata__member_put_hdr(out, STRATA_MEMBER_STOP, (uint32_t)n);
    memcpy(out + STRATA_MEMBER_HDR, reason, n);
    return STRATA_MEMBER_HDR + n;
}

int strata__member_stop_decode(const uint8_t *body, size_t len, char *reason,
                               char *why, size_t wn)
{
    if (len > STRATA_MEMBER_MAX_REASON)
        return bad(why, wn, "a STOP reason of %zu bytes, at most %d", len,
                   STRATA_MEMBER_MAX_REASON);
    take_text(body, len, reason);
    return 0;
}

size_t strata__member_end_encode(uint8_t *out)
{
    strata__member_put_hdr(out, STRATA_MEMBER_END, 0);
    return STRATA_MEMBER_HDR;
}

int strata__member_end_decode(const uint8_t *body, size_t len, char *why,
                              size_t wn)
{
    rd_t r = { body, len, 0, "END", why, wn };
    return take_end(&r);
}

size_t strata__member_done_encode(uint8_t *out, int64_t step)
{
    strata__member_put_hdr(out, STRATA_MEMBER_DONE, 8);
    put64(out + STRATA_MEMBER_HDR, step);
    return STRATA_MEMBER_HDR + 8;
}

int strata__member_done_decode(const uint8_t *body, size_t len, int64_t *step,
                               char *why, size_t wn)
{
    rd_t r = { body, len, 0, "DONE", why, wn };
    int rc = take_step(&r, "step", step);
    return rc ? rc : take_end(&r);
}
