/* zmq.so -- the wire format: one small versioned header on every message.
 *
 * A message is one zmq multipart message of 1 or 2 frames:
 *
 *     [header: STRZ_HDR_SIZE bytes] [payload: `length` bytes, when length > 0]
 *
 * (the ROUTER socket that receives it prepends the sender's routing id
 * frame; that frame is zmq's, not ours). All integers are little-endian,
 * and so are the float32 and 16-bit values of payloads.
 *
 *   off size field    meaning
 *    0   4   magic    'S' 'T' 'R' 'Z'
 *    4   2   version  STRZ_WIRE_VERSION (2); another version is refused
 *    6   1   type     HELLO=1 HELLO_ACK=2 DATA=3 BCAST=4 BARRIER=5 ABORT=6
 *                     PROBE=7 PROBE_ACK=8 SHM=9
 *    7   1   flags    DATA: bits 0-3 the all-reduce algorithm
 *                     (STRZ_ALG_RING 0, STRZ_ALG_GATHER 1), bits 4-5 the
 *                     compression of the payload (STRZ_COMP_*: 0 float32,
 *                     1 fp16, 2 bf16: 2 bytes per element); HELLO: bit 0
 *                     STRZ_HELLO_DIRECT when the sender wants a direct data
 *                     socket, bits 1-2 its compression setting (members
 *                     must agree); else 0
 *    8   4   sender   rank of the sender (int32)
 *   12   4   step     ring step of the collective, 0-based; ABORT: the
 *                     failure's STRATA error code, negated (e.g. 11 = EPEER);
 *                     SHM: the trip (1 offer, 2 decision)
 *   16   8   seq      collective sequence number (every member counts its
 *                     collectives the same way; HELLO/HELLO_ACK: 0; ABORT:
 *                     the collective that failed)
 *   24   8   offset   DATA/BCAST/BARRIER: first float32 element of the
 *                     segment in the caller's buffer; PROBE/PROBE_ACK: the
 *                     probe's number; SHM: bytes of one slot; HELLO_ACK:
 *                     the port of the direct data socket offered, or 0;
 *                     else 0
 *   32   4   length   payload bytes (DATA/BCAST/BARRIER: 4 x elements, a
 *                     compressed DATA 2 x elements;
 *                     HELLO: bytes of the job tag, + 32 in a secured group
 *                     with STRZ_HELLO_DIRECT: the sender's X25519 public
 *                     key for the data connection follows the tag;
 *                     HELLO_ACK: 32 in a secured group that offers a
 *                     direct data socket (its X25519 public key), else 0;
 *                     SHM: bytes of the segment's name; else 0)
 *   36   4   aux      HELLO: group size; DATA/BARRIER: reduce op (0 sum,
 *                     1 mean); BCAST: root rank; ABORT: failed rank or -1;
 *                     SHM: 1 = every member so far mapped it, else 0
 *   40   8   total    DATA/BCAST/BARRIER: float32 elements of the whole
 *                     buffer of the collective (all members must agree);
 *                     SHM: the segment's nonce; HELLO_ACK: the token the
 *                     left presents on the direct data socket
 *
 * Sequence of one rendezvous: each rank's DEALER sends HELLO to its right
 * neighbour's ROUTER, which checks magic, version, tag, size and that the
 * sender is its left neighbour, and answers HELLO_ACK. Then a BARRIER runs
 * once around the ring as collective seq 1; later collectives are 2, 3, ...
 * Data (DATA, BCAST, BARRIER, SHM) may travel on a direct TCP connection
 * instead of zmq, with the same headers (direct.c); everything else stays
 * on zmq. In a secured group every byte on a direct connection is an
 * AES-256-GCM record (aead.h): the header in clear with a 16-byte tag,
 * the payload encrypted with a tag of its own. When every member is on this host (shm.c), two SHM trips around the ring
 * before that barrier agree on a shared-memory segment: rank 0 offers it,
 * each member maps it and passes the offer on (aux: all mapped so far),
 * rank 0 unlinks it and sends the decision round.
 *
 * PROBE goes leftwards (a member whose collective passed its deadline
 * while waiting for its left neighbour asks whether that neighbour is
 * alive and waiting too); the left answers PROBE_ACK with the same number
 * from inside any wait. ABORT travels both ways.
 *
 * A receiver checks the header against the frame sizes before it uses any
 * field, then checks type, sender, seq, step, offset, length, aux and total
 * against what it expects next; anything else is STRATA_EPROTO and nothing
 * of the message is applied. */
#ifndef STRZ_WIRE_H
#define STRZ_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define STRZ_WIRE_VERSION 2
#define STRZ_HDR_SIZE     48
#define STRZ_MAX_TAG      255   /* bytes of a job tag in HELLO */

enum strz_type {
    STRZ_HELLO = 1, STRZ_HELLO_ACK = 2, STRZ_DATA = 3, STRZ_BCAST = 4,
    STRZ_BARRIER = 5, STRZ_ABORT = 6, STRZ_PROBE = 7, STRZ_PROBE_ACK = 8,
    STRZ_SHM = 9,
    STRZ_TYPE_LAST = STRZ_SHM
};

/* DATA flags: which all-reduce algorithm the message belongs to. */
enum strz_alg { STRZ_ALG_RING = 0, STRZ_ALG_GATHER = 1 };
#define STRZ_DATA_COMP_SHIFT 4
/* HELLO flags. */
#define STRZ_HELLO_DIRECT 1
#define STRZ_HELLO_COMP_SHIFT 1
#define STRZ_COMP_MASK 3

typedef struct strz_hdr {
    uint16_t version;
    uint8_t  type;
    uint8_t  flags;
    int32_t  sender;
    int32_t  step;
    uint64_t seq;
    uint64_t offset;
    uint32_t length;
    int32_t  aux;
    uint64_t total;
} strz_hdr_t;

/* Writes STRZ_HDR_SIZE bytes (magic and version included) to `out`. */
void strz_wire_pack(const strz_hdr_t *h, unsigned char out[STRZ_HDR_SIZE]);

/* Decodes a header frame of `len` bytes followed by a payload frame of
 * `payload_len` bytes (0 when absent). Checks size, magic, version, type and
 * that `length` equals payload_len. Returns 0, or -1 with a short static
 * reason in *why ("bad magic", ...). Never reads past `len`. */
int strz_wire_unpack(const void *buf, size_t len, size_t payload_len,
                     strz_hdr_t *h, const char **why);

/* Do the fields that identify a message (all but version and sender)
 * agree? */
int strz_hdr_same(const strz_hdr_t *want, const strz_hdr_t *got);

/* "DATA", "ABORT", ...; "?" for an unknown type. */
const char *strz_wire_type_name(int type);

#endif /* STRZ_WIRE_H */
