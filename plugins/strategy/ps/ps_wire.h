/* ps.so -- the wire protocol between the coordinator, the workers and the
 * parameter servers.
 *
 * Every message is one transport message (host->t_send over the
 * STRATA_GROUP_P2P group of all tasks) made of a fixed header of
 * PS_HDR_SIZE bytes and, for PARAMS, PUSH, STATE and STATE_PUT (and, since
 * version 5, STEP_REQ with a result and STEP: the layer states; since 7, a
 * PULL that asks for rows), a payload of `count` 4-byte words:
 *
 *     [header: PS_HDR_SIZE bytes] [payload: 4 x count bytes]
 *
 * A PARAMS answering a whole pull, a STATE or a STATE_PUT whose payload is
 * longer than `[strategy.ps] piece_bytes` goes as several messages, its
 * pieces (v9): each carries the same header but `count`, `at` and the
 * coordinator's tag, and the words [at, at + count) of the payload of
 * `total` words, in order (below: Pieces).
 *
 * All integers and floats are little-endian.
 *
 *   off size field        meaning
 *    0   4   magic        'S' 'T' 'P' 'S'
 *    4   2   version      PS_WIRE_VERSION (9); another version is dropped
 *    6   1   type         enum ps_type
 *    7   1   status       replies: enum ps_status; requests: 0
 *    8   4   sender       group member of the sender (its cluster task index)
 *   12   4   attempt      STEP, PUSH, STEP_REQ's result: 1, 2, ... ; else 0
 *   16   8   step         job-wide step id (STEP, PUSH, PUSH_ACK, STEP_REQ's
 *                         result); -1 when none
 *   24   8   req          request id; a reply echoes its request's (the
 *                         coordinator's control messages: their tag, below)
 *   32   8   incarnation  random id of the sending process (a restarted
 *                         task has a new one)
 *   40   8   a            per type (below)
 *   48   8   b            per type
 *   56   8   c            per type
 *   64   8   f            per type (float64)
 *   72   4   count        4-byte words in the payload (PARAMS, PUSH, STATE,
 *                         STATE_PUT, STEP_REQ with has_res = 1, STEP, a PULL
 *                         with b > 0); else 0
 *   76   4   epoch        STEP: 0-based epoch; FIN_ACK: restores; else 0
 *   80   4   at           the payload's first word within the whole (v9)
 *   84   4   total        words of the whole payload: count unless pieced
 *   88   8   reserved     0
 *
 *   type          from -> to          a                b        c        f
 *   STEP_REQ   1  worker -> coord     samples          metric   has_res  loss_sum
 *                 (metric: the float64 bits of the summed metric, >= 0)
 *                 (status: PS_OK / PS_STALE / PS_FAILED of the previous step
 *                  `step`/`attempt` when has_res = 1, or 2: the same with a
 *                  loss that was not finite, f = 0)
 *                 (payload, has_res = 1 only: the worker's layer states
 *                  after that step -- batchnorm's moving statistics, the
 *                  checkpoint's flat layout -- 0 values or exactly the
 *                  model's state count, every one finite; the coordinator
 *                  keeps those of the newest step applied)
 *   STEP       2  coord -> worker     batch (epoch in `epoch`); c = lease
 *                 (payload: the coordinator's layer states, on the first
 *                  STEP a worker process gets -- a restored checkpoint's or
 *                  the newest step's -- which it installs before the step;
 *                  0 values otherwise or when the model has none)
 *   WAIT       3  coord -> worker     retry after a ms
 *   DONE       4  coord -> worker     1: the job stopped on request (SIGTERM), 0: training is over
 *                 (STEP, WAIT, DONE: b = the worker's own key, which its
 *                  ABORTs are tagged under; 0: none)
 *   HEARTBEAT  5  worker -> coord     -
 *   PULL       6  worker|coord -> ps  -                b = row blocks (v7):
 *                                     0 every shard whole, else that many
 *                                     table shards asked for by row ids
 *                                     (ps_pull.c; count: their words)
 *   PARAMS     7  ps -> puller        version of the ps (steps applied there);
 *                                     b = the PULL's row blocks
 *   PUSH       8  worker -> ps        version the gradient was computed from;
 *                                     f = learning rate (>= 0); c = the
 *                                     STEP's lease; b = row blocks (v6):
 *                                     0 dense, else that many embedding
 *                                     table shards given as rows
 *                                     (ps_rows.c), the others dense
 *   PUSH_ACK   9  ps -> worker        version after; status PS_OK (applied),
 *                                     PS_DUPLICATE (discarded), PS_STALE
 *   PING      10  coord -> ps         lease key (a, b: 16 bytes)
 *   PONG      11  ps -> coord         applied          duplicates malformed
 *   FINISH    12  coord -> ps         1: the job stopped on request, else 0
 *   FIN_ACK   13  ps -> coord         applied          duplicates malformed
 *                                     (`step`: digest of the applied step ids;
 *                                      `epoch`: how often its state was
 *                                      restored by STATE_PUT)
 *   ABORT     14  coord -> any        STRATA_E* code of the failure
 *   STATE_REQ 15  coord -> ps         part             nslots
 *   STATE     16  ps -> coord         part             optimizer steps
 *                                     (status PS_FAILED, no payload: the
 *                                      optimizer has another slot count)
 *   STATE_PUT 17  coord -> ps         part             nslots   optimizer steps
 *                                     (`step`: the steps the state holds)
 *   STATE_ACK 18  ps -> coord         part             (status PS_OK, or
 *                                     PS_FAILED: not installed)
 *   STATE_SAVE 19 coord -> ps         tag              nslots   parts
 *                                     (`step`: the checkpoint's)
 *   STATE_SAVED 20 ps -> coord        optimizer steps  bytes
 *                                     (status PS_OK: its part file is
 *                                      written; PS_FAILED: it is not)
 *
 * Leases (ps_lease.c): a PUSH is applied only when its lease (c) is the
 * coordinator's keyed hash of its step, attempt and sender, as the STEP
 * that handed the step out carried it: a push replayed with another step
 * id, or one nobody was handed, is refused and counted.
 *
 * Control messages (ps_lease.c): PING, FINISH, ABORT, STATE_REQ and
 * STATE_PUT from the coordinator carry as `req` a keyed hash of their
 * header under the lease key (what a ps learns from the first PING): a ps
 * refuses, counts and names one whose tag does not match, so that a forged
 * FINISH, ABORT or STATE_PUT is refused in plaintext too, and a forged
 * reply cannot guess the request it would answer. A ps takes STATE_PUT
 * only before it applied its first push. A worker, which does not hold the
 * lease key, learns a key of its own from the replies to its STEP_REQs
 * (b) and refuses an ABORT whose tag is not the same hash under that key.
 * Version 4 (3 had no tags; workers checked no ABORT before b carried
 * their key, which a worker of then ignores). Version 5 adds the layer
 * states to STEP_REQ and STEP (4 carried no payload there).
 *
 * Layer states (v5): a model with batchnorm trains only on the workers,
 * but the coordinator evaluates and checkpoints. Each worker sends its
 * replica 0's states (strata_step_t.states, plugin ABI 2.8) with the
 * result of every step; the coordinator keeps the states of the highest
 * step id applied (its copy is what a single device would hold with one
 * worker; with several, the statistics of whichever worker's step came
 * last, as TensorFlow's ParameterServerStrategy updates its moving
 * averages from whichever worker ran) and installs them (host
 * states_set) before each evaluation, each step boundary and the job's
 * end. A payload of another count is dropped with the message, counted,
 * never installed.
 *
 * Checkpoints in parts (v8, plugin ABI 2.13): where the core asks for a
 * checkpoint in parts, the coordinator sends every ps STATE_SAVE at once;
 * each writes its shards' values and optimizer slots as its part file
 * (host part_write: part j of nps, under the checkpoint's tag) and
 * answers STATE_SAVED with its optimizer's step count; the coordinator
 * gathers nothing. Version 8: a ps of v7 would refuse STATE_SAVE.
 *
 * Checkpoints (STATE_*): at a step boundary the coordinator gathers the
 * training state of every ps, part by part: part 0 is the values of its
 * shards, part k (1..nslots) the optimizer's slot k-1 for them (Adam: m,
 * v), each in placement order like PARAMS. To restore, it sends every part
 * with STATE_PUT; the ps installs them all when the last part (k = nslots)
 * arrives, sets its optimizer's step count (c) and its version to `step`,
 * and counts steps [0, step) as applied.
 *
 * PARAMS and PUSH carry the values (gradients) of the receiving ps's
 * shards, concatenated in placement order (ps_part.h): one fused message
 * per ps and step, never one per variable.
 *
 * Rows (v6): a worker whose core hands an embedding table's gradient as
 * rows (plugin ABI 2.9, STRATA_CAP_SPARSE) pushes, for each shard of the
 * table on that ps, a row block -- the shard's placement index, the row
 * count, the int64 table row ids (ascending, distinct, within the shard)
 * and their gradient rows -- before the dense values of the ps's other
 * shards (format: ps_rows.c). The ps checks every block (its shard is one
 * of its own, in placement order, at most once; ids in range and
 * ascending; counts that add up to the payload exactly; finite values)
 * before it applies anything, and steps only those rows and their
 * optimizer slots (host opt_step_rows, ABI 2.10). Version 6: a ps of v5
 * would take a row block for dense values, so the version changes.
 *
 * Pulls of rows (v7): a worker that pushes rows asks, before each step,
 * only for the rows its batch reads of each table (host batch_rows, ABI
 * 2.11): its PULL carries, for each shard of a table on that ps, the
 * shard's placement index, the row count and the int64 row ids (a PUSH's
 * row block without values; b = the blocks, count = their words), and the
 * PARAMS answering it (b the same) carries each of the ps's shards in
 * placement order: the rows asked of a named shard, in the request's
 * order, else the whole shard (ps_pull.c). The ps checks the whole request
 * (its own shards, in placement order, at most once each; ids within the
 * shard, ascending and distinct; counts that add up to the message
 * exactly) and drops, counts and names a bad one, unanswered; the worker
 * takes a PARAMS only with the count and blocks its request implies, and
 * sends the request again as any lost PULL. Version 7: a ps of v6 would
 * refuse a PULL with a payload, and a worker of v6 would read a PARAMS of
 * rows as whole shards.
 *
 * Pieces (v9): a payload of more than piece_bytes (PARAMS answering a
 * whole pull, STATE, STATE_PUT) goes as consecutive messages of at most
 * piece_bytes each, at = 0, then the next word, until at + count = total;
 * any other message is one piece (at = 0, total = count). Each piece is a
 * message of its own on the wire (at most window_bytes), so that no size
 * of model needs a window of its size, no message of a gigabyte sits
 * whole in a queue or a receive buffer, and the puller copies each piece
 * into place as it comes (its peak: one piece, not the answer). A
 * receiver takes the pieces of one answer in order: a piece whose `at` is
 * not the next word it awaits (one lost with its connection) voids the
 * answer until the requester asks again, which starts at 0; the pieces of
 * one PARAMS carry one version. A ps sends large answers from a thread of
 * its own (ps_outbox.c) while it goes on serving pushes. Version 9: the
 * header grew by 16 bytes (80 before).
 *
 * A receiver checks the whole message before it uses any field
 * (ps_wire_unpack): total length = PS_HDR_SIZE + 4 x count exactly, magic,
 * version, a known type, a status the type allows, count = 0 for types
 * without payload, attempt >= 1 and step >= 0 where they are required,
 * finite floats (lr > 0), finite layer states (STEP_REQ, STEP). Then the role checks the rest against what it
 * knows (the sender's role, the step range, the payload size of its
 * shards). A message that fails is counted and dropped: never applied,
 * never fatal. */
#ifndef PS_WIRE_H
#define PS_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PS_WIRE_VERSION 9
#define PS_HDR_SIZE     96  /* a multiple of 16: payloads stay aligned */
#define PS_MAX_SLOTS    4   /* optimizer slots a STATE part may name */

enum ps_type {
    PS_STEP_REQ = 1, PS_STEP = 2, PS_WAIT = 3, PS_DONE = 4, PS_HEARTBEAT = 5,
    PS_PULL = 6, PS_PARAMS = 7, PS_PUSH = 8, PS_PUSH_ACK = 9, PS_PING = 10,
    PS_PONG = 11, PS_FINISH = 12, PS_FIN_ACK = 13, PS_ABORT = 14,
    PS_STATE_REQ = 15, PS_STATE = 16, PS_STATE_PUT = 17, PS_STATE_ACK = 18,
    PS_STATE_SAVE = 19, PS_STATE_SAVED = 20,
    PS_TYPE_LAST_ = PS_STATE_SAVED
};

enum ps_status {
    PS_OK = 0, PS_DUPLICATE = 1, PS_STALE = 2, PS_FAILED = 3
};

typedef struct ps_hdr {
    uint8_t  type, status;
    int32_t  sender, attempt, epoch;
    int64_t  step;
    uint64_t req, incarnation;
    int64_t  a, b, c;
    double   f;
    uint32_t count;
    uint32_t at, total;    /* pieces (v9): this payload's first word, and
                              the words of the whole                      */
} ps_hdr_t;

/* May a message of this type go in pieces (v9)? */
static inline int ps_wire_pieced(int type)
{
    return type == PS_PARAMS || type == PS_STATE || type == PS_STATE_PUT;
}

/* The words of the whole payload h belongs to: count for a message that
 * goes whole, and for a header of a pieced type that leaves total 0. */
static inline uint32_t ps_wire_total(const ps_hdr_t *h)
{
    if (!ps_wire_pieced(h->type) || (h->at == 0 && h->total < h->count))
        return h->count;
    return h->total;
}

/* Write PS_HDR_SIZE bytes. */
void ps_wire_pack(const ps_hdr_t *h, unsigned char out[PS_HDR_SIZE]);

/* Check and decode a message of `len` bytes. Returns 0 with *h filled and
 * *payload pointing at the count float32 values (unaligned: copy them out),
 * or -1 with a short static reason in *why. Never reads past len. */
int ps_wire_unpack(const void *msg, size_t len, ps_hdr_t *h,
                   const unsigned char **payload, const char **why);

/* "PUSH", ...; "?" for an unknown type. */
const char *ps_wire_type_name(int type);

/* STEP_REQ's summed metric travels as the bits of a float64 in `b`. */
static inline double ps_wire_metric(const ps_hdr_t *h)
{
    double v;
    memcpy(&v, &h->b, sizeof v);
    return v;
}
static inline void ps_wire_set_metric(ps_hdr_t *h, double v)
{
    memcpy(&h->b, &v, sizeof v);
}

#endif /* PS_WIRE_H */
