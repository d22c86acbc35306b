/* cipher_speed -- one core's sealing and opening rate for the ciphers a
 * secured all-reduce can use, on records of the ring's chunk size:
 *
 *   aes256gcm-ipsecmb   intel-ipsec-mb's AES-256-GCM (what zmq.so's
 *                       aead.c uses when built with it; VAES on AVX-512)
 *   aes256gcm-openssl   OpenSSL EVP AES-256-GCM (aead.c without
 *                       intel-ipsec-mb)
 *   aes256gcm-sodium    libsodium crypto_aead_aes256gcm (aead.c without
 *                       OpenSSL)
 *   xsalsa20poly1305    libsodium crypto_secretbox: CurveZMQ's per-message
 *                       cipher (libzmq 4.3.4 seals with it)
 *   memcpy              the same bytes copied, for scale
 *
 *   cipher_speed [RECORD_BYTES [SECONDS]]      (262144, 0.5)
 *
 * Prints "CIPHER <name> <seal GB/s> <open GB/s>", the best of 3 runs of
 * SECONDS each (the machine is shared: the best run is the one least
 * disturbed). Build: cc -O2 cipher_speed.c -lsodium -lcrypto -lIPSec_MB. */
#include <intel-ipsec-mb.h>
#include <openssl/evp.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

enum { IPSECMB, OSSL, SODIUM, SECRETBOX, COPY };
static const char *k_name[] = { "aes256gcm-ipsecmb", "aes256gcm-openssl",
                                "aes256gcm-sodium", "xsalsa20poly1305",
                                "memcpy" };

static unsigned char key[32], ad[73], tag[16], nonce[24];
static EVP_CIPHER_CTX *g_enc, *g_dec;
static crypto_aead_aes256gcm_state g_st;
static IMB_MGR *g_mgr;
static struct gcm_key_data g_kd __attribute__((aligned(64)));

static int one(int which, int open, unsigned char *m, unsigned char *c,
               size_t n, uint64_t i)
{
    int l;
    memcpy(nonce, &i, sizeof i);
    switch (which) {
    case IPSECMB: {
        struct gcm_context_data cd;
        unsigned char t[16];
        if (!open) {
            IMB_AES256_GCM_ENC(g_mgr, &g_kd, &cd, c, m, n, nonce, ad,
                               sizeof ad, tag, 16);
            return 0;
        }
        IMB_AES256_GCM_DEC(g_mgr, &g_kd, &cd, m, c, n, nonce, ad, sizeof ad,
                           t, 16);
        return sodium_memcmp(t, tag, 16); /* as aead.c checks it */
    }
    case OSSL:
        if (!open)
            return EVP_EncryptInit_ex(g_enc, NULL, NULL, NULL, nonce) != 1
                   || EVP_EncryptUpdate(g_enc, NULL, &l, ad, sizeof ad) != 1
                   || EVP_EncryptUpdate(g_enc, c, &l, m, (int)n) != 1
                   || EVP_EncryptFinal_ex(g_enc, c + n, &l) != 1
                   || EVP_CIPHER_CTX_ctrl(g_enc, EVP_CTRL_GCM_GET_TAG, 16,
                                          tag) != 1;
        return EVP_DecryptInit_ex(g_dec, NULL, NULL, NULL, nonce) != 1
               || EVP_DecryptUpdate(g_dec, NULL, &l, ad, sizeof ad) != 1
               || EVP_DecryptUpdate(g_dec, m, &l, c, (int)n) != 1
               || EVP_CIPHER_CTX_ctrl(g_dec, EVP_CTRL_GCM_SET_TAG, 16,
                                      tag) != 1
               || EVP_DecryptFinal_ex(g_dec, m + n, &l) != 1;
    case SODIUM:
        if (!open)
            return crypto_aead_aes256gcm_encrypt_detached_afternm(
                c, tag, NULL, m, n, ad, sizeof ad, NULL, nonce, &g_st);
        return crypto_aead_aes256gcm_decrypt_detached_afternm(
            m, NULL, c, n, tag, ad, sizeof ad, nonce, &g_st);
    case SECRETBOX:
        if (!open)
            return crypto_secretbox_detached(c, tag, m, n, nonce, key);
        return crypto_secretbox_open_detached(m, c, tag, n, nonce, key);
    default:
        memcpy(open ? m : c, open ? c : m, n);
        return 0;
    }
}

/* GB/s of sealing (open = 0) or opening the record sealed last. */
static double rate(int which, int open, unsigned char *m, unsigned char *c,
                   size_t n, double secs)
{
    static uint64_t last; /* the nonce of the last record sealed */
    double best = 0;
    for (int run = 0; run < 3; run++) {
        double t0 = now_s(), t;
        uint64_t k = 0;
        do {
            if (open) {
                /* the same record each time: its nonce is the last seal's */
                if (one(which, 1, m, c, n, last) != 0) {
                    fprintf(stderr, "cipher_speed: %s: open failed\n",
                            k_name[which]);
                    exit(1);
                }
            } else if (one(which, 0, m, c, n, last = k) != 0) {
                fprintf(stderr, "cipher_speed: %s: seal failed\n",
                        k_name[which]);
                exit(1);
            }
            k++;
        } while ((t = now_s() - t0) < secs);
        double r = (double)n * (double)k / t / 1e9;
        best = r > best ? r : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 262144;
    double secs = argc > 2 ? atof(argv[2]) : 0.5;
    if (n == 0 || n > (1u << 30) || !(secs > 0) || sodium_init() < 0)
        return 2;
    unsigned char *m = malloc(n + 16), *c = malloc(n + 16);
    if (!m || !c)
        return 2;
    randombytes_buf(key, sizeof key);
    randombytes_buf(m, n);
    g_enc = EVP_CIPHER_CTX_new();
    g_dec = EVP_CIPHER_CTX_new();
    if (!g_enc || !g_dec
        || EVP_EncryptInit_ex(g_enc, EVP_aes_256_gcm(), NULL, key, NULL) != 1
        || EVP_DecryptInit_ex(g_dec, EVP_aes_256_gcm(), NULL, key, NULL) != 1)
        return 2;
    int aes = crypto_aead_aes256gcm_is_available();
    if (aes)
        crypto_aead_aes256gcm_beforenm(&g_st, key);
    IMB_ARCH arch = IMB_ARCH_NONE;
    if ((g_mgr = alloc_mb_mgr(0)) == NULL)
        return 2;
    init_mb_mgr_auto(g_mgr, &arch);
    IMB_AES256_GCM_PRE(g_mgr, key, &g_kd);
    printf("# record %zu bytes, best of 3 x %.2f s; AES-NI+PCLMUL: %s; "
           "intel-ipsec-mb %s arch %d (5: AVX-512)\n", n, secs,
           aes ? "yes" : "no", imb_get_version_str(), (int)arch);
    for (int w = IPSECMB; w <= COPY; w++) {
        if ((w == SODIUM || w == IPSECMB) && !aes)
            continue;
        double s = rate(w, 0, m, c, n, secs);
        double o = rate(w, 1, m, c, n, secs);
        printf("CIPHER %-18s %6.2f %6.2f\n", k_name[w], s, o);
    }
    EVP_CIPHER_CTX_free(g_enc);
    EVP_CIPHER_CTX_free(g_dec);
    free_mb_mgr(g_mgr);
    free(m);
    free(c);
    return 0;
}
