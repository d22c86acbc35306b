/* strata core -- the rendezvous: tasks that do not know each other's
 * addresses (torchrun across nodes, Open MPI; cluster.h) learn them before
 * any transport opens. Internal.
 *
 * Task 0 of the cluster (rank 0) serves the rendezvous at
 * cluster.pub.rendezvous: TCP at exactly that host:port (the address the
 * host resolves to, never every interface), or an abstract Unix socket
 * ("unix:@NAME", Open MPI on one node; peers of another uid are refused,
 * both ways). Every other task picks a free port on the local address of
 * its connection to the rendezvous (the interface that routes to rank 0),
 * registers (world size, rank, host:port) and receives the whole table;
 * rank 0 itself takes a free port on the address it serves at. Then every
 * task's address is known and the transports open as with any other
 * source.
 *
 * Only the job's tasks take part. Rank 0 opens every connection with a
 * CHALLENGE (a fresh nonce, and how it authenticates); a REGISTER and the
 * TABLE carry a tag over that nonce and their body, keyed with what rank 0
 * and that task share (rdzv_auth.c): with the job's CURVE keys
 * ([security] keys, launch's memfd), the X25519 key of rank 0's and the
 * task's key pairs, so that only the holder of rank r's secret key can
 * register as rank r and only rank 0 can hand out the table; in plaintext
 * mode with [security] token, a key derived from that token (a member can
 * then speak for another; a stranger cannot). A REGISTER whose tag does not
 * verify is a stranger's: dropped, counted, named in a (rate-limited)
 * warning, and told REFUSED (why = AUTH, untagged: rank 0 does not know
 * whom it answers). Every other REFUSED is tagged for its connection, and
 * a task that authenticates drops (counts, names) one that is not: a
 * forged REFUSED cannot end it, and a task with other keys ends at its
 * timeout naming the refusals it dropped. A replay fails on the nonce. Both sides must agree on how
 * they authenticate, else the task names both. Without keys or token (mode
 * off, no token) the rendezvous is as open as plaintext mode's network.
 *
 * Two claims of one rank, both authenticated (two nodes given the same
 * --node-rank, a task started twice), are not a stranger: rank 0 ends the
 * rendezvous with one error naming both addresses, tells every task that
 * registered and, for LINGER_S more, every task that comes, so that every
 * node ends within seconds with that line. A claim that comes after the
 * table went out is answered the same way (rdzv_late.c): rank 0 keeps its
 * address and every task's connection for the run's life, and the job
 * ends on every node with that line.
 *
 * Wire: the membership frames of member/wire.h (CHALLENGE, REGISTER,
 * TABLE, REFUSED; the elastic service speaks the same frames with kinds of
 * its own).
 * Every address must pass strata__cluster_check_addr. A peer whose header
 * is not ours, whose length is over the limit, or whose message does not
 * parse is dropped and logged (rate-limited), never fatal. A REGISTER of another version,
 * world size or a rank already taken is answered with REFUSED, which the
 * task reports as its one error line; rank 0 logs it, naming the peer, and
 * goes on waiting for the job's own tasks. A connection must complete its
 * REGISTER within hello_s, and the whole rendezvous within timeout_s
 * ([cluster] rendezvous_timeout_s): then rank 0 tells every registered
 * task which ranks did not arrive (REFUSED, why = TIMEOUT) and every task
 * fails with that list. */
#ifndef STRATA_CORE_RENDEZVOUS_H
#define STRATA_CORE_RENDEZVOUS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/cluster.h"
#include "wire.h"

/* The rendezvous's names for the wire's (member/wire.h). */
#define STRATA_RDZV_VERSION    STRATA_MEMBER_VERSION
#define STRATA_RDZV_HDR        STRATA_MEMBER_HDR
#define STRATA_RDZV_MAX_ADDR   STRATA_MEMBER_MAX_ADDR
#define STRATA_RDZV_MAX_REASON STRATA_MEMBER_MAX_REASON
#define STRATA_RDZV_REG_MAX    STRATA_MEMBER_REG_MAX

#define STRATA_RDZV_TAG        STRATA_MEMBER_TAG
#define STRATA_RDZV_NONCE      STRATA_MEMBER_NONCE

enum { STRATA_RDZV_REGISTER = STRATA_MEMBER_REGISTER,
       STRATA_RDZV_TABLE = STRATA_MEMBER_TABLE,
       STRATA_RDZV_REFUSED = STRATA_MEMBER_REFUSED,
       STRATA_RDZV_CHALLENGE = STRATA_MEMBER_CHALLENGE };
/* Why a REFUSED: the task's error code follows from it. */
enum { STRATA_RDZV_WHY_CONFIG = 1,  /* version, world size, rank taken  */
       STRATA_RDZV_WHY_TIMEOUT = 2, /* ranks missing at the deadline    */
       STRATA_RDZV_WHY_STOPPED = 3,
       STRATA_RDZV_WHY_AUTH = 4 };  /* the REGISTER's tag did not verify */

/* How the rendezvous authenticates (a CHALLENGE's auth byte). */
enum { STRATA_RDZV_AUTH_NONE = 0, STRATA_RDZV_AUTH_KEYS = 1,
       STRATA_RDZV_AUTH_TOKEN = 2 };

/* What this task shares with the others (rdzv_auth.c makes it). */
typedef struct strata__rdzv_auth {
    int            kind;        /* STRATA_RDZV_AUTH_*                      */
    uint32_t       world;
    /* KEYS: rank 0 holds key[r] for every rank r >= 1, rank r key[0];
     * TOKEN: every entry is the token's key. world x 32 bytes. */
    unsigned char (*key)[32];
} strata__rdzv_auth_t;

/* The rendezvous after the table (rdzv_late.c). */
typedef struct strata__rdzv_late strata__rdzv_late_t;

typedef struct strata__rdzv_opts {
    double            timeout_s; /* bound on the whole rendezvous        */
    double            hello_s;   /* a connection registers within this   */
    const atomic_int *stop;      /* set: give up (STRATA_ESTOPPED); NULL */
    const strata__rdzv_auth_t *auth; /* NULL: not authenticated          */
    /* non-NULL: on success, *late keeps rank 0's listener and every
     * connection for the run's life (strata__rdzv_late_start); NULL when
     * there was no rendezvous. */
    strata__rdzv_late_t **late;
} strata__rdzv_opts_t;

/* ---- rdzv_late.c: after the table --------------------------------------
 * Rank 0 answers a late authenticated claim of a rank (every rank is
 * taken) with one error naming both addresses, sent (tagged) to the
 * claimant and every task; each task's run then stops and fails with that
 * line. A stranger after the table is dropped, counted and named. */
int  strata__rdzv_late_new(strata__rdzv_late_t **out, const char *ep,
                           uint32_t world, uint32_t self,
                           const strata__rdzv_auth_t *auth);
/* A connection to keep: rank 0 keeps each task's (rank, its address),
 * a task rank 0's (rank 0, addr NULL). `nonce`: the connection's. */
int  strata__rdzv_late_keep(strata__rdzv_late_t *l, int fd, int32_t rank,
                            const uint8_t *nonce, const char *from,
                            const char *addr);
void strata__rdzv_late_listen(strata__rdzv_late_t *l, int lfd);
/* Watch in a thread of its own; a verdict sets *stop. NULL l: nothing. */
int  strata__rdzv_late_start(strata__rdzv_late_t *l, atomic_int *stop);
/* Rank 0 ended the job (its error logged once): 1, else 0. `stopping`:
 * the run was stopped; a task then waits up to a second for rank 0's
 * word. */
int  strata__rdzv_late_failed(strata__rdzv_late_t *l, int stopping);
/* Stops the watcher, closes everything, frees l (NULL: nothing). */
void strata__rdzv_late_end(strata__rdzv_late_t *l);

/* ---- rdzv_auth.c ------------------------------------------------------ */

/* The keys of task rank `self` of `c` with the job's CURVE keys `k`
 * (every rank's public key must be there). 0, or STRATA_ECONFIG (a key
 * missing or not Z85: logged) / STRATA_ENOMEM. */
struct strata__keys;
int  strata__rdzv_auth_keys(strata__rdzv_auth_t *a, const strata__cluster_t *c,
                            const struct strata__keys *k);
/* The key of a shared token (16 to 256 printable characters). */
int  strata__rdzv_auth_token(strata__rdzv_auth_t *a, uint32_t world,
                             const char *token);
/* Wipes and frees; accepts a zeroed struct. */
void strata__rdzv_auth_free(strata__rdzv_auth_t *a);
/* The tag of message kind `kind` with `body` on the connection of `nonce`,
 * under the key shared with rank `peer`. */
void strata__rdzv_tag(const strata__rdzv_auth_t *a, uint32_t peer, int kind,
                      const uint8_t *nonce, const uint8_t *body, size_t len,
                      uint8_t tag[STRATA_RDZV_TAG]);
/* The tag verifies: 1, else 0 (in constant time). */
int  strata__rdzv_tag_ok(const strata__rdzv_auth_t *a, uint32_t peer, int kind,
                         const uint8_t *nonce, const uint8_t *body, size_t len,
                         const uint8_t tag[STRATA_RDZV_TAG]);
/* "not authenticated", "the job's keys", "[security] token". */
const char *strata__rdzv_auth_name(int kind);

#define STRATA_RDZV_HELLO_S 5.0  /* hello_s of a real job */

/* Fill in the address of every task of `c` through c->pub.rendezvous, as
 * described above. Does nothing (0) unless the job has several tasks, a
 * rendezvous and a task without an address. Returns 0 with every
 * tasks[i].address set, else one error line and STRATA_ETIMEDOUT (someone
 * did not arrive), STRATA_ECONFIG (refused: world size, duplicate rank,
 * version; rank 0 not on the rendezvous host), STRATA_EPROTO (what came
 * back is not a valid table), STRATA_EIO (a socket failed: port in use),
 * STRATA_ESTOPPED (*stop was set), STRATA_ENOMEM. */
int strata__rendezvous(strata__cluster_t *c, const strata__rdzv_opts_t *o);
/* The job needs the rendezvous (what strata__rendezvous does nothing
 * without): 1, else 0. */
int strata__rendezvous_wanted(const strata__cluster_t *c);

/* ---- the wire (rdzv_wire.c: the rendezvous's view of member/wire.h,
 * with its addresses checked by strata__cluster_check_addr), also for
 * tests --------------------------------------------------------------- */

typedef struct strata__rdzv_hdr {
    int      version, type;
    uint32_t len;
} strata__rdzv_hdr_t;

/* Writes a header into p[STRATA_RDZV_HDR]. */
void strata__rdzv_put_hdr(uint8_t *p, int type, uint32_t len);
/* Reads p[STRATA_RDZV_HDR]: 0; -1 not our magic; -2 another version
 * (h->version says which); -3 a type that is not the rendezvous's (an
 * elastic kind too); -4 length over the type's limit for a job of `world`
 * tasks. */
int strata__rdzv_get_hdr(const uint8_t *p, uint32_t world,
                         strata__rdzv_hdr_t *h);
/* Limit of a body of `type` for a job of `world` tasks. */
size_t strata__rdzv_body_max(int type, uint32_t world);

/* A whole REGISTER message into out (STRATA_RDZV_HDR + STRATA_RDZV_REG_MAX
 * bytes); returns its length, 0 when addr is too long. */
size_t strata__rdzv_register(uint8_t *out, uint32_t world, uint32_t rank,
                             const char *addr);
/* A REGISTER body: 0, or -1 with why. addr: STRATA_RDZV_MAX_ADDR + 1. */
int strata__rdzv_register_parse(const uint8_t *body, size_t len,
                                uint32_t *world, uint32_t *rank, char *addr,
                                char *why, size_t whylen);
/* A whole TABLE message, malloc'd (*len bytes); NULL when out of memory. */
uint8_t *strata__rdzv_table(char *const *addrs, uint32_t world, size_t *len);
/* A TABLE body of a job of `world` tasks: 0 with addrs[0..world) strdup'd
 * (the caller frees them), or -1 with why (addrs then hold nothing),
 * STRATA_ENOMEM. Checks every address and that none appears twice. */
int strata__rdzv_table_parse(const uint8_t *body, size_t len, uint32_t world,
                             char **addrs, char *why, size_t whylen);
/* A whole REFUSED message into out (STRATA_RDZV_HDR + 1 +
 * STRATA_RDZV_MAX_REASON bytes; a longer reason is cut); its length. */
size_t strata__rdzv_refused(uint8_t *out, int why, const char *reason);
/* A REFUSED body: *code its why byte, reason[STRATA_RDZV_MAX_REASON + 1]
 * its text (printable); 0, or -1 with why. */
int strata__rdzv_refused_parse(const uint8_t *body, size_t len, int *code,
                               char *reason, char *why, size_t whylen);

#endif /* STRATA_CORE_RENDEZVOUS_H */
