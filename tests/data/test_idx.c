/* core/data/idx.c: valid IDX files (raw and gzip) read back exactly; every
 * malformed one refused with the right code, one log line naming the file,
 * nothing held, and no allocation beyond the declared payload.
 *
 * Linked with -Wl,--wrap=malloc,--wrap=free: the wrappers count live blocks
 * and record the largest request, so "no leak" and "never allocated 4 GiB"
 * are checked in every build, not only under AddressSanitizer. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "data/data.h"
#include "data_util.h"
#include "malloc_count.h"

static int zeroed(const strata__idx_t *x)
{
    static const strata__idx_t z;
    return memcmp(x, &z, sizeof z) == 0;
}

/* Expect failure `rc` with exactly one log line holding the file's name and
 * `word`; nothing held, nothing leaked, no request above `max_alloc`. */
static void expect_fail_(int line, const char *path, size_t max_items,
                         int rc, const char *word, size_t max_alloc)
{
    strata__idx_t x;
    memset(&x, 0x5A, sizeof x);
    long live0 = live_;
    biggest_ = 0;
    capture_begin();
    int got = strata__idx_read_first(path, max_items, &x);
    int lines = count_lines(capture_end());
    check_refused(line, path, got, rc, lines, captured_, word, live0,
                  biggest_, max_alloc);
    CHECKF(zeroed(&x), "line %d: out not zeroed", line);
}
#define expect_fail(...) expect_fail_(__LINE__, __VA_ARGS__)

static uint8_t payload_[4096];

static void fill_payload(void)
{
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof payload_; i++) {
        x = x * 1103515245u + 12345u;   /* not compressible much */
        payload_[i] = (uint8_t)(x >> 23);
    }
}

static void test_valid(void)
{
    static const uint32_t d3[3] = { 3, 2, 2 }, d1[1] = { 7 }, d2[2] = { 4, 5 },
        d4[4] = { 2, 3, 4, 5 };
    for (int gz = 0; gz < 2; gz++) {
        const char *p3 = tmp_path(gz ? "v3.gz" : "v3");
        write_idx(p3, 3, d3, payload_, gz);
        strata__idx_t x;
        long live0 = live_;
        biggest_ = 0;
        CHECK(strata__idx_read(p3, &x) == 0);
        CHECK(x.type == 0x08 && x.ndim == 3);
        CHECK(x.dims[0] == 3 && x.dims[1] == 2 && x.dims[2] == 2);
        CHECK(x.file_items == 3 && x.count == 12);
        CHECK(x.data && memcmp(x.data, payload_, 12) == 0);
        CHECKF(biggest_ == 12, "gz %d: largest allocation %zu", gz, biggest_);
        strata__idx_free(&x);
        CHECK(zeroed(&x) && live_ == live0);
        strata__idx_free(&x);     /* twice: harmless */
        strata__idx_free(NULL);

        /* Only the first 2 items kept; file fully checked. */
        biggest_ = 0;
        CHECK(strata__idx_read_first(p3, 2, &x) == 0);
        CHECK(x.dims[0] == 2 && x.file_items == 3 && x.count == 8);
        CHECK(memcmp(x.data, payload_, 8) == 0);
        CHECK(biggest_ == 8);
        strata__idx_free(&x);
        /* A limit above the count keeps all. */
        CHECK(strata__idx_read_first(p3, 1000, &x) == 0);
        CHECK(x.dims[0] == 3 && x.count == 12);
        strata__idx_free(&x);

        const char *p1 = tmp_path(gz ? "v1.gz" : "v1");
        write_idx(p1, 1, d1, payload_ + 100, gz);
        CHECK(strata__idx_read(p1, &x) == 0);
        CHECK(x.ndim == 1 && x.dims[0] == 7 && x.count == 7);
        CHECK(memcmp(x.data, payload_ + 100, 7) == 0);
        strata__idx_free(&x);

        const char *p2 = tmp_path(gz ? "v2.gz" : "v2");
        write_idx(p2, 2, d2, payload_, gz);
        CHECK(strata__idx_read(p2, &x) == 0);
        CHECK(x.ndim == 2 && x.count == 20);
        strata__idx_free(&x);

        /* 4 dims, payload bigger than one read buffer of the scratch. */
        const char *p4 = tmp_path(gz ? "v4.gz" : "v4");
        write_idx(p4, 4, d4, payload_, gz);
        CHECK(strata__idx_read(p4, &x) == 0);
        CHECK(x.ndim == 4 && x.count == 120 && x.dims[3] == 5);
        CHECK(memcmp(x.data, payload_, 120) == 0);
        strata__idx_free(&x);
    }

    /* Large enough to cross the reader's chunking: 1 x 3000 x 1000. */
    static const uint32_t dl[3] = { 3000, 1000, 1 };
    uint8_t *big = malloc(3000000);
    for (size_t i = 0; i < 3000000; i++)
        big[i] = (uint8_t)(i * 7 + i / 1000);
    for (int gz = 0; gz < 2; gz++) {
        const char *p = tmp_path(gz ? "big.gz" : "big");
        write_idx(p, 3, dl, big, gz);
        strata__idx_t x;
        CHECK(strata__idx_read(p, &x) == 0);
        CHECK(x.count == 3000000 && memcmp(x.data, big, 3000000) == 0);
        strata__idx_free(&x);
        CHECK(strata__idx_read_first(p, 1500, &x) == 0);
        CHECK(x.count == 1500000 && memcmp(x.data, big, 1500000) == 0);
        strata__idx_free(&x);
        unlink(p);
    }
    free(big);
}

static void test_refused(void)
{
    unsigned char buf[8192];
    static const uint32_t d3[3] = { 3, 2, 2 };
    size_t n;

    expect_fail(tmp_path("does-not-exist.gz"), 0, STRATA_ENOENT, "cannot open",
                0);
    expect_fail(tmpdir_, 0, STRATA_EIO, "directory", 0);

    const char *empty = tmp_path("empty");
    write_bytes(empty, buf, 0, 0);
    expect_fail(empty, 0, STRATA_EDATA, "empty", 0);

    for (int gz = 0; gz < 2; gz++) {
#define P(name) tmp_path(gz ? name ".gz" : name)
        const char *p;

        n = idx_build(buf, 0x08, 3, d3, payload_, 12, 0);
        buf[0] = 0x01;
        write_bytes(p = P("magic"), buf, n, gz);
        expect_fail(p, 0, STRATA_EDATA, "bad magic", 0);

        n = idx_build(buf, 0x0D, 3, d3, payload_, 48, 0);
        write_bytes(p = P("float"), buf, n, gz);
        expect_fail(p, 0, STRATA_EDATA, "unsupported element type 0x0d", 0);
        n = idx_build(buf, 0x07, 3, d3, payload_, 12, 0);
        write_bytes(p = P("type7"), buf, n, gz);
        expect_fail(p, 0, STRATA_EDATA, "unknown element type 0x07", 0);

        static const uint32_t d5[5] = { 1, 1, 1, 1, 1 };
        n = idx_build(buf, 0x08, 0, d5, payload_, 1, 0);
        write_bytes(p = P("ndim0"), buf, n, gz);
        expect_fail(p, 0, STRATA_EDATA, "0 dimensions", 0);
        n = idx_build(buf, 0x08, 5, d5, payload_, 1, 0);
        write_bytes(p = P("ndim5"), buf, n, gz);
        expect_fail(p, 0, STRATA_EDATA, "5 dimensions", 0);

        static const uint32_t dz[3] = { 3, 0, 2 };
        n = idx_build(buf, 0x08, 3, dz, payload_, 0, 0);
        write_bytes(p = P("zerodim"), buf, n, gz);
        expect_fail(p, 0, STRATA_EDATA, "dimension 2 of 3 is 0", 0);

        /* Header cut inside the dims. */
        n = idx_build(buf, 0x08, 3, d3, payload_, 0, 0);
        write_bytes(p = P("shorthdr"), buf, 10, gz);
        expect_fail(p, 0, STRATA_EDATA, "truncated IDX header", 0);

        /* 4 GiB declared (65536 x 65536), 5 bytes present: refused before
         * any allocation. So is a product that overflows 64 bits. */
        static const uint32_t dh[2] = { 65536, 65536 };
        n = idx_build(buf, 0x08, 2, dh, payload_, 5, 0);
        write_bytes(p = P("huge"), buf, n, gz);
        expect_fail(p, 0, STRATA_EDATA, "65536 x 65536 = 4294967296 bytes", 0);
        static const uint32_t dx[4] = { UINT32_MAX, UINT32_MAX, UINT32_MAX,
                                        UINT32_MAX };
        n = idx_build(buf, 0x08, 4, dx, payload_, 5, 0);
        write_bytes(p = P("overflow"), buf, n, gz);
        expect_fail(p, 0, STRATA_EDATA, "over 2^64 bytes", 0);
        /* Just over 1 GiB is refused too. */
        static const uint32_t dg[2] = { 1024 * 1024 + 1, 1024 };
        n = idx_build(buf, 0x08, 2, dg, payload_, 5, 0);
        write_bytes(p = P("over1g"), buf, n, gz);
        expect_fail(p, 0, STRATA_EDATA, "limit of 1024 MiB", 0);

        /* Payload shorter than declared: 12 declared, 5 present. Raw
         * refuses before allocating; gzip allocates at most the 12. */
        n = idx_build(buf, 0x08, 3, d3, payload_, 5, 0);
        write_bytes(p = P("short"), buf, n, gz);
        expect_fail(p, 0, STRATA_EDATA,
                    "truncated: header says 12 bytes of data, file holds 5",
                    gz ? 12 : 0);
        /* Same with a limit: the kept part is whole, the rest is not. */
        n = idx_build(buf, 0x08, 3, d3, payload_, 9, 0);
        write_bytes(p = P("short2"), buf, n, gz);
        expect_fail(p, 1, STRATA_EDATA, "file holds 9", gz ? 4 : 0);

        /* Trailing bytes after the declared payload. */
        n = idx_build(buf, 0x08, 3, d3, payload_, 12, 3);
        write_bytes(p = P("trailing"), buf, n, gz);
        expect_fail(p, 0, STRATA_EDATA,
                    "trailing bytes: header says 12 bytes of data, file holds 15",
                    gz ? 12 : 0);
#undef P
    }

    /* A real gzip file cut short: in the middle of the deflate data, and
     * just before the 8-byte trailer (all data there, CRC missing). */
    static const uint32_t dk[2] = { 4, 1000 };
    const char *good = tmp_path("good.gz");
    write_idx(good, 2, dk, payload_, 1);
    size_t glen = 0;
    unsigned char *g = read_all(good, &glen);
    CHECK(g && glen > 2000);   /* the payload barely compresses */
    const char *cut = tmp_path("cut-middle.gz");
    write_bytes(cut, g, glen / 2, 0);
    expect_fail(cut, 0, STRATA_EDATA, "truncated: header says 4000 bytes", 4000);
    const char *cut2 = tmp_path("cut-trailer.gz");
    write_bytes(cut2, g, glen - 8, 0);
    expect_fail(cut2, 0, STRATA_EDATA, "trailer", 4000);
    const char *cut3 = tmp_path("cut-crc.gz");
    write_bytes(cut3, g, glen - 2, 0);
    expect_fail(cut3, 0, STRATA_EDATA, "truncated gzip stream", 4000);

    /* One corrupted byte in the middle of the compressed stream: zlib's
     * data or CRC check catches it, whichever comes first. */
    unsigned char *bad = malloc(glen);
    memcpy(bad, g, glen);
    bad[glen / 2] ^= 0x55;
    const char *corrupt = tmp_path("corrupt.gz");
    write_bytes(corrupt, bad, glen, 0);
    expect_fail(corrupt, 0, STRATA_EDATA, "corrupt gzip data", 4000);
    /* A corrupted CRC alone (the data inflates fine). */
    memcpy(bad, g, glen);
    bad[glen - 6] ^= 0x01;
    const char *crc = tmp_path("crc.gz");
    write_bytes(crc, bad, glen, 0);
    expect_fail(crc, 0, STRATA_EDATA, "corrupt gzip data", 4000);
    /* A corrupted byte in the middle, read with a limit: the part kept is
     * fine, the rest is not; still refused. */
    memcpy(bad, g, glen);
    bad[glen / 2] ^= 0x55;
    write_bytes(corrupt, bad, glen, 0);
    expect_fail(corrupt, 1, STRATA_EDATA, "corrupt gzip data", 1000);
    free(bad);
    free(g);

    /* The good file itself reads fine (the cuts above are the only cause). */
    strata__idx_t x;
    CHECK(strata__idx_read(good, &x) == 0 && x.count == 4000);
    strata__idx_free(&x);
}

int main(void)
{
    tmp_make("data");
    fill_payload();
    test_valid();
    test_refused();
    tmp_cleanup();
    return CHECK_DONE();
}
