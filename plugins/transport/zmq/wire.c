/* zmq.so -- pack and check the message header (format: wire.h). */
#include "wire.h"

#include <string.h>

static const unsigned char k_magic[4] = { 'S', 'T', 'R', 'Z' };

static void put16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

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

static uint16_t get16(const unsigned char *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
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

void strz_wire_pack(const strz_hdr_t *h, unsigned char out[STRZ_HDR_SIZE])
{
    memcpy(out, k_magic, 4);
    put16(out + 4, STRZ_WIRE_VERSION);
    out[6] = h->type;
    out[7] = h->flags;
    put32(out + 8, (uint32_t)h->sender);
    put32(out + 12, (uint32_t)h->step);
    put64(out + 16, h->seq);
    put64(out + 24, h->offset);
    put32(out + 32, h->length);
    put32(out + 36, (uint32_t)h->aux);
    put64(out + 40, h->total);
}

int strz_wire_unpack(const void *buf, size_t len, size_t payload_len,
                     strz_hdr_t *h, const char **why)
{
    const unsigned char *p = buf;

    memset(h, 0, sizeof *h);
    if (p == NULL || len != STRZ_HDR_SIZE) {
        *why = len < STRZ_HDR_SIZE ? "header frame too short"
                                   : "header frame too long";
        return -1;
    }
    if (memcmp(p, k_magic, 4) != 0) {
        *why = "bad magic (not a strata zmq message)";
        return -1;
    }
    h->version = get16(p + 4);
    if (h->version != STRZ_WIRE_VERSION) {
        *why = "unsupported protocol version";
        return -1;
    }
    h->type   = p[6];
    h->flags  = p[7];
    h->sender = (int32_t)get32(p + 8);
    h->step   = (int32_t)get32(p + 12);
    h->seq    = get64(p + 16);
    h->offset = get64(p + 24);
    h->length = get32(p + 32);
    h->aux    = (int32_t)get32(p + 36);
    h->total  = get64(p + 40);
    if (h->type < STRZ_HELLO || h->type > STRZ_TYPE_LAST) {
        *why = "unknown message type";
        return -1;
    }
    if ((uint64_t)h->length != (uint64_t)payload_len) {
        *why = "length field does not match the payload frame";
        return -1;
    }
    return 0;
}

int strz_hdr_same(const strz_hdr_t *want, const strz_hdr_t *got)
{
    return got->type == want->type && got->flags == want->flags
           && got->seq == want->seq && got->step == want->step
           && got->offset == want->offset && got->length == want->length
           && got->aux == want->aux && got->total == want->total;
}

const char *strz_wire_type_name(int type)
{
    switch (type) {
    case STRZ_HELLO:     return "HELLO";
    case STRZ_HELLO_ACK: return "HELLO_ACK";
    case STRZ_DATA:      return "DATA";
    case STRZ_BCAST:     return "BCAST";
    case STRZ_BARRIER:   return "BARRIER";
    case STRZ_ABORT:     return "ABORT";
    case STRZ_PROBE:     return "PROBE";
    case STRZ_PROBE_ACK: return "PROBE_ACK";
    case STRZ_SHM:       return "SHM";
    default:             return "?";
    }
}
