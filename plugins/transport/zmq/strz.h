/* zmq.so -- internal declarations shared by the plugin's files.
 *
 *   zmq_plugin.c  vtable, option table, init/fini/ctl, argument checks
 *   link.c        sockets, options (heartbeats, limits), monitors, rendezvous
 *   io.c          send/receive, waits with deadlines, zero-copy release
 *   fail.c        failure reporting and ABORT propagation
 *   ring.c        all-reduce (ring, or gather for small buffers), broadcast,
 *                 barrier
 *   shm.c         all-reduce through shared memory when every member is on
 *                 this host (zmq still carries start-up, heartbeats, ABORT)
 *   direct.c      direct TCP data sockets beside the zmq links
 *   sum.c         the element-wise sums (vectorised loops)
 *   f16.c         float32 <-> fp16/bf16 for compressed gradients
 *   wire.c        header pack/check (format: wire.h)
 *   curve.c       CURVE keys, the ZAP handler, strangers dropped and counted
 *   aead.c        AES-256-GCM records of a secured group's direct data
 *                 sockets, keys from an X25519 exchange in HELLO (aead.h)
 *
 * Prefix strz_ ("strata zmq"): zmq_ belongs to libzmq. Everything here is
 * hidden (-fvisibility=hidden); only strata_plugin_v2 is exported. */
#ifndef STRZ_H
#define STRZ_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <strata/plugin.h>
#include <zmq.h>

#include "wire.h"

/* The [transport] options (zmq_plugin.c has the table and its defaults). */
typedef struct strz_cfg {
    int64_t chunk_bytes;   /* pipeline segment, bytes                    */
    double  timeout_s;     /* collective / rendezvous bound              */
    int64_t heartbeat_ms;  /* ZMTP heartbeat interval                    */
    int64_t linger_ms;     /* bound on delivering queued msgs at close   */
    int64_t window_bytes;  /* queued bytes per link (high-water mark)    */
    int64_t io_threads;    /* zmq I/O threads                            */
    int64_t small_bytes;   /* all-reduces up to this size: gather, not ring */
    int     shm;           /* STRZ_SHM_AUTO or STRZ_SHM_OFF (ENUM index)  */
    int     direct;        /* STRZ_DIRECT_AUTO or STRZ_DIRECT_OFF         */
    int     compression;   /* STRZ_COMP_*: gradients on the wire           */
    int64_t spin_us;       /* direct sockets: poll without sleeping first */
    int     bulk_cipher;   /* STRZ_BULK_*: a secured group's data          */
} strz_cfg_t;

/* How a secured group's collective data travel (ENUM index of
 * aes256gcm|curve): AES-256-GCM records on the direct sockets, or on the
 * CURVE links with everything else. */
enum { STRZ_BULK_AES256GCM = 0, STRZ_BULK_CURVE = 1 };

enum { STRZ_SHM_AUTO = 0, STRZ_SHM_OFF = 1 };
enum { STRZ_DIRECT_AUTO = 0, STRZ_DIRECT_OFF = 1 };
/* How gradient all-reduces travel (ENUM index of none|fp16|bf16). */
enum { STRZ_COMP_NONE = 0, STRZ_COMP_FP16 = 1, STRZ_COMP_BF16 = 2 };

/* With direct data sockets the zmq control plane is looked at this often
 * while a collective waits (ABORTs, probes, monitors). */
#define STRZ_CTRL_MS 10

/* Sends of at least this many bytes are zero-copy (the caller's buffer is
 * handed to zmq; every collective waits until zmq let go of it). */
#define STRZ_ZC_MIN (32u * 1024u)

/* A dropped neighbour is reported this long after the drop, so that an
 * ABORT naming the real culprit can arrive first (see check_gone). */
#define STRZ_GONE_GRACE_MS 200

/* Bytes a CURVE MESSAGE adds to a frame (command name, nonce, MAC, flags:
 * 33), rounded up: ZMQ_MAXMSGSIZE leaves room for them. */
#define STRZ_CURVE_SLACK 64

/* A connection must finish its ZMTP (and CURVE) handshake this fast. */
#define STRZ_HANDSHAKE_MS 5000

/* Kinds of strangers (strz_stranger), counted apart. */
enum { STRZ_SK_KEY,      /* refused by ZAP: not a job's CURVE key       */
       STRZ_SK_EARLY,    /* closed before its handshake                 */
       STRZ_SK_GARBAGE,  /* not ZeroMQ, or another security mechanism   */
       STRZ_SK_MESSAGE,  /* a message from outside the group, malformed */
       STRZ_SK_N };

/* Peers of a listening socket's connections, by fd (monitor events):
 * ACCEPTED gives the fd, whose peer address getpeername() tells;
 * DISCONNECTED gives it again, right after the handshake failure it ends
 * (libzmq's HANDSHAKE_FAILED_* carry an errno, not the fd). Best effort:
 * a slot is the fd modulo STRZ_PEERS, the address the one read when the
 * ACCEPTED event is handled. Used by the monitor's one reader. */
#define STRZ_PEERS 256
enum { STRZ_HS_NONE = 0,      /* no connection, or its result is known   */
       STRZ_HS_WAITING = 1,   /* accepted, no handshake result yet       */
       STRZ_HS_UNKNOWN = 2 }; /* a result came while others waited too  */
typedef struct strz_peers {
    int  fd1[STRZ_PEERS];      /* fd + 1; 0: free                          */
    char addr[STRZ_PEERS][56]; /* "127.0.0.1:40312", "[::1]:40312"         */
    /* STRZ_HS_*: where its handshake is. A handshake's result carries no
     * fd: it is the connection's only when one alone was waiting. One
     * that ends still waiting had none (not ZeroMQ: ps's port does not
     * monitor HANDSHAKE_FAILED_PROTOCOL, link.c) and is named then. */
    unsigned char hs[STRZ_PEERS];
    int  pending;              /* STRZ_SK_* + 1 of a failure that waits for */
                               /* its DISCONNECTED to name the peer; 0 none */
    unsigned long long pending_n; /* its number among the strangers       */
    char pending_where[96];    /* the listening endpoint it came to         */
} strz_peers_t;

typedef struct strz_ctx {
    const strata_host_v2_t *host;
    strata_hctx_t          *hc;    /* first argument of every host call */
    strz_cfg_t cfg;
    int32_t n, rank, left, right;
    int32_t timeout_ms;
    size_t  seg;           /* float32 elements per pipeline segment        */
    char  **ep;            /* zmq endpoint of every rank ("tcp://h:p")      */
    char  **addr;          /* address as given, for messages                */
    char  **name;          /* task name ("worker:1"), for messages          */
    char    tag[STRZ_MAX_TAG + 1];

    void *zctx, *rx, *tx;  /* rx: ROUTER bound here; tx: DEALER to right   */
    void *mon_rx, *mon_tx; /* PAIRs receiving the sockets' monitor events  */
    int   wake[2];         /* ctl(ABORT) writes one byte: thread-safe wake  */
    int   zc_pipe[2];      /* zmq's I/O thread writes when zc_out hits 0    */
    atomic_long zc_out;    /* zero-copy messages zmq still holds            */
    atomic_int  canceled;

    unsigned char left_id[256]; /* routing id of the left neighbour's DEALER */
    size_t left_id_len;
    int    left_fd;        /* its connection's fd (monitor events), or -1   */
    int    right_up;       /* right answered HELLO                          */
    int64_t left_gone_at, right_gone_at; /* when the monitor saw the
                                          * connection drop; 0: not      */
    int    ipv6;           /* some endpoint is an IPv6 literal              */
    int    running;        /* rendezvous done (else: still saying HELLO)    */

    /* A deadline passed while waiting for the left: PROBEs ask it whether
     * it is alive and waiting too (io.c). Reset by every collective. */
    uint64_t probes_sent, probe_acked;
    int64_t  probe_at;     /* when the last PROBE left; 0: none            */

    struct strz_shm *shm;  /* shared-memory path (shm.c), or NULL         */
    struct strz_direct *direct; /* direct data sockets (direct.c), or NULL */
    int      right_dport;  /* the right's offer (HELLO_ACK), 0: none        */
    uint64_t right_dtoken;
    unsigned char right_dpk[32]; /* sealed: its key for the link (HELLO_ACK) */
    int      right_dpk_ok;
    int64_t  next_ctrl;    /* strz_now_ms() of the next control look       */
    int64_t  spin_ns;      /* spin_poll budget: 0 not decided, -1 never     */
    float   *scratch;      /* one segment: received data before it is added */
    void    *gather;       /* gather all-reduce: received messages (ring.c) */
    size_t   gather_cap;
    void    *wire;         /* compressed all-reduce: 16-bit shadow (ring.c) */
    size_t   wire_cap;

    const char *what;      /* "allreduce", "broadcast", ... for messages    */
    uint64_t seq;          /* current collective                            */
    int      broken;       /* sticky error code once a collective failed    */

    void  *stage;          /* host staging for non-CPU buffers              */
    size_t stage_bytes;

    /* CURVE (curve.c): set when the core handed the group its keys. */
    int      secure;
    int      aead;         /* secured, and the data go sealed (aead.c) on
                            * direct sockets where both ends want them     */
    char   (*pub)[41];     /* n public keys, Z85                            */
    char     sec[41];      /* this member's secret key, Z85                 */
    struct strz_zap *zap;  /* the ring's ZAP handler                        */
    atomic_ullong strangers; /* messages and connections dropped            */
    atomic_ullong sk[STRZ_SK_N]; /* the same, per kind (STRZ_SK_*)          */
    /* what the listening sockets' monitors saw (strz_monitor_event) */
    atomic_ullong accepted, handshaken, auth_failed;
    strz_peers_t  peers;   /* the listening socket's connections, by fd     */
} strz_ctx_t;

#define strz_log(c, lvl, ...)                                                \
    ((c)->host->log((c)->hc, (lvl), "zmq", __VA_ARGS__))

/* A message received from the left neighbour. */
typedef struct strz_rmsg {
    strz_hdr_t  h;
    const void *data;      /* payload (h.length bytes) or NULL              */
    zmq_msg_t   part[3];   /* routing id, header, payload: owned            */
    int         nparts;
} strz_rmsg_t;

/* strz_wait() masks. */
#define STRZ_W_IN    1     /* input from the left is awaited                 */
#define STRZ_W_OUT   2     /* a send waits for room towards the right        */
#define STRZ_W_SENDS 4     /* sends remain: the right must stay alive        */
#define STRZ_W_ZC    8     /* zmq is to release zero-copy payloads           */

/* ---- link.c ---------------------------------------------------------- */

int64_t strz_now_ms(void);
int64_t strz_now_ns(void);
uint64_t strz_nonce(const void *salt);
/* This host has a CPU for every member of the group: a waiting member may
 * spin (shm.c, the direct sockets' waits) without keeping the one it waits
 * for off a core. */
int strz_may_spin(const strz_ctx_t *c);
/* Sockets, monitors and the HELLO rendezvous with both neighbours, bounded
 * by `deadline` (strz_now_ms() clock). Logs one line naming the neighbours
 * that never showed up. */
int  strz_link_open(strz_ctx_t *c, int64_t deadline);
/* Closes everything (bounded by linger_ms); safe on a half-open ctx. */
void strz_link_close(strz_ctx_t *c);
/* Close a socket and its monitor; both set to NULL. */
void strz_close_sock(void **s, void **mon);

/* ---- io.c ------------------------------------------------------------ */

/* Queue one message to the right neighbour without blocking: 0, or
 * STRATA_EAGAIN when the link's window is full, or a reported error.
 * Payloads of at least STRZ_ZC_MIN bytes are sent zero-copy. */
int  strz_send(strz_ctx_t *c, const strz_hdr_t *h, const void *payload);
/* Take one message from the left neighbour without blocking: 0 (m filled;
 * release it with strz_rmsg_close), STRATA_EAGAIN, or a reported error
 * (stranger, malformed header, ABORT). Data come from the direct socket
 * when there is one (then only small payloads: see strz_recv_into). */
int  strz_recv(strz_ctx_t *c, strz_rmsg_t *m);
/* The same for a message whose header should be `want` (sender aside):
 * on a direct socket its payload is read into `dst` (want->length bytes),
 * and a message that is not `want` is returned with m->data NULL and
 * nothing stored (the caller refuses it). On zmq `dst` is not used. The
 * payload is at m->data either way. */
int  strz_recv_into(strz_ctx_t *c, strz_rmsg_t *m, const strz_hdr_t *want,
                    void *dst);
/* Only the zmq socket from the left (control messages when data is
 * direct). */
int  strz_zrecv(strz_ctx_t *c, strz_rmsg_t *m);
void strz_rmsg_close(strz_rmsg_t *m);
/* Block until input from the left (STRZ_W_IN), room towards the right
 * (STRZ_W_OUT), a released zero-copy payload (STRZ_W_ZC), or a failure; handles monitor
 * events, ABORTs from the right and ctl(ABORT). Past `deadline` it reports
 * STRATA_ETIMEDOUT naming the left (W_IN) or the right neighbour. Returns 0
 * (look again) or a reported error. */
int  strz_wait(strz_ctx_t *c, int mask, int64_t deadline);
/* Wait until zmq released every zero-copy payload (bounded by deadline). */
int  strz_drain(strz_ctx_t *c, int64_t deadline);
/* Wait (no sockets involved) until zmq released every zero-copy payload,
 * or until `until`. */
void strz_zc_wait(strz_ctx_t *c, int64_t until);
/* One whole message (zmq delivers all its parts together) into
 * part[0..max): 0, STRATA_EAGAIN, or -errno. Parts past `max` are read,
 * dropped and counted in *extra. */
int  strz_read_parts(void *s, zmq_msg_t *part, int max, int *nparts,
                     int *extra);
void strz_close_parts(zmq_msg_t *part, int n);
/* Header of part[first], payload in part[first + 1] if any: 0, or -1 with
 * a static reason in *why. */
int  strz_unpack_parts(zmq_msg_t *part, int nparts, int first, int extra,
                       strz_hdr_t *h, const char **why);
/* The sender's IP address from a received part, copied to out. */
char *strz_peer_address(zmq_msg_t *m, char *out, size_t len);

/* ---- direct.c -------------------------------------------------------- */

/* Does this member want direct data sockets (tcp address, direct = auto)? */
int  strz_direct_wanted(const strz_ctx_t *c);
/* Secured: our key pair for the link to the right; its public half (32
 * bytes) goes in the HELLO after the tag. */
int  strz_direct_hello_key(strz_ctx_t *c, unsigned char pk[32]);
/* The left said it wants one: listen; *port = 0 when we cannot. Secured:
 * `left_pk` is the key in its HELLO, and `pk` (32 bytes) gets ours for
 * the HELLO_ACK (the link's keys are made here). */
int  strz_direct_listen(strz_ctx_t *c, int *port, uint64_t *token,
                        const unsigned char *left_pk, unsigned char *pk);
/* After the HELLOs: connect to the right's port (if it offered one) and
 * accept the left (if we listen), by `deadline`. Secured: `right_pk` is
 * the key in the right's HELLO_ACK (NULL: none, the link uses zmq). */
int  strz_direct_open(strz_ctx_t *c, int right_port, uint64_t right_token,
                      const unsigned char *right_pk, int64_t deadline);
void strz_direct_close(strz_ctx_t *c);
int  strz_direct_tx(const strz_ctx_t *c);  /* data to the right is direct */
int  strz_direct_rx(const strz_ctx_t *c);  /* data from the left is direct */
int  strz_direct_send(strz_ctx_t *c, const strz_hdr_t *h, const void *payload);
int  strz_direct_flush(strz_ctx_t *c);     /* 0 sent, 1 pending, < 0 error */
int  strz_direct_pending(const strz_ctx_t *c);
void strz_direct_drop(strz_ctx_t *c);
int  strz_direct_recv(strz_ctx_t *c, strz_rmsg_t *m, const strz_hdr_t *want,
                      void *dst);
int  strz_direct_fd(const strz_ctx_t *c, int right);
/* Send a packed ABORT on the data connections (both ways) and forget any
 * pending send. */
void strz_direct_abort(strz_ctx_t *c, const unsigned char hdr[STRZ_HDR_SIZE]);
/* The right's data connection is readable: read an ABORT (reported) or
 * note it closed. 0 or the reported error. */
int  strz_direct_back(strz_ctx_t *c);
/* Without blocking: note a closed connection from the left (its data are
 * not read here). */
void strz_direct_peek(strz_ctx_t *c);

/* ---- fail.c ---------------------------------------------------------- */

/* Report a failure of this collective ONCE: one error line (printf-style,
 * prefixed with "<what> #<seq>: "), the sticky state, an ABORT naming
 * `peer` to both neighbours (best effort), and the release of zero-copy
 * payloads. Returns `code` (or the earlier sticky code). */
int  strz_fail(strz_ctx_t *c, int code, int peer, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* An ABORT from neighbour `from`: relay it and fail with STRATA_EPEER,
 * naming the peer it names. */
int  strz_abort_received(strz_ctx_t *c, const strz_hdr_t *h, int from);
/* Fail as told by the shared-memory abort word: `peer` failed (`code`),
 * reported by another member. */
int  strz_abort_shared(strz_ctx_t *c, int peer, int code);
/* "disconnected", "timed out", ... for a STRATA error code. */
const char *strz_code_words(int code);

/* Non-blocking look at the control plane while a collective runs outside
 * zmq (shared memory): ctl(ABORT), monitors, ABORTs and PROBEs from either
 * neighbour. A neighbour whose connection dropped is reported (after the
 * usual grace) only when `need_left` / `need_right` says the collective
 * still waits for it. Returns 0 or a reported error. */
int  strz_ctrl_poll(strz_ctx_t *c, int need_left, int need_right);
/* Read the zmq control plane once (monitors, ABORTs, PROBEs; data there is
 * refused) and schedule the next look (c->next_ctrl). */
int  strz_control_look(strz_ctx_t *c, int64_t now);

/* ---- ring.c ---------------------------------------------------------- */

/* In-place all-reduce of buf[0..count) (STRATA_REDUCE_SUM / _MEAN); comp
 * (STRZ_COMP_*): the payloads travel in 16 bits, sums stay float32, every
 * member ends bitwise equal. */
int strz_allreduce(strz_ctx_t *c, float *buf, size_t count, int op,
                   int comp);
/* Broadcast buf[0..count) from `root` along the ring. */
int strz_broadcast(strz_ctx_t *c, float *buf, size_t count, int root);
/* Every member meets (a one-element all-reduce, messages typed BARRIER),
 * by `deadline`, or 0 for the usual timeout from now. */
int strz_barrier(strz_ctx_t *c, int64_t deadline);
/* The two halves of the ring all-reduce over the caller's shards (member m
 * owns [bounds[m], bounds[m+1]), the same bounds on every member): after
 * strz_reduce_scatter each member's shard holds the sum (mean) there, after
 * strz_all_gather every shard holds its owner's values. Ring only:
 * strz_shards_offered() says 0 where the group runs through shared
 * memory. */
int strz_shards_offered(const strz_ctx_t *c);
int strz_reduce_scatter(strz_ctx_t *c, float *buf, size_t count,
                        const size_t *bounds, int op, int comp);
int strz_all_gather(strz_ctx_t *c, float *buf, size_t count,
                    const size_t *bounds);
/* Frees what the collectives keep between calls. */
void strz_ring_free(strz_ctx_t *c);

/* ---- shm.c ----------------------------------------------------------- */

/* After the HELLOs: when every member is on this host (and shm = auto),
 * agree on a shared-memory segment around the ring; c->shm is set when
 * every member mapped it. Not being able to is not an error (the zmq path
 * is used); a peer that misbehaves is. */
int  strz_shm_setup(strz_ctx_t *c, int64_t deadline);
/* A collective through the segment: kind STRZ_DATA (in-place all-reduce,
 * arg = reduce op, comp = STRZ_COMP_*: slots hold 16 bits; bitwise equal
 * everywhere), STRZ_BCAST (arg = root) or STRZ_BARRIER (no buffer). */
int  strz_shm_collective(strz_ctx_t *c, int kind, float *buf, size_t count,
                         int arg, int comp, int64_t deadline);
/* The first failure of the group, for everyone attached (fail.c). */
void strz_shm_publish_abort(strz_ctx_t *c, int peer, int code);
void strz_shm_close(strz_ctx_t *c);

/* ---- curve.c --------------------------------------------------------- */

/* Keep the group's keys (a secured group): c->secure. Logs what is wrong. */
int  strz_curve_take(strz_ctx_t *c, const strata_group_t *g);
void strz_curve_forget(strz_ctx_t *c);
/* Make `s` a CURVE server (a ROUTER) or a client of member `peer` (a
 * DEALER); no-ops on a plaintext group. */
int  strz_curve_server(strz_ctx_t *c, void *s);
int  strz_curve_client(strz_ctx_t *c, void *s, int peer);
/* The member a received message is from, by the identity its connection
 * authenticated with (User-Id); -1 when unknown or plaintext. */
int  strz_curve_member(const strz_ctx_t *c, zmq_msg_t *m);
/* The ZAP handler on zctx, before any CURVE server binds (*out NULL on a
 * plaintext group); stopped before zmq_ctx_term. */
int  strz_zap_start(strz_ctx_t *c, void *zctx, struct strz_zap **out);
void strz_zap_stop(struct strz_zap *z);
/* A message or connection that is not the job's, of kind STRZ_SK_*:
 * counted, logged (rate-limited) as "dropped WHAT FROM: WHY"; never
 * fatal. */
void strz_stranger(strz_ctx_t *c, int kind, const char *what,
                   const char *from, const char *why);
/* The two halves of strz_stranger, for a stranger named after it was
 * counted: count one of `kind` (the running total returned), and warn of
 * one counted already as the n-th (rate-limited by n). */
unsigned long long strz_stranger_count(strz_ctx_t *c, int kind);
void strz_stranger_warn(strz_ctx_t *c, unsigned long long n,
                        const char *what, const char *from, const char *why);
/* The monitor events of a listening socket (ZMQ_EVENT_*) that tell
 * strangers: a connection closed before its handshake is one; accepted,
 * handshaken and ZAP-refused ones are counted, and DISCONNECTED names the
 * peer of a failed handshake (strz_peers_t), so that
 * strz_strangers_count counts the rest: garbage (zmq reports no
 * handshake failure for an HTTP request) and another mechanism. Not
 * HANDSHAKE_FAILED_PROTOCOL on ps's point-to-point port: with it, libzmq
 * 4.3.4 aborts ("!_io_error", stream_engine_base.cpp:331) when an
 * established CURVE link fails to decrypt a replayed frame
 * (tests/ps/test_ps.c lossy); the ring's port (link.c) asks for it, as it
 * names a task started with another job's keys at once. */
#define STRZ_MONITOR_EVENTS (ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED \
    | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH \
    | ZMQ_EVENT_DISCONNECTED)
/* `value`: the event's value (an fd for ACCEPTED and DISCONNECTED), which
 * names the peer of a failed handshake in its warning (strz_peers_t). */
void strz_monitor_event(strz_ctx_t *c, int id, uint32_t value,
                        const char *where);
/* The counts so far by kind (STRZ_SK_*), with the connections accepted
 * that neither completed a handshake nor failed one of the other kinds
 * counted as STRZ_SK_GARBAGE (between collectives a connection still in
 * its handshake is one of them until it ends), and `p2p_dropped`
 * malformed point-to-point messages as STRZ_SK_MESSAGE. */
void strz_strangers_count(strz_ctx_t *c, uint64_t p2p_dropped,
                          unsigned long long out[STRZ_SK_N]);
/* One event of monitor PAIR `mon`, not waiting (io.c): 1 with its id,
 * value and endpoint, 0 when none is pending. */
int  strz_monitor_read(void *mon, int *id, uint32_t *value, char *where,
                       size_t wn);
/* What rx's monitor holds still (before the summary). */
void strz_monitor_drain(strz_ctx_t *c);
/* The end-of-run line: how many of each kind were dropped (nothing when
 * none). */
void strz_strangers_summary(strz_ctx_t *c, uint64_t p2p_dropped);

/* ---- sum.c ----------------------------------------------------------- */

/* dst[i] = (src[0][i] + src[1][i] + ... + src[k-1][i]) * scale, summed in
 * that order, for i < n; the sources may be unaligned and one of them may
 * be dst. The same inputs give the same bits on every CPU. */
void strz_sum(float *dst, const void *const *src, int k, size_t n,
              float scale);
/* dst[i] = (dst[i] + src[i]) * scale (or dst = src * scale when !add). */
void strz_apply(float *dst, const void *src, size_t n, int add, float scale);
/* The same two with 16-bit sources (format `fmt`, STRZ_COMP_FP16/BF16),
 * each decoded exactly to float32 before it is added. */
void strz_sum16(float *dst, const void *const *src, int k, size_t n,
                float scale, int fmt);
void strz_apply16(float *dst, const void *src, size_t n, int add, float scale,
                  int fmt);

/* ---- f16.c ----------------------------------------------------------- */

/* dst (2n bytes, any alignment) = src in 16 bits: round to nearest even;
 * fp16 overflows to inf from 65520 on; NaN stays NaN. */
void strz_pack16(void *dst, const float *src, size_t n, int fmt);
/* dst = the exact float32 values of the 16-bit src (any alignment). */
void strz_unpack16(float *dst, const void *src, size_t n, int fmt);
/* "none", "fp16", "bf16". */
const char *strz_comp_name(int fmt);

#endif /* STRZ_H */
