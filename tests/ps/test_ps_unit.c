/* ps.so units: the partitioners against TensorFlow's documented examples,
 * contiguous row blocks, round-robin placement, option parsing; the wire
 * header: round trip and every refusal; the coordinator's step table:
 * order, retries first, first report wins; a PUSH's row blocks (wire v6):
 * packed from an op's rows and every refusal; a PULL's (v7): packed from
 * a batch's rows, answered, put in place, and every refusal. ps_part.c,
 * ps_wire.c, ps_sched.c, ps_rows.c and ps_pull.c are compiled into this
 * test. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "../../plugins/strategy/ps/ps.h"
#include "../../plugins/strategy/ps/ps_part.h"
#include "../../plugins/strategy/ps/ps_sched.h"
#include "../../plugins/strategy/ps/ps_wire.h"

static int64_t count_of(const char *spec, int64_t d0, int64_t d1)
{
    ps_part_t p;
    char why[256];
    if (ps_part_parse(spec, &p, why, sizeof why) != 0)
        return -1;
    int64_t shape[2] = { d0, d1 };
    return ps_part_count(&p, shape, d1 ? 2 : 1, sizeof(float));
}

static void partitioners(void)
{
    /* FixedShardsPartitioner(num_shards=2)(TensorShape([10, 3])) -> [2, 1] */
    CHECK(count_of("fixed:2", 10, 3) == 2);
    /* never more shards than rows: min(num_shards, dim0) */
    CHECK(count_of("fixed:5", 3, 4) == 3);
    /* MinSizePartitioner(min_shard_bytes=4, max_shards=2)([6, 1]) -> [2, 1] */
    CHECK(count_of("min_size:4:2", 6, 1) == 2);
    /* MinSizePartitioner(min_shard_bytes=4, max_shards=10)([6, 1]) -> [6, 1] */
    CHECK(count_of("min_size:4:10", 6, 1) == 6);
    /* min_max_variable_partitioner docstring: [1024, 1024] float32, 256K:
     * 16 shards with max_partitions >= 16, else max_partitions */
    CHECK(count_of("min_size:256K:16", 1024, 1024) == 16);
    CHECK(count_of("min_size:256K:100", 1024, 1024) == 16);
    CHECK(count_of("min_size:256K:4", 1024, 1024) == 4);
    /* max_shards defaults to 1, as in TensorFlow */
    CHECK(count_of("min_size:4", 6, 1) == 1);
    /* ceil: 5 bytes over a 4-byte minimum are 2 shards */
    CHECK(count_of("min_size:16:10", 5, 1) == 2);
    /* MaxSizePartitioner(max_shard_bytes=4)([6, 1]) -> [6, 1] */
    CHECK(count_of("max_size:4", 6, 1) == 6);
    /* MaxSizePartitioner(max_shard_bytes=4, max_shards=2)([6, 1]) -> [2, 1] */
    CHECK(count_of("max_size:4:2", 6, 1) == 2);
    /* MaxSizePartitioner(max_shard_bytes=1024)([6, 1]) -> [1, 1] */
    CHECK(count_of("max_size:1024", 6, 1) == 1);
    /* a row bigger than the maximum: one row per shard */
    CHECK(count_of("max_size:4", 3, 100) == 3);
    /* 784 x 128 float32 = 401408 bytes: floor(64K / 512) = 128 rows a
     * shard, ceil(784 / 128) = 7 shards */
    CHECK(count_of("max_size:64K", 784, 128) == 7);
    CHECK(count_of("", 784, 128) == 1);
    CHECK(count_of(NULL, 784, 128) == 1);
    /* rank 0 is never split */
    ps_part_t p;
    char why[256];
    CHECK(ps_part_parse("fixed:4", &p, why, sizeof why) == 0);
    CHECK(ps_part_count(&p, NULL, 0, 4) == 1);
}

static void rows(void)
{
    /* 13 rows over 5 shards: 3, 3, 3, 2, 2, contiguous */
    static const int64_t want[5] = { 3, 3, 3, 2, 2 };
    int64_t next = 0;
    for (int k = 0; k < 5; k++) {
        int64_t r0, n;
        ps_part_rows(13, 5, k, &r0, &n);
        CHECKF(n == want[k] && r0 == next, "shard %d: rows %lld at %lld", k,
               (long long)n, (long long)r0);
        next = r0 + n;
    }
    CHECK(next == 13);
    /* even split */
    int64_t r0, n;
    ps_part_rows(10, 2, 1, &r0, &n);
    CHECK(r0 == 5 && n == 5);
}

static void parse(void)
{
    ps_part_t p;
    char why[256];
    CHECK(ps_part_parse("min_size:64K:2", &p, why, sizeof why) == 0);
    CHECK(p.kind == PS_PART_MIN_SIZE && p.bytes == 65536 && p.max_shards == 2);
    CHECK(ps_part_parse("max_size:1M", &p, why, sizeof why) == 0);
    CHECK(p.kind == PS_PART_MAX_SIZE && p.bytes == 1048576 && p.max_shards == 0);
    CHECK(ps_part_parse("fixed:3", &p, why, sizeof why) == 0);
    CHECK(p.kind == PS_PART_FIXED && p.shards == 3);
    static const char *const bad[] = {
        "fixed:0", "fixed:", "fixed:3x", "fixed:-1", "min_size:abc",
        "max_size:4K:0", "max_size:4K:", "bogus", "fixed:3:4", "min_size:4T",
        "max_size:99999999999999999999",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        why[0] = '\0';
        CHECKF(ps_part_parse(bad[i], &p, why, sizeof why) == -1 && why[0],
               "'%s' accepted", bad[i]);
    }
}

static void placement(void)
{
    ps_part_t p;
    char why[256];
    ps_place_t pl;
    CHECK(ps_part_parse("fixed:2", &p, why, sizeof why) == 0);
    CHECK(ps_place_init(&pl, 2) == 0);
    int64_t k0[2] = { 13, 4 }, b0[1] = { 1 }, k1[2] = { 4, 3 };
    CHECK(ps_place_var(&pl, &p, 0, k0, 2, 0, 52) == 0);  /* 2 shards */
    CHECK(ps_place_var(&pl, &p, 1, b0, 1, 64, 1) == 0);  /* 1 row: 1 shard */
    CHECK(ps_place_var(&pl, &p, 2, k1, 2, 80, 12) == 0); /* 2 shards */
    CHECK(ps_place_var(&pl, &p, 3, k1, 2, 96, 11) == -1); /* count != shape */
    CHECK(pl.n == 5);
    /* round-robin over shards in model order: ps 0 1 0 1 0 */
    static const int owner[5] = { 0, 1, 0, 1, 0 };
    static const size_t off[5] = { 0, 28, 64, 80, 86 }, cnt[5] = { 28, 24, 1, 6, 6 };
    for (int i = 0; i < pl.n && i < 5; i++)
        CHECKF(pl.shard[i].ps == owner[i] && pl.shard[i].offset == off[i]
               && pl.shard[i].count == cnt[i], "shard %d: ps %d, %zu at %zu",
               i, pl.shard[i].ps, pl.shard[i].count, pl.shard[i].offset);
    CHECK(pl.ps_count[0] == 28 + 1 + 6 && pl.ps_count[1] == 24 + 6);
    ps_place_free(&pl);
    /* no partitioner: whole variables, round-robin */
    CHECK(ps_part_parse("", &p, why, sizeof why) == 0);
    CHECK(ps_place_init(&pl, 3) == 0);
    for (int v = 0; v < 4; v++)
        CHECK(ps_place_var(&pl, &p, v, k0, 2, (size_t)v * 64, 52) == 0);
    CHECK(pl.n == 4 && pl.shard[3].ps == 0 && pl.shard[2].ps == 2);
    CHECK(pl.ps_count[0] == 104 && pl.ps_count[1] == 52);
    ps_place_free(&pl);
    /* A conv2d kernel [kh][kw][c][f] splits along kh like any variable:
     * 3 rows of 3*32*64 floats over 2 ps tasks, 2 rows and 1. */
    CHECK(ps_part_parse("fixed:2", &p, why, sizeof why) == 0);
    CHECK(ps_place_init(&pl, 2) == 0);
    int64_t conv[4] = { 3, 3, 32, 64 };
    CHECK(ps_place_var(&pl, &p, 0, conv, 4, 0, 3 * 3 * 32 * 64) == 0);
    CHECK(pl.n == 2 && pl.shard[0].ps == 0 && pl.shard[1].ps == 1);
    CHECK(pl.shard[0].count == 2 * 3 * 32 * 64 && pl.shard[0].offset == 0);
    CHECK(pl.shard[1].count == 3 * 32 * 64 &&
          pl.shard[1].offset == 2 * 3 * 32 * 64);
    ps_place_free(&pl);
    /* max_size splits it by whole kh rows: 18 KiB rows, 20 KiB shards. */
    CHECK(ps_part_parse("max_size:20K", &p, why, sizeof why) == 0);
    CHECK(ps_part_count(&p, conv, 4, sizeof(float)) == 3);
}

static int unpack(const unsigned char *b, size_t len, ps_hdr_t *h)
{
    const unsigned char *pl;
    const char *why = NULL;
    int rc = ps_wire_unpack(b, len, h, &pl, &why);
    return rc == 0 ? 0 : (why && why[0] ? -1 : -2);
}

static void wire(void)
{
    unsigned char b[PS_HDR_SIZE + 16];
    float grad[4] = { 1, 2, 3, 4 };
    ps_hdr_t h = { .type = PS_PUSH, .sender = 3, .attempt = 2, .step = 77,
                   .req = 9, .incarnation = 0x1122334455667788ull, .a = 5,
                   .f = 0.001, .count = 4 }, o;
    ps_wire_pack(&h, b);
    memcpy(b + PS_HDR_SIZE, grad, sizeof grad);
    const unsigned char *pl = NULL;
    const char *why = NULL;
    CHECK(ps_wire_unpack(b, sizeof b, &o, &pl, &why) == 0);
    CHECK(o.type == PS_PUSH && o.sender == 3 && o.attempt == 2
          && o.step == 77 && o.req == 9 && o.incarnation == h.incarnation
          && o.a == 5 && o.f == 0.001 && o.count == 4);
    CHECK(pl == b + PS_HDR_SIZE);
    /* every length is checked against the message */
    CHECK(unpack(b, sizeof b - 1, &o) == -1);
    CHECK(unpack(b, PS_HDR_SIZE - 1, &o) == -1);
    CHECK(unpack(b, 0, &o) == -1);
    unsigned char c[PS_HDR_SIZE + 16];
#define MUTATE(off, val) (memcpy(c, b, sizeof c), c[off] = (unsigned char)(val))
    MUTATE(0, 'X');
    CHECK(unpack(c, sizeof c, &o) == -1);      /* magic */
    MUTATE(4, PS_WIRE_VERSION + 1);
    CHECK(unpack(c, sizeof c, &o) == -1);      /* version */
    MUTATE(6, 0);
    CHECK(unpack(c, sizeof c, &o) == -1);      /* type 0 */
    MUTATE(6, 99);
    CHECK(unpack(c, sizeof c, &o) == -1);      /* unknown type */
    MUTATE(7, PS_STALE);
    CHECK(unpack(c, sizeof c, &o) == -1);      /* status on a request */
    MUTATE(72, 5);
    CHECK(unpack(c, sizeof c, &o) == -1);      /* count vs length */
    MUTATE(75, 0x80);
    CHECK(unpack(c, sizeof c, &o) == -1);      /* huge count */
    /* type-specific: lr must be >= 0 (a schedule may reach 0) and finite;
     * payload only on PUSH/PARAMS */
    ps_hdr_t bad = h;
    bad.f = 0;
    ps_wire_pack(&bad, c);
    CHECK(unpack(c, sizeof c, &o) == 0 && o.f == 0);
    bad.f = -0.001;
    ps_wire_pack(&bad, c);
    CHECK(unpack(c, sizeof c, &o) == -1);
    bad.f = NAN;
    ps_wire_pack(&bad, c);
    CHECK(unpack(c, sizeof c, &o) == -1);
    bad = h;
    bad.attempt = 0;
    ps_wire_pack(&bad, c);
    CHECK(unpack(c, sizeof c, &o) == -1);
    bad = h;
    bad.type = PS_PULL;
    ps_wire_pack(&bad, c);
    CHECK(unpack(c, sizeof c, &o) == -1);
    ps_hdr_t q = { .type = PS_STEP_REQ, .c = 1, .step = 4, .attempt = 1,
                   .a = 32, .f = 1.0 };
    static const double bad_metric[] = { -1.0, NAN, INFINITY };
    for (int i = 0; i < 3; i++) {
        ps_wire_set_metric(&q, bad_metric[i]);
        ps_wire_pack(&q, c);
        CHECK(unpack(c, PS_HDR_SIZE, &o) == -1);
    }
    ps_wire_set_metric(&q, 30.25);   /* a mean error may exceed samples */
    ps_wire_pack(&q, c);
    CHECK(unpack(c, PS_HDR_SIZE, &o) == 0 && ps_wire_metric(&o) == 30.25);
    q.c = 2; /* a result whose loss was not finite (f = 0) */
    ps_wire_pack(&q, c);
    CHECK(unpack(c, PS_HDR_SIZE, &o) == 0 && o.c == 2);
    q.c = 3;
    ps_wire_pack(&q, c);
    CHECK(unpack(c, PS_HDR_SIZE, &o) == -1);   /* has_result not 0/1/2 */
    q.c = -1;
    ps_wire_pack(&q, c);
    CHECK(unpack(c, PS_HDR_SIZE, &o) == -1);
    ps_hdr_t ack = { .type = PS_PUSH_ACK, .status = PS_DUPLICATE };
    ps_wire_pack(&ack, c);
    CHECK(unpack(c, PS_HDR_SIZE, &o) == 0 && o.status == PS_DUPLICATE);
    /* version 5: the layer states ride on a result (has_res 1) and on a
     * STEP, finite only; not on a request without a result */
    unsigned char sb[PS_HDR_SIZE + 8];
    float st2[2] = { 0.5f, 1.25f };
    const unsigned char *spl = NULL;
    ps_hdr_t sq = { .type = PS_STEP_REQ, .c = 1, .step = 4, .attempt = 1,
                    .a = 32, .f = 1.0, .count = 2 };
    ps_wire_pack(&sq, sb);
    memcpy(sb + PS_HDR_SIZE, st2, sizeof st2);
    CHECK(ps_wire_unpack(sb, sizeof sb, &o, &spl, &why) == 0 && o.count == 2
          && spl == sb + PS_HDR_SIZE);
    for (int k = 0; k < 2; k++) {
        float nf = k ? INFINITY : NAN;
        memcpy(sb + PS_HDR_SIZE + 4, &nf, sizeof nf);
        CHECK(ps_wire_unpack(sb, sizeof sb, &o, &spl, &why) == -1 &&
              strstr(why, "layer state") != NULL);
    }
    memcpy(sb + PS_HDR_SIZE, st2, sizeof st2);
    sq.c = 2; /* a loss that was not finite: no states */
    ps_wire_pack(&sq, sb);
    CHECK(unpack(sb, sizeof sb, &o) == -1);
    sq.c = 0;
    ps_wire_pack(&sq, sb);
    CHECK(unpack(sb, sizeof sb, &o) == -1);
    ps_hdr_t ss = { .type = PS_STEP, .step = 4, .attempt = 1, .a = 4,
                    .count = 2 };
    ps_wire_pack(&ss, sb);
    CHECK(unpack(sb, sizeof sb, &o) == 0 && o.count == 2);
    float nan1 = NAN;
    memcpy(sb + PS_HDR_SIZE, &nan1, sizeof nan1);
    CHECK(unpack(sb, sizeof sb, &o) == -1);
    /* a version-4 message (no states) is another protocol */
    ps_hdr_t ping = { .type = PS_PING };
    ps_wire_pack(&ping, sb);
    sb[4] = 4;
    CHECK(unpack(sb, PS_HDR_SIZE, &o) == -1);
    /* pieces (v9): a PARAMS, STATE or STATE_PUT may carry words
     * [at, at + count) of a payload of `total`; nothing else may */
    unsigned char pb[PS_HDR_SIZE + 16];
    ps_hdr_t pc = { .type = PS_PARAMS, .a = 3, .count = 4, .at = 8,
                    .total = 16 };
    ps_wire_pack(&pc, pb);
    memcpy(pb + PS_HDR_SIZE, grad, sizeof grad);
    CHECK(unpack(pb, sizeof pb, &o) == 0 && o.at == 8 && o.total == 16
          && o.count == 4);
    pc.at = 12; /* the last piece */
    ps_wire_pack(&pc, pb);
    CHECK(unpack(pb, sizeof pb, &o) == 0 && o.at == 12);
    pc.at = 13; /* past the whole */
    ps_wire_pack(&pc, pb);
    CHECK(ps_wire_unpack(pb, sizeof pb, &o, &pl, &why) == -1
          && strstr(why, "beyond") != NULL);
    pc.at = 0xfffffffeu; /* at + count wraps 32 bits */
    pc.total = 0xffffffffu;
    ps_wire_pack(&pc, pb);
    CHECK(unpack(pb, sizeof pb, &o) == -1);
    ps_hdr_t pp = { .type = PS_STATE_PUT, .step = 3, .a = 0, .b = 2,
                    .count = 4, .at = 4, .total = 8 };
    ps_wire_pack(&pp, pb);
    CHECK(unpack(pb, sizeof pb, &o) == 0 && o.at == 4 && o.total == 8);
    h.total = 8; /* a PUSH goes whole: packed with total = count */
    ps_wire_pack(&h, pb);
    CHECK(unpack(pb, sizeof pb, &o) == 0 && o.total == 4 && o.at == 0);
    pb[84] = 8; /* as another sender would write it */
    CHECK(ps_wire_unpack(pb, sizeof pb, &o, &pl, &why) == -1
          && strstr(why, "whole") != NULL);
    h.total = 0;
    ps_hdr_t pe = { .type = PS_PARAMS, .at = 0, .total = 5 };
    ps_wire_pack(&pe, pb);
    CHECK(unpack(pb, PS_HDR_SIZE, &o) == -1);   /* an empty piece */
    ps_wire_pack(&h, pb);
    pb[91] = 1;                                 /* reserved bytes */
    CHECK(ps_wire_unpack(pb, sizeof pb, &o, &pl, &why) == -1
          && strstr(why, "reserved") != NULL);
    CHECK(strcmp(ps_wire_type_name(PS_FIN_ACK), "FIN_ACK") == 0);
    CHECK(strcmp(ps_wire_type_name(0), "?") == 0);
}

static void sched(void)
{
    ps_sched_t s;
    int64_t b;
    int32_t a;
    CHECK(ps_sched_init(&s, 4) == 0);
    ps_sched_begin(&s, 0, 4, 0);
    CHECK(ps_sched_next(&s, 0, &b, &a) == 1 && b == 0 && a == 1);
    CHECK(ps_sched_next(&s, 1, &b, &a) == 1 && b == 1 && a == 1);
    /* worker 1 is lost: batch 1 goes first, as attempt 2 */
    CHECK(ps_sched_requeue(&s, 1) == 1);
    CHECK(ps_sched_requeue(&s, 1) == 0);          /* not running any more */
    CHECK(ps_sched_next(&s, 2, &b, &a) == 1 && b == 1 && a == 2);
    CHECK(s.owner[1] == 2);
    /* the first report counts, the late one does not */
    CHECK(ps_sched_done(&s, 1, 10.0, 3, 4) == 1);
    CHECK(ps_sched_done(&s, 1, 99.0, 4, 4) == 0);
    CHECK(ps_sched_done(&s, 7, 1.0, 1, 1) == -1);
    CHECK(s.loss == 10.0 && s.metric == 3.0 && s.samples == 4);
    /* batch 0 re-queued, then reported done by its old worker while it
     * waited: it is skipped, never handed out again */
    CHECK(ps_sched_requeue(&s, 0) == 1);
    CHECK(ps_sched_done(&s, 0, 1.0, 1, 4) == 1);
    CHECK(ps_sched_next(&s, 0, &b, &a) == 1 && b == 2 && a == 1);
    CHECK(ps_sched_next(&s, 0, &b, &a) == 1 && b == 3);
    CHECK(ps_sched_next(&s, 0, &b, &a) == 0);
    CHECK(!ps_sched_complete(&s));
    CHECK(ps_sched_done(&s, 2, 0, 0, 4) == 1 && ps_sched_done(&s, 3, 0, 0, 4) == 1);
    CHECK(ps_sched_complete(&s) && s.ndone == 4);
    /* a new epoch starts over; more batches than room are cut */
    ps_sched_begin(&s, 1, 9, 0);
    CHECK(s.n == 4 && s.epoch == 1 && s.ndone == 0 && s.attempt[1] == 0);
    ps_sched_free(&s);
}

/* A resumed epoch, and draining to a step boundary. */
static void sched_boundary(void)
{
    ps_sched_t s;
    int64_t b;
    int32_t a;
    CHECK(ps_sched_init(&s, 8) == 0);
    /* resumed after batch 3: 0..2 count as done, 3 goes out first */
    ps_sched_begin(&s, 2, 8, 3);
    CHECK(s.ndone == 3 && s.first == 3 && s.issued == 3 && s.limit == 8);
    CHECK(s.samples == 0 && !ps_sched_complete(&s));
    CHECK(ps_sched_next(&s, 0, &b, &a) == 1 && b == 3 && a == 1);
    CHECK(ps_sched_next(&s, 1, &b, &a) == 1 && b == 4);
    CHECK(s.issued == 5);
    /* a boundary before batch 5: nothing past it goes out */
    s.limit = s.issued;
    CHECK(ps_sched_next(&s, 2, &b, &a) == 0);
    CHECK(!ps_sched_drained(&s));
    /* batch 4's worker is lost: its retry still goes out (before limit) */
    CHECK(ps_sched_requeue(&s, 4) == 1);
    CHECK(ps_sched_next(&s, 2, &b, &a) == 1 && b == 4 && a == 2);
    CHECK(ps_sched_next(&s, 2, &b, &a) == 0);
    CHECK(ps_sched_done(&s, 3, 1, 1, 4) == 1 && !ps_sched_drained(&s));
    CHECK(ps_sched_done(&s, 4, 1, 1, 4) == 1 && ps_sched_drained(&s));
    /* boundary passed: the rest goes out in order */
    s.limit = s.n;
    CHECK(ps_sched_next(&s, 0, &b, &a) == 1 && b == 5 && a == 1);
    /* resumed at the epoch's end: nothing left */
    ps_sched_begin(&s, 3, 8, 8);
    CHECK(ps_sched_complete(&s) && ps_sched_next(&s, 0, &b, &a) == 0);
    /* out of range firsts are clamped */
    ps_sched_begin(&s, 3, 8, -2);
    CHECK(s.first == 0 && s.ndone == 0);
    ps_sched_free(&s);
}

/* Checkpoint messages: parts, slot counts, stop flags. */
static void wire_state(void)
{
    unsigned char c[PS_HDR_SIZE + 8];
    ps_hdr_t o;
    const unsigned char *pl;
    const char *why;
    ps_hdr_t q = { .type = PS_STATE_REQ, .step = -1, .a = 2, .b = 2 };
    ps_wire_pack(&q, c);
    CHECK(ps_wire_unpack(c, PS_HDR_SIZE, &o, &pl, &why) == 0 && o.a == 2);
    q.a = 3; /* part beyond the slots */
    ps_wire_pack(&q, c);
    CHECK(ps_wire_unpack(c, PS_HDR_SIZE, &o, &pl, &why) == -1);
    q.a = 0;
    q.b = PS_MAX_SLOTS + 1;
    ps_wire_pack(&q, c);
    CHECK(ps_wire_unpack(c, PS_HDR_SIZE, &o, &pl, &why) == -1);
    /* STATE_PUT carries values and needs the step it restores */
    ps_hdr_t put = { .type = PS_STATE_PUT, .step = 7, .a = 1, .b = 2, .c = 7,
                     .count = 2 };
    ps_wire_pack(&put, c);
    memset(c + PS_HDR_SIZE, 0, 8);
    CHECK(ps_wire_unpack(c, PS_HDR_SIZE + 8, &o, &pl, &why) == 0 && pl
          && o.count == 2 && o.step == 7 && o.c == 7);
    put.step = -1;
    ps_wire_pack(&put, c);
    CHECK(ps_wire_unpack(c, PS_HDR_SIZE + 8, &o, &pl, &why) == -1);
    /* a failed STATE reply carries no values */
    ps_hdr_t st = { .type = PS_STATE, .status = PS_FAILED, .step = -1,
                    .count = 2 };
    ps_wire_pack(&st, c);
    CHECK(ps_wire_unpack(c, PS_HDR_SIZE + 8, &o, &pl, &why) == -1);
    st.count = 0;
    ps_wire_pack(&st, c);
    CHECK(ps_wire_unpack(c, PS_HDR_SIZE, &o, &pl, &why) == 0
          && o.status == PS_FAILED);
    ps_hdr_t ack = { .type = PS_STATE_ACK, .status = PS_DUPLICATE };
    ps_wire_pack(&ack, c);
    CHECK(ps_wire_unpack(c, PS_HDR_SIZE, &o, &pl, &why) == -1);
    /* DONE and FINISH: the stop flag is 0 or 1 */
    ps_hdr_t done = { .type = PS_DONE, .step = -1, .a = 1 };
    ps_wire_pack(&done, c);
    CHECK(ps_wire_unpack(c, PS_HDR_SIZE, &o, &pl, &why) == 0 && o.a == 1);
    done.type = PS_FINISH;
    done.a = 2;
    ps_wire_pack(&done, c);
    CHECK(ps_wire_unpack(c, PS_HDR_SIZE, &o, &pl, &why) == -1);
    CHECK(strcmp(ps_wire_type_name(PS_STATE_ACK), "STATE_ACK") == 0);
    /* v8: STATE_SAVE names the checkpoint's step, its tag (any bits), the
     * slots and the part count; STATE_SAVED the steps and bytes */
    ps_hdr_t sv = { .type = PS_STATE_SAVE, .step = 40, .a = -5, .b = 2,
                    .c = 3 };
    ps_wire_pack(&sv, c);
    CHECK(ps_wire_unpack(c, PS_HDR_SIZE, &o, &pl, &why) == 0 && o.a == -5
          && o.c == 3 && o.step == 40);
    const int64_t bad[][3] = { { -1, 2, 3 }, { 40, PS_MAX_SLOTS + 1, 3 },
                               { 40, 2, 0 }, { 40, -1, 3 } };
    for (int i = 0; i < 4; i++) {
        sv.step = bad[i][0];
        sv.b = bad[i][1];
        sv.c = bad[i][2];
        ps_wire_pack(&sv, c);
        CHECK(ps_wire_unpack(c, PS_HDR_SIZE, &o, &pl, &why) == -1);
    }
    ps_hdr_t sd = { .type = PS_STATE_SAVED, .status = PS_FAILED, .step = 40,
                    .a = 7, .b = 1 << 20 };
    ps_wire_pack(&sd, c);
    CHECK(ps_wire_unpack(c, PS_HDR_SIZE, &o, &pl, &why) == 0
          && o.status == PS_FAILED && o.b == 1 << 20);
    sd.b = -1;
    ps_wire_pack(&sd, c);
    CHECK(ps_wire_unpack(c, PS_HDR_SIZE, &o, &pl, &why) == -1);
    sd.b = 0;
    sd.status = PS_STALE;
    ps_wire_pack(&sd, c);
    CHECK(ps_wire_unpack(c, PS_HDR_SIZE, &o, &pl, &why) == -1);
    CHECK(strcmp(ps_wire_type_name(PS_STATE_SAVED), "STATE_SAVED") == 0);
}

/* ---- row blocks (ps_rows.c) ---------------------------------------------- */

static int h_copy(strata_hctx_t *hc, int32_t dd, void *dst, int32_t sd,
                  const void *src, size_t n)
{
    (void)hc, (void)dd, (void)sd;
    memcpy(dst, src, n);
    return STRATA_OK;
}

/* A payload for ps 0 of a job whose table [10, 4] is split fixed:2 (rows
 * 0-4: shard 0 on ps 0, rows 5-9: shard 1 on ps 1) beside a bias [3]
 * (shard 2, ps 0): one block for shard 0 with `n` ids and rows of 0.5 (the
 * last value `last`), then the bias's 3 values. */
static size_t block(unsigned char *out, uint32_t shard, uint32_t claim,
                    const int64_t *ids, uint32_t n, float last)
{
    size_t at = 0;
    memcpy(out, &shard, 4);
    memcpy(out + 4, &claim, 4);
    memcpy(out + 8, ids, 8 * (size_t)n);
    at = 8 + 8 * (size_t)n;
    for (uint32_t e = 0; e < 4 * n; e++, at += 4)
        memcpy(out + at, &(float){ e + 1 == 4 * n ? last : 0.5f }, 4);
    for (int e = 0; e < 3; e++, at += 4)
        memcpy(out + at, &(float){ 1.0f }, 4);
    return at / 4;
}

static void row_blocks(void)
{
    static strata_host_v2_t host = { .copy = h_copy };
    ps_t p;
    memset(&p, 0, sizeof p);
    p.host = &host;
    p.nps = 2;
    ps_part_t part;
    char why[64];
    CHECK(ps_part_parse("fixed:2", &part, why, sizeof why) == 0);
    CHECK(ps_place_init(&p.place, 2) == 0);
    int64_t table[2] = { 10, 4 }, bias[1] = { 3 };
    CHECK(ps_place_var(&p.place, &part, 0, table, 2, 0, 40) == 0);
    part.kind = PS_PART_NONE;
    CHECK(ps_place_var(&p.place, &part, 1, bias, 1, 40, 3) == 0);
    CHECK(p.place.n == 3 && p.place.shard[2].ps == 0 &&
          p.place.ps_count[0] == 23);
    /* packed from an op: rows 1, 4 to ps 0, rows 6, 9 to ps 1 */
    float buf[43] = { 0 }, vals[16];
    for (int e = 0; e < 16; e++)
        vals[e] = (float)e;
    buf[40] = 7.0f;
    int64_t rows[4] = { 1, 4, 6, 9 };
    strata_sparse_t sp = { .var = 0, .offset = 0, .count = 40, .row_len = 4,
                           .nrows = 4, .rows = rows, .values = vals };
    strata_op_t op = { .struct_size = sizeof op, .buf = buf, .count = 43,
                       .sparse = &sp, .nsparse = 1 };
    float out[64];
    uint32_t count = 0;
    int64_t nb = 0;
    CHECK(ps_rows_pack(&p, 0, &op, out, &count, &nb) == STRATA_OK);
    CHECK(nb == 1 && count == 2 + 4 + 8 + 3);
    CHECK(ps_rows_check(&p, 0, (unsigned char *)out, count, nb) == NULL);
    int prev = -1;
    ps_rows_t r;
    size_t at = ps_rows_next(&p, 0, (unsigned char *)out, count, 0, &prev, &r);
    int64_t id1;
    memcpy(&id1, r.ids + 8, 8);
    CHECK(at == 4 * 14 && r.shard == 0 && r.nrows == 2 && r.row_len == 4 &&
          id1 == 4 && out[14] == 7.0f);
    CHECK(ps_rows_pack(&p, 1, &op, out, &count, &nb) == STRATA_OK);
    CHECK(nb == 1 && count == 2 + 4 + 8 && /* ps 1 holds only the table */
          ps_rows_check(&p, 1, (unsigned char *)out, count, nb) == NULL);
    /* every refusal */
    unsigned char m[256];
    const int64_t ok[2] = { 1, 3 }, beyond[2] = { 1, 5 }, down[2] = { 3, 1 },
                  twice[2] = { 2, 2 };
    struct {
        uint32_t shard, claim;
        const int64_t *ids;
        float last;
        int64_t nb;
        const char *why;
    } k[] = {
        { 0, 2, ok, 0.5f, 1, NULL },
        { 0, 2, beyond, 0.5f, 1, "a row id outside the shard" },
        { 0, 2, down, 0.5f, 1, "row ids not ascending and distinct" },
        { 0, 2, twice, 0.5f, 1, "row ids not ascending and distinct" },
        { 0, 2, ok, NAN, 1, "a row value that is not finite" },
        { 0, 2, ok, INFINITY, 1, "a row value that is not finite" },
        { 0, 3, ok, 0.5f, 1, "row count disagrees with the payload" },
        { 0, 1, ok, 0.5f, 1, "payload size disagrees with its row blocks" },
        { 0, 200, ok, 0.5f, 1, "more rows than the shard has" },
        { 0, 5, ok, 0.5f, 1, "row count disagrees with the payload" },
        { 1, 2, ok, 0.5f, 1, "a row block names a shard this ps does not hold" },
        { 9, 2, ok, 0.5f, 1, "a row block names a shard this ps does not hold" },
        { 0, 2, ok, 0.5f, 3, "more row blocks than this ps holds shards" },
    };
    for (size_t c = 0; c < sizeof k / sizeof *k; c++) {
        size_t words = block(m, k[c].shard, k[c].claim, k[c].ids, 2,
                             k[c].last);
        const char *got = ps_rows_check(&p, 0, m, (uint32_t)words, k[c].nb);
        CHECKF(k[c].why ? got && !strcmp(got, k[c].why) : got == NULL,
               "case %zu: '%s', want '%s'", c, got ? got : "(accepted)",
               k[c].why ? k[c].why : "(accepted)");
    }
    /* shard 0 twice: a block of one row, then one of none */
    uint32_t w2[] = { 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
    CHECK(ps_rows_check(&p, 0, (unsigned char *)w2, 13, 2) != NULL &&
          !strcmp(ps_rows_check(&p, 0, (unsigned char *)w2, 13, 2),
                  "row blocks not in placement order (or one shard twice)"));
    /* the wire header: row blocks need their two words each */
    unsigned char msg[PS_HDR_SIZE + 16] = { 0 };
    ps_hdr_t h = { .type = PS_PUSH, .attempt = 1, .step = 0, .f = 0.1,
                   .b = 2, .count = 4 };
    ps_hdr_t d;
    const unsigned char *pl;
    const char *w;
    ps_wire_pack(&h, msg);
    CHECK(ps_wire_unpack(msg, sizeof msg, &d, &pl, &w) == 0 && d.b == 2);
    h.b = 3;
    ps_wire_pack(&h, msg);
    CHECK(ps_wire_unpack(msg, sizeof msg, &d, &pl, &w) != 0 &&
          !strcmp(w, "row block count out of range"));
    h.b = -1;
    ps_wire_pack(&h, msg);
    CHECK(ps_wire_unpack(msg, sizeof msg, &d, &pl, &w) != 0);
    ps_place_free(&p.place);
}

/* ---- pulls of rows (ps_pull.c, wire v7) ----------------------------------- */

/* A PULL request for ps 0 of row_blocks' job: one block for `shard` that
 * says `claim` rows and carries the n ids; its words. */
static size_t want_block(unsigned char *out, uint32_t shard, uint32_t claim,
                         const int64_t *ids, uint32_t n)
{
    memcpy(out, &shard, 4);
    memcpy(out + 4, &claim, 4);
    memcpy(out + 8, ids, 8 * (size_t)n);
    return 2 + 2 * (size_t)n;
}

static void pull_rows(void)
{
    static strata_host_v2_t host = { .copy = h_copy };
    ps_t p;
    memset(&p, 0, sizeof p);
    p.host = &host;
    p.nps = 2;
    ps_part_t part;
    char why[64];
    CHECK(ps_part_parse("fixed:2", &part, why, sizeof why) == 0);
    CHECK(ps_place_init(&p.place, 2) == 0);
    int64_t table[2] = { 10, 4 }, bias[1] = { 3 };
    CHECK(ps_place_var(&p.place, &part, 0, table, 2, 0, 40) == 0);
    part.kind = PS_PART_NONE;
    CHECK(ps_place_var(&p.place, &part, 1, bias, 1, 40, 3) == 0);
    /* the batch reads rows 1, 4 (shard 0, ps 0) and 6, 7, 9 (shard 1, ps 1) */
    int64_t rows[5] = { 1, 4, 6, 7, 9 };
    strata_sparse_t sp = { .var = 0, .offset = 0, .count = 40, .row_len = 4,
                           .nrows = 5, .rows = rows };
    float wbuf[2][64];
    float *words[2] = { wbuf[0], wbuf[1] };
    uint32_t count[2], reply[2];
    int64_t nblocks[2];
    ps_want_t w = { words, count, nblocks, reply };
    CHECK(ps_pull_pack(&p, 0, &sp, 1, &w) == STRATA_OK);
    CHECK(ps_pull_pack(&p, 1, &sp, 1, &w) == STRATA_OK);
    CHECK(nblocks[0] == 1 && count[0] == 2 + 4 && reply[0] == 8 + 3);
    CHECK(nblocks[1] == 1 && count[1] == 2 + 6 && reply[1] == 12);
    for (int j = 0; j < 2; j++)
        CHECK(ps_pull_check(&p, j, (unsigned char *)words[j], count[j],
                            nblocks[j]) == NULL);
    /* the ps answers from its values (value = flat index); the worker puts
     * the answer in place: the rows asked and the bias, nothing else */
    float master[43], dst[43], out[64];
    for (int e = 0; e < 43; e++) {
        master[e] = (float)e;
        dst[e] = -1.0f;
    }
    for (int j = 0; j < 2; j++) {
        uint32_t n = ps_pull_answer(&p, j, (unsigned char *)words[j],
                                    count[j], nblocks[j], master, out);
        CHECK(n == reply[j]);
        CHECK(ps_pull_scatter(&p, j, &w, (unsigned char *)out, dst, 0) ==
              STRATA_OK);
    }
    int ok = 1;
    for (int e = 0; e < 43; e++) {
        int row = e / 4, asked = e >= 40 || row == 1 || row == 4 ||
                                 row == 6 || row == 7 || row == 9;
        ok &= asked ? dst[e] == master[e] : dst[e] == -1.0f;
    }
    CHECKF(ok, "the rows asked (and the bias) did not land in place alone");
    /* a table the placement does not know as such is refused */
    strata_sparse_t odd = sp;
    odd.row_len = 5;
    CHECK(ps_pull_pack(&p, 0, &odd, 1, &w) == STRATA_EINVAL);
    /* no table: every shard whole, no block */
    CHECK(ps_pull_pack(&p, 0, NULL, 0, &w) == STRATA_OK && nblocks[0] == 0 &&
          count[0] == 0 && reply[0] == 23);
    /* no row of the batch in shard 0: a block of none, the bias whole */
    int64_t high[1] = { 8 };
    strata_sparse_t one = sp;
    one.rows = high;
    one.nrows = 1;
    CHECK(ps_pull_pack(&p, 0, &one, 1, &w) == STRATA_OK && nblocks[0] == 1 &&
          count[0] == 2 && reply[0] == 3);
    /* every refusal of a hostile request */
    unsigned char m[128];
    static const int64_t ok2[2] = { 1, 3 }, beyond[2] = { 1, 5 },
                         down[2] = { 3, 1 }, twice[2] = { 3, 3 };
    static const struct {
        uint32_t shard, claim;
        const int64_t *ids;
        int64_t nb;
        int extra;
        const char *why;
    } k[] = {
        { 0, 2, ok2, 1, 0, NULL },
        { 0, 2, beyond, 1, 0, "a row id outside the shard" },
        { 0, 2, down, 1, 0, "row ids not ascending and distinct" },
        { 0, 2, twice, 1, 0, "row ids not ascending and distinct" },
        { 0, 3, ok2, 1, 0, "row count disagrees with the payload" },
        { 0, 1, ok2, 1, 0, "payload size disagrees with its row blocks" },
        { 0, 2, ok2, 1, 2, "payload size disagrees with its row blocks" },
        { 0, 200, ok2, 1, 0, "more rows than the shard has" },
        { 1, 2, ok2, 1, 0, "a row block names a shard this ps does not hold" },
        { 2, 2, ok2, 1, 0, "a row id outside the shard" }, /* bias: 3 rows */
        { 0, 2, ok2, 3, 0, "more row blocks than this ps holds shards" },
    };
    for (size_t c = 0; c < sizeof k / sizeof *k; c++) {
        memset(m, 0, sizeof m);
        size_t nw = want_block(m, k[c].shard, k[c].claim, k[c].ids, 2)
                    + (size_t)k[c].extra;
        const char *got = ps_pull_check(&p, 0, m, (uint32_t)nw, k[c].nb);
        CHECKF(k[c].why ? got && !strcmp(got, k[c].why) : got == NULL,
               "pull case %zu: '%s', want '%s'", c,
               got ? got : "(accepted)", k[c].why ? k[c].why : "(accepted)");
    }
    /* the wire: a PULL with blocks has words for them, and none without */
    unsigned char msg[PS_HDR_SIZE + 24] = { 0 };
    ps_hdr_t h = { .type = PS_PULL, .step = -1, .b = 1, .count = 6 }, d;
    const unsigned char *pl;
    const char *wy;
    ps_wire_pack(&h, msg);
    CHECK(ps_wire_unpack(msg, sizeof msg, &d, &pl, &wy) == 0 && d.b == 1 &&
          pl == msg + PS_HDR_SIZE);
    h.b = 0;
    ps_wire_pack(&h, msg);
    CHECK(ps_wire_unpack(msg, sizeof msg, &d, &pl, &wy) != 0);
    h.b = 4;
    ps_wire_pack(&h, msg);
    CHECK(ps_wire_unpack(msg, sizeof msg, &d, &pl, &wy) != 0);
    h.b = 1;
    h.count = 0;
    ps_wire_pack(&h, msg);
    CHECK(ps_wire_unpack(msg, PS_HDR_SIZE, &d, &pl, &wy) != 0);
    ps_hdr_t r = { .type = PS_PARAMS, .step = -1, .a = 3, .b = 1,
                   .count = 6 };
    ps_wire_pack(&r, msg);
    CHECK(ps_wire_unpack(msg, sizeof msg, &d, &pl, &wy) == 0 && d.b == 1);
    r.b = -1;
    ps_wire_pack(&r, msg);
    CHECK(ps_wire_unpack(msg, sizeof msg, &d, &pl, &wy) != 0);
    ps_place_free(&p.place);
}

int main(void)
{
    row_blocks();
    pull_rows();
    partitioners();
    rows();
    parse();
    placement();
    wire();
    sched();
    sched_boundary();
    wire_state();
    return CHECK_DONE();
}
