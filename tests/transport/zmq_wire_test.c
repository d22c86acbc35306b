/* zmq_wire_test -- the zmq.so message header: round trip and refusals. */
#include <string.h>

#include "check.h"
#include "../../plugins/transport/zmq/wire.h"

int main(void)
{
    strz_hdr_t h = { .type = STRZ_DATA, .sender = 3, .step = 5,
                     .seq = 0x0102030405060708ull, .offset = 1ull << 40,
                     .length = 4096, .aux = -1, .total = 123456789 };
    strz_hdr_t g;
    unsigned char b[STRZ_HDR_SIZE + 8];
    const char *why = NULL;

    strz_wire_pack(&h, b);
    CHECK(memcmp(b, "STRZ", 4) == 0);
    CHECK(b[4] == STRZ_WIRE_VERSION && b[5] == 0); /* little-endian */
    CHECK(strz_wire_unpack(b, STRZ_HDR_SIZE, 4096, &g, &why) == 0);
    CHECK(g.type == h.type && g.sender == 3 && g.step == 5);
    CHECK(g.seq == h.seq && g.offset == h.offset && g.length == 4096);
    CHECK(g.aux == -1 && g.total == h.total
          && g.version == STRZ_WIRE_VERSION);

    /* the frame size must match the header's length field */
    CHECK(strz_wire_unpack(b, STRZ_HDR_SIZE, 4095, &g, &why) == -1 && why);
    CHECK(strz_wire_unpack(b, STRZ_HDR_SIZE, 0, &g, &why) == -1);
    /* short, long, empty */
    CHECK(strz_wire_unpack(b, STRZ_HDR_SIZE - 1, 4096, &g, &why) == -1);
    CHECK(strz_wire_unpack(b, STRZ_HDR_SIZE + 8, 4096, &g, &why) == -1);
    CHECK(strz_wire_unpack(NULL, 0, 0, &g, &why) == -1);
    /* magic, version, type */
    b[0] = 'X';
    CHECK(strz_wire_unpack(b, STRZ_HDR_SIZE, 4096, &g, &why) == -1
          && strstr(why, "magic"));
    b[0] = 'S';
    b[4] = STRZ_WIRE_VERSION + 1;
    CHECK(strz_wire_unpack(b, STRZ_HDR_SIZE, 4096, &g, &why) == -1
          && strstr(why, "version"));
    b[4] = 1; /* the first version is refused too */
    CHECK(strz_wire_unpack(b, STRZ_HDR_SIZE, 4096, &g, &why) == -1);
    b[4] = STRZ_WIRE_VERSION;
    b[6] = 0;
    CHECK(strz_wire_unpack(b, STRZ_HDR_SIZE, 4096, &g, &why) == -1
          && strstr(why, "type"));
    b[6] = STRZ_TYPE_LAST + 1;
    CHECK(strz_wire_unpack(b, STRZ_HDR_SIZE, 4096, &g, &why) == -1);
    for (int t = STRZ_HELLO; t <= STRZ_TYPE_LAST; t++) {
        b[6] = (unsigned char)t;
        CHECK(strz_wire_unpack(b, STRZ_HDR_SIZE, 4096, &g, &why) == 0);
        CHECK(strcmp(strz_wire_type_name(t), "?") != 0);
    }
    CHECK(strcmp(strz_wire_type_name(STRZ_ABORT), "ABORT") == 0);
    CHECK(strcmp(strz_wire_type_name(STRZ_PROBE_ACK), "PROBE_ACK") == 0);
    /* the flags byte (DATA: the algorithm) survives the round trip */
    h.flags = STRZ_ALG_GATHER;
    strz_wire_pack(&h, b);
    CHECK(strz_wire_unpack(b, STRZ_HDR_SIZE, 4096, &g, &why) == 0
          && g.flags == STRZ_ALG_GATHER);
    CHECK(strcmp(strz_wire_type_name(99), "?") == 0);
    return CHECK_DONE();
}
