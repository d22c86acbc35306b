/* safetensors / checkpoint reader (core/checkpoint/checkpoint.c): the input as a
 * file, read by strata__ckpt_read (resume: strata's checksums binding), by
 * strata__ckpt_read_weights + strata__ckpt_take_f32 ([model] init_from:
 * the same structure, checksums only warned about), and by
 * strata__ckpt_inspect (`strata inspect`: every float printed, to
 * /dev/null). Invariants: a refused file leaves *out NULL; an accepted one
 * accounts for every byte of the file (8 + header + data), its tensors
 * tile the data section with sizes matching dtype and shape, data aligned
 * and readable, names found by lookup, metadata unique; whatever the strict
 * reader accepts the weights reader accepts too. */
#include <string.h>

#include "checkpoint/checkpoint.h"
#include "fuzz.h"

static void check(const strata__ckpt_t *c, size_t size)
{
    FUZZ_CHECK(c != NULL);
    FUZZ_CHECK(8 + strata__ckpt_header_len(c) + strata__ckpt_data_len(c)
               == size);
    uint64_t total = 0;
    uint32_t crc = 0;
    int nt = strata__ckpt_ntensors(c);
    FUZZ_CHECK(nt >= 0 && strata__ckpt_tensor(c, nt) == NULL);
    for (int i = 0; i < nt; i++) {
        const strata__tensor_t *x = strata__ckpt_tensor(c, i);
        size_t es = strata__ckpt_dtype_size(x->dtype);
        FUZZ_CHECK(es > 0);
        FUZZ_CHECK(x->ndim >= 0 && x->ndim <= STRATA_CKPT_MAX_NDIM);
        uint64_t n = es;
        for (int d = 0; d < x->ndim; d++) {
            FUZZ_CHECK(x->shape[d] >= 0);
            n *= (uint64_t)x->shape[d];
        }
        FUZZ_CHECK(n == x->nbytes);
        FUZZ_CHECK(x->data != NULL && (uintptr_t)x->data % 16 == 0);
        crc = strata__crc32c(crc, x->data, x->nbytes); /* all readable */
        total += x->nbytes;
        const strata__tensor_t *y = strata__ckpt_find(c, x->name);
        FUZZ_CHECK(y != NULL && strcmp(y->name, x->name) == 0);
    }
    (void)crc;
    FUZZ_CHECK(total == strata__ckpt_data_len(c));
    int nm = strata__ckpt_nmeta(c);
    for (int i = 0; i < nm; i++) {
        const strata__meta_t *m = strata__ckpt_meta_at(c, i);
        FUZZ_CHECK(m && m->key && m->value);
        FUZZ_CHECK(strata__ckpt_meta(c, m->key) == m->value); /* unique */
    }
}

/* What init_from does with each F32 tensor: copy it into a variable of
 * its shape; another shape or dtype and an absent name are refused. */
static void take_all(const strata__ckpt_t *c)
{
    for (int i = 0; i < strata__ckpt_ntensors(c); i++) {
        const strata__tensor_t *x = strata__ckpt_tensor(c, i);
        if (strcmp(x->dtype, "F32") != 0) {
            FUZZ_CHECK(strata__ckpt_take_f32(c, "fuzz", "input", x->name,
                                             x->shape, x->ndim, NULL)
                       == STRATA_EDATA);
            continue;
        }
        float *dst = malloc(x->nbytes ? x->nbytes : 1);
        FUZZ_CHECK(dst != NULL);
        FUZZ_CHECK(strata__ckpt_take_f32(c, "fuzz", "input", x->name,
                                         x->shape, x->ndim, dst) == 0);
        int64_t other[STRATA_CKPT_MAX_NDIM + 1] = { 0 };
        memcpy(other, x->shape, sizeof x->shape);
        other[x->ndim] = 7;
        FUZZ_CHECK(strata__ckpt_take_f32(c, "fuzz", "input", x->name, other,
                                         x->ndim + 1, dst) == STRATA_EDATA);
        free(dst);
    }
    /* not a name a tensor can have: names are valid UTF-8 */
    FUZZ_CHECK(strata__ckpt_take_f32(c, "fuzz", "input", "\xff", NULL, 0,
                                     NULL) == STRATA_ENOENT);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *null_out;
    if (!null_out)
        null_out = fopen("/dev/null", "w");
    FUZZ_CHECK(null_out != NULL);
    static char sentinel; /* the readers must set *out, also to NULL */
    const char *path = fuzz_as_file(data, size);

    strata__ckpt_t *c = (strata__ckpt_t *)(void *)&sentinel;
    int strict = strata__ckpt_read(path, &c);
    if (strict == 0)
        check(c, size);
    else
        FUZZ_CHECK(strict < 0 && c == NULL);
    strata__ckpt_free(c);

    c = (strata__ckpt_t *)(void *)&sentinel;
    int rc = strata__ckpt_read_weights(path, "fuzz", NULL, &c);
    if (strict == 0)
        FUZZ_CHECK(rc == 0);
    if (rc == 0) {
        check(c, size);
        take_all(c);
    } else {
        FUZZ_CHECK(rc < 0 && c == NULL);
    }
    strata__ckpt_free(c);

    if (strict == 0)
        FUZZ_CHECK(strata__ckpt_inspect(path, null_out) == 0);
    return 0;
}
