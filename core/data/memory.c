/* In-memory arrays in place of data files (strata_ctx_set_array): a
 * context holds named, borrowed C-order arrays; a data path "mem:NAME"
 * reads one exactly as the .npy reader reads a file of the same dtype and
 * shape (the same role checks, the same copy of the first items, finite
 * float32), so training on either gives the same bits. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime.h"

#define WHO "data"
#define NAME_MAX_LEN 63

struct strata__mem {
    struct strata__mem *next;
    char        name[NAME_MAX_LEN + 1];
    strata__npy_t arr;    /* data borrowed: never freed here             */
};

/* Public dtype codes (strata.h) -> the .npy reader's types. */
static const struct { int type; size_t size; } k_dtypes[] = {
    [STRATA_DTYPE_UINT8]   = { STRATA__NPY_U1, 1 },
    [STRATA_DTYPE_INT8]    = { STRATA__NPY_I1, 1 },
    [STRATA_DTYPE_INT16]   = { STRATA__NPY_I2, 2 },
    [STRATA_DTYPE_UINT16]  = { STRATA__NPY_U2, 2 },
    [STRATA_DTYPE_INT32]   = { STRATA__NPY_I4, 4 },
    [STRATA_DTYPE_UINT32]  = { STRATA__NPY_U4, 4 },
    [STRATA_DTYPE_INT64]   = { STRATA__NPY_I8, 8 },
    [STRATA_DTYPE_UINT64]  = { STRATA__NPY_U8, 8 },
    [STRATA_DTYPE_FLOAT32] = { STRATA__NPY_F4, 4 },
};

int strata__mem_is(const char *path)
{
    return path && strncmp(path, STRATA__MEM_PREFIX,
                           sizeof STRATA__MEM_PREFIX - 1) == 0;
}

static int name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > NAME_MAX_LEN)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((name[i] >= 'a' && name[i] <= 'z') ||
              (name[i] >= 'A' && name[i] <= 'Z') ||
              (name[i] >= '0' && name[i] <= '9') || name[i] == '_' ||
              name[i] == '-' || name[i] == '.'))
            return 0;
    return 1;
}

static struct strata__mem **find(strata_ctx_t *ctx, const char *name)
{
    struct strata__mem **p = &ctx->arrays;
    while (*p && strcmp((*p)->name, name) != 0)
        p = &(*p)->next;
    return p;
}

/* The array's header as numpy.save would write it, checked as the .npy
 * reader checks a header's shape: 1 to 4 dimensions, none 0, the bytes
 * within STRATA_DATA_MAX_BYTES. */
static int describe(const char *name, int dtype, int ndim,
                    const int64_t *dims, strata__npy_t *a)
{
    memset(a, 0, sizeof *a);
    if (dtype <= 0 || dtype >= (int)(sizeof k_dtypes / sizeof *k_dtypes)) {
        strata__log(STRATA_LOG_ERROR, WHO, "array '%s': unknown dtype %d "
                    "(STRATA_DTYPE_*)", name, dtype);
        return STRATA_EINVAL;
    }
    if (ndim < 1 || ndim > STRATA__NPY_MAX_DIMS || !dims) {
        strata__log(STRATA_LOG_ERROR, WHO, "array '%s': %d dimensions; "
                    "expected 1 to %d", name, ndim, STRATA__NPY_MAX_DIMS);
        return STRATA_EINVAL;
    }
    a->type = k_dtypes[dtype].type;
    a->elem = k_dtypes[dtype].size;
    a->ndim = ndim;
    uint64_t count = 1, bytes;
    int over = 0;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] <= 0) {
            strata__log(STRATA_LOG_ERROR, WHO, "array '%s': dimension %d is "
                        "%" PRId64 "; every dimension must be > 0", name,
                        i + 1, dims[i]);
            return STRATA_EINVAL;
        }
        a->dims[i] = (uint64_t)dims[i];
        over |= __builtin_mul_overflow(count, a->dims[i], &count);
    }
    over |= __builtin_mul_overflow(count, (uint64_t)a->elem, &bytes);
    if (over || bytes > STRATA_DATA_MAX_BYTES) {
        strata__log(STRATA_LOG_ERROR, WHO, "array '%s' is over the limit of "
                    "%zu MiB", name, (size_t)STRATA_DATA_MAX_BYTES >> 20);
        return STRATA_EINVAL;
    }
    a->file_items = a->dims[0];
    a->count = (size_t)count;
    return STRATA_OK;
}

int strata_ctx_set_array(strata_ctx_t *ctx, const char *name,
                         const void *data, int dtype, int ndim,
                         const int64_t *dims)
{
    if (!ctx || !name)
        return STRATA_EINVAL;
    strata_ctx_t *prev = strata__log_bind(ctx);
    int rc = STRATA_OK;
    strata__npy_t a = { 0 };
    if (!name_ok(name)) {
        strata__log(STRATA_LOG_ERROR, WHO, "array name '%s': expected 1 to "
                    "%d of A-Z a-z 0-9 _ - .", name, NAME_MAX_LEN);
        rc = STRATA_EINVAL;
    } else if (data) {
        rc = describe(name, dtype, ndim, dims, &a);
    }
    struct strata__mem **p = rc == STRATA_OK ? find(ctx, name) : NULL;
    if (p && !data && *p) {            /* clear */
        struct strata__mem *dead = *p;
        *p = dead->next;
        free(dead);
    } else if (p && data) {
        if (!*p && !(*p = calloc(1, sizeof **p))) {
            rc = STRATA_ENOMEM;
        } else {
            snprintf((*p)->name, sizeof (*p)->name, "%s", name);
            a.data = (void *)(uintptr_t)data;   /* only ever read */
            (*p)->arr = a;
        }
    }
    strata__log_bind(prev);
    return rc;
}

void strata__mem_clear(strata_ctx_t *ctx)
{
    while (ctx->arrays) {
        struct strata__mem *next = ctx->arrays->next;
        free(ctx->arrays);
        ctx->arrays = next;
    }
}

int strata__mem_read_first(const char *path, int role, size_t max_items,
                           strata__npy_t *out)
{
    memset(out, 0, sizeof *out);
    strata_ctx_t *ctx = strata__log_ctx();
    const char *name = path + sizeof STRATA__MEM_PREFIX - 1;
    struct strata__mem *m = ctx ? *find(ctx, name) : NULL;
    if (!m) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: no array '%s' on this "
                    "context (strata_ctx_set_array)", path, name);
        return STRATA_ENOENT;
    }
    const strata__npy_t *a = &m->arr;
    int rc = strata__npy_check_role(path, role, a);
    if (rc)
        return rc;
    uint64_t keep_items = a->dims[0];
    if (max_items > 0 && max_items < keep_items)
        keep_items = max_items;
    size_t per = a->count / (size_t)a->dims[0];
    size_t keep = per * (size_t)keep_items * a->elem;
    void *data = strata__data_payload_alloc(keep);
    if (!data) {
        strata__log(STRATA_LOG_ERROR, WHO,
                    "%s: out of memory for %zu bytes of data", path, keep);
        return STRATA_ENOMEM;
    }
    memcpy(data, a->data, keep);
    *out = *a;
    out->data = data;
    out->dims[0] = keep_items;
    out->count = per * (size_t)keep_items;
    rc = strata__npy_check_finite(path, out);
    if (rc)
        strata__npy_free(out);
    return rc;
}
