/* NumPy .npy reader (core/data/npy.c): the input as a .npy file, read for
 * each role (any array, images, labels), whole and limited to 2 items.
 * Invariants: a refused file leaves *out zeroed; an accepted one has a
 * dtype and rank its role allows, holds exactly prod(dims) elements (all
 * readable, never more bytes than the file), no more items than asked for,
 * and only finite float32 values. */
#include <math.h>
#include <string.h>

#include "data/data.h"
#include "fuzz.h"

static void check(const strata__npy_t *a, int role, size_t max, size_t size)
{
    FUZZ_CHECK(a->type >= STRATA__NPY_U1 && a->type <= STRATA__NPY_F4);
    FUZZ_CHECK(strcmp(strata__npy_type_name(a->type), "?") != 0);
    FUZZ_CHECK(a->elem == 1 || a->elem == 2 || a->elem == 4 || a->elem == 8);
    FUZZ_CHECK(a->ndim >= 1 && a->ndim <= STRATA__NPY_MAX_DIMS);
    FUZZ_CHECK(a->data != NULL && a->dims[0] >= 1);
    FUZZ_CHECK(a->dims[0] <= a->file_items);
    FUZZ_CHECK(max == 0 ? a->dims[0] == a->file_items : a->dims[0] <= max);
    if (role == STRATA__NPY_IMAGES)
        FUZZ_CHECK((a->type == STRATA__NPY_U1 || a->type == STRATA__NPY_F4)
                   && a->ndim >= 2);
    if (role == STRATA__NPY_LABELS)
        FUZZ_CHECK(a->type != STRATA__NPY_F4 && a->ndim == 1);
    uint64_t per = 1;
    for (int d = 1; d < a->ndim; d++)
        per *= a->dims[d];
    FUZZ_CHECK(a->count == per * a->dims[0]);
    FUZZ_CHECK(10 + per * a->file_items * a->elem <= size);
    const unsigned char *p = a->data;
    unsigned sum = 0; /* every byte held is readable */
    for (size_t b = 0; b < a->count * a->elem; b++)
        sum += p[b];
    (void)sum;
    if (a->type == STRATA__NPY_F4)
        for (size_t i = 0; i < a->count; i++) {
            float f;
            memcpy(&f, p + 4 * i, 4);
            FUZZ_CHECK(isfinite(f));
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int k_roles[] = { STRATA__NPY_ANY, STRATA__NPY_IMAGES,
                                   STRATA__NPY_LABELS };
    static const size_t k_max[] = { 0, 2 };
    static const strata__npy_t zero;
    const char *path = fuzz_as_file(data, size);
    for (size_t r = 0; r < sizeof k_roles / sizeof *k_roles; r++)
        for (size_t m = 0; m < sizeof k_max / sizeof *k_max; m++) {
            strata__npy_t a;
            memset(&a, 0x5A, sizeof a);
            int rc = strata__npy_read_first(path, k_roles[r], k_max[m], &a);
            if (rc != 0) {
                FUZZ_CHECK(rc < 0);
                FUZZ_CHECK(memcmp(&a, &zero, sizeof a) == 0);
                continue;
            }
            check(&a, k_roles[r], k_max[m], size);
            strata__npy_free(&a);
            FUZZ_CHECK(a.data == NULL);
        }
    return 0;
}
