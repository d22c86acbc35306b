/* zmq.so -- internal declarations shared by the plugin's files.
 *
 *   zmq_plugin.c  vtable, option table, init/fini/ctl, argument checks
 *   link.c        sockets, options (heartbeats, limits), monitors, rendezvous
 *   io.c          send/receive, waits with deadlines, zero-copy release
 *   fail.c        failure reporting and ABORT propagation
 *   ring.c        all-reduce (reduce-scatter + all-gather), broadcast, barrier
 *   wire.c        header pack/check (format: wire.h)
 *
 * Prefix strz_ ("strata zmq"): zmq_ belongs to libzmq. Everything here is
 * hidden (-fvisibility=hidden); only strata_plugin_v1 is exported. */
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
} strz_cfg_t;

/* Sends of at least this many bytes are zero-copy (the caller's buffer is
 * handed to zmq; every collective waits until zmq let go of it). */
#define STRZ_ZC_MIN (32u * 1024u)

/* A dropped neighbour is reported this long after the drop, so that an
 * ABORT naming the real culprit can arrive first (see check_gone). */
#define STRZ_GONE_GRACE_MS 200

typedef struct strz_ctx {
    const strata_host_v1_t *host;
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

    const char *what;      /* "allreduce", "broadcast", ... for messages    */
    uint64_t seq;          /* current collective                            */
    int      broken;       /* sticky error code once a collective failed    */

    void  *stage;          /* host staging for non-CPU buffers              */
    size_t stage_bytes;
} strz_ctx_t;

#define strz_log(c, lvl, ...) ((c)->host->log((lvl), "zmq", __VA_ARGS__))

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
 * (stranger, malformed header, ABORT). */
int  strz_recv(strz_ctx_t *c, strz_rmsg_t *m);
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

/* ---- ring.c ---------------------------------------------------------- */

/* In-place all-reduce of buf[0..count) (STRATA_REDUCE_SUM / _MEAN). */
int strz_allreduce(strz_ctx_t *c, float *buf, size_t count, int op);
/* Broadcast buf[0..count) from `root` along the ring. */
int strz_broadcast(strz_ctx_t *c, float *buf, size_t count, int root);
/* Every member meets (a one-element all-reduce, messages typed BARRIER),
 * by `deadline`, or 0 for the usual timeout from now. */
int strz_barrier(strz_ctx_t *c, int64_t deadline);

#endif /* STRZ_H */
