/* The rendezvous's authentication (rendezvous.h): the key rank 0 shares
 * with each task, and the tags of REGISTER and TABLE.
 *
 * With the job's CURVE keys the shared key is libsodium's crypto_box
 * precomputation (X25519 of one side's secret and the other's public key,
 * then HSalsa20): the same Curve25519 keys and primitive as the data path's
 * CurveZMQ, so nobody but rank 0 and rank r can compute key[r]. With a
 * token every task derives the same key from it. A tag is keyed BLAKE2b
 * (crypto_generichash) over a domain string, the message kind, the
 * connection's nonce and the body: no crypto of our own, only libsodium's.
 * The core never sees zmq; the keys' Z85 text is decoded here. */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "runtime.h"
#include "rendezvous.h"

#define WHO "rendezvous"

static int alloc_keys(strata__rdzv_auth_t *a, int kind, uint32_t world)
{
    memset(a, 0, sizeof *a);
    if (sodium_init() < 0)
        return STRATA_EINTERNAL;
    a->key = calloc(world ? world : 1, sizeof *a->key);
    if (!a->key)
        return STRATA_ENOMEM;
    a->kind = kind;
    a->world = world;
    return 0;
}

int strata__rdzv_auth_keys(strata__rdzv_auth_t *a, const strata__cluster_t *c,
                           const struct strata__keys *k)
{
    uint32_t world = (uint32_t)c->pub.ntasks;
    int rc = alloc_keys(a, STRATA_RDZV_AUTH_KEYS, world);
    unsigned char sk[32], pk[32];
    /* the rendezvous's rank r is task r (rendezvous.h) */
    uint32_t self = (uint32_t)c->pub.self;
    if (rc == 0 && strata__member_z85_32(k->secret, sk) != 0) {
        strata__log(STRATA_LOG_ERROR, WHO, "this task's secret key is not "
                    "40 characters of Z85");
        rc = STRATA_ECONFIG;
    }
    /* rank 0 needs every rank's public key, every other rank rank 0's */
    for (uint32_t r = 0; rc == 0 && r < world; r++) {
        if (r == self || (self != 0 && r != 0))
            continue;
        char name[48];
        const char *who = strata__task_name(&c->tasks[r], name, sizeof name);
        const char *pub = NULL; /* keys.c's lookup, without linking it */
        for (int i = 0; !pub && i < k->n; i++)
            if (!strcmp(k->key[i].name, who))
                pub = k->key[i].pub;
        if (!pub || strata__member_z85_32(pub, pk) != 0) {
            strata__log(STRATA_LOG_ERROR, WHO, "no public key of %s (rank "
                        "%u) among the job's keys: every node needs every "
                        "task's public key", who, r);
            rc = STRATA_ECONFIG;
        } else if (crypto_box_beforenm(a->key[r], pk, sk) != 0) {
            strata__log(STRATA_LOG_ERROR, WHO, "the public key of %s is "
                        "not a usable Curve25519 key", who);
            rc = STRATA_ECONFIG;
        }
    }
    sodium_memzero(sk, sizeof sk);
    if (rc != 0)
        strata__rdzv_auth_free(a);
    return rc;
}

int strata__rdzv_auth_token(strata__rdzv_auth_t *a, uint32_t world,
                            const char *token)
{
    int rc = alloc_keys(a, STRATA_RDZV_AUTH_TOKEN, world);
    static const char k_domain[] = "strata rendezvous token v1";
    crypto_generichash_state st;
    if (rc == 0) {
        crypto_generichash_init(&st, NULL, 0, 32);
        crypto_generichash_update(&st, (const unsigned char *)k_domain,
                                  sizeof k_domain);
        crypto_generichash_update(&st, (const unsigned char *)token,
                                  strlen(token));
        crypto_generichash_final(&st, a->key[0], 32);
        for (uint32_t r = 1; r < world; r++)
            memcpy(a->key[r], a->key[0], 32);
        sodium_memzero(&st, sizeof st);
    }
    return rc;
}

void strata__rdzv_auth_free(strata__rdzv_auth_t *a)
{
    if (a->key)
        sodium_memzero(a->key, (size_t)(a->world ? a->world : 1) * 32);
    free(a->key);
    memset(a, 0, sizeof *a);
}

void strata__rdzv_tag(const strata__rdzv_auth_t *a, uint32_t peer, int kind,
                      const uint8_t *nonce, const uint8_t *body, size_t len,
                      uint8_t tag[STRATA_RDZV_TAG])
{
    static const char k_domain[] = "strata rendezvous v2";
    unsigned char kb = (unsigned char)kind;
    crypto_generichash_state st;
    crypto_generichash_init(&st, a->key[peer < a->world ? peer : 0], 32,
                            STRATA_RDZV_TAG);
    crypto_generichash_update(&st, (const unsigned char *)k_domain,
                              sizeof k_domain);
    crypto_generichash_update(&st, &kb, 1);
    crypto_generichash_update(&st, nonce, STRATA_RDZV_NONCE);
    crypto_generichash_update(&st, body, len);
    crypto_generichash_final(&st, tag, STRATA_RDZV_TAG);
    sodium_memzero(&st, sizeof st);
}

int strata__rdzv_tag_ok(const strata__rdzv_auth_t *a, uint32_t peer, int kind,
                        const uint8_t *nonce, const uint8_t *body, size_t len,
                        const uint8_t tag[STRATA_RDZV_TAG])
{
    uint8_t want[STRATA_RDZV_TAG];
    strata__rdzv_tag(a, peer, kind, nonce, body, len, want);
    return crypto_verify_32(want, tag) == 0;
}

const char *strata__rdzv_auth_name(int kind)
{
    return kind == STRATA_RDZV_AUTH_KEYS    ? "the job's keys"
           : kind == STRATA_RDZV_AUTH_TOKEN ? "[security] token"
                                            : "no authentication";
}
