/* ps.so -- internal declarations shared by the plugin's files.
 *
 *   ps.c         vtable, options, init/fini, create_var, roles, ctl
 *   ps_net.c     the group of all tasks; send, receive, check, requests
 *   ps_server.c  a ps task: shards, optimizer, apply-once, counters
 *   ps_coord.c   the coordinator: messages, liveness, epochs, finish
 *   ps_sched.c   the coordinator's step table and queue
 *   ps_worker.c  a worker: next_step, pull, push, heartbeats
 *   ps_part.c    partitioners and placement (ps_part.h)
 *   ps_wire.c    the message header (ps_wire.h)
 *   ps_rows.c    a PUSH whose embedding tables go as rows (wire v6)
 *   ps_pull.c    a PULL that asks for the rows of a batch (wire v7)
 *   ps_outbox.c  a ps's thread that sends large answers in pieces (v9)
 *
 * Roles, from the cluster (env->cluster): the task of rank 0 (the chief,
 * or worker 0 when there is no chief) is the coordinator and does not
 * train; tasks of rank >= 1 are the workers; "ps" tasks serve variables;
 * any other task (an evaluator) idles. */
#ifndef PS_H
#define PS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <strata/plugin.h>

#include "ps_part.h"
#include "ps_wire.h"

typedef struct ps_cfg {
    const char *partitioner;
    int64_t     max_staleness;
    double      timeout_s;
    int64_t     heartbeat_ms;
    int64_t     min_workers;
    int64_t     resend_ms;
    int         sparse_as_dense;
    int         pull_rows;
    int         checkpoint_parts;
    int64_t     piece_bytes;
} ps_cfg_t;

enum ps_role { PS_ROLE_COORD = 1, PS_ROLE_WORKER, PS_ROLE_PS, PS_ROLE_IDLE };

/* A received message: header decoded, payload in the receive buffer. */
typedef struct ps_msg {
    int                  from;     /* group member                        */
    ps_hdr_t             h;
    const unsigned char *payload;  /* h.count float32 values, or NULL     */
} ps_msg_t;

typedef struct ps_server ps_server_t;
typedef struct ps_coord  ps_coord_t;
typedef struct ps_worker ps_worker_t;
typedef struct ps_outbox ps_outbox_t;

typedef struct ps {
    const strata_host_v2_t *host;
    strata_hctx_t          *hc;            /* every host call's first arg */
    const strata_env_t     *env;
    ps_cfg_t                cfg;
    int                     role;
    int32_t                 cpu;
    /* the group of all tasks: member i = env->cluster->tasks[i] */
    int                     nmembers, self, coord;
    const char            **addrs, **names;
    char                   *name_buf;
    int                    *ps_member;     /* nps: member of ps j          */
    int                    *member_ps;     /* nmembers: ps index or -1     */
    int                    *worker_member; /* nworkers: member of worker w */
    int                    *member_worker; /* nmembers: worker index or -1 */
    int                     nps, nworkers;
    strata_transport_t     *net, *local;
    int                     timeout_ms;
    uint64_t                incarnation;
    atomic_ullong           next_req;
    atomic_llong            malformed;     /* dropped by ps_net_recv       */
    int64_t                 resent;        /* PUSH/PULL sent again         */
    /* leases (ps_lease.c): the coordinator's key, which ps tasks learn */
    unsigned char           lease_key[16];
    int                     lease_key_set;
    /* placement (same on every task) */
    ps_part_t               part;
    ps_place_t              place;
    size_t                  model_count;
    /* worker: embedding tables go as rows (ps.c, rows_allowed), and its
     * pulls ask only for the rows of the step's batch (pull_allowed) */
    int                     rows_ok, pull_rows;
    /* pulls: PARAMS payload bytes taken, and pulls that asked for rows */
    int64_t                 pull_bytes, row_pulls;
    /* worker, coordinator: every replica's copy of the variables */
    float                 **slab;
    int                     nrep;
    const int32_t          *devices;
    /* ps, idle: the host copy the variables point at */
    float                  *master;
    /* messaging buffers */
    unsigned char          *rbuf;          /* receive: one message         */
    size_t                  rcap;
    /* roles */
    ps_server_t            *srv;
    ps_coord_t             *co;
    ps_worker_t            *wk;
    ps_outbox_t            *out;           /* ps: answers going in pieces */
} ps_t;

#define ps_log(p, lvl, ...)                                                  \
    ((p)->host->log((p)->hc, (lvl), "ps", __VA_ARGS__))

/* ---- ps_net.c -------------------------------------------------------- */

int64_t ps_now_ms(void);
/* What `bytes` take on a link of 100 Mbit/s, the slowest we plan for,
 * with a fifth to spare, in ms (1 ms per 10 kB): what a wait on messages
 * of that size allows beyond resend_ms and timeout_s. */
static inline int64_t ps_on_wire_ms(int64_t bytes)
{
    return bytes / 10000;
}
/* Members, names, addresses and roles from the cluster; logs what is
 * missing (no ps, no worker). */
int  ps_net_members(ps_t *p);
/* Open the group of all tasks (a STRATA_GROUP_P2P group; the core chooses
 * its transport from [transport] world). */
int  ps_net_open(ps_t *p);
/* A fresh request id. */
uint64_t ps_net_req(ps_t *p);
/* Header h carries `count` values: a whole payload (total = count)
 * unless the caller made it a piece (at > 0, or total above count). */
static inline void ps_hdr_count(ps_hdr_t *h, uint32_t count)
{
    h->count = count;
    h->total = ps_wire_total(h);
}
/* Words of one piece (v9): payloads longer go in pieces. */
static inline uint32_t ps_piece_words(const ps_t *p)
{
    return (uint32_t)(p->cfg.piece_bytes / 4);
}
/* Send header h (sender and incarnation filled here) and `count` float32
 * values to `member`. timeout_ms <= 0: the strategy's timeout. */
int  ps_net_send(ps_t *p, int member, ps_hdr_t *h, const float *payload,
                 uint32_t count, int timeout_ms);
/* The words [at, at + count) of ps j's payload (its shards, placement
 * order) into `dst`, a flat model buffer on `device`: a piece of it. */
int  ps_scatter_at(ps_t *p, int ps, uint32_t at, const unsigned char *payload,
                   uint32_t count, float *dst, int32_t device);
/* One well-formed message by `deadline` (ps_now_ms clock): 0 with m
 * filled (m->payload points into p->rbuf until the next receive),
 * STRATA_ETIMEDOUT, or a transport error. Malformed messages, and messages
 * whose sender field disagrees with the transport, are counted in
 * p->malformed and dropped. */
int  ps_net_recv(ps_t *p, int64_t deadline, ps_msg_t *m);
/* The text of a STRATA_E* code (plugins do not link the core). */
const char *ps_strerror(int rc);
/* An ABORT from the coordinator (m) ends this task: one line, and the
 * code to end with (the coordinator's own when its core stopped a
 * diverged run, which said so once; else STRATA_EPEER). */
int ps_aborted(ps_t *p, const ps_msg_t *m);
/* The task name of a member ("ps:1") and its address, for messages. */
const char *ps_name(const ps_t *p, int member);
const char *ps_addr(const ps_t *p, int member);
/* Copy a ps's payload (its shards, placement order) into `dst` (a flat
 * model buffer on `device`), or gather them from it into `out` (host). */
int  ps_scatter(ps_t *p, int ps, const unsigned char *payload, float *dst,
                int32_t device);
int  ps_gather(ps_t *p, int ps, const float *src, int32_t device, float *out);

/* ---- ps_server.c ----------------------------------------------------- */

int  ps_server_init(ps_t *p);          /* after placement: optimizer state */
void ps_server_fini(ps_t *p);
int  ps_server_drive(ps_t *p, const strata_drive_t *d);

/* ---- ps_outbox.c ----------------------------------------------------- */

/* The ps's sender of answers in pieces: a thread that sends, piece by
 * piece and puller by puller in turn, what ps_outbox_put hands it, while
 * the ps serves the other messages. */
int  ps_outbox_start(ps_t *p);
void ps_outbox_stop(ps_t *p);
/* Answer `member` with header h and the `total` values of vals (malloc'd;
 * the outbox owns it from now, also on failure): in pieces, from a
 * thread. An answer to `member` not yet sent whole is dropped for it (the
 * puller asked again or moved on). */
int  ps_outbox_put(ps_t *p, int member, const ps_hdr_t *h, float *vals,
                   uint32_t total);
/* STRATA_ECONFIG once a piece could not fit any message (said once),
 * else STRATA_OK: the ps's loop ends on it. */
int  ps_outbox_failed(ps_t *p);
/* An answer (or piece) of n values to `to` that no message of the
 * transport holds: one line naming both keys; STRATA_ECONFIG. */
int  ps_too_long(ps_t *p, int to, size_t n);

/* ---- ps_coord.c ------------------------------------------------------ */

int  ps_coord_init(ps_t *p);
void ps_coord_fini(ps_t *p);
int  ps_coord_drive(ps_t *p, const strata_drive_t *d);
/* STRATA_CTL_STATE_GET (set = 0): gather the state from the ps tasks at a
 * step boundary; STATE_SET: keep it for drive() to push to them. */
int  ps_coord_state(ps_t *p, int set, strata_state_t *st);

/* ---- ps_worker.c ----------------------------------------------------- */

int  ps_worker_init(ps_t *p);
void ps_worker_fini(ps_t *p);
int  ps_worker_next_step(ps_t *p, strata_step_t *st);
/* Replica 0 after the local reduce: push the step's gradients. */
int  ps_worker_push(ps_t *p, const strata_op_t *op);
/* Pull every ps's shards into replica 0, then copy to the others. Also
 * used by the coordinator (handler: its messages that are no PARAMS). */
typedef int (*ps_other_fn)(ps_t *p, const ps_msg_t *m);
struct ps_want;
/* want: the rows to ask for (ps_pull.c), or NULL: every ps's shards. */
int  ps_pull_all(ps_t *p, int64_t *versions, ps_other_fn other,
                 const struct ps_want *want);

/* ---- ps_rows.c ------------------------------------------------------- */

/* One row block of a PUSH (ps_rows.c has the format). */
typedef struct ps_rows {
    int                  shard;    /* index into p->place.shard            */
    uint32_t             nrows;
    size_t               row_len;
    const unsigned char *ids;      /* nrows int64, unaligned               */
    const unsigned char *values;   /* nrows x row_len float32              */
} ps_rows_t;

/* 4-byte words a push to ps `ps` (-1: every ps) may need beyond its dense
 * size: each shard's block header and row ids at most. */
size_t ps_rows_room(const ps_t *p, int ps);
/* Floats per row of a shard; 0 when it has no rows. */
size_t ps_shard_row_len(const ps_shard_t *sh);
/* The head of shard i's row block at o: shard index, row count, and the
 * ids of table t that fall in the shard (a run of its sorted ids, from
 * t->rows[*lo], *n of them). Returns its bytes. */
size_t ps_rows_head(const ps_t *p, int i, const strata_sparse_t *t,
                    unsigned char *o, size_t *lo, uint32_t *n);
/* The payload of ps `ps` for op, whose op->nsparse tables go as rows
 * (host memory): *count words into out, *nblocks row blocks. */
int    ps_rows_pack(ps_t *p, int ps, const strata_op_t *op, float *out,
                    uint32_t *count, int64_t *nblocks);
/* Walk and check the first nblocks row blocks of a payload of len bytes
 * for ps j, with their values (a PUSH's, finite) or without (a PULL's):
 * NULL, with *at past the last and *named the values of the shards they
 * name, or the reason one is malformed. */
const char *ps_rows_blocks(const ps_t *p, int j, const unsigned char *payload,
                           size_t len, int64_t nblocks, int values,
                           size_t *at, size_t *named);
/* Check a PUSH payload of `count` words with `nblocks` row blocks for ps
 * j: NULL when every field is right, else the reason. */
const char *ps_rows_check(const ps_t *p, int j, const unsigned char *payload,
                          uint32_t count, int64_t nblocks);
/* The block at byte `at` of a checked payload (*prev: the last block's
 * shard, -1 first): fills r, returns the byte after it. */
size_t ps_rows_next(const ps_t *p, int j, const unsigned char *payload,
                    uint32_t count, size_t at, int *prev, ps_rows_t *r);
/* The block at byte *at of a payload of len bytes for ps j, with its
 * values or (a PULL's, values = 0) without: fills r, moves *at past it
 * and *prev to its shard. NULL, or the reason it is malformed. */
const char *ps_rows_walk(const ps_t *p, int j, const unsigned char *pl,
                         size_t len, size_t *at, int *prev, ps_rows_t *r,
                         int values);
/* The block's ids within its shard, ascending and distinct: NULL, or the
 * reason they are not. */
const char *ps_rows_ids_check(const ps_t *p, const ps_rows_t *r);

/* ---- ps_pull.c ------------------------------------------------------- */

/* A PULL that asks for rows (wire v7): per ps, the request's row blocks
 * and what the PARAMS answering it must carry. */
typedef struct ps_want {
    float   **words;    /* per ps: the row blocks (ps_rows_room words)   */
    uint32_t *count;    /* per ps: words of words[j]; 0: a whole pull    */
    int64_t  *nblocks;  /* per ps: blocks in words[j]                    */
    uint32_t *reply;    /* per ps: values of the PARAMS                  */
} ps_want_t;

/* The request to ps `ps` for the ntabs tables' rows in `tabs` (host
 * batch_rows, ABI 2.11): a block per shard of a table on that ps (its ids
 * within the shard), into w's entries for ps. STRATA_EINVAL when a table
 * disagrees with the placement. */
int ps_pull_pack(const ps_t *p, int ps, const strata_sparse_t *tabs,
                 size_t ntabs, ps_want_t *w);
/* Check a PULL's payload of count words with nblocks blocks for ps j:
 * NULL, or the reason. */
const char *ps_pull_check(const ps_t *p, int j, const unsigned char *payload,
                          uint32_t count, int64_t nblocks);
/* The PARAMS payload answering a checked request, from the ps's values
 * (host memory): its shards in placement order, of each the rows asked
 * when a block names it, else all its values. Returns its words. */
uint32_t ps_pull_answer(const ps_t *p, int j, const unsigned char *req,
                        uint32_t count, int64_t nblocks, const float *master,
                        float *out);
/* Put an answer (w's request to ps j) into dst, a flat model buffer on
 * `device`: the rows at their places, the dense shards whole. */
int ps_pull_scatter(ps_t *p, int j, const ps_want_t *w,
                    const unsigned char *payload, float *dst, int32_t device);

/* ---- ps_lease.c -------------------------------------------------------- */

/* The coordinator's key, drawn at start. */
int     ps_lease_new_key(ps_t *p);
/* The key as a PING's a and b, and back (a ps learns it so). */
void    ps_lease_key_out(const ps_t *p, int64_t *a, int64_t *b);
void    ps_lease_key_in(ps_t *p, int64_t a, int64_t b);
/* The lease of `step`, `attempt` handed to group member `member`. */
int64_t ps_lease(const ps_t *p, int64_t step, int32_t attempt, int member);
/* A step id mixed over 64 bits: the digest of a set of steps is the XOR. */
uint64_t ps_step_mix(int64_t step);
/* The coordinator's control messages are bound to the lease key
 * (ps_wire.h): is `type` one, and the tag of header h as sent by group
 * member `sender` of `incarnation`. */
int      ps_ctl_bound(int type);
uint64_t ps_ctl_tag(const ps_t *p, const ps_hdr_t *h, int sender,
                    uint64_t incarnation);
/* Worker `member`'s own key (never 0), derived from the lease key: the
 * coordinator hands it to the worker in STEP, WAIT and DONE (b), and tags
 * the ABORTs it sends that worker under it (ps_worker_tag), which the
 * worker checks. */
int64_t  ps_worker_key(const ps_t *p, int member);
uint64_t ps_worker_tag(int64_t wkey, const ps_hdr_t *h, int sender,
                       uint64_t incarnation);
/* A request id for h: its tag when bound, else a fresh id. */
uint64_t ps_ctl_req(ps_t *p, const ps_hdr_t *h);

#endif /* PS_H */
