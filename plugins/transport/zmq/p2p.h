/* zmq.so -- point to point: the ABI's send() and recv() for WORLD groups.
 *
 * Which groups. A WORLD group with the STRATA_GROUP_P2P flag (ABI 1.3; an
 * ABI 1.2 opener's tag starting with "p2p:", STRZ_P2P_PREFIX, still counts)
 * is point-to-point only: init() does no ring rendezvous and waits for
 * nobody (members come, go and restart at any time: parameter servers,
 * workers and their coordinator), reduce/update/BARRIER return
 * STRATA_ENOTSUP. On a ring group (any other) send/recv return
 * STRATA_ENOTSUP: the ring's ROUTER already owns the member's address and
 * refuses strangers.
 *
 * Sockets. Member i binds one ROUTER on its own group address (the ring
 * does not run, so the address is free). A sender keeps one DEALER per
 * peer, created and connected on first use, with ZMQ_IMMEDIATE: a message
 * is queued only to a live connection, so a send to a dead or not yet
 * started peer waits (bounded by its timeout) instead of piling up for a
 * later incarnation. Replies travel the same way back (the receiver's own
 * DEALER to the sender's ROUTER); routing ids are zmq's and ignored. ZMTP
 * heartbeats (heartbeat_ms, 3 misses) drop the connection of a stopped
 * peer; zmq reconnects on its own when the peer comes back.
 *
 * Frames of one message (the ROUTER prepends the routing id):
 *
 *     [zmq.so header, STRZ_HDR_SIZE bytes] [user header]
 *     [data chunk 1] ... [data chunk k]
 *
 * The user data travel in k = ceil(dlen / STRZ_P2P_CHUNK) frames of
 * STRZ_P2P_CHUNK bytes, the last one shorter; no data is one empty frame
 * (k = 1), so a message of up to one chunk is the 3 frames it always was.
 * Why: libzmq's ZMTP heartbeat (heartbeat_ms, timeout 3 x heartbeat_ms)
 * resets a receiver's timeout only when a whole frame has been decoded
 * (stream_engine_base.cpp), so a frame that takes longer than the timeout
 * to arrive -- 37 MB at 100 Mbit/s with the default 1 s -- has the
 * connection closed under it, the message lost, and again on every resend;
 * CURVE also encrypts a frame whole before any of it leaves. 1 MiB takes
 * 0.08 s at 100 Mbit/s.
 *
 * The header is wire.h's, type DATA with these meanings:
 *     flags   STRZ_P2P_FLAG (a point-to-point message)
 *     sender  the sender's rank in the group
 *     seq     the sender's message counter (for logs)
 *     offset  bytes of the user header (the second frame)
 *     length  bytes of user header + user data (the second frame and all
 *             data frames)
 *     aux     hash of the group tag (31 bits): another job's message is
 *             dropped
 *     total   random id of the sending instance (changes on restart)
 *     step    0
 * A receiver checks every field of the header against its frames before
 * it uses any, then copies the data frames one by one into the caller's
 * buffer at their offsets: more frames than ceil(data / STRZ_P2P_CHUNK)
 * (1 for no data), a frame longer than STRZ_P2P_CHUNK, or frames that add
 * up to anything but length - offset make the message malformed (its
 * remaining frames are read and dropped). A malformed message is counted,
 * logged (rate-limited) and dropped, and recv() goes on waiting. send()
 * refuses messages longer than window_bytes (STRATA_EINVAL) and a receiver
 * drops them; ZMQ_MAXMSGSIZE (window_bytes) bounds each frame.
 *
 * Threads. send() and recv() are thread-safe: one lock per peer's DEALER,
 * one for the ROUTER; a send to one peer does not wait for another's.
 * ctl(ABORT) wakes every waiter (STRATA_ECANCELED, sticky). */
#ifndef STRZ_P2P_H
#define STRZ_P2P_H

#include "strz.h"

#define STRZ_P2P_PREFIX "p2p:"
#define STRZ_P2P_FLAG   0x50 /* 'P' in the flags byte of a DATA header */
/* Most bytes of user data in one frame. The ZMTP heartbeat times a
 * connection out while one frame is still arriving (see above): a frame
 * must arrive well within 3 x heartbeat_ms on the slowest link (1 MiB:
 * 0.08 s at 100 Mbit/s, 0.4 s at 20 Mbit/s), and more frames cost nothing
 * measurable on loopback. Part of the wire format: receivers drop data
 * frames longer than this. */
#define STRZ_P2P_CHUNK  (1u << 20)

typedef struct strz_p2p strz_p2p_t;

/* Is this group point-to-point only (tag "p2p:...")? */
int  strz_p2p_group(const strata_group_t *g);
/* Bind this member's ROUTER (c->ep[c->rank], or an inproc endpoint in a
 * group of one) with c's options. Logs what failed. */
int  strz_p2p_open(strz_ctx_t *c, strz_p2p_t **out);
/* Closes the sockets (bounded by linger_ms); accepts NULL. */
void strz_p2p_close(strz_p2p_t *p);
/* ctl(ABORT): any thread; every wait returns STRATA_ECANCELED. */
void strz_p2p_cancel(strz_p2p_t *p);
/* The ABI's send/recv (plugin_v1.h). timeout_ms <= 0: the group's. */
int  strz_p2p_send(strz_p2p_t *p, int peer, const void *hdr, size_t hlen,
                   const void *data, size_t dlen, int timeout_ms);
int  strz_p2p_recv(strz_p2p_t *p, int *peer, void *buf, size_t cap,
                   size_t *len, int timeout_ms);
/* Messages dropped as malformed so far. */
uint64_t strz_p2p_dropped(const strz_p2p_t *p);
/* Take in rx's pending monitor events (the strangers' counts); the
 * caller is not inside strz_p2p_recv. NULL: nothing. */
void strz_p2p_drain(strz_p2p_t *p);

#endif /* STRZ_P2P_H */
