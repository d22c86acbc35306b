/* zmq.so -- AES-256-GCM records for the bulk channel (aead.h).
 *
 * Keys. Each side of a link makes an ephemeral X25519 pair (crypto_kx);
 * the public halves travel inside HELLO (left -> right) and HELLO_ACK
 * (right -> left), which CurveZMQ already authenticated as the job's
 * member on the other end, so only the two members can know the shared
 * secret. crypto_kx_{client,server}_session_keys give one key per
 * direction (BLAKE2b-512 of the X25519 result and both public keys);
 * each is put through crypto_kdf ("strzbulk", id 0) so that the record
 * key is used for nothing else. Ratchet: key[e+1] = crypto_kdf(key[e],
 * id e+1, "strzrkey"), the old key wiped, after STRZ_AEAD_REKEY_RECORDS
 * records or STRZ_AEAD_REKEY_BYTES bytes; both ends count the same
 * records, so no message is needed.
 *
 * Nonce: the record's number in its direction, 64 bits little-endian in
 * the first 8 bytes of GCM's 96-bit IV (the last 4 are 0). It is never
 * sent: the receiver counts too, so a record replayed, dropped,
 * reordered or cut short is opened with the wrong nonce and fails.
 *
 * Associated data: BLAKE2b-128 of the job tag, sender rank, receiver
 * rank (little-endian int32), the record kind, and the 48-byte wire
 * header when the record has one (type, collective seq, step, offset =
 * the chunk's place, length, op, total).
 *
 * The cipher: OpenSSL's EVP AES-256-GCM when the build found libcrypto
 * (STRZ_AEAD_OPENSSL: its AES-NI/VAES code runs about twice as fast as
 * libsodium 1.0.18's on this project's machines, contrib/bench/allreduce
 * cipher_speed), else libsodium's crypto_aead_aes256gcm. Same records
 * either way (tests/transport/zmq_aead_test checks one against the
 * other when both are there). */
#include "aead.h"

#include <stdlib.h>
#include <string.h>

#include <sodium.h>
#include <strata/plugin.h>

#ifdef STRZ_AEAD_OPENSSL
#include <openssl/crypto.h>
#include <openssl/evp.h>
#endif

#define CTX_BYTES 24 /* job hash 16, sender 4, receiver 4 */
#define AD_MAX    (CTX_BYTES + 1 + STRZ_AEAD_HDR)

struct strz_aead {
#ifdef STRZ_AEAD_OPENSSL
    EVP_CIPHER_CTX *evp;
#else
    crypto_aead_aes256gcm_state st; /* 16-byte aligned: the struct is */
#endif
    int           sealing;          /* this side's sending direction */
    unsigned char key[32];
    uint64_t      next;             /* number (nonce) of the next record */
    uint64_t      key_records, key_bytes; /* under the current key      */
    uint64_t      rekey_records, rekey_bytes;
    uint32_t      epoch;
    unsigned char ctx[CTX_BYTES];
};

int strz_aead_available(void)
{
    /* sodium_init() is idempotent and thread-safe. Then libsodium's
     * check: AES-NI and PCLMULQDQ (cpuid), which OpenSSL's fast path
     * needs as well. */
    return sodium_init() >= 0 && crypto_aead_aes256gcm_is_available();
}

const char *strz_aead_engine(void)
{
#ifdef STRZ_AEAD_OPENSSL
    return OpenSSL_version(OPENSSL_VERSION);
#else
    return "libsodium " SODIUM_VERSION_STRING;
#endif
}

int strz_kx_new(strz_kx_t *kx)
{
    if (!strz_aead_available() || crypto_kx_keypair(kx->pk, kx->sk) != 0)
        return STRATA_EINTERNAL;
    return 0;
}

void strz_kx_wipe(strz_kx_t *kx)
{
    sodium_memzero(kx, sizeof *kx);
}

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* (Re)load the cipher with a->key. */
static int load_key(strz_aead_t *a)
{
#ifdef STRZ_AEAD_OPENSSL
    int ok = a->sealing
             ? EVP_EncryptInit_ex(a->evp, EVP_aes_256_gcm(), NULL, a->key, NULL)
             : EVP_DecryptInit_ex(a->evp, EVP_aes_256_gcm(), NULL, a->key, NULL);
    return ok == 1 ? 0 : STRATA_EINTERNAL;
#else
    return crypto_aead_aes256gcm_beforenm(&a->st, a->key) == 0
           ? 0 : STRATA_EINTERNAL;
#endif
}

static strz_aead_t *aead_new(const unsigned char session[32], int sealing,
                             const unsigned char job[16], int32_t from,
                             int32_t to)
{
    strz_aead_t *a = aligned_alloc(64, (sizeof *a + 63) / 64 * 64);
    if (a == NULL)
        return NULL;
    memset(a, 0, sizeof *a);
    a->sealing = sealing;
    a->rekey_records = STRZ_AEAD_REKEY_RECORDS;
    a->rekey_bytes = STRZ_AEAD_REKEY_BYTES;
    memcpy(a->ctx, job, 16);
    put32(a->ctx + 16, (uint32_t)from);
    put32(a->ctx + 20, (uint32_t)to);
    crypto_kdf_derive_from_key(a->key, sizeof a->key, 0, "strzbulk", session);
#ifdef STRZ_AEAD_OPENSSL
    if ((a->evp = EVP_CIPHER_CTX_new()) == NULL) {
        strz_aead_free(a);
        return NULL;
    }
#endif
    if (load_key(a) != 0) {
        strz_aead_free(a);
        return NULL;
    }
    return a;
}

int strz_aead_link(const strz_kx_t *kx, const unsigned char peer_pk[STRZ_KX_PK],
                   int is_left, const char *tag, int32_t self, int32_t peer,
                   strz_aead_t **tx, strz_aead_t **rx)
{
    unsigned char k_rx[crypto_kx_SESSIONKEYBYTES],
        k_tx[crypto_kx_SESSIONKEYBYTES], job[16];
    int rc = is_left
             ? crypto_kx_client_session_keys(k_rx, k_tx, kx->pk, kx->sk, peer_pk)
             : crypto_kx_server_session_keys(k_rx, k_tx, kx->pk, kx->sk, peer_pk);

    *tx = *rx = NULL;
    if (rc != 0) /* a low-order point: not a key a member would send */
        return STRATA_EPROTO;
    crypto_generichash(job, sizeof job, (const unsigned char *)tag,
                       strlen(tag), NULL, 0);
    *tx = aead_new(k_tx, 1, job, self, peer);
    *rx = aead_new(k_rx, 0, job, peer, self);
    sodium_memzero(k_rx, sizeof k_rx);
    sodium_memzero(k_tx, sizeof k_tx);
    if (*tx == NULL || *rx == NULL) {
        strz_aead_free(*tx);
        strz_aead_free(*rx);
        *tx = *rx = NULL;
        return STRATA_ENOMEM;
    }
    return 0;
}

void strz_aead_free(strz_aead_t *a)
{
    if (a == NULL)
        return;
#ifdef STRZ_AEAD_OPENSSL
    EVP_CIPHER_CTX_free(a->evp);
#endif
    sodium_memzero(a, sizeof *a);
    free(a);
}

/* Before record a->next: ratchet when the key has done its share. */
static int before_record(strz_aead_t *a, size_t len)
{
    if (a->next == UINT64_MAX)
        return STRATA_EINTERNAL; /* the counter is spent: never wraps */
    if (a->key_records >= a->rekey_records || a->key_bytes >= a->rekey_bytes) {
        unsigned char k[32];
        crypto_kdf_derive_from_key(k, sizeof k, (uint64_t)a->epoch + 1,
                                   "strzrkey", a->key);
        memcpy(a->key, k, sizeof k);
        sodium_memzero(k, sizeof k);
        a->epoch++;
        a->key_records = a->key_bytes = 0;
        if (load_key(a) != 0)
            return STRATA_EINTERNAL;
    }
    (void)len;
    return 0;
}

static void after_record(strz_aead_t *a, size_t len)
{
    a->next++;
    a->key_records++;
    a->key_bytes += len;
}

static size_t make_ad(const strz_aead_t *a, int kind, const unsigned char *hdr,
                      unsigned char ad[AD_MAX])
{
    memcpy(ad, a->ctx, CTX_BYTES);
    ad[CTX_BYTES] = (unsigned char)kind;
    if (hdr == NULL)
        return CTX_BYTES + 1;
    memcpy(ad + CTX_BYTES + 1, hdr, STRZ_AEAD_HDR);
    return AD_MAX;
}

static void make_nonce(const strz_aead_t *a, unsigned char iv[12])
{
    memset(iv, 0, 12);
    for (int i = 0; i < 8; i++)
        iv[i] = (unsigned char)(a->next >> (8 * i));
}

#ifdef STRZ_AEAD_OPENSSL
/* EVP lengths are int: long records go through in pieces. */
#define PIECE ((size_t)1 << 30)

static int evp_seal(strz_aead_t *a, const unsigned char *iv,
                    const unsigned char *ad, size_t adlen, const void *in,
                    size_t len, void *out, unsigned char tag[STRZ_AEAD_TAG])
{
    int n;
    if (EVP_EncryptInit_ex(a->evp, NULL, NULL, NULL, iv) != 1
        || EVP_EncryptUpdate(a->evp, NULL, &n, ad, (int)adlen) != 1)
        return STRATA_EINTERNAL;
    for (size_t off = 0; off < len; off += PIECE) {
        size_t k = len - off < PIECE ? len - off : PIECE;
        if (EVP_EncryptUpdate(a->evp, (unsigned char *)out + off, &n,
                              (const unsigned char *)in + off, (int)k) != 1)
            return STRATA_EINTERNAL;
    }
    unsigned char none[16]; /* GCM's Final writes nothing; out may be NULL */
    if (EVP_EncryptFinal_ex(a->evp, len ? (unsigned char *)out + len : none,
                            &n) != 1
        || EVP_CIPHER_CTX_ctrl(a->evp, EVP_CTRL_GCM_GET_TAG, STRZ_AEAD_TAG,
                               tag) != 1)
        return STRATA_EINTERNAL;
    return 0;
}

static int evp_open(strz_aead_t *a, const unsigned char *iv,
                    const unsigned char *ad, size_t adlen, const void *in,
                    size_t len, void *out, const unsigned char *tag)
{
    int n;
    unsigned char t[STRZ_AEAD_TAG], none[16]; /* none: as in evp_seal */
    memcpy(t, tag, sizeof t);
    if (EVP_DecryptInit_ex(a->evp, NULL, NULL, NULL, iv) != 1
        || EVP_DecryptUpdate(a->evp, NULL, &n, ad, (int)adlen) != 1)
        return -1;
    for (size_t off = 0; off < len; off += PIECE) {
        size_t k = len - off < PIECE ? len - off : PIECE;
        if (EVP_DecryptUpdate(a->evp, (unsigned char *)out + off, &n,
                              (const unsigned char *)in + off, (int)k) != 1)
            return -1;
    }
    if (EVP_CIPHER_CTX_ctrl(a->evp, EVP_CTRL_GCM_SET_TAG, STRZ_AEAD_TAG, t) != 1
        || EVP_DecryptFinal_ex(a->evp, len ? (unsigned char *)out + len : none,
                               &n) != 1)
        return -1;
    return 0;
}
#endif

int strz_aead_seal(strz_aead_t *a, int kind, const unsigned char *hdr,
                   const void *in, size_t len, void *out,
                   unsigned char tag[STRZ_AEAD_TAG])
{
    unsigned char ad[AD_MAX], iv[12];
    int rc;

    if (!a->sealing || (rc = before_record(a, len)) != 0)
        return STRATA_EINTERNAL;
    size_t adlen = make_ad(a, kind, hdr, ad);
    make_nonce(a, iv);
#ifdef STRZ_AEAD_OPENSSL
    rc = evp_seal(a, iv, ad, adlen, in, len, out, tag);
#else
    unsigned long long maclen = 0;
    rc = crypto_aead_aes256gcm_encrypt_detached_afternm(
             out, tag, &maclen, in, len, ad, adlen, NULL, iv, &a->st) == 0
         ? 0 : STRATA_EINTERNAL;
#endif
    if (rc == 0)
        after_record(a, len);
    return rc;
}

int strz_aead_open(strz_aead_t *a, int kind, const unsigned char *hdr,
                   const void *in, size_t len, void *out,
                   const unsigned char tag[STRZ_AEAD_TAG])
{
    unsigned char ad[AD_MAX], iv[12];
    int rc;

    if (a->sealing || before_record(a, len) != 0)
        return -1;
    size_t adlen = make_ad(a, kind, hdr, ad);
    make_nonce(a, iv);
#ifdef STRZ_AEAD_OPENSSL
    rc = evp_open(a, iv, ad, adlen, in, len, out, tag);
#else
    rc = crypto_aead_aes256gcm_decrypt_detached_afternm(
             out, NULL, in, len, tag, ad, adlen, iv, &a->st) == 0 ? 0 : -1;
#endif
    if (rc != 0) {
        if (len)
            memset(out, 0, len); /* nothing unauthenticated stays behind */
        return -1;
    }
    after_record(a, len);
    return 0;
}

uint64_t strz_aead_records(const strz_aead_t *a)
{
    return a->next;
}

uint32_t strz_aead_epoch(const strz_aead_t *a)
{
    return a->epoch;
}

void strz_aead_set_rekey(strz_aead_t *a, uint64_t records, uint64_t bytes)
{
    a->rekey_records = records;
    a->rekey_bytes = bytes;
}
