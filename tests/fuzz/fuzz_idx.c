/* IDX reader (core/data/idx.c): the input as an IDX file, raw or gzip
 * (1f 8b), read whole and with the item limits the dataset loader uses.
 * Invariants: a refused file leaves *out zeroed; an accepted one holds
 * exactly prod(dims) bytes, all readable, no more items than asked for,
 * and a raw file is exactly its header plus the declared payload. */
#include <string.h>

#include "data/data.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t k_max[] = { 0, 1, 3 };
    static const strata__idx_t zero;
    const char *path = fuzz_as_file(data, size);
    int gz = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
    for (size_t i = 0; i < sizeof k_max / sizeof *k_max; i++) {
        strata__idx_t x;
        memset(&x, 0x5A, sizeof x);
        int rc = strata__idx_read_first(path, k_max[i], &x);
        if (rc != 0) {
            FUZZ_CHECK(rc < 0);
            FUZZ_CHECK(memcmp(&x, &zero, sizeof x) == 0);
            continue;
        }
        FUZZ_CHECK(x.type == STRATA__IDX_U8);
        FUZZ_CHECK(x.ndim >= 1 && x.ndim <= 4);
        FUZZ_CHECK(x.data != NULL && x.dims[0] >= 1);
        FUZZ_CHECK(x.dims[0] <= x.file_items);
        FUZZ_CHECK(k_max[i] == 0 ? x.dims[0] == x.file_items
                                 : x.dims[0] <= k_max[i]);
        size_t per = 1;
        for (int d = 1; d < x.ndim; d++)
            per *= x.dims[d];
        FUZZ_CHECK(x.count == per * x.dims[0]);
        if (!gz)
            FUZZ_CHECK(4 + 4 * (size_t)x.ndim + per * x.file_items == size);
        unsigned sum = 0; /* every byte held is readable */
        for (size_t b = 0; b < x.count; b++)
            sum += x.data[b];
        (void)sum;
        strata__idx_free(&x);
        FUZZ_CHECK(x.data == NULL);
    }
    return 0;
}
