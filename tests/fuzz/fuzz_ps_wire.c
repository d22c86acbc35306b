/* ps strategy wire message (plugins/strategy/ps/ps_wire.c): the input is
 * one received message, header and payload, as ps_net.c hands it to
 * ps_wire_unpack. Invariants: an accepted message is exactly its header
 * plus 4 x count bytes, its payload pointer lies right after the header
 * (NULL when count is 0), it re-packs to the same header bytes, has a known
 * type and a finite float, finite layer states (STEP_REQ, STEP); a
 * refused one says why. */
#include <math.h>
#include <string.h>

#include "fuzz.h"
#include "ps_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ps_hdr_t h;
    const unsigned char *payload = data;
    const char *why = NULL;
    if (ps_wire_unpack(data, size, &h, &payload, &why) != 0) {
        FUZZ_CHECK(why != NULL && why[0] != '\0');
        FUZZ_CHECK(payload == NULL);
        return 0;
    }
    FUZZ_CHECK(size == PS_HDR_SIZE + 4 * (size_t)h.count);
    FUZZ_CHECK(h.count ? payload == data + PS_HDR_SIZE : payload == NULL);
    FUZZ_CHECK(strcmp(ps_wire_type_name(h.type), "?") != 0);
    FUZZ_CHECK(isfinite(h.f));
    float sum = 0; /* the payload is readable, as the roles copy it out */
    for (uint32_t i = 0; i < h.count; i++) {
        float v;
        memcpy(&v, payload + 4 * (size_t)i, 4);
        sum += v;
    }
    (void)sum;
    /* the layer states (STEP_REQ's result, STEP) are finite */
    if (h.type == PS_STEP_REQ || h.type == PS_STEP)
        for (uint32_t i = 0; i < h.count; i++) {
            float v;
            memcpy(&v, payload + 4 * (size_t)i, 4);
            FUZZ_CHECK(isfinite(v));
        }
    unsigned char again[PS_HDR_SIZE];
    ps_wire_pack(&h, again);
    FUZZ_CHECK(memcmp(again, data, PS_HDR_SIZE) == 0);
    return 0;
}
