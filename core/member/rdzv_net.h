/* strata core -- what the rendezvous's files share (rendezvous.c: the
 * entry and socket helpers, rdzv_serve.c: rank 0, rdzv_join.c: every other
 * task). Internal to them; the rest of the core includes rendezvous.h.
 * Every socket is non-blocking and every wait a poll() of at most SLICE_MS
 * against a deadline, so that a stop request and the timeout are seen
 * promptly. */
#ifndef STRATA_CORE_RDZV_NET_H
#define STRATA_CORE_RDZV_NET_H

#include <sys/socket.h>
#include <sys/un.h>

#include "rendezvous.h"

#define RDZV_WHO "rendezvous"
#define RDZV_SLICE_MS 100 /* longest poll between two looks at the clock */

/* Where the rendezvous is. */
typedef struct strata__rdzv_ep {
    const char *text;   /* as configured, for messages                  */
    int         local;  /* an abstract Unix socket: name                */
    char        name[100];
    char        host[256], port[8];
} strata__rdzv_ep_t;

/* Rank 0 and every other task (rendezvous.h says what each does). */
int strata__rdzv_serve(strata__cluster_t *c, const strata__rdzv_ep_t *ep,
                       const strata__rdzv_opts_t *o);
int strata__rdzv_join(strata__cluster_t *c, const strata__rdzv_ep_t *ep,
                      const strata__rdzv_opts_t *o);

/* rank 0's answer to this task's REGISTER, read from fd and decoded (a
 * TABLE, or a REFUSED): 0 with c's addresses installed, 1 to try again
 * (the connection went away; why[wn] says so), else the error (logged).
 * `mine`: the address this task registered; `nonce`: rank 0's challenge
 * on fd (the table's and a REFUSED's tags are checked against it when
 * o->auth); *forged counts the REFUSEDs dropped as not rank 0's (1). */
typedef struct strata__rdzv_forged {
    unsigned n;
    char     last[160]; /* the reason the last one gave */
} strata__rdzv_forged_t;
int strata__rdzv_answer(strata__cluster_t *c, const strata__rdzv_ep_t *ep,
                        int fd, const char *mine, const uint8_t *nonce,
                        double deadline, const strata__rdzv_opts_t *o,
                        strata__rdzv_forged_t *forged, char *why, size_t wn);

/* Monotonic seconds. */
double strata__rdzv_now(void);
/* *o->stop is set. */
int strata__rdzv_stopped(const strata__rdzv_opts_t *o);
/* Milliseconds to poll: at most RDZV_SLICE_MS, at least 0, never past t. */
int strata__rdzv_slice_ms(double t);
/* Waits for `ev` on fd: 1 ready, 0 deadline passed, -1 stop requested. */
int strata__rdzv_wait_fd(int fd, short ev, double deadline,
                         const strata__rdzv_opts_t *o);
/* Sleeps until t, or until a stop request (-1). */
int strata__rdzv_pause(double t, const strata__rdzv_opts_t *o);
/* "10.0.0.2:51234", "[fd00::2]:51234" or "local pid 42 uid 0". */
void strata__rdzv_peer_text(const struct sockaddr *sa, socklen_t len, int fd,
                            char *out, size_t n);
/* The uid of a Unix socket's peer (*uid) is ours: 1, else 0. */
int strata__rdzv_peer_is_us(int fd, unsigned *uid);
/* The abstract Unix address of ep; its length. */
socklen_t strata__rdzv_unix_addr(const strata__rdzv_ep_t *ep,
                                 struct sockaddr_un *su);
/* A free TCP port on the numeric address `host` of family `fam`, as
 * "host:port" into out: the address this task's transports will bind. */
int strata__rdzv_own_address(int fam, const char *host, char *out, size_t n);
/* The numeric local address of a connected or bound socket (127.0.0.1 for
 * a Unix one: one node). */
int strata__rdzv_local_host(int fd, int *fam, char *host, size_t n);

#endif /* STRATA_CORE_RDZV_NET_H */
