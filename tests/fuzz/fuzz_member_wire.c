/* The membership wire (core/member/wire.c): the input is one message,
 * header and body, as a peer of the rendezvous or of the elastic service
 * sends it. Invariants: a refused header or body says why (and a refused
 * TABLE or GEN leaves nothing allocated); an accepted message re-encodes
 * to the same body (REFUSED and STOP: a printable reason within the
 * limit). A TABLE is read for the job size its body names (at most 64),
 * anything else for a job of 3. */
#include <string.h>

#include <strata/errno.h>

#include "fuzz.h"
#include "member/wire.h"

#define WORLD_MAX 64

static int same(const uint8_t *enc, size_t n, const uint8_t *body,
                size_t len)
{
    return n == STRATA_MEMBER_HDR + len &&
           memcmp(enc + STRATA_MEMBER_HDR, body, len) == 0;
}

static void printable(const char *s, size_t max)
{
    FUZZ_CHECK(strlen(s) <= max);
    for (; *s; s++)
        FUZZ_CHECK(*s >= 0x20 && *s < 0x7f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < STRATA_MEMBER_HDR)
        return 0; /* the callers read a whole header first */
    uint32_t world = 3;
    if (data[5] == STRATA_MEMBER_TABLE && size >= STRATA_MEMBER_HDR + 4) {
        const uint8_t *w = data + STRATA_MEMBER_HDR;
        uint32_t v = (uint32_t)w[0] << 24 | (uint32_t)w[1] << 16 |
                     (uint32_t)w[2] << 8 | w[3];
        if (v >= 1 && v <= WORLD_MAX)
            world = v;
    }
    strata__member_hdr_t h;
    char why[512] = "";
    if (strata__member_get_hdr(data, world, &h, why, sizeof why) != 0) {
        FUZZ_CHECK(why[0] != '\0' && h.bad != 0);
        return 0;
    }
    FUZZ_CHECK(h.len <= strata__member_body_max(h.kind, world));
    if (size - STRATA_MEMBER_HDR != h.len)
        return 0; /* the callers read exactly h.len bytes of body */
    const uint8_t *body = data + STRATA_MEMBER_HDR;
    size_t len = h.len, n = 0;
    uint8_t out[STRATA_MEMBER_HDR + 1 + STRATA_MEMBER_MAX_REASON];
    char reason[STRATA_MEMBER_MAX_REASON + 1];
    int rc = 0;
    why[0] = '\0';
    switch (h.kind) {
    case STRATA_MEMBER_REGISTER: {
        uint32_t w, r;
        char addr[STRATA_MEMBER_MAX_ADDR + 1];
        rc = strata__member_register_decode(body, len, &w, &r, addr, NULL,
                                            why, sizeof why);
        /* an authenticated rendezvous reads it without its tag */
        if (rc != 0 && len > STRATA_MEMBER_TAG &&
            strata__member_register_decode(body, len - STRATA_MEMBER_TAG, &w,
                                           &r, addr, NULL, why,
                                           sizeof why) == 0)
            FUZZ_CHECK(same(out, strata__member_register_encode(out, w, r,
                                                                 addr),
                            body, len - STRATA_MEMBER_TAG));
        if (rc == 0)
            FUZZ_CHECK(same(out, strata__member_register_encode(out, w, r,
                                                                 addr),
                            body, len));
        break;
    }
    case STRATA_MEMBER_TABLE: {
        char *addrs[WORLD_MAX];
        rc = strata__member_table_decode(body, len, world, addrs, NULL, why,
                                         sizeof why);
        for (uint32_t i = 0; i < world; i++)
            FUZZ_CHECK(rc == 0 ? addrs[i] != NULL : addrs[i] == NULL);
        if (rc == 0) {
            uint8_t *t = strata__member_table_encode(addrs, world, &n);
            FUZZ_CHECK(t && same(t, n, body, len));
            free(t);
            for (uint32_t i = 0; i < world; i++)
                free(addrs[i]);
        }
        break;
    }
    case STRATA_MEMBER_CHALLENGE: {
        int auth;
        uint8_t nonce[STRATA_MEMBER_NONCE];
        rc = strata__member_challenge_decode(body, len, &auth, nonce, why,
                                             sizeof why);
        if (rc == 0)
            FUZZ_CHECK(auth >= 0 && auth <= 2 &&
                       same(out, strata__member_challenge_encode(out, auth,
                                                                 nonce),
                            body, len));
        break;
    }
    case STRATA_MEMBER_REFUSED: {
        int code;
        rc = strata__member_refused_decode(body, len, &code, reason, why,
                                           sizeof why);
        if (rc == 0)
            printable(reason, STRATA_MEMBER_MAX_REASON);
        break;
    }
    case STRATA_MEMBER_JOIN: {
        strata__member_join_t j;
        uint8_t again[STRATA_MEMBER_CLIENT_MAX];
        rc = strata__member_join_decode(body, len, &j, why, sizeof why);
        if (rc == 0)
            FUZZ_CHECK(same(again, strata__member_join_encode(again, &j),
                            body, len));
        break;
    }
    case STRATA_MEMBER_GEN: {
        strata__member_gen_t g;
        rc = strata__member_gen_decode(body, len, &g, why, sizeof why);
        if (rc == 0) {
            FUZZ_CHECK(g.rank < g.size);
            uint8_t *m = strata__member_gen_encode(&g, &n);
            FUZZ_CHECK(m && same(m, n, body, len));
            free(m);
        } else {
            FUZZ_CHECK(!g.names && !g.addrs && !g.committed);
        }
        strata__member_gen_free(&g);
        break;
    }
    case STRATA_MEMBER_RESIZE: {
        int32_t gen;
        rc = strata__member_resize_decode(body, len, &gen, why, sizeof why);
        if (rc == 0)
            FUZZ_CHECK(same(out, strata__member_resize_encode(out, gen),
                            body, len));
        break;
    }
    case STRATA_MEMBER_STOP:
        rc = strata__member_stop_decode(body, len, reason, why, sizeof why);
        if (rc == 0)
            printable(reason, STRATA_MEMBER_MAX_REASON);
        break;
    case STRATA_MEMBER_END:
        rc = strata__member_end_decode(body, len, why, sizeof why);
        if (rc == 0)
            FUZZ_CHECK(same(out, strata__member_end_encode(out), body, len));
        break;
    case STRATA_MEMBER_DONE: {
        int64_t step;
        rc = strata__member_done_decode(body, len, &step, why, sizeof why);
        if (rc == 0)
            FUZZ_CHECK(same(out, strata__member_done_encode(out, step), body,
                            len));
        break;
    }
    default:
        FUZZ_CHECK(!"a kind the header accepted and no decoder takes");
    }
    FUZZ_CHECK(rc == 0 || rc == STRATA_EPROTO || rc == STRATA_ENOMEM);
    FUZZ_CHECK(rc == 0 || why[0] != '\0');
    return 0;
}
