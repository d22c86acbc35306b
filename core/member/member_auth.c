/* The elastic membership's authentication (wire.h): the key a worker and
 * the service share, and the tag of every frame on their connection.
 *
 * With the job's CURVE keys the key of worker w is BLAKE2b of a domain
 * string and w's secret key: only its holder (the worker; launch, which
 * made or read the job's keys) can compute it. In plaintext mode every
 * worker's key is derived from the job's token, which then never travels.
 * A tag is keyed BLAKE2b over a domain, the direction, the frame's number
 * in that direction, its kind, the connection's nonce (the service's
 * CHALLENGE) and its body: a frame of another connection, another place
 * in the stream or another direction does not verify. Linked into
 * libstrata (the client) and into the strata command (the service), as
 * wire.c is. */
#include <string.h>

#include <sodium.h>

#include "wire.h"

static const char k_z85[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"
                            "KLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

/* 40 characters of Z85 -> 32 bytes; -1 when not Z85. */
int strata__member_z85_32(const char *s, unsigned char out[32])
{
    if (strlen(s) != 40)
        return -1;
    for (int i = 0; i < 8; i++) {
        uint64_t v = 0;
        for (int j = 0; j < 5; j++) {
            const char *c = strchr(k_z85, s[i * 5 + j]);
            if (!c)
                return -1;
            v = v * 85 + (uint64_t)(c - k_z85);
        }
        if (v > 0xffffffffu)
            return -1;
        for (int j = 0; j < 4; j++)
            out[i * 4 + j] = (unsigned char)(v >> (24 - 8 * j));
    }
    return 0;
}

static void derive(const char *domain, const void *secret, size_t n,
                   unsigned char key[STRATA_MEMBER_KEY])
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, STRATA_MEMBER_KEY);
    crypto_generichash_update(&st, (const unsigned char *)domain,
                              strlen(domain) + 1);
    crypto_generichash_update(&st, secret, n);
    crypto_generichash_final(&st, key, STRATA_MEMBER_KEY);
    sodium_memzero(&st, sizeof st);
}

int strata__member_key_secret(const unsigned char sk[32],
                              unsigned char key[STRATA_MEMBER_KEY])
{
    if (sodium_init() < 0)
        return -1;
    derive("strata elastic membership key v1", sk, 32, key);
    return 0;
}

int strata__member_key_token(const char *token,
                             unsigned char key[STRATA_MEMBER_KEY])
{
    if (sodium_init() < 0)
        return -1;
    derive("strata elastic membership token key v1", token, strlen(token),
           key);
    return 0;
}

static void tag_of(const unsigned char key[STRATA_MEMBER_KEY], int dir,
                   uint64_t seq, int kind,
                   const uint8_t nonce[STRATA_MEMBER_NONCE],
                   const uint8_t *body, size_t len,
                   uint8_t tag[STRATA_MEMBER_TAG])
{
    static const char k_domain[] = "strata elastic membership v3";
    uint8_t head[10];
    head[0] = (uint8_t)dir;
    head[1] = (uint8_t)kind;
    for (int i = 0; i < 8; i++)
        head[2 + i] = (uint8_t)(seq >> (56 - 8 * i));
    crypto_generichash_state st;
    crypto_generichash_init(&st, key, STRATA_MEMBER_KEY, STRATA_MEMBER_TAG);
    crypto_generichash_update(&st, (const unsigned char *)k_domain,
                              sizeof k_domain);
    crypto_generichash_update(&st, head, sizeof head);
    crypto_generichash_update(&st, nonce, STRATA_MEMBER_NONCE);
    crypto_generichash_update(&st, body, len);
    crypto_generichash_final(&st, tag, STRATA_MEMBER_TAG);
    sodium_memzero(&st, sizeof st);
}

size_t strata__member_seal(const unsigned char key[STRATA_MEMBER_KEY],
                           int dir, uint64_t seq,
                           const uint8_t nonce[STRATA_MEMBER_NONCE],
                           uint8_t *msg, size_t n)
{
    size_t len = n - STRATA_MEMBER_HDR;
    tag_of(key, dir, seq, msg[5], nonce, msg + STRATA_MEMBER_HDR, len,
           msg + n);
    strata__member_put_hdr(msg, msg[5], (uint32_t)(len + STRATA_MEMBER_TAG));
    return n + STRATA_MEMBER_TAG;
}

int strata__member_unseal(const unsigned char key[STRATA_MEMBER_KEY],
                          int dir, uint64_t seq,
                          const uint8_t nonce[STRATA_MEMBER_NONCE], int kind,
                          const uint8_t *body, size_t *len)
{
    if (*len < STRATA_MEMBER_TAG)
        return 0;
    size_t n = *len - STRATA_MEMBER_TAG;
    uint8_t want[STRATA_MEMBER_TAG];
    tag_of(key, dir, seq, kind, nonce, body, n, want);
    if (crypto_verify_32(want, body + n) != 0)
        return 0;
    *len = n;
    return 1;
}
