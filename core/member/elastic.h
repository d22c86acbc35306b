/* strata core -- the membership client of an elastic job. Internal.
 *
 * `strata launch --elastic MIN:MAX` hosts the job's membership service and
 * hands its tasks its address and a secret token (STRATA_ELASTIC,
 * STRATA_ELASTIC_TOKEN). A training process keeps one TCP connection to it
 * for its life: it joins a generation (host->membership(), ABI 2.3) with
 * its name, a fresh transport address and the steps it has applied, and
 * the service answers every member with the generation's table once it is
 * formed. Between generations the service may say that a resize is due (a
 * worker joins, a member left); the core's loop reads that at its step
 * boundaries (strata__elastic_pending) and every member agrees on it there.
 *
 * The protocol: the membership frames of member/wire.h (launch_elastic.c,
 * which serves it, documents the service's side), after the service's
 * CHALLENGE and each tagged (wire.h, member_auth.c):
 *   -> JOIN token, name, host:port, committed, timeout_ms
 *   <- GEN generation, size, rank, resume_step, then the members (name,
 *      host:port, committed) in rank order
 *   <- RESIZE generation                       (a later one is due)
 *   <- STOP why                                (the service gave up)
 *   <- END                                     (training is over)
 *   -> DONE step                               (this member finished)
 * Every frame from the service is checked (length, fields, ranges); what
 * is wrong fails the call with one error line, never a crash or a hang: every
 * wait is bounded. */
#ifndef STRATA_CORE_ELASTIC_H
#define STRATA_CORE_ELASTIC_H

#include "internal.h"

typedef struct strata__elastic strata__elastic_t;

/* The client of this process when the job has a membership service
 * (STRATA_ELASTIC is set), in *out; NULL (and STRATA_OK) when it has none.
 * `self` is this task's name ("worker:1"), `host` the host its transport
 * addresses are made on (the host of its cluster address), `secret` this
 * task's CURVE secret key (Z85) when the job has keys (the service
 * authenticates it with it), NULL in plaintext mode (the token then).
 * Connects lazily, at the first join. */
int  strata__elastic_open(const char *self, const char *host,
                          const char *secret, strata__elastic_t **out);
void strata__elastic_close(strata__elastic_t *e);

/* Join the next generation (see host->membership in plugin_v2.h);
 * `timeout_ms` bounds the rendezvous (the service's, named by the job's
 * first member). On success *out describes the generation, its arrays the
 * client's until the next join. */
int  strata__elastic_join(strata__elastic_t *e, int64_t committed,
                          int timeout_ms, strata_membership_t *out);

/* The generation joined last, or NULL before the first. */
const strata_membership_t *strata__elastic_current(const strata__elastic_t *e);
/* The steps this process had applied when it joined it (-1: none). */
int64_t strata__elastic_joined_with(const strata__elastic_t *e);

/* Has the service announced a later generation (or stopped)? Reads what
 * the service sent without waiting: one system call. 1 or 0. */
int  strata__elastic_pending(strata__elastic_t *e);

/* The service said the job is over (training finished elsewhere). */
int  strata__elastic_over(const strata__elastic_t *e);
/* A join failed (the service gave up, is gone, did not answer in time, or
 * the job is over): every later join fails the same way at once. */
int  strata__elastic_failed(const strata__elastic_t *e);

/* Training finished here after `step` steps: tell the service (no more
 * generations: workers still waiting to join are told the job is over). */
void strata__elastic_done(strata__elastic_t *e, int64_t step);

#endif /* STRATA_CORE_ELASTIC_H */
