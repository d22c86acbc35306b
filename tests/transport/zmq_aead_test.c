/* zmq_aead_test -- the bulk channel's records (plugins/transport/zmq/aead.c):
 * the two ends of a link agree, every tampering is refused (bit flips in
 * ciphertext, tag or header, replay, reordering, truncation, another
 * direction, kind or job) without advancing the counter, the ratchet
 * keeps both ends in step, and the bytes are exactly the documented
 * format at every length class (recomputed here with libsodium's own
 * AES-256-GCM, so the intel-ipsec-mb or OpenSSL build is checked against
 * a second implementation). Skips (77)
 * on a CPU without AES-NI/PCLMULQDQ. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "check.h"
#include "../../plugins/transport/zmq/aead.h"

#define LEN 1000

static const char *k_tag = "job-aead-test";

/* The documented record: key = kdf(session key, 0, "strzbulk"), nonce =
 * counter LE64 || 0^32, AD = blake2b-128(tag) || from || to || kind ||
 * header. */
static int spec_seal(const unsigned char session[32], uint64_t counter,
                     int32_t from, int32_t to, int kind,
                     const unsigned char *hdr, const unsigned char *in,
                     size_t len, unsigned char *out, unsigned char tag[16])
{
    unsigned char key[32], iv[12] = { 0 }, ad[24 + 1 + STRZ_AEAD_HDR];
    unsigned long long tl = 0;
    size_t adlen = 25;
    crypto_kdf_derive_from_key(key, 32, 0, "strzbulk", session);
    for (int i = 0; i < 8; i++)
        iv[i] = (unsigned char)(counter >> (8 * i));
    crypto_generichash(ad, 16, (const unsigned char *)k_tag, strlen(k_tag),
                       NULL, 0);
    for (int i = 0; i < 4; i++) {
        ad[16 + i] = (unsigned char)((uint32_t)from >> (8 * i));
        ad[20 + i] = (unsigned char)((uint32_t)to >> (8 * i));
    }
    ad[24] = (unsigned char)kind;
    if (hdr) {
        memcpy(ad + 25, hdr, STRZ_AEAD_HDR);
        adlen += STRZ_AEAD_HDR;
    }
    return crypto_aead_aes256gcm_encrypt_detached(out, tag, &tl, in, len, ad,
                                                  adlen, NULL, iv, key);
}

/* Every length class the engines treat apart (partial blocks, the 4-,
 * 8-, 16- and 48-block loops, records of the ring's chunk size and
 * longer), sealed out of place and in place on a fresh link: each record
 * the documented bytes, each opened back to the message. */
static void sweep(void)
{
    static const size_t lens[] = { 1, 15, 16, 17, 63, 64, 65, 127, 128, 129,
                                   255, 256, 257, 767, 768, 769, 4109,
                                   65536, 262151, (1u << 20) + 5 };
    const size_t max = (1u << 20) + 5;
    unsigned char *msg = malloc(max), *ct = malloc(max), *ct2 = malloc(max),
                  *pt = malloc(max);
    unsigned char hdr[STRZ_AEAD_HDR], tag[16], tag2[16], k_rx[32], k_tx[32];
    strz_kx_t l, r;
    strz_aead_t *l_tx, *l_rx, *r_tx, *r_rx;
    CHECK(msg && ct && ct2 && pt);
    CHECK(strz_kx_new(&l) == 0 && strz_kx_new(&r) == 0);
    CHECK(strz_aead_link(&l, r.pk, 1, k_tag, 1, 2, &l_tx, &l_rx) == 0);
    CHECK(strz_aead_link(&r, l.pk, 0, k_tag, 2, 1, &r_tx, &r_rx) == 0);
    CHECK(crypto_kx_client_session_keys(k_rx, k_tx, l.pk, l.sk, r.pk) == 0);
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
        size_t len = lens[i];
        int in_place = (int)(i & 1);
        randombytes_buf(msg, len);
        randombytes_buf(hdr, sizeof hdr);
        memcpy(ct, msg, len);
        CHECK(strz_aead_seal(l_tx, STRZ_REC_PAYLOAD, hdr, in_place ? ct : msg,
                             len, ct, tag) == 0);
        CHECK(spec_seal(k_tx, i, 1, 2, STRZ_REC_PAYLOAD, hdr, msg, len, ct2,
                        tag2) == 0);
        CHECK(memcmp(ct, ct2, len) == 0 && memcmp(tag, tag2, 16) == 0);
        if (in_place) {
            CHECK(strz_aead_open(r_rx, STRZ_REC_PAYLOAD, hdr, ct, len, ct,
                                 tag) == 0);
            CHECK(memcmp(ct, msg, len) == 0);
        } else {
            CHECK(strz_aead_open(r_rx, STRZ_REC_PAYLOAD, hdr, ct, len, pt,
                                 tag) == 0);
            CHECK(memcmp(pt, msg, len) == 0);
        }
    }
    /* a long record cut by one byte, and its last byte flipped */
    size_t len = max;
    CHECK(strz_aead_seal(l_tx, STRZ_REC_PAYLOAD, hdr, msg, len, ct, tag) == 0);
    CHECK(strz_aead_open(r_rx, STRZ_REC_PAYLOAD, hdr, ct, len - 1, pt,
                         tag) == -1);
    ct[len - 1] ^= 0x40;
    CHECK(strz_aead_open(r_rx, STRZ_REC_PAYLOAD, hdr, ct, len, pt, tag) == -1);
    ct[len - 1] ^= 0x40;
    CHECK(strz_aead_open(r_rx, STRZ_REC_PAYLOAD, hdr, ct, len, pt, tag) == 0);
    CHECK(memcmp(pt, msg, len) == 0);
    strz_aead_free(l_tx);
    strz_aead_free(l_rx);
    strz_aead_free(r_tx);
    strz_aead_free(r_rx);
    strz_kx_wipe(&l);
    strz_kx_wipe(&r);
    free(msg);
    free(ct);
    free(ct2);
    free(pt);
}

int main(void)
{
    if (!strz_aead_available()) {
        printf("SKIPPED: no AES-NI/PCLMULQDQ\n");
        return 77;
    }
    printf("engine: %s\n", strz_aead_engine());
    strz_kx_t left, right;
    CHECK(strz_kx_new(&left) == 0 && strz_kx_new(&right) == 0);
    strz_aead_t *l_tx, *l_rx, *r_tx, *r_rx;
    /* left = rank 1 (crypto_kx client), right = rank 2 */
    CHECK(strz_aead_link(&left, right.pk, 1, k_tag, 1, 2, &l_tx, &l_rx) == 0);
    CHECK(strz_aead_link(&right, left.pk, 0, k_tag, 2, 1, &r_tx, &r_rx) == 0);

    unsigned char hdr[STRZ_AEAD_HDR], msg[LEN], ct[LEN], pt[LEN], tag[16];
    unsigned char ct2[LEN], tag2[16];
    for (int i = 0; i < STRZ_AEAD_HDR; i++)
        hdr[i] = (unsigned char)(i * 3);
    for (int i = 0; i < LEN; i++)
        msg[i] = (unsigned char)(i * 7 + 1);

    /* record 0 left -> right, checked against the format */
    CHECK(strz_aead_seal(l_tx, STRZ_REC_PAYLOAD, hdr, msg, LEN, ct, tag) == 0);
    unsigned char k_rx[32], k_tx[32];
    CHECK(crypto_kx_client_session_keys(k_rx, k_tx, left.pk, left.sk,
                                        right.pk) == 0);
    CHECK(spec_seal(k_tx, 0, 1, 2, STRZ_REC_PAYLOAD, hdr, msg, LEN, ct2,
                    tag2) == 0);
    CHECK(memcmp(ct, ct2, LEN) == 0 && memcmp(tag, tag2, 16) == 0);
    CHECK(memcmp(ct, msg, LEN) != 0);

    /* tampering: each refused, the counter stays, the real one opens */
    for (int t = 0; t < 7; t++) {
        unsigned char c2[LEN], t2[16], h2[STRZ_AEAD_HDR];
        memcpy(c2, ct, LEN);
        memcpy(t2, tag, 16);
        memcpy(h2, hdr, sizeof h2);
        size_t len = LEN;
        int kind = STRZ_REC_PAYLOAD;
        switch (t) {
        case 0: c2[LEN / 2] ^= 0x01; break;   /* bit flip, ciphertext */
        case 1: t2[15] ^= 0x80; break;        /* bit flip, tag        */
        case 2: h2[24] ^= 0x04; break;        /* header: another chunk */
        case 3: len = LEN - 1; break;         /* truncated             */
        case 4: kind = STRZ_REC_HDR; break;   /* another kind          */
        case 5: h2[16] ^= 0x01; break;        /* another collective    */
        case 6: c2[0] ^= 0xff, c2[LEN - 1] ^= 0x10; break;
        }
        CHECK(strz_aead_open(r_rx, kind, h2, c2, len, pt, t2) == -1);
        CHECK(strz_aead_records(r_rx) == 0);
    }
    /* the other direction's key does not open it */
    CHECK(strz_aead_open(l_rx, STRZ_REC_PAYLOAD, hdr, ct, LEN, pt, tag) == -1);
    CHECK(strz_aead_open(r_rx, STRZ_REC_PAYLOAD, hdr, ct, LEN, pt, tag) == 0);
    CHECK(memcmp(pt, msg, LEN) == 0);
    /* replay of record 0 */
    CHECK(strz_aead_open(r_rx, STRZ_REC_PAYLOAD, hdr, ct, LEN, pt, tag) == -1);

    /* reordering: records 1 and 2 swapped; in place */
    unsigned char c1[LEN], t1[16];
    CHECK(strz_aead_seal(l_tx, STRZ_REC_HDR, hdr, NULL, 0, NULL, t1) == 0);
    CHECK(strz_aead_seal(l_tx, STRZ_REC_PAYLOAD, hdr, msg, LEN, c1, tag) == 0);
    CHECK(strz_aead_open(r_rx, STRZ_REC_PAYLOAD, hdr, c1, LEN, pt, tag) == -1);
    CHECK(strz_aead_open(r_rx, STRZ_REC_HDR, hdr, NULL, 0, NULL, t1) == 0);
    CHECK(strz_aead_open(r_rx, STRZ_REC_PAYLOAD, hdr, c1, LEN, c1, tag) == 0);
    CHECK(memcmp(c1, msg, LEN) == 0);

    /* another job's keys from the same key pairs: refused */
    strz_aead_t *o_tx, *o_rx;
    CHECK(strz_aead_link(&right, left.pk, 0, "another-job", 2, 1, &o_tx,
                         &o_rx) == 0);
    CHECK(strz_aead_seal(l_tx, STRZ_REC_HDR, hdr, NULL, 0, NULL, t1) == 0);
    for (int i = 0; i < 3; i++) /* bring o_rx to the same record number */
        CHECK(strz_aead_seal(o_tx, STRZ_REC_HDR, hdr, NULL, 0, NULL, tag) == 0);
    CHECK(strz_aead_open(o_rx, STRZ_REC_HDR, hdr, NULL, 0, NULL, t1) == -1);
    strz_aead_free(o_tx);
    strz_aead_free(o_rx);

    /* right -> left, then the ratchet every 3 records on both ends */
    strz_aead_set_rekey(r_tx, 3, 1u << 30);
    strz_aead_set_rekey(l_rx, 3, 1u << 30);
    for (int i = 0; i < 20; i++) {
        msg[0] = (unsigned char)i;
        CHECK(strz_aead_seal(r_tx, STRZ_REC_PAYLOAD, hdr, msg, LEN, ct,
                             tag) == 0);
        CHECK(strz_aead_open(l_rx, STRZ_REC_PAYLOAD, hdr, ct, LEN, pt,
                             tag) == 0);
        CHECK(memcmp(pt, msg, LEN) == 0);
    }
    CHECK(strz_aead_epoch(r_tx) == 6 && strz_aead_epoch(l_rx) == 6);
    CHECK(strz_aead_records(r_tx) == 20 && strz_aead_records(l_rx) == 20);
    /* a ratchet by bytes on one side only: out of step, refused */
    strz_aead_set_rekey(r_tx, 1000, 10);
    CHECK(strz_aead_seal(r_tx, STRZ_REC_PAYLOAD, hdr, msg, LEN, ct, tag) == 0);
    CHECK(strz_aead_epoch(r_tx) == 7);
    CHECK(strz_aead_open(l_rx, STRZ_REC_PAYLOAD, hdr, ct, LEN, pt, tag) == -1);
    CHECK(strz_aead_records(l_rx) == 20);

    /* a peer key that is no key (all zero: a low-order point) */
    unsigned char zero[STRZ_KX_PK] = { 0 };
    CHECK(strz_aead_link(&left, zero, 1, k_tag, 1, 2, &o_tx, &o_rx) < 0);
    CHECK(o_tx == NULL && o_rx == NULL);

    strz_aead_free(l_tx);
    strz_aead_free(l_rx);
    strz_aead_free(r_tx);
    strz_aead_free(r_rx);
    strz_aead_free(NULL);
    strz_kx_wipe(&left);
    strz_kx_wipe(&right);
    sweep();
    return CHECK_DONE();
}
