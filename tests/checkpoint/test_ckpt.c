/* core/checkpoint/checkpoint.c, checkpoint_dir.c, crc32c.c: safetensors files written
 * atomically and read back exactly; every malformed file refused with
 * STRATA_EDATA and one log line naming it (never a crash, never a large
 * allocation from a lying header); crash safety of the writer (forked
 * children killed by the STRATA_TEST_CKPT_CRASH hook); rotation; _latest
 * skipping a corrupt newest checkpoint; inspect.
 *
 * Linked with -Wl,--wrap=malloc,--wrap=calloc: the wrappers record the
 * largest request, so "never allocated what a header claims" is checked in
 * every build. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "check.h"
#include "checkpoint/checkpoint.h"
#include "ckpt_util.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);

static size_t biggest_;

void *__wrap_malloc(size_t n)
{
    if (n > biggest_)
        biggest_ = n;
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
    if (n * m > biggest_)
        biggest_ = n * m;
    return __real_calloc(n, m);
}

static const char *base_of(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* ---- fixtures ------------------------------------------------------------ */

static float   w_[3][4];
static int64_t step_[5];
static uint8_t bytes_[7];
static double  cube_[2][2][2];
static uint32_t scalar_ = 0xDEADBEEF;

static void fill(unsigned salt)
{
    for (int i = 0; i < 12; i++)
        w_[i / 4][i % 4] = (float)(i * 0.25 - 1.0 + salt);
    for (int i = 0; i < 5; i++)
        step_[i] = (int64_t)1 << (10 * i + salt);
    for (int i = 0; i < 7; i++)
        bytes_[i] = (uint8_t)(200 + i + salt);
    for (int i = 0; i < 8; i++)
        ((double *)cube_)[i] = i * 1e-3 + salt;
}

#define T(nm, dt, nd, s0, s1, s2, p, n) { nm, dt, nd, { s0, s1, s2, 0 }, p, n }

/* Six tensors: float, int64, 7 bytes (the next one starts unaligned), f64
 * cube, a scalar and an empty one. */
static int fixture(strata__tensor_t *t)
{
    strata__tensor_t v[] = {
        T("dense0/kernel", "F32", 2, 3, 4, 0, w_, sizeof w_),
        T("step", "I64", 1, 5, 0, 0, step_, sizeof step_),
        T("bytes", "U8", 1, 7, 0, 0, bytes_, sizeof bytes_),
        T("cube", "F64", 3, 2, 2, 2, cube_, sizeof cube_),
        T("scalar", "U32", 0, 0, 0, 0, &scalar_, sizeof scalar_),
        T("empty", "F32", 2, 0, 3, 0, NULL, 0),
    };
    memcpy(t, v, sizeof v);
    return 6;
}

static const strata__meta_t meta_[] = {
    { "epoch", "3" }, { "step", "120" }, { "rng", "0123456789abcdef:42" },
};

static int write_fixture(const char *path, unsigned salt)
{
    strata__tensor_t t[6];
    fill(salt);
    int nt = fixture(t);
    return strata__ckpt_write(path, t, nt, meta_, 3);
}

/* ---- crc ----------------------------------------------------------------- */

static void test_crc(void)
{
    CHECK(strata__crc32c(0, "123456789", 9) == 0xE3069283u);
    CHECK(strata__crc32c_sw(0, "123456789", 9) == 0xE3069283u);
    CHECK(strata__crc32c(0, "", 0) == 0);
    CHECK(strata__crc32c(strata__crc32c(0, "1234", 4), "56789", 5) == 0xE3069283u);
    /* 32 zero bytes: RFC 3720 B.4 */
    static const unsigned char zeros[32];
    CHECK(strata__crc32c(0, zeros, 32) == 0x8A9136AAu);
    unsigned char buf[512];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)(i * 131 + 7);
    int same = 1;
    for (size_t off = 0; off < 8; off++)
        for (size_t n = 0; n + off <= 300; n += 7)
            same &= strata__crc32c(5, buf + off, n) == strata__crc32c_sw(5, buf + off, n);
    CHECK(same);
}

/* ---- round trip ---------------------------------------------------------- */

static void test_round_trip(void)
{
    const char *path = tmp_path("rt.safetensors");
    CHECK(write_fixture(path, 0) == 0);
    CHECK(!file_exists(tmp_path("rt.safetensors.tmp")));
    strata__ckpt_t *c = NULL;
    CHECK(strata__ckpt_read(path, &c) == 0);
    if (!c)
        return;
    strata__tensor_t want[6];
    fixture(want);
    CHECK(strata__ckpt_ntensors(c) == 6);
    for (int i = 0; i < 6 && i < strata__ckpt_ntensors(c); i++) {
        const strata__tensor_t *x = strata__ckpt_tensor(c, i);
        CHECKF(strcmp(x->name, want[i].name) == 0, "%d: %s", i, x->name);
        CHECK(strcmp(x->dtype, want[i].dtype) == 0);
        CHECK(x->ndim == want[i].ndim);
        CHECK(memcmp(x->shape, want[i].shape, sizeof(int64_t) * (size_t)x->ndim) == 0);
        CHECK(x->nbytes == want[i].nbytes);
        CHECK(x->data != NULL && ((uintptr_t)x->data & 15) == 0);
        CHECK(!x->nbytes || memcmp(x->data, want[i].data, x->nbytes) == 0);
        CHECK(strata__ckpt_find(c, want[i].name) == x);
    }
    CHECK(strata__ckpt_tensor(c, 6) == NULL && strata__ckpt_tensor(c, -1) == NULL);
    CHECK(strata__ckpt_find(c, "nope") == NULL);
    CHECK(strata__ckpt_nmeta(c) == 6);
    CHECK(strcmp(strata__ckpt_meta(c, "strata.format"), "1") == 0);
    CHECK(strcmp(strata__ckpt_meta(c, "epoch"), "3") == 0);
    CHECK(strcmp(strata__ckpt_meta(c, "rng"), "0123456789abcdef:42") == 0);
    CHECK(strata__ckpt_meta(c, "missing") == NULL);
    const strata__meta_t *m = strata__ckpt_meta_at(c, 4);
    CHECK(m && strcmp(m->key, "step") == 0 && strcmp(m->value, "120") == 0);
    CHECK(strata__ckpt_meta_at(c, 6) == NULL);
    /* strata.crc32c is the CRC of the data section, data section 8-aligned */
    size_t n;
    unsigned char *raw = read_all(path, &n);
    uint64_t h = 0;
    for (int i = 0; i < 8; i++)
        h |= (uint64_t)raw[i] << (8 * i);
    CHECK(h % 8 == 0 && h == strata__ckpt_header_len(c));
    CHECK(n == 8 + h + strata__ckpt_data_len(c));
    char hex[16];
    snprintf(hex, sizeof hex, "%08" PRIx32, strata__crc32c(0, raw + 8 + h, n - 8 - h));
    CHECK(strcmp(strata__ckpt_meta(c, "strata.crc32c"), hex) == 0);
    free(raw);
    strata__ckpt_free(c);
    strata__ckpt_free(NULL);

    /* An empty checkpoint (no tensors, no caller metadata) is valid too. */
    CHECK(strata__ckpt_write(path, NULL, 0, NULL, 0) == 0);
    CHECK(strata__ckpt_read(path, &c) == 0 && strata__ckpt_ntensors(c) == 0
          && strata__ckpt_nmeta(c) == 3);
    strata__ckpt_free(c);
    unlink(path);
}

/* ---- bad writes ---------------------------------------------------------- */

static void expect_bad_write(int line, strata__tensor_t *t, int nt,
                             const strata__meta_t *m, int nm, const char *word)
{
    const char *path = tmp_path("badw.safetensors");
    capture_begin();
    int rc = strata__ckpt_write(path, t, nt, m, nm);
    int lines = count_lines(capture_end());
    CHECKF(rc == STRATA_EINVAL, "line %d: rc %d", line, rc);
    CHECKF(lines == 1 && strstr(captured_, word), "line %d: %d lines: %s", line,
           lines, captured_);
    CHECKF(!file_exists(path), "line %d: file written", line);
}

static void test_bad_write(void)
{
    strata__tensor_t t[6];
    fill(0);
    fixture(t);
    t[1].name = "dense0/kernel";
    expect_bad_write(__LINE__, t, 6, NULL, 0, "duplicate tensor name 'dense0/kernel'");
    fixture(t);
    t[0].nbytes = 44;
    expect_bad_write(__LINE__, t, 6, NULL, 0, "nbytes");
    fixture(t);
    t[2].dtype = "F128";
    expect_bad_write(__LINE__, t, 6, NULL, 0, "unknown dtype");
    fixture(t);
    t[0].shape[0] = -3;
    expect_bad_write(__LINE__, t, 6, NULL, 0, "shape");
    fixture(t);
    t[0].ndim = 5;
    expect_bad_write(__LINE__, t, 6, NULL, 0, "rank");
    fixture(t);
    t[0].name = "__metadata__";
    expect_bad_write(__LINE__, t, 6, NULL, 0, "reserved");
    fixture(t);
    t[0].name = "bad\xff";
    expect_bad_write(__LINE__, t, 6, NULL, 0, "UTF-8");
    fixture(t);
    strata__meta_t m[2] = { { "strata.crc32c", "00000000" }, { "a", "b" } };
    expect_bad_write(__LINE__, t, 6, m, 2, "reserved");
    m[0].key = "a";
    expect_bad_write(__LINE__, t, 6, m, 2, "duplicate metadata key 'a'");
    m[0].key = "x";
    m[1].value = NULL;
    expect_bad_write(__LINE__, t, 6, m, 2, "NULL");
    /* Missing directory: STRATA_ENOENT, one line naming the file. */
    capture_begin();
    int rc = strata__ckpt_write(tmp_path("no/such/dir.safetensors"), t, 6, NULL, 0);
    int lines = count_lines(capture_end());
    CHECK(rc == STRATA_ENOENT && lines == 1 && strstr(captured_, "dir.safetensors"));
}

/* ---- bad reads ----------------------------------------------------------- */

/* Reading `path` fails with `rc` and exactly one log line naming the file
 * and holding `word`; nothing returned; no request above max_alloc. */
static void expect_fail_(int line, const char *path, int want, const char *word,
                         size_t max_alloc)
{
    strata__ckpt_t *c = (strata__ckpt_t *)&c;   /* must be reset to NULL */
    biggest_ = 0;
    capture_begin();
    int rc = strata__ckpt_read(path, &c);
    int lines = count_lines(capture_end());
    CHECKF(rc == want, "line %d: rc %d, want %d", line, rc, want);
    CHECKF(c == NULL, "line %d: *out not NULL", line);
    CHECKF(lines == 1, "line %d: %d log lines: %s", line, lines, captured_);
    CHECKF(strstr(captured_, base_of(path)) != NULL, "line %d: file not named: %s",
           line, captured_);
    CHECKF(!word || strstr(captured_, word) != NULL, "line %d: no '%s' in: %s", line,
           word, captured_);
    CHECKF(biggest_ <= max_alloc, "line %d: allocated %zu bytes", line, biggest_);
    if (rc == 0)
        strata__ckpt_free(c);
}
#define expect_fail(path, rc, word) expect_fail_(__LINE__, path, rc, word, 1 << 16)

static unsigned char img_[1 << 16];

/* A hand-made file: header text (length as given, or a lie), ndata bytes. */
static const char *craft(const char *header, uint64_t hlen_lie, size_t ndata)
{
    const char *path = tmp_path("crafted.safetensors");
    write_file(path, img_, st_image(img_, header, hlen_lie, ndata));
    return path;
}

static void expect_ok(int line, const char *header, size_t ndata, int ntensors)
{
    strata__ckpt_t *c = NULL;
    capture_begin();
    int rc = strata__ckpt_read(craft(header, 0, ndata), &c);
    int lines = count_lines(capture_end());
    CHECKF(rc == 0 && lines == 0 && strata__ckpt_ntensors(c) == ntensors,
           "line %d: rc %d: %s", line, rc, captured_);
    strata__ckpt_free(c);
}

#define U8(name, n, b, e) "\"" name "\":{\"dtype\":\"U8\",\"shape\":[" #n "]," \
    "\"data_offsets\":[" #b "," #e "]}"

static void test_crafted(void)
{
    /* Valid corner cases: no tensors, padding, order in the file != header
     * order, empty tensors sharing an offset, other writers' files. */
    expect_ok(__LINE__, "{}", 0, 0);
    expect_ok(__LINE__, "{}      ", 0, 0);
    expect_ok(__LINE__, "{" U8("b", 4, 4, 8) "," U8("a", 4, 0, 4) "}", 8, 2);
    expect_ok(__LINE__, "{" U8("a", 0, 0, 0) "," U8("b", 4, 0, 4) ","
              U8("c", 0, 4, 4) "}", 4, 3);
    expect_ok(__LINE__, "{\"__metadata__\":{\"format\":\"pt\"}," U8("\xc3\xa9", 2, 0, 2)
              "}", 2, 1);

    /* Header length lies. */
    expect_fail(craft("{}", 3, 0), STRATA_EDATA, "exceeds the file");
    expect_fail(craft("{}", (uint64_t)1 << 63, 0), STRATA_EDATA, "limit");
    expect_fail(craft("{}", UINT64_MAX, 0), STRATA_EDATA, "limit");
    expect_fail(craft("{}", 100000001, 0), STRATA_EDATA, "limit");
    expect_fail(craft("", 0, 0), STRATA_EDATA, "too short");
    write_file(tmp_path("short.safetensors"), "\x02\0\0", 3);
    expect_fail(tmp_path("short.safetensors"), STRATA_EDATA, "too short");

    /* Not a JSON object / not JSON / trailing bytes / not UTF-8. */
    expect_fail(craft("[1, 2]", 0, 0), STRATA_EDATA, "not a JSON object");
    expect_fail(craft("\"str\"", 0, 0), STRATA_EDATA, "not a JSON object");
    expect_fail(craft("1234", 0, 0), STRATA_EDATA, "not a JSON object");
    expect_fail(craft("  {}", 0, 0), STRATA_EDATA, "not a JSON object");
    expect_fail(craft("{\"a\":", 0, 0), STRATA_EDATA, "not valid JSON");
    expect_fail(craft("{\"a\\u00", 0, 0), STRATA_EDATA, "not valid JSON");
    expect_fail(craft("{\"a\\ud800\\u", 0, 0), STRATA_EDATA, "not valid JSON");
    expect_fail(craft("{} x", 0, 0), STRATA_EDATA, "after the JSON");
    expect_fail(craft("{}{}", 0, 0), STRATA_EDATA, "after the JSON");
    expect_fail(craft("{\"\xc3\x28\":1}", 0, 0), STRATA_EDATA, "UTF-8");
    expect_fail(craft("{\"\xed\xa0\x80\":1}", 0, 0), STRATA_EDATA, "UTF-8");
    memcpy(img_ + 8, "{\"a\0\":1}", 8);     /* a NUL byte in the header */
    for (int i = 0; i < 8; i++)
        img_[i] = i ? 0 : 8;
    write_file(tmp_path("nul.safetensors"), img_, 16);
    expect_fail(tmp_path("nul.safetensors"), STRATA_EDATA, "UTF-8");

    /* Tensor entries. */
    expect_fail(craft("{\"a\":3}", 0, 0), STRATA_EDATA, "not an object");
    expect_fail(craft("{\"a\":{\"dtype\":\"F17\",\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4),
                STRATA_EDATA, "unknown dtype 'F17'");
    expect_fail(craft("{\"a\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4),
                STRATA_EDATA, "unknown dtype");
    expect_fail(craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 0, 4),
                STRATA_EDATA, "needs 8 bytes");
    expect_fail(craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 0, 4),
                STRATA_EDATA, "shape[0]");
    expect_fail(craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 0, 4),
                STRATA_EDATA, "shape[0]");
    expect_fail(craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,4]}}", 0, 4),
                STRATA_EDATA, "shape[0]");
    expect_fail(craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 0, 4),
                STRATA_EDATA, "shape[0]");
    expect_fail(craft("{\"a\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}", 0, 4),
                STRATA_EDATA, "not an array");
    expect_fail(craft("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,1]}}", 0, 1),
                STRATA_EDATA, "rank 5");
    expect_fail(craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,"
                      "4294967296],\"data_offsets\":[0,4]}}", 0, 4),
                STRATA_EDATA, "overflows");
    expect_fail(craft("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0]}}", 0, 4),
                STRATA_EDATA, "data_offsets");
    expect_fail(craft("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4,8]}}", 0, 4),
                STRATA_EDATA, "data_offsets");
    expect_fail(craft("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,4]}}", 0, 8),
                STRATA_EDATA, "end before begin");
    expect_fail(craft("{\"a\":{\"dtype\":\"U8\",\"shape\":[4]}}", 0, 4),
                STRATA_EDATA, "missing 'data_offsets'");
    expect_fail(craft("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4],"
                      "\"x\":1}}", 0, 4), STRATA_EDATA, "unknown key 'x'");
    expect_fail(craft("{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[4],"
                      "\"data_offsets\":[0,4]}}", 0, 4), STRATA_EDATA, "duplicate key");
    /* Offsets out of range, with sizes that would be huge to allocate. */
    expect_fail(craft("{" U8("a", 4, 0, 4) "}", 0, 2), STRATA_EDATA, "beyond the data");
    expect_fail(craft("{" U8("a", 4000000000000, 0, 4000000000000) "}", 0, 16),
                STRATA_EDATA, "beyond the data");
    expect_fail(craft("{\"a\":{\"dtype\":\"F64\",\"shape\":[1125899906842624],"
                      "\"data_offsets\":[0,9007199254740992]}}", 0, 16),
                STRATA_EDATA, "data_offsets");
    /* Tiling: overlap, gap inside, gap at the end, duplicate names. */
    expect_fail(craft("{" U8("a", 4, 0, 4) "," U8("b", 4, 2, 6) "}", 0, 6),
                STRATA_EDATA, "overlap");
    expect_fail(craft("{" U8("a", 4, 0, 4) "," U8("b", 4, 0, 4) "}", 0, 4),
                STRATA_EDATA, "overlap");
    expect_fail(craft("{" U8("a", 4, 0, 4) "," U8("b", 4, 5, 9) "}", 0, 9),
                STRATA_EDATA, "gap");
    expect_fail(craft("{" U8("a", 4, 1, 5) "}", 0, 5), STRATA_EDATA, "gap");
    expect_fail(craft("{" U8("a", 4, 0, 4) "}", 0, 6), STRATA_EDATA, "gap");
    expect_fail(craft("{}", 0, 3), STRATA_EDATA, "gap");
    expect_fail(craft("{" U8("a", 4, 0, 4) "," U8("a", 4, 4, 8) "}", 0, 8),
                STRATA_EDATA, "duplicate tensor name 'a'");

    /* Metadata. */
    expect_fail(craft("{\"__metadata__\":[]}", 0, 0), STRATA_EDATA, "not an object");
    expect_fail(craft("{\"__metadata__\":{\"k\":1}}", 0, 0), STRATA_EDATA,
                "metadata 'k' is not a string");
    expect_fail(craft("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, 0), STRATA_EDATA,
                "duplicate metadata key 'k'");
    expect_fail(craft("{\"__metadata__\":{},\"__metadata__\":{}}", 0, 0), STRATA_EDATA,
                "duplicate __metadata__");
    expect_fail(craft("{\"__metadata__\":{\"strata.format\":\"2\"}}", 0, 0), STRATA_EDATA,
                "strata.format");
    expect_fail(craft("{\"__metadata__\":{\"strata.crc32c\":\"xyz\"}}", 0, 0), STRATA_EDATA,
                "strata.crc32c");
    expect_fail(craft("{\"__metadata__\":{\"strata.crc32c\":\"-0000001\"}}", 0, 0),
                STRATA_EDATA, "strata.crc32c");
    expect_fail(craft("{\"__metadata__\":{\"strata.crc32c\":\"0x000001\"}}", 0, 0),
                STRATA_EDATA, "strata.crc32c");
    expect_fail(craft("{\"__metadata__\":{\"strata.crc32c\":\"000000001\"}}", 0, 0),
                STRATA_EDATA, "strata.crc32c");
    expect_fail(craft("{\"__metadata__\":{\"strata.format\":\"1\"}}", 0, 0),
                STRATA_EDATA, "strata.crc32c is missing");
    expect_fail(craft("{\"__metadata__\":{\"strata.crc32c\":\"0000000A\"}}", 0, 0),
                STRATA_EDATA, "says 0000000a");
    expect_fail(craft("{\"__metadata__\":{\"strata.crc32c\":\"00000001\"}}", 0, 0),
                STRATA_EDATA, "crc mismatch");
    expect_fail(craft("{\"__metadata__\":{\"strata.format\":\"1\",\"strata.crc32c\":"
                      "\"00000000\"}}", 0, 0),
                STRATA_EDATA, "strata.header_crc32c is missing");
    expect_fail(craft("{\"__metadata__\":{\"strata.header_crc32c\":\"xyz\"}}", 0, 0),
                STRATA_EDATA, "strata.header_crc32c 'xyz' is not 8 hex digits");

    /* Not a file / no file. A FIFO at a checkpoint's name is refused at
     * once, not waited on (alarm: a read that blocks fails the test). */
    expect_fail(tmpdir_, STRATA_EDATA, "not a regular file");
    const char *fifo = tmp_path("fifo.safetensors");
    CHECK(mkfifo(fifo, 0600) == 0);
    alarm(20);
    expect_fail(fifo, STRATA_EDATA, "not a regular file");
    alarm(0);
    unlink(fifo);
    expect_fail(tmp_path("missing.safetensors"), STRATA_ENOENT, "cannot open");
}

/* Names, dtypes, shapes and metadata as write_fixture wrote them. */
static int same_as_fixture(const strata__ckpt_t *c)
{
    strata__tensor_t want[6];
    fixture(want);
    if (strata__ckpt_ntensors(c) != 6 || strata__ckpt_nmeta(c) != 6)
        return 0;
    for (int i = 0; i < 6; i++) {
        const strata__tensor_t *x = strata__ckpt_find(c, want[i].name);
        if (!x || strcmp(x->dtype, want[i].dtype) || x->ndim != want[i].ndim
            || memcmp(x->shape, want[i].shape, sizeof x->shape))
            return 0;
    }
    static const char *const keys[] = { "strata.format", "strata.crc32c",
                                        "strata.header_crc32c", "epoch", "step",
                                        "rng" };
    for (int i = 0; i < 6; i++)
        if (!strata__ckpt_meta(c, keys[i]))
            return 0;
    for (int i = 0; i < 3; i++)
        if (strcmp(strata__ckpt_meta(c, meta_[i].key), meta_[i].value))
            return 0;
    return strcmp(strata__ckpt_meta(c, "strata.format"), "1") == 0;
}

/* Flip one data byte: crc mismatch. Flip each header byte: refused, or read
 * as a visibly different checkpoint; never a crash. Cut at every length:
 * refused. */
static void test_corruption(void)
{
    const char *good = tmp_path("good.safetensors"), *bad = tmp_path("bad.safetensors");
    CHECK(write_fixture(good, 0) == 0);
    size_t n;
    unsigned char *raw = read_all(good, &n);
    uint64_t h = 0;
    for (int i = 0; i < 8; i++)
        h |= (uint64_t)raw[i] << (8 * i);

    raw[n - 20] ^= 0x10;
    write_file(bad, raw, n);
    expect_fail(bad, STRATA_EDATA, "crc mismatch");
    raw[n - 20] ^= 0x10;

    int refused = 0, accepted = 0, quiet = 1;
    for (size_t i = 8; i < 8 + h; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            raw[i] ^= (unsigned char)(1u << bit);
            write_file(bad, raw, n);
            raw[i] ^= (unsigned char)(1u << bit);
            strata__ckpt_t *c = NULL;
            capture_begin();
            int rc = strata__ckpt_read(bad, &c);
            int lines = count_lines(capture_end());
            if (rc) {
                refused++;
                quiet &= rc == STRATA_EDATA && lines == 1 && c == NULL;
                continue;
            }
            accepted++;
            /* Accepted: some name or metadata string changed (a flipped
             * letter), which the caller sees as a missing tensor or key. */
            CHECKF(!same_as_fixture(c), "header byte %zu bit %d: accepted unchanged",
                   i, bit);
            strata__ckpt_free(c);
        }
    }
    /* strata.header_crc32c covers every name, shape and metadata value: no
     * flip goes through. */
    CHECK(refused > 0 && quiet && accepted == 0);
    printf("header bit flips: %d refused, %d read as a different checkpoint\n",
           refused, accepted);

    /* Edits that keep the JSON valid: the header's checksum catches them. */
    char *hdr = (char *)raw + 8, *at = memmem(hdr, h, "\"epoch\":\"3\"", 11);
    CHECK(at != NULL);
    if (at) {
        at[9] = '4';                   /* resume from another epoch */
        write_file(bad, raw, n);
        expect_fail(bad, STRATA_EDATA, "header crc mismatch");
        at[9] = '3';
    }
    char *k = memmem(hdr, h, "\"cube\":{", 8), *e = memmem(hdr, h, "\"step\":{", 8);
    CHECK(k && e);
    if (k && e) {                      /* two names swapped */
        memcpy(k, "\"step\"", 6);
        memcpy(e, "\"cube\"", 6);
        write_file(bad, raw, n);
        expect_fail(bad, STRATA_EDATA, "header crc mismatch");
        memcpy(k, "\"cube\"", 6);
        memcpy(e, "\"step\"", 6);
    }

    int cut_ok = 1;
    for (size_t len = 0; len < n; len++) {
        write_file(bad, raw, len);
        strata__ckpt_t *c = NULL;
        biggest_ = 0;
        capture_begin();
        int rc = strata__ckpt_read(bad, &c);
        int lines = count_lines(capture_end());
        if (rc != STRATA_EDATA || c || lines != 1 || biggest_ > n + 1024) {
            CHECKF(0, "cut at %zu: rc %d, %d lines, alloc %zu", len, rc, lines, biggest_);
            cut_ok = 0;
            break;
        }
    }
    CHECK(cut_ok);
    free(raw);
    unlink(good);
    unlink(bad);
}

/* ---- crash safety -------------------------------------------------------- */

static void crash_writer(const char *stage, const char *path)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("STRATA_TEST_CKPT_CRASH", stage, 1);
        write_fixture(path, 7);      /* different content than the old file */
        _exit(0);                    /* the hook did not fire */
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 99, "%s: child status %d", stage, st);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)pid);
    long full = file_size(path);
    long part = file_size(tmp);
    CHECKF(part > 0, "%s: no temp file %s", stage, tmp);
    if (strcmp(stage, "mid_write") == 0)
        CHECKF(part == full / 2, "%s: temp has %ld of %ld bytes", stage, part, full);
    else
        CHECK(part == full);

    /* The old checkpoint is intact and is what _latest finds. */
    strata__ckpt_t *c = NULL;
    CHECK(strata__ckpt_read(path, &c) == 0);
    const strata__tensor_t *x = strata__ckpt_find(c, "bytes");
    CHECK(x && ((const uint8_t *)x->data)[0] == 200);
    strata__ckpt_free(c);
    char found[600];
    capture_begin();
    int rc = strata__ckpt_latest(tmpdir_, &c, found, sizeof found);
    int lines = count_lines(capture_end());
    CHECK(rc == 0 && lines == 0 && strcmp(found, path) == 0);
    strata__ckpt_free(c);

    /* The writer is dead: rotation removes its temp file, keeps the rest. */
    CHECK(strata__ckpt_rotate(tmpdir_, 0) == 0);
    CHECK(!file_exists(tmp) && file_exists(path));
}

static void test_crash(void)
{
    char path[512];
    CHECK(strata__ckpt_path(tmpdir_, 50, path, sizeof path) == 0);
    CHECK(write_fixture(path, 0) == 0);
    crash_writer("mid_write", path);
    crash_writer("before_rename", path);
    unlink(path);
}

/* ---- directories ---------------------------------------------------------- */

static void test_path(void)
{
    char buf[64];
    CHECK(strata__ckpt_path("/d", 42, buf, sizeof buf) == 0
          && strcmp(buf, "/d/ckpt-0000000042.safetensors") == 0);
    CHECK(strata__ckpt_path("/d", 12345678901LL, buf, sizeof buf) == 0
          && strcmp(buf, "/d/ckpt-12345678901.safetensors") == 0);
    capture_begin();
    CHECK(strata__ckpt_path("/d", -1, buf, sizeof buf) == STRATA_EINVAL);
    CHECK(strata__ckpt_path("/d", 1, buf, 20) == STRATA_EINVAL);
    capture_end();
}

static void test_rotate_latest(void)
{
    char dir[300], p[600];
    snprintf(dir, sizeof dir, "%s/rot", tmpdir_);
    CHECK(mkdir(dir, 0755) == 0);
    strata__ckpt_t *c = (strata__ckpt_t *)&c;
    capture_begin();
    int rc = strata__ckpt_latest(dir, &c, p, sizeof p);
    int lines = count_lines(capture_end());
    CHECK(rc == STRATA_ENOENT && c == NULL && lines == 0);

    static const int64_t steps[] = { 3, 1, 100, 5, 10, 2 };
    for (int i = 0; i < 6; i++) {
        strata__ckpt_path(dir, steps[i], p, sizeof p);
        CHECK(write_fixture(p, (unsigned)i) == 0);
    }
    /* Not checkpoints: left alone. A live writer's temp file (ours): kept. */
    snprintf(p, sizeof p, "%s/notes.txt", dir);
    write_file(p, "x", 1);
    snprintf(p, sizeof p, "%s/ckpt-12.safetensors", dir);
    write_file(p, "x", 1);
    snprintf(p, sizeof p, "%s/ckpt-0000000200.safetensors.tmp.%ld", dir, (long)getpid());
    write_file(p, "x", 1);
    /* Another live process's (our parent's): kept too. */
    snprintf(p, sizeof p, "%s/ckpt-0000000201.safetensors.tmp.%ld", dir, (long)getppid());
    write_file(p, "x", 1);

    CHECK(strata__ckpt_rotate(dir, 3) == 0);
    const int64_t kept[] = { 5, 10, 100 }, gone[] = { 1, 2, 3 };
    for (int i = 0; i < 3; i++) {
        strata__ckpt_path(dir, kept[i], p, sizeof p);
        CHECKF(file_exists(p), "step %" PRId64 " removed", kept[i]);
        strata__ckpt_path(dir, gone[i], p, sizeof p);
        CHECKF(!file_exists(p), "step %" PRId64 " kept", gone[i]);
    }
    CHECK(file_exists(p) == 0);
    snprintf(p, sizeof p, "%s/notes.txt", dir);
    CHECK(file_exists(p));
    snprintf(p, sizeof p, "%s/ckpt-12.safetensors", dir);
    CHECK(file_exists(p));
    snprintf(p, sizeof p, "%s/ckpt-0000000200.safetensors.tmp.%ld", dir, (long)getpid());
    CHECK(file_exists(p));
    snprintf(p, sizeof p, "%s/ckpt-0000000201.safetensors.tmp.%ld", dir, (long)getppid());
    CHECK(file_exists(p));
    capture_begin();
    CHECK(strata__ckpt_rotate(dir, -1) == STRATA_EINVAL);
    CHECK(strata__ckpt_rotate(tmp_path("nodir"), 2) == STRATA_ENOENT);
    capture_end();

    /* Newest (100) intact: found, no log. */
    char found[600], want[600];
    CHECK(strata__ckpt_latest(dir, &c, found, sizeof found) == 0);
    strata__ckpt_path(dir, 100, want, sizeof want);
    CHECK(strcmp(found, want) == 0);
    strata__ckpt_free(c);

    /* Corrupt 100 (a data byte): one warning naming it, 10 is used. */
    size_t n;
    unsigned char *raw = read_all(want, &n);
    raw[n - 1] ^= 1;
    write_file(want, raw, n);
    free(raw);
    capture_begin();
    rc = strata__ckpt_latest(dir, &c, found, sizeof found);
    lines = count_lines(capture_end());
    strata__ckpt_path(dir, 10, want, sizeof want);
    CHECK(rc == 0 && strcmp(found, want) == 0);
    CHECKF(lines == 1 && strstr(captured_, "warning") && strstr(captured_,
           "ckpt-0000000100.safetensors") && strstr(captured_, "crc mismatch"),
           "%d lines: %s", lines, captured_);
    CHECK(c && strata__ckpt_find(c, "bytes")
          && ((const uint8_t *)strata__ckpt_find(c, "bytes")->data)[0] == 204);
    strata__ckpt_free(c);

    /* Truncate 10 as well: two warnings, 5 is used. path_out NULL is fine. */
    CHECK(truncate(want, 30) == 0);
    capture_begin();
    rc = strata__ckpt_latest(dir, &c, NULL, 0);
    lines = count_lines(capture_end());
    CHECK(rc == 0 && lines == 2 && strstr(captured_, "ckpt-0000000010.safetensors"));
    strata__ckpt_free(c);
    /* Too short a buffer for the path. */
    capture_begin();
    rc = strata__ckpt_latest(dir, &c, found, 8);
    capture_end();
    CHECK(rc == STRATA_EINVAL && c == NULL);
    /* All corrupt: EDATA after a warning for each (not a fresh start). */
    strata__ckpt_path(dir, 5, want, sizeof want);
    CHECK(truncate(want, 7) == 0);
    capture_begin();
    rc = strata__ckpt_latest(dir, &c, found, sizeof found);
    lines = count_lines(capture_end());
    CHECK(rc == STRATA_EDATA && c == NULL && lines == 3);
    CHECK(strata__ckpt_latest(tmp_path("nodir"), &c, NULL, 0) == STRATA_ENOENT);
    rm_tree(dir);
}

/* ---- inspect ------------------------------------------------------------- */

static void test_inspect(void)
{
    const char *path = tmp_path("insp.safetensors");
    float v[6] = { -1.0f, 0.5f, 2.5f, 1.0f, NAN, 0.0f };
    uint16_t bf[2] = { 0x3F80, 0xC000 };   /* 1.0, -2.0 */
    uint16_t hf[2] = { 0x3C00, 0x4200 };   /* 1.0, 3.0 */
    int64_t k[2] = { 7, 8 };
    strata__tensor_t t[] = {
        T("layer.w", "F32", 2, 2, 3, 0, v, sizeof v),
        T("bf", "BF16", 1, 2, 0, 0, bf, sizeof bf),
        T("hf", "F16", 1, 2, 0, 0, hf, sizeof hf),
        T("counts", "I64", 1, 2, 0, 0, k, sizeof k),
    };
    strata__meta_t m[] = { { "epoch", "3" } };
    CHECK(strata__ckpt_write(path, t, 4, m, 1) == 0);
    FILE *f = tmpfile();
    CHECK(strata__ckpt_inspect(path, f) == 0);
    rewind(f);
    char out[4096];
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = 0;
    fclose(f);
    if (getenv("STRATA_TEST_VERBOSE"))
        printf("%s", out);
    CHECKF(strstr(out, "4 tensors") && strstr(out, "layer.w") && strstr(out, "[2, 3]")
           && strstr(out, "min -1 max 2.5 mean 0.6") && strstr(out, "1 nan")
           && strstr(out, "min -2 max 1 mean -0.5") && strstr(out, "min 1 max 3 mean 2")
           && strstr(out, "epoch = 3") && strstr(out, "strata.format = 1"), "%s", out);
    const char *cl = strstr(out, "counts"), *nl = cl ? strchr(cl, '\n') : NULL;
    const char *mn = cl ? strstr(cl, "min") : NULL;
    CHECK(cl && nl && (!mn || mn > nl));   /* no stats for integers */

    CHECK(truncate(path, 40) == 0);
    f = tmpfile();
    capture_begin();
    int rc = strata__ckpt_inspect(path, f);
    int lines = count_lines(capture_end());
    CHECK(rc == STRATA_EDATA && lines == 1);
    fclose(f);
    unlink(path);
}

int main(void)
{
    tmp_make("ckpt");
    test_crc();
    test_round_trip();
    test_bad_write();
    test_crafted();
    test_corruption();
    test_crash();
    test_path();
    test_rotate_latest();
    test_inspect();
    tmp_cleanup();
    return CHECK_DONE();
}
