/* zmq.so -- the ring collectives.
 *
 * All-reduce is reduce-scatter then all-gather over n chunks (bandwidth
 * optimal: each rank sends and receives 2(n-1)/n of the buffer). At step t
 * (0 <= t < 2(n-1)) rank r sends chunk (r - t) mod n to its right and
 * receives chunk (r - t - 1) mod n from its left: steps t < n-1 add it into
 * place, later steps copy it. The chunk received at step t is the one sent at
 * step t+1, so each chunk is cut into segments of `chunk_bytes` and every
 * received segment is forwarded as soon as it is applied: the kernel (or
 * zmq's I/O thread) sends segment j while this thread reduces segment j+1.
 *
 * After its last reduce-scatter step a rank owns the final value of chunk
 * (r + 1) mod n; MEAN scales it there, before the all-gather, and the
 * all-gather copies the owner's bits, so every rank ends bitwise equal.
 *
 * Small buffers (up to small_bytes and chunk_bytes) take the gather
 * instead: n - 1 steps instead of 2(n - 1), so half the latency (for n = 2
 * one exchange). Each rank sends its whole buffer right and forwards what
 * it receives, so after n - 1 steps every rank holds all n buffers and
 * adds them in rank order itself (bitwise equal everywhere, as every rank
 * computes the same sum of the same inputs). It runs on the same engine
 * as the ring (run()), with every step's chunk the whole buffer; its
 * messages are DATA with flags STRZ_ALG_GATHER.
 *
 * Broadcast streams the buffer from the root along the ring in segments.
 *
 * Reduce-scatter and all-gather (STRATA_CTL_REDUCE_SCATTER, _ALL_GATHER)
 * are the ring's two halves on their own: steps 0 .. n-2, and n-1 ..
 * 2n-3, over chunks the caller chose (`bounds`: member m owns [bounds[m],
 * bounds[m+1])). As above rank r owns chunk (r + 1) mod n after the
 * reduce-scatter and sends it first in the all-gather, so chunk k is
 * member (k - 1) mod n's shard.
 *
 * Compressed gradients (compression = fp16|bf16, on all-reduces whose op
 * says STRATA_OP_GRADIENT): every DATA payload is the 16-bit form of float32
 * values, 2 bytes per element, and every sum stays float32. The ring packs
 * each partial sum it sends in the reduce-scatter into `wire` (a 16-bit
 * shadow of the buffer) and adds what it receives, decoded, in float32. The
 * owner of a chunk packs its final value (after the MEAN scale) into `wire`
 * and replaces its own float32 value by the decoded 16 bits; the
 * all-gather then sends those 16 bits, which every other rank decodes:
 * every rank holds decode(the owner's 16 bits), bitwise equal. Received
 * all-gather segments land in `wire` (direct socket) or are copied there,
 * so that forwarding them needs no second conversion. The gather packs
 * its own buffer once and sums the n 16-bit buffers in rank order.
 * A region of `wire` is rewritten only when the same region of the buffer
 * may be (see zero-copy below), so the same argument covers it.
 *
 * Zero-copy: the caller's buffer is handed to zmq (or stays referenced by
 * a pending direct send); a sent region is never written again before the
 * bytes left (a rank overwrites a chunk only with
 * a value that depends on what it sent of it having arrived), and every
 * collective waits for its sends to let go of the buffer before it
 * returns. With a direct socket, a received segment that is only copied
 * lands straight in the buffer. */
#include "strz.h"

#include <stdlib.h>
#include <string.h>

typedef struct plan {
    int     type;        /* STRZ_DATA, STRZ_BCAST or STRZ_BARRIER          */
    float  *buf;
    size_t  count, seg;
    int     n, rank, op, root;
    int     t0;          /* first step (the all-gather alone: n - 1)       */
    int     send_steps, recv_steps; /* the step after the last            */
    size_t  lead;        /* sends that need no receive first               */
    const size_t *bounds; /* NULL: n chunks of equal size; else n + 1      */
                         /* bounds, chunk k = member (k - 1) mod n's shard */
    int     alg;         /* STRZ_ALG_RING or STRZ_ALG_GATHER (DATA flags)  */
    int     comp;        /* STRZ_COMP_*: DATA payloads in 16 bits          */
    size_t  esz;         /* bytes per element on the wire: 4, or 2          */
    unsigned char *wire; /* comp: 16-bit shadow of buf (count elements)    */
    unsigned char *land; /* gather: the n - 1 buffers received, in order   */
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
    if (p->type == STRZ_BCAST || p->alg == STRZ_ALG_GATHER) {
        *off = 0;
        *len = p->count;
        return;
    }
    int n = p->n;
    size_t k = (size_t)((((p->rank - t - (sending ? 0 : 1)) % n) + n) % n);
    if (p->bounds) {
        size_t o = (k + (size_t)n - 1) % (size_t)n;
        *off = p->bounds[o];
        *len = p->bounds[o + 1] - p->bounds[o];
        return;
    }
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
                     .length = (uint32_t)(cur->len * p->esz),
                     .aux = aux_of(p), .total = p->count,
                     .flags = (uint8_t)(p->alg
                                        | p->comp << STRZ_DATA_COMP_SHIFT) };
    return h;
}

/* The message from the left must be exactly the one expected next. */
static int expect(strz_ctx_t *c, const strz_hdr_t *want, const strz_hdr_t *got)
{
    if (got->sender == c->left && strz_hdr_same(want, got))
        return 0;
    return strz_fail(c, STRATA_EPROTO, c->left,
                     "unexpected message from %s (%s) refused: expected %s "
                     "seq %llu step %d offset %llu bytes %u aux %d total %llu"
                     " flags 0x%x, got %s from rank %d seq %llu step %d "
                     "offset %llu bytes %u aux %d total %llu flags 0x%x",
                     c->name[c->left], c->addr[c->left],
                     strz_wire_type_name(want->type),
                     (unsigned long long)want->seq, (int)want->step,
                     (unsigned long long)want->offset, want->length,
                     (int)want->aux, (unsigned long long)want->total,
                     (int)want->flags, strz_wire_type_name(got->type),
                     (int)got->sender, (unsigned long long)got->seq,
                     (int)got->step, (unsigned long long)got->offset,
                     got->length, (int)got->aux,
                     (unsigned long long)got->total, (int)got->flags);
}

static int check(strz_ctx_t *c, const plan_t *p, const cursor_t *cur,
                 const strz_hdr_t *got)
{
    strz_hdr_t want = header_of(c, p, cur);
    return expect(c, &want, got);
}

/* Element `off` of the buffer the gather received at step t. */
static unsigned char *landed(const plan_t *p, int t, size_t off)
{
    return p->land + ((size_t)t * p->count + off) * p->esz;
}

/* Element `off` of the 16-bit shadow. */
static unsigned char *wire_at(const plan_t *p, size_t off)
{
    return p->wire + off * 2;
}

/* A ring step of an all-reduce adds what it receives (reduce-scatter),
 * or copies it (all-gather; broadcast). */
static int adds(const plan_t *p, int t)
{
    return p->type != STRZ_BCAST && t < p->n - 1;
}

static void apply(const plan_t *p, const cursor_t *cur, const void *data)
{
    size_t off = cur->off, len = cur->len;

    if (p->alg == STRZ_ALG_GATHER) {
        unsigned char *dst = landed(p, cur->t, off);
        if (data != dst)
            memcpy(dst, data, len * p->esz);
        return;
    }
    int add = adds(p, cur->t), last = add && cur->t == p->n - 2;
    float scale = last && p->op == STRATA_REDUCE_MEAN ? 1.0f / (float)p->n
                                                      : 1.0f;
    if (!p->comp) {
        strz_apply(p->buf + off, data, len, add, scale);
    } else if (add) {
        strz_apply16(p->buf + off, data, len, 1, scale, p->comp);
        if (last) { /* our chunk is final: ours too becomes its 16 bits */
            strz_pack16(wire_at(p, off), p->buf + off, len, p->comp);
            strz_unpack16(p->buf + off, wire_at(p, off), len, p->comp);
        }
    } else {
        if (data != wire_at(p, off))
            memcpy(wire_at(p, off), data, len * 2);
        strz_unpack16(p->buf + off, wire_at(p, off), len, p->comp);
    }
}

/* Where a direct socket should put the payload of the next message: a
 * value to be added goes to the scratch segment, a copy straight into
 * the buffer, or into its 16-bit shadow (apply() then has nothing to
 * copy). */
static void *landing(const strz_ctx_t *c, const plan_t *p, const cursor_t *r)
{
    if (p->alg == STRZ_ALG_GATHER)
        return landed(p, r->t, r->off);
    if (adds(p, r->t))
        return c->scratch;
    return p->comp ? (void *)wire_at(p, r->off) : (void *)(p->buf + r->off);
}

/* What the send of the cursor's segment carries: the buffer; with
 * compression its 16 bits (packed here during the reduce-scatter, already
 * in `wire` in the all-gather); in the gather, from step 1 on, what the
 * previous step received. */
static const void *outgoing(const plan_t *p, const cursor_t *s)
{
    if (p->alg == STRZ_ALG_GATHER)
        return s->t > 0 ? (const void *)landed(p, s->t - 1, s->off)
               : p->comp ? (const void *)wire_at(p, s->off)
                         : (const void *)(p->buf + s->off);
    if (!p->comp)
        return p->buf + s->off;
    if (adds(p, s->t))
        strz_pack16(wire_at(p, s->off), p->buf + s->off, s->len, p->comp);
    return wire_at(p, s->off);
}

/* Sends may run ahead of receives by `lead` segments. */
static int send_ready(const plan_t *p, const cursor_t *s, const cursor_t *r)
{
    return s->more && (s->done < p->lead || s->done - p->lead < r->done);
}

static int run(strz_ctx_t *c, const plan_t *p, int64_t deadline)
{
    cursor_t s = { .t = p->t0 }, r = { .t = p->t0 };
    const void *out = NULL; /* the payload of send s.done, once made */
    size_t out_for = (size_t)-1;
    int rc;

    if (strz_direct_rx(c) && c->scratch == NULL
        && (c->scratch = malloc(c->seg * sizeof(float))) == NULL)
        return strz_fail(c, STRATA_ENOMEM, c->rank, "out of memory");

    settle(p, &s, 1);
    settle(p, &r, 0);
    while (s.more || r.more) {
        int progress = 0, blocked = 0;

        if (atomic_load(&c->canceled))
            return strz_fail(c, STRATA_ECANCELED, c->rank,
                             "canceled by the caller (ctl ABORT)");

        while (send_ready(p, &s, &r)) {
            strz_hdr_t h = header_of(c, p, &s);
            if (out_for != s.done) { /* not again after an EAGAIN */
                out = outgoing(p, &s);
                out_for = s.done;
            }
            rc = strz_send(c, &h, out);
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
            strz_hdr_t want = header_of(c, p, &r);
            rc = strz_recv_into(c, &m, &want, landing(c, p, &r));
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
    c->probes_sent = c->probe_acked = 0;
    c->probe_at = 0;
    int64_t now = strz_now_ms();
    if (*deadline == 0)
        *deadline = now + c->timeout_ms;
    /* Direct data need no look at zmq when nothing waits: look anyway
     * now and then (strangers, ABORTs between collectives). */
    if (c->direct && !c->shm && now >= c->next_ctrl) {
        int rc = strz_control_look(c, now);
        if (rc)
            return rc;
    }
    if (atomic_load(&c->canceled))
        return strz_fail(c, STRATA_ECANCELED, c->rank,
                         "canceled by the caller (ctl ABORT)");
    return 0;
}

/* Steps [t0, t1) of the ring over n equal chunks (bounds NULL) or the
 * caller's shards. */
static plan_t ring_span(const strz_ctx_t *c, int type, float *buf,
                        size_t count, int op, const size_t *bounds, int t0,
                        int t1)
{
    plan_t p = { .type = type, .buf = buf, .count = count, .seg = c->seg,
                 .n = c->n, .rank = c->rank, .op = op, .esz = sizeof(float),
                 .t0 = t0, .send_steps = t1, .recv_steps = t1,
                 .bounds = bounds };
    size_t off, len;
    chunk_of(&p, t0, 1, &off, &len);
    p.lead = (len + p.seg - 1) / p.seg;
    return p;
}

static plan_t ring_plan(const strz_ctx_t *c, int type, float *buf,
                        size_t count, int op)
{
    return ring_span(c, type, buf, count, op, NULL, 0, 2 * (c->n - 1));
}

/* ---- gather: small buffers ---------------------------------------- */

/* `bytes` of room kept between calls in *mem (capacity *cap), 64-byte
 * aligned (the sums read it as floats). */
static unsigned char *kept_space(void **mem, size_t *cap, size_t bytes)
{
    size_t need = bytes + 64;
    if (*cap < need) {
        free(*mem);
        *cap = 0;
        if ((*mem = malloc(need)) == NULL)
            return NULL;
        *cap = need;
    }
    return (unsigned char *)(((uintptr_t)*mem + 63) & ~(uintptr_t)63);
}

/* Step t sends our buffer (t = 0) or forwards what step t - 1 received;
 * (as one message: cutting a 64 KiB buffer into 16 KiB segments so that
 * forwarding starts earlier measured 1.5-2x slower with 3-4 ranks on two
 * cores, where every message costs a wake-up); step t receives the buffer of rank
 * (rank - t - 1) mod n. The sum waits until the sends let go of `buf`
 * (run() drains them), then overwrites it. */
static int gather(strz_ctx_t *c, float *buf, size_t count, int op,
                  int comp, int64_t deadline)
{
    const void *src[64];
    const void **srcv = c->n <= 64 ? src : malloc((size_t)c->n * sizeof *srcv);
    size_t esz = comp ? 2 : sizeof(float);
    unsigned char *land = kept_space(&c->gather, &c->gather_cap,
                                     (size_t)(c->n - 1) * count * esz);
    unsigned char *wire = comp ? kept_space(&c->wire, &c->wire_cap, count * 2)
                               : NULL;
    int rc;

    if (land == NULL || srcv == NULL || (comp && wire == NULL)) {
        if (srcv != src)
            free(srcv);
        return strz_fail(c, STRATA_ENOMEM, c->rank, "out of memory");
    }
    size_t seg = c->seg;
    plan_t p = { .type = STRZ_DATA, .alg = STRZ_ALG_GATHER, .buf = buf,
                 .count = count, .seg = seg, .n = c->n, .rank = c->rank,
                 .op = op, .send_steps = c->n - 1, .recv_steps = c->n - 1,
                 .lead = (count + seg - 1) / seg, .land = land, .comp = comp,
                 .esz = esz, .wire = wire };
    if (comp) /* what the others add of ours: we add the same */
        strz_pack16(wire, buf, count, comp);
    if ((rc = run(c, &p, deadline)) == 0) {
        for (int k = 0; k < c->n; k++)
            srcv[k] = k != c->rank ? (const void *)landed(
                                         &p, (c->rank - k - 1 + c->n) % c->n, 0)
                      : comp ? (const void *)wire : (const void *)buf;
        float scale = op == STRATA_REDUCE_MEAN ? 1.0f / (float)c->n : 1.0f;
        if (comp)
            strz_sum16(buf, srcv, c->n, count, scale, comp);
        else
            strz_sum(buf, srcv, c->n, count, scale);
    }
    if (srcv != src)
        free(srcv);
    return rc;
}

/* A ring plan whose DATA payloads travel in 16 bits (comp != NONE): its
 * shadow buffer. */
static int compressed(strz_ctx_t *c, plan_t *p, int comp)
{
    if (!comp)
        return 0;
    p->comp = comp;
    p->esz = 2;
    if ((p->wire = kept_space(&c->wire, &c->wire_cap, p->count * 2)) == NULL)
        return strz_fail(c, STRATA_ENOMEM, c->rank, "out of memory");
    return 0;
}

/* bytes of all the buffers one gather holds at once */
#define STRZ_GATHER_MAX (64u << 20)

/* Gather while the buffer is small (one message, at most chunk_bytes). */
static int use_gather(const strz_ctx_t *c, size_t count)
{
    size_t bytes = count * sizeof(float);
    return bytes <= (size_t)c->cfg.small_bytes
           && bytes <= c->seg * sizeof(float)
           && bytes * (size_t)(c->n - 1) <= STRZ_GATHER_MAX;
}

int strz_allreduce(strz_ctx_t *c, float *buf, size_t count, int op,
                   int comp)
{
    int64_t deadline = 0;
    int rc = start(c, "allreduce", &deadline);
    if (rc || c->n == 1)
        return rc;
    if (c->shm)
        return strz_shm_collective(c, STRZ_DATA, buf, count, op, comp,
                                   deadline);
    if (use_gather(c, count))
        return gather(c, buf, count, op, comp, deadline);
    plan_t p = ring_plan(c, STRZ_DATA, buf, count, op);
    return (rc = compressed(c, &p, comp)) != 0 ? rc : run(c, &p, deadline);
}

/* The ring's halves over the caller's shards (see the top): steps
 * [t0, t1) of an all-reduce. No shared-memory or gather form: the caller
 * asks first (strz_shards_offered) and reduces otherwise. */
static int halves(strz_ctx_t *c, const char *what, float *buf, size_t count,
                  const size_t *bounds, int op, int comp, int t0, int t1)
{
    int64_t deadline = 0;
    int rc = start(c, what, &deadline);
    if (rc || c->n == 1)
        return rc;
    plan_t p = ring_span(c, STRZ_DATA, buf, count, op, bounds, t0, t1);
    return (rc = compressed(c, &p, comp)) != 0 ? rc : run(c, &p, deadline);
}

int strz_shards_offered(const strz_ctx_t *c)
{
    return !c->shm;
}

int strz_reduce_scatter(strz_ctx_t *c, float *buf, size_t count,
                        const size_t *bounds, int op, int comp)
{
    return halves(c, "reduce-scatter", buf, count, bounds, op, comp, 0,
                  c->n - 1);
}

int strz_all_gather(strz_ctx_t *c, float *buf, size_t count,
                    const size_t *bounds)
{
    return halves(c, "all-gather", buf, count, bounds, STRATA_REDUCE_SUM,
                  STRZ_COMP_NONE, c->n - 1, 2 * (c->n - 1));
}

void strz_ring_free(strz_ctx_t *c)
{
    free(c->scratch);
    c->scratch = NULL;
    free(c->gather);
    c->gather = NULL;
    c->gather_cap = 0;
    free(c->wire);
    c->wire = NULL;
    c->wire_cap = 0;
}

int strz_barrier(strz_ctx_t *c, int64_t deadline)
{
    float one = 1.0f;
    int rc = start(c, "barrier", &deadline);
    if (rc || c->n == 1)
        return rc;
    if (c->shm)
        return strz_shm_collective(c, STRZ_BARRIER, NULL, 0, 0, 0, deadline);
    plan_t p = ring_plan(c, STRZ_BARRIER, &one, 1, STRATA_REDUCE_SUM);
    return run(c, &p, deadline);
}

int strz_broadcast(strz_ctx_t *c, float *buf, size_t count, int root)
{
    int64_t deadline = 0;
    int rc = start(c, "broadcast", &deadline);
    if (rc || c->n == 1)
        return rc;
    if (c->shm)
        return strz_shm_collective(c, STRZ_BCAST, buf, count, root, 0,
                                   deadline);
    plan_t p = { .type = STRZ_BCAST, .buf = buf, .count = count,
                 .seg = c->seg, .n = c->n, .rank = c->rank, .root = root,
                 .esz = sizeof(float) };
    if (c->rank == root) {
        p.send_steps = 1;
        p.lead = (size_t)-1;
    } else {
        p.recv_steps = 1;
        p.send_steps = c->right != root ? 1 : 0;
    }
    return run(c, &p, deadline);
}
