/* zmq transport wire header (plugins/transport/zmq/wire.c): the input is a
 * received message, header then payload, decoded as direct.c does (a
 * 48-byte header, the rest as payload) and as io.c does with one frame
 * (the whole input as the header frame, no payload). Invariants: an
 * accepted header re-packs to the same 48 bytes, has a known type and a
 * length equal to the payload; a refused one says why. */
#include <string.h>

#include "fuzz.h"
#include "wire.h"

static void unpack_one(const uint8_t *hdr, size_t len, size_t payload_len)
{
    strz_hdr_t h;
    const char *why = NULL;
    if (strz_wire_unpack(hdr, len, payload_len, &h, &why) != 0) {
        FUZZ_CHECK(why != NULL && why[0] != '\0');
        return;
    }
    FUZZ_CHECK(len == STRZ_HDR_SIZE);
    FUZZ_CHECK(h.version == STRZ_WIRE_VERSION);
    FUZZ_CHECK((size_t)h.length == payload_len);
    FUZZ_CHECK(strcmp(strz_wire_type_name(h.type), "?") != 0);
    FUZZ_CHECK(strz_hdr_same(&h, &h));
    unsigned char again[STRZ_HDR_SIZE];
    strz_wire_pack(&h, again);
    FUZZ_CHECK(memcmp(again, hdr, STRZ_HDR_SIZE) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t hlen = size < STRZ_HDR_SIZE ? size : STRZ_HDR_SIZE;
    /* exactly-sized copies, so that an overread is caught */
    uint8_t *hdr = malloc(hlen ? hlen : 1);
    FUZZ_CHECK(hdr != NULL);
    memcpy(hdr, data, hlen);
    unpack_one(hdr, hlen, size - hlen);
    free(hdr);
    unpack_one(data, size, 0);
    return 0;
}
