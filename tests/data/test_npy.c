/* core/data/npy.c and the .npy side of core/data/dataset.c: files of every
 * supported dtype and rank, written here byte by byte, load as they should;
 * every malformed file is refused with one line naming it and what is wrong,
 * holding nothing, and before any allocation larger than the file.
 * Linked with -Wl,--wrap=malloc,--wrap=free (as test_idx): the wrappers
 * count live blocks and record the largest request. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "data/data.h"
#include "data_util.h"
#include "malloc_count.h"

/* ---- writing .npy files ------------------------------------------------ */

static unsigned char buf_[1 << 16];

/* Magic, version major.minor, the header length (hlen_override when not
 * 0), `dict` padded with spaces so that the data starts at a multiple of
 * 64, then '\n', the payload and `extra` junk bytes. Returns the size. */
static size_t npy_build_v(int major, int minor, const char *dict,
                          const void *payload, size_t n, size_t extra,
                          uint32_t hlen_override)
{
    size_t pre = major == 1 ? 10 : 12, dl = strlen(dict);
    size_t hlen = dl + 1;
    while ((pre + hlen) % 64)
        hlen++;
    size_t k = 0;
    memcpy(buf_, "\x93NUMPY", 6);
    k = 6;
    buf_[k++] = (unsigned char)major;
    buf_[k++] = (unsigned char)minor;
    uint32_t hl = hlen_override ? hlen_override : (uint32_t)hlen;
    buf_[k++] = (unsigned char)hl;
    buf_[k++] = (unsigned char)(hl >> 8);
    if (major != 1) {
        buf_[k++] = (unsigned char)(hl >> 16);
        buf_[k++] = (unsigned char)(hl >> 24);
    }
    memcpy(buf_ + k, dict, dl);
    memset(buf_ + k + dl, ' ', hlen - dl - 1);
    buf_[k + hlen - 1] = '\n';
    k += hlen;
    if (n)
        memcpy(buf_ + k, payload, n);
    k += n;
    memset(buf_ + k, 0xAB, extra);
    return k + extra;
}

/* A well-formed version 1.0 file of `descr` and `shape` ("(5, 2, 3)"). */
static void write_npy(const char *path, const char *descr, const char *shape,
                      const void *payload, size_t n)
{
    char dict[256];
    snprintf(dict, sizeof dict,
             "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr,
             shape);
    write_file(path, buf_, npy_build_v(1, 0, dict, payload, n, 0, 0));
}

static void write_raw(const char *path, size_t n)
{
    write_file(path, buf_, n);
}

/* ---- expectations --------------------------------------------------------- */

static int zeroed_npy(const strata__npy_t *a)
{
    static const strata__npy_t z;
    return memcmp(a, &z, sizeof z) == 0;
}

static void expect_npy_fail_(int line, const char *path, int role, int rc,
                             const char *word, size_t max_alloc)
{
    strata__npy_t a;
    memset(&a, 0x5A, sizeof a);
    long live0 = live_;
    capture_begin();
    biggest_ = 0;
    int got = strata__npy_read(path, role, &a);
    size_t big = biggest_;
    int lines = count_lines(capture_end());
    check_refused(line, path, got, rc, lines, captured_, word, live0, big,
                  max_alloc);
    CHECKF(zeroed_npy(&a), "line %d: out not zeroed", line);
}
#define expect_npy_fail(path, role, word) \
    expect_npy_fail_(__LINE__, path, role, STRATA_EDATA, word, 1024)

static void expect_load_fail_(int line, const char *img, const char *lab,
                              size_t limit, const char *word)
{
    strata__dataset_t d;
    memset(&d, 0x5A, sizeof d);
    long live0 = live_;
    capture_begin();
    int got = strata__dataset_load(img, lab, limit, &d);
    int lines = count_lines(capture_end());
    CHECKF(got == STRATA_EDATA, "line %d: got %s", line, strata_err_name(got));
    CHECKF(lines == 1, "line %d: %d log lines: %s", line, lines, captured_);
    CHECKF(strstr(captured_, word) != NULL, "line %d: no '%s' in: %s", line,
           word, captured_);
    CHECK(d.images == NULL && d.images_f32 == NULL && d.labels == NULL &&
          d.n == 0);
    CHECKF(live_ == live0, "line %d: %ld blocks leaked", line, live_ - live0);
}
#define expect_load_fail(...) expect_load_fail_(__LINE__, __VA_ARGS__)

/* ---- valid files ----------------------------------------------------------- */

/* 5 images of 2 x 3, labels {0, 3, 1, 2, 3} (as test_dataset). */
static const uint8_t img_px[30] = {
    0, 1, 2, 3, 4, 5,   10, 11, 12, 13, 14, 15,   20, 21, 22, 23, 24, 25,
    30, 31, 32, 33, 34, 255,   40, 41, 42, 43, 44, 128 };
static const uint8_t lab_v[5] = { 0, 3, 1, 2, 3 };

static void test_reader(void)
{
    const char *p = tmp_path("u8.npy");
    write_npy(p, "|u1", "(5, 2, 3)", img_px, sizeof img_px);
    strata__npy_t a;
    CHECK(strata__npy_read(p, STRATA__NPY_IMAGES, &a) == 0);
    CHECK(a.type == STRATA__NPY_U1 && a.elem == 1 && a.ndim == 3);
    CHECK(a.dims[0] == 5 && a.dims[1] == 2 && a.dims[2] == 3);
    CHECK(a.file_items == 5 && a.count == 30);
    CHECK(memcmp(a.data, img_px, 30) == 0);
    strata__npy_free(&a);
    CHECK(zeroed_npy(&a));
    strata__npy_free(&a);
    strata__npy_free(NULL);

    /* Limited: only the first 2 items are held. */
    CHECK(strata__npy_read_first(p, STRATA__NPY_IMAGES, 2, &a) == 0);
    CHECK(a.dims[0] == 2 && a.file_items == 5 && a.count == 12);
    CHECK(memcmp(a.data, img_px, 12) == 0);
    strata__npy_free(&a);

    /* Versions 2.0 and 3.0 (4-byte header length), double-quoted keys, a
     * dict without the trailing comma, keys in another order, Python 2's
     * long suffix. */
    static const char *const dicts[] = {
        "{'descr': '|u1', 'fortran_order': False, 'shape': (5, 6), }",
        "{\"shape\": (5, 6), \"descr\": \"|u1\", \"fortran_order\": False}",
        "{'fortran_order': False, 'shape': (5L, 6L), 'descr': '|u1'}",
    };
    for (int v = 1; v <= 3; v++)
        for (int di = 0; di < 3; di++) {
            const char *q = tmp_path("ver.npy");
            write_file(q, buf_, npy_build_v(v, 0, dicts[di], img_px, 30, 0, 0));
            int rc = strata__npy_read(q, STRATA__NPY_ANY, &a);
            CHECKF(rc == 0 && a.ndim == 2 && a.dims[1] == 6 &&
                   memcmp(a.data, img_px, 30) == 0, "version %d dict %d", v,
                   di);
            strata__npy_free(&a);
        }

    /* 1-D arrays: "(5,)". */
    write_npy(p, "|u1", "(5,)", lab_v, 5);
    CHECK(strata__npy_read(p, STRATA__NPY_LABELS, &a) == 0);
    CHECK(a.ndim == 1 && a.dims[0] == 5 && a.count == 5);
    strata__npy_free(&a);

    CHECK(strata__data_is_npy("a/b.npy") && !strata__data_is_npy("x.gz") &&
          !strata__data_is_npy("npy") && !strata__data_is_npy("x.npy.gz"));
}

/* Labels {0, 3, 1, 2, 3} in every integer dtype. */
static void test_label_types(void)
{
    static const struct { const char *descr; size_t size; } t[] = {
        { "|u1", 1 }, { "|i1", 1 }, { "<i2", 2 }, { "<u2", 2 }, { "<i4", 4 },
        { "<u4", 4 }, { "<i8", 8 }, { "<u8", 8 },
    };
    const char *img = tmp_path("img.npy"), *lab = tmp_path("lab.npy");
    write_npy(img, "|u1", "(5, 2, 3)", img_px, 30);
    for (size_t k = 0; k < sizeof t / sizeof *t; k++) {
        unsigned char v[40] = { 0 };
        for (int i = 0; i < 5; i++)
            v[i * t[k].size] = lab_v[i];   /* little-endian */
        write_npy(lab, t[k].descr, "(5,)", v, 5 * t[k].size);
        strata__dataset_t d;
        int rc = strata__dataset_load(img, lab, 0, &d);
        CHECKF(rc == 0, "%s: %s", t[k].descr, strata_err_name(rc));
        if (rc)
            continue;
        int same = 1;
        for (int i = 0; i < 5; i++)
            same &= d.labels[i] == lab_v[i];
        CHECKF(same && d.nclasses == 4, "%s", t[k].descr);
        strata__dataset_free(&d);
        /* limited: the first 2, nclasses still from all */
        CHECK(strata__dataset_load(img, lab, 2, &d) == 0);
        CHECK(d.n == 2 && d.labels[1] == 3 && d.nclasses == 4);
        strata__dataset_free(&d);
    }
}

static void test_datasets(void)
{
    const char *img = tmp_path("img.npy"), *lab = tmp_path("lab.npy");
    write_npy(lab, "|u1", "(5,)", lab_v, 5);

    /* uint8, (n, h, w): as IDX, 1 channel, scaled by 1/255. */
    write_npy(img, "|u1", "(5, 2, 3)", img_px, 30);
    strata__dataset_t d;
    CHECK(strata__dataset_load(img, lab, 0, &d) == 0);
    CHECK(d.n == 5 && d.dim == 6 && d.rows == 2 && d.cols == 3 &&
          d.channels == 1 && d.images && !d.images_f32 && d.nclasses == 4);
    float x[5 * 12];
    int32_t y[5];
    strata__batch_fill(&d, NULL, 3, 2, x, y);
    CHECK(y[0] == 2 && y[1] == 3 && x[5] == 1.0f &&
          x[6 + 5] == 128 * (1.0f / 255.0f));
    strata__dataset_free(&d);

    /* uint8, (n, h, w, c) = (5, 1, 2, 3); flat (5, 6). */
    write_npy(img, "|u1", "(5, 1, 2, 3)", img_px, 30);
    CHECK(strata__dataset_load(img, lab, 0, &d) == 0);
    CHECK(d.n == 5 && d.dim == 6 && d.rows == 1 && d.cols == 2 &&
          d.channels == 3 && d.images);
    strata__dataset_free(&d);
    write_npy(img, "|u1", "(5, 6)", img_px, 30);
    CHECK(strata__dataset_load(img, lab, 0, &d) == 0);
    CHECK(d.n == 5 && d.dim == 6 && d.rows == 1 && d.cols == 6 &&
          d.channels == 0);
    strata__dataset_free(&d);

    /* float32 (5, 2, 1, 3): held as float, used unscaled. */
    float f[30];
    for (int i = 0; i < 30; i++)
        f[i] = (float)i * 0.5f - 3.0f;
    write_npy(img, "<f4", "(5, 2, 1, 3)", f, sizeof f);
    CHECK(strata__dataset_load(img, lab, 0, &d) == 0);
    CHECK(d.n == 5 && d.dim == 6 && d.rows == 2 && d.cols == 1 &&
          d.channels == 3 && !d.images && d.images_f32);
    CHECK(d.images_f32 && memcmp(d.images_f32, f, sizeof f) == 0);
    uint32_t perm[5] = { 4, 2, 0, 3, 1 };
    strata__batch_fill(&d, perm, 1, 3, x, y);   /* samples 2, 0, 3 */
    CHECK(y[0] == 1 && y[1] == 0 && y[2] == 2);
    CHECK(memcmp(x, f + 12, 6 * sizeof *f) == 0 &&
          memcmp(x + 6, f, 6 * sizeof *f) == 0 &&
          memcmp(x + 12, f + 18, 6 * sizeof *f) == 0);
    strata__dataset_free(&d);
    CHECK(!d.images_f32 && !d.labels);

    /* float32 (n, h, w) and flat; limit keeps the first samples. */
    write_npy(img, "<f4", "(5, 3, 2)", f, sizeof f);
    CHECK(strata__dataset_load(img, lab, 2, &d) == 0);
    CHECK(d.n == 2 && d.rows == 3 && d.cols == 2 && d.channels == 1);
    CHECK(memcmp(d.images_f32, f, 12 * sizeof *f) == 0);
    strata__dataset_t flat;
    write_npy(img, "<f4", "(5, 6)", f, sizeof f);
    CHECK(strata__dataset_load(img, lab, 0, &flat) == 0);
    CHECK(flat.channels == 0 && flat.dim == 6 && flat.images_f32);

    /* Train and test must agree on the shape and the type of a sample. */
    capture_begin();
    int rc = strata__dataset_check_pair(&d, &flat);
    int lines = count_lines(capture_end());
    CHECK(rc == STRATA_EDATA && lines == 1 &&
          strstr(captured_, "(6) float32") &&
          strstr(captured_, "(3, 2, 1) float32"));
    CHECK(strata__dataset_check_pair(&d, &d) == 0);
    strata__dataset_free(&flat);

    /* IDX images (uint8, the same shape) with .npy labels: may be mixed. */
    static const uint32_t dims[3] = { 5, 3, 2 };
    const char *idx = tmp_path("img-idx.gz");
    write_idx(idx, 3, dims, img_px, 1);
    strata__dataset_t u;
    CHECK(strata__dataset_load(idx, lab, 0, &u) == 0);
    CHECK(u.n == 5 && u.rows == 3 && u.cols == 2 && u.channels == 1 &&
          u.images);
    capture_begin();
    rc = strata__dataset_check_pair(&u, &d);
    lines = count_lines(capture_end());
    CHECK(rc == STRATA_EDATA && lines == 1 &&
          strstr(captured_, "(3, 2, 1) uint8") &&
          strstr(captured_, "must agree"));
    strata__dataset_free(&u);
    strata__dataset_free(&d);

    /* IDX rank 4 (n, rows, cols, channels). */
    static const uint32_t d4[4] = { 5, 1, 2, 3 };
    write_idx(idx, 4, d4, img_px, 0);
    CHECK(strata__dataset_load(idx, lab, 0, &u) == 0);
    CHECK(u.rows == 1 && u.cols == 2 && u.channels == 3 && u.dim == 6);
    strata__dataset_free(&u);
}

/* ---- malformed files ------------------------------------------------------- */

static void test_malformed(void)
{
    const char *p = tmp_path("bad.npy");
    const char *good = "{'descr': '|u1', 'fortran_order': False, "
                       "'shape': (5, 6), }";
    size_t n;

    /* Preamble: empty, magic, version, truncated. */
    write_raw(p, 0);
    expect_npy_fail(p, STRATA__NPY_ANY, "empty file");
    n = npy_build_v(1, 0, good, img_px, 30, 0, 0);
    buf_[1] = 'n';
    write_raw(p, n);
    expect_npy_fail(p, STRATA__NPY_ANY, "bad magic 93 6e");
    memcpy(buf_, "\x00\x00\x08\x03", 4);   /* an IDX file named .npy */
    write_raw(p, n);
    expect_npy_fail(p, STRATA__NPY_ANY, "not a .npy file");
    write_raw(p, 3);
    expect_npy_fail(p, STRATA__NPY_ANY, "too short");
    n = npy_build_v(4, 0, good, img_px, 30, 0, 0);
    write_raw(p, n);
    expect_npy_fail(p, STRATA__NPY_ANY, "version 4.0");
    n = npy_build_v(1, 1, good, img_px, 30, 0, 0);
    write_raw(p, n);
    expect_npy_fail(p, STRATA__NPY_ANY, "version 1.1");
    npy_build_v(1, 0, good, img_px, 30, 0, 0);
    write_raw(p, 9);
    expect_npy_fail(p, STRATA__NPY_ANY, "truncated .npy preamble");
    npy_build_v(2, 0, good, img_px, 30, 0, 0);
    write_raw(p, 11);
    expect_npy_fail(p, STRATA__NPY_ANY, "truncated .npy preamble");

    /* Header length: 0, past the file, over the bound; truncated header. */
    n = npy_build_v(1, 0, good, img_px, 30, 0, 0);
    buf_[8] = buf_[9] = 0;
    write_raw(p, n);
    expect_npy_fail(p, STRATA__NPY_ANY, "header length 0 is out of bounds");
    n = npy_build_v(1, 0, good, img_px, 30, 0, 4000);
    write_raw(p, n);
    expect_npy_fail(p, STRATA__NPY_ANY, "runs past the end of the file");
    n = npy_build_v(2, 0, good, img_px, 30, 0, 0xFFFFFFF0u);
    write_raw(p, n);
    expect_npy_fail(p, STRATA__NPY_ANY, "out of bounds");
    npy_build_v(1, 0, good, img_px, 30, 0, 0);
    write_raw(p, 40);
    expect_npy_fail(p, STRATA__NPY_ANY, "truncated header");

    /* The dict. */
    static const struct { const char *dict, *word; } bad_dicts[] = {
        { "['descr', '|u1']", "not a dict" },
        { "{'descr': '|u1', 'fortran_order': False}", "lacks 'shape'" },
        { "{'descr': '|u1', 'shape': (5, 6)}", "lacks 'fortran_order'" },
        { "{'fortran_order': False, 'shape': (5, 6)}", "lacks 'descr'" },
        { "{'descr': '|u1', 'fortran_order': False, 'shape': (5, 6), "
          "'extra': 1}", "unknown key 'extra'" },
        { "{'descr': '|u1', 'descr': '|u1', 'fortran_order': False, "
          "'shape': (5, 6)}", "'descr' given twice" },
        { "{'descr': '|u1' 'fortran_order': False, 'shape': (5, 6)}",
          "expected ',' or '}'" },
        { "{descr: '|u1', 'fortran_order': False, 'shape': (5, 6)}",
          "expected a quoted key" },
        { "{'descr' '|u1', 'fortran_order': False, 'shape': (5, 6)}",
          "expected ':' after 'descr'" },
        { "{'descr': [('a', '<f4')], 'fortran_order': False, "
          "'shape': (5,)}", "structured" },
        { "{'descr': '|u1', 'fortran_order': True, 'shape': (5, 6), }",
          "fortran_order is True" },
        { "{'descr': '|u1', 'fortran_order': 0, 'shape': (5, 6), }",
          "not True or False" },
        { "{'descr': '|u1', 'fortran_order': False, 'shape': [5, 6], }",
          "not a tuple" },
        { "{'descr': '|u1', 'fortran_order': False, 'shape': (5, -6), }",
          "bad 'shape' entry" },
        { "{'descr': '|u1', 'fortran_order': False, 'shape': (5 6), }",
          "bad 'shape' tuple" },
        { "{'descr': '|u1', 'fortran_order': False, "
          "'shape': (1, 1, 1, 1, 30), }", "more than 4 dimensions" },
        { "{'descr': '|u1', 'fortran_order': False, "
          "'shape': (99999999999999999999999, 6), }", "over 2^64" },
        { "{'descr': '|u1', 'fortran_order': False, 'shape': (5, 6), } x",
          "unexpected text after the dict" },
        { "{'descr': '|u1', 'fortran_order': False, 'shape': (), }",
          "scalar" },
        { "{'descr': '|u1', 'fortran_order': False, 'shape': (0, 6), }",
          "holds no data" },
        /* dtypes */
        { "{'descr': '>f4', 'fortran_order': False, 'shape': (5, 6), }",
          "big-endian dtype '>f4' is not supported" },
        { "{'descr': '<f8', 'fortran_order': False, 'shape': (5, 6), }",
          "unsupported dtype '<f8'" },
        { "{'descr': '<U10', 'fortran_order': False, 'shape': (5, 6), }",
          "unsupported dtype '<U10'" },
        { "{'descr': 'f4', 'fortran_order': False, 'shape': (5, 6), }",
          "lacks an explicit byte order" },
    };
    for (size_t i = 0; i < sizeof bad_dicts / sizeof *bad_dicts; i++) {
        write_raw(p, npy_build_v(1, 0, bad_dicts[i].dict, img_px, 30, 0, 0));
        size_t fails = (size_t)check_failed_;
        expect_npy_fail(p, STRATA__NPY_ANY, bad_dicts[i].word);
        if ((size_t)check_failed_ != fails)
            fprintf(stderr, "  (dict %zu: %s)\n", i, bad_dicts[i].dict);
    }
    /* A header without the final newline; a NUL in it. */
    n = npy_build_v(1, 0, good, img_px, 30, 0, 0);
    buf_[10 + (buf_[8] | buf_[9] << 8) - 1] = ' ';
    write_raw(p, n);
    expect_npy_fail(p, STRATA__NPY_ANY, "does not end with a newline");
    n = npy_build_v(1, 0, good, img_px, 30, 0, 0);
    buf_[10 + 50] = '\0';
    write_raw(p, n);
    expect_npy_fail(p, STRATA__NPY_ANY, "not printable ASCII");

    /* Shape against size: truncated, trailing bytes, a huge shape in a
     * tiny file (refused before any allocation of its size). */
    write_raw(p, npy_build_v(1, 0, good, img_px, 29, 0, 0));
    expect_npy_fail(p, STRATA__NPY_ANY, "truncated: shape (5, 6) of uint8 "
                    "is 30 bytes of data, file holds 29");
    write_raw(p, npy_build_v(1, 0, good, img_px, 30, 1, 0));
    expect_npy_fail(p, STRATA__NPY_ANY, "trailing bytes");
    write_raw(p, npy_build_v(1, 0, "{'descr': '<f4', 'fortran_order': "
                             "False, 'shape': (4000000000, 100000, 100000), }",
                             img_px, 30, 0, 0));
    expect_npy_fail(p, STRATA__NPY_ANY, "(4000000000, 100000, 100000) of float32 "
                    "declares over 2^64");
    write_raw(p, npy_build_v(1, 0, "{'descr': '|u1', 'fortran_order': "
                             "False, 'shape': (60000, 28, 28), }",
                             img_px, 30, 0, 0));
    expect_npy_fail(p, STRATA__NPY_ANY, "47040000 bytes of data, file holds "
                    "30");
    write_raw(p, npy_build_v(1, 0, "{'descr': '<i4', 'fortran_order': "
                             "False, 'shape': (5000000000,), }",
                             img_px, 30, 0, 0));
    expect_npy_fail(p, STRATA__NPY_ANY, "5000000000 items");

    /* Non-finite float32 values. */
    float f[6] = { 0.0f, 1.0f, 2.0f, 3.0f, NAN, 5.0f };
    write_npy(p, "<f4", "(2, 3)", f, sizeof f);
    expect_npy_fail_(__LINE__, p, STRATA__NPY_IMAGES, STRATA_EDATA,
                     "at sample 1 (element 1) is not finite", 1024);

    /* Roles: images and labels dtypes and ranks. */
    static const uint8_t zeros[40];
    write_npy(p, "<i4", "(5, 2)", zeros, 40);
    expect_npy_fail(p, STRATA__NPY_IMAGES, "images of dtype int32");
    write_npy(p, "|u1", "(30,)", img_px, 30);
    expect_npy_fail(p, STRATA__NPY_IMAGES, "images of shape (30,)");
    write_npy(p, "<f4", "(5,)", f, 20);
    expect_npy_fail(p, STRATA__NPY_LABELS, "labels of dtype float32");
    write_npy(p, "|u1", "(5, 1)", lab_v, 5);
    expect_npy_fail(p, STRATA__NPY_LABELS, "labels of shape (5, 1)");

    /* Not a regular file; missing. */
    expect_npy_fail_(__LINE__, tmpdir_, STRATA__NPY_ANY, STRATA_EIO,
                     "is a directory", 1024);
    expect_npy_fail_(__LINE__, tmp_path("nope.npy"), STRATA__NPY_ANY,
                     STRATA_ENOENT, "cannot open", 1024);
}

static void test_bad_datasets(void)
{
    const char *img = tmp_path("img.npy"), *lab = tmp_path("lab.npy");
    write_npy(img, "|u1", "(5, 2, 3)", img_px, 30);

    /* Labels out of range, negative, in several dtypes; named by index. */
    int64_t neg[5] = { 0, 1, -1, 2, 3 };
    write_npy(lab, "<i8", "(5,)", neg, sizeof neg);
    expect_load_fail(img, lab, 0, "label -1 at index 2 is out of range");
    expect_load_fail(img, lab, 2, "label -1 at index 2");
    int8_t neg8[5] = { 0, 1, 2, 3, -128 };
    write_npy(lab, "|i1", "(5,)", neg8, sizeof neg8);
    expect_load_fail(img, lab, 0, "label -128 at index 4");
    int16_t neg16[5] = { 0, -300, 2, 3, 4 };
    write_npy(lab, "<i2", "(5,)", neg16, sizeof neg16);
    expect_load_fail(img, lab, 0, "label -300 at index 1");
    uint64_t huge[5] = { 0, 1, UINT64_MAX, 3, 4 };
    write_npy(lab, "<u8", "(5,)", huge, sizeof huge);
    expect_load_fail(img, lab, 0, "label 18446744073709551615 at index 2 is "
                     "out of range (labels are class ids in [0, 2147483646])");
    int64_t over[5] = { 0, 1, 2, INT32_MAX, 4 };
    write_npy(lab, "<i8", "(5,)", over, sizeof over);
    expect_load_fail(img, lab, 0, "label 2147483647 at index 3");
    /* Any number of classes: 300 (wider than a byte), 70000 (wider than
     * 16 bits); nclasses from the largest. */
    uint16_t big16[5] = { 0, 1, 2, 3, 299 };
    write_npy(lab, "<u2", "(5,)", big16, sizeof big16);
    strata__dataset_t wide;
    CHECK(strata__dataset_load(img, lab, 0, &wide) == 0);
    CHECK(wide.nclasses == 300 && wide.labels[4] == 299 && wide.labels[3] == 3);
    strata__dataset_free(&wide);
    int32_t big32[5] = { 69999, 1, 2, 3, 4 };
    write_npy(lab, "<i4", "(5,)", big32, sizeof big32);
    CHECK(strata__dataset_load(img, lab, 0, &wide) == 0);
    CHECK(wide.nclasses == 70000 && wide.labels[0] == 69999);
    strata__dataset_free(&wide);

    /* Label count != image count, either way and under a limit. */
    write_npy(lab, "|u1", "(4,)", lab_v, 4);
    expect_load_fail(img, lab, 0, "holds 5 images but");
    expect_load_fail(img, lab, 2, "holds 4 labels");
    write_npy(lab, "|u1", "(5,)", lab_v, 5);
    write_npy(img, "|u1", "(6, 5)", img_px, 30);
    expect_load_fail(img, lab, 0, "holds 6 images but");

    /* A bad file in a pair: its own message, nothing held. */
    write_npy(img, ">f4", "(5, 6)", img_px, 30);
    expect_load_fail(img, lab, 0, "big-endian");
    write_npy(img, "|u1", "(5, 6)", img_px, 30);
    write_npy(lab, "<f4", "(5,)", img_px, 20);
    expect_load_fail(img, lab, 0, "labels of dtype float32");
}

int main(void)
{
    tmp_make("npy");
    test_reader();
    test_label_types();
    test_datasets();
    test_malformed();
    test_bad_datasets();
    tmp_cleanup();
    return CHECK_DONE();
}
