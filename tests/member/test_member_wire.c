/* The membership wire (core/member/wire.h): each message kind of the
 * rendezvous (REGISTER, TABLE, REFUSED) and of the elastic service (JOIN,
 * GEN, RESIZE, STOP, END, DONE) encodes and decodes to the same values;
 * every truncation of every message, a byte more, an announced length
 * over the kind's limit, another magic, another version, a kind the wire
 * does not have, and each field out of its bounds is refused with
 * STRATA_EPROTO and one reason naming the field, never a crash (run it
 * under the ASan build too). */
#include <stdint.h>
#include <string.h>

#include <strata/errno.h>

#include "check.h"
#include "member/wire.h"

static char g_why[512];

/* A whole message: its header accepted as `kind`, *body and *len. */
static int framed(const uint8_t *m, size_t n, uint32_t world, int kind,
                  const uint8_t **body, size_t *len)
{
    strata__member_hdr_t h;
    if (n < STRATA_MEMBER_HDR ||
        strata__member_get_hdr(m, world, &h, g_why, sizeof g_why) != 0 ||
        h.kind != kind || h.version != STRATA_MEMBER_VERSION ||
        h.len != n - STRATA_MEMBER_HDR)
        return -1;
    *body = m + STRATA_MEMBER_HDR;
    *len = h.len;
    return 0;
}

/* decode(body, len) of every shorter body and of one byte more: refused,
 * with a reason. */
typedef int (*decode_fn)(const uint8_t *b, size_t n);

static void refuses_cuts(const char *what, const uint8_t *body, size_t len,
                         decode_fn decode, int shorter)
{
    for (size_t cut = 0; shorter && cut < len; cut++) {
        /* a copy of exactly cut bytes: ASan sees a read past it */
        uint8_t *b = cut ? malloc(cut) : NULL;
        if (cut)
            memcpy(b, body, cut);
        g_why[0] = '\0';
        int rc = decode(b, cut);
        CHECKF(rc == STRATA_EPROTO && g_why[0], "%s cut at %zu: rc %d", what,
               cut, rc);
        free(b);
    }
    uint8_t *b = malloc(len + 1);
    memcpy(b, body, len);
    b[len] = 0;
    g_why[0] = '\0';
    int rc = decode(b, len + 1);
    CHECKF(rc == STRATA_EPROTO && g_why[0], "%s with a byte more: rc %d",
           what, rc);
    free(b);
}

/* ---- decoders with the outputs thrown away ----------------------------- */

static int dec_register(const uint8_t *b, size_t n)
{
    uint32_t w, r;
    char a[STRATA_MEMBER_MAX_ADDR + 1];
    return strata__member_register_decode(b, n, &w, &r, a, NULL, g_why,
                                          sizeof g_why);
}

static int dec_table(const uint8_t *b, size_t n)
{
    char *a[3];
    int rc = strata__member_table_decode(b, n, 3, a, NULL, g_why,
                                         sizeof g_why);
    for (int i = 0; rc == 0 && i < 3; i++)
        free(a[i]);
    for (int i = 0; rc != 0 && i < 3; i++)
        CHECK(a[i] == NULL);
    return rc;
}

static int dec_join(const uint8_t *b, size_t n)
{
    strata__member_join_t j;
    return strata__member_join_decode(b, n, &j, g_why, sizeof g_why);
}

static int dec_gen(const uint8_t *b, size_t n)
{
    strata__member_gen_t g;
    int rc = strata__member_gen_decode(b, n, &g, g_why, sizeof g_why);
    if (rc != 0)
        CHECK(g.names == NULL && g.addrs == NULL && g.committed == NULL);
    strata__member_gen_free(&g);
    return rc;
}

static int dec_resize(const uint8_t *b, size_t n)
{
    int32_t g;
    return strata__member_resize_decode(b, n, &g, g_why, sizeof g_why);
}

static int dec_end(const uint8_t *b, size_t n)
{
    return strata__member_end_decode(b, n, g_why, sizeof g_why);
}

static int dec_done(const uint8_t *b, size_t n)
{
    int64_t s;
    return strata__member_done_decode(b, n, &s, g_why, sizeof g_why);
}

/* ---- round trips -------------------------------------------------------- */

static void rendezvous_kinds(void)
{
    uint8_t m[STRATA_MEMBER_HDR + STRATA_MEMBER_REG_MAX];
    const uint8_t *b;
    size_t n = strata__member_register_encode(m, 4, 3, "[fd00::2]:40000"), len;
    uint32_t w = 0, r = 0;
    char a[STRATA_MEMBER_MAX_ADDR + 1];
    CHECK(framed(m, n, 0, STRATA_MEMBER_REGISTER, &b, &len) == 0 &&
          strata__member_register_decode(b, len, &w, &r, a, NULL, g_why,
                                         sizeof g_why) == 0 &&
          w == 4 && r == 3 && !strcmp(a, "[fd00::2]:40000"));
    refuses_cuts("REGISTER", b, len, dec_register, 1);
    char big[STRATA_MEMBER_MAX_ADDR + 2];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK(strata__member_register_encode(m, 4, 3, big) == 0);
    big[STRATA_MEMBER_MAX_ADDR] = '\0'; /* the longest one fits */
    n = strata__member_register_encode(m, 4, 3, big);
    CHECK(framed(m, n, 0, STRATA_MEMBER_REGISTER, &b, &len) == 0 &&
          dec_register(b, len) == 0 &&
          len + STRATA_MEMBER_TAG == STRATA_MEMBER_REG_MAX);
    /* a CHALLENGE: how rank 0 authenticates, and a nonce */
    uint8_t nonce[STRATA_MEMBER_NONCE], back[STRATA_MEMBER_NONCE];
    int auth = -1;
    memset(nonce, 0xa5, sizeof nonce);
    n = strata__member_challenge_encode(m, 1, nonce);
    CHECK(framed(m, n, 0, STRATA_MEMBER_CHALLENGE, &b, &len) == 0 &&
          strata__member_challenge_decode(b, len, &auth, back, g_why,
                                          sizeof g_why) == 0 &&
          auth == 1 && !memcmp(back, nonce, sizeof nonce));
    m[STRATA_MEMBER_HDR] = 3;
    CHECK(strata__member_challenge_decode(b, len, &auth, back, g_why,
                                          sizeof g_why) == STRATA_EPROTO &&
          strstr(g_why, "authentication kind 3"));
    CHECK(strata__member_challenge_decode(b, len - 1, &auth, back, g_why,
                                          sizeof g_why) == STRATA_EPROTO &&
          strstr(g_why, "a CHALLENGE of 24 bytes, not 25"));

    char *in[3] = { "10.0.0.1:1", "10.0.0.2:2", "[fd00::3]:3" }, *out[3];
    uint8_t *t = strata__member_table_encode(in, 3, &n);
    CHECK(t && framed(t, n, 3, STRATA_MEMBER_TABLE, &b, &len) == 0);
    CHECK(t && strata__member_table_decode(b, len, 3, out, NULL, g_why,
                                           sizeof g_why) == 0);
    for (int i = 0; t && i < 3; i++) {
        CHECK(!strcmp(in[i], out[i]));
        free(out[i]);
    }
    /* the limit of a TABLE follows the job's size */
    strata__member_hdr_t h;
    CHECK(t && strata__member_get_hdr(t, 0, &h, g_why, sizeof g_why) ==
                   STRATA_EPROTO && h.bad == STRATA_MEMBER_BAD_LENGTH);
    if (t)
        refuses_cuts("TABLE", b, len, dec_table, 1);
    free(t);
    char *dup[3] = { "10.0.0.1:1", "10.0.0.2:2", "10.0.0.1:1" };
    t = strata__member_table_encode(dup, 3, &n);
    CHECK(t && strata__member_table_decode(t + 12, n - 12, 3, out, NULL,
                                           g_why, sizeof g_why) ==
                   STRATA_EPROTO &&
          strstr(g_why, "ranks 0 and 2 both have address 10.0.0.1:1"));
    free(t);

    uint8_t ref[STRATA_MEMBER_HDR + 1 + STRATA_MEMBER_MAX_REASON];
    char reason[STRATA_MEMBER_MAX_REASON + 1];
    int code = 0;
    n = strata__member_refused_encode(ref, 2, "rank 3 did not arrive\x01");
    CHECK(framed(ref, n, 0, STRATA_MEMBER_REFUSED, &b, &len) == 0 &&
          strata__member_refused_decode(b, len, &code, reason, g_why,
                                        sizeof g_why) == 0 &&
          code == 2 && !strcmp(reason, "rank 3 did not arrive?"));
    CHECK(strata__member_refused_decode(b, 0, &code, reason, g_why,
                                        sizeof g_why) == 0 &&
          code == 0 && reason[0] == '\0');
    char longr[2000];
    memset(longr, 'x', sizeof longr - 1);
    longr[sizeof longr - 1] = '\0';
    CHECK(strata__member_refused_encode(ref, 1, longr) == sizeof ref);
    CHECK(strata__member_refused_decode(ref + 12, sizeof ref - 11, &code,
                                        reason, g_why, sizeof g_why) ==
          STRATA_EPROTO && strstr(g_why, "REFUSED reason"));
}

static void elastic_kinds(void)
{
    uint8_t m[STRATA_MEMBER_CLIENT_MAX];
    const uint8_t *b;
    size_t len;
    strata__member_join_t j = { .token = "0123456789abcdef0123",
                                .name = "worker:12", .addr = "127.0.0.1:9",
                                .committed = -1, .timeout_ms = 60000 }, k;
    size_t n = strata__member_join_encode(m, &j);
    CHECK(framed(m, n, 0, STRATA_MEMBER_JOIN, &b, &len) == 0 &&
          strata__member_join_decode(b, len, &k, g_why, sizeof g_why) == 0 &&
          !strcmp(k.token, j.token) && !strcmp(k.name, j.name) &&
          !strcmp(k.addr, j.addr) && k.committed == -1 &&
          k.timeout_ms == 60000);
    refuses_cuts("JOIN", b, len, dec_join, 1);
    CHECK(strstr(g_why, "1 bytes after the JOIN"));
    /* every field at its longest: within what the service reads */
    memset(j.token, 't', STRATA_MEMBER_MAX_TOKEN);
    memset(j.name, 'n', STRATA_MEMBER_MAX_NAME);
    memset(j.addr, 'a', STRATA_MEMBER_MAX_ADDR);
    j.committed = INT64_MAX;
    n = strata__member_join_encode(m, &j);
    CHECK(n > 0 && n <= STRATA_MEMBER_CLIENT_MAX &&
          framed(m, n, 0, STRATA_MEMBER_JOIN, &b, &len) == 0 &&
          strata__member_join_decode(b, len, &k, g_why, sizeof g_why) == 0 &&
          k.committed == INT64_MAX);
    /* fields out of their bounds: no message, and refused when forged */
    strata__member_join_t bad = { .token = "short", .name = "worker:0",
                                  .addr = "127.0.0.1:9", .committed = 0,
                                  .timeout_ms = 1 };
    CHECK(strata__member_join_encode(m, &bad) == 0);
    bad = (strata__member_join_t){ .token = "0123456789abcdef",
                                   .name = "worker:0", .addr = "127.0.0.1:9",
                                   .committed = -2, .timeout_ms = 1 };
    CHECK(strata__member_join_encode(m, &bad) == 0);
    bad.committed = 0;
    bad.timeout_ms = 0;
    CHECK(strata__member_join_encode(m, &bad) == 0);
    bad.timeout_ms = 1;
    n = strata__member_join_encode(m, &bad);
    CHECK(n > 0);
    m[12 + 2 + 16 + 2 + 6] = ' '; /* "worker 0": a blank in the name */
    CHECK(dec_join(m + 12, n - 12) == STRATA_EPROTO &&
          strstr(g_why, "byte 0x20 in the JOIN's name"));
    m[12 + 2 + 16 + 2 + 6] = ':';
    m[12 + 1] = 15; /* a token of 15 bytes */
    CHECK(dec_join(m + 12, n - 12) == STRATA_EPROTO && strstr(g_why, "token"));
    m[12 + 1] = 16;
    m[n - 12] = 0xff; /* committed's top byte: below -1 */
    CHECK(dec_join(m + 12, n - 12) == STRATA_EPROTO &&
          strstr(g_why, "committed step"));

    char *names[3] = { "worker:2", "worker:0", "worker:1" };
    char *addrs[3] = { "127.0.0.1:3002", "[::1]:3000", "127.0.0.1:3001" };
    int64_t committed[3] = { 41, 40, -1 };
    strata__member_gen_t g = { .generation = 7, .size = 3, .rank = 2,
                               .resume_step = 41, .names = names,
                               .addrs = addrs, .committed = committed }, d;
    uint8_t *gm = strata__member_gen_encode(&g, &n);
    CHECK(gm && framed(gm, n, 0, STRATA_MEMBER_GEN, &b, &len) == 0 &&
          strata__member_gen_decode(b, len, &d, g_why, sizeof g_why) == 0);
    if (gm && d.names) {
        CHECK(d.generation == 7 && d.size == 3 && d.rank == 2 &&
              d.resume_step == 41);
        for (int i = 0; i < 3; i++)
            CHECK(!strcmp(d.names[i], names[i]) &&
                  !strcmp(d.addrs[i], addrs[i]) &&
                  d.committed[i] == committed[i]);
        strata__member_gen_free(&d);
        refuses_cuts("GEN", b, len, dec_gen, 1);
        CHECK(strstr(g_why, "1 bytes after the GEN"));
        uint8_t *x = malloc(len);
        memcpy(x, b, len);
        x[11] = 3; /* rank 3 of 3 */
        CHECK(dec_gen(x, len) == STRATA_EPROTO && strstr(g_why, "rank 3"));
        x[11] = 2;
        x[7] = 0; /* size 0 */
        CHECK(dec_gen(x, len) == STRATA_EPROTO && strstr(g_why, "size 0"));
        x[7] = 200; /* more members than the body holds */
        CHECK(dec_gen(x, len) == STRATA_EPROTO && strstr(g_why, "200"));
        x[7] = 3;
        x[0] = 0x80; /* a generation past INT32_MAX */
        CHECK(dec_gen(x, len) == STRATA_EPROTO && strstr(g_why, "generation"));
        free(x);
    }
    free(gm);
    g.rank = 3;
    CHECK(strata__member_gen_encode(&g, &n) == NULL);
    g.rank = 0;
    names[1] = "";
    CHECK(strata__member_gen_encode(&g, &n) == NULL);
    names[1] = "worker:0";
    g.size = STRATA_MEMBER_MAX_MEMBERS + 1;
    CHECK(strata__member_gen_encode(&g, &n) == NULL);

    int32_t gen = 0;
    n = strata__member_resize_encode(m, 9);
    CHECK(framed(m, n, 0, STRATA_MEMBER_RESIZE, &b, &len) == 0 &&
          strata__member_resize_decode(b, len, &gen, g_why,
                                       sizeof g_why) == 0 && gen == 9);
    refuses_cuts("RESIZE", b, len, dec_resize, 1);

    uint8_t stop[STRATA_MEMBER_HDR + STRATA_MEMBER_MAX_REASON];
    char reason[STRATA_MEMBER_MAX_REASON + 1];
    n = strata__member_stop_encode(stop, "1 of min_workers = 2 workers");
    CHECK(framed(stop, n, 0, STRATA_MEMBER_STOP, &b, &len) == 0 &&
          strata__member_stop_decode(b, len, reason, g_why,
                                     sizeof g_why) == 0 &&
          !strcmp(reason, "1 of min_workers = 2 workers"));

    n = strata__member_end_encode(m);
    CHECK(framed(m, n, 0, STRATA_MEMBER_END, &b, &len) == 0 && len == 0 &&
          dec_end(b, len) == 0);
    refuses_cuts("END", b, len, dec_end, 0);

    int64_t step = 0;
    n = strata__member_done_encode(m, 1234567890123LL);
    CHECK(framed(m, n, 0, STRATA_MEMBER_DONE, &b, &len) == 0 &&
          strata__member_done_decode(b, len, &step, g_why,
                                     sizeof g_why) == 0 &&
          step == 1234567890123LL);
    refuses_cuts("DONE", b, len, dec_done, 1);
}

/* ---- headers ------------------------------------------------------------- */

static void headers(void)
{
    static const int kinds[] = { STRATA_MEMBER_REGISTER, STRATA_MEMBER_TABLE,
                                 STRATA_MEMBER_REFUSED, STRATA_MEMBER_JOIN,
                                 STRATA_MEMBER_GEN, STRATA_MEMBER_RESIZE,
                                 STRATA_MEMBER_STOP, STRATA_MEMBER_END,
                                 STRATA_MEMBER_DONE };
    uint8_t m[STRATA_MEMBER_HDR];
    strata__member_hdr_t h;
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        int k = kinds[i];
        size_t max = strata__member_body_max(k, 2);
        CHECK(strcmp(strata__member_kind_name(k), "?") != 0);
        strata__member_put_hdr(m, k, (uint32_t)max);
        CHECKF(strata__member_get_hdr(m, 2, &h, g_why, sizeof g_why) == 0 &&
               h.kind == k && h.len == max && h.bad == 0, "kind %d", k);
        strata__member_put_hdr(m, k, (uint32_t)max + 1);
        g_why[0] = '\0';
        CHECKF(strata__member_get_hdr(m, 2, &h, g_why, sizeof g_why) ==
                   STRATA_EPROTO && h.bad == STRATA_MEMBER_BAD_LENGTH &&
                   strstr(g_why, strata__member_kind_name(k)) &&
                   strstr(g_why, "longer than"), "kind %d: %s", k, g_why);
    }
    /* what a member sends fits what the service reads */
    CHECK(STRATA_MEMBER_HDR + strata__member_body_max(STRATA_MEMBER_JOIN, 0)
          == STRATA_MEMBER_CLIENT_MAX);
    strata__member_put_hdr(m, STRATA_MEMBER_JOIN, 700);
    CHECK(strata__member_get_hdr(m, 0, &h, g_why, sizeof g_why) != 0 &&
          strstr(g_why, "a JOIN message of 712 bytes, longer than 512"));
    strata__member_put_hdr(m, STRATA_MEMBER_TABLE, 0xffffffffu);
    CHECK(strata__member_get_hdr(m, 1000, &h, g_why, sizeof g_why) != 0 &&
          h.bad == STRATA_MEMBER_BAD_LENGTH);
    static const int unknown[] = { 0, 5, 15, 22, 99, 255 };
    for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++) {
        strata__member_put_hdr(m, unknown[i], 0);
        CHECKF(strata__member_get_hdr(m, 2, &h, g_why, sizeof g_why) ==
                   STRATA_EPROTO && h.bad == STRATA_MEMBER_BAD_KIND &&
                   h.kind == unknown[i] && strstr(g_why, "kind"),
               "kind %d", unknown[i]);
        CHECK(strata__member_body_max(unknown[i], 2) == 0);
    }
    strata__member_put_hdr(m, STRATA_MEMBER_END, 0);
    m[4] = 1; /* before the rendezvous's challenge */
    CHECK(strata__member_get_hdr(m, 2, &h, g_why, sizeof g_why) ==
              STRATA_EPROTO && h.bad == STRATA_MEMBER_BAD_VERSION &&
          h.version == 1 && strstr(g_why, "version 1"));
    memcpy(m, "JOIN", 4); /* the text protocol of before */
    CHECK(strata__member_get_hdr(m, 2, &h, g_why, sizeof g_why) ==
              STRATA_EPROTO && h.bad == STRATA_MEMBER_BAD_MAGIC &&
          strstr(g_why, "4a 4f 49 4e"));
    /* the reserved bytes are ignored */
    strata__member_put_hdr(m, STRATA_MEMBER_END, 0);
    m[6] = m[7] = 0xff;
    CHECK(strata__member_get_hdr(m, 2, &h, g_why, sizeof g_why) == 0);
    /* a why of no room, or none: still refused, nothing written past it */
    char tiny[1] = { 'z' };
    memcpy(m, "XXXX", 4);
    CHECK(strata__member_get_hdr(m, 2, &h, tiny, 0) == STRATA_EPROTO &&
          tiny[0] == 'z');
    CHECK(strata__member_get_hdr(m, 2, &h, NULL, 0) == STRATA_EPROTO);
}

/* Every byte value at every position of a small message: decoders say
 * yes or no, never crash; a yes re-encodes to the same bytes. */
static void flips(void)
{
    uint8_t m[STRATA_MEMBER_CLIENT_MAX], x[STRATA_MEMBER_CLIENT_MAX];
    strata__member_join_t j = { .token = "0123456789abcdef", .name = "w:1",
                                .addr = "h:1", .committed = 3,
                                .timeout_ms = 5 }, k;
    size_t n = strata__member_join_encode(m, &j);
    long yes = 0, no = 0;
    for (size_t at = STRATA_MEMBER_HDR; at < n; at++)
        for (int v = 0; v < 256; v++) {
            memcpy(x, m, n);
            x[at] = (uint8_t)v;
            size_t len = n - STRATA_MEMBER_HDR;
            uint8_t *b = malloc(len);
            memcpy(b, x + STRATA_MEMBER_HDR, len);
            if (strata__member_join_decode(b, len, &k, g_why,
                                           sizeof g_why) == 0) {
                uint8_t again[STRATA_MEMBER_CLIENT_MAX];
                size_t n2 = strata__member_join_encode(again, &k);
                CHECKF(n2 == n && !memcmp(again + STRATA_MEMBER_HDR, b, len),
                       "byte %zu = %d", at, v);
                yes++;
            } else {
                no++;
            }
            free(b);
        }
    CHECK(yes > 0 && no > 0);
    printf("JOIN byte flips: %ld accepted, %ld refused\n", yes, no);
}

/* Version 3's elastic tags: a sealed frame opens with its key, number,
 * direction and nonce, and with nothing else; a JOIN without a token. */
static void elastic_tags(void)
{
    unsigned char k[STRATA_MEMBER_KEY], other[STRATA_MEMBER_KEY],
        sk[32] = { 9 };
    CHECK(strata__member_key_token("0123456789abcdef", k) == 0 &&
          strata__member_key_secret(sk, other) == 0 &&
          memcmp(k, other, sizeof k) != 0);
    uint8_t nonce[STRATA_MEMBER_NONCE] = { 1 }, n2[STRATA_MEMBER_NONCE] = { 2 };
    uint8_t m[STRATA_MEMBER_HDR + 8 + STRATA_MEMBER_TAG];
    size_t n = strata__member_done_encode(m, 1200);
    n = strata__member_seal(k, STRATA_MEMBER_UP, 3, nonce, m, n);
    strata__member_hdr_t h;
    char why[200];
    CHECK(n == STRATA_MEMBER_HDR + 8 + STRATA_MEMBER_TAG &&
          strata__member_get_hdr(m, 0, &h, why, sizeof why) == 0 &&
          h.len == 8 + STRATA_MEMBER_TAG);
    const uint8_t *b = m + STRATA_MEMBER_HDR;
    size_t len = h.len;
    CHECK(!strata__member_unseal(other, STRATA_MEMBER_UP, 3, nonce, h.kind, b,
                                 &len) && len == h.len);
    CHECK(!strata__member_unseal(k, STRATA_MEMBER_UP, 4, nonce, h.kind, b,
                                 &len));
    CHECK(!strata__member_unseal(k, STRATA_MEMBER_DOWN, 3, nonce, h.kind, b,
                                 &len));
    CHECK(!strata__member_unseal(k, STRATA_MEMBER_UP, 3, n2, h.kind, b,
                                 &len));
    CHECK(!strata__member_unseal(k, STRATA_MEMBER_UP, 3, nonce,
                                 STRATA_MEMBER_END, b, &len));
    int64_t step = 0;
    CHECK(strata__member_unseal(k, STRATA_MEMBER_UP, 3, nonce, h.kind, b,
                                &len) && len == 8 &&
          strata__member_done_decode(b, len, &step, why, sizeof why) == 0 &&
          step == 1200);
    unsigned char z[32];
    CHECK(strata__member_z85_32("HelloWorld", z) == -1);
    strata__member_join_t j = { .name = "worker:1", .addr = "10.0.0.1:5",
                                .committed = -1, .timeout_ms = 1 }, back;
    uint8_t jm[STRATA_MEMBER_CLIENT_MAX];
    n = strata__member_join_encode(jm, &j);
    CHECK(n > 0 && strata__member_join_decode(jm + STRATA_MEMBER_HDR,
                                              n - STRATA_MEMBER_HDR, &back,
                                              why, sizeof why) == 0 &&
          back.token[0] == '\0' && !strcmp(back.name, "worker:1"));
}

int main(void)
{
    headers();
    rendezvous_kinds();
    elastic_kinds();
    elastic_tags();
    flips();
    return CHECK_DONE();
}
