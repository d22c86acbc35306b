/* zmq.so -- the ring collectives.
 *
 * All-reduce is reduce-scatter then all-gather over n chunks (bandwidth
 * optimal: each rank sends and receives 2(n-1)/n of the buffer). At step t
 * (0 <= t < 2(n-1)) rank r sends chunk (r - t) mod n to its right and
 * receives chunk (r - t - 1) mod n from its left: steps t < n-1 add it into
 * place, later steps copy it. The chunk received at step t is the one sent at
 * step t+1, so each chunk is cut into segments of `chunk_bytes` and every
 * received segment is forwarded as soon as it is applied: zmq's I/O thread
 * sends segment j while this thread reduces segment j+1.
 *
 * After its last reduce-scatter step a rank owns the final value of chunk
 * (r + 1) mod n; MEAN scales it there, before the all-gather, and the
 * all-gather copies the owner's bits, so every rank ends bitwise equal.
 *
 * Broadcast streams the buffer from the root along the ring in segments.
 *
 * Zero-copy: the caller's buffer is handed to zmq; a sent region is never
 * written again before the bytes left (a rank overwrites a chunk only with
 * a value that depends on what it sent of it having arrived), and every
 * collective waits for zmq to release the buffer before it returns. */
#include "strz.h"

#include <stdalign.h>
#include <string.h>

typedef struct plan {
    int     type;        /* STRZ_DATA, STRZ_BCAST or STRZ_BARRIER          */
    float  *buf;
    size_t  count, seg;
    int     n, rank, op, root;
    int     send_steps, recv_steps;
    size_t  lead;        /* sends that need no receive first               */
} plan_t;

typedef struct cursor {
    int    t;            /* step                                          */
    size_t j;            /* segment within the step's chunk               */
    size_t done;         /* segments finished                             */
    size_t off, len;     /* the current segment, in elements              */
    int    more;         /* a current segment exists                      */
} cursor_t;

static size_t min_sz(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* Chunk k of n over count elements: sizes differ by at most one. */
static void chunk_of(const plan_t *p, int t, int sending, size_t *off,
                     size_t *len)
{
    if (p->type == STRZ_BCAST) {
        *off = 0;
        *len = p->count;
        return;
    }
    int n = p->n;
    size_t k = (size_t)((((p->rank - t - (sending ? 0 : 1)) % n) + n) % n);
    size_t q = p->count / (size_t)n, r = p->count % (size_t)n;
    *off = k * q + min_sz(k, r);
    *len = q + (k < r ? 1 : 0);
}

/* Point the cursor at its current segment, skipping empty chunks. */
static void settle(const plan_t *p, cursor_t *cur, int sending)
{
    int steps = sending ? p->send_steps : p->recv_steps;
    cur->more = 0;
    while (cur->t < steps) {
        size_t coff, clen;
        chunk_of(p, cur->t, sending, &coff, &clen);
        if (cur->j * p->seg < clen) {
            cur->off = coff + cur->j * p->seg;
            cur->len = min_sz(p->seg, clen - cur->j * p->seg);
            cur->more = 1;
            return;
        }
        cur->t++;
        cur->j = 0;
    }
}

static void advance(const plan_t *p, cursor_t *cur, int sending)
{
    cur->j++;
    cur->done++;
    settle(p, cur, sending);
}

static int32_t aux_of(const plan_t *p)
{
    return p->type == STRZ_BCAST ? p->root : p->op;
}

static strz_hdr_t header_of(const strz_ctx_t *c, const plan_t *p,
                            const cursor_t *cur)
{
    strz_hdr_t h = { .type = (uint8_t)p->type, .sender = c->rank,
                     .step = cur->t, .seq = c->seq, .offset = cur->off,
                     .length = (uint32_t)(cur->len * sizeof(float)),
                     .aux = aux_of(p), .total = p->count };
    return h;
}

static int check(strz_ctx_t *c, const plan_t *p, const cursor_t *cur,
                 const strz_hdr_t *got)
{
    strz_hdr_t want = header_of(c, p, cur);
    if (got->type == want.type && got->sender == c->left
        && got->seq == want.seq && got->step == want.step
        && got->offset == want.offset && got->length == want.length
        && got->aux == want.aux && got->total == want.total)
        return 0;
    return strz_fail(c, STRATA_EPROTO, c->left,
                     "unexpected message from %s (%s) refused: expected %s "
                     "seq %llu step %d offset %llu bytes %u aux %d total %llu,"
                     " got %s from rank %d seq %llu step %d offset %llu "
                     "bytes %u aux %d total %llu",
                     c->name[c->left], c->addr[c->left],
                     strz_wire_type_name(want.type),
                     (unsigned long long)want.seq, (int)want.step,
                     (unsigned long long)want.offset, want.length,
                     (int)want.aux, (unsigned long long)want.total,
                     strz_wire_type_name(got->type), (int)got->sender,
                     (unsigned long long)got->seq, (int)got->step,
                     (unsigned long long)got->offset, got->length,
                     (int)got->aux, (unsigned long long)got->total);
}

/* dst op= src for n floats; src may be unaligned (a tiny zmq message is
 * stored inside the message struct). */
static void apply_span(float *restrict dst, const float *restrict src,
                       size_t n, int add, float scale)
{
    if (add)
        for (size_t i = 0; i < n; i++)
            dst[i] += src[i];
    else
        memcpy(dst, src, n * sizeof(float));
    if (scale != 1.0f)
        for (size_t i = 0; i < n; i++)
            dst[i] *= scale;
}

static void apply(const plan_t *p, const cursor_t *cur, const void *data)
{
    int add = p->type != STRZ_BCAST && cur->t < p->n - 1;
    float scale = (add && cur->t == p->n - 2 && p->op == STRATA_REDUCE_MEAN)
                  ? 1.0f / (float)p->n : 1.0f;
    float *dst = p->buf + cur->off;

    if (((uintptr_t)data % alignof(float)) == 0) {
        apply_span(dst, data, cur->len, add, scale);
        return;
    }
    const unsigned char *src = data;
    float tmp[256];
    for (size_t i = 0; i < cur->len; i += 256) {
        size_t m = min_sz(256, cur->len - i);
        memcpy(tmp, src + i * sizeof(float), m * sizeof(float));
        apply_span(dst + i, tmp, m, add, scale);
    }
}

/* Sends may run ahead of receives by `lead` segments. */
static int send_ready(const plan_t *p, const cursor_t *s, const cursor_t *r)
{
    return s->more && (s->done < p->lead || s->done - p->lead < r->done);
}

static int run(strz_ctx_t *c, const plan_t *p, int64_t deadline)
{
    cursor_t s = { 0 }, r = { 0 };
    int rc;

    settle(p, &s, 1);
    settle(p, &r, 0);
    while (s.more || r.more) {
        int progress = 0, blocked = 0;

        if (atomic_load(&c->canceled))
            return strz_fail(c, STRATA_ECANCELED, c->rank,
                             "canceled by the caller (ctl ABORT)");

        while (send_ready(p, &s, &r)) {
            strz_hdr_t h = header_of(c, p, &s);
            rc = strz_send(c, &h, p->buf + s.off);
            if (rc == STRATA_EAGAIN) {
                blocked = 1;
                break;
            }
            if (rc)
                return rc;
            advance(p, &s, 1);
            progress = 1;
        }
        if (r.more) {
            strz_rmsg_t m;
            rc = strz_recv(c, &m);
            if (rc == 0) {
                rc = check(c, p, &r, &m.h);
                if (rc == 0)
                    apply(p, &r, m.data);
                strz_rmsg_close(&m);
                if (rc)
                    return rc;
                advance(p, &r, 0);
                continue; /* forward what just became ready */
            }
            if (rc != STRATA_EAGAIN)
                return rc;
        }
        if (progress)
            continue;
        rc = strz_wait(c, (r.more ? STRZ_W_IN : 0) | (blocked ? STRZ_W_OUT : 0)
                          | (s.more ? STRZ_W_SENDS : 0), deadline);
        if (rc)
            return rc;
    }
    return strz_drain(c, deadline);
}

static int start(strz_ctx_t *c, const char *what, int64_t *deadline)
{
    if (c->broken)
        return c->broken;
    c->what = what;
    c->seq++;
    if (*deadline == 0)
        *deadline = strz_now_ms() + c->timeout_ms;
    if (atomic_load(&c->canceled))
        return strz_fail(c, STRATA_ECANCELED, c->rank,
                         "canceled by the caller (ctl ABORT)");
    return 0;
}

static plan_t ring_plan(const strz_ctx_t *c, int type, float *buf,
                        size_t count, int op)
{
    plan_t p = { .type = type, .buf = buf, .count = count, .seg = c->seg,
                 .n = c->n, .rank = c->rank, .op = op,
                 .send_steps = 2 * (c->n - 1), .recv_steps = 2 * (c->n - 1) };
    size_t off, len;
    chunk_of(&p, 0, 1, &off, &len);
    p.lead = (len + p.seg - 1) / p.seg;
    return p;
}

int strz_allreduce(strz_ctx_t *c, float *buf, size_t count, int op)
{
    int64_t deadline = 0;
    int rc = start(c, "allreduce", &deadline);
    if (rc || c->n == 1)
        return rc;
    plan_t p = ring_plan(c, STRZ_DATA, buf, count, op);
    return run(c, &p, deadline);
}

int strz_barrier(strz_ctx_t *c, int64_t deadline)
{
    float one = 1.0f;
    int rc = start(c, "barrier", &deadline);
    if (rc || c->n == 1)
        return rc;
    plan_t p = ring_plan(c, STRZ_BARRIER, &one, 1, STRATA_REDUCE_SUM);
    return run(c, &p, deadline);
}

int strz_broadcast(strz_ctx_t *c, float *buf, size_t count, int root)
{
    int64_t deadline = 0;
    int rc = start(c, "broadcast", &deadline);
    if (rc || c->n == 1)
        return rc;
    plan_t p = { .type = STRZ_BCAST, .buf = buf, .count = count,
                 .seg = c->seg, .n = c->n, .rank = c->rank, .root = root };
    if (c->rank == root) {
        p.send_steps = 1;
        p.lead = (size_t)-1;
    } else {
        p.recv_steps = 1;
        p.send_steps = c->right != root ? 1 : 0;
    }
    return run(c, &p, deadline);
}
