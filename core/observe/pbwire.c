/* The two wire formats of TensorFlow's event files: protobuf fields and
 * TFRecord framing.
 *
 * By hand rather than with libprotobuf-c: an event file needs two messages
 * (Event, and Summary.Value with a simple_value) made of four field kinds,
 * about forty lines here, against a new build dependency plus generated
 * code for copies of TensorFlow's .proto files. The bytes are checked
 * against records TensorBoard's own writer made (tests/watch). */
#include <string.h>

#include "checkpoint/checkpoint.h" /* strata__crc32c */
#include "observe/observe.h"

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

static void raw_varint(strata__bytes_t *b, uint64_t v)
{
    unsigned char buf[10];
    size_t n = 0;
    do {
        buf[n] = (unsigned char)(v & 0x7F);
        v >>= 7;
        if (v)
            buf[n] |= 0x80;
        n++;
    } while (v);
    strata__bytes_put(b, buf, n);
}

static void key(strata__bytes_t *b, int field, int wire)
{
    raw_varint(b, ((uint64_t)field << 3) | (uint64_t)wire);
}

/* Little-endian whatever the host. */
static void le(strata__bytes_t *b, uint64_t v, int n)
{
    unsigned char buf[8];
    for (int i = 0; i < n; i++)
        buf[i] = (unsigned char)(v >> (8 * i));
    strata__bytes_put(b, buf, (size_t)n);
}

void strata__pb_varint(strata__bytes_t *b, int field, uint64_t v)
{
    key(b, field, WIRE_VARINT);
    raw_varint(b, v);
}

void strata__pb_double(strata__bytes_t *b, int field, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    key(b, field, WIRE_I64);
    le(b, bits, 8);
}

void strata__pb_float(strata__bytes_t *b, int field, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    key(b, field, WIRE_I32);
    le(b, bits, 4);
}

void strata__pb_bytes(strata__bytes_t *b, int field, const void *data,
                      size_t n)
{
    key(b, field, WIRE_LEN);
    raw_varint(b, n);
    strata__bytes_put(b, data, n);
}

/* TFRecord's masked CRC: a CRC of data that holds CRCs is weak, so the
 * stored value is rotated and offset (tensorflow/core/lib/hash/crc32c.h). */
uint32_t strata__tfrecord_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

void strata__tfrecord(strata__bytes_t *b, const void *data, size_t n)
{
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)n >> (8 * i));
    strata__bytes_put(b, len, sizeof len);
    le(b, strata__tfrecord_mask(strata__crc32c(0, len, sizeof len)), 4);
    strata__bytes_put(b, data, n);
    le(b, strata__tfrecord_mask(strata__crc32c(0, data, n)), 4);
}
