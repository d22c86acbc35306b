/* zmq.so -- the bulk channel's AEAD records: AES-256-GCM keyed per link
 * and per direction from an ephemeral X25519 exchange (crypto_kx) whose
 * public halves travel in the CURVE-authenticated HELLO / HELLO_ACK
 * (link.c, io.c). Used by direct.c for every byte of a secured group's
 * direct data connections; docs/security.md states the rules.
 *
 * One strz_aead_t is one direction of one connection: its key, the
 * record counter that is the nonce (never reused, never sent: TCP keeps
 * records in order, so a replayed, dropped or reordered record fails its
 * tag), and the ratchet that replaces the key long before AES-GCM's
 * limits. Not thread-safe: each is used by the thread of the
 * collective. */
#ifndef STRZ_AEAD_H
#define STRZ_AEAD_H

#include <stddef.h>
#include <stdint.h>

#define STRZ_AEAD_TAG   16  /* bytes of a GCM tag                        */
#define STRZ_KX_PK      32  /* bytes of an X25519 public key (crypto_kx)  */
#define STRZ_AEAD_HDR   48  /* bytes of the wire header a record binds    */

/* Rekey (ratchet) after this many records or bytes under one key,
 * whichever comes first. AES-GCM with a 96-bit counter nonce: TLS 1.3
 * (RFC 8446 §5.5) allows 2^24.5 full 16 KiB records (2^38.5 bytes) per
 * key for a 2^-57 margin; 2^24 records and 2^36 bytes stay below both.
 * The counter itself is 64 bits: a link refuses to seal its 2^64-1-th
 * record (WireGuard's REJECT_AFTER_MESSAGES), which no job reaches. */
#define STRZ_AEAD_REKEY_RECORDS (1ull << 24)
#define STRZ_AEAD_REKEY_BYTES   (1ull << 36)

/* What a record is, bound into its associated data: a record of one kind
 * can never be taken for another. */
enum { STRZ_REC_INTRO = 1,   /* the left's first record on a connection  */
       STRZ_REC_HDR = 2,     /* a wire header (authenticated, in clear)  */
       STRZ_REC_PAYLOAD = 3  /* a message's payload (encrypted)          */
};

typedef struct strz_aead strz_aead_t;

/* One side's ephemeral key pair for one link. */
typedef struct strz_kx {
    unsigned char pk[STRZ_KX_PK];
    unsigned char sk[32];
} strz_kx_t;

/* Hardware AES-256-GCM here (AES-NI and PCLMULQDQ) and the library
 * initialised: 1, else 0. */
int strz_aead_available(void);
/* Which implementation seals ("OpenSSL 3.0.19", "libsodium 1.0.18"). */
const char *strz_aead_engine(void);

/* A fresh key pair: 0 or STRATA_EINTERNAL. */
int strz_kx_new(strz_kx_t *kx);
void strz_kx_wipe(strz_kx_t *kx);

/* The two directions of a link from this side's key pair and the peer's
 * public key: `is_left` when this side connected (crypto_kx client).
 * *tx seals what this side sends, *rx opens what it receives; the
 * associated data of both name the job (`tag`) and who sends to whom.
 * 0, or a negative STRATA_E* (a degenerate peer key: EPROTO). */
int strz_aead_link(const strz_kx_t *kx, const unsigned char peer_pk[STRZ_KX_PK],
                   int is_left, const char *tag, int32_t self, int32_t peer,
                   strz_aead_t **tx, strz_aead_t **rx);
void strz_aead_free(strz_aead_t *a); /* NULL: no-op; wipes the key */

/* Seal the next record of kind `kind`: out = AES-GCM(in) (len bytes, may
 * be 0, out may be in), tag[16]; `hdr` (STRZ_AEAD_HDR bytes, or NULL) is
 * bound as associated data. 0, or STRATA_EINTERNAL (library failure, or
 * the counter spent). */
int strz_aead_seal(strz_aead_t *a, int kind, const unsigned char *hdr,
                   const void *in, size_t len, void *out,
                   unsigned char tag[STRZ_AEAD_TAG]);
/* Open the next record: 0 with out = the plaintext (out may be in), or -1
 * when the tag does not match (forged, bit-flipped, replayed, reordered
 * or truncated): then the counter does not advance and `out` holds
 * nothing to use. */
int strz_aead_open(strz_aead_t *a, int kind, const unsigned char *hdr,
                   const void *in, size_t len, void *out,
                   const unsigned char tag[STRZ_AEAD_TAG]);

/* Records sealed or opened so far, and the key's epoch (ratchets). */
uint64_t strz_aead_records(const strz_aead_t *a);
uint32_t strz_aead_epoch(const strz_aead_t *a);
/* Tests: ratchet after `records` records or `bytes` bytes instead. */
void strz_aead_set_rekey(strz_aead_t *a, uint64_t records, uint64_t bytes);

#endif /* STRZ_AEAD_H */
