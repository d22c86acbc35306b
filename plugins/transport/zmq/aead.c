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
 * The cipher, chosen when zmq.so is built (CMakeLists.txt): Intel's
 * intel-ipsec-mb (STRZ_AEAD_IPSECMB) when found, whose AES-GCM picks its
 * code by the CPU's feature bits (VAES + VPCLMULQDQ on AVX-512: 3-4x
 * OpenSSL 3.0's rate on this project's machines, contrib/bench/allreduce
 * cipher_speed); else OpenSSL's EVP AES-256-GCM (STRZ_AEAD_OPENSSL); else
 * libsodium's crypto_aead_aes256gcm. Same records whichever seals, so
 * ranks built either way talk to each other (tests/transport/
 * zmq_aead_test checks each against libsodium's AES-256-GCM). */
#include "aead.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>
#include <strata/plugin.h>

#if defined(STRZ_AEAD_IPSECMB)
#include <intel-ipsec-mb.h>
#include <pthread.h>
#elif defined(STRZ_AEAD_OPENSSL)
#include <openssl/crypto.h>
#include <openssl/evp.h>
#endif

#define CTX_BYTES 24 /* job hash 16, sender 4, receiver 4 */
#define AD_MAX    (CTX_BYTES + 1 + STRZ_AEAD_HDR)

struct strz_aead {
#if defined(STRZ_AEAD_IPSECMB)
    struct gcm_key_data kd;         /* round keys and H powers; 64-aligned */
#elif defined(STRZ_AEAD_OPENSSL)
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

/* ---- the engines: new, key, seal, open, free, name --------------------- */

/* The engines get no NULL buffer: for a record of 0 bytes, whose buffers
 * may be NULL, strz_aead_seal/open pass this instead (intel-ipsec-mb's
 * argument checks and libsodium's nonnull declarations refuse NULL even
 * for no bytes; GCM writes nothing of it). */
static unsigned char g_empty[16];

#if defined(STRZ_AEAD_IPSECMB)
/* The library's AES-256-GCM functions for this CPU, taken once from a
 * manager that init_mb_mgr_auto filled by cpuid, which is then freed: the
 * direct GCM calls use only the key schedule and context they are given,
 * so nothing of the library's stays allocated (zmq.so may be unloaded
 * and loaded again) and every thread may call them. */
static struct {
    aes_gcm_pre_t     pre;
    aes_gcm_enc_dec_t enc, dec;
} g_gcm;
static pthread_once_t g_gcm_once = PTHREAD_ONCE_INIT;
static char           g_name[64];

static void gcm_init(void)
{
    static const char *arch_name[] = { "none", "no AES-NI", "SSE", "AVX",
                                       "AVX2", "AVX-512" };
    IMB_ARCH arch = IMB_ARCH_NONE;
    IMB_MGR *mgr = alloc_mb_mgr(0);
    if (mgr == NULL)
        return;
    init_mb_mgr_auto(mgr, &arch);
    /* no hardware AES: no engine, as libsodium refuses too */
    if (imb_get_errno(mgr) == 0 && arch > IMB_ARCH_NOAESNI) {
        g_gcm.pre = mgr->gcm256_pre;
        g_gcm.enc = mgr->gcm256_enc;
        g_gcm.dec = mgr->gcm256_dec;
        snprintf(g_name, sizeof g_name, "intel-ipsec-mb %s (%s)",
                 imb_get_version_str(),
                 (unsigned)arch < sizeof arch_name / sizeof *arch_name
                     ? arch_name[arch] : "?");
    }
    free_mb_mgr(mgr);
}

static int eng_ready(void)
{
    pthread_once(&g_gcm_once, gcm_init);
    return g_gcm.pre && g_gcm.enc && g_gcm.dec;
}

static const char *eng_name(void)
{
    return eng_ready() ? g_name : "intel-ipsec-mb (unusable)";
}

static int eng_new(strz_aead_t *a)
{
    (void)a;
    return eng_ready() ? 0 : STRATA_EINTERNAL;
}

static int eng_key(strz_aead_t *a)
{
    g_gcm.pre(a->key, &a->kd);
    return 0;
}

static void eng_free(strz_aead_t *a)
{
    (void)a; /* the key schedule is wiped with the struct */
}

static int eng_seal(strz_aead_t *a, const unsigned char *iv,
                    const unsigned char *ad, size_t adlen, const void *in,
                    size_t len, void *out, unsigned char tag[STRZ_AEAD_TAG])
{
    struct gcm_context_data c;
    g_gcm.enc(&a->kd, &c, out, in, len, iv, ad, adlen, tag, STRZ_AEAD_TAG);
    sodium_memzero(&c, sizeof c);
    return 0;
}

static int eng_open(strz_aead_t *a, const unsigned char *iv,
                    const unsigned char *ad, size_t adlen, const void *in,
                    size_t len, void *out, const unsigned char *tag)
{
    /* GCM decrypts and computes the tag; the caller's out is wiped when
     * the tags differ (compared in constant time). t starts as the
     * complement of the tag sent, so a call that wrote nothing (the
     * library's argument checks, which these arguments always pass)
     * could never match. */
    struct gcm_context_data c;
    unsigned char t[STRZ_AEAD_TAG];
    for (int i = 0; i < STRZ_AEAD_TAG; i++)
        t[i] = (unsigned char)~tag[i];
    g_gcm.dec(&a->kd, &c, out, in, len, iv, ad, adlen, t, STRZ_AEAD_TAG);
    sodium_memzero(&c, sizeof c);
    return sodium_memcmp(t, tag, STRZ_AEAD_TAG) == 0 ? 0 : -1;
}

#elif defined(STRZ_AEAD_OPENSSL)
static int eng_ready(void)
{
    return 1;
}

static const char *eng_name(void)
{
    return OpenSSL_version(OPENSSL_VERSION);
}

static int eng_new(strz_aead_t *a)
{
    return (a->evp = EVP_CIPHER_CTX_new()) != NULL ? 0 : STRATA_ENOMEM;
}

static int eng_key(strz_aead_t *a)
{
    int ok = a->sealing
             ? EVP_EncryptInit_ex(a->evp, EVP_aes_256_gcm(), NULL, a->key, NULL)
             : EVP_DecryptInit_ex(a->evp, EVP_aes_256_gcm(), NULL, a->key, NULL);
    return ok == 1 ? 0 : STRATA_EINTERNAL;
}

static void eng_free(strz_aead_t *a)
{
    EVP_CIPHER_CTX_free(a->evp);
}

/* EVP lengths are int: long records go through in pieces. */
#define PIECE ((size_t)1 << 30)

static int eng_seal(strz_aead_t *a, const unsigned char *iv,
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
    /* GCM's Final writes nothing */
    if (EVP_EncryptFinal_ex(a->evp, (unsigned char *)out + len, &n) != 1
        || EVP_CIPHER_CTX_ctrl(a->evp, EVP_CTRL_GCM_GET_TAG, STRZ_AEAD_TAG,
                               tag) != 1)
        return STRATA_EINTERNAL;
    return 0;
}

static int eng_open(strz_aead_t *a, const unsigned char *iv,
                    const unsigned char *ad, size_t adlen, const void *in,
                    size_t len, void *out, const unsigned char *tag)
{
    int n;
    unsigned char t[STRZ_AEAD_TAG];
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
        || EVP_DecryptFinal_ex(a->evp, (unsigned char *)out + len, &n) != 1)
        return -1;
    return 0;
}

#else /* libsodium */
static int eng_ready(void)
{
    return 1;
}

static const char *eng_name(void)
{
    return "libsodium " SODIUM_VERSION_STRING;
}

static int eng_new(strz_aead_t *a)
{
    (void)a;
    return 0;
}

static int eng_key(strz_aead_t *a)
{
    return crypto_aead_aes256gcm_beforenm(&a->st, a->key) == 0
           ? 0 : STRATA_EINTERNAL;
}

static void eng_free(strz_aead_t *a)
{
    (void)a;
}

static int eng_seal(strz_aead_t *a, const unsigned char *iv,
                    const unsigned char *ad, size_t adlen, const void *in,
                    size_t len, void *out, unsigned char tag[STRZ_AEAD_TAG])
{
    unsigned long long maclen = 0;
    return crypto_aead_aes256gcm_encrypt_detached_afternm(
               out, tag, &maclen, in, len, ad, adlen, NULL, iv, &a->st) == 0
           ? 0 : STRATA_EINTERNAL;
}

static int eng_open(strz_aead_t *a, const unsigned char *iv,
                    const unsigned char *ad, size_t adlen, const void *in,
                    size_t len, void *out, const unsigned char *tag)
{
    return crypto_aead_aes256gcm_decrypt_detached_afternm(
               out, NULL, in, len, tag, ad, adlen, iv, &a->st) == 0 ? 0 : -1;
}
#endif

/* ---- records ------------------------------------------------------------ */

int strz_aead_available(void)
{
    /* sodium_init() is idempotent and thread-safe. Then libsodium's
     * check: AES-NI and PCLMULQDQ (cpuid), which every engine's fast path
     * needs as well. */
    return sodium_init() >= 0 && crypto_aead_aes256gcm_is_available()
           && eng_ready();
}

const char *strz_aead_engine(void)
{
    return eng_name();
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
    if (eng_new(a) != 0 || eng_key(a) != 0) {
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
    eng_free(a);
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
        if (eng_key(a) != 0)
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
    if (len == 0)
        in = out = g_empty;
    rc = eng_seal(a, iv, ad, adlen, in, len, out, tag);
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
    if (len == 0)
        in = out = g_empty;
    rc = eng_open(a, iv, ad, adlen, in, len, out, tag);
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
