/* The collectives of a strata_comm_t on host float32 buffers: each checks
 * its arguments once (one error line naming the call and the argument),
 * then runs through the host's transport entries, which bound every wait
 * by the transport's timeout ([transport.zmq] timeout_s). A job of one
 * process has nothing to exchange: the buffer already holds the result. */
#include <stdint.h>

#include "comm.h"

#define WHO "collectives"

static const int32_t k_cpu = STRATA_DEVICE(STRATA_DEV_CPU, 0);

static int no_comm(const char *call)
{
    strata__log(STRATA_LOG_ERROR, WHO, "%s: comm is NULL", call);
    return STRATA_EINVAL;
}

/* A NULL buffer, a count beyond what the buffer can hold. */
static int check(const char *call, const void *buf, size_t count,
                 size_t members)
{
    const char *why = !buf && count > 0 ? "buf is NULL with count > 0"
        : count > SIZE_MAX / sizeof(float) / members ? "count too large"
        : NULL;
    if (!why)
        return STRATA_OK;
    strata__log(STRATA_LOG_ERROR, WHO, "%s: %s", call, why);
    return STRATA_EINVAL;
}

static int check_op(const char *call, int op)
{
    int how = op & ~STRATA_COMM_GRADIENT;
    if (how == STRATA_COMM_SUM || how == STRATA_COMM_MEAN)
        return STRATA_OK;
    strata__log(STRATA_LOG_ERROR, WHO, "%s: op %d: expected STRATA_COMM_SUM "
                "(0) or STRATA_COMM_MEAN (1), with STRATA_COMM_GRADIENT "
                "(0x100) or not", call, op);
    return STRATA_EINVAL;
}

/* One collective at a time, logging to the comm's context (its log
 * callback), its arguments' errors too. */
static strata_ctx_t *enter(strata_comm_t *c)
{
    pthread_mutex_lock(&c->lock);
    return strata__log_bind(c->ctx);
}

static int leave(strata_comm_t *c, strata_ctx_t *prev, int rc)
{
    strata__log_bind(prev);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

/* bounds[m] = m * count: member m owns the m-th block of buf. */
static const size_t *blocks(strata_comm_t *c, size_t count)
{
    for (int m = 0; m <= c->size; m++)
        c->bounds[m] = (size_t)m * count;
    return c->bounds;
}

/* STRATA_COMM_GRADIENT becomes the op's flag: the transport may then
 * carry the values in 16 bits ([transport.zmq] compression). */
static strata_op_t op_of(float *buf, size_t count, int op, int root)
{
    return (strata_op_t){
        .struct_size = sizeof(strata_op_t), .buf = buf, .count = count,
        .device = k_cpu, .reduce_op = op & ~STRATA_COMM_GRADIENT,
        .root = root,
        .flags = op & STRATA_COMM_GRADIENT ? STRATA_OP_GRADIENT : 0u };
}

int strata_comm_allreduce(strata_comm_t *c, float *buf, size_t count, int op)
{
    static const char call[] = "strata_comm_allreduce";
    if (!c)
        return no_comm(call);
    strata_ctx_t *prev = enter(c);
    int rc = check(call, buf, count, 1);
    if (rc == STRATA_OK)
        rc = check_op(call, op);
    if (rc == STRATA_OK && c->t && count > 0) {
        strata_op_t o = op_of(buf, count, op, 0);
        rc = strata__host_v2.t_reduce(c->hc, c->t, &o);
    }
    return leave(c, prev, rc);
}

int strata_comm_broadcast(strata_comm_t *c, float *buf, size_t count,
                          int root)
{
    static const char call[] = "strata_comm_broadcast";
    if (!c)
        return no_comm(call);
    strata_ctx_t *prev = enter(c);
    int rc = check(call, buf, count, 1);
    if (rc == STRATA_OK && (root < 0 || root >= c->size)) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: root %d is not a rank of "
                    "this job (0 to %d)", call, root, c->size - 1);
        rc = STRATA_EINVAL;
    }
    if (rc == STRATA_OK && c->t && count > 0) {
        strata_op_t o = op_of(buf, count, STRATA_COMM_SUM, root);
        rc = strata__host_v2.t_update(c->hc, c->t, &o);
    }
    return leave(c, prev, rc);
}

/* Without the halves (zmq over shared memory): each member broadcasts its
 * block. */
int strata_comm_allgather(strata_comm_t *c, float *buf, size_t count)
{
    static const char call[] = "strata_comm_allgather";
    if (!c)
        return no_comm(call);
    strata_ctx_t *prev = enter(c);
    int rc = check(call, buf, count, (size_t)c->size);
    if (rc != STRATA_OK || !c->t || count == 0)
        return leave(c, prev, rc);
    if (c->caps & STRATA_CAP_SHARDS) {
        strata_op_t o = op_of(buf, count * (size_t)c->size, 0, 0);
        rc = strata__host_v2.t_all_gather(c->hc, c->t, &o, blocks(c, count));
    }
    for (int m = 0; !(c->caps & STRATA_CAP_SHARDS) && rc == STRATA_OK &&
                    m < c->size; m++) {
        strata_op_t o = op_of(buf + (size_t)m * count, count, 0, m);
        rc = strata__host_v2.t_update(c->hc, c->t, &o);
    }
    return leave(c, prev, rc);
}

/* Without the halves: an all-reduce of the whole buffer, whose block of
 * this member is then the result too. */
int strata_comm_reduce_scatter(strata_comm_t *c, float *buf, size_t count,
                               int op)
{
    static const char call[] = "strata_comm_reduce_scatter";
    if (!c)
        return no_comm(call);
    strata_ctx_t *prev = enter(c);
    int rc = check(call, buf, count, (size_t)c->size);
    if (rc == STRATA_OK)
        rc = check_op(call, op);
    if (rc == STRATA_OK && c->t && count > 0) {
        strata_op_t o = op_of(buf, count * (size_t)c->size, op, 0);
        rc = c->caps & STRATA_CAP_SHARDS
            ? strata__host_v2.t_reduce_scatter(c->hc, c->t, &o,
                                               blocks(c, count))
            : strata__host_v2.t_reduce(c->hc, c->t, &o);
    }
    return leave(c, prev, rc);
}

/* A transport without a barrier meets in an all-reduce of one float. */
int strata_comm_barrier(strata_comm_t *c)
{
    if (!c)
        return no_comm("strata_comm_barrier");
    strata_ctx_t *prev = enter(c);
    int rc = STRATA_OK;
    if (c->t && (c->caps & STRATA_CAP_BARRIER)) {
        rc = strata__host_v2.t_barrier(c->hc, c->t, 0);
    } else if (c->t) {
        float one = 1.0f;
        strata_op_t o = op_of(&one, 1, STRATA_COMM_SUM, 0);
        rc = strata__host_v2.t_reduce(c->hc, c->t, &o);
    }
    return leave(c, prev, rc);
}
