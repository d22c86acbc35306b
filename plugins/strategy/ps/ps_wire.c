/* ps.so -- pack and check the message header (format: ps_wire.h). */
#include "ps_wire.h"

#include <math.h>
#include <string.h>

/* Payloads are float32 arrays copied as they lie in memory. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ps.so sends float32 payloads as they are in memory: little-endian hosts only"
#endif

static const unsigned char k_magic[4] = { 'S', 'T', 'P', 'S' };

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

void ps_wire_pack(const ps_hdr_t *h, unsigned char out[PS_HDR_SIZE])
{
    uint64_t fbits;
    memcpy(&fbits, &h->f, sizeof fbits);
    memcpy(out, k_magic, 4);
    out[4] = PS_WIRE_VERSION & 0xff;
    out[5] = PS_WIRE_VERSION >> 8;
    out[6] = h->type;
    out[7] = h->status;
    put32(out + 8, (uint32_t)h->sender);
    put32(out + 12, (uint32_t)h->attempt);
    put64(out + 16, (uint64_t)h->step);
    put64(out + 24, h->req);
    put64(out + 32, h->incarnation);
    put64(out + 40, (uint64_t)h->a);
    put64(out + 48, (uint64_t)h->b);
    put64(out + 56, (uint64_t)h->c);
    put64(out + 64, fbits);
    put32(out + 72, h->count);
    put32(out + 76, (uint32_t)h->epoch);
    put32(out + 80, h->at);
    put32(out + 84, ps_wire_total(h));
    put64(out + 88, 0);
}

/* Which statuses a type may carry. */
static int status_ok(int type, int status)
{
    switch (type) {
    case PS_STEP_REQ:
        return status == PS_OK || status == PS_STALE || status == PS_FAILED;
    case PS_PUSH_ACK:
        return status == PS_OK || status == PS_DUPLICATE || status == PS_STALE;
    case PS_STATE:
    case PS_STATE_ACK:
    case PS_STATE_SAVED:
        return status == PS_OK || status == PS_FAILED;
    default:
        return status == PS_OK;
    }
}

/* Type-specific checks of a decoded header. */
static const char *check_fields(const ps_hdr_t *h)
{
    /* STEP_REQ's result and STEP may carry the layer states (v5) */
    int has_payload = h->type == PS_PARAMS || h->type == PS_PUSH
                      || h->type == PS_PULL /* rows asked for (v7) */
                      || h->type == PS_STATE || h->type == PS_STATE_PUT
                      || (h->type == PS_STEP_REQ && h->c == 1)
                      || h->type == PS_STEP;
    if (!has_payload && h->count != 0)
        return "payload on a message that takes none";
    if (!status_ok(h->type, h->status))
        return "status not allowed for this type";
    if (!isfinite(h->f))
        return "non-finite float field";
    if ((uint64_t)h->at + h->count > h->total)
        return "a piece beyond the whole payload's words";
    if (!ps_wire_pieced(h->type) && (h->at != 0 || h->total != h->count))
        return "in pieces, but this type goes whole";
    if (h->total > h->count && h->count == 0)
        return "an empty piece";
    switch (h->type) {
    case PS_STEP:
        if (h->step < 0 || h->attempt < 1 || h->a < 0 || h->epoch < 0)
            return "bad step, attempt, batch or epoch";
        break;
    case PS_PUSH:
        /* lr 0 is a rate a schedule reaches (cosine with alpha = 0) */
        if (h->step < 0 || h->attempt < 1 || !(h->f >= 0) || h->a < 0)
            return "bad step, attempt, learning rate or version";
        /* row blocks (v6): each at least its two words */
        if (h->b < 0 || (uint64_t)h->b > h->count / 2)
            return "row block count out of range";
        break;
    case PS_PULL:
        /* row blocks (v7): each at least its two words, and nothing else */
        if (h->b < 0 || (uint64_t)h->b > h->count / 2
            || (h->b == 0) != (h->count == 0))
            return "row block count out of range";
        break;
    case PS_PARAMS:
        if (h->a < 0 || h->b < 0)
            return "negative version or row block count";
        break;
    case PS_STEP_REQ:
        if (h->c < 0 || h->c > 2)
            return "has_result is not 0, 1 or 2";
        if (h->c >= 1 && (h->step < 0 || h->attempt < 1 || h->a < 0
                          || !(ps_wire_metric(h) >= 0)
                          || isinf(ps_wire_metric(h)) || h->f < 0))
            return "bad result (step, attempt, samples, metric or loss)";
        break;
    case PS_WAIT:
        if (h->a < 0 || h->a > 60000)
            return "retry delay out of range";
        break;
    case PS_PONG:
    case PS_FIN_ACK:
        if (h->a < 0 || h->b < 0 || h->c < 0 || h->epoch < 0)
            return "negative counter";
        break;
    case PS_DONE:
    case PS_FINISH:
        if (h->a != 0 && h->a != 1)
            return "stop flag is not 0 or 1";
        break;
    case PS_STATE_REQ:
    case PS_STATE_PUT:
        if (h->b < 0 || h->b > PS_MAX_SLOTS || h->a < 0 || h->a > h->b
            || h->c < 0 || (h->type == PS_STATE_PUT && h->step < 0))
            return "bad state part, slot count or steps";
        break;
    case PS_STATE:
        if (h->a < 0 || h->a > PS_MAX_SLOTS || h->b < 0
            || (h->status != PS_OK && h->count != 0))
            return "bad state part or optimizer steps";
        break;
    case PS_STATE_ACK:
        if (h->a < 0 || h->a > PS_MAX_SLOTS)
            return "bad state part";
        break;
    case PS_STATE_SAVE:
        if (h->step < 0 || h->b < 0 || h->b > PS_MAX_SLOTS || h->c < 1
            || h->c > 65535)
            return "bad checkpoint step, slot count or part count";
        break;
    case PS_STATE_SAVED:
        if (h->a < 0 || h->b < 0)
            return "negative optimizer steps or bytes";
        break;
    default:
        break;
    }
    return NULL;
}

int ps_wire_unpack(const void *msg, size_t len, ps_hdr_t *h,
                   const unsigned char **payload, const char **why)
{
    const unsigned char *p = msg;
    memset(h, 0, sizeof *h);
    *payload = NULL;
    if (!p || len < PS_HDR_SIZE) {
        *why = "shorter than the header";
        return -1;
    }
    if (memcmp(p, k_magic, 4) != 0) {
        *why = "bad magic (not a ps message)";
        return -1;
    }
    if ((p[4] | (p[5] << 8)) != PS_WIRE_VERSION) {
        *why = "unsupported protocol version";
        return -1;
    }
    h->type = p[6];
    h->status = p[7];
    h->sender = (int32_t)get32(p + 8);
    h->attempt = (int32_t)get32(p + 12);
    h->step = (int64_t)get64(p + 16);
    h->req = get64(p + 24);
    h->incarnation = get64(p + 32);
    h->a = (int64_t)get64(p + 40);
    h->b = (int64_t)get64(p + 48);
    h->c = (int64_t)get64(p + 56);
    uint64_t fbits = get64(p + 64);
    memcpy(&h->f, &fbits, sizeof fbits);
    h->count = get32(p + 72);
    h->epoch = (int32_t)get32(p + 76);
    h->at = get32(p + 80);
    h->total = get32(p + 84);
    if (get64(p + 88) != 0) {
        *why = "reserved header bytes are not 0";
        return -1;
    }
    if (h->type < PS_STEP_REQ || h->type > PS_TYPE_LAST_) {
        *why = "unknown message type";
        return -1;
    }
    if ((uint64_t)(len - PS_HDR_SIZE) != (uint64_t)h->count * 4u) {
        *why = "count does not match the message length";
        return -1;
    }
    if ((*why = check_fields(h)) != NULL)
        return -1;
    /* Layer states are statistics: finite, whatever the receiver's count */
    if (h->type == PS_STEP_REQ || h->type == PS_STEP)
        for (uint32_t i = 0; i < h->count; i++) {
            float v;
            memcpy(&v, p + PS_HDR_SIZE + 4u * (size_t)i, sizeof v);
            if (!isfinite(v)) {
                *why = "a layer state that is not finite";
                return -1;
            }
        }
    *payload = h->count ? p + PS_HDR_SIZE : NULL;
    return 0;
}

const char *ps_wire_type_name(int type)
{
    static const char *const names[] = {
        "?", "STEP_REQ", "STEP", "WAIT", "DONE", "HEARTBEAT", "PULL",
        "PARAMS", "PUSH", "PUSH_ACK", "PING", "PONG", "FINISH", "FIN_ACK",
        "ABORT", "STATE_REQ", "STATE", "STATE_PUT", "STATE_ACK",
        "STATE_SAVE", "STATE_SAVED",
    };
    return type >= 1 && type <= PS_TYPE_LAST_ ? names[type] : names[0];
}
