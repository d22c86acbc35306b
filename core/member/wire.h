/* strata core -- the membership wire: one frame format for the two
 * membership protocols, the rendezvous (rendezvous.h: rank 0 serves, every
 * other task registers) and the elastic membership service (elastic.h:
 * launch --elastic serves, each training process joins generations).
 * Encoders and decoders only: no sockets, no logging, nothing of the run,
 * so that launch links this one source file as libstrata does (libstrata
 * hides its internal symbols). A decoder is total: every length is checked
 * before it is used, and a refusal fills `why` naming the field.
 *
 * Frame, version 3. A 12-byte header and a body:
 *    0  4  magic "SRDV"
 *    4  1  version (3: REFUSED tagged, elastic frames tagged; 2: the
 *          rendezvous's CHALLENGE and tags; 1 had neither)
 *    5  1  kind (below)
 *    6  2  reserved (0; ignored)
 *    8  4  body length, big-endian, at most the kind's limit
 * All integers big-endian; strings are a u16 length and that many
 * printable bytes (no NUL). Rendezvous kinds:
 *  CHALLENGE rank 0 -> task, first on every connection: u8 auth (how
 *            rank 0 authenticates: 0 not, 1 the job's keys, 2 the shared
 *            token), 24 bytes nonce (random, this connection's)
 *  REGISTER  task -> rank 0: u32 world, u32 rank, str addr [, tag]
 *  TABLE     rank 0 -> task: u32 world, world x str addr (rank order)
 *            [, tag]
 *  REFUSED   rank 0 -> task: u8 why, the reason [, tag]
 * The tag (32 bytes, when auth is not 0) binds the body to the
 * connection's nonce under the key rank 0 and that task share
 * (member/rdzv_auth.c); the codec below reads bodies without it. A
 * REFUSED is tagged when rank 0 knows whom it answers (an authenticated
 * REGISTER); one to a stranger, or before the REGISTER, is not, and a
 * task that authenticates drops it (a forged one cannot end it).
 * Elastic kinds (they replace the text lines of before). The service
 * opens every connection with a CHALLENGE (auth 1: the job's keys, 2: the
 * token; a fresh nonce), and every frame after it, both ways, ends with a
 * tag (32 bytes, in the length) under the key the worker and the service
 * share (member_auth.c): keyed BLAKE2b over the direction, the frame's
 * number in that direction, its kind, the nonce and the body. A frame
 * whose tag does not verify is a stranger's: dropped, counted, named.
 *  JOIN      member -> service: str token (empty: the tag authenticates;
 *            version 2 carried the token itself), str name, str addr,
 *            i64 committed (-1: none), u32 timeout_ms (>= 1)
 *  GEN       service -> member: u32 generation, u32 size, u32 rank,
 *            i64 resume_step (-1: a fresh start), then size x
 *            { str name, str addr, i64 committed } in rank order
 *  RESIZE    service -> member: u32 generation (a later one is due)
 *  STOP      service -> member: the reason as the whole body
 *  END       service -> member: empty (training is over)
 *  DONE      member -> service: i64 step (this member finished) */
#ifndef STRATA_CORE_MEMBER_WIRE_H
#define STRATA_CORE_MEMBER_WIRE_H

#include <stddef.h>
#include <stdint.h>

/* ---- the shared limits (the one place for them) ----------------------- */
#define STRATA_MEMBER_VERSION     3
#define STRATA_MEMBER_HDR         12
#define STRATA_MEMBER_MAX_ADDR    263  /* a host of 255 characters, ':', port */
#define STRATA_MEMBER_MAX_REASON  512  /* REFUSED and STOP                     */
#define STRATA_MEMBER_MAX_NAME    63   /* a task's name: "worker:12"           */
#define STRATA_MEMBER_MIN_TOKEN   16   /* the elastic job's secret token       */
#define STRATA_MEMBER_MAX_TOKEN   79
#define STRATA_MEMBER_MAX_MEMBERS 1024 /* of one elastic generation            */
/* A whole message from a member to the elastic service (JOIN, DONE): what
 * the service reads before it knows the peer. */
#define STRATA_MEMBER_CLIENT_MAX  512
#define STRATA_MEMBER_TAG         32   /* a rendezvous message's tag         */
#define STRATA_MEMBER_NONCE       24   /* a CHALLENGE's nonce                */
#define STRATA_MEMBER_KEY         32   /* an elastic worker's shared key     */
#define STRATA_MEMBER_REG_MAX     (10 + STRATA_MEMBER_MAX_ADDR + STRATA_MEMBER_TAG)

enum strata__member_kind {
    STRATA_MEMBER_REGISTER = 1, STRATA_MEMBER_TABLE = 2,
    STRATA_MEMBER_REFUSED = 3, STRATA_MEMBER_CHALLENGE = 4,
    STRATA_MEMBER_JOIN = 16, STRATA_MEMBER_GEN = 17,
    STRATA_MEMBER_RESIZE = 18, STRATA_MEMBER_STOP = 19,
    STRATA_MEMBER_END = 20, STRATA_MEMBER_DONE = 21,
};

/* Which header field a refused header failed on (h->bad). */
enum { STRATA_MEMBER_BAD_MAGIC = 1, STRATA_MEMBER_BAD_VERSION = 2,
       STRATA_MEMBER_BAD_KIND = 3, STRATA_MEMBER_BAD_LENGTH = 4 };

typedef struct strata__member_hdr {
    int      version, kind;
    uint32_t len;
    int      bad;               /* STRATA_MEMBER_BAD_*, 0 when accepted */
} strata__member_hdr_t;

/* "REGISTER", "GEN", ... ; "?" for a kind the wire does not have. */
const char *strata__member_kind_name(int kind);

/* Writes a header into p[STRATA_MEMBER_HDR]. */
void strata__member_put_hdr(uint8_t *p, int kind, uint32_t len);
/* The limit of a body of `kind` (a TABLE: of a job of `world` tasks); 0
 * for a kind the wire does not have. */
size_t strata__member_body_max(int kind, uint32_t world);
/* Reads p[STRATA_MEMBER_HDR]: 0, or STRATA_EPROTO with h->bad and why
 * (h->version and h->kind say what came). */
int strata__member_get_hdr(const uint8_t *p, uint32_t world,
                           strata__member_hdr_t *h, char *why, size_t wn);

/* A check of an address that decoded (printable, 1..MAX_ADDR bytes): 0,
 * or nonzero with why. NULL: none. */
typedef int (*strata__member_addr_check_fn)(const char *addr, char *why,
                                            size_t wn);

/* ---- rendezvous ------------------------------------------------------- */

/* A whole CHALLENGE into out[HDR + 1 + NONCE]: its length. */
size_t strata__member_challenge_encode(uint8_t *out, int auth,
                                       const uint8_t nonce[STRATA_MEMBER_NONCE]);
/* *auth (0, 1 or 2) and nonce[NONCE]: 0, or STRATA_EPROTO with why. */
int strata__member_challenge_decode(const uint8_t *body, size_t len,
                                    int *auth,
                                    uint8_t nonce[STRATA_MEMBER_NONCE],
                                    char *why, size_t wn);
/* A whole REGISTER into out[HDR + REG_MAX]: its length, 0 when addr is
 * too long. */
size_t strata__member_register_encode(uint8_t *out, uint32_t world,
                                      uint32_t rank, const char *addr);
/* addr: STRATA_MEMBER_MAX_ADDR + 1 bytes. 0, or STRATA_EPROTO with why. */
int strata__member_register_decode(const uint8_t *body, size_t len,
                                   uint32_t *world, uint32_t *rank,
                                   char *addr, strata__member_addr_check_fn ck,
                                   char *why, size_t wn);
/* A whole TABLE, malloc'd (*len bytes); NULL when out of memory or an
 * address is too long. */
uint8_t *strata__member_table_encode(char *const *addrs, uint32_t world,
                                     size_t *len);
/* A TABLE of a job of `world` tasks: 0 with addrs[0..world) strdup'd (the
 * caller frees them); else STRATA_EPROTO or STRATA_ENOMEM with why, addrs
 * all NULL. No address appears twice. */
int strata__member_table_decode(const uint8_t *body, size_t len,
                                uint32_t world, char **addrs,
                                strata__member_addr_check_fn ck, char *why,
                                size_t wn);
/* A whole REFUSED into out[HDR + 1 + MAX_REASON] (a longer reason is
 * cut); its length. */
size_t strata__member_refused_encode(uint8_t *out, int why,
                                     const char *reason);
/* *code: the why byte (0 when the body is empty); reason[MAX_REASON + 1]:
 * the text, bytes outside printable ASCII as '?'. 0, or STRATA_EPROTO. */
int strata__member_refused_decode(const uint8_t *body, size_t len, int *code,
                                  char *reason, char *why, size_t wn);

/* ---- elastic ---------------------------------------------------------- */

typedef struct strata__member_join {
    char     token[STRATA_MEMBER_MAX_TOKEN + 1];
    char     name[STRATA_MEMBER_MAX_NAME + 1];
    char     addr[STRATA_MEMBER_MAX_ADDR + 1];
    int64_t  committed;                 /* -1: none                  */
    uint32_t timeout_ms;
} strata__member_join_t;

/* out[STRATA_MEMBER_CLIENT_MAX]: the length, 0 when a field is out of its
 * bounds (the decoder's). */
size_t strata__member_join_encode(uint8_t *out, const strata__member_join_t *j);
int strata__member_join_decode(const uint8_t *body, size_t len,
                               strata__member_join_t *j, char *why, size_t wn);

typedef struct strata__member_gen {
    int32_t  generation, size, rank;
    int64_t  resume_step;               /* -1: a fresh start         */
    char   **names, **addrs;            /* size each                 */
    int64_t *committed;
} strata__member_gen_t;

/* A whole GEN, malloc'd (*len bytes); NULL when out of memory or a field
 * is out of its bounds. */
uint8_t *strata__member_gen_encode(const strata__member_gen_t *g, size_t *len);
/* 0 with *g's arrays malloc'd (strata__member_gen_free), or STRATA_EPROTO
 * / STRATA_ENOMEM with why and *g empty. */
int strata__member_gen_decode(const uint8_t *body, size_t len,
                              strata__member_gen_t *g, char *why, size_t wn);
void strata__member_gen_free(strata__member_gen_t *g);

/* RESIZE: out[HDR + 4]. DONE: out[HDR + 8]. END: out[HDR]. STOP:
 * out[HDR + MAX_REASON] (a longer reason is cut). Each returns the
 * length. */
size_t strata__member_resize_encode(uint8_t *out, int32_t generation);
int strata__member_resize_decode(const uint8_t *body, size_t len,
                                 int32_t *generation, char *why, size_t wn);
size_t strata__member_stop_encode(uint8_t *out, const char *reason);
/* reason[MAX_REASON + 1], as a REFUSED's. */
int strata__member_stop_decode(const uint8_t *body, size_t len, char *reason,
                               char *why, size_t wn);
size_t strata__member_end_encode(uint8_t *out);
int strata__member_end_decode(const uint8_t *body, size_t len, char *why,
                              size_t wn);
size_t strata__member_done_encode(uint8_t *out, int64_t step);
int strata__member_done_decode(const uint8_t *body, size_t len, int64_t *step,
                               char *why, size_t wn);

/* ---- elastic authentication (member_auth.c, libsodium) ---------------- */

enum { STRATA_MEMBER_UP = 0,    /* member -> service */
       STRATA_MEMBER_DOWN = 1 }; /* service -> member */

/* 40 characters of Z85 (a CURVE key's text) into 32 bytes: 0, or -1. */
int strata__member_z85_32(const char *s, unsigned char out[32]);
/* The key of the worker whose CURVE secret key is sk; of every worker of
 * a plaintext job with `token`. 0, or -1 (libsodium cannot start). */
int strata__member_key_secret(const unsigned char sk[32],
                              unsigned char key[STRATA_MEMBER_KEY]);
int strata__member_key_token(const char *token,
                             unsigned char key[STRATA_MEMBER_KEY]);
/* Tags the whole frame msg[n] (room for STRATA_MEMBER_TAG more), frame
 * number `seq` in direction `dir` on the connection of `nonce`; fixes its
 * header's length. Its new length. */
size_t strata__member_seal(const unsigned char key[STRATA_MEMBER_KEY],
                           int dir, uint64_t seq,
                           const uint8_t nonce[STRATA_MEMBER_NONCE],
                           uint8_t *msg, size_t n);
/* The body of a frame of `kind` ends with its tag: 1 with *len less the
 * tag, else 0 (in constant time). */
int strata__member_unseal(const unsigned char key[STRATA_MEMBER_KEY],
                          int dir, uint64_t seq,
                          const uint8_t nonce[STRATA_MEMBER_NONCE], int kind,
                          const uint8_t *body, size_t *len);

#endif /* STRATA_CORE_MEMBER_WIRE_H */
